"""An analysis with a layout of its own is one Python module (its partial, its DataFrame and its
declaration, `@analysis_view(kind, layout="bars")`) plus its export lines in analyses/__init__.py,
and one JS module, js/bars_layout.js, that draws that layout (issue 46 §1): added to a copy of the
repository that way, it shows in the live widget, the saved page and the picture, once `make
contract` (which lists the layout in js/views/layout_modules.js) and the JS build have run. Nothing of
the widget names it. (tests/analyses/test_a_new_analysis.py: a heatmap analysis, one Python module alone.)"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The analysis: per layer, the attention on each document's first token, over heads and documents.
TOY_ANALYSIS = '''\
"""Per layer, the mean attention on each document's first token (a toy: one bar a layer)."""

from __future__ import annotations

import pandas as pd

from .corpus import Documents, iter_attention
from .runner import run_corpus
from .tables import Grid, HeadSums, SumsPartial, analysis_view, tagged


def first_token_bars_partial(model, docs: Documents, *, max_length: int, batch_size: int, progress: bool) -> SumsPartial:
    sums = HeadSums()
    for doc in iter_attention(model, docs, max_length=max_length, batch_size=batch_size, desc="bars", progress=progress):
        sums.add({"first": doc.attention[..., 0].mean(-1).mean(-1, keepdim=True)})  # layers x 1
    return SumsPartial(sums, len(docs))


def first_token_bars(model, corpus, *, max_length=None, batch_size="auto", progress=False, backend="local") -> pd.DataFrame:
    run = run_corpus("first_token_bars", first_token_bars_partial, model, corpus, max_length=max_length,
                     batch_size=batch_size, progress=progress, backend=backend)
    per_layer = run.partial.sums.result()["first"][:, 0].tolist()
    frame = pd.DataFrame({"layer": range(len(per_layer)), "value": per_layer})
    return tagged(frame, "first_token_bars", run.model, run.documents)


@analysis_view("first_token_bars", layout="bars")
def first_token_bars_view(data: pd.DataFrame, grid: Grid) -> dict:
    return {"measures": [], "bars": [float(v) for v in data["value"]], "label": "Attention on the first token",
            "note": f"Per layer, over {data.attrs['documents']} documents."}
'''
EXPORT_LINES = ("from .first_token_bars import first_token_bars\n", '    "first_token_bars",\n')

# The layout: one bar a layer, as rows of the page and as a scene for its pictures.
TOY_LAYOUT = """\
// A toy layout: one bar a layer, its value written after it.
import { imageMethods, createScene } from "../drawing/scene.js";

const line = (state, layer) => `Layer ${layer}: ${state.bars[layer].toFixed(3)}`;

function barsScene(state, { title = "" } = {}) {
  const scene = createScene(420, 40 + 18 * state.bars.length);
  scene.text(8, 18, `${title}${title ? " · " : ""}${state.label}`, { size: 13, role: "title" });
  const top = Math.max(1e-9, ...state.bars);
  state.bars.forEach((value, layer) => {
    scene.rect(8, 30 + 18 * layer, 200 * (value / top), 14, "#4e79a7");
    scene.text(216, 42 + 18 * layer, line(state, layer), { size: 12 });
  });
  return scene.scene;
}

/** @type {import("./analysis_layout.js").AnalysisLayout} */
export const layout = {
  create(box) {
    const list = document.createElement("div");
    list.className = "toy-bars";
    box.append(list);
    let shown = null;
    return {
      update(state) {
        shown = state;
        list.replaceChildren(...state.bars.map((value, layer) => {
          const row = document.createElement("div");
          row.className = "toy-bar";
          row.dataset.layer = String(layer);
          row.style.width = `${Math.round(20 + 200 * value)}px`;
          row.textContent = line(state, layer);
          return row;
        }));
      },
      ...imageMethods((options) => barsScene(shown, options)),
      destroy: () => list.remove(),
    };
  },
  state: (analysis) => ({ bars: analysis.bars.map(Number), label: analysis.label }),
  picture: barsScene,
  hint: () => "",
};
"""

TEXTS = ["The cat sat on the mat.", "A dog barked twice.", "Rain fell all day in Zurich."]

# Run in the copy (PYTHONPATH points at its src): the live widget's state for the harness page,
# the saved page and the picture of a saved output, the toy analysis shown.
WIDGET_SCRIPT = f"""\
import json, sys
from pathlib import Path
import attnscope
from attnscope.analyses import first_token_bars
from attnscope.widget.contract import contract_traits
from attnscope.widget.picture import picture_svg
sys.path.insert(0, sys.argv[2])
from real_widget import wire

out = Path(sys.argv[1])
assert Path(attnscope.__file__).is_relative_to(out.parent), attnscope.__file__
model = attnscope.load(device="cpu")
widget = attnscope.AttentionWidget({TEXTS[0]!r}, model=model).show_analysis(first_token_bars(model, {TEXTS!r}, batch_size=2))
state = {{name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}}
(out / "state.json").write_text(json.dumps(state))
widget.save_html(out / "saved.html")
svg, why = picture_svg(widget)
(out / "picture.svg").write_text(svg or why)
"""


@pytest.fixture(scope="module")
def copy_with_a_toy_layout(tmp_path_factory) -> Path:
    """The repository's src, js and build scripts, copied, with the toy analysis added as one
    module and its export lines and its layout as one JS module, then `make contract` and the JS
    build run in the copy."""
    copy = tmp_path_factory.mktemp("a-new-layout") / "repo"
    for name in ("src", "js", "scripts", "tests"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "artifacts", "*.pyc"))
    for name in ("package.json", "ARCHITECTURE.md"):
        shutil.copy(ROOT / name, copy / name)
    (copy / "node_modules").symlink_to(ROOT / "node_modules")
    analyses = copy / "src" / "attnscope" / "analyses"
    (analyses / "first_token_bars.py").write_text(TOY_ANALYSIS)
    (copy / "js" / "views" / "bars_layout.js").write_text(TOY_LAYOUT)
    init = (analyses / "__init__.py").read_text()
    init = init.replace("from .head_finder import", EXPORT_LINES[0] + "from .head_finder import", 1)
    init = init.replace("__all__ = [\n", "__all__ = [\n" + EXPORT_LINES[1], 1)
    (analyses / "__init__.py").write_text(init)

    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    subprocess.run([sys.executable, "scripts/write_contract.py"], cwd=copy, env=env, check=True)
    subprocess.run(["node", "scripts/build.mjs"], cwd=copy, check=True)
    out = copy / "out"
    out.mkdir()
    subprocess.run([sys.executable, "-c", WIDGET_SCRIPT, str(out), str(ROOT / "tests" / "browser")],
                   cwd=copy, env=env, check=True, timeout=300)
    return copy


def test_the_copy_differs_by_one_module_its_export_lines_and_one_layout_module(copy_with_a_toy_layout):
    """What was added by hand; the rest is what `make contract` writes. The widget names no analysis."""
    copy = copy_with_a_toy_layout
    added = {path.relative_to(copy / "js").as_posix() for path in (copy / "js").rglob("*.js")} - {
        path.relative_to(ROOT / "js").as_posix() for path in (ROOT / "js").rglob("*.js")}
    assert added == {"views/bars_layout.js"}
    package = copy / "src" / "attnscope"
    added = {p.relative_to(package).as_posix() for p in package.rglob("*.py")} - {
        p.relative_to(ROOT / "src" / "attnscope").as_posix() for p in (ROOT / "src" / "attnscope").rglob("*.py")}
    assert added == {"analyses/first_token_bars.py"}
    theirs = (ROOT / "src/attnscope/analyses/__init__.py").read_text().splitlines(keepends=True)
    ours = (package / "analyses/__init__.py").read_text().splitlines(keepends=True)
    assert [line for line in ours if line not in theirs] == list(EXPORT_LINES)
    for path in (package / "widget").glob("*.py"):
        assert path.read_text() == (ROOT / "src/attnscope/widget" / path.name).read_text(), path.name
    assert 'import { layout as bars } from "./bars_layout.js";' in (copy / "js/views/layout_modules.js").read_text()


def expected_lines(state: dict) -> list[str]:
    return [f"Layer {layer}: {value:.3f}" for layer, value in enumerate(state["analysis"]["bars"])]


@pytest.fixture
def served_copy(copy_with_a_toy_layout):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(copy_with_a_toy_layout))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_the_toy_layout_is_the_analysis_tab_of_the_live_widget(copy_with_a_toy_layout, served_copy, watched_page):
    state = json.loads((copy_with_a_toy_layout / "out" / "state.json").read_text())
    assert state["view"] == "analysis" and state["analysis"]["layout"] == "bars"
    assert len(state["analysis"]["bars"]) == state["n_layers"] and state["thumbnails"] == {}
    page = watched_page(viewport={"width": 1100, "height": 800})
    page.goto(f"{served_copy}/tests/browser/harness.html")
    page.wait_for_function("window.harnessReady === true")
    page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state)
    page.wait_for_selector(".toy-bars .toy-bar")
    assert page.locator(".toy-bar").all_text_contents() == expected_lines(state)
    assert page.locator(".attnscope-hint:visible", has_text="Per layer, over 3 documents.").count() == 1  # the note
    # Another tab and back draws it again.
    page.get_by_role("tab", name="Head").click()
    page.wait_for_selector(".toy-bars", state="hidden")
    page.get_by_role("tab", name="Analysis").click()
    page.wait_for_selector(".toy-bars", state="visible")


def test_the_toy_layout_opens_in_the_saved_page(copy_with_a_toy_layout, watched_page):
    state = json.loads((copy_with_a_toy_layout / "out" / "state.json").read_text())
    page = watched_page(viewport={"width": 1100, "height": 800})
    page.goto((copy_with_a_toy_layout / "out" / "saved.html").as_uri())
    page.wait_for_selector(".toy-bars .toy-bar")
    assert page.locator(".toy-bar").all_text_contents() == expected_lines(state)
    assert page.get_by_role("tab", name="Analysis").get_attribute("aria-selected") == "true"


def test_the_toy_layout_is_the_picture_of_a_saved_output(copy_with_a_toy_layout):
    state = json.loads((copy_with_a_toy_layout / "out" / "state.json").read_text())
    svg = (copy_with_a_toy_layout / "out" / "picture.svg").read_text()
    assert svg.startswith("<svg"), svg[:300]
    assert "Attention on the first token" in svg
    for line in expected_lines(state):
        assert line in svg, line
