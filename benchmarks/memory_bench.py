"""Kernel memory when a widget cell is re-run: 20 re-runs of a 512-token cell, closing each time.

A re-run cell closes its old widget and makes a new one. Before the fix, anywidget's file watcher
held every widget ever made (with its ~190 MB of result tensors on bert-base at 512 tokens), so
the kernel grew by one widget per re-run. Target: after 20 re-runs the kernel has grown by at most
1.2 × one widget.

Measured in a fresh child process (resident set size from /proc), so the parent's allocations do
not blur it. Run alone: python benchmarks/memory_bench.py
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RERUNS = 20
TOKENS = 512
TARGET_RATIO = 1.2


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS not found in /proc/self/status")


def release_freed_heap() -> None:
    """Hands memory that Python and torch have freed back to the OS (glibc keeps it otherwise),
    so the resident size counts what is still held, not the allocator's cache."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def live(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


def measure() -> dict:
    """In this process: RSS growth of one widget, then of 20 close-and-rerun cycles."""
    import torch
    import transformers
    from run import text_of_length

    import attnscope

    torch.manual_seed(0)
    tokenizer = attnscope.load(device="cpu").tokenizer
    engine = attnscope.load(transformers.BertModel(transformers.BertConfig()).eval(), tokenizer, device="cpu")
    text = text_of_length(tokenizer, TOKENS)

    def settle() -> int:
        gc.collect()
        release_freed_heap()
        return rss_bytes()

    # Warm-up: the first run allocates torch's and the tokenizer's caches, which stay.
    widget = attnscope.AttentionWidget(text, model=engine)
    widget.close()
    del widget
    before = settle()
    widget = attnscope.AttentionWidget(text, model=engine)
    one_widget = settle() - before
    result = widget.result
    tensors = sum(t.numel() * t.element_size() for t in (result.attention, result.queries, result.keys) if t is not None)
    del result
    for _ in range(RERUNS):
        widget.close()  # what re-running the cell does to the old widget's view
        widget = attnscope.AttentionWidget(text, model=engine)
    after = settle()
    growth = after - before
    # What the ratio stands for, counted directly: only the last cell's widget and result live.
    from attnscope.engine.results import AttentionResult

    widgets_alive, results_alive = live(attnscope.AttentionWidget), live(AttentionResult)
    return {
        "model": "bert-base shape (random)",
        "tokens": TOKENS,
        "reruns": RERUNS,
        "one_widget_bytes": one_widget,
        "result_tensor_bytes": tensors,
        "growth_after_reruns_bytes": growth,
        "growth_over_one_widget": round(growth / one_widget, 3),
        "target": TARGET_RATIO,
        "widgets_alive_after": widgets_alive,
        "results_alive_after": results_alive,
    }


def bench_memory() -> dict:
    """Runs `measure` in a child process and returns its row."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, os.path.join(here, "memory_bench.py"), "--child"],
        check=True, capture_output=True, text=True, cwd=here,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(row: dict) -> list[str]:
    met = "✅" if row["growth_over_one_widget"] <= row["target"] else "❌"
    return [
        f"### Kernel memory: {row['reruns']} re-runs of a {row['tokens']}-token cell, closing each time ({row['model']})",
        "",
        "| one widget (its result tensors) | growth after the re-runs | growth / one widget | target | met | widgets / results alive after |",
        "|---|---|---|---|---|---|",
        f"| {row['one_widget_bytes'] / 1e6:,.1f} MB ({row['result_tensor_bytes'] / 1e6:,.1f} MB) "
        f"| {row['growth_after_reruns_bytes'] / 1e6:,.1f} MB "
        f"| {row['growth_over_one_widget']} | ≤ {row['target']} | {met} "
        f"| {row.get('widgets_alive_after', '?')} / {row.get('results_alive_after', '?')} |",
    ]


if __name__ == "__main__":
    if "--child" in sys.argv:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        print(json.dumps(measure()))
    else:
        print(json.dumps(bench_memory()))
