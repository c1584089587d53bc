"""`make bench`: kernel-side cost of attnscope against a bare forward pass, and bytes per layer sent.

Writes benchmarks/results.json and the table in benchmarks/README.md (between the markers).
Models: the embedded all-MiniLM-L6-v2, and a bert-base-shaped BertModel (BertConfig defaults,
random weights, 12 layers × 12 heads). Times are medians of repeated runs on this machine.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import attnscope  # noqa: E402
from attnscope.serialize import quantize_uint8  # noqa: E402

HERE = Path(__file__).resolve().parent
REPEATS = int(os.environ.get("BENCH_REPEATS", "9"))
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def text_of_length(tokenizer, n_tokens: int) -> str:
    """A text that tokenizes to exactly n_tokens with [CLS] and [SEP]."""
    words = ("the quick brown fox jumps over the lazy dog while a cat watches " * 200).split()
    ids = tokenizer(" ".join(words), add_special_tokens=False, verbose=False)["input_ids"][: n_tokens - 2]
    return tokenizer.decode(ids)


def median_seconds(*fns) -> list[float]:
    """Median time of each function, run alternately so that machine noise hits all alike."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(REPEATS):
        for fn, bucket in zip(fns, times):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) for bucket in times]


def bench_model(label: str, engine: attnscope.AttentionModel, n_tokens: int) -> dict:
    text = text_of_length(engine.tokenizer, n_tokens)
    inputs = engine.tokenizer(text, return_tensors="pt").to(engine.device)
    assert inputs["input_ids"].shape[1] == n_tokens, inputs["input_ids"].shape

    def bare():
        with torch.inference_mode():
            engine.model(**inputs, output_attentions=True)

    def ours():
        engine.run(text)

    bare_s, ours_s = median_seconds(bare, ours)
    result = engine.run(text)
    first_layer_bytes = len(quantize_uint8(result.attention[0])["data"])
    all_layers_float32 = result.attention.numel() * 4
    return {
        "model": label,
        "tokens": n_tokens,
        "layers": result.n_layers,
        "heads": result.n_heads,
        "bare_forward_s": round(bare_s, 4),
        "attnscope_run_s": round(ours_s, 4),
        "run_over_bare": round(ours_s / bare_s, 3),
        "first_layer_bytes": first_layer_bytes,
        "all_layers_float32_bytes": all_layers_float32,
    }


def main() -> None:
    torch.manual_seed(0)
    minilm = attnscope.load(device="cpu")
    bert_base = attnscope.load(transformers.BertModel(transformers.BertConfig()).eval(), minilm.tokenizer, device="cpu")
    rows = []
    for label, engine in (("all-MiniLM-L6-v2 (embedded)", minilm), ("bert-base shape (random)", bert_base)):
        for n_tokens in (128, 512):
            row = bench_model(label, engine, n_tokens)
            print(json.dumps(row), flush=True)
            rows.append(row)
    results = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform()},
        "repeats": REPEATS,
        "engine": rows,
    }
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_table(rows)


def write_table(rows: list[dict]) -> None:
    lines = [
        BEGIN,
        "| model | tokens | bare forward (s) | attnscope run (s) | run / bare | first layer sent (bytes) | all layers as float32 (bytes) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['tokens']} | {r['bare_forward_s']} | {r['attnscope_run_s']} | {r['run_over_bare']} "
            f"| {r['first_layer_bytes']:,} | {r['all_layers_float32_bytes']:,} |"
        )
    lines.append(END)
    readme = HERE / "README.md"
    text = readme.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    readme.write_text(text[:start] + "\n".join(lines) + text[end:])


if __name__ == "__main__":
    main()
