"""The head view's knockout control in the built bundle, answered by the widget's own handler:
a head's line knocked out says what attnscope.knockout says; a model with no head to score says
why instead."""

from __future__ import annotations

import pytest
from real_widget import answer_request
from test_knockout import TEXT, _llama

import attnscope


@pytest.fixture(scope="module")
def decoder(bert_tokenizer):
    return attnscope.load(_llama(bert_tokenizer), bert_tokenizer, device="cpu")


def test_a_line_knocked_out_in_the_head_view_says_what_knockout_says(open_widget, decoder):
    widget = attnscope.AttentionWidget(TEXT, model=decoder, layer=2)
    page = open_widget(widget)
    page.wait_for_selector(".attnscope-knockout-run:not([hidden])")
    last = len(widget.tokens) - 1
    page.select_option(".attnscope-knockout-head", "1")
    page.select_option(".attnscope-knockout-key", "3")
    page.click(".attnscope-knockout-run")
    request = answer_request(page, widget, "knockout")
    assert {k: request[k] for k in ("layer", "head", "key", "result_id")} == {"layer": 2, "head": 1, "key": 3,
                                                                                "result_id": widget.result_id}
    expected = attnscope.knockout(decoder, TEXT, edges=[(2, 1, last, 3)]).iloc[0]
    assert abs(expected.delta) > 1e-3  # shown to 3 decimals
    delta = f"{'+' if expected.delta > 0 else ''}{expected.delta:.3f}".replace("-", "−")
    line = page.locator(".attnscope-knockout-result")
    line.filter(has_text="Δ").wait_for()
    text = line.text_content()
    assert text.startswith(f"line “{widget.tokens[last]}” → “{widget.tokens[3]}” blocked in layer 2, head 1")
    assert f"“{expected.target}”" in text and text.endswith(f"Δ {delta}")


def test_a_model_without_a_head_to_score_says_why_under_the_head_view(open_widget, default_model):
    page = open_widget(attnscope.AttentionWidget(TEXT, model=default_model))
    # One folded line under the view; the reason inside it.
    page.locator(".attnscope-knockout-unavailable summary").wait_for()
    why = page.locator(".attnscope-knockout-why")
    assert why.is_hidden() and "no masked-LM head" in why.text_content()
    page.locator(".attnscope-knockout-unavailable summary").click()
    why.wait_for()
    assert page.locator(".attnscope-knockout-run").is_hidden()
