"""The head view's knockout control on a generation, in the built bundle, answered by the widget's
own handler: with an output token selected, a head's line knocked out says Δ log p of the token
the model chose there, as attnscope.knockout says on the ids it read; a prompt token says why not."""

from __future__ import annotations

import pytest
from real_widget import answer_request
from test_head_view_browser import BUNDLE
from test_knockout import _llama

import attnscope

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

PROMPT = "The Eiffel Tower is in the city of"


@pytest.fixture(scope="module")
def generated(bert_tokenizer):
    model = _llama(bert_tokenizer)
    model.generation_config.eos_token_id = []  # every run ends at max_new_tokens
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=4, chat=False, view="head", layer=2)
    widget.wait(timeout=120)
    yield engine, widget
    widget.close()


def test_a_line_knocked_out_on_an_output_token_says_the_chosen_tokens_change(open_widget, generated):
    engine, widget = generated
    run = widget.generation
    token = widget.output_start + 2
    widget.focus_token = token
    page = open_widget(widget)
    page.wait_for_selector(".attnscope-knockout-run:not([hidden])")
    page.select_option(".attnscope-knockout-head", "1")
    page.select_option(".attnscope-knockout-key", "3")
    page.click(".attnscope-knockout-run")
    request = answer_request(page, widget, "knockout")
    assert {k: request[k] for k in ("layer", "head", "key", "token", "result_id")} == {
        "layer": 2, "head": 1, "key": 3, "token": token, "result_id": widget.result_id}
    expected = attnscope.knockout(engine, run.ids[:token], edges=[(2, 1, token - 1, 3)], target=run.ids[token]).iloc[0]
    assert abs(expected.delta) > 1e-3  # shown to 3 decimals
    delta = f"{'+' if expected.delta > 0 else ''}{expected.delta:.3f}".replace("-", "−")
    line = page.locator(".attnscope-knockout-result")
    line.filter(has_text="Δ").wait_for()
    text = line.text_content()
    assert text.startswith(f"line “{widget.tokens[token - 1]}” → “{widget.tokens[3]}” blocked in layer 2, head 1")
    assert f"“{widget.tokens[token]}” (chosen at step 3)" in text and text.endswith(f"Δ {delta}")  # the text view's step
    assert not page.problems, page.problems


def test_a_prompt_token_selected_says_to_select_an_output_token(open_widget, generated):
    _, widget = generated
    widget.focus_token = 2
    page = open_widget(widget)
    why = page.locator(".attnscope-knockout-why")
    why.wait_for()
    assert why.text_content().startswith(f"Select an output token (from token {widget.output_start} on)")
    assert page.locator(".attnscope-knockout-run").is_hidden()


def test_an_encoder_decoders_line_into_the_source_is_knocked_out_in_cross_attention(open_widget, bert_tokenizer):
    """BART: the page reads the source's tokens, then the decoder's. The control offers every key
    before the output token (the source and the decoder so far); one in the source is a
    cross-attention line, said so, with attnscope.knockout's Δ on the run's own ids."""
    from small_models import tiny_bart

    engine = attnscope.load(tiny_bart(vocab_size=len(bert_tokenizer), lm_head=True), bert_tokenizer, device="cpu")
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=3, chat=False, view="head", layer=1)
    try:
        run = widget.wait(timeout=120)
        n_source, token = len(run.prompt_ids), len(run.ids) - 1
        widget.focus_token = token
        page = open_widget(widget)
        page.wait_for_selector(".attnscope-knockout-run:not([hidden])")
        keys = page.eval_on_selector_all(".attnscope-knockout-key option", "os => os.map((o) => Number(o.value))")
        assert keys == [-1, *range(token)]  # the whole head, then every key the predicting token read
        page.select_option(".attnscope-knockout-head", "2")
        page.select_option(".attnscope-knockout-key", "3")
        page.click(".attnscope-knockout-run")
        request = answer_request(page, widget, "knockout")
        assert (request["key"], request["token"]) == (3, token)
        expected = attnscope.knockout(engine, run.prompt_ids, decoder=run.ids[n_source:token], target=run.ids[token],
                                      edges=[("cross", 1, 2, token - 1 - n_source, 3)]).iloc[0]
        line = page.locator(".attnscope-knockout-result")
        line.filter(has_text="Δ").wait_for()
        text = line.text_content()
        assert text.startswith(f"line “{widget.tokens[token - 1]}” → “{widget.tokens[3]}” blocked in layer 1, head 2 (cross-attention)"), text
        assert f"{abs(expected.delta):.3f}" in text or f"{abs(expected.delta):.1e}" in text, (text, expected.delta)
        assert not page.problems, page.problems
    finally:
        widget.close()
