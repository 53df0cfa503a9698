"""KV-cache generation: identical to the uncached loop for every variant; sampling; limits."""

import pytest
import torch
from model_variants import VARIANTS

from tinygpt.model import GPT, GPTConfig, KVCache, generate, kv_cache_bytes_per_token
from tinygpt.model.generate import sample_next


def tiny_model(seed: int = 0, **overrides) -> GPT:
    """Float64 with a wide init, so logits are well separated and argmax ties cannot flip a greedy step."""
    fields = dict(vocab_size=61, context_length=64, d_model=32, n_layers=2, n_heads=4, init_std=0.2)
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**fields, **overrides})).double().eval()


@pytest.mark.parametrize("name", VARIANTS)
def test_cached_and_uncached_greedy_generation_are_identical(name):
    model = tiny_model(**VARIANTS[name])
    prompt = torch.randint(0, 61, (2, 5), generator=torch.Generator().manual_seed(1))
    cached = generate(model, prompt, 55, greedy=True, use_cache=True)
    uncached = generate(model, prompt, 55, greedy=True, use_cache=False)
    assert cached.shape == (2, 60)
    assert torch.equal(cached, uncached)
    assert torch.equal(cached[:, :5], prompt)


@pytest.mark.parametrize("name", VARIANTS)
def test_cached_logits_match_full_forward_in_uneven_chunks(name):
    """Feeding the text through the cache in chunks of 5, 7, 1, ... gives the full pass's logits."""
    model = tiny_model(**VARIANTS[name])
    tokens = torch.randint(0, 61, (2, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(tokens).logits
        cache = KVCache.for_model(model, batch_size=2)
        pieces, start = [], 0
        for size in (5, 7, 1, 1, 10, 16):
            pieces.append(model(tokens[:, start : start + size], cache).logits)
            start += size
    assert cache.position == 40
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-10)


def test_cache_is_preallocated_once_and_stores_keys_before_the_gqa_repeat():
    model = tiny_model(n_kv_heads=2)
    cache = KVCache.for_model(model, batch_size=3)
    assert cache.keys[0].shape == (3, 2, 64, 8)  # n_kv_heads, not n_heads
    assert cache.nbytes == 3 * 64 * kv_cache_bytes_per_token(model.config, bytes_per_number=8)
    addresses = [t.data_ptr() for t in cache.keys + cache.values]
    with torch.no_grad():
        model(torch.randint(0, 61, (3, 6)), cache)
        model(torch.randint(0, 61, (3, 1)), cache)
    assert [t.data_ptr() for t in cache.keys + cache.values] == addresses  # written in place
    assert cache.keys[1][:, :, :7].abs().sum() > 0 and cache.keys[1][:, :, 7:].abs().sum() == 0


def test_generation_past_the_context_is_an_error_naming_the_numbers():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"10 tokens \+ 55 new tokens = 65.*context_length=64"):
        generate(model, torch.zeros(1, 10, dtype=torch.long), 55)
    generate(model, torch.zeros(1, 10, dtype=torch.long), 54)  # exactly fills the context


def test_forward_past_the_cache_or_the_context_is_an_error():
    model = tiny_model()
    cache = KVCache.for_model(model, batch_size=1)
    with torch.no_grad():
        model(torch.zeros(1, 60, dtype=torch.long), cache)
        with pytest.raises(ValueError, match="KV cache is full: 60 positions stored \\+ 5 new = 65"):
            model(torch.zeros(1, 5, dtype=torch.long), cache)
        with pytest.raises(ValueError, match="65 tokens is longer than context_length=64"):
            model(torch.zeros(1, 65, dtype=torch.long))
        with pytest.raises(ValueError, match="batch size 1"):
            model(torch.zeros(2, 1, dtype=torch.long), cache)


def test_generate_restores_training_mode_and_tracks_no_gradients():
    model = tiny_model()
    model.train()
    generate(model, torch.zeros(1, 3, dtype=torch.long), 4)
    assert model.training
    model.eval()
    generate(model, torch.zeros(1, 3, dtype=torch.long), 4)
    assert not model.training


def test_seeded_sampling_is_reproducible_and_filters_collapse_to_greedy():
    model = tiny_model()
    prompt = torch.zeros(1, 3, dtype=torch.long)

    def sample(seed, **kw):
        return generate(model, prompt, 20, generator=torch.Generator().manual_seed(seed), **kw)

    assert torch.equal(sample(7, temperature=1.5), sample(7, temperature=1.5))
    assert not torch.equal(sample(7, temperature=1.5), sample(8, temperature=1.5))
    greedy = generate(model, prompt, 20, greedy=True)
    assert torch.equal(sample(7, top_k=1), greedy)
    assert torch.equal(sample(7, top_p=1e-6), greedy)
    assert torch.equal(sample(7, top_k=5, use_cache=False), sample(7, top_k=5, use_cache=True))


def test_top_k_and_top_p_keep_only_the_allowed_tokens():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(2000, 1)
    g = torch.Generator().manual_seed(0)
    assert set(sample_next(logits, top_k=2, generator=g).tolist()) == {0, 1}
    assert set(sample_next(logits, top_p=0.7, generator=g).tolist()) == {0, 1}  # 0.5 < 0.7 <= 0.8
    assert set(sample_next(logits, top_p=0.85, generator=g).tolist()) == {0, 1, 2}
    assert set(sample_next(logits, generator=g).tolist()) == {0, 1, 2, 3}
    assert sample_next(logits[:1], greedy=True).tolist() == [0]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": 0.0}, "temperature=0.0 must be > 0"),
        ({"top_k": 0}, "top_k=0"),
        ({"top_p": 1.5}, r"top_p=1.5 must be None or in \(0, 1\]"),
    ],
)
def test_bad_sampling_arguments_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(tiny_model(), torch.zeros(1, 3, dtype=torch.long), 4, **kwargs)


def total_log_prob(model, sequence: torch.Tensor, prompt_length: int) -> float:
    """The summed log-probability of a sequence's continuation under the model."""
    with torch.no_grad():
        log_probs = model(sequence[None]).logits[0].log_softmax(-1)
    steps = range(prompt_length, sequence.shape[0])
    return sum(log_probs[t - 1, sequence[t]].item() for t in steps)


def test_beam_search_wide_enough_is_the_exact_likeliest_continuation():
    """With as many beams as there are continuations of all but the last step, beam search prunes nothing, so it
    must return the argmax over every continuation, found here by brute force; a narrow beam may not."""
    model = tiny_model(vocab_size=7, init_std=0.6)
    prompt = torch.tensor([[1, 4]])
    candidates = torch.cartesian_prod(*[torch.arange(7)] * 3)  # every 3-token continuation
    scores = [total_log_prob(model, torch.cat([prompt[0], c]), 2) for c in candidates]
    best = candidates[max(range(len(scores)), key=scores.__getitem__)]
    searched = generate(model, prompt, 3, beams=49)
    assert searched[0, 2:].tolist() == best.tolist()
    assert total_log_prob(model, searched[0], 2) == pytest.approx(max(scores), abs=1e-12)
    assert generate(model, prompt, 3, beams=1).tolist() == generate(model, prompt, 3, greedy=True).tolist()


@pytest.mark.parametrize("name", ["rope", "gqa", "alibi", "learned", "moe"])
def test_beam_search_is_the_same_with_or_without_the_cache_and_row_by_row(name):
    model = tiny_model(**VARIANTS[name])
    prompts = torch.randint(0, 61, (3, 4), generator=torch.Generator().manual_seed(3))
    cached = generate(model, prompts, 12, beams=4)
    assert torch.equal(cached, generate(model, prompts, 12, beams=4, use_cache=False))
    for row in range(3):  # the rows of a batch are searched independently
        assert torch.equal(cached[row : row + 1], generate(model, prompts[row : row + 1], 12, beams=4))
    assert torch.equal(cached[:, :4], prompts)


def test_beam_search_follows_an_lstms_state():
    from tinygpt.model.lstm import CharLSTM, LSTMConfig

    torch.manual_seed(0)
    model = CharLSTM(LSTMConfig(vocab_size=23, context_length=32, d_model=16, n_layers=2)).double().eval()
    prompt = torch.tensor([[3, 5, 7]])
    assert torch.equal(generate(model, prompt, 10, beams=3), generate(model, prompt, 10, beams=3, use_cache=False))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beams": 0}, r"beams=0 must be null \(sampling\) or a whole number of beams, at least 1"),
        ({"beams": 3, "top_k": 5}, r"beams=3 searches for the likeliest continuation and samples nothing: drop top_k"),
        ({"beams": 2, "temperature": 0.7}, r"drop temperature=0.7"),
    ],
)
def test_beam_search_refuses_sampling_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(tiny_model(), torch.tensor([[1]]), 3, **kwargs)
