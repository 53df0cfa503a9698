"""EleutherAI's lm-evaluation-harness on a tinygpt checkpoint: a native ``lm_eval`` model class, registered as
``tinygpt``, and the run that writes each task's results into the run folder (``lm_eval/<task>.json``).

Why a native class and not the Hugging Face export: every tinygpt model is scored, whatever its switches and
tokenizer (an LSTM, a post-norm block, a char vocabulary holding U+FFFD export to no transformers class), and the
scores are the model's own forward pass, the one its bits per byte come from.

How a request is scored, as the harness's own HFLM does it: the context's trailing spaces move to the
continuation, the pair is encoded as the whole text and the context (the continuation's tokens are the whole's
after the context's), the text is cut on the left to the model's context_length + 1 tokens, and the
continuation's log-probabilities are summed (log-softmax in float32, the sum in float64). ``is_greedy`` says
whether each continuation token was the argmax. tinygpt's tokenizers have no beginning-of-text token, so a
request with an empty context, and the first token of a text scored whole (``loglikelihood_rolling``, the
perplexity tasks), cannot be scored: they are refused by name rather than scored from a token the model never
had. ``generate_until`` decodes greedily (tinygpt's generate) up to ``max_gen_toks`` or the context's room, and
cuts the text at the first of the request's ``until`` strings.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tinygpt.common.errors import ConfigError
from tinygpt.common.files import write_json_atomic
from tinygpt.common.run_folder import LM_EVAL
from tinygpt.model import generate
from tinygpt.train.checkpoints import checkpoint_in, load_model


def _require_lm_eval():
    try:
        import lm_eval  # noqa: F401 - the harness, an optional extra
    except ModuleNotFoundError as missing:
        raise ModuleNotFoundError("lm_eval", name="lm_eval") from missing


def encode_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as the harness's HFLM splits them: the context's trailing spaces belong to
    the continuation, and the continuation's ids are the whole text's after the context's."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole, head = tokenizer.encode(context + continuation), tokenizer.encode(context)
    return head, whole[len(head) :]


def build_lm_class():
    """The ``lm_eval`` model class (built on first use: the harness is an optional extra), registered as tinygpt."""
    _require_lm_eval()
    from lm_eval.api.model import LM
    from lm_eval.api.registry import MODEL_REGISTRY, register_model

    if "tinygpt" in MODEL_REGISTRY:
        return MODEL_REGISTRY["tinygpt"]

    @register_model("tinygpt")
    class TinyGPTLM(LM):
        """A tinygpt checkpoint in the harness: ``lm_eval --model tinygpt --model_args checkpoint=...``."""

        def __init__(self, checkpoint: str, batch_size: int | str = 16, device: str = "cpu", **_ignored) -> None:
            super().__init__()
            self.model, self.tokenizer, _ = load_model(checkpoint)
            self.model = self.model.to(device).eval()
            self.batch_size = int(batch_size)
            self.context_length = self.model.config.context_length
            self.device_name = device

        @classmethod
        def create_from_arg_string(cls, arg_string, additional_config=None):
            from lm_eval.utils import simple_parse_args_string

            args = simple_parse_args_string(arg_string)
            args.update({k: v for k, v in (additional_config or {}).items() if v is not None and k == "batch_size"})
            return cls(**args)

        def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
            pairs = []
            for request in requests:
                context, continuation = request.args
                if not context:
                    raise ConfigError(
                        "lm_eval: a request with an empty context (a task scoring a text from its first token): "
                        "tinygpt's tokenizers have no beginning-of-text token to condition it on"
                    )
                pairs.append(encode_pair(self.tokenizer, context, continuation))
            return self.score_pairs(pairs)

        def score_pairs(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
            """(summed log-probability, every token the argmax) of each continuation after its context."""
            results: list[tuple[float, bool] | None] = [None] * len(pairs)
            order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                texts = [(pairs[i][0] + pairs[i][1])[-(self.context_length + 1) :] for i in batch]
                width = max(len(t) for t in texts) - 1
                inputs = torch.zeros(len(batch), width, dtype=torch.long)
                for row, text in enumerate(texts):
                    inputs[row, : len(text) - 1] = torch.tensor(text[:-1])  # right-padded: a causal model's
                with torch.no_grad():  # positions before the padding never see it
                    log_probs = self.model(inputs.to(self.device_name)).logits.float().log_softmax(-1).cpu()
                for row, (i, text) in enumerate(zip(batch, texts, strict=True)):
                    n = len(pairs[i][1])
                    positions = torch.arange(len(text) - 1 - n, len(text) - 1)
                    targets = torch.tensor(text[-n:])
                    picked = log_probs[row, positions, targets].double()
                    greedy = bool((log_probs[row, positions].argmax(-1) == targets).all())
                    results[i] = (float(picked.sum()), greedy)
            return results  # type: ignore[return-value]

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
            raise ConfigError(
                "lm_eval: loglikelihood_rolling (perplexity tasks) needs the first token's probability, and "
                "tinygpt's tokenizers have no beginning-of-text token: score a text with tinygpt-evaluate "
                "(bits per byte) instead"
            )

        def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
            outputs = []
            for request in requests:
                context, settings = request.args
                until = settings.get("until") or []
                until = [until] if isinstance(until, str) else list(until)
                ids = self.tokenizer.encode(context)[-(self.context_length - 1) :] or [0]
                room = self.context_length - len(ids)
                steps = min(int(settings.get("max_gen_toks", 256)), room)
                out = generate(self.model, torch.tensor([ids], device=self.device_name), steps, greedy=True)
                text = self.tokenizer.decode(out[0, len(ids) :].tolist())
                cut = min((text.index(stop) for stop in until if stop in text), default=len(text))
                outputs.append(text[:cut])
            return outputs

    return TinyGPTLM


def run_tasks(
    checkpoint: str | Path,
    tasks: list[str],
    *,
    limit: int | float | None = None,
    batch_size: int = 16,
    include_path: str | None = None,
    num_fewshot: int | None = None,
    device: str = "cpu",
    log_samples: bool = False,
) -> dict:
    """Run the harness's ``simple_evaluate`` on a checkpoint and write ``<run>/lm_eval/<task>.json`` for each task
    (its results, the harness's config for it and version, the checkpoint and limit); returns the harness's output."""
    checkpoint = checkpoint_in(checkpoint)
    if not checkpoint.is_file():
        raise ConfigError(f"ckpt={checkpoint}: no such checkpoint")
    lm_class = build_lm_class()
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=include_path)
    unknown = [task for task in tasks if task not in manager.all_tasks]
    if unknown:
        where = f" (with include_path={include_path})" if include_path else ""
        raise ConfigError(f"tasks={','.join(unknown)}: no such lm-eval task{where}; `lm_eval ls tasks` lists them")
    output = simple_evaluate(
        model=lm_class(str(checkpoint), batch_size=batch_size, device=device),
        tasks=tasks,
        num_fewshot=num_fewshot,
        limit=limit,
        task_manager=manager,
        log_samples=log_samples,
        bootstrap_iters=1000,  # stderr: closed form for accuracies, a 1,000-sample bootstrap for other metrics
    )
    run_dir = checkpoint.resolve().parent.parent  # <run>/checkpoints/<file>
    output["run_dir"] = str(run_dir)
    folder = run_dir / LM_EVAL
    folder.mkdir(exist_ok=True)
    for task, results in output["results"].items():
        write_json_atomic(
            folder / f"{task}.json",
            {
                "task": task,
                "results": results,
                "n_samples": output.get("n-samples", {}).get(task),
                "config": output.get("configs", {}).get(task),
                "versions": output.get("versions", {}).get(task),
                "checkpoint": str(checkpoint),
                "limit": limit,
                "num_fewshot": num_fewshot,
            },
        )
    return output
