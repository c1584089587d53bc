"""A new view is one JS module and one line in src/attnscope/widget/views.py (issue 33): a toy view,
added to a copy of the repository that way, appears in the live widget, the saved page, the
picture of a saved output and `attnscope render --view`, once `make contract` and the JS build
have run (both are what `make` runs; nothing else is edited)."""

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

TOY_MODULE = """\
// A toy view: the number of tokens, in a paragraph on screen and as a line of text in pictures.
import { createScene } from "../drawing/scene.js";
import { declared } from "./view_adapter.js";

const toyLine = ({ get }) => `Toy view: ${get("tokens").length} tokens, first ${JSON.stringify(get("tokens")[0])}`;

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("toy"),
  create(body) {
    const line = document.createElement("p");
    line.className = "toy-view";
    body.append(line);
    return line;
  },
  draw(line, context) {
    line.textContent = toyLine(context);
    return "";
  },
  picture(context, { title = "" } = {}) {
    const scene = createScene(480, 60);
    scene.text(8, 20, title, { size: 13, role: "title" });
    scene.text(8, 44, toyLine(context), { size: 13 });
    return scene.scene;
  },
  title: ({ get }) => `${get("model_name")} · toy`,
  shows: [],
};
"""

TOY_LINE = '    View("toy", "Toy", ("short",)),\n'

# Run in the copy (PYTHONPATH points at its src): the live widget's state for the harness page,
# the saved page, and the picture of a saved output, for the toy view.
WIDGET_SCRIPT = """\
import json, sys
from pathlib import Path
import attnscope
from attnscope.widget.contract import contract_traits
from attnscope.widget.picture import picture_svg
sys.path.insert(0, sys.argv[2])
from real_widget import wire

out = Path(sys.argv[1])
widget = attnscope.AttentionWidget("The cat sat on the mat.", view="toy")
assert Path(attnscope.__file__).is_relative_to(out.parent), attnscope.__file__
state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
(out / "state.json").write_text(json.dumps(state))
widget.save_html(out / "saved.html")
svg, why = picture_svg(widget)
(out / "picture.svg").write_text(svg or why)
"""


@pytest.fixture(scope="module")
def copy_with_a_toy_view(tmp_path_factory) -> Path:
    """The repository's src, js and build scripts, copied, with the toy view added as one module
    and one registry line, then `make contract` and the JS build run in the copy."""
    copy = tmp_path_factory.mktemp("a-new-view") / "repo"
    for name in ("src", "js", "scripts", "tests"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "artifacts", "*.pyc"))
    for name in ("package.json", "ARCHITECTURE.md"):
        shutil.copy(ROOT / name, copy / name)
    (copy / "node_modules").symlink_to(ROOT / "node_modules")
    (copy / "js" / "views" / "toy_view.js").write_text(TOY_MODULE)
    registry = copy / "src" / "attnscope" / "widget" / "views.py"
    text = registry.read_text()
    last = [line for line in text.splitlines(keepends=True) if line.startswith('    View("analysis", ')]
    assert len(last) == 1
    registry.write_text(text.replace(last[0], last[0] + TOY_LINE))

    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    subprocess.run([sys.executable, "scripts/write_contract.py"], cwd=copy, env=env, check=True)
    subprocess.run(["node", "scripts/build.mjs"], cwd=copy, check=True)
    out = copy / "out"
    out.mkdir()
    subprocess.run([sys.executable, "-c", WIDGET_SCRIPT, str(out), str(ROOT / "tests" / "browser")],
                   cwd=copy, env=env, check=True, timeout=300)
    subprocess.run([sys.executable, "-m", "attnscope.edges.cli", "render", "The dog ran.", "--view", "toy", "-o", str(out / "cli.html")],
                   cwd=copy, env=env, check=True, timeout=300)
    return copy


def test_the_copy_differs_by_one_module_and_one_registry_line(copy_with_a_toy_view):
    """What was added by hand; the rest is what `make contract` writes."""
    copy = copy_with_a_toy_view
    added = {path.relative_to(copy / "js").as_posix() for path in (copy / "js").rglob("*.js")} - {
        path.relative_to(ROOT / "js").as_posix() for path in (ROOT / "js").rglob("*.js")}
    assert added == {"views/toy_view.js"}
    theirs = (ROOT / "src/attnscope/widget/views.py").read_text().splitlines(keepends=True)
    ours = (copy / "src/attnscope/widget/views.py").read_text().splitlines(keepends=True)
    assert [line for line in ours if line not in theirs] == [TOY_LINE]
    assert 'import { adapter as toy } from "./toy_view.js";' in (copy / "js/views/view_modules.js").read_text()


@pytest.fixture
def served_copy(copy_with_a_toy_view):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(copy_with_a_toy_view))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_the_toy_view_is_a_tab_of_the_live_widget(copy_with_a_toy_view, served_copy, watched_page):
    state = json.loads((copy_with_a_toy_view / "out" / "state.json").read_text())
    assert state["view"] == "toy"
    page = watched_page(viewport={"width": 1100, "height": 800})
    page.goto(f"{served_copy}/tests/browser/harness.html")
    page.wait_for_function("window.harnessReady === true")
    page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state)
    n_tokens = len(state["tokens"])
    page.wait_for_selector(f".toy-view:text('Toy view: {n_tokens} tokens')")
    # Its tab is among the others, and going to another view and back draws it again.
    page.get_by_role("tab", name="Head").click()
    page.wait_for_selector(".toy-view", state="hidden")
    page.get_by_role("tab", name="Toy").click()
    page.wait_for_selector(".toy-view", state="visible")
    assert page.evaluate("window.attnscopeHarness.model.saved.at(-1).view") == "toy"


@pytest.mark.parametrize("name, text", [("saved.html", "The cat sat on the mat."), ("cli.html", "The dog ran.")])
def test_the_toy_view_opens_in_a_saved_page_and_the_clis(copy_with_a_toy_view, watched_page, name, text):
    page = watched_page(viewport={"width": 1100, "height": 800})
    page.goto((copy_with_a_toy_view / "out" / name).as_uri())
    line = page.wait_for_selector(".toy-view:text('Toy view:')")
    assert '"[CLS]"' in line.text_content()
    assert page.get_by_role("tab", name="Toy").get_attribute("aria-selected") == "true"


def test_the_toy_view_is_the_picture_of_a_saved_output(copy_with_a_toy_view):
    svg = (copy_with_a_toy_view / "out" / "picture.svg").read_text()
    assert svg.startswith("<svg"), svg[:300]
    assert "Toy view: 9 tokens, first &quot;[CLS]&quot;" in svg or 'Toy view: 9 tokens, first "[CLS]"' in svg, svg[:2000]
    assert "· toy" in svg
