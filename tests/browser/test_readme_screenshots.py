"""The README's pictures, taken here from saved pages of real widgets (the embedded MiniLM), so
they show what the code draws today. Each run rewrites docs/screenshots/; a change in a view
shows up as a changed picture in the diff."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import attnscope

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "screenshots"
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")

TEXT = "The cat sat on the mat because it was tired."
TEXT_B = "It fell asleep at once."
LAYER = 2
CORPUS = [
    "The cat sat on the mat.", "Dogs bark at the mailman every morning.",
    "She gave him the book she had promised.", "Paris is the capital of France.",
    "The café in Zürich serves strong coffee.", "Researchers study what transformers attend to.",
]
# view → (what it shows, the state to open it with)
PICTURES = {
    "head": f"head view: layer {LAYER}, every head, sentence pair",
    "head_dark": "head view in the dark theme",
    "model": "model view: every layer × head",
    "neuron": "neuron view: q, k, q × k, q·k and softmax for one query",
    "rollout": "attention rollout without [CLS]/[SEP]",
    "analysis": "head_stats over a small corpus: layer × head heatmaps",
    "text": "a long input's text view: each token shaded by its attention from the selected token",
    "map": "a long input's map view: the pooled overview of one layer's mean attention",
}
# A text long enough to read as a page (the long-input views take any length on demand).
LONG_TEXT = " ".join([
    "The keeper fed the lions before the storm, and they slept through it.",
    "In the morning the café in Zürich opened late; the baker had left the bread in the oven.",
    "Researchers asked what the model attends to when it reads a long document.",
] * 4)
READY = {
    "head": "Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0",
    "model": "Number(document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells) === 72",
    "neuron": "document.querySelector('.attnscope-neuron-table:not([hidden])') !== null",
    "rollout": "Number(document.querySelector('canvas.attnscope-matrix')?.dataset.n) > 0",
    "analysis": "Number(document.querySelector('.attnscope-headmap-view canvas')?.dataset.cells) > 0",
    "text": "document.querySelector('.attnscope-text-flow')?.dataset.shading === 'done'",
    "map": "document.querySelector('canvas.attnscope-map')?.dataset.region !== undefined",
}


def widget_for(name, model):
    if name in ("text", "map"):
        widget = attnscope.AttentionWidget(LONG_TEXT, model=model, attention="on_demand", view=name, layer=2)
        widget.focus_token = 5  # "lions"
        return widget
    widget = attnscope.AttentionWidget(TEXT, TEXT_B, model=model, layer=LAYER)
    if name == "head_dark":
        widget.theme = "dark"
    elif name == "neuron":
        widget.view, widget.neuron_head, widget.neuron_query = "neuron", 3, 3
    elif name == "analysis":
        widget.show_analysis(attnscope.head_stats(model, CORPUS, progress=False))
    elif name != "head":
        widget.view = name
    return widget


@pytest.mark.parametrize("name", list(PICTURES))
def test_each_readme_picture_is_taken_from_the_view(name, default_model, watched_page, tmp_path):
    widget = widget_for(name, default_model)
    path = widget.save_html(tmp_path / f"{name}.html")
    page = watched_page(viewport={"width": 1100, "height": 1000}, device_scale_factor=1)
    page.goto(path.as_uri())
    page.wait_for_function(READY[name.removesuffix("_dark")], timeout=30_000)
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".attnscope-root").screenshot(path=str(SHOTS / f"{name}.png"))
    assert (SHOTS / f"{name}.png").stat().st_size > 5_000  # a picture, not an empty box
    assert not page.problems, page.problems


def test_the_readme_shows_every_picture_and_only_those():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"docs/screenshots/([a-z_]+)\.png", readme))
    assert shown == set(PICTURES)


def test_the_code_above_the_head_picture_draws_it():
    # The README's and the docs' home page's first code is the call that draws the head picture.
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        text = page.read_text(encoding="utf-8")
        code = re.search(r"```python\n(.*?)```", text, re.S)
        assert code and code.end() < text.index("screenshots/head.png"), page
        [call] = [node for node in ast.walk(ast.parse(code.group(1))) if isinstance(node, ast.Call)]
        assert ast.unparse(call.func) == "attnscope.show", page
        assert [ast.literal_eval(arg) for arg in call.args] == [TEXT, TEXT_B], page
        assert {k.arg: ast.literal_eval(k.value) for k in call.keywords} == {"layer": LAYER}, page
