"""Throughput of the corpus analyses (issue 5) in Clark et al.'s setting: documents of 128 tokens,
`[CLS] A [SEP] B [SEP]`, batches of 8, one pass each. Reports documents per second and the time
the paper's 1000-document corpus would take at that rate on this machine.

Run alone: python benchmarks/analysis_bench.py  (run.py calls it for `make bench`).
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

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
        "head_finder (every metric and the top examples; issue 35: ≤ 60 s for 1,000)": lambda: attnscope.head_finder(
            model, docs, progress=False),
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


# Issue 34's setting: 1,000 sentences of about 25 words, the embedded model.
READING_LIST_SENTENCES = int(os.environ.get("BENCH_READING_LIST_SENTENCES", "1000"))
SUBJECTS = ["the committee", "a young doctor", "the old lighthouse keeper", "my neighbour", "the students", "a tired engineer"]
VERBS = ["postponed", "discussed", "carefully read", "quietly repaired", "praised", "ignored"]
OBJECTS = ["the report", "every letter from the ministry", "a broken radio", "the long budget", "their plans", "the new bridge"]
ENDINGS = ["because it arrived late on a rainy Monday morning", "before anyone in the village had woken up",
           "although several members argued about it for hours", "while the children played outside near the river"]


def reading_list_sentences(n: int) -> list[str]:
    """n varied sentences of 20 to 27 words."""
    out = []
    for i in range(n):
        s = f"{SUBJECTS[i % 6]} {VERBS[(i // 6) % 6]} {OBJECTS[(i // 36) % 6]} {ENDINGS[i % 4]}, and then {SUBJECTS[(i + 3) % 6]} {VERBS[(i + 1) % 6]} {OBJECTS[(i + 2) % 6]}."
        out.append(s[0].upper() + s[1:])
    return out


def forward_passes_s(model: attnscope.AttentionModel, texts: list[str], passes: int = 1) -> float:
    """The model's forward passes alone over `texts` (batches of 8, as the analyses run them)."""
    import torch

    from attnscope.analyses.corpus import documents, encode_batch, in_batches

    docs = documents(texts)
    batches = [encode_batch(model, batch, 128) for batch in in_batches(docs, 8)]
    start = time.perf_counter()
    with torch.inference_mode():
        for _ in range(passes):
            for encoded in batches:
                model.forward(encoded)
    return time.perf_counter() - start


def bench_reading_list(model: attnscope.AttentionModel, n: int = READING_LIST_SENTENCES) -> list[dict]:
    """Issue 34's targets: each analysis over 1,000 sentences of 25 words in at most 2 minutes and
    at most 4 × its forward passes alone (the pruning curve runs one pass per step it measures)."""
    texts = reading_list_sentences(n)
    steps = 8
    one_pass = forward_passes_s(model, texts)
    # A copy with other weights, as a fine-tuned model is (the comparison reads both models' maps).
    copied = copy.deepcopy(model.model)
    with torch.no_grad():
        for parameter in copied.parameters():
            parameter.mul_(1.01)
    tuned = attnscope.load(copied, model.tokenizer, device=str(model.device))
    runs = {
        "head_roles (Voita et al.)": (lambda: attnscope.head_roles(model, texts, progress=False), 1),
        "attention_patterns (Kovaleva et al.)": (lambda: attnscope.attention_patterns(model, texts, progress=False), 1),
        "attention_similarity, base against a copy (Kovaleva et al.)": (
            lambda: attnscope.attention_similarity(model, tuned, texts, progress=False), 2),
        f"pruning_curve, {steps} steps (importance + {steps + 1} passes)": (
            lambda: attnscope.pruning_curve(model, texts, steps=steps, progress=False), steps + 1),
    }
    rows = []
    for name, (fn, passes) in runs.items():
        seconds = timed(fn)
        rows.append({"model": "all-MiniLM-L6-v2 (embedded)", "analysis": name, "documents": n, "seconds": round(seconds, 1),
                     "forward_s": round(one_pass * passes, 1), "over_forward": round(seconds / (one_pass * passes), 2),
                     "reading_list": True})
        print(json.dumps(rows[-1]), flush=True)
    # Clark's Table 3 on the shipped sentences (spaCy's parses): every probe to its best epoch.
    data = Path(__file__).resolve().parent.parent / "notebooks" / "data"
    shipped = [s for name in ("sentences.txt", "more_sentences.txt")
               for s in (data / name).read_text(encoding="utf-8").splitlines() if s.strip()]
    seconds = timed(lambda: attnscope.attention_probes(model, shipped, progress=False))
    passes = forward_passes_s(model, shipped) * 2  # the model's maps and a random copy's
    rows.append({"model": "all-MiniLM-L6-v2 (embedded)", "analysis": "attention_probes, 5 probes × 10 epochs (Clark et al. Table 3)",
                 "documents": len(shipped), "seconds": round(seconds, 1), "forward_s": round(passes, 1),
                 "over_forward": round(seconds / passes, 2), "reading_list": True, "limit_s": 180, "no_ratio": True})
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
        if r.get("reading_list"):
            continue
        lines.append(
            f"| {r['model']} | {r['analysis']} | {r['documents']} | {r['seconds']:.1f} s | {r['docs_per_s']} "
            f"| {r['seconds_for_1000']:.0f} s |"
        )
    reading = [r for r in rows if r.get("reading_list")]
    if reading:
        lines += [
            "",
            "### The reading list's analyses (issue 34): 1,000 sentences of 20–27 words, all-MiniLM-L6-v2, this 2-core CPU",
            "",
            "| analysis | sentences | time (≤ 2 min) | its forward passes alone | time / forward passes (≤ 4) |",
            "|---|---|---|---|---|",
            *[f"| {r['analysis']} | {r['documents']:,} | {r['seconds']:.1f} s "
              f"{'✅' if r['seconds'] <= r.get('limit_s', 120) else '❌'}{' (≤ 3 min: the probe)' if r.get('limit_s') else ''} "
              f"| {r['forward_s']:.1f} s | {r['over_forward']:.2f} "
              f"{'(training, not passes)' if r.get('no_ratio') else '✅' if r['over_forward'] <= 4 else '❌'} |" for r in reading],
        ]
    return lines


if __name__ == "__main__":
    print("\n".join(table(bench_analyses("all-MiniLM-L6-v2 (embedded)", attnscope.load(device="cpu")))))
