"""Corpus analyses, one process versus Ray Data on this machine (issue 21): the embedded MiniLM,
documents of 128 tokens in batches of 8, on a local Ray cluster of this machine's CPUs.

Reported: documents per second each way, the cluster's start (once per session), and what a Ray
run pays before its first batch (the actors start and receive the model). Run alone:
python benchmarks/ray_bench.py  (run.py calls it for `make bench`).
"""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from analysis_bench import corpus

import attnscope

DOCUMENTS = int(os.environ.get("BENCH_RAY_DOCS", "192"))


def bench_ray(n_docs: int = DOCUMENTS) -> list[dict]:
    import ray

    model = attnscope.load(device="cpu")
    docs = corpus(model.tokenizer, n_docs)
    attnscope.head_stats(model, docs[:8], progress=False)  # warm-up
    start = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    init_s = time.perf_counter() - start
    rows = []
    try:
        # What a run pays before its first batch: one document, so the run is almost all start-up.
        start = time.perf_counter()
        attnscope.head_stats(model, docs[:2], progress=False, backend="ray")
        overhead_s = time.perf_counter() - start
        for name in ("head_stats", "head_distances"):
            run = getattr(attnscope, name)
            for backend in ("local", "ray"):
                start = time.perf_counter()
                run(model, docs, progress=False, backend=backend)
                seconds = time.perf_counter() - start
                rows.append({"analysis": name, "backend": backend, "documents": n_docs, "seconds": round(seconds, 2),
                             "docs_per_s": round(n_docs / seconds, 1), "cpus": os.cpu_count(),
                             "ray_init_s": round(init_s, 1), "ray_run_overhead_s": round(overhead_s, 1)})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        ray.shutdown()
    return rows


def table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    first = rows[0]
    lines = [
        f"### Corpus analyses on Ray (issue 21): one process vs a local Ray cluster, {first['cpus']} CPUs, all-MiniLM-L6-v2, 128-token documents",
        "",
        f"Ray's start: {first['ray_init_s']} s once per session; each Ray run then pays about "
        f"{first['ray_run_overhead_s']} s before its first batch (actors start, the model is shipped).",
        "",
        "| analysis | backend | documents | time | documents / s |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['analysis']} | {r['backend']} | {r['documents']} | {r['seconds']:.1f} s | {r['docs_per_s']} |")
    return lines


if __name__ == "__main__":
    print(json.dumps(bench_ray(), indent=2))
