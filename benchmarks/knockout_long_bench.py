"""Knockout at a long prompt (issue 48 / 47): the last token → a 10-token span blocked in every
head of layers 16–24 of SmolLM2-135M-Instruct, at a prompt of --tokens token ids; the call's time
and the process's peak RSS. One knockout per process (peak RSS is the process's), so run it once
per size and per checkout:

    nice -n 15 env PYTHONPATH=src .venv/bin/python benchmarks/knockout_long_bench.py --tokens 8192

Prints one JSON line: tokens, seconds, peak RSS before and after the call (GiB), the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LAYERS = range(16, 25)
SPAN = range(100, 110)


def peak_rss_gib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)  # kB on Linux


def measure(tokens: int) -> dict:
    import attnscope

    engine = attnscope.load("smollm2", device="cpu")
    words = "The Eiffel Tower is in the city of Paris, the capital of France, on the Seine. "
    ids: list[int] = []
    while len(ids) < tokens:
        ids += engine.tokenizer(words, add_special_tokens=False)["input_ids"]
    ids = ids[:tokens]
    edges = [(layer, None, -1, list(SPAN)) for layer in LAYERS]
    before = peak_rss_gib()
    start = time.perf_counter()
    frame = attnscope.knockout(engine, ids, edges=edges)
    seconds = time.perf_counter() - start
    return {"model": engine.name, "tokens": tokens, "layers": f"{LAYERS.start}-{LAYERS.stop - 1}",
            "keys": f"{SPAN.start}-{SPAN.stop - 1}", "seconds": round(seconds, 1), "peak_rss_before_gib": before,
            "peak_rss_after_gib": peak_rss_gib(), "delta": float(frame.delta.iloc[0]),
            "load": [round(x, 2) for x in os.getloadavg()]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=8192)
    print(json.dumps(measure(parser.parse_args().tokens)), flush=True)
