"""No blank band between the controls above a drawing and the drawing (issue 45 item 3): the map
kept 84 px for its column labels and the rollout matrix 70 px, whatever the labels took."""

from __future__ import annotations

from pathlib import Path

import pytest

import attnscope

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")

LONG = ("The café owner in Zürich said the lake was lovely, and the critic agreed at length. " * 6).strip()
# Below what the controls' own margins make (6 px) and a line of small text: no band of nothing.
MOST_GAP = 16

# The first row of a canvas with ink, in CSS px from the canvas's top (the map's labels are drawn in it).
FIRST_INK = """c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) if (d[(y * c.width + x) * 4 + 3] > 0)
    return y * c.getBoundingClientRect().height / c.height;
  return null; }"""
# The top of the highest text among the matrix's column labels (their boxes are its rotated text).
LABELS_TOP = """g => Math.min(...[...g.querySelectorAll('.attnscope-matrix-top span')].map((s) => {
  const r = document.createRange(); r.selectNodeContents(s); return r.getBoundingClientRect().top; }))"""


def bottom(page, selector):
    return page.eval_on_selector(selector, "n => n.getBoundingClientRect().bottom")


def opened(watched_page, tmp_path, widget, theme):
    widget.theme = theme
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(widget.save_html(tmp_path / f"{widget.view}-{theme}.html").as_uri())
    return page


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_map_starts_right_below_its_colour_bars(watched_page, tmp_path, default_model, theme):
    widget = attnscope.AttentionWidget(LONG, model=default_model, attention="on_demand", view="map")
    assert widget.long_context
    page = opened(watched_page, tmp_path, widget, theme)
    page.wait_for_selector("canvas.attnscope-map[data-tile]")
    canvas_top = page.eval_on_selector("canvas.attnscope-map", "c => c.getBoundingClientRect().top")
    ink = page.eval_on_selector("canvas.attnscope-map", FIRST_INK)
    assert ink is not None
    gap = canvas_top + ink - bottom(page, ".attnscope-map-view .attnscope-legends")
    assert 0 <= gap <= MOST_GAP, gap
    assert not page.problems, page.problems


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_rollout_matrix_starts_right_below_its_colour_bar(watched_page, tmp_path, default_model, theme):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model, view="rollout")
    page = opened(watched_page, tmp_path, widget, theme)
    page.wait_for_selector("canvas.attnscope-matrix[data-n]")
    labels_top = page.eval_on_selector(".attnscope-matrix-grid", LABELS_TOP)
    gap = labels_top - bottom(page, ".attnscope-matrix-view .attnscope-legends")
    assert 0 <= gap <= MOST_GAP, gap
    # The labels are whole: none cut by the room they have.
    assert page.eval_on_selector_all(".attnscope-matrix-top span", "s => s.every((x) => x.scrollHeight <= x.clientHeight + 1)")
    assert not page.problems, page.problems
