"""marimo: notebooks/quickstart_marimo.py served by `marimo run` and `marimo edit`, headless, offline.

marimo's front end ships in its wheel. Its anywidget support syncs traits and custom messages
(the neuron view's requests, a long run's rows and tiles), but not anywidget's
`experimental.invoke`: these tests pin that every view's kernel round trip works there. The
notebook is copied to a temporary folder (edit mode may save it), and the server is stopped by
its pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from test_jupyterlab import BUNDLE, TILE_PIXELS, free_port, line_count, require_installed, running_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "browser" / "artifacts"

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")


@contextlib.contextmanager
def marimo_server(mode: str, root: Path):
    require_installed("marimo")
    notebook = root / "quickstart_marimo.py"
    shutil.copy(ROOT / "notebooks" / "quickstart_marimo.py", notebook)
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MARIMO_SKIP_UPDATE_CHECK": "1", "HOME": str(root)}
    command = [sys.executable, "-m", "marimo", mode, str(notebook), "--headless", "--host", "127.0.0.1", "--port", str(port),
               "--no-token"]
    base = f"http://127.0.0.1:{port}"
    with running_server(f"marimo {mode}", command, base, root / "marimo.log", env, stop=signal.SIGTERM, cwd=root):
        yield base


@pytest.fixture(scope="module")
def marimo_run(tmp_path_factory):
    with marimo_server("run", tmp_path_factory.mktemp("marimo-run")) as base:
        yield base


@pytest.fixture(scope="module")
def marimo_edit(tmp_path_factory):
    with marimo_server("edit", tmp_path_factory.mktemp("marimo-edit")) as base:
        yield base


def own_errors(page) -> list[str]:
    """Uncaught page errors, less marimo's own editor noise (CodeMirror state fields)."""
    return [p for p in page.problems if p.startswith("pageerror:") and "Field is not present" not in p]


def test_marimo_run_keeps_every_view_live(watched_page, marimo_run):
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(marimo_run)
    widget = page.locator(".attnscope-root").first
    lines = widget.locator(".attnscope-lines")
    widget.locator(".attnscope-lines canvas").first.wait_for(timeout=180_000)
    assert line_count(lines) > 0

    # A layer change repaints with the kernel's payload of that layer (the page holds only one).
    before = lines.evaluate(TILE_PIXELS)
    widget.locator("select.attnscope-layer").select_option(index=4)
    page.wait_for_function(f"([box, before]) => ({TILE_PIXELS})(box) !== before", arg=[lines.element_handle(), before], timeout=60_000)
    widget.screenshot(path=str(ARTIFACTS / "marimo_head_view.png"))

    # The model view: thumbnails the kernel makes when the tab opens.
    widget.get_by_role("tab", name="Model").click()
    widget.locator("canvas.attnscope-thumbnails[data-cells='72']").wait_for(timeout=60_000)
    # The neuron view: q, k and their products for one query, asked for by custom message.
    widget.get_by_role("tab", name="Neuron").click()
    widget.locator(".attnscope-neuron-table:not([hidden])").wait_for(timeout=60_000)
    widget.locator(".attnscope-neuron-queries .attnscope-token[data-index='2']").click()
    page.wait_for_function(
        "w => w.querySelector('.attnscope-neuron-view').dataset.query === '2' && !w.querySelector('.attnscope-neuron-table').hidden",
        arg=widget.element_handle(), timeout=60_000,
    )
    # Rollout, computed by the kernel when its tab opens.
    widget.get_by_role("tab", name="Rollout").click()
    page.wait_for_function(
        "w => Number(w.querySelector('canvas.attnscope-matrix')?.dataset.n) > 0", arg=widget.element_handle(), timeout=60_000
    )
    # An edited sentence recomputes in the kernel.
    widget.get_by_role("tab", name="Head").click()
    editor = widget.locator("input.attnscope-text").first
    editor.fill("Penguins swim quickly.")
    editor.press("Enter")
    widget.get_by_text("Penguins", exact=True).first.wait_for(timeout=60_000)

    # The long-input widget: rows asked for as the selection moves, read as the text reads.
    long_view = page.locator(".attnscope-root").nth(1)
    flow = long_view.locator(".attnscope-text-flow")
    flow.wait_for(timeout=60_000)
    assert flow.text_content().startswith("[CLS]The keeper fed the lions")
    caption = long_view.locator(".attnscope-text-caption")
    long_view.locator(".attnscope-text-token", has_text="lions").first.click()
    page.wait_for_function(
        "c => c.textContent.includes('“lions”') && !c.textContent.includes('computing')", arg=caption.element_handle(), timeout=60_000
    )
    long_view.get_by_role("tab", name="Map").click()
    long_view.locator("canvas.attnscope-map").wait_for(timeout=60_000)
    long_view.get_by_role("tab", name="Analysis").click()
    long_view.locator(".attnscope-headmap-view").first.wait_for(timeout=60_000)
    long_view.screenshot(path=str(ARTIFACTS / "marimo_long_view.png"))
    # The DataFrame of the heads' statistics shows as marimo's table.
    page.get_by_text("measure", exact=True).first.wait_for(timeout=60_000)
    assert own_errors(page) == []


def test_marimo_edit_runs_the_widget_live(watched_page, marimo_edit):
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(marimo_edit)
    page.locator(".cm-content").first.wait_for(timeout=90_000)
    page.keyboard.press("Control+Shift+R")  # marimo's "Run all stale cells"
    widget = page.locator(".attnscope-root").first
    lines = widget.locator(".attnscope-lines")
    widget.locator(".attnscope-lines canvas").first.wait_for(timeout=180_000)
    before = lines.evaluate(TILE_PIXELS)
    widget.locator("select.attnscope-layer").select_option(index=2)
    page.wait_for_function(f"([box, before]) => ({TILE_PIXELS})(box) !== before", arg=[lines.element_handle(), before], timeout=60_000)
    widget.get_by_role("tab", name="Neuron").click()
    widget.locator(".attnscope-neuron-queries .attnscope-token[data-index='3']").click()
    page.wait_for_function(
        "w => w.querySelector('.attnscope-neuron-view').dataset.query === '3' && !w.querySelector('.attnscope-neuron-table').hidden",
        arg=widget.element_handle(), timeout=60_000,
    )
    widget.screenshot(path=str(ARTIFACTS / "marimo_edit_neuron_view.png"))
    assert own_errors(page) == []
