"""EleutherAI's lm-evaluation-harness on a tinygpt checkpoint (tinygpt/analysis/harness.py), offline, on a local
multiple-choice task in HellaSwag's format (a context, four endings, the label): the harness's per-choice
log-likelihoods are tinygpt's own, and its accuracy is the argmax of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from tinygpt.analysis.harness import run_tasks  # noqa: E402
from tinygpt.api import load, score_continuation  # noqa: E402
from tinygpt.train.run import train  # noqa: E402

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
ITEMS = [
    {"ctx": "the time traveller", "endings": [" was here", " zzqx", " morlocks", " qqq"], "label": 0},
    {"ctx": "he said that the", "endings": [" future", " time", " xx", " vv"], "label": 1},
    {"ctx": "we went", "endings": [" home", " to the time", " kk", " and then"], "label": 3},
    {"ctx": "the machine  ", "endings": ["was", "stood", "qz", "is here"], "label": 1},  # trailing spaces move
    {"ctx": "in the", "endings": [" morning", " evening", " night", " machine"], "label": 2},
]


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    """A HellaSwag-shaped task: its JSONL and its YAML (HF datasets' json builder, read offline)."""
    folder = tmp_path_factory.mktemp("tasks")
    (folder / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    (folder / "tiny_hellaswag.yaml").write_text(
        "task: tiny_hellaswag\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {folder / 'items.jsonl'}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        'doc_to_text: "{{ctx}}"\n'
        'doc_to_target: "{{label}}"\n'
        'doc_to_choice: "{{endings}}"\n'
        "target_delimiter: ''\n"
        "metric_list:\n  - metric: acc\n"
    )
    return folder


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, small_corpus) -> Path:
    from conftest import TINY_RUN, compose_train

    folder = tmp_path_factory.mktemp("run") / "model=tiny,seed=0"
    train(compose_train([*TINY_RUN, "data=textfile", f"data.path={small_corpus}", "trainer.max_steps=8"]), folder)
    return folder


def test_the_harness_scores_each_choice_as_tinygpt_does_and_its_accuracy_is_their_argmax(run_dir, task_dir):
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    output = run_tasks(run_dir, ["tiny_hellaswag"], include_path=str(task_dir), batch_size=3, log_samples=True)
    model, tokenizer = load(run_dir / "checkpoints" / "last.ckpt")
    samples = sorted(output["samples"]["tiny_hellaswag"], key=lambda s: s["doc_id"])
    assert len(samples) == len(ITEMS)
    correct = []
    for sample, item in zip(samples, ITEMS, strict=True):
        ours = [score_continuation(model, tokenizer, item["ctx"], ending) for ending in item["endings"]]
        theirs = [response[0][0] for response in sample["resps"]]
        assert theirs == pytest.approx(ours, abs=1e-5)
        correct.append(max(range(4), key=ours.__getitem__) == item["label"])
    accuracy = output["results"]["tiny_hellaswag"]["acc,none"]
    assert accuracy == pytest.approx(sum(correct) / len(correct))
    written = json.loads((run_dir / "lm_eval" / "tiny_hellaswag.json").read_text())
    assert written["results"]["acc,none"] == accuracy and written["checkpoint"].endswith("last.ckpt")


def test_the_console_command_takes_a_limit_and_the_report_shows_the_task(run_dir, task_dir, tmp_path):
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [str(BIN / "tinygpt-lm-eval"), str(run_dir), "tasks=tiny_hellaswag", f"include_path={task_dir}", "limit=2"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads((run_dir / "lm_eval" / "tiny_hellaswag.json").read_text())
    assert written["limit"] == 2 and written["n_samples"]["effective"] == 2
    assert "tiny_hellaswag" in done.stdout
    report = subprocess.run(
        [str(BIN / "tinygpt-report"), str(run_dir)], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert report.returncode == 0, report.stderr[-3000:]
    assert "tiny_hellaswag/acc" in (run_dir / "report.md").read_text()
    unknown = subprocess.run(
        [str(BIN / "tinygpt-lm-eval"), str(run_dir), "tasks=no_such_task"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert unknown.returncode == 2 and "tasks=no_such_task: no such lm-eval task" in unknown.stderr
