"""A page saved from any widget state opens as the widget stood, and every tab paints offline.

Each case sets a widget up as a user would (layer, heads, included layers and heads, words,
theme, encoder-decoder part, masks, view), then renders it twice in chromium: live, from the
widget's synced state through the harness's fake model, and saved, from save_html opened from
disk with the network refused. What the user sees (a snapshot of every control and drawing) must
be the same.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from real_widget import wire
from test_head_view_browser import BUNDLE

import attnscope
from attnscope.widget.contract import contract_traits
from attnscope.widget.payloads import window_around

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

# What the user sees, read from the page: the same function for the live and the saved view.
SNAPSHOT = """() => {
  const q = (s) => document.querySelector(s);
  const all = (s) => [...document.querySelectorAll(s)];
  const visible = (node) => !!node && node.offsetParent !== null;
  const texts = (s) => all(s).filter(visible).map((n) => n.textContent);
  const layer = q("select.attnscope-layer");
  const part = q("select.attnscope-part");
  return {
    view: all("button.attnscope-tab").filter((t) => t.getAttribute("aria-selected") === "true").map((t) => t.dataset.view),
    layer: layer?.value,
    layers: [...(layer?.options ?? [])].map((o) => o.textContent),
    part: visible(part) ? part.value : null,
    words: q("input.attnscope-words")?.checked,
    dark: q(".attnscope-root").classList.contains("attnscope-dark"),
    headsOn: all(".attnscope-swatch").filter((s) => !s.classList.contains("attnscope-off")).map((s) => s.dataset.head),
    filter: q("select.attnscope-filter")?.value,
    tokens: texts(".attnscope-head-view .attnscope-left .attnscope-token-text"),
    keyTokens: texts(".attnscope-head-view .attnscope-right .attnscope-token-text"),
    lines: visible(q(".attnscope-lines")) ? q(".attnscope-lines").dataset.lineCount : null,
    cells: visible(q("canvas.attnscope-thumbnails")) ? q("canvas.attnscope-thumbnails").dataset.cells : null,
    gridLabels: texts(".attnscope-model-view .attnscope-grid-heads span, .attnscope-model-view .attnscope-grid-layers span"),
    showChange: q("input.attnscope-show-change")?.checked,
    maskSummary: texts(".attnscope-mask-summary").join(""),
    notice: texts(".attnscope-notice").join(""),
    error: texts(".attnscope-error").join(""),
    windowNote: texts(".attnscope-window-note").join(""),
    scaleNote: texts(".attnscope-scale-note").join(""),
    rollout: visible(q("canvas.attnscope-matrix")) ? [q("canvas.attnscope-matrix").dataset.n, q("canvas.attnscope-matrix").dataset.layer] : null,
    rolloutMode: q("select.attnscope-rollout-mode")?.value,
    rolloutTitle: texts(".attnscope-matrix-title").join(""),
    rolloutMessage: texts(".attnscope-matrix-message").join(""),
    rolloutBoxes: [".attnscope-matrix-drop-special", ".attnscope-matrix-row-norm"].map((s) => q(`input${s}`)?.checked),
  };
}"""

PAINTED = """selector => { const c = document.querySelector(selector);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }"""


def settle(page):
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


@pytest.fixture
def live_and_saved(watched_page, server, tmp_path):
    def open_both(widget, ready: str, kernel_answers: bool = False, detached: bool = False):
        viewport = {"width": 1400, "height": 1000}
        live = watched_page(viewport=viewport)
        live.goto(f"{server}/tests/browser/harness.html")
        live.wait_for_function("window.harnessReady === true")
        state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
        start = "([s, detached]) => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s), {detached})"
        assert live.evaluate(start, [state, detached]) == "function"

        saved = watched_page(viewport=viewport, offline=True)
        refused = []
        saved.context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                            else (refused.append(route.request.url), route.abort()))
        saved.goto(widget.save_html(tmp_path / "page.html").as_uri())
        if kernel_answers:
            answer_as_the_kernel(live, widget)
        for page in (live, saved):
            page.wait_for_function(ready)
            settle(page)
        assert not refused, refused
        return live, saved

    return open_both


def answer_as_the_kernel(live, widget) -> None:
    """The live page's pending request answered by the widget's own handler (as the kernel would)."""
    live.wait_for_function("window.attnscopeHarness.model.sentMessages.some((m) => m.kind === 'request')")
    request = live.evaluate("window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind === 'request')")
    content, buffers = widget._channel._handlers[request["type"]](request, [])
    words = [list(np.frombuffer(b, dtype="<u2").tolist()) for b in buffers]
    live.evaluate(
        """([content, words]) => { const h = window.attnscopeHarness;
            h.model.emitCustom(content, h.halfBuffers(words)); }""",
        [{"kind": "reply", "type": request["type"], "id": request["id"], **content}, words],
    )


def same_view(live, saved) -> dict:
    shown_live, shown_saved = live.evaluate(SNAPSHOT), saved.evaluate(SNAPSHOT)
    assert shown_saved == shown_live
    assert not live.problems and not saved.problems, (live.problems, saved.problems)
    return shown_saved


HEAD_READY = "Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0"
MODEL_READY = "Number(document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells) > 0"
ROLLOUT_READY = "Number(document.querySelector('canvas.attnscope-matrix')?.dataset.n) > 0"


def test_head_view_with_words_heads_filter_and_dark_theme(live_and_saved, default_model):
    widget = attnscope.AttentionWidget(
        "Unbelievably, the zookeeper's giraffe sneezed.", "Nobody flinched.", model=default_model,
        layer=3, heads=[1, 4, 7], word_level=True, theme="dark",
    )
    widget.sentence_filter = "ab"
    shown = same_view(*live_and_saved(widget, HEAD_READY))
    assert shown["view"] == ["head"] and shown["layer"] == "3" and shown["headsOn"] == ["1", "4", "7"]
    assert shown["words"] is True and shown["dark"] is True and shown["filter"] == "ab"
    assert "Unbelievably" in shown["tokens"] and "zookeeper" in shown["tokens"]  # words as written, not wordpieces


def test_model_view_with_included_layers_and_heads(live_and_saved, default_model):
    widget = attnscope.AttentionWidget(
        "The cat sat on the mat.", model=default_model, view="model", include_layers=[1, 4], include_heads=[0, 2, 5],
    )
    shown = same_view(*live_and_saved(widget, MODEL_READY))
    assert shown["view"] == ["model"] and shown["cells"] == "6"
    assert shown["gridLabels"] == ["Head 0", "Head 2", "Head 5", "Layer 1", "Layer 4"]


def test_masked_heads_with_the_change_shown(live_and_saved, default_model):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model, view="model",
                                       masked_heads=[(0, 1), (2, 3)])
    widget.show_change = True
    live, saved = live_and_saved(widget, MODEL_READY)
    shown = same_view(live, saved)
    assert shown["showChange"] is True and shown["maskSummary"].startswith("Masked 0-1, 2-3: attention changes")
    assert saved.evaluate(PAINTED, "canvas.attnscope-thumbnails") > 100


def test_a_difference_of_two_models_opens_on_one_scale_for_every_head(live_and_saved, bert_tokenizer):
    """Issue 45: |second − first| is drawn on the run's one scale, live and saved alike, which the view
    says; an enlarged head gives its largest change, never a uniform row's weight."""
    import copy

    from test_comparison import TEXTS, small_bert

    base = small_bert()
    tuned = copy.deepcopy(base)
    with torch.no_grad():  # as fine-tuning would: layer 1's queries changed
        query = tuned.encoder.layer[1].attention.self.query
        query.weight.copy_(torch.randn(query.weight.shape, generator=torch.Generator().manual_seed(1)) * 2.0)
    widget = attnscope.AttentionWidget(TEXTS[0], model=attnscope.load(base, bert_tokenizer, device="cpu"),
                                       compare=attnscope.load(tuned, bert_tokenizer, device="cpu"),
                                       view="model", compare_shown="difference")
    live, saved = live_and_saved(widget, MODEL_READY)
    shown = same_view(live, saved)
    largest = widget.one_scale["largest"]
    assert "one scale for every layer and head" in shown["scaleNote"] and f"strongest line = {largest:.3f}" in shown["scaleNote"]
    for page in (live, saved):
        canvas = page.locator("canvas.attnscope-thumbnails")
        box, cell = canvas.bounding_box(), float(canvas.get_attribute("data-cell"))
        page.mouse.move(box["x"] + cell / 2, box["y"] + 1.5 * cell)  # layer 1, head 0
        card = page.locator(".attnscope-zoom .attnscope-hint").text_content()
        assert card.startswith("largest change") and "strongest line" in card and "uniform" not in card


def test_rollout_tab_paints_offline(live_and_saved, default_model):
    widget = attnscope.AttentionWidget("The keeper fed the lions.", model=default_model, view="rollout")
    live, saved = live_and_saved(widget, ROLLOUT_READY)
    shown = same_view(live, saved)
    # [CLS] and [SEP] left out, as the view opens (issue 30).
    assert shown["rollout"] == [str(len(widget.tokens) - 2), str(widget.n_layers - 1)]
    assert saved.evaluate(PAINTED, "canvas.attnscope-matrix") > 100


def test_the_rollout_tabs_layer_and_boxes_are_the_widgets_and_the_saved_page_opens_on_them(live_and_saved, default_model):
    """Issue 45: the layer and the boxes the reader picks in the Rollout tab are written to
    rollout_choice; the saved page opened on the last layer with [CLS] / [SEP] left out, whatever
    the reader had chosen."""
    widget = attnscope.AttentionWidget("The keeper fed the lions.", model=default_model, view="rollout")
    live, saved = live_and_saved(widget, ROLLOUT_READY)
    live.select_option("select.attnscope-matrix-layer", "2")
    live.uncheck("input.attnscope-matrix-drop-special")
    written = live.evaluate("window.attnscopeHarness.model.saved.at(-1)")["rollout_choice"]
    assert written == {"layer": 2, "leave_out_special": False, "rows_to_1": False}
    widget.set_state({"rollout_choice": written})  # as the kernel gets it: taken
    assert widget.rollout_choice == written and widget.error == ""
    widget.rollout_choice = {**written, "rows_to_1": True}
    live, saved = live_and_saved(widget, ROLLOUT_READY)
    shown = same_view(live, saved)
    assert shown["rollout"] == [str(len(widget.tokens)), "2"] and shown["rolloutBoxes"] == [False, True]


def test_a_saved_page_shows_the_rollout_tab_in_the_mode_it_was_saved_with(live_and_saved, default_model):
    widget = attnscope.AttentionWidget("The keeper fed the lions.", model=default_model, view="rollout",
                                       rollout_mode="contributions")
    assert widget.rollout["mode"] == "contributions"
    live, saved = live_and_saved(widget, ROLLOUT_READY)
    shown = same_view(live, saved)
    assert shown["rolloutMode"] == "contributions" and shown["rolloutTitle"].startswith("ALTI contributions (Ferrando et al. 2022)")
    assert shown["rollout"] == [str(len(widget.tokens) - 2), str(widget.n_layers - 1)] and not shown["rolloutMessage"]
    assert saved.evaluate(PAINTED, "canvas.attnscope-matrix") > 100
    # The mode is fixed on a saved page: the other needs the live widget, and the select goes back.
    saved.select_option("select.attnscope-rollout-mode", "rollout")
    settle(saved)
    after = saved.evaluate(SNAPSHOT)
    assert after["rolloutMode"] == "contributions" and "Rollout tab's mode" in after["error"]
    assert after["rolloutTitle"].startswith("ALTI contributions")


def test_a_contributions_tab_of_an_unsupported_family_says_why_offline(live_and_saved, bert_tokenizer):
    from small_models import FAMILIES

    engine = attnscope.load(FAMILIES["gpt2 (fused q|k|v, Conv1D)"]().eval(), bert_tokenizer, device="cpu")
    widget = attnscope.AttentionWidget("The keeper fed the lions.", model=engine, view="rollout", rollout_mode="contributions")
    ready = "document.querySelector('.attnscope-matrix-message')?.textContent.length > 0"
    shown = same_view(*live_and_saved(widget, ready))
    assert "is not one of them" in shown["rolloutMessage"] and shown["rollout"] is None and shown["rolloutMode"] == "contributions"
    assert not shown["error"]


def tiny_t5(tokenizer):
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=tokenizer.vocab_size, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=3, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0,
    )
    return attnscope.load(transformers.T5Model(config), tokenizer, device="cpu")


def test_encoder_decoder_part_and_t5_score_label(live_and_saved, bert_tokenizer):
    engine = tiny_t5(bert_tokenizer)
    widget = attnscope.AttentionWidget("The quick brown fox.", "Der schnelle Fuchs.", engine)
    widget.attention_part = "cross"
    widget.layer = 2  # the decoder has 3 layers, the encoder 2
    shown = same_view(*live_and_saved(widget, HEAD_READY))
    assert shown["part"] == "cross" and shown["layer"] == "2" and shown["keyTokens"] != shown["tokens"]

    # The neuron view of the decoder's self-attention: T5 adds its position bias and does not scale.
    widget.attention_part = "decoder"
    widget.view = "neuron"
    widget.neuron_head, widget.neuron_query = 2, 1
    live, saved = live_and_saved(
        widget, "document.querySelector('.attnscope-neuron-table:not([hidden])') !== null", kernel_answers=True
    )
    same_view(live, saved)
    numbers = ".attnscope-neuron-numbers .attnscope-neuron-number"
    assert saved.eval_on_selector_all(numbers, "ns => ns.map(n => n.textContent)") == live.eval_on_selector_all(
        numbers, "ns => ns.map(n => n.textContent)"
    )
    title = saved.eval_on_selector(".attnscope-neuron-numbers .attnscope-neuron-title", "n => n.textContent")
    assert title == "q·k + position bias"
    softmax = saved.eval_on_selector_all(
        ".attnscope-neuron-softmax .attnscope-neuron-number", "ns => ns.map(n => Number(n.textContent.trim().split(/\\s+/).pop()))"
    )
    expected = widget.token_result.attention[2, 2, 1].tolist()
    assert max(abs(a - b) for a, b in zip(softmax, expected)) < 2e-3


NEURON_READY = "document.querySelector('.attnscope-neuron-table:not([hidden])') !== null"
NEURON_COLUMNS = """() => {
  const numbers = (name) => [...document.querySelectorAll(`.attnscope-neuron-${name} .attnscope-neuron-number`)].map((n) => n.textContent.trim());
  const canvas = (name) => document.querySelector(`canvas.attnscope-neuron-${name}`);
  const table = document.querySelector('.attnscope-neuron-table');
  return {
    titles: [...document.querySelectorAll('.attnscope-neuron-title')].map((t) => t.textContent),
    softmax: numbers('softmax'), norms: numbers('norms'), weightedNorms: numbers('weighted-norms'),
    rows: ['values', 'weighted', 'output'].map((name) => canvas(name)?.dataset.rows ?? null),
    output: canvas('output')?.title ?? null,
    right: Math.max(table.getBoundingClientRect().right, document.documentElement.scrollWidth,
      ...[...table.querySelectorAll('.attnscope-token-text')].map((n) => n.getBoundingClientRect().right)),
  };
}"""


def test_neuron_view_past_the_softmax_saved_as_live(live_and_saved, default_model):
    """Issue 47: after the softmax, v, α·v and the head's output o, ‖f(x)‖ and α‖f(x)‖; the saved page
    computes them as the live view does (the same inputs, the same maths: js/drawing/neuron_maths.js), for
    30+ tokens in a 1,400-pixel-wide window."""
    text = ("The zookeeper fed the hungry lions before the storm arrived, and then she walked home "
            "through the quiet park while the rain kept falling on the old city.")
    widget = attnscope.AttentionWidget(text, model=default_model, view="neuron", layer=3)
    widget.neuron_head, widget.neuron_query = 5, 7
    n = len(widget.tokens)
    assert n > 30
    live, saved = live_and_saved(widget, NEURON_READY, kernel_answers=True)
    same_view(live, saved)
    shown = saved.evaluate(NEURON_COLUMNS)
    assert live.evaluate(NEURON_COLUMNS) == shown
    assert {"v (values)", "α·v", "o = Σ α·v →", "‖f(x)‖", "α‖f(x)‖"} <= set(shown["titles"])
    assert shown["rows"] == [str(n), str(n), "1"]
    assert shown["right"] <= 1400, "the table fits a 1,400-pixel window"
    result = widget.token_result
    norms, alpha = result.value_norms[3, 5], result.attention[3, 5, 7]
    # float16 inputs: ‖f‖ within float16's rounding; α‖f‖ and o within that and the softmax's.
    assert all(abs(float(a) - b) <= 1e-3 * b + 6e-3 for a, b in zip(shown["norms"], norms.tolist()))
    assert all(abs(float(a) - b) <= 2e-3 * b + 2e-3 for a, b in zip(shown["weightedNorms"], (alpha * norms).tolist()))
    o = (alpha[:, None] * result.values[3, 5]).sum(0)
    drawn = [float(v) for v in shown["output"].split(": ")[1].split(", ")]
    assert max(abs(a - b) for a, b in zip(drawn, o.tolist())) <= 1e-2 * float(o.abs().max()) + 1e-3


def test_a_long_runs_head_view_shows_the_same_window_saved_as_live(live_and_saved, monkeypatch):
    """A long run's head view: the window around the selected token, answered by the kernel live
    and by the saved page's own copy of that answer offline."""
    from small_models import SHAPE, TEXT, scaled_up
    from test_token_labels import byte_level_bpe

    model = scaled_up(transformers.Qwen2Model(transformers.Qwen2Config(vocab_size=320, **SHAPE)))
    engine = attnscope.load(model, byte_level_bpe(), device="cpu")
    monkeypatch.setattr(attnscope.widget.long_answers, "WINDOW_TOKENS", 16)  # smaller than the text: a window to place
    widget = attnscope.AttentionWidget(TEXT, model=engine, attention="on_demand", view="head", layer=1)
    widget.focus_token = 20
    live, saved = live_and_saved(widget, HEAD_READY, kernel_answers=True)
    shown = same_view(live, saved)
    start, end = window_around(20, len(widget.tokens), 16)
    assert shown["view"] == ["head"] and shown["tokens"] == widget.tokens[start:end]
    assert shown["windowNote"].startswith(f"Tokens {start}–{end - 1} of {len(widget.tokens)}, around token 20")
    assert int(shown["lines"]) > 16
    assert saved.locator(".attnscope-left .attnscope-selected").inner_text() == widget.tokens[20]
