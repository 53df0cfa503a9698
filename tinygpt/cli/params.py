"""Where a model's parameters are: python scripts/params.py [hydra overrides]

    python scripts/params.py model.vocab_size=148                   # 003's character model: 1,799,616
    python scripts/params.py model=llama3_8b                        # built on the meta device: no memory
    python scripts/params.py model=since_gpt2 model/position=rope   # 000's "+ RoPE only" variant

The model is built on PyTorch's meta device (shapes without storage), so any size can be counted.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, task
from tinygpt.common.errors import ConfigError
from tinygpt.common.typed import typed
from tinygpt.model import GPTConfig, build_on_meta, kv_cache_bytes_per_token, parameter_breakdown
from tinygpt.model.params import GROUPS, formula_count


def report(config: GPTConfig) -> str:
    """The breakdown table, the 12·L·D² + V·D estimate, and the closing `total parameters: N` line."""
    counts = parameter_breakdown(build_on_meta(config))
    total = counts["total"]
    lines = []
    for group in GROUPS:
        tied = group == "output head" and config.tie_embeddings
        note = " (tied: shares the embedding table)" if tied else ""
        lines.append(f"{group:12s} {counts[group]:>15,}  {counts[group] / total:6.1%}{note}")
    L, D, V = config.n_layers, config.d_model, config.vocab_size
    lines.append(f"formula 12·L·D² + V·D = {formula_count(config):,}  (L={L}, D={D}, V={V}), counted {total:,}")
    fp32, bf16 = (kv_cache_bytes_per_token(config, bytes_per_number=n) for n in (4, 2))
    lines.append(
        f"KV cache per token: {fp32:,} bytes fp32, {bf16 / 1024:,.0f} KiB bf16 "
        f"({config.resolved_kv_heads} KV heads x {config.resolved_head_dim} x {L} layers)"
    )
    lines.append(f"total parameters: {total:,}")
    return "\n".join(lines)


register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry()
@hydra.main(config_path=CONF, config_name="params", version_base=None)
@task
def main(cfg: DictConfig) -> None:
    config = typed(GPTConfig, cfg.model, "model", ConfigError)  # a bad value: one line (@task)
    if config.vocab_size == 0:
        raise ConfigError(
            "model.vocab_size is 0 (normally filled from the tokenizer); pass it, e.g. tinygpt-params "
            "model.vocab_size=148"
        )
    print(report(config))


if __name__ == "__main__":
    main()
