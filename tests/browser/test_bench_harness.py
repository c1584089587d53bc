"""`make bench` drives the bundle through the harness with the kernel's real payloads and
replies; this runs that path once on a short text, so a change to the payloads or the channel
that breaks the benchmark fails here rather than at the next `make bench`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
BUNDLE = Path(__file__).resolve().parents[2] / "src" / "attnscope" / "static" / "widget.js"
pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")


def test_the_front_end_benchmark_runs_its_every_step(default_model, chromium_browser, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("browser_bench", None)
    from browser_bench import bench_front_end

    row = bench_front_end(default_model, "The café in 東京 was lovely. " * 4, repeats=1, browser=chromium_browser)
    for key in ("head_first_paint_ms", "model_first_paint_ms", "layer_switch_ms", "neuron_switch_ms"):
        assert row[key] > 0, row
    assert row["bytes_before_head_paint"] < row["bytes_before_model_paint"]


def test_the_jupyterlab_tables_say_each_interaction_its_target_and_where_the_time_went(monkeypatch):
    """benchmarks/jupyterlab_bench.table from a run's numbers: a row per interaction beside its
    harness figure, the targets met or not, an edit measured beyond the forward inside it."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from jupyterlab_bench import table

    def timed(ms, first=None, **where):
        return {"median": {"ms": ms, **where}, "each_ms": [ms if first is None else first] + [ms] * 6}

    results = {
        "head": {"n_tokens": 512, "bare_forward_ms": {"default": 110.0, "with_attentions": 120.0}, "interactions": {
            "layer switch": timed(61.0, kernel_ms=14.0),
            "head toggle": timed(42.0, first=52.0),
            "hover on a token": timed(28.0),
            "edited sentence": timed(330.0, forward_ms=140.0, beyond_forward_ms=190.0, kernel_ms=200.0, kernel_to_page_ms=22.0,
                                     page_to_pixels_ms=95.0),
            "model view opened": timed(190.0, kernel_ms=140.0),
            "neuron view, another token": timed(110.0, kernel_to_page_ms=15.0, page_to_pixels_ms=90.0),
        }},
        "long": [{"n_tokens": 32768, "widget_made_ms": 24000.0, "first_text_paint_ms": 25000.0,
                  "tab_opened_ms": {"map": 450.0, "map, refined to the exact pooled map": 16000.0, "head": 270.0, "model": 540.0},
                  "interactions": {"select → shaded": timed(96.0), "zoom tile": timed(151.0)}}],
    }
    harness = [{"model": "all-MiniLM-L6-v2 (embedded)", "tokens": 512, "layer_switch_ms": 84.0, "neuron_switch_ms": 55.0,
                "model_first_paint_ms": 55.0}]
    lines = table(results, harness)
    row = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    # The median, then the first of its kind (issue 45: a median once hid a first click of 0.8 s); met if both are.
    assert "| ≤ 100 ms | 61 ms | 61 ms | 84 ms | ✅ |" in row["layer switch"]
    assert "| ≤ 50 ms | 42 ms | 52 ms | – | ❌ |" in row["head toggle"]
    assert "| 28 ms | 28 ms | – | ✅ |" in row["hover on a token"]
    assert "330 ms: the forward 140 ms + 190 ms | 330 ms | – | ❌ |" in row["edited sentence, redrawn"]
    assert "(60 ms)" in row["edited sentence, redrawn"]  # the kernel beyond its forward
    long_row = row["32,768"]
    assert "96 ms ✅" in long_row and "151 ms ❌" in long_row and "450 ms ✅" in long_row and "16.0 s" in long_row
    assert long_row.endswith("| – |")  # the model view not refined to the end: said, not invented


def test_the_gpu_bench_runs_its_every_step_on_the_cpu_and_tables_what_it_measured(tmp_path):
    """benchmarks/gpu_bench.py runs where a GPU is lent (rarely, for minutes): its --smoke runs
    every step at tiny sizes on the CPU, so that a break shows here and not on the lent machine."""
    import json
    import subprocess

    out = tmp_path / "gpu.json"
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_bench.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert results["eager_check"]["max_abs_difference"] < 1e-5
    long = results["long"][0]
    assert long["row_sum_error"] < 1e-3 and long["map_exact_s"] > 0 and long["thumbnails_exact_s"] > 0
    results["long"].append({"model": "Llama-3.1-8B shape", "tokens": 131072, "skipped": "40 s of the budget left"})
    sys.path.insert(0, str(BENCHMARKS))
    from gpu_bench import table

    lines = table(results)
    rows = [line for line in lines if line.startswith("| all-MiniLM") or line.startswith("| Qwen") or line.startswith("| Llama")]
    assert len(rows) == 3  # the MiniLM engine row (128 tokens in --smoke), the long row, the skipped one
    assert any("| 2,048 |" in row and "GiB" in row for row in rows)
    assert rows[-1].startswith("| Llama-3.1-8B shape | 131,072 | 40 s of the budget left |")
