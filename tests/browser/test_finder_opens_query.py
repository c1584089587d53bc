"""Opening a head finder's example marks its query token in the head view (issue 45 item 5): the
page sends the text with open={layer, head, query}; the kernel answers with that head alone and
the query as focus_token, which the head view marks (and scrolls to)."""

from __future__ import annotations

from real_widget import wire

import attnscope
from attnscope.widget.contract import contract_traits

CORPUS = ["The keeper fed the old lion before the storm, and it slept.", "Dogs bark, loudly, at night.",
          "Attention is all you need."]


def saved(page) -> dict:
    return page.evaluate("() => window.attnscopeHarness.model.saved.at(-1)")


def test_opening_an_example_marks_its_query_in_the_head_view(open_widget, default_model):
    finder = attnscope.head_finder(default_model, CORPUS, progress=False)
    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    widget.show_analysis(finder)
    label = "2-5"
    doc, query, *_ = widget.analysis["finder"]["examples"][label][0]
    page = open_widget(widget, width=1400, height=1000)
    page.wait_for_function("document.querySelector('canvas.attnscope-finder-scatter')?.dataset.kept === '72'")
    page.click(f".attnscope-finder-table tr[data-head='{label}']")
    page.click(".attnscope-finder-example >> nth=0")
    request = saved(page)["request"]
    assert request["open"] == {"layer": 2, "head": 5, "query": query} and request["text"] == CORPUS[doc]
    widget.set_state({"request": request})  # the kernel runs it, then the page gets the new state
    assert widget.error == "" and (widget.view, widget.heads, widget.focus_token) == ("head", [5], query)
    state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
    page.evaluate("s => window.attnscopeHarness.model.emit(window.attnscopeHarness.fromWire(s))", state)
    marked = ".attnscope-head-view .attnscope-left .attnscope-token.attnscope-selected"
    page.wait_for_selector(marked)
    assert page.eval_on_selector_all(marked, "rows => rows.map((r) => Number(r.dataset.index))") == [query]
    assert page.text_content(f"{marked} .attnscope-token-text") == widget.tokens[query]
    assert page.is_visible(marked)
    # A new text marks nothing: its tokens are not the example's.
    widget.update("The cat sat on the mat.")
    assert widget.focus_token == -1
    assert not page.problems, page.problems
