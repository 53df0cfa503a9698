"""tinygpt's tokenizers as files that `transformers.AutoTokenizer` loads, and tokenizers read back from a folder.

Each kind becomes a Hugging Face `tokenizers` pipeline that gives the same ids and the same text as tinygpt's:
- bpe, gpt2: already a `tokenizers` byte-level BPE, written as is.
- char: a WordLevel model over the fitted characters, a pre-tokenizer that splits off every character and a
  Fuse decoder that joins them back without spaces; id 0, tinygpt's unknown id, is U+FFFD, which is also what
  tinygpt decodes it to.
- bytes: a BPE with no merges whose vocabulary is GPT-2's 256 byte symbols in byte order, behind a byte-level
  pre-tokenizer without its regex: id = byte value, and decoding replaces broken UTF-8 as tinygpt does.
No special tokens are registered, because tinygpt has none: the text "<|endoftext|>" is plain text on both sides.
The exact tinygpt tokenizer is also written as tinygpt_tokenizer.json, so that an import gets it back unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from tinygpt.data.tokenizers import (
    ByteLevelBPETokenizer,
    CharTokenizer,
    Tokenizer,
    _byte_level_alphabet,
    load_gpt2,
    load_tokenizer,
)
from tinygpt.export.families import ExportError

TINYGPT_TOKENIZER = "tinygpt_tokenizer.json"


def tokenizer_refusal(tokenizer: Tokenizer) -> str | None:
    """Why `tokenizer` has no transformers equivalent, or None: checked without importing transformers."""
    if isinstance(tokenizer, CharTokenizer) and CharTokenizer.UNKNOWN_TEXT in tokenizer.chars:
        return (
            f"cannot export the char tokenizer: its vocabulary holds {CharTokenizer.UNKNOWN_TEXT!r}, which is also "
            "what its unknown id 0 decodes to, so no WordLevel vocabulary can give both ids"
        )
    if not isinstance(tokenizer, (ByteLevelBPETokenizer, CharTokenizer)) and tokenizer.name != "bytes":
        return f"cannot export tokenizer kind {tokenizer.name!r}: known kinds are char, bytes, bpe, gpt2"
    return None


def hf_tokenizer(tokenizer: Tokenizer, context_length: int):
    """A transformers PreTrainedTokenizerFast equivalent to `tokenizer`."""
    refused = tokenizer_refusal(tokenizer)
    if refused is not None:
        raise ExportError(refused)
    from tokenizers import Regex, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer
    from transformers import PreTrainedTokenizerFast

    if isinstance(tokenizer, ByteLevelBPETokenizer):
        hf = HFTokenizer.from_str(tokenizer.hf.to_str())
    elif isinstance(tokenizer, CharTokenizer):
        unknown = CharTokenizer.UNKNOWN_TEXT
        vocab = {unknown: CharTokenizer.UNKNOWN_ID, **{c: i + 1 for i, c in enumerate(tokenizer.chars)}}
        hf = HFTokenizer(models.WordLevel(vocab, unk_token=unknown))
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        hf.decoder = decoders.Fuse()
    elif tokenizer.name == "bytes":
        by_byte = {b: c for c, b in _byte_level_alphabet().items()}
        hf = HFTokenizer(models.BPE({by_byte[b]: b for b in range(256)}, []))
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        hf.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=hf, model_max_length=context_length, clean_up_tokenization_spaces=False
    )


def save_tokenizer(tokenizer: Tokenizer, context_length: int, folder: Path) -> None:
    """tokenizer.json + tokenizer_config.json for transformers, and tinygpt_tokenizer.json for tinygpt."""
    hf_tokenizer(tokenizer, context_length).save_pretrained(folder)
    (folder / TINYGPT_TOKENIZER).write_text(tokenizer.to_json(), encoding="utf-8")


def read_tokenizer(folder: Path) -> Tokenizer:
    """tinygpt's tokenizer for a transformers folder: tinygpt_tokenizer.json (a tinygpt export), else a
    byte-level BPE tokenizer.json, else GPT-2's vocab.json + merges.txt."""
    from tokenizers import Tokenizer as HFTokenizer

    if (folder / TINYGPT_TOKENIZER).is_file():
        return load_tokenizer(folder / TINYGPT_TOKENIZER)
    if (folder / "tokenizer.json").is_file():
        spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        pre = spec.get("pre_tokenizer") or {}
        if spec.get("model", {}).get("type") == "BPE" and pre.get("type") == "ByteLevel":
            hf = HFTokenizer.from_str(json.dumps(spec))
            return ByteLevelBPETokenizer(hf, "gpt2" if hf.get_vocab_size() == 50257 else "bpe")
        raise ExportError(
            f"cannot import {folder / 'tokenizer.json'}: tinygpt reads byte-level BPE tokenizers "
            f"(model BPE, pre_tokenizer ByteLevel), not model {spec.get('model', {}).get('type')!r} "
            f"with pre_tokenizer {pre.get('type')!r}"
        )
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        return load_gpt2(folder / "vocab.json", folder / "merges.txt")
    raise ExportError(
        f"cannot import {folder}: no tokenizer found (need {TINYGPT_TOKENIZER}, a byte-level BPE "
        "tokenizer.json, or vocab.json + merges.txt)"
    )
