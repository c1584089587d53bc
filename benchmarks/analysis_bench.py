"""Throughput of the corpus analyses (issue 5) in Clark et al.'s setting: documents of 128 tokens,
`[CLS] A [SEP] B [SEP]`, batches of 8, one pass each. Reports documents per second and the time
the paper's 1000-document corpus would take at that rate on this machine.

Run alone: python benchmarks/analysis_bench.py  (run.py calls it for `make bench`).
"""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import attnscope

DOCUMENTS = int(os.environ.get("BENCH_ANALYSIS_DOCS", "48"))
SENTENCE_WORDS = (
    "the committee postponed its decision because the report arrived late , and several members argued "
    "that the budget should have been discussed first . "
).split()


def corpus(tokenizer, n_docs: int, n_tokens: int = 128) -> list[tuple[str, str]]:
    """Pairs of paragraphs that together fill about n_tokens (varied so padding is exercised)."""
    pairs = []
    for i in range(n_docs):
        words = (SENTENCE_WORDS * 20)[i % 7 :]
        half = (n_tokens - 3) // 2 - (i % 5)
        ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]
        pairs.append((tokenizer.decode(ids[:half]), tokenizer.decode(ids[half : 2 * half])))
    return pairs


def sentences(n: int) -> list[str]:
    base = " ".join(SENTENCE_WORDS).replace(" ,", ",").replace(" .", ".")
    return [base] * n


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_analyses(label: str, model: attnscope.AttentionModel, n_docs: int = DOCUMENTS) -> list[dict]:
    docs = corpus(model.tokenizer, n_docs)
    texts = sentences(n_docs)
    attnscope.head_stats(model, docs[:8], progress=False)  # warm-up
    runs = {
        "head_stats": lambda: attnscope.head_stats(model, docs, progress=False),
        "head_distances": lambda: attnscope.head_distances(model, docs, progress=False),
        "syntax_heads (25-word sentences, spaCy parse included)": lambda: attnscope.syntax_heads(model, texts, progress=False),
        "head_importance": lambda: attnscope.head_importance(model, docs, progress=False),
        "attention_gradients": lambda: attnscope.attention_gradients(model, docs, progress=False),
    }
    rows = []
    for name, fn in runs.items():
        seconds = timed(fn)
        rows.append(
            {
                "model": label,
                "analysis": name,
                "documents": n_docs,
                "seconds": round(seconds, 2),
                "docs_per_s": round(n_docs / seconds, 1),
                "seconds_for_1000": round(1000 * seconds / n_docs, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict]) -> list[str]:
    lines = [
        "### Corpus analyses (issue 5): 128-token documents, batches of 8, this 2-core CPU machine",
        "",
        "| model | analysis | documents | time | documents / s | 1000 documents (Clark et al.'s corpus size) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['analysis']} | {r['documents']} | {r['seconds']:.1f} s | {r['docs_per_s']} "
            f"| {r['seconds_for_1000']:.0f} s |"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table(bench_analyses("all-MiniLM-L6-v2 (embedded)", attnscope.load(device="cpu")))))
