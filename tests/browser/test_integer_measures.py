"""A measure of integers is written as integers (issue 45 item 4): the pruning curve's "Removed at
step" bar read 0.00–72.00. The analysis declares it (its measure's "integer"), the screen's colour
bar, the hover card and the kernel's picture follow; a measure of reals keeps its decimals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import attnscope
from attnscope.widget.picture import picture_svg

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")

TEXTS = ["The cat sat on the mat.", "A dog barked twice at the cat.", "Rain fell all day in Zürich."]
ORDER = [(5, 3), (0, 2), (2, 7), (4, 0), (1, 1), (3, 9), (5, 11), (0, 8), (2, 2), (4, 6), (1, 5)]
TICKS = "() => [...document.querySelectorAll('.attnscope-legend .attnscope-colorbar-tick')].map((t) => t.textContent)"


@pytest.fixture(scope="module")
def curve_widget(default_model):
    curve = attnscope.pruning_curve(default_model, TEXTS, order=ORDER, batch_size=4, progress=False)
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    widget.show_analysis(curve)
    widget.view = "analysis"
    return widget


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_pruning_steps_are_labelled_as_integers(watched_page, tmp_path, curve_widget, theme):
    curve_widget.theme = theme
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(curve_widget.save_html(tmp_path / "curve.html").as_uri())
    page.wait_for_selector("canvas.attnscope-headmap[data-measure='step']")
    ticks = page.evaluate(TICKS)
    assert ticks == ["0", str(len(ORDER))], ticks  # the last step: as many as heads removed
    # The hover card of the head removed first names its step as a whole number.
    box = page.eval_on_selector("canvas.attnscope-headmap", "c => { const b = c.getBoundingClientRect(); return [b.left, b.top]; }")
    layer, head = ORDER[0]
    page.mouse.move(box[0] + 28 * head + 14, box[1] + 28 * layer + 14)
    card = page.text_content(".attnscope-headmap-view .attnscope-tooltip")
    assert card.endswith(": 1"), card
    # The loss, a real number, keeps its decimals.
    page.select_option("select.attnscope-measure", "loss")
    page.wait_for_selector("canvas.attnscope-headmap[data-measure='loss']")
    assert all(re.fullmatch(r"\d+\.\d+|\d\.\de[-+]\d+", t) for t in page.evaluate(TICKS)), page.evaluate(TICKS)
    assert not page.problems, page.problems


def test_the_pictures_title_gives_the_steps_range_as_integers(curve_widget):
    curve_widget.analysis = {**curve_widget.analysis, "measure": "step"}
    svg, why = picture_svg(curve_widget)
    assert svg is not None, why
    assert f"(0 to {len(ORDER)})" in svg and f"{len(ORDER)}.00" not in svg
