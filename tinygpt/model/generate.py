"""Autoregressive generation: greedy, temperature, top-k, top-p and beam search, with or without a KV cache."""

from __future__ import annotations

import torch

from tinygpt.common.errors import ConfigError
from tinygpt.model.gpt import GPT, KVCache


def generate(
    model: GPT,
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    beams: int | None = None,
) -> torch.Tensor:
    """Continue each row of `prompt` (B, T0) by max_new_tokens tokens; returns (B, T0 + max_new_tokens).

    ``beams=k``: beam search instead of sampling, the continuation of highest total log-probability among the
    k kept at each step (see :func:`_beam_search`); it takes no temperature, top-k or top-p.

    With use_cache, the prompt is run once (prefill) and then one token per step against a KV cache;
    without, every step reruns the model over the whole text so far. Both give the same tokens. The text
    may not outgrow the context: there is no sliding window, a clear error is raised instead. `generator`
    seeds sampling and must live on the model's device. The model runs in eval mode and is put back in
    its previous mode afterwards.
    """
    _check_arguments(model, prompt, max_new_tokens, temperature, top_k, top_p)
    _check_beams(beams, temperature, top_k, top_p, greedy)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            if beams is not None:
                return _beam_search(model, prompt, max_new_tokens, beams, use_cache)
            return _generate(model, prompt, max_new_tokens, temperature, top_k, top_p, greedy, generator, use_cache)
    finally:
        model.train(was_training)


def _generate(model, prompt, max_new_tokens, temperature, top_k, top_p, greedy, generator, use_cache):
    # Write into one preallocated output rather than concatenating a new tensor every step.
    B, T0 = prompt.shape
    out = torch.empty(B, T0 + max_new_tokens, dtype=prompt.dtype, device=prompt.device)
    out[:, :T0] = prompt
    if max_new_tokens == 0:
        return out
    new_cache = getattr(model, "new_cache", None)  # a recurrent family carries its own state (model/lstm.py)
    cache = (new_cache(B) if new_cache else KVCache.for_model(model, B)) if use_cache else None
    logits = model(prompt, cache).logits[:, -1]  # the whole prompt once (prefill)
    for t in range(T0, T0 + max_new_tokens):
        out[:, t] = sample_next(
            logits, temperature=temperature, top_k=top_k, top_p=top_p, greedy=greedy, generator=generator
        )
        if t + 1 == T0 + max_new_tokens:
            break  # the last token is never fed back, so it needs no context slot
        if cache is not None:
            logits = model(out[:, t : t + 1], cache).logits[:, -1]  # then one token at a time
        else:
            logits = model(out[:, : t + 1]).logits[:, -1]
    return out


def _beam_search(model, prompt, max_new_tokens, beams, use_cache):
    """Beam search as transformers' ``generate(num_beams=k, do_sample=False)`` does it, without an end-of-text
    token (tinygpt's generation runs max_new_tokens, as its sampling does, so every beam has the same length and
    the length penalty ranks nothing). Each row starts as k copies of which only the first is live (the others
    at -1e9, so the first step expands one beam, not k identical ones); each step adds every beam's next-token
    log-probabilities (log-softmax in float32) to its running total and keeps the k best (beam, token) pairs of
    the row, best first; the row's answer is the first beam at the end. The cache follows the beams: its rows
    are gathered to the kept beams' sources before the next step."""
    B, T0 = prompt.shape
    out = prompt.repeat_interleave(beams, dim=0)
    out = torch.cat([out, out.new_empty(B * beams, max_new_tokens)], dim=1)
    if max_new_tokens == 0:
        return out[::beams]
    new_cache = getattr(model, "new_cache", None)
    cache = (new_cache(B * beams) if new_cache else KVCache.for_model(model, B * beams)) if use_cache else None
    logits = model(out[:, :T0], cache).logits[:, -1]
    scores = torch.full((B, beams), -1e9, device=prompt.device)
    scores[:, 0] = 0.0
    first_row = torch.arange(B, device=prompt.device)[:, None] * beams
    for t in range(T0, T0 + max_new_tokens):
        log_probs = logits.float().log_softmax(dim=-1)
        vocab = log_probs.shape[-1]
        totals = (log_probs.view(B, beams, vocab) + scores[:, :, None]).view(B, beams * vocab)
        scores, best = totals.topk(beams, dim=-1)  # sorted: beam 0 is the row's best so far
        rows = (first_row + best // vocab).view(-1)  # the source beam of each kept pair
        out = out[rows]
        out[:, t] = (best % vocab).view(-1)
        if t + 1 == T0 + max_new_tokens:
            break
        if cache is not None:
            cache.reorder(rows)
            logits = model(out[:, t : t + 1], cache).logits[:, -1]
        else:
            logits = model(out[:, : t + 1]).logits[:, -1]
    return out[::beams]


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pick one token per row from next-token logits (B, V): the argmax, or a sample after the filters."""
    if greedy:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth_best = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    if top_p is not None and top_p < 1.0:
        # Keep the smallest set of most likely tokens whose probability reaches top_p (the nucleus):
        # drop a token when the tokens ranked above it already reach top_p. The best one always stays.
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        mass_above = probs.cumsum(dim=-1) - probs
        sorted_logits = sorted_logits.masked_fill(mass_above >= top_p, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _check_beams(beams, temperature, top_k, top_p, greedy) -> None:
    if beams is None:
        return
    if isinstance(beams, bool) or not isinstance(beams, int) or beams < 1:
        raise ConfigError(f"beams={beams} must be null (sampling) or a whole number of beams, at least 1")
    sampling = {"temperature": temperature if temperature != 1.0 else None, "top_k": top_k, "top_p": top_p}
    if greedy or any(value is not None for value in sampling.values()):
        given = ", ".join(f"{k}={v}" for k, v in {**sampling, "greedy": greedy or None}.items() if v is not None)
        raise ConfigError(
            f"beams={beams} searches for the likeliest continuation and samples nothing: drop {given} "
            "(beams=1 is greedy)"
        )


def _check_arguments(model, prompt, max_new_tokens, temperature, top_k, top_p) -> None:
    if prompt.dim() != 2 or prompt.shape[1] == 0:
        raise ConfigError(
            f"prompt must be a (batch, tokens) tensor with at least one token, got shape {tuple(prompt.shape)}"
        )
    if prompt.dtype != torch.long:
        raise ConfigError(f"prompt must hold token ids (torch.long), got {prompt.dtype}")
    if max_new_tokens < 0:
        raise ConfigError(f"max_new_tokens={max_new_tokens} must be 0 or more")
    limit = model.config.context_length
    total = prompt.shape[1] + max_new_tokens
    if total > limit:
        raise ConfigError(
            f"prompt of {prompt.shape[1]} tokens + {max_new_tokens} new tokens = {total}, more than the "
            f"model's context_length={limit}; generate at most {max(limit - prompt.shape[1], 0)} new tokens"
        )
    if temperature <= 0:
        raise ConfigError(f"temperature={temperature} must be > 0 (use greedy=True for the argmax)")
    if top_k is not None and top_k < 1:
        raise ConfigError(f"top_k={top_k} must be None or at least 1")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ConfigError(f"top_p={top_p} must be None or in (0, 1]")
