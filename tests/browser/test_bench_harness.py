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
