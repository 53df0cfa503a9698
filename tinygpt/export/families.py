"""Which `transformers` class expresses a tinygpt model exactly, and the weight mapping both ways.

The registry (FAMILIES) holds, per family, the switches it needs, how GPTConfig maps to the `transformers`
config, and how each tensor is renamed, transposed or permuted. A model is exported only when every switch has
an exact counterpart; anything else is refused with one line naming the switch and the families that exist,
because a "nearly equivalent" export would silently produce a different model.

Conventions checked against `transformers` 5 (modeling_llama / modeling_qwen3 / modeling_gpt2):
- RoPE. tinygpt rotates interleaved pairs (2i, 2i+1) of each head; Llama and Qwen3 rotate halves (i, i+d/2)
  with the same frequencies base^(-2i/d). Permuting each head's query and key rows to [0, 2, 4, ..., 1, 3, ...]
  turns one convention into the other, and leaves every q·k product unchanged (both sides are permuted).
- QK-norm. tinygpt's q_norm/k_norm are one RMSNorm over head_dim per layer, shared by all heads, applied before
  RoPE: exactly Qwen3's (weight shape (head_dim,), same eps as the other norms). RMSNorm commutes with a
  permutation of its dimensions, so its gain is permuted with the rows.
- GQA. tinygpt's repeat_interleave and transformers' repeat_kv both give query head h the KV head
  h // (n_heads / n_kv_heads).
- SwiGLU: down(silu(gate(x)) * up(x)) on both sides; tinygpt's SwiGLU never has biases (Llama's mlp_bias=False),
  while bias=True puts biases on q/k/v/o, which is Llama's and Qwen3's attention_bias.
- GPT-2: Conv1D stores weights as (in, out), the transpose of nn.Linear; c_attn is q, k, v concatenated.
  tinygpt's two GELUs are both GPT-2's activation_function: mlp=gelu (tanh) is "gelu_new" ("gelu_pytorch_tanh",
  the same F.gelu call, is imported as it too) and mlp=gelu_exact (erf) is "gelu"; any other activation is
  refused on import. A bias-free tinygpt GPT-2 layout exports with zero biases (exactly equivalent).
- Dropout is irrelevant at inference: every dropout of the exported config is 0.
- μP (model.parametrization=mup): its logit multiplier and attention scale are folded into the final norm's gain
  (and bias) and the queries (tinygpt/model/mup.py's fold_into_sp); the exported model is a plain one with the
  same logits, and imports back as one (parametrization=sp).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tinygpt.common.errors import ConfigError
from tinygpt.model import GPTConfig
from tinygpt.model.mup import fold_into_sp


class ExportError(ConfigError):
    """A model, folder or switch that cannot be converted exactly; raised before anything is written."""


@dataclass(frozen=True)
class Family:
    name: str
    hf_class: str  # the transformers architecture
    model_type: str  # config.json's model_type
    requires: tuple[tuple[str, tuple, str], ...]  # (GPTConfig field, the values allowed, why), checked in order


# GPT-2's activation_function per tinygpt GELU (tinygpt/model/gpt.py's GELUS), and what import accepts: also
# "gelu_pytorch_tanh", transformers' name for the very F.gelu(approximate="tanh") call tinygpt makes.
GPT2_ACTIVATIONS = {"gelu": "gelu_new", "gelu_exact": "gelu"}
GPT2_IMPORTED_ACTIVATIONS = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu": "gelu_exact"}

# Switches no transformers class expresses, whatever the family (checked first, so the message names them).
COMMON = (
    ("prenorm", (True,), "post-norm blocks (prenorm=false) exist in no transformers causal-LM class"),
    ("residual", (True,), "blocks without residual connections exist in no transformers class"),
)

FAMILIES: dict[str, Family] = {
    "llama": Family(
        "llama",
        "LlamaForCausalLM",
        "llama",
        (
            ("position", ("rope",), "LlamaForCausalLM uses RoPE"),
            ("norm", ("rmsnorm",), "LlamaForCausalLM uses RMSNorm"),
            ("mlp", ("swiglu",), "LlamaForCausalLM uses a SwiGLU MLP"),
            ("qk_norm", (False,), "LlamaForCausalLM has no QK-norm (Qwen3ForCausalLM does: family=qwen3)"),
        ),
    ),
    "qwen3": Family(
        "qwen3",
        "Qwen3ForCausalLM",
        "qwen3",
        (
            ("position", ("rope",), "Qwen3ForCausalLM uses RoPE"),
            ("norm", ("rmsnorm",), "Qwen3ForCausalLM uses RMSNorm"),
            ("mlp", ("swiglu",), "Qwen3ForCausalLM uses a SwiGLU MLP"),
            ("qk_norm", (True,), "Qwen3ForCausalLM always normalizes queries and keys (without QK-norm: family=llama)"),
        ),
    ),
    "gpt2": Family(
        "gpt2",
        "GPT2LMHeadModel",
        "gpt2",
        (
            ("position", ("learned",), "GPT2LMHeadModel uses a learned position table"),
            ("norm", ("layernorm",), "GPT2LMHeadModel uses LayerNorm"),
            ("mlp", tuple(GPT2_ACTIVATIONS), "GPT2LMHeadModel uses a GELU MLP (gelu or gelu_exact)"),
            ("qk_norm", (False,), "GPT2LMHeadModel has no QK-norm"),
        ),
    ),
}

SUPPORTED = (
    "supported families: llama (LlamaForCausalLM: rope, rmsnorm, swiglu), qwen3 (Qwen3ForCausalLM: "
    "the same with qk_norm), gpt2 (GPT2LMHeadModel: learned positions, layernorm, gelu or gelu_exact)"
)


def _problems(config: GPTConfig, family: Family) -> list[str]:
    """Every switch of `config` the family cannot express, as 'model.<field>=<value>: <why>'."""
    problems = [
        f"model.{field}={getattr(config, field)!r}: {why}"
        for field, allowed, why in COMMON + family.requires
        if getattr(config, field) not in allowed
    ]
    if config.mlp == "moe":
        problems.insert(0, "model.mlp='moe': no exportable family has a matching mixture-of-experts class")
    if family.name == "gpt2":
        if config.resolved_kv_heads != config.n_heads:
            problems.append(
                f"model.n_kv_heads={config.n_kv_heads!r}: GPT2LMHeadModel has plain multi-head attention only"
            )
        if config.resolved_head_dim * config.n_heads != config.d_model:
            problems.append(
                f"model.head_dim={config.head_dim!r}: GPT2LMHeadModel needs head_dim = "
                f"d_model / n_heads = {config.d_model / config.n_heads:g}"
            )
    return problems


def choose_family(config: GPTConfig, family: str = "auto") -> Family:
    """The family that expresses `config` exactly (family="auto": the only one that does), else ExportError
    with one line: the first switch in the way, and the supported families."""
    if family != "auto" and family not in FAMILIES:
        raise ExportError(f"family={family!r} is not allowed: must be auto, " + ", ".join(FAMILIES))
    candidates = [FAMILIES[family]] if family != "auto" else list(FAMILIES.values())
    problems = {f.name: _problems(config, f) for f in candidates}
    fitting = [f for f in candidates if not problems[f.name]]
    if fitting:
        return fitting[0]
    # name the blocking switch of the nearest family (fewest problems): e.g. a rope + layernorm model is told
    # about its norm (Llama), not about its positions (GPT-2)
    nearest = min(candidates, key=lambda f: len(problems[f.name]))
    raise ExportError(f"cannot export: {problems[nearest.name][0]}; {SUPPORTED}")


# ---- configs ------------------------------------------------------------------------------------------------


def hf_config(config: GPTConfig, family: Family, bos_id: int | None, eos_id: int | None):
    """The transformers config object for `config`, dropout 0, in float32."""
    from transformers import GPT2Config, LlamaConfig, Qwen3Config

    common = dict(
        vocab_size=config.vocab_size,
        initializer_range=config.init_std,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=None,
        tie_word_embeddings=config.tie_embeddings,
        dtype="float32",
    )
    if family.name == "gpt2":
        return GPT2Config(
            n_positions=config.context_length,
            n_embd=config.d_model,
            n_layer=config.n_layers,
            n_head=config.n_heads,
            n_inner=config.resolved_mlp_hidden,
            activation_function=GPT2_ACTIVATIONS[config.mlp],
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            layer_norm_epsilon=config.norm_eps,
            scale_attn_weights=True,
            scale_attn_by_inverse_layer_idx=False,
            reorder_and_upcast_attn=False,
            **common,
        )
    cls = Qwen3Config if family.name == "qwen3" else LlamaConfig
    extra = {"use_sliding_window": False, "sliding_window": None} if family.name == "qwen3" else {"mlp_bias": False}
    return cls(
        hidden_size=config.d_model,
        intermediate_size=config.resolved_mlp_hidden,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        num_key_value_heads=config.resolved_kv_heads,
        head_dim=config.resolved_head_dim,
        hidden_act="silu",
        max_position_embeddings=config.context_length,
        rms_norm_eps=config.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": float(config.rope_base)},
        attention_bias=config.bias,
        attention_dropout=0.0,
        **extra,
        **common,
    )


def _refuse_unless(ok: bool, field: str, value, why: str) -> None:
    if not ok:
        raise ExportError(f"cannot import: config.json {field}={value!r}: {why}; {SUPPORTED}")


def tinygpt_config(hf) -> GPTConfig:
    """GPTConfig from a transformers config of a supported family; refuses anything tinygpt would compute
    differently (rope scaling, sliding windows, GELUs other than tinygpt's two, MLP biases, ...), naming the
    config.json field.
    Sizes equal to tinygpt's defaults come back as null (n_kv_heads, head_dim, mlp_hidden), as a run states them."""
    config = _tinygpt_config(hf)
    defaults = GPTConfig(**{**vars(config), "n_kv_heads": None, "head_dim": None, "mlp_hidden": None})
    return GPTConfig(
        **{
            **vars(config),
            **{
                "n_kv_heads": None if config.n_kv_heads == defaults.resolved_kv_heads else config.n_kv_heads,
                "head_dim": None if config.head_dim == defaults.resolved_head_dim else config.head_dim,
                "mlp_hidden": None if config.mlp_hidden == defaults.resolved_mlp_hidden else config.mlp_hidden,
            },
        }
    )


def _tinygpt_config(hf) -> GPTConfig:
    model_type = getattr(hf, "model_type", None)
    _refuse_unless(model_type in FAMILIES, "model_type", model_type, "not a supported family")
    if model_type == "gpt2":
        _refuse_unless(
            hf.activation_function in GPT2_IMPORTED_ACTIVATIONS,
            "activation_function",
            hf.activation_function,
            "tinygpt's GELUs are " + ", ".join(GPT2_IMPORTED_ACTIVATIONS),
        )
        _refuse_unless(
            hf.scale_attn_weights,
            "scale_attn_weights",
            hf.scale_attn_weights,
            "tinygpt scales attention by 1/sqrt(head_dim)",
        )
        _refuse_unless(
            not hf.scale_attn_by_inverse_layer_idx,
            "scale_attn_by_inverse_layer_idx",
            hf.scale_attn_by_inverse_layer_idx,
            "tinygpt does not scale attention by layer",
        )
        return GPTConfig(
            vocab_size=hf.vocab_size,
            context_length=hf.n_positions,
            d_model=hf.n_embd,
            n_layers=hf.n_layer,
            n_heads=hf.n_head,
            position="learned",
            norm="layernorm",
            norm_eps=hf.layer_norm_epsilon,
            mlp=GPT2_IMPORTED_ACTIVATIONS[hf.activation_function],
            mlp_hidden=hf.n_inner or 4 * hf.n_embd,
            bias=True,
            tie_embeddings=hf.tie_word_embeddings,
            dropout=0.0,
            init_std=hf.initializer_range,
        )
    _refuse_unless(hf.hidden_act == "silu", "hidden_act", hf.hidden_act, "tinygpt's SwiGLU uses silu")
    _refuse_unless(
        not getattr(hf, "mlp_bias", False), "mlp_bias", getattr(hf, "mlp_bias", None), "tinygpt's SwiGLU has no biases"
    )
    _refuse_unless(
        not getattr(hf, "use_sliding_window", False),
        "use_sliding_window",
        getattr(hf, "use_sliding_window", None),
        "tinygpt attends over the whole context",
    )
    rope = getattr(hf, "rope_parameters", None) or {"rope_type": "default", "rope_theta": hf.rope_theta}
    _refuse_unless(
        rope.get("rope_type", "default") == "default",
        "rope_parameters.rope_type",
        rope.get("rope_type"),
        "tinygpt has plain RoPE, without scaling",
    )
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    return GPTConfig(
        vocab_size=hf.vocab_size,
        context_length=hf.max_position_embeddings,
        d_model=hf.hidden_size,
        n_layers=hf.num_hidden_layers,
        n_heads=hf.num_attention_heads,
        n_kv_heads=hf.num_key_value_heads,
        head_dim=head_dim,
        position="rope",
        rope_base=float(rope["rope_theta"]),
        norm="rmsnorm",
        norm_eps=hf.rms_norm_eps,
        mlp="swiglu",
        mlp_hidden=hf.intermediate_size,
        qk_norm=model_type == "qwen3",
        bias=hf.attention_bias,
        tie_embeddings=hf.tie_word_embeddings,
        dropout=0.0,
        init_std=hf.initializer_range,
    )


# ---- weights ------------------------------------------------------------------------------------------------


def rope_permutation(head_dim: int) -> torch.Tensor:
    """Interleaved pairs (2i, 2i+1) -> halves (i, i + head_dim/2): [0, 2, 4, ..., 1, 3, 5, ...]."""
    return torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])


def _permute_heads(t: torch.Tensor, n_heads: int, head_dim: int, order: torch.Tensor) -> torch.Tensor:
    """Reorder the rows of each head of a projection's weight (out, in) or bias (out,)."""
    shape = t.shape
    return t.reshape(n_heads, head_dim, *shape[1:])[:, order].reshape(shape)


def _llama_names(config: GPTConfig) -> list[tuple[str, str, str]]:
    """(tinygpt name, transformers name, kind): kind 'q'/'k' rows are RoPE-permuted per head, 'qn'/'kn' gains
    permuted, '' copied as is."""
    names = [
        ("token_embedding.weight", "model.embed_tokens.weight", ""),
        ("final_norm.weight", "model.norm.weight", ""),
    ]
    for i in range(config.n_layers):
        ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
        names += [
            (ours + "norm1.weight", theirs + "input_layernorm.weight", ""),
            (ours + "norm2.weight", theirs + "post_attention_layernorm.weight", ""),
            (ours + "mlp.gate.weight", theirs + "mlp.gate_proj.weight", ""),
            (ours + "mlp.up.weight", theirs + "mlp.up_proj.weight", ""),
            (ours + "mlp.down.weight", theirs + "mlp.down_proj.weight", ""),
        ]
        for proj, hf_proj, kind in (
            ("q_proj", "q_proj", "q"),
            ("k_proj", "k_proj", "k"),
            ("v_proj", "v_proj", ""),
            ("out_proj", "o_proj", ""),
        ):
            for param in ("weight", "bias") if config.bias else ("weight",):
                names.append((f"{ours}attention.{proj}.{param}", f"{theirs}self_attn.{hf_proj}.{param}", kind))
        if config.qk_norm:
            names += [
                (ours + "attention.q_norm.weight", theirs + "self_attn.q_norm.weight", "qn"),
                (ours + "attention.k_norm.weight", theirs + "self_attn.k_norm.weight", "kn"),
            ]
    return names


def _llama_convert(state: dict, config: GPTConfig, to_hf: bool) -> dict:
    hd = config.resolved_head_dim
    order = rope_permutation(hd) if to_hf else torch.argsort(rope_permutation(hd))
    heads = {"q": config.n_heads, "k": config.resolved_kv_heads}
    out = {}
    for ours, theirs, kind in _llama_names(config):
        src, dst = (ours, theirs) if to_hf else (theirs, ours)
        t = state[src]
        if kind in heads:
            t = _permute_heads(t, heads[kind], hd, order)
        elif kind in ("qn", "kn"):
            t = t[order]
        out[dst] = t
    if not config.tie_embeddings:
        out["lm_head.weight"] = state["lm_head.weight"]
    return out


def _gpt2_convert(state: dict, config: GPTConfig, to_hf: bool) -> dict:
    d = config.d_model
    out = {}

    def zeros(n):
        return torch.zeros(n, dtype=state[next(iter(state))].dtype)

    if to_hf:
        bias = (lambda name, n: state[name]) if config.bias else (lambda name, n: zeros(n))
        out["transformer.wte.weight"] = state["token_embedding.weight"]
        out["transformer.wpe.weight"] = state["position_embedding.table.weight"]
        for i in range(config.n_layers):
            ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
            for a, b in (("norm1", "ln_1"), ("norm2", "ln_2")):
                out[f"{theirs}{b}.weight"] = state[f"{ours}{a}.weight"]
                out[f"{theirs}{b}.bias"] = bias(f"{ours}{a}.bias", d)
            qkv = [f"{ours}attention.{p}" for p in ("q_proj", "k_proj", "v_proj")]
            out[theirs + "attn.c_attn.weight"] = torch.cat([state[p + ".weight"] for p in qkv]).T
            out[theirs + "attn.c_attn.bias"] = torch.cat([bias(p + ".bias", d) for p in qkv])
            for a, b, n in (
                ("attention.out_proj", "attn.c_proj", d),
                ("mlp.fc", "mlp.c_fc", config.resolved_mlp_hidden),
                ("mlp.proj", "mlp.c_proj", d),
            ):
                out[f"{theirs}{b}.weight"] = state[f"{ours}{a}.weight"].T
                out[f"{theirs}{b}.bias"] = bias(f"{ours}{a}.bias", n)
        out["transformer.ln_f.weight"] = state["final_norm.weight"]
        out["transformer.ln_f.bias"] = bias("final_norm.bias", d)
        head = "token_embedding.weight" if config.tie_embeddings else "lm_head.weight"
        out["lm_head.weight"] = state[head]
        return {k: v.contiguous() for k, v in out.items()}
    # transformers -> tinygpt (always with biases: GPT-2 has them)
    out["token_embedding.weight"] = state["transformer.wte.weight"]
    out["position_embedding.table.weight"] = state["transformer.wpe.weight"]
    for i in range(config.n_layers):
        ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
        for a, b in (("norm1", "ln_1"), ("norm2", "ln_2")):
            out[f"{ours}{a}.weight"], out[f"{ours}{a}.bias"] = state[f"{theirs}{b}.weight"], state[f"{theirs}{b}.bias"]
        w, b_ = state[theirs + "attn.c_attn.weight"].T, state[theirs + "attn.c_attn.bias"]
        for j, p in enumerate(("q_proj", "k_proj", "v_proj")):
            out[f"{ours}attention.{p}.weight"] = w[j * d : (j + 1) * d]
            out[f"{ours}attention.{p}.bias"] = b_[j * d : (j + 1) * d]
        for a, b in (("attention.out_proj", "attn.c_proj"), ("mlp.fc", "mlp.c_fc"), ("mlp.proj", "mlp.c_proj")):
            out[f"{ours}{a}.weight"] = state[f"{theirs}{b}.weight"].T
            out[f"{ours}{a}.bias"] = state[f"{theirs}{b}.bias"]
    out["final_norm.weight"], out["final_norm.bias"] = state["transformer.ln_f.weight"], state["transformer.ln_f.bias"]
    if not config.tie_embeddings:
        out["lm_head.weight"] = state["lm_head.weight"]
    return {k: v.contiguous() for k, v in out.items()}


CONVERTERS: dict[str, Callable[[dict, GPTConfig, bool], dict]] = {
    "llama": _llama_convert,
    "qwen3": _llama_convert,
    "gpt2": _gpt2_convert,
}


def to_hf_state(state: dict, config: GPTConfig, family: Family) -> dict:
    """tinygpt state dict -> transformers names and layouts (a tied head appears as lm_head = the table); a μP
    model's multipliers folded into its weights first (tinygpt/model/mup.py), as transformers' classes have none."""
    state = fold_into_sp(state, config)
    out = CONVERTERS[family.name](state, config, True)
    if config.tie_embeddings and family.name != "gpt2":
        out["lm_head.weight"] = state["token_embedding.weight"]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def from_hf_state(state: dict, config: GPTConfig, family: Family) -> dict:
    """transformers state dict -> tinygpt's names and layouts."""
    missing = [name for name in _required_hf_names(config, family) if name not in state]
    if missing:
        raise ExportError(
            f"cannot import: the weights lack {missing[0]} (and {len(missing) - 1} more) that "
            f"config.json's {family.hf_class} needs"
        )
    return {k: v.detach().clone().contiguous() for k, v in CONVERTERS[family.name](state, config, False).items()}


def _required_hf_names(config: GPTConfig, family: Family) -> list[str]:
    if family.name == "gpt2":
        names = ["transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight"]
        names += [f"transformer.h.{i}.attn.c_attn.weight" for i in range(config.n_layers)]
    else:
        names = [theirs for _, theirs, _ in _llama_names(config)]
    return names + ([] if config.tie_embeddings else ["lm_head.weight"])
