"""The `data` config group composes with Hydra and reads into a valid DataConfig."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tinygpt.common.typed import typed
from tinygpt.data import DataConfig, DataError

CONF_DATA = Path(__file__).resolve().parents[1] / "conf" / "data"
CORPORA = ["timemachine", "shakespeare", "peps", "textfile", "textdir"]


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory) -> Path:
    """A throwaway primary config next to a copy of conf/data, so only the data group is under test."""
    root = tmp_path_factory.mktemp("conf")
    shutil.copytree(CONF_DATA, root / "data")
    (root / "primary.yaml").write_text("defaults:\n  - data: timemachine\n  - _self_\n")
    return root


def data_node(config_dir: Path, *overrides: str):
    with initialize_config_dir(str(config_dir), version_base="1.3"):
        return compose("primary", overrides=list(overrides)).data


def read_data(values) -> DataConfig:
    return typed(DataConfig, values, "data", DataError)


def test_default_is_the_time_machine_with_chars(config_dir):
    data = data_node(config_dir)
    assert data.name == "timemachine" and data.tokenizer.name == "char" and data.fraction == 1.0
    config = read_data(data)
    assert config.path == "timemachine/timemachine.txt" and config.test_fraction == 0.1 and config.dev == "tail"


def test_group_and_plain_overrides_compose(config_dir):
    data = data_node(config_dir, "data=peps", "data/tokenizer=bpe", "data/fraction=quarter", "data.fraction=half")
    config = read_data(data)
    assert (config.name, config.corpus, config.glob, config.dev) == ("peps", "dir", "pep-*.rst", "documents")
    assert config.tokenizer.name == "bpe" and config.tokenizer.vocab_size == 2048
    assert config.fraction == 0.5  # the plain key, given last, wins over the group choice
    assert read_data(data_node(config_dir, "data/fraction=quarter")).fraction == 0.25
    assert read_data(data_node(config_dir, "data.fraction=quarter")).fraction == 0.25
    assert read_data(data_node(config_dir, "data.fraction=1")).fraction == 1.0


@pytest.mark.parametrize("tokenizer", ["char", "bytes", "bpe", "gpt2"])
def test_every_tokenizer_choice_composes(config_dir, tokenizer):
    assert read_data(data_node(config_dir, f"data/tokenizer={tokenizer}")).tokenizer.name == tokenizer


def test_every_corpus_config_has_the_same_flat_keys(config_dir):
    keys = {name: set(data_node(config_dir, f"data={name}")) for name in CORPORA}
    assert all(k == keys["timemachine"] for k in keys.values())
    assert keys["timemachine"] == set(DataConfig.__dataclass_fields__)


def test_generic_corpora_require_a_path(config_dir):
    for name in ("textfile", "textdir"):
        data = data_node(config_dir, f"data={name}")
        assert OmegaConf.is_missing(data, "path")
        with pytest.raises(DataError, match=r"data\.path is required: give it with data\.path=<value>"):
            read_data(data)
        assert read_data(data_node(config_dir, f"data={name}", "data.path=/tmp/x")).path == "/tmp/x"


def test_shakespeare_and_timemachine_are_single_files(config_dir):
    for name, path in (
        ("shakespeare", "tinyshakespeare/input.txt"),
        ("timemachine", "timemachine/timemachine.txt"),
    ):
        config = read_data(data_node(config_dir, f"data={name}"))
        assert config.corpus == "file" and config.path == path


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"bacth_size": 8}, r"^data\.bacth_size: Key 'bacth_size' not in 'DataConfig'; allowed: name, root, corpus"),
        ({"tokenizer": {"name": "bpe", "vocab": 512}}, r"^data\.tokenizer\.vocab: .*; allowed: name, vocab_size, fit_"),
        ({"batch_size": "eight"}, r"^data\.batch_size: .*could not be converted to Integer$"),
        ({"test_documents": "a.txt"}, r"^data\.test_documents: "),
    ],
)
def test_a_plain_dict_is_held_to_the_same_schema(data, message):
    """Python callers (baselines, scripts, tests) pass plain dicts; typed() checks them against DataConfig too."""
    with pytest.raises(DataError, match=message):
        read_data(data)


def test_a_plain_dict_gets_the_same_defaults_as_the_dataclass():
    config = read_data({"name": "textfile", "path": "book.txt", "fraction": "half"})
    assert config == DataConfig(name="textfile", path="book.txt", fraction=0.5)
    assert config.test_documents == () and config.fraction == 0.5 and config.tokenizer.name == "char"
