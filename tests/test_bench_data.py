"""tinygpt-bench-data on corpora of a few megabytes: every figure of its page is there and reads as a number."""

from __future__ import annotations

import re

from tinygpt.bench import data as bench_data


def test_bench_data_writes_its_page(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGPT_PREPARED", str(tmp_path / "unused"))  # the bench sets its own folders
    out = tmp_path / "data.md"
    argv = [
        "--work",
        str(tmp_path / "work"),
        "--large-mb",
        "4",
        "--sample-mb",
        "1",
        "--repeats",
        "1",
        "--out",
        str(out),
    ]
    assert bench_data.main(argv) == 0
    page = out.read_text()
    for tokenizer in ("gpt2", "bpe", "char"):
        row = next(line for line in page.splitlines() if line.startswith(f"| {tokenizer} |"))
        cells = row.strip("|").split("|")
        rates = [float(cell.split()[0].replace(",", "")) for cell in cells[1:5] + cells[7:8]]
        assert all(rate > 0 for rate in rates), row  # prepare, a thread, alone, a thread, decoding once
        assert re.fullmatch(r" -?\d+% ", cells[6]) and re.fullmatch(r" -?\d+% ", cells[8]), row  # the two overheads
        assert int(cells[8].strip(" %")) <= int(cells[6].strip(" %")), row  # decoding only adds to the ceiling's time
    fitted = next(line for line in page.splitlines() if line.startswith("| bpe |") and line.count("|") == 5)
    assert re.fullmatch(r"\| bpe \| [\d.]+ \([\d.]+–[\d.]+\) \| [\d.]+ \([\d.]+–[\d.]+\) \| -?\d+% \|", fitted), fitted
    assert "bpe " in page and "against its fit and encoding)" in page
    beyond = next(line for line in page.splitlines() if "against decoding the text once and the tokenizer" in line)
    assert re.fullmatch(r"- .*: gpt2 -?\d+%, bpe -?\d+%, char -?\d+%", beyond), beyond
    prepared, run = [line for line in page.splitlines() if line.startswith("| large |")]
    prepared_dev, with_dev = [line for line in page.splitlines() if line.startswith("| large, dev = last 10% |")]
    assert re.fullmatch(r"\| large, dev = last 10% \| [\d.]+ \| [\d,]+ \|", prepared_dev), prepared_dev
    assert re.match(r"\| large, dev = last 10% \| 4 MiB \| \| [\d.]+ \([\d.]+–[\d.]+\) \| [\d,]+ \(", with_dev), (
        with_dev
    )
    assert re.fullmatch(r"\| large \| [\d.]+ \| [\d,]+ \|", prepared), prepared  # tinygpt-prepare: time, peak RSS
    assert re.match(r"\| large \| 4 MiB \| [\d,]+ \| [\d.]+ \([\d.]+–[\d.]+\) \| [\d,]+ \(", run), run
    assert "peak RSS, large − tiny" in page
    for case in bench_data.LOADER_CASES:  # the loader: each way of reading, a rate and its spread
        row = next(line for line in page.splitlines() if line.startswith(f"| {case} |"))
        assert re.fullmatch(rf"\| {case} \| [\d.,]+ \([\d.,]+–[\d.,]+\) \|", row), row
    assert re.search(
        r"- loader from the page cache: [\d.,]+ M tokens/s on one thread \(goal ≥ 20 M; indexing the map", page
    )
    assert re.search(r"- loader from disk: [\d.,]+ M tokens/s \(indexing the map [\d.,]+\); with a step of 16 ms", page)
    assert "with a dev split of 10% of the large corpus, against none:" in page
    documents = sorted(p.name for p in (tmp_path / "work" / "large-4m").iterdir())
    assert documents == ["doc00000.txt", "doc00001.txt", "doc00002.txt", "doc00003.txt"]
