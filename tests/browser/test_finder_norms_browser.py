"""The head finder's norm metrics (issue 47) in the built bundle, fed the real widget's state: the
view lists them as axes and colour, draws and filters by them, and a saved page does the same; a
gated model's NaN columns come with the finder's reason in the view's note."""

from __future__ import annotations

import pytest
from test_head_view_browser import BUNDLE

import attnscope
from attnscope.analyses.head_finder import NORM_METRICS

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

CORPUS = ["The keeper fed the old lion before the storm, and it slept.", "Dogs bark, loudly, at night.",
          "Attention is all you need."]
FILTER = "sink_rate > 0.5 and sink_rate_weighed < 0.5"


def saved(page) -> dict:
    return page.evaluate("() => window.attnscopeHarness.model.saved.at(-1)")


def options(page, nth: int) -> list[str]:
    return page.locator(".attnscope-finder-bar select").nth(nth).evaluate("s => [...s.options].map((o) => o.value)")


def test_the_norm_metrics_are_choices_of_the_finder_view_live_and_saved(open_widget, watched_page, default_model, tmp_path):
    finder = attnscope.head_finder(default_model, CORPUS, progress=False)
    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    widget.show_analysis(finder)
    page = open_widget(widget)
    page.wait_for_function("document.querySelector('canvas.attnscope-finder-scatter')?.dataset.kept === '72'")
    for nth in range(3):  # x, y and colour
        assert set(NORM_METRICS) <= set(options(page, nth))
    selects = page.locator(".attnscope-finder-bar select")
    selects.nth(1).select_option("sink_rate_weighed")
    selects.nth(2).select_option("first_weighed_ratio")
    page.fill("input.attnscope-finder-filter", FILTER)
    choice = saved(page)["analysis_choice"]
    assert choice == {"x": "entropy", "y": "sink_rate_weighed", "color": "first_weighed_ratio", "filter": FILTER, "head": None}
    widget.set_state({"analysis_choice": choice})  # as the kernel gets it: taken
    assert widget.error == ""
    kept = str(len(finder.find(FILTER)))
    assert 0 < int(kept) < 72
    assert page.get_attribute("canvas.attnscope-finder-scatter", "data-y") == "sink_rate_weighed"
    assert page.get_attribute("canvas.attnscope-finder-scatter", "data-kept") == kept
    header = page.eval_on_selector_all(".attnscope-finder-table th", "cells => cells.map((c) => c.textContent)")
    assert any("sink_rate_weighed" in h for h in header) and any("first_weighed_ratio" in h for h in header)
    assert page.problems == []

    path = widget.save_html(tmp_path / "finder_norms.html")
    reopened = watched_page()
    reopened.goto(path.as_uri())
    reopened.wait_for_function(f"document.querySelector('canvas.attnscope-finder-scatter')?.dataset.kept === '{kept}'")
    assert set(NORM_METRICS) <= set(options(reopened, 0))
    assert [reopened.locator(".attnscope-finder-bar select").nth(i).input_value() for i in range(3)] == [
        "entropy", "sink_rate_weighed", "first_weighed_ratio"]
    assert reopened.problems == []


def test_a_gated_models_finder_says_why_its_norm_metrics_are_nan(open_widget, bert_tokenizer):
    from small_models import gated_qwen3_next

    engine = attnscope.load(gated_qwen3_next(), bert_tokenizer, device="cpu")
    finder = attnscope.head_finder(engine, CORPUS[:2], induction=False, progress=False)
    widget = attnscope.AttentionWidget("The cat sat.", model=engine)
    widget.show_analysis(finder)
    assert "gate" in widget.analysis["note"]
    page = open_widget(widget)
    page.wait_for_function("document.querySelector('canvas.attnscope-finder-scatter')?.dataset.kept === '8'")
    assert "sink_rate_weighed" in options(page, 1)
    assert "gate" in page.inner_text("body")  # the analysis tab's note
    assert page.problems == []
