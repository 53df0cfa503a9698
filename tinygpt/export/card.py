"""The model card (README.md) of an exported folder, written from the run's own record, run.json.

It states what a reader of the folder cannot see in config.json: the run's switches as tinygpt names them, the
data and its splits, the tokenizer, how many steps were trained, and the scores the run measured: dev bits per
byte (at the exported step and the best), and held-out bits per byte only where scripts/evaluate.py split=test
scored this checkpoint (evaluations.jsonl), never computed here. No dates or host names, so that exporting the
same checkpoint twice gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path

from tinygpt.common.run_folder import BITS_PER_BYTE, DEV_BITS_PER_BYTE, read_evaluations
from tinygpt.export.families import Family
from tinygpt.model import GPTConfig


def _heldout_rows(run_dir: Path, ckpt: Path, step: int | None) -> list[dict]:
    rows = read_evaluations(run_dir)
    # the same file name at the same step: last.ckpt is rewritten as training goes on
    return [
        r
        for r in rows
        if r.get("split") == "test" and Path(r.get("checkpoint", "")).name == ckpt.name and r.get("step") == step
    ]


def model_card(
    config: GPTConfig,
    family: Family,
    ckpt: Path,
    step: int | None,
    n_params: int,
    tokenizer,
    record: dict | None,
    run_dir: Path,
) -> str:
    name = (record or {}).get("config", {}).get("name") or run_dir.name
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: text-generation",
        "tags: [tinygpt]",
        "---",
        "",
        f"# {name}: a tinygpt model as `{family.hf_class}`",
        "",
        f"Exported by `tinygpt-export` from checkpoint `{ckpt.name}` (step {step}) of run "
        f"`{run_dir.name}`. Logits equal tinygpt's within float32 rounding; see the switches below.",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        'model = AutoModelForCausalLM.from_pretrained("<this folder>")',
        'tokenizer = AutoTokenizer.from_pretrained("<this folder>")',
        'ids = tokenizer("The Time Traveller", return_tensors="pt").input_ids',
        "print(tokenizer.decode(model.generate(ids, max_new_tokens=100, do_sample=False)[0]))",
        "```",
        "",
        "## Model",
        "",
        f"- parameters: {n_params:,}" + (" (tied embedding counted once)" if config.tie_embeddings else ""),
        f"- family: {family.name} (`{family.hf_class}`); dropout is dropped (inference only)",
        "- tinygpt switches:",
        "",
    ]
    lines += ["| switch | value |", "| --- | --- |"]
    lines += [f"| model.{key} | {value} |" for key, value in vars(config).items()]
    lines += [
        "",
        "## Tokenizer",
        "",
        f"- tinygpt's `{tokenizer.name}` tokenizer, {tokenizer.vocab_size:,} ids: `tokenizer.json` for "
        "transformers (same ids, same decoded text), `tinygpt_tokenizer.json` for tinygpt.",
        "",
    ]
    lines += ["## Data and training", ""]
    if record is None:
        lines += [f"No run record (run.json) beside the checkpoint in `{run_dir}`: data and scores unknown.", ""]
        return "\n".join(lines)
    cfg, data = record.get("config", {}), record.get("data", {})
    corpus = data.get("corpus", {})
    splits = data.get("splits") or {}
    lines += [
        f"- corpus: {corpus.get('name')} ({corpus.get('documents')} document(s), {corpus.get('bytes'):,} bytes)"
        if corpus
        else "- corpus: not recorded",
        f"- training fraction: {data.get('train_fraction')}; seed {cfg.get('seed')}",
    ]
    for split in ("train", "dev", "test"):
        summary = splits.get(split)
        if summary:
            lines.append(
                f"- {split} split: {summary.get('bytes'):,} bytes, {len(summary.get('documents', []))} document(s)"
            )
    trainer = cfg.get("trainer", {})
    batch = cfg.get("data", {}).get("batch_size")
    lines += [
        f"- steps: {step} trained of max_steps={trainer.get('max_steps')}; batch {batch} x context "
        f"{config.context_length}; run status: {record.get('status')}",
        "",
    ]
    lines += ["## Scores (bits per byte, lower is better)", ""]
    curve = {p["step"]: p for p in record.get("curve", [])}
    if step in curve:
        lines.append(f"- dev at step {step} (this checkpoint): {curve[step][DEV_BITS_PER_BYTE]:.4f}")
    best = record.get("best")
    if best:
        lines.append(f"- best dev: {best[DEV_BITS_PER_BYTE]:.4f} at step {best['step']}")
    heldout = _heldout_rows(run_dir, ckpt, step)
    for row in heldout[-1:]:
        lines.append(f"- held-out (test split, scored by tinygpt-evaluate split=test): {row[BITS_PER_BYTE]:.4f}")
    if not heldout:
        lines.append("- held-out: not scored for this checkpoint")
    if not curve and not best:
        lines.append("- no dev scores in the run record")
    return "\n".join(lines) + "\n"
