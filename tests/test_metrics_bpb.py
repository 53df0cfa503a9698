"""Bits per byte over sliding windows equals a brute-force per-token computation."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch
from torch.utils.data import DataLoader

from tinygpt.data import BytesTokenizer, CharTokenizer
from tinygpt.data.encoded import encode_segments
from tinygpt.data.tokenizers import train_bpe
from tinygpt.data.windows import SlidingWindowDataset, sliding_windows
from tinygpt.metrics import BitsPerByte, score, unigram_entropy_bits

T = 16
KERNEL = T // 2 + 1  # the model sees the last KERNEL tokens: every scored target of a window has them

TRAIN = "The Time Traveller (for so it will be convenient to speak of him) was expounding a matter to us.\n" * 6
TEXT = (
    "The Time Traveller smiled. “Are you sure we can move freely in space?” — naïve café, ✅ and 🔗 too.\n"
    "Filby became pensive. Clearly, the Time Traveller proceeded, any real body must extend in four ways.\n"
) * 4


class Output(NamedTuple):
    logits: torch.Tensor


class CausalConvLM(torch.nn.Module):
    """Embedding + one causal convolution: the prediction at position i depends on tokens i-KERNEL+1 .. i."""

    def __init__(self, vocab: int, width: int = 12):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab, width)
        self.conv = torch.nn.Conv1d(width, width, KERNEL)
        self.out = torch.nn.Linear(width, vocab)
        self.double()

    def forward(self, ids: torch.Tensor) -> Output:
        h = self.embed(ids).transpose(1, 2)  # [B, width, L]
        h = torch.nn.functional.pad(h, (KERNEL - 1, 0))  # zeros before the first token: causal
        return Output(self.out(torch.tanh(self.conv(h)).transpose(1, 2)))


def brute_force_bits(model: CausalConvLM, ids: list[int]) -> float:
    """-log2 P(token p | the tokens before it), one forward per position p >= 1, on the context alone."""
    total = 0.0
    with torch.no_grad():
        for p in range(1, len(ids)):
            context = torch.tensor([ids[max(0, p - KERNEL) : p]])
            log_probs = model(context).logits[0, -1].log_softmax(-1)
            total -= float(log_probs[ids[p]]) / math.log(2)
    return total


@pytest.fixture
def one_thread():
    """Thousands of tiny forwards: a second intra-op thread only adds waiting, a lot on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tokenizers():
    return {"char": CharTokenizer.fit(TRAIN), "bytes": BytesTokenizer(), "bpe": train_bpe([TRAIN], 300)}


@pytest.mark.parametrize("kind", ["char", "bytes", "bpe"])
def test_bits_per_byte_equals_brute_force(kind, one_thread):
    tok = tokenizers()[kind]
    ids, token_bytes, token_chars = tok.encode_with_offsets(TEXT)
    model = CausalConvLM(tok.vocab_size)
    loader = DataLoader(SlidingWindowDataset(ids, token_bytes, token_chars, T), batch_size=5)
    result = score(model, loader)

    bits = brute_force_bits(model, ids.tolist())
    first_token = tok.decode(ids[:1])  # the first token has no context and is not scored
    scored_bytes = len(TEXT.encode()) - len(first_token.encode())
    assert result["bits_per_byte"] == pytest.approx(bits / scored_bytes, rel=1e-9)
    assert result["bits_per_token"] == pytest.approx(bits / (len(ids) - 1), rel=1e-9)
    assert result["bits_per_char"] == pytest.approx(bits / (len(TEXT) - len(first_token)), rel=1e-9)
    assert result["loss"] == pytest.approx(bits * math.log(2) / (len(ids) - 1), rel=1e-9)
    assert result["tokens"] == len(ids) - 1 and result["bytes"] == scored_bytes
    if kind == "char":
        assert tok.unseen_count(TEXT) > 0  # the unknown id is scored, and covers its characters' bytes


@pytest.mark.parametrize("n_tokens", [17, 18, 24, 25, 40, 57, 100, 1001])
@pytest.mark.parametrize("context", [16, 7, 2])
def test_every_target_is_scored_once_with_enough_context(n_tokens, context):
    if n_tokens < context + 1:
        pytest.skip("shorter than one window")
    starts, score_from = sliding_windows(n_tokens, context)
    counts = torch.zeros(n_tokens, dtype=torch.long)
    for start, first in zip(starts.tolist(), score_from.tolist(), strict=True):
        assert 0 <= start and start + context <= n_tokens - 1  # inside the text
        for j in range(first, context):
            target = start + 1 + j
            counts[target] += 1
            if start > 0:
                assert j >= context - context // 2  # later windows: at least T/2 tokens of context
    assert counts[0] == 0 and bool((counts[1:] == 1).all())
    assert int(score_from[0]) == 0  # the first window scores everything after the first token


def test_too_short_for_a_window_is_an_error():
    with pytest.raises(ValueError, match="fewer than one window"):
        sliding_windows(16, 16)


def test_per_document_totals_add_up():
    tok = BytesTokenizer()
    docs = [("a.txt", TEXT[:300]), ("b.txt", TEXT[300:700]), ("c.txt", TEXT[700:])]
    encoded = encode_segments(tok, docs)
    dataset = SlidingWindowDataset(encoded.ids, encoded.token_bytes, encoded.token_chars, T, encoded.token_doc)
    result = score(CausalConvLM(256), DataLoader(dataset, batch_size=8), n_documents=3)
    doc_bytes = [len(text.encode()) for _, text in docs]
    doc_bytes[0] -= 1  # the first byte of the text is not scored
    assert result["per_document_bytes"] == doc_bytes
    assert sum(result["per_document_bits"]) == pytest.approx(result["bits_per_byte"] * result["bytes"], rel=1e-12)


def test_unseen_characters_cost_bits_on_their_own_bytes():
    tok = CharTokenizer.fit("ab ")
    text = "ab é ✅ ba"
    ids, token_bytes, token_chars = tok.encode_with_offsets(text)
    assert tok.unseen_count(text) == 2 and ids.tolist().count(0) == 2
    metric = BitsPerByte()
    uniform = torch.zeros(1, len(ids) - 1, tok.vocab_size)  # log2(V) bits for every token
    scored = torch.ones(1, len(ids) - 1, dtype=torch.bool)
    metric.update(uniform, ids[None, 1:], scored, token_bytes[None, 1:], token_chars[None, 1:])
    result = metric.compute()
    assert int(result["bytes"]) == len(text.encode()) - 1  # é is 2 bytes, ✅ 3: id 0 carries them
    assert float(result["bits"]) == pytest.approx((len(ids) - 1) * math.log2(tok.vocab_size))


def test_metric_accumulates_in_float64_and_resets():
    metric = BitsPerByte()
    logits = torch.randn(2, 4, 5)
    ones = torch.ones(2, 4, dtype=torch.long)
    metric.update(logits, torch.zeros(2, 4, dtype=torch.long), ones.bool(), ones, ones)
    assert metric.bits.dtype == torch.float64 and float(metric.tokens) == 8
    metric.reset()
    assert float(metric.tokens) == 0


def test_unigram_entropy():
    assert unigram_entropy_bits([0, 1, 2, 3]) == pytest.approx(2.0)
    assert unigram_entropy_bits([5, 5, 5]) == pytest.approx(0.0)
    assert unigram_entropy_bits(torch.tensor([0, 0, 1, 1])) == pytest.approx(1.0)


class FakeClock:
    """Seconds that advance by ``tick`` at every reading."""

    def __init__(self, tick: float):
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_a_long_scoring_says_how_far_it_is_and_a_short_one_stays_silent(capsys):
    from tinygpt.common.progress import Progress

    quiet = Progress("scoring dev", total=100, clock=FakeClock(0.01))
    assert [quiet.update(done) for done in range(100)] == [None] * 100
    slow = Progress("scoring dev", total=40, clock=FakeClock(1.0))  # a batch a second
    lines = [line for done in range(40) if (line := slow.update(done))]
    # first after 5 s, then at most every 10 s; the ETA from the rate so far
    assert lines[0] == "scoring dev: 4/40 batches (10%), 5 s, about 45 s left"
    assert lines[1] == "scoring dev: 14/40 batches (35%), 15 s, about 28 s left"
    assert len(lines) == 4 and capsys.readouterr().out.count("[tinygpt] scoring dev: ") == 4


def test_score_reports_progress_through_the_same_lines(monkeypatch, capsys):
    import tinygpt.common.progress as progress

    monkeypatch.setattr(progress.time, "monotonic", FakeClock(3.0))
    text = "abcdefgh" * 40
    tokenizer = CharTokenizer.fit(text)
    encoded = encode_segments(tokenizer, [("doc", text)])
    dataset = SlidingWindowDataset(encoded.ids, encoded.token_bytes, encoded.token_chars, 16)
    loader = DataLoader(dataset, batch_size=2)
    vocab = tokenizer.vocab_size
    score(lambda x: torch.zeros(*x.shape, vocab), loader, what="scoring test")
    out = capsys.readouterr().out
    assert f"/{len(loader)} batches" in out and out.startswith("[tinygpt] scoring test: ")
