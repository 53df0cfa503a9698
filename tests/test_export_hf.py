"""Export to transformers and import back: per family, a small model trained a few steps gives transformers
the same logits and greedy tokens; refusals name the switch; re-export is byte-identical; import round-trips."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch
from conftest import PYTHON, REPO

from tinygpt.export.export import build_hf_model, export_checkpoint
from tinygpt.export.families import FAMILIES, ExportError, choose_family, hf_config, tinygpt_config, to_hf_state
from tinygpt.export.import_hf import import_folder
from tinygpt.model import GPT, GPTConfig, generate
from tinygpt.train.checkpoints import load_model
from tinygpt.train.evaluate import evaluate
from tinygpt.train.run import train

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded; transformers reads local folders only
transformers = pytest.importorskip("transformers")

# one small model per family, each with the switches its family maps non-trivially, and a different tokenizer
FAMILY_RUNS = {
    # GQA (2 query heads on 1 KV head), head_dim != d_model / n_heads, untied head, q/k/v/o biases, rope_base
    "llama": [
        "model.n_kv_heads=1",
        "model.head_dim=12",
        "model.tie_embeddings=false",
        "model.bias=true",
        "model.rope_base=500",
        "data/tokenizer=bytes",
    ],
    "qwen3": ["model.qk_norm=true", "model.n_heads=4", "model.n_kv_heads=2"],  # char tokenizer, tied
    "gpt2": [
        "model.position=learned",
        "model.norm=layernorm",
        "model.mlp=gelu",
        "model.bias=true",
        "data/tokenizer=bpe",
        "data.tokenizer.vocab_size=300",
    ],  # tied, as GPT-2 is
}
TEXT = "the time traveller was in the future\nmorlocks! é€ 😀 unseen"


@pytest.fixture(scope="module", params=sorted(FAMILY_RUNS))
def trained(request, tmp_path_factory, small_corpus):
    """(family, run dir, checkpoint, export folder) of a model trained 4 steps with nonzero gains and biases."""
    from conftest import compose_train

    run_dir = tmp_path_factory.mktemp(f"run_{request.param}")
    cfg = compose_train(
        [
            "experiment=smoke",
            "data=textfile",
            f"data.path={small_corpus}",
            "trainer.max_steps=4",
            "model.context_length=64",
            "lr=0.05",
            *FAMILY_RUNS[request.param],
        ]
    )
    train(cfg, run_dir)
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    out = run_dir.parent / f"{run_dir.name}_hf"
    exported = export_checkpoint(ckpt, out)
    assert exported.family.name == request.param
    return request.param, run_dir, ckpt, out


def test_transformers_gives_the_same_logits_and_greedy_tokens(trained):
    family, _, ckpt, out = trained
    model, tokenizer, _ = load_model(ckpt)
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    assert type(hf).__name__ == FAMILIES[family].hf_class
    # a few steps at lr 0.05 moved the gains and biases off their 1/0 init: the norms and biases are exercised
    state = model.state_dict()
    assert not torch.allclose(state["final_norm.weight"], torch.ones_like(state["final_norm.weight"]))
    ids = torch.randint(
        0, model.config.vocab_size, (2, model.config.context_length), generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        ours, theirs = model(ids).logits, hf(input_ids=ids).logits
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() < 1e-4
    prompt = torch.tensor([tokenizer.encode("the time")])
    expected = generate(model, prompt, 30, greedy=True)
    got = hf.generate(prompt, max_new_tokens=30, do_sample=False)
    assert got.tolist() == expected.tolist()


def test_greedy_and_beam_tokens_match_on_a_model_that_does_not_repeat_itself(trained, tmp_path):
    """A model trained 4 steps may greedily repeat one token; the same architecture with random weights (gains and
    biases moved off 1 and 0 too) continues with many different tokens, so the 30-token comparison means something."""
    family, _, ckpt, _ = trained
    model, tokenizer, checkpoint = load_model(ckpt)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    (tmp_path / "checkpoints").mkdir()
    torch.save(
        {**checkpoint, "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}},
        tmp_path / "checkpoints" / "random.ckpt",
    )
    out = export_checkpoint(tmp_path / "checkpoints" / "random.ckpt", tmp_path / "hf").folder
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    prompt = torch.tensor([tokenizer.encode("the time")])
    expected = generate(model, prompt, 30, greedy=True)
    assert hf.generate(prompt, max_new_tokens=30, do_sample=False).tolist() == expected.tolist()
    assert len(set(expected[0, prompt.shape[1] :].tolist())) >= 5
    # beam search: transformers' own (num_beams, no end-of-text stop, as tinygpt's runs max_new_tokens)
    hf.generation_config.eos_token_id = None
    for beams in (2, 5):
        ours = generate(model, prompt, 30, beams=beams)
        theirs = hf.generate(prompt, max_new_tokens=30, do_sample=False, num_beams=beams, eos_token_id=None)
        assert theirs.tolist() == ours.tolist(), beams
    assert not torch.equal(generate(model, prompt, 30, beams=5), expected)  # the search found more than the argmax


def test_tokenizer_files_round_trip_like_tinygpt(trained):
    _, _, ckpt, out = trained
    _, tokenizer, _ = load_model(ckpt)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    ids = tokenizer.encode(TEXT)
    assert hf_tokenizer(TEXT).input_ids == ids
    assert hf_tokenizer.decode(ids) == tokenizer.decode(ids)
    assert len(hf_tokenizer) == tokenizer.vocab_size


def test_reexport_is_byte_identical(trained, tmp_path):
    _, _, ckpt, out = trained
    again = export_checkpoint(ckpt, tmp_path / "again").folder
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "README.md"} <= set(names)
    for name in names:
        assert (out / name).read_bytes() == (again / name).read_bytes(), name


def test_import_round_trip_gives_identical_weights_and_scores(trained, tmp_path):
    _, run_dir, ckpt, out = trained
    record = json.loads((run_dir / "run.json").read_text())
    imported = import_folder(
        out,
        tmp_path / "imported",
        {"name": "imported", "seed": record["config"]["seed"], "data": record["config"]["data"]},
    )
    model, tokenizer, _ = load_model(ckpt)
    back, back_tokenizer, _ = load_model(imported)
    assert vars(back.config) == vars(model.config)
    assert back_tokenizer.to_json() == tokenizer.to_json()
    ours, theirs = model.state_dict(), back.state_dict()
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert torch.equal(ours[name], theirs[name]), name
    # evaluate.py accepts the imported run folder and scores it as the run scored itself
    rows = evaluate(str(tmp_path / "imported"), split="dev")
    assert rows[0]["bits_per_byte"] == pytest.approx(record["curve"][-1]["dev_bits_per_byte"], rel=1e-5)


def test_model_card_states_the_runs_record(trained, tmp_path):
    family, run_dir, ckpt, out = trained
    record = json.loads((run_dir / "run.json").read_text())
    card = (out / "README.md").read_text()
    assert FAMILIES[family].hf_class in card
    assert f"parameters: {record['parameters']:,}" in card
    assert f"steps: {record['final']['step']} trained of max_steps=4" in card
    assert f"dev at step 4 (this checkpoint): {record['final']['dev_bits_per_byte']:.4f}" in card
    assert f"best dev: {record['best']['dev_bits_per_byte']:.4f}" in card
    assert "held-out: not scored" in card
    with open(run_dir / "evaluations.jsonl", "a") as log:  # as evaluate.py split=test logs a scoring
        log.write(json.dumps({"checkpoint": str(ckpt), "step": 4, "split": "test", "bits_per_byte": 3.21}) + "\n")
    try:
        card = (export_checkpoint(ckpt, tmp_path / "scored").folder / "README.md").read_text()
    finally:
        (run_dir / "evaluations.jsonl").unlink()
    assert "held-out (test split, scored by tinygpt-evaluate split=test): 3.2100" in card


# ---- refusals -------------------------------------------------------------------------------------------------


def small(**switches) -> GPTConfig:
    return GPTConfig(vocab_size=20, context_length=16, d_model=16, n_layers=1, n_heads=2, **switches)


GPT2 = {"position": "learned", "norm": "layernorm", "mlp": "gelu"}
REFUSED = [  # (switches, family asked for, the switch the one-line message must name)
    ({"prenorm": False}, "auto", "model.prenorm=False"),
    ({"residual": False}, "auto", "model.residual=False"),
    ({"mlp": "moe", "n_experts": 2, "top_k": 1}, "auto", "model.mlp='moe'"),
    ({"position": "none"}, "auto", "model.position='none'"),
    ({"position": "sinusoidal"}, "auto", "model.position='sinusoidal'"),
    ({"position": "alibi"}, "auto", "model.position='alibi'"),
    ({**GPT2, "position": "alibi"}, "gpt2", "model.position='alibi'"),
    ({"norm": "layernorm"}, "auto", "model.norm='layernorm'"),  # rope + layernorm: mixed switches
    ({**GPT2, "norm": "rmsnorm"}, "auto", "model.norm='rmsnorm'"),
    ({**GPT2, "mlp": "swiglu"}, "auto", "model.mlp='swiglu'"),
    ({**GPT2, "n_kv_heads": 1}, "auto", "model.n_kv_heads=1"),
    ({**GPT2, "head_dim": 4}, "auto", "model.head_dim=4"),
    ({**GPT2, "qk_norm": True}, "auto", "model.qk_norm=True"),
    ({"qk_norm": True}, "llama", "model.qk_norm=True"),
    ({}, "qwen3", "model.qk_norm=False"),
    ({}, "gpt2", "model.position='rope'"),
]


@pytest.mark.parametrize("switches,family,named", REFUSED, ids=[r[2] + "/" + r[1] for r in REFUSED])
def test_inexpressible_switches_are_refused_with_one_line(switches, family, named):
    with pytest.raises(ExportError) as refused:
        choose_family(small(**switches), family)
    message = str(refused.value)
    assert "\n" not in message and named in message
    assert "supported families: llama (LlamaForCausalLM" in message and "GPT2LMHeadModel" in message


def test_unknown_family_is_refused():
    with pytest.raises(ExportError, match="family='mistral' is not allowed: must be auto, llama, qwen3, gpt2"):
        choose_family(small(), "mistral")


def test_the_right_family_is_chosen():
    assert choose_family(small()).name == "llama"
    assert choose_family(small(qk_norm=True)).name == "qwen3"
    assert choose_family(small(**GPT2)).name == "gpt2"


@pytest.mark.parametrize(
    "model_type,settings,named",
    [
        (
            "llama",
            {
                "rope_parameters": {
                    "rope_type": "llama3",
                    "rope_theta": 5e5,
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                }
            },
            "rope_parameters.rope_type='llama3'",
        ),
        ("llama", {"mlp_bias": True}, "mlp_bias=True"),
        ("llama", {"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ("qwen3", {"use_sliding_window": True, "sliding_window": 8}, "use_sliding_window=True"),
        ("gpt2", {"activation_function": "relu"}, "activation_function='relu'"),
        ("gpt2", {"activation_function": "gelu_fast"}, "activation_function='gelu_fast'"),
        ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx=True"),
        ("mistral", {}, "model_type='mistral'"),
    ],
)
def test_import_refuses_what_tinygpt_computes_differently(model_type, settings, named, tmp_path):
    config = transformers.AutoConfig.for_model(model_type, vocab_size=20, **settings)
    with pytest.raises(ExportError) as refused:
        tinygpt_config(config)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    config.save_pretrained(tmp_path / "hf")
    with pytest.raises(ExportError, match="cannot import"):  # the folder is refused before any weight is read
        import_folder(tmp_path / "hf", tmp_path / "out", {})
    assert not (tmp_path / "out").exists()


def test_config_round_trip_through_transformers_configs():
    for switches in (
        {
            "n_kv_heads": 1,
            "head_dim": 6,
            "bias": True,
            "tie_embeddings": False,
            "rope_base": 50.0,
            "norm_eps": 1e-6,
            "mlp_hidden": 24,
            "init_std": 0.01,
        },
        {"qk_norm": True},
        {**GPT2, "bias": True, "mlp_hidden": 40, "norm_eps": 1e-6},
        {**GPT2, "mlp": "gelu_exact", "bias": True},
    ):
        config = small(**switches)
        assert vars(tinygpt_config(hf_config(config, choose_family(config), None, None))) == vars(config)


@pytest.mark.parametrize(
    "activation,mlp", [("gelu_new", "gelu"), ("gelu_pytorch_tanh", "gelu"), ("gelu", "gelu_exact")]
)
def test_gpt2_activations_import_as_the_gelu_that_computes_them(activation, mlp):
    config = transformers.GPT2Config(vocab_size=20, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    config.activation_function = activation
    assert tinygpt_config(config).mlp == mlp


@pytest.mark.parametrize("mlp,activation", [("gelu", "gelu_new"), ("gelu_exact", "gelu")])
def test_each_gelu_exports_as_the_gpt2_activation_that_computes_it(mlp, activation):
    """Same logits as GPT2LMHeadModel with the activation export names, and measurably different ones with the
    other: weights at std 0.5 put the MLP's inputs where the two GELUs differ, so the check can tell them apart."""
    torch.manual_seed(0)
    model = GPT(small(**{**GPT2, "mlp": mlp}, bias=True, init_std=0.5)).eval()
    hf = build_hf_model(model, FAMILIES["gpt2"])
    assert hf.config.activation_function == activation
    other = hf_config(model.config, FAMILIES["gpt2"], None, None)
    other.activation_function = {"gelu_new": "gelu", "gelu": "gelu_new"}[activation]
    wrong = transformers.GPT2LMHeadModel(other).eval()
    wrong.load_state_dict(to_hf_state(model.state_dict(), model.config, FAMILIES["gpt2"]), strict=True)
    ids = torch.randint(0, 20, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(ids).logits
        same, differs = (hf(input_ids=ids).logits - ours).abs().max(), (wrong(input_ids=ids).logits - ours).abs().max()
    assert same < 1e-5 and differs > 1e-4, (same, differs)


def test_existing_output_is_never_overwritten_unless_asked(trained, tmp_path):
    _, _, ckpt, _ = trained
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="already exists and is not empty"):
        export_checkpoint(ckpt, out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    export_checkpoint(ckpt, out, overwrite=True)
    assert not (out / "notes.txt").exists() and (out / "config.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("trained", ["qwen3"], indirect=True)  # the scripts are checked once, on one family
def test_scripts_export_refuse_and_import_then_generate(trained, tmp_path):
    family, run_dir, ckpt, out = trained
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def run(*args):
        return subprocess.run([PYTHON, *args], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)

    done = run("scripts/export.py", f"ckpt='{ckpt}'", f"out={tmp_path / 'hf'}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "as Qwen3ForCausalLM" in done.stdout
    refused = run("scripts/export.py", f"ckpt='{ckpt}'", f"out={tmp_path / 'no'}", "family=gpt2")
    assert refused.returncode == 2 and not (tmp_path / "no").exists()
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]  # one line
    assert "model.position='rope'" in refused.stderr
    record = json.loads((run_dir / "run.json").read_text())
    done = run(
        "scripts/import_hf.py",
        f"hf={tmp_path / 'hf'}",
        f"out={tmp_path / 'imported'}",
        "data=textfile",
        f"data.path={record['config']['data']['path']}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = tmp_path / "imported" / "checkpoints" / "imported.ckpt"
    done = run("scripts/generate.py", f"ckpt='{imported}'", "prompt=the time", "max_new_tokens=20", "greedy=true")
    assert done.returncode == 0, done.stderr[-2000:]
    model, tokenizer, _ = load_model(ckpt)
    expected = generate(model, torch.tensor([tokenizer.encode("the time")]), 20, greedy=True)
    assert done.stdout.rstrip("\n") == tokenizer.decode(expected[0].tolist())
