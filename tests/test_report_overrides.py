"""A sweep's command expands into the same job list as Hydra's basic sweeper made it, through Hydra's public
override parser only: commas, ranges, choice(), quoted values holding '=' or ',', +/++/~ prefixes, config
groups, lists, and sweeper.params merged with the command line (the command's value wins, in the params'
place). The expected lists were recorded from Hydra's own BasicSweeper.split_arguments (hydra-core 1.3.8)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tinygpt.report.jobs import sweep_command


def command(tmp_path: Path, task: list[str], params: dict | None = None) -> list[tuple[str, ...]]:
    (tmp_path / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "hydra": {
                    "overrides": {"task": task},
                    "sweeper": {"params": params or {}},
                    "job": {"config": {"override_dirname": {"exclude_keys": ["resume", "sweep.cpu_jobs"]}}},
                }
            }
        )
    )
    jobs, excluded = sweep_command(tmp_path)
    assert excluded == {"resume", "sweep.cpu_jobs"}
    return jobs


def test_commas_and_ranges_expand_in_launch_order(tmp_path):
    assert command(tmp_path, ["model.position=rope,learned", "seed=range(0,3)"]) == [
        ("model.position=rope", "seed=0"),
        ("model.position=rope", "seed=1"),
        ("model.position=rope", "seed=2"),
        ("model.position=learned", "seed=0"),
        ("model.position=learned", "seed=1"),
        ("model.position=learned", "seed=2"),
    ]


def test_quoted_checkpoint_names_keep_their_equals_signs(tmp_path):
    assert command(tmp_path, ["ckpt='checkpoints/step=000100.ckpt','checkpoints/step=000200.ckpt'", "split=test"]) == [
        ("ckpt='checkpoints/step=000100.ckpt'", "split=test"),
        ("ckpt='checkpoints/step=000200.ckpt'", "split=test"),
    ]
    assert command(tmp_path, ["x=choice(a,b)", "y=range(1,7,2)", "z=null", 'w="q=r"']) == [
        (f"x={x}", f"y={y}", "z=null", 'w="q=r"') for x in "ab" for y in (1, 3, 5)
    ]


def test_prefixes_groups_lists_and_quoted_commas(tmp_path):
    fixed = ("~model.bias=null", "++trainer.max_steps=20")
    assert command(
        tmp_path,
        [
            "+extra=1,2",
            "~model.bias",
            "++trainer.max_steps=20",
            "data/tokenizer=bpe,char",
            "trainer.devices=[0,1]",
            "sample.prompt='a, b'",
        ],
    ) == [
        (f"+extra={e}", *fixed, f"data/tokenizer={t}", "trainer.devices=[0,1]", "sample.prompt='a, b'")
        for e in (1, 2)
        for t in ("bpe", "char")
    ]


def test_sweeper_params_merge_with_the_command(tmp_path):
    assert command(tmp_path, ["seed=1,2"], {"seed": "3,4", "lr": "0.1,0.2"}) == [
        ("lr=0.1", "seed=1"),
        ("lr=0.1", "seed=2"),
        ("lr=0.2", "seed=1"),
        ("lr=0.2", "seed=2"),
    ]


def test_no_multirun_yaml_means_no_command(tmp_path):
    assert sweep_command(tmp_path) == ([], set())


def test_an_interval_sweep_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"lr=interval\(0.1,0.2\)"):
        command(tmp_path, ["lr=interval(0.1,0.2)"])
