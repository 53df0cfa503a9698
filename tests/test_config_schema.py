"""One typed config tree: a misspelled key or a wrong type fails when Hydra composes, naming the key.

Every group has a schema (model: GPTConfig or LSTMConfig by family, data: DataConfig, optim: OptimConfig,
sweep: SweepConfig) and so do the top-level keys (RunConfig, speed and the rest), all registered by
tinygpt.cli.config.register_configs() (conftest calls it, as every entry point does).
"""

import subprocess

import pytest
from conftest import PYTHON, compose_train
from hydra.errors import ConfigCompositionException

from tinygpt.train.schema import ConfigError, RunConfig, parse_run_config


def composition_error(overrides: list[str]) -> str:
    with pytest.raises(ConfigCompositionException) as err:
        compose_train(overrides)
    return f"{err.value} {err.value.__cause__}"


@pytest.mark.parametrize(
    "override, words",
    [
        # unknown keys, each group and the top level
        ("data.batch_sz=3", ["data.batch_sz", "DataConfig"]),
        ("data.tokenizer.vocab=3", ["data.tokenizer.vocab", "TokenizerConfig"]),
        ("model.n_layer=2", ["model.n_layer", "GPTConfig"]),
        ("optim.warmup=3", ["optim.warmup", "OptimConfig"]),
        ("sample.top_kk=3", ["sample.top_kk", "SampleConfig"]),
        ("checkpoint.every_n_step=3", ["checkpoint.every_n_step", "CheckpointConfig"]),
        ("sweep.cpu_job=2", ["sweep.cpu_job", "SweepConfig"]),
        ("speed.compiled=true", ["speed.compiled", "SpeedConfig"]),
        ("progress.styles=bar", ["progress.styles", "ProgressConfig"]),
        ("diagnostics.collapse=[1]", ["diagnostics.collapse", "DiagnosticsConfig"]),
        ("seeds=1", ["seeds"]),
        # wrong types
        ("seed=abc", ["seed=abc", "Integer"]),
        ("lr=fast", ["lr=fast", "Float"]),
        ("data.batch_size=abc", ["data.batch_size=abc", "Integer"]),
        ("data.test_documents=a.txt", ["data.test_documents"]),
        ("model.d_model=wide", ["model.d_model=wide", "Integer"]),
        ("model.qk_norm=sometimes", ["model.qk_norm=sometimes", "not a valid bool"]),
        ("optim.lr=x", ["optim.lr=x", "Float"]),
        ("sweep.cpu_jobs=many", ["sweep.cpu_jobs=many", "Integer"]),
        ("speed.loss_chunk=big", ["speed.loss_chunk=big", "Integer"]),
        ("speed.peak_flops=lots", ["speed.peak_flops=lots", "Float"]),
        ("progress.every_n_steps=x", ["progress.every_n_steps=x", "Integer"]),
        ("diagnostics.collapse_steps=[a]", ["diagnostics.collapse_steps", "Integer"]),
        ("checkpoint.keep_every_n_steps=often", ["checkpoint.keep_every_n_steps=often", "Integer"]),
    ],
)
def test_unknown_keys_and_wrong_types_fail_at_composition_naming_the_key(override, words):
    message = composition_error(["experiment=smoke", override])
    assert all(w in message for w in words), message


def test_the_lstm_family_has_its_own_schema():
    assert compose_train(["model=lstm"]).model.d_embed == 64
    message = composition_error(["model=lstm", "model.n_heads=4"])
    assert "model.n_heads" in message and "LSTMConfig" in message


def test_a_force_added_top_level_key_fails_before_the_run_naming_it():
    cfg = compose_train(["experiment=smoke", "+lr_peak=1"])  # `+` adds past the schema; the run check names it
    with pytest.raises(ConfigError, match="lr_peak is not a setting: the top-level keys are name, seed, lr"):
        parse_run_config(cfg)
    parse_run_config(compose_train(["experiment=smoke", "+trainer.gradient_clip_algorithm=value"]))


@pytest.mark.parametrize("corpus", ["timemachine", "shakespeare", "peps", "textfile", "textdir"])
def test_the_settings_every_corpus_shares_are_written_once_in_the_schema(corpus):
    data = compose_train([f"data={corpus}"]).data
    shared = {
        "root": None,
        "test_fraction": 0.1,
        "test_documents": [],
        "test_k": 2,
        "split_seed": 0,
        "dev_fraction": 0.1,
        "split_unit": "chars",
        "batch_size": 32,
        "eval_batch_size": 32,
    }
    assert {key: data[key] for key in shared} == shared
    assert data.name == corpus


def test_every_top_level_key_of_train_yaml_is_a_run_config_field():
    cfg = compose_train([])
    assert set(cfg) == set(RunConfig.__dataclass_fields__)


def test_importing_the_package_registers_nothing_and_register_configs_registers_all():
    """What a config is checked against and resolved with comes from the entry point's one call, never from an
    import: a fresh interpreter that imports every package of tinygpt (but no program) has no schema and no
    resolver; register_configs() then stores the run's schema and registers every launcher resolver."""
    code = (
        "import pkgutil, importlib, tinygpt\n"
        "from omegaconf import OmegaConf\n"
        "from hydra.core.config_store import ConfigStore\n"
        "for m in pkgutil.walk_packages(tinygpt.__path__, 'tinygpt.'):\n"
        "    if not m.name.startswith('tinygpt.cli'):\n"
        "        importlib.import_module(m.name)\n"
        "from tinygpt.launch.resolvers import RESOLVERS\n"
        "store = ConfigStore.instance().repo\n"
        "print(sorted(n for n in RESOLVERS if OmegaConf.has_resolver(n)), 'run_schema.yaml' in store)\n"
        "from tinygpt.cli.config import register_configs\n"
        "register_configs()\n"
        "print(sorted(n for n in RESOLVERS if OmegaConf.has_resolver(n)), 'run_schema.yaml' in store)\n"
    )
    lines = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines == [
        "[] False",
        "['tinygpt.choices', 'tinygpt.device_count', 'tinygpt.job_dir', 'tinygpt.parallel_jobs'] True",
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, jobs, parsed",
    [
        ([], 1, 1),  # a single run: parsed by the preflight callback before Hydra writes, handed to train()
        # a sweep: each job parsed by the sweep's check before launch, and once where it starts (its own process
        # in a launcher's worker; the basic launcher's, here, is this one)
        (["-m", "seed=0,1", "hydra/launcher=basic"], 2, 4),
    ],
)
def test_a_run_parses_its_config_once_and_converts_it_once_for_its_record(argv, jobs, parsed, tmp_path, monkeypatch):
    """The composed config becomes the typed RunConfig once a run, and a plain dict once, for run.json: counted
    through tinygpt-train's own entry point, in this process."""
    import sys
    from pathlib import Path

    from omegaconf import OmegaConf

    import tinygpt
    from tinygpt.cli import train as program
    from tinygpt.train import schema

    parses, containers = [], []
    typed, to_container = schema.typed, OmegaConf.to_container
    package = Path(tinygpt.__file__).parent

    def counting_typed(cls, values, *args, **kwargs):
        if cls is RunConfig:
            parses.append(cls)
        return typed(cls, values, *args, **kwargs)

    def counting_to_container(cfg, *args, **kwargs):  # tinygpt's own calls (not OmegaConf's or Hydra's inside)
        caller = sys._getframe(1).f_code.co_filename
        if OmegaConf.is_config(cfg) and OmegaConf.get_type(cfg) is RunConfig and package in Path(caller).parents:
            containers.append(caller)
        return to_container(cfg, *args, **kwargs)

    monkeypatch.setattr(schema, "typed", counting_typed)
    monkeypatch.setattr(OmegaConf, "to_container", counting_to_container)
    where = "hydra.sweep.dir" if "-m" in argv else "hydra.run.dir"
    monkeypatch.setattr(sys, "argv", ["tinygpt-train", *argv, "experiment=smoke", f"{where}={tmp_path}"])
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    try:
        program.main()
    except SystemExit as stop:
        assert not stop.code, stop
    assert len(list(tmp_path.rglob("run.json"))) == jobs
    assert (len(parses), len(containers)) == (parsed, jobs), containers
