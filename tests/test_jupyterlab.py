"""End to end: JupyterLab 4 and Notebook 7 run notebooks/quickstart.ipynb and the views render, offline.

The server is started on 127.0.0.1 with a token, from this interpreter by absolute path, in a
temporary root holding a copy of the notebook (so autosave never touches the repository), and
stopped by its pid.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "src" / "attnscope" / "static" / "widget.js"
ARTIFACTS = ROOT / "tests" / "browser" / "artifacts"
TOKEN = "attnscope-test-token"

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# No news feed and no yarn/npm registry look-ups at start; classic notebook pages have neither.
APP_OFFLINE_FLAGS = {
    "lab": ["--LabApp.news_url=", "--LabApp.extension_manager=readonly"],
    "notebook": ["--JupyterNotebookApp.news_url=", "--JupyterNotebookApp.extension_manager=readonly"],
    "nbclassic": [],
}


def require_installed(*distributions: str) -> None:
    """Skip unless these distributions are installed (asked of their metadata: importing some,
    as rise, needs what they do not declare)."""
    for name in distributions:
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"{name} is not installed (pyproject's dev group installs it)")


@contextlib.contextmanager
def running_server(name: str, command: list[str], probe: str, log_path: Path, env: dict, stop=signal.SIGINT, cwd=None):
    """A server process (its output in log_path) until `probe` answers; stopped by its pid."""
    log = open(log_path, "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(probe, timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"{name} did not start:\n" + log_path.read_text()[-3000:]) from None
                time.sleep(0.5)
        yield
    finally:
        server.send_signal(stop)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@contextlib.contextmanager
def jupyter_server(app: str, root: Path, extra_env: dict | None = None, extra_args: tuple[str, ...] = ()):
    """`jupyter lab`, `jupyter notebook` (Notebook 7) or `jupyter nbclassic` on 127.0.0.1 with a token; stopped by its pid."""
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", root / "quickstart.ipynb")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "JUPYTER_CONFIG_DIR": str(root / ".jupyter-config"), **(extra_env or {})}
    command = [
        sys.executable, "-m", "jupyter", app, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={TOKEN}", "--allow-root", f"--ServerApp.root_dir={root}",
        *APP_OFFLINE_FLAGS[app], *extra_args,
    ]
    base = f"http://127.0.0.1:{port}"
    with running_server(f"jupyter {app}", command, f"{base}/api/status?token={TOKEN}", root / "server.log", env):
        yield base


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    with jupyter_server("lab", tmp_path_factory.mktemp("lab")) as base:
        yield base


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory):
    with jupyter_server("notebook", tmp_path_factory.mktemp("nb7")) as base:
        yield base


def page_errors(page) -> list[str]:
    # Console errors are the hosts' own (404s of optional resources); uncaught exceptions count.
    return [p for p in page.problems if p.startswith("pageerror:")]


@pytest.fixture
def lab_page(watched_page, jupyterlab):
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{jupyterlab}/lab/tree/quickstart.ipynb?token={TOKEN}")
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
    return page


def from_notebook_itself(error: str) -> bool:
    """Notebook 7.6 throws "reading 'schema'" from its own settings code at start (stack only in
    /static/notebook/); such errors say nothing about attnscope."""
    frames = [line for line in error.splitlines() if line.strip().startswith("at ")]
    return bool(frames) and all("/static/notebook/" in f or "<anonymous>" in f or "Promise" in f for f in frames)


def wait_for_connected_idle_kernel(base: str, timeout: float = 120, notebook: str | None = None) -> None:
    """The notebook's kernel is started, connected to the page, and idle (ready to run cells);
    with `notebook`, the kernel of that notebook's session (another may be open already)."""
    import json

    deadline = time.time() + timeout
    while time.time() < deadline:
        if notebook is None:
            kernels = json.load(urllib.request.urlopen(f"{base}/api/kernels?token={TOKEN}", timeout=5))
        else:
            sessions = json.load(urllib.request.urlopen(f"{base}/api/sessions?token={TOKEN}", timeout=5))
            kernels = [s["kernel"] for s in sessions if s.get("path", "").endswith(notebook) and s.get("kernel")]
        if any(k["execution_state"] == "idle" and k.get("connections", 0) > 0 for k in kernels):
            return
        time.sleep(0.5)
    raise TimeoutError(f"no connected idle kernel after {timeout} s")


def run_all_cells(page) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()


# The pixels of a head view's line tiles, as one string: a repaint changes it.
TILE_PIXELS = "box => [...box.querySelectorAll('canvas')].map((c) => c.toDataURL()).join()"


def line_count(lines) -> int:
    return int(lines.get_attribute("data-line-count") or 0)


def test_quickstart_renders_head_view_and_recomputes_on_edit(lab_page):
    page = lab_page
    run_all_cells(page)
    widget = page.locator(".jp-OutputArea-output .attnscope-root").first
    widget.wait_for(timeout=120_000)
    lines = widget.locator(".attnscope-lines").first
    page.wait_for_function(
        "c => Number(c.dataset.lineCount) > 0", arg=lines.element_handle(), timeout=60_000
    )
    assert line_count(lines) > 0
    assert widget.get_by_text("[CLS]").first.is_visible()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    widget.screenshot(path=str(ARTIFACTS / "jupyterlab_head_view.png"))  # for a person to look at

    # Another layer redraws with that layer's data: new pixels, not only new lines counted (JupyterLab
    # 4.6's body clips nothing, though it hides its overflow at 0 px tall: lines were counted, not drawn).
    before = lines.evaluate(TILE_PIXELS)
    widget.locator("select.attnscope-layer").select_option(index=5)
    page.wait_for_function(f"([box, before]) => ({TILE_PIXELS})(box) !== before", arg=[lines.element_handle(), before], timeout=30_000)

    # Editing the sentence recomputes in the kernel: the new words appear as tokens.
    editor = widget.locator("input[type=text], textarea").first
    editor.fill("Penguins swim quickly.")
    editor.press("Enter")
    widget.get_by_text("Penguins", exact=True).first.wait_for(timeout=60_000)

    # The model view: every layer × head, drawn from thumbnails the kernel makes on demand.
    widget.get_by_role("tab", name="Model").click()
    page.wait_for_function(
        "w => w.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '72'",
        arg=widget.element_handle(), timeout=60_000,
    )
    widget.screenshot(path=str(ARTIFACTS / "jupyterlab_model_view.png"))
    # Head masking round trip: mask mode, click head 1-1, the kernel reruns and says what changed.
    widget.locator("input.attnscope-mask-mode").check()
    # Measured once the view has redrawn in mask mode (its hint says so), not before.
    widget.get_by_text("Click a head to switch it off", exact=False).wait_for(timeout=10_000)
    box = widget.locator("canvas.attnscope-thumbnails").bounding_box()
    page.mouse.click(box["x"] + 10, box["y"] + 10)
    widget.get_by_text("Masked 1-1: attention changes", exact=False).wait_for(timeout=60_000)
    widget.get_by_role("button", name="Unmask all").click()
    page.wait_for_function(
        "w => w.querySelector('.attnscope-mask-summary').textContent === ''", arg=widget.element_handle(), timeout=60_000
    )
    widget.locator("input.attnscope-mask-mode").uncheck()
    # Rollout, computed by the kernel when its tab opens.
    widget.get_by_role("tab", name="Rollout").click()
    page.wait_for_function(
        "w => Number(w.querySelector('canvas.attnscope-matrix')?.dataset.n) > 0", arg=widget.element_handle(), timeout=60_000
    )
    widget.screenshot(path=str(ARTIFACTS / "jupyterlab_rollout_view.png"))
    # The neuron view: q, k, q×k, q·k and softmax of one query, asked for by custom message.
    widget.get_by_role("tab", name="Neuron").click()
    widget.locator(".attnscope-neuron-table:not([hidden])").wait_for(timeout=60_000)
    widget.locator(".attnscope-neuron-queries .attnscope-token[data-index='2']").click()
    page.wait_for_function(
        "w => w.querySelector('.attnscope-neuron-view').dataset.query === '2'"
        " && !w.querySelector('.attnscope-neuron-table').hidden",
        arg=widget.element_handle(), timeout=60_000,
    )
    widget.screenshot(path=str(ARTIFACTS / "jupyterlab_neuron_view.png"))
    widget.get_by_role("tab", name="Head").click()

    # The widget follows JupyterLab's theme.
    root = page.locator(".jp-OutputArea-output .attnscope-root").first
    assert "attnscope-dark" not in (root.get_attribute("class") or "")
    page.get_by_role("menuitem", name="Settings", exact=True).click()
    page.get_by_text("Theme", exact=True).click()
    page.get_by_text("JupyterLab Dark", exact=True).click()
    page.wait_for_function(
        "r => r.classList.contains('attnscope-dark')", arg=root.element_handle(), timeout=30_000
    )
    widget.screenshot(path=str(ARTIFACTS / "jupyterlab_head_view_dark.png"))
    assert not page_errors(page), page.problems


def test_notebook7_runs_quickstart_and_renders_all_views(watched_page, notebook7):
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{notebook7}/notebooks/quickstart.ipynb?token={TOKEN}")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
    wait_for_connected_idle_kernel(notebook7)
    page.wait_for_timeout(1000)  # the page's own kernel status catches up with the server's
    run_all_cells(page)
    widget = page.locator(".jp-OutputArea-output .attnscope-root").first
    widget.wait_for(timeout=120_000)
    page.wait_for_function(
        "w => Number(w.querySelector('.attnscope-lines')?.dataset.lineCount) > 0",
        arg=widget.element_handle(), timeout=60_000,
    )
    widget.locator("select.attnscope-layer").select_option(index=4)
    page.wait_for_function("w => w.querySelector('.attnscope-status').textContent === ''", arg=widget.element_handle())
    editor = widget.locator("input[type=text]").first
    editor.fill("Owls hunt at night.")
    editor.press("Enter")
    widget.get_by_text("Owls", exact=True).first.wait_for(timeout=60_000)
    widget.get_by_role("tab", name="Model").click()
    page.wait_for_function(
        "w => w.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '72'",
        arg=widget.element_handle(), timeout=60_000,
    )
    widget.get_by_role("tab", name="Neuron").click()
    widget.locator(".attnscope-neuron-table:not([hidden])").wait_for(timeout=60_000)
    ours = [e for e in page_errors(page) if not from_notebook_itself(e)]
    assert not ours, page.problems


HARDENING_CELLS = [
    "import torch, transformers, attnscope\nfirst = attnscope.show('The cat sat on the mat.')\nfirst",
    "second = attnscope.show('Colourless green ideas sleep furiously.')\nsecond",
    # A model whose head 1 of layer 2 has NaN queries (as after a half-precision overflow).
    "config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)\n"
    "broken = transformers.BertModel(config)\n"
    "with torch.no_grad():\n    broken.encoder.layer[1].attention.self.query.weight[:8] = float('nan')\n"
    "nan_view = attnscope.AttentionWidget('The dog slept.', model=broken, tokenizer=first.engine.tokenizer, layer=1)\n"
    "nan_view",
    "first.layer = 99",  # last: Run All stops at an error
]


def test_two_widgets_a_broken_model_and_a_wrong_argument_in_one_kernel(watched_page, jupyterlab):
    """As a newcomer: a second widget beside the first, a model with NaN attention, a wrong trait."""
    import json

    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
                          for s in HARDENING_CELLS],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    request = urllib.request.Request(
        f"{jupyterlab}/api/contents/hardening.ipynb?token={TOKEN}", method="PUT",
        data=json.dumps({"type": "notebook", "content": notebook}).encode(), headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30)
    page = watched_page(viewport={"width": 1400, "height": 1000})
    # A workspace of its own (not the one the quickstart test left, with its tabs and theme).
    page.goto(f"{jupyterlab}/lab/workspaces/hardening/tree/hardening.ipynb?reset&token={TOKEN}")
    wait_for_connected_idle_kernel(jupyterlab, notebook="hardening.ipynb")
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
    run_all_cells(page)
    page.get_by_text("layer=99 is out of range", exact=False).first.wait_for(timeout=180_000)
    widgets = page.locator(".jp-OutputArea-output .attnscope-root")
    assert widgets.count() == 3
    for index in range(3):
        page.wait_for_function("w => Number(w.querySelector('.attnscope-lines')?.dataset.lineCount) > 0",
                               arg=widgets.nth(index).element_handle(), timeout=60_000)
    first, second, broken = (widgets.nth(i) for i in range(3))
    # The broken model's view says which heads are NaN, above the lines of the others.
    notice = broken.locator(".attnscope-notice")
    assert notice.is_visible() and "NaN or infinite values" in notice.inner_text() and "2-1" in notice.inner_text()
    # The failed assignment changed nothing; the first widget still edits, and only itself.
    assert first.locator("select.attnscope-layer").input_value() == "0"
    editor = first.locator("input.attnscope-text").first
    editor.fill("Penguins swim quickly.")
    editor.press("Enter")
    first.get_by_text("Penguins", exact=True).first.wait_for(timeout=60_000)
    assert second.get_by_text("furiously", exact=True).first.is_visible()
    assert second.get_by_text("Penguins", exact=True).count() == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    broken.screenshot(path=str(ARTIFACTS / "jupyterlab_nan_heads.png"))  # for a person to look at
    assert not page_errors(page), page.problems


def test_long_context_notebook_text_and_map_views_ask_the_kernel(watched_page, jupyterlab):
    """notebooks/long_context.ipynb in real JupyterLab, on SmolLM2 (the Makefile installs it): the
    text view opens on the last token, scrolled to it, and its exact row comes from the kernel; a
    click selects another token; the map zooms down to exact tiles; the head view draws the window
    around the selected token."""
    import base64
    import json

    from attnscope.messages import WINDOW_TOKENS
    from attnscope.payloads import window_around

    def put(path: str, model: dict) -> None:
        request = urllib.request.Request(f"{jupyterlab}/api/contents/{path}?token={TOKEN}", method="PUT",
                                         data=json.dumps(model).encode(), headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=30)

    put("data", {"type": "directory"})
    sentences = (ROOT / "notebooks" / "data" / "sentences.txt").read_bytes()
    put("data/sentences.txt", {"type": "file", "format": "base64", "content": base64.b64encode(sentences).decode()})
    put("long_context.ipynb", {"type": "notebook", "content": json.loads((ROOT / "notebooks" / "long_context.ipynb").read_text())})
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{jupyterlab}/lab/workspaces/long/tree/long_context.ipynb?reset&token={TOKEN}")
    wait_for_connected_idle_kernel(jupyterlab, notebook="long_context.ipynb")
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
    run_all_cells(page)
    # The model's load (about 15 s) and the run come first.
    widget = page.locator(".jp-OutputArea-output .attnscope-root").first
    widget.wait_for(timeout=600_000)
    caption = widget.locator(".attnscope-text-caption")
    page.wait_for_function("c => c.textContent.startsWith('Attention from') && !c.textContent.includes('computing')",
                           arg=caption.element_handle(), timeout=300_000)
    tokens = widget.locator(".attnscope-text-token")
    n = tokens.count()
    assert 1_900 < n <= 2_048  # the notebook's prompt: whole sentences up to 2,048 tokens
    # The tokens in view are shaded at once, the rest while the page is idle.
    flow = widget.locator(".attnscope-text-flow")
    page.wait_for_function("f => f.dataset.shading === 'done'", arg=flow.element_handle())
    # It opens on the last token (a causal model's first token attends only to itself), in view.
    assert f"(token {n - 1})" in caption.inner_text()
    shown = flow.evaluate("""f => { const s = f.querySelector('.attnscope-selected'), a = f.getBoundingClientRect(),
        b = s.getBoundingClientRect(); return {index: Number(s.dataset.index), top: f.scrollTop,
        inView: b.top >= a.top && b.bottom <= a.bottom}; }""")
    assert shown["index"] == n - 1 and shown["top"] > 0 and shown["inView"], shown
    shaded = "w => [...w.querySelectorAll('.attnscope-text-token')].filter(s => s.style.background).length"
    assert widget.evaluate(shaded) > 1000  # every token before the last has a weight (causal)
    # Select another token: its row comes from the kernel and the caption names it.
    tokens.nth(1000).scroll_into_view_if_needed()
    tokens.nth(1000).click()
    page.wait_for_function("c => c.textContent.includes('(token 1000)') && !c.textContent.includes('computing')",
                           arg=caption.element_handle(), timeout=60_000)
    assert len(widget.locator(".attnscope-top-item").all()) == 12
    # The map: the overview, then zoomed in until the tile is exact and tokens label the axes.
    widget.locator(".attnscope-tab[data-view='map']").click()
    canvas = widget.locator("canvas.attnscope-map")
    page.wait_for_function(f"c => c.dataset.region === '0,{n},0,{n}'", arg=canvas.element_handle(), timeout=120_000)
    assert canvas.get_attribute("data-exact") == "false"
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + 96 + 200, box["y"] + 84 + 250)  # inside the map (its margins: 96 left, 84 top)
    for _ in range(12):
        page.mouse.wheel(0, -400)
        page.wait_for_timeout(30)
    page.wait_for_function("c => c.dataset.exact === 'true'", arg=canvas.element_handle(), timeout=60_000)
    r0, r1, c0, c1 = map(int, canvas.get_attribute("data-region").split(","))
    assert r1 - r0 <= 256 and r0 > 0 and c0 > 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    widget.screenshot(path=str(ARTIFACTS / "jupyterlab_long_map.png"))
    # The head view: the lines among the 128 tokens around the selected one; a click near the
    # window's edge selects that token and moves the window.
    def window_note(token: int) -> str:
        start, end = window_around(token, n, WINDOW_TOKENS)
        return f"Tokens {start:,}–{end - 1:,} of {n:,}, around token {token:,}"

    widget.locator(".attnscope-tab[data-view='head']").click()
    note = widget.locator(".attnscope-window-note")
    page.wait_for_function("([n, text]) => n.textContent.startsWith(text)", arg=[note.element_handle(), window_note(1000)],
                           timeout=60_000)
    page.wait_for_function("l => Number(l.dataset.lineCount) > 0", arg=widget.locator(".attnscope-lines").element_handle())
    rows = widget.locator(".attnscope-left .attnscope-token")
    assert rows.count() == WINDOW_TOKENS
    start, _ = window_around(1000, n, WINDOW_TOKENS)
    rows.nth(120).click()
    assert window_around(start + 120, n, WINDOW_TOKENS)[0] != start  # near the edge: the window moves
    page.wait_for_function("([n, text]) => n.textContent.startsWith(text)", arg=[note.element_handle(), window_note(start + 120)],
                           timeout=60_000)
    widget.screenshot(path=str(ARTIFACTS / "jupyterlab_long_head.png"))
    assert not page_errors(page), page.problems


def put_contents(base: str, path: str, model: dict) -> None:
    import json

    request = urllib.request.Request(f"{base}/api/contents/{path}?token={TOKEN}", method="PUT",
                                     data=json.dumps(model).encode(), headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30)


def saved_pictures_notebook(base: str, tmp_path: Path) -> None:
    """Two widgets (one at layer 3, one in the model view), run by nbclient and saved to the server."""
    import json

    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("import attnscope\nw = attnscope.AttentionWidget('The café in Zürich is naïve.', layer=2)\nw"),
        nbformat.v4.new_code_cell("attnscope.AttentionWidget('A second widget, in the model view.', view='model')"),
    ]
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    put_contents(base, "pictures.ipynb", {"type": "notebook", "content": json.loads(nbformat.writes(notebook))})


def check_pictures_then_live_widgets(page, base: str, artifact: str) -> None:
    """Reopened, nothing run: a picture per widget, of the view each was on. Run: each widget live
    and its picture hidden (shown once)."""
    pictures = page.locator(".jp-OutputArea-output .attnscope-picture img")
    pictures.first.wait_for(timeout=90_000)
    shown = "els => els.filter(e => e.getBoundingClientRect().height > 0).length"
    assert pictures.evaluate_all(shown) == 2
    decoded = "img => atob(img.src.split(',')[1])"
    assert "layer 3" in pictures.first.evaluate(decoded) and "Head 12" in pictures.nth(1).evaluate(decoded)
    assert pictures.evaluate_all("els => els.every(e => e.complete && e.naturalWidth > 0)")  # decoded and painted
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / artifact))
    wait_for_connected_idle_kernel(base, notebook="pictures.ipynb")
    run_all_cells(page)
    page.locator(".jp-OutputArea-output .attnscope-root").nth(1).wait_for(timeout=120_000)
    none_shown = "() => [...document.querySelectorAll('.attnscope-picture img')].every(e => e.getBoundingClientRect().height === 0)"
    page.wait_for_function(none_shown, timeout=30_000)
    assert page.locator(".jp-OutputArea-output .attnscope-root").count() == 2


def test_a_saved_notebook_reopened_shows_each_widgets_picture_and_a_live_run_shows_it_once(watched_page, jupyterlab, tmp_path):
    """Issue 18: run by nbclient and saved, the notebook reopens in JupyterLab with a picture
    beside each widget's output; run again, each widget is live and its picture hidden."""
    saved_pictures_notebook(jupyterlab, tmp_path)
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{jupyterlab}/lab/workspaces/pictures/tree/pictures.ipynb?reset&token={TOKEN}")
    check_pictures_then_live_widgets(page, jupyterlab, "jupyterlab_reopened_pictures.png")
    assert not page_errors(page), page.problems


def test_notebook7_reopens_a_saved_notebook_with_each_widgets_picture(watched_page, notebook7, tmp_path):
    saved_pictures_notebook(notebook7, tmp_path)
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{notebook7}/notebooks/pictures.ipynb?token={TOKEN}")
    check_pictures_then_live_widgets(page, notebook7, "notebook7_reopened_pictures.png")
    assert not [p for p in page_errors(page) if not from_notebook_itself(p)], page.problems
