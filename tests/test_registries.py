"""One registry per switch: the allowed names, the error listing them and the dispatch all come from it.

Each test registers a new name (monkeypatched, so the registry is restored) and checks that the config accepts
it, the builder dispatches to it, and a bad name's error lists it: a second list of names anywhere would fail.
"""

from pathlib import Path

import pytest
import torch
from torch import nn

from tinygpt.data.config import DataConfig, TokenizerConfig
from tinygpt.data.errors import DataError
from tinygpt.data.sources import NAMED_CORPORA
from tinygpt.data.tokenizers import TOKENIZERS, BytesTokenizer, TokenizerKind, tokenizer_from_json
from tinygpt.model import FAMILIES, GPT, GPTConfig, build_model, family_of
from tinygpt.model.gpt import MLPS, NORMS
from tinygpt.model.kernels import CORES, SDPACore
from tinygpt.model.position import POSITIONS, Positions
from tinygpt.model.speed import SpeedConfig
from tinygpt.train.optim import OptimConfig
from tinygpt.train.schedules import SCHEDULES, lr_multiplier

SMALL = dict(vocab_size=11, context_length=8, d_model=16, n_layers=1, n_heads=2)


class ShiftPositions(Positions):
    """A toy encoding: adds 1 to every embedding (enough to see the GPT used it)."""

    def embeddings(self, start, n, device):
        return torch.ones(n, 1, device=device)


def test_position_registry_gives_names_errors_and_dispatch(monkeypatch):
    monkeypatch.setitem(POSITIONS, "shift", ShiftPositions)
    model = GPT(GPTConfig(**SMALL, position="shift"))
    assert isinstance(model.position_embedding, ShiftPositions)
    with pytest.raises(ValueError, match="rope, learned, none, sinusoidal, alibi, shift"):
        GPTConfig(**SMALL, position="xpos")


def test_norm_registry_gives_names_errors_and_dispatch(monkeypatch):
    monkeypatch.setitem(NORMS, "identity", lambda d, eps, bias: nn.Identity())
    assert isinstance(GPT(GPTConfig(**SMALL, norm="identity")).final_norm, nn.Identity)
    assert isinstance(GPT(GPTConfig(**SMALL, norm="layernorm")).final_norm, nn.LayerNorm)
    with pytest.raises(ValueError, match="norm='batch' is not allowed: must be one of layernorm, rmsnorm, identity"):
        GPTConfig(**SMALL, norm="batch")


class ZeroMLP(nn.Module):
    has_aux_loss = True

    def forward(self, x):
        return torch.zeros_like(x), x.new_tensor(2.0)


def test_mlp_registry_gives_names_errors_and_dispatch_and_every_mlp_returns_an_aux_loss(monkeypatch):
    monkeypatch.setitem(MLPS, "zero", lambda config, implementation: ZeroMLP())
    model = GPT(GPTConfig(**SMALL, mlp="zero", moe_aux_loss_weight=0.5))
    assert model.has_aux_loss and model(torch.zeros(1, 4, dtype=torch.long)).aux_loss.item() == 1.0  # 0.5 × 2
    assert not GPT(GPTConfig(**SMALL, mlp="gelu")).has_aux_loss
    allowed = "gelu, gelu_exact, swiglu, moe, zero"
    with pytest.raises(ValueError, match=f"mlp='relu' is not allowed: must be one of {allowed}"):
        GPTConfig(**SMALL, mlp="relu")


class HalvedCore(SDPACore):
    """A toy attention core: SDPA's output halved (enough to see the layer used it)."""

    def __call__(self, q, k, v, mask, dropout_p):
        return super().__call__(q, k, v, mask, dropout_p) / 2


def test_attention_core_registry_gives_names_errors_and_dispatch(monkeypatch):
    monkeypatch.setitem(CORES, "halved", HalvedCore)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**SMALL))
    halved = GPT(GPTConfig(**SMALL), SpeedConfig(attention="halved"))
    halved.load_state_dict(model.state_dict())
    attention = halved.blocks[0].attention
    assert isinstance(attention.core, HalvedCore)
    x = torch.randn(1, 4, 16)
    torch.testing.assert_close(attention(x), model.blocks[0].attention(x) / 2)  # out_proj has no bias here
    SpeedConfig(attention="halved")
    with pytest.raises(
        ValueError, match="speed.attention='flash' is not allowed: must be one of sdpa, explicit, halved"
    ):
        SpeedConfig(attention="flash")
    with pytest.raises(ValueError, match="sdpa, explicit, halved"):
        SpeedConfig(attention="flash")


def test_schedule_registry_gives_names_errors_and_dispatch(monkeypatch):
    monkeypatch.setitem(SCHEDULES, "half", lambda step, warmup, total, floor, decay: 0.5)
    OptimConfig(schedule="half")
    assert lr_multiplier(9, schedule="half", warmup_steps=2, total_steps=20) == 0.5
    assert lr_multiplier(0, schedule="half", warmup_steps=2, total_steps=20) == 0.5  # warmup: step 1 of 2
    with pytest.raises(ValueError, match="constant, cosine, linear, wsd, half"):
        OptimConfig(schedule="step")
    with pytest.raises(ValueError, match="constant, cosine, linear, wsd, half"):
        lr_multiplier(0, schedule="step", warmup_steps=2, total_steps=20)


def test_tokenizer_registry_gives_names_errors_and_dispatch(monkeypatch):
    monkeypatch.setitem(
        TOKENIZERS,
        "raw",
        TokenizerKind(lambda c, t, r: BytesTokenizer(), lambda payload: BytesTokenizer(), needs_fitting=True),
    )
    assert TokenizerConfig(name="raw").needs_fitting
    assert isinstance(tokenizer_from_json('{"kind": "raw"}'), BytesTokenizer)
    with pytest.raises(DataError, match=r"\['char', 'bytes', 'bpe', 'gpt2', 'raw'\]"):
        TokenizerConfig(name="wordpiece")
    with pytest.raises(DataError, match="char, bytes, bpe, gpt2, raw"):
        tokenizer_from_json('{"kind": "wordpiece"}')


def test_corpus_registry_holds_each_named_corpus_and_its_files():
    assert sorted(NAMED_CORPORA) == ["peps", "shakespeare", "timemachine"]
    assert NAMED_CORPORA["timemachine"].files[0].relative_path == NAMED_CORPORA["timemachine"].path
    assert len(NAMED_CORPORA["peps"].files) == 303


def test_unknown_corpus_error_lists_the_registered_corpora(monkeypatch):
    from tinygpt.data.corpus import _named_corpus

    monkeypatch.setitem(NAMED_CORPORA, "wiki", NAMED_CORPORA["timemachine"])
    assert _named_corpus(DataConfig(name="wiki")) is NAMED_CORPORA["timemachine"]
    listed = (
        r"\['peps', 'shakespeare', 'timemachine', 'wiki', 'hf', 'jsonl', 'llmc', 'parquet', 'textdir', 'textfile'\]"
    )
    with pytest.raises(DataError, match=listed):
        _named_corpus(DataConfig(name="books"))


def test_family_registry_gives_names_errors_and_dispatch():
    assert list(FAMILIES) == ["gpt", "lstm"]
    assert family_of({}) == "gpt" and family_of({"family": "lstm"}) == "lstm"
    assert isinstance(build_model(GPTConfig(**SMALL)), GPT)
    with pytest.raises(ValueError, match="model.family='rnn' is not allowed: must be one of gpt, lstm"):
        family_of({"family": "rnn"})


@pytest.mark.parametrize(("group", "registry"), [("position", POSITIONS), ("norm", NORMS), ("mlp", MLPS)])
def test_each_registered_choice_has_one_yaml_in_its_config_group(group, registry):
    """conf/model/<group>/<name>.yaml for every name in the registry and no other: `model/<group>=<name>` composes
    exactly what `model.<group>=<name>` sets."""
    from hydra import compose, initialize_config_dir

    from tinygpt.cli import CONF

    folder = Path(CONF) / "model" / group
    assert {p.stem for p in folder.glob("*.yaml")} == set(registry)
    for name in registry:
        with initialize_config_dir(CONF, version_base="1.3"):
            cfg = compose("train", overrides=[f"model/{group}={name}"])
        assert cfg.model[group] == name


def test_corpus_kinds_are_one_registry_and_nothing_else_asks_a_corpus_its_kind():
    """data.corpus's names are the registry's (tinygpt/data/kinds/), and no module outside it branches on them."""
    import re
    from pathlib import Path

    from tinygpt.data.config import CORPUS_KINDS
    from tinygpt.data.kinds import KINDS, CorpusKind, corpus_kind

    assert list(KINDS) == list(CORPUS_KINDS) and all(isinstance(kind, CorpusKind) for kind in KINDS.values())
    assert all(corpus_kind(name).name == name for name in CORPUS_KINDS)
    with pytest.raises(DataError, match=r"data.corpus='folder': not a kind of corpus; choose one of \['dir', "):
        corpus_kind("folder")
    package = Path(__file__).resolve().parents[1] / "tinygpt"
    asked = re.compile(r"""(\.kind|\.corpus|\bkind)\s*(==|!=|in)\s*\(?["'](file|dir|records|shards)["']""")
    found = [
        f"{path.relative_to(package)}:{number}"
        for path in package.rglob("*.py")
        if "kinds" not in path.parts and path.name != "config.py"  # the config's checks of its own combinations
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if asked.search(line)
    ]
    assert found == []
