"""docs/python_api.md runs as written: every Python block of the page, in order, in one namespace, from an empty
folder; then what the blocks made is checked (the run's folder and record, the sample, the score, the Trainer)."""

from __future__ import annotations

import re

import pytest
from conftest import REPO, requires_data

PAGE = REPO / "docs" / "python_api.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


@requires_data
def test_every_block_of_the_python_api_page_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    found = blocks()
    assert len(found) == 4
    for block in found:
        exec(compile(block, str(PAGE), "exec"), namespace)
    record = namespace["record"]
    assert record["status"] == "finished" and record["step"] == 20
    assert (tmp_path / "runs" / "api_demo" / "run.json").is_file()
    assert (tmp_path / "runs" / "api_demo" / "checkpoints" / "last.ckpt").is_file()
    scored = namespace["scored"]
    assert scored["bytes"] == len("The Time Traveller smiled round at us. Then, still smiling faintly.") - 1
    assert 0 < scored["bits_per_byte"] < 10
    assert namespace["trainer"].global_step == 10
    out = capsys.readouterr().out
    assert "learned 20 timemachine" in out and "finished 20 " in out
    # the run's lines, tinygpt's and Lightning's, in its train.log as a command's run has them; its next steps
    # name the run's own folder
    log = (tmp_path / "runs" / "api_demo" / "train.log").read_text()
    assert "[tinygpt][INFO] - dev bits per byte at step 20:" in log and "`Trainer.fit` stopped" in log
    assert "  tensorboard --logdir runs/api_demo" in out and "--logdir outputs" not in out


def test_compose_reads_a_users_config_folder(tmp_path):
    from tinygpt.api import compose

    cfg = compose(["experiment=mine"], config_dir=REPO / "examples" / "my_conf")
    assert (cfg.name, cfg.model.d_model, cfg.model.n_layers, cfg.data.name) == ("mine", 256, 2, "shakespeare")
    assert cfg.optim.schedule == "cosine"
    with pytest.raises(FileNotFoundError, match="config_dir=.*no such folder"):
        compose([], config_dir=tmp_path / "absent")


def test_compose_checks_every_value_as_the_command_does():
    from tinygpt.api import compose
    from tinygpt.train.schema import ConfigError

    with pytest.raises(ConfigError, match=r"^seed=-1 is not allowed: must be an integer in \[0, 4294967296\)"):
        compose(["experiment=smoke", "seed=-1"])
    with pytest.raises(ConfigError, match=r"^GPTConfig\.n_heads=5 is not allowed"):
        compose(["experiment=smoke", "model.n_heads=5"])


def test_a_users_preset_is_checked_against_the_schema(tmp_path):
    from hydra.errors import ConfigCompositionException

    from tinygpt.api import compose

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "typo.yaml").write_text("defaults:\n  - schema\n  - _self_\nd_modle: 64\n")
    with pytest.raises(ConfigCompositionException) as failed:
        compose(["model=typo"], config_dir=tmp_path)
    assert "Key 'd_modle' not in 'GPTConfig'" in str(failed.value.__cause__ or failed.value)


def test_the_runs_log_is_written_after_a_program_disabled_the_loggers_in_this_process(tmp_path):
    """A tool run in-process with Hydra's job_logging=disabled (disable_existing_loggers: true) leaves tinygpt's
    logger disabled; a Python API run after it still writes its lines to its train.log."""
    import logging

    from tinygpt.common.say import log_file, say

    logger = logging.getLogger("tinygpt")
    lightning = logging.getLogger("lightning.pytorch.utilities.rank_zero")  # Lightning's own lines come from there
    logger.disabled = lightning.disabled = True
    try:
        with log_file(tmp_path / "train.log"):
            say("a line of the run")
            lightning.info("a line of Lightning's")
        log = (tmp_path / "train.log").read_text()
        assert "a line of the run" in log and "a line of Lightning's" in log
        assert logger.disabled and lightning.disabled  # as they were before the run
    finally:
        logger.disabled = lightning.disabled = False
