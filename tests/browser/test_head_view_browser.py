"""The built bundle in headless Debian chromium, driven through a fake anywidget model.

tests/browser/harness.html imports src/attnscope/static/widget.js, so this tests what ships.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "src" / "attnscope" / "static" / "widget.js"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

TOKENS = ["[CLS]", "the", "<img src=x onerror=window.pwned=1>", "[SEP]"]
# Two heads × 4 × 4, rows sum to 1. Head 0: 10 weights ≥ 0.005; head 1: 4 (a diagonal).
HEAD0 = [
    0.70, 0.20, 0.10, 0.00,
    0.25, 0.25, 0.25, 0.25,
    0.00, 0.90, 0.10, 0.00,
    0.50, 0.00, 0.00, 0.50,
]
HEAD1 = [
    1.0, 0.0, 0.0, 0.0,
    0.0, 1.0, 0.0, 0.0,
    0.0, 0.0, 1.0, 0.0,
    0.0, 0.0, 0.0, 1.0,
]
HEAD0_LINES = sum(w >= 0.005 for w in HEAD0)


def start(page, **over) -> None:
    state = {
        "tokens": TOKENS, "sentence_b_start": None, "n_layers": 2, "n_heads": 2, "model_name": "fake model",
        "layer": 0, "heads": [0, 1], "sentence_filter": "all", "theme": "light", "text": "the <img>",
        "text_b": None, "result_id": 0, "request": {}, "notice": "", "error": "", "view": "head",
        "thumbnails": {}, "neuron_head": 0, "neuron_query": 0, "neuron_unavailable": "", **over,
    }
    assert page.evaluate(
        """state => { const h = window.attnscopeHarness;
            return h.start({...state, attention: h.attentionPayload(0, 2, state.weights)}); }""",
        {**state, "weights": HEAD0 + HEAD1},
    ) == "function"
    if state["view"] == "head":
        page.wait_for_function("document.querySelector('.attnscope-lines')?.dataset.lineCount > 0")


def line_count(page) -> int:
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return int(page.eval_on_selector(".attnscope-lines", "c => c.dataset.lineCount"))


def saved(page, name):
    return page.evaluate(f"window.attnscopeHarness.model.saved.at(-1)?.{name}")


def test_draws_the_lines_of_a_known_matrix_and_paints_them(page):
    start(page)
    assert line_count(page) == HEAD0_LINES + 4
    # The canvas really has ink on it (not just a count).
    painted = page.eval_on_selector(
        ".attnscope-lines canvas",
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }",
    )
    assert painted > 100
    assert not page.problems, page.problems


def test_head_toggle_hides_that_heads_lines(page):
    start(page)
    page.click(".attnscope-swatch[data-head='1']")
    page.wait_for_function("window.attnscopeHarness.model.saved.length > 0")
    assert saved(page, "heads") == [0]
    # The kernel echoes the change back (as the real model does); the drawing follows.
    page.evaluate("window.attnscopeHarness.model.emit({heads: [0]})")
    assert line_count(page) == HEAD0_LINES
    page.dblclick(".attnscope-swatch[data-head='1']")
    page.wait_for_function("window.attnscopeHarness.model.saved.at(-1).heads.length === 1 "
                           "&& window.attnscopeHarness.model.saved.at(-1).heads[0] === 1")
    page.evaluate("window.attnscopeHarness.model.emit({heads: [1]})")
    assert line_count(page) == 4
    assert not page.problems, page.problems


def test_hover_shows_only_that_tokens_lines_with_weights(page):
    start(page, heads=[0])
    page.hover(".attnscope-left .attnscope-token[data-index='1']")
    assert line_count(page) == 4
    weights = page.eval_on_selector_all(".attnscope-right .attnscope-weight-value", "ns => ns.map(n => n.textContent)")
    assert weights == ["0.25"] * 4
    page.mouse.move(5, 650)
    assert line_count(page) == HEAD0_LINES


def test_the_number_beside_the_hover_bars_says_what_it_is(page):
    """Issue 30: with several heads, the number beside a row's bars is their largest weight, and
    says so; the row's hover card names the pair and gives each head's weight (heads from 0)."""
    start(page, heads=[0, 1])
    page.hover(".attnscope-left .attnscope-token[data-index='1']")
    rows = ".attnscope-right .attnscope-token"
    shown = page.eval_on_selector_all(rows, """rs => rs.map(r => [r.querySelectorAll('.attnscope-weight-bar').length,
        r.querySelector('.attnscope-weight-value')?.textContent ?? '', r.title])""")
    # Query "the" (row 1 of each head): head 0 gives every key 0.25, head 1 only itself 1.0.
    assert [(bars, number) for bars, number, _ in shown] == [(1, "0.25"), (2, "max 1.00"), (1, "0.25"), (1, "0.25")]
    # (The weights arrive as bytes: 0.25 reads 0.251.)
    assert shown[1][2] == "Attention from “the” to “the” (one bar a head, the number their largest):\nhead 0: 0.251\nhead 1: 1.000"
    assert shown[0][2] == "Attention from “the” to “[CLS]” (the bar and the number):\nhead 0: 0.251"


# Each token's box on screen, and each drawn weight's (bars and numbers) with the plot's.
BOXES = """() => {
  const box = (n) => { const r = n.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const tokens = (side) => [...document.querySelectorAll(`.attnscope-${side} .attnscope-token-text`)].map(box);
  return {left: tokens("left"), right: tokens("right"), plot: box(document.querySelector(".attnscope-plot")),
          weights: [...document.querySelectorAll(".attnscope-weight-bar, .attnscope-weight-value")].map(box)};
}"""


@pytest.mark.parametrize("viewport", [(1400, 1000), (480, 800)])
def test_hovering_a_token_moves_no_token(watched_page, default_model, tmp_path, viewport):
    """Issue 30: hovering a right-column token drew its weights beside the left tokens, which widened
    that column and moved the plot about 94 px (280 px for [CLS]): the token left the cursor."""
    import attnscope

    widget = attnscope.AttentionWidget("The quick brown fox jumps over the lazy dog because it was bored.",
                                       model=default_model)
    page = watched_page(viewport={"width": viewport[0], "height": viewport[1]})
    page.goto(widget.save_html(tmp_path / "hover.html").as_uri())
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    still = page.evaluate(BOXES)
    for side in ("right", "left"):
        for i, (x0, y0, x1, y1) in enumerate(still[side]):
            x, y = (x0 + x1) / 2, (y0 + y1) / 2
            page.mouse.move(x, y)
            hovered = page.evaluate(BOXES)
            assert hovered["left"] == still["left"] and hovered["right"] == still["right"], (side, i)
            assert page.evaluate("([x, y]) => document.elementFromPoint(x, y)?.textContent", [x, y]) == \
                widget.tokens[i]
            # The weights show, whole, inside the plot (the view's gutters hold them).
            px0, py0, px1, py1 = hovered["plot"]
            assert len(hovered["weights"]) > len(widget.tokens), (side, i)
            assert all(px0 - 0.5 <= a and c <= px1 + 0.5 for a, _, c, _ in hovered["weights"]), (side, i, hovered)
            page.mouse.move(1, viewport[1] - 1)
    assert not page.problems, page.problems


def test_sentence_filter(page):
    start(page, sentence_b_start=2, heads=[0])
    page.select_option("select.attnscope-filter", "ab")
    assert saved(page, "sentence_filter") == "ab"
    page.evaluate("window.attnscopeHarness.model.emit({sentence_filter: 'ab'})")
    # A→B: rows 0-1 to columns 2-3 of head 0 with weight ≥ 0.005: 0.10, 0.25, 0.25.
    assert line_count(page) == 3
    assert page.eval_on_selector_all(".attnscope-right .attnscope-token-text", "ns => ns.map(n => n.textContent)") == TOKENS[2:]


def test_hostile_token_is_text_and_cleanup_empties_the_host(page):
    start(page)
    assert page.evaluate("document.querySelectorAll('#host img').length") == 0
    assert page.evaluate("window.pwned") is None
    assert TOKENS[2] in page.eval_on_selector_all(".attnscope-token-text", "ns => ns.map(n => n.textContent)")
    page.evaluate("window.attnscopeHarness.cleanup()")
    assert page.evaluate("document.getElementById('host').children.length") == 0
    assert page.evaluate("window.attnscopeHarness.model.listenerCount()") == 0


def test_layer_switch_waits_for_that_layers_data(page):
    start(page)
    page.select_option("select.attnscope-layer", label="1")  # counted from 0: the second layer is "1"
    assert saved(page, "layer") == 1
    # Drawn on the next animation frame: until layer 1's data arrives, the view says it is loading.
    page.wait_for_function("document.querySelector('.attnscope-status').textContent === 'loading layer…'")
    page.evaluate(
        "(w) => { const h = window.attnscopeHarness; h.model.emit({attention: h.attentionPayload(1, 2, w)}); }",
        HEAD1 + HEAD1,
    )
    assert line_count(page) == 8
    assert page.text_content(".attnscope-status") == ""


def test_edit_sends_a_request_and_ignores_stale_results(page):
    start(page)
    page.fill("input.attnscope-text", "new text")
    page.press("input.attnscope-text", "Enter")
    request = saved(page, "request")
    assert request["text"] == "new text" and request["id"] >= 1
    assert page.text_content(".attnscope-status") == "computing…"
    # An error answer for that request: shown, and the previous drawing stays.
    page.evaluate(f"window.attnscopeHarness.model.emit({{error: 'The text is empty', result_id: {request['id']}}})")
    page.wait_for_function("document.querySelector('.attnscope-error').textContent === 'The text is empty'")
    assert page.is_visible(".attnscope-error")
    assert page.input_value("input.attnscope-text") == "new text"  # what the user typed is kept
    assert line_count(page) == HEAD0_LINES + 4


def test_dark_theme_and_notice_are_visible(page):
    start(page, theme="dark", notice="Input truncated: 600 tokens → 512.")
    assert page.eval_on_selector(".attnscope-root", "r => r.classList.contains('attnscope-dark')")
    assert page.is_visible(".attnscope-notice")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "head_view_dark.png"))


# Model view: 2 layers × 2 heads of 4 × 4 thumbnails (the head view's matrices reused).
THUMBNAILS = HEAD0 + HEAD1 + HEAD1 + HEAD0



def test_a_notice_of_several_lines_shows_each_line(page):
    """Truncation and NaN heads are two lines of one notice (result_notice): both must read as lines."""
    start(page, notice="Input truncated: 600 tokens → 512.\nAttention holds NaN or infinite values in 1 of 4 heads: 1-2.")
    assert page.is_visible(".attnscope-notice")
    assert page.eval_on_selector(".attnscope-notice", "n => n.innerText.split('\\n').length") == 2


def start_model_view(page) -> None:
    start(page, view="model")
    page.evaluate(
        """w => { const h = window.attnscopeHarness; const p = h.attentionPayload(0, 4, w);
            h.model.emit({thumbnails: {layers: [0, 1], heads: [0, 1], n_tokens: 4, data: p.data,
                                       dtype: "uint8", shape: [2, 2, 4, 4], scale: 1 / 255}}); }""",
        THUMBNAILS,
    )
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '4'")


def test_model_view_draws_every_head_and_opens_one_on_click(page):
    start_model_view(page)
    lines = int(page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.lineCount"))
    assert lines == 2 * (sum(w >= 0.02 for w in HEAD0) + 4)
    assert page.is_hidden(".attnscope-head-view")
    box = page.locator("canvas.attnscope-thumbnails").bounding_box()
    # Hover layer 1, head 0 (row 1, column 0): it is enlarged, titled as the Python API counts.
    page.mouse.move(box["x"] + 40, box["y"] + 84 + 40)
    page.wait_for_selector(".attnscope-zoom:not([hidden])")
    assert page.text_content(".attnscope-zoom-title") == "layer 1, head 0"
    page.mouse.click(box["x"] + 40, box["y"] + 84 + 40)
    last = page.evaluate("window.attnscopeHarness.model.saved.at(-1)")
    assert (last["view"], last["layer"], last["heads"]) == ("head", 1, [0])
    assert not page.problems, page.problems


def half_words(values) -> list[int]:
    import numpy as np

    return np.asarray(values, dtype="<f2").ravel().view("<u2").tolist()


def neuron_reply(page, request_id: int, queries, keys, values, norms) -> None:
    """The kernel's answer to a "neuron" request for layer 0 (export.neuron_store: that layer's
    queries heads × T × d, keys and values heads × T × d, ‖f‖ heads × T, as float16 at `paths`)."""
    heads, n, d = queries.shape
    store = {"layers": [0], "key_group": 1, "causal": False, "scaling": [1 / d ** 0.5], "score_labels": {"0": "q·k / √d"},
             "n_queries": n, "part": "",
             **{name: {"data": None, "dtype": "float16", "shape": [1, *a.shape]}
                for name, a in (("queries", queries), ("keys", keys), ("values", values), ("norms", norms))}}
    content = {"kind": "reply", "type": "neuron", "id": request_id, "result_id": 0, "layer": 0, "n_queries": n, "part": "",
               "shown": "", "store": store, "paths": [[name, "data"] for name in ("queries", "keys", "values", "norms")]}
    page.evaluate("([content, arrays]) => { const h = window.attnscopeHarness; h.model.emitCustom(content, h.halfBuffers(arrays)); }",
                  [content, [half_words(a) for a in (queries, keys, values, norms)]])


def test_neuron_view_requests_a_layer_and_draws_any_querys_computation(page):
    import numpy as np

    start(page, view="neuron", neuron_head=1, neuron_query=0, neuron_unavailable="")
    page.wait_for_function("window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind === 'request')?.type === 'neuron'")
    request = page.evaluate("window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind === 'request')")
    assert {k: request[k] for k in ("type", "layer")} == {"type": "neuron", "layer": 0} and "query" not in request
    assert page.text_content(".attnscope-status") == "loading…"

    rng = np.random.default_rng(0)
    heads, d, n = 2, 8, len(TOKENS)
    # The kernel's answer: the layer's inputs of js/drawing/neuron_maths.js as float16.
    queries, keys, values, norms = (np.float16(a).astype(float) for a in (
        rng.normal(size=(heads, n, d)), rng.normal(size=(heads, n, d)), rng.normal(size=(heads, n, d)), 1 + rng.random((heads, n))))
    neuron_reply(page, request["id"], queries, keys, values, norms)
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    numbers = lambda name: page.eval_on_selector_all(
        f".attnscope-neuron-{name} .attnscope-neuron-number", "ns => ns.map(n => n.textContent.trim())")
    sent = page.evaluate("window.attnscopeHarness.model.sentMessages.filter((m) => m.kind === 'request').length")
    for query in (0, 2):
        if query:  # another query token: drawn from the layer the page holds, nothing asked
            page.click(f".attnscope-neuron-queries .attnscope-token[data-index='{query}']")
            page.wait_for_function(f"document.querySelector('.attnscope-neuron-view').dataset.query === '{query}'")
        scores = keys[1] @ queries[1, query] / np.sqrt(d)
        softmax = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
        assert numbers("scores") == [f"{s:.2f}" for s in scores]
        assert numbers("softmax") == [f"{p:.3f}" if p >= 1e-3 else f"{p:.2g}" for p in softmax]
        # Past the softmax (issue 47): ‖f(x)‖, α‖f(x)‖ and o = Σ α v, in the query's row.
        assert numbers("norms") == [f"{v:.2f}" for v in norms[1]]
        assert numbers("weighted-norms") == [f"{v:.3f}" if v >= 1e-3 else f"{v:.2g}" for v in softmax * norms[1]]
        output = page.get_attribute("canvas.attnscope-neuron-output", "title")
        assert output == "o = Σ_j α_j v_j: " + ", ".join(f"{v:.3f}" for v in softmax @ values[1])
    assert page.evaluate("window.attnscopeHarness.model.sentMessages.filter((m) => m.kind === 'request').length") == sent
    assert not page.problems, page.problems
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "neuron_view.png"))


def test_neuron_view_shows_the_kernels_error(page):
    start(page, view="neuron")
    page.wait_for_function("window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind === 'request')?.type === 'neuron'")
    request_id = page.evaluate("window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind === 'request').id")
    page.evaluate(
        "id => window.attnscopeHarness.model.emitCustom({kind: 'reply', type: 'neuron', id, error: 'head=9 is out of range'}, [])",
        request_id,
    )
    page.wait_for_function("document.querySelector('.attnscope-neuron-view .attnscope-status').textContent.includes('head=9')")


LINE_PIXELS = "() => [...document.querySelectorAll('.attnscope-lines canvas')].map((c) => c.toDataURL()).join()"


def answer_layer_requests(page, widget, count: int) -> list[int]:
    """Answers the page's next `count` "layer" requests with the widget's own handler, as the
    kernel would, oldest first; → the layers asked for, in order. The page never has more than
    two out at once."""
    from real_widget import wire

    replies, asked = [], []
    widget.send = lambda content, buffers=None: replies.append((content, buffers))
    layer_requests = "window.attnscopeHarness.model.sentMessages.filter((m) => m.type === 'layer' && m.weigh_by === undefined)"
    for _ in range(count):
        page.wait_for_function(f"{layer_requests}.length > {len(asked)}")
        out = page.evaluate(f"{layer_requests}.length") - len(asked)
        assert out <= 2, f"{out} layer requests out at once"
        request = page.evaluate(f"{layer_requests}[{len(asked)}]")
        asked.append(request["layer"])
        widget._handle_custom_msg(request, [])
        content, buffers = replies[-1]
        page.evaluate("""([content, buffers]) => window.attnscopeHarness.model.emitCustom(
            content, buffers.map((b) => window.attnscopeHarness.fromWire(b)))""", [content, [wire(b) for b in buffers]])
    return asked


def test_the_layers_around_the_open_one_are_held_and_a_switch_draws_at_once(open_widget, default_model):
    """Issue 32: the page asks for the other layers while idle, nearest first, two at a time; a
    layer switch then draws from what it holds, without waiting for the kernel, the same pixels
    as the kernel's layer; the kernel's copy arriving after does not draw again."""
    from real_widget import wire

    import attnscope

    text = "The cat sat on the mat because it was tired. It fell asleep at once."
    widget = attnscope.AttentionWidget(text, model=default_model, layer=2)
    page = open_widget(widget)
    assert answer_layer_requests(page, widget, widget.n_layers - 1) == [3, 1, 4, 0, 5]
    page.wait_for_timeout(400)
    assert page.evaluate("window.attnscopeHarness.model.sentMessages.filter((m) => m.type === 'layer' && !m.weigh_by).length") == 5

    before = page.evaluate(LINE_PIXELS)
    page.select_option("select.attnscope-layer", "4")  # no attention trait comes: drawn from the held layer
    page.wait_for_function(f"before => ({LINE_PIXELS})() !== before", arg=before)
    held = page.evaluate(LINE_PIXELS)
    assert page.evaluate("window.attnscopeHarness.model.saved.at(-1).layer") == 4
    widget.layer = 4  # the kernel's answer to the page's write
    page.evaluate("a => window.attnscopeHarness.model.emit({attention: window.attnscopeHarness.fromWire(a)})", wire(widget.attention))
    page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate(LINE_PIXELS) == held

    # The same layer drawn from the kernel's trait alone, in a page that held nothing else.
    fresh = open_widget(attnscope.AttentionWidget(text, model=default_model, layer=4))
    fresh.wait_for_function("document.querySelector('.attnscope-lines')?.dataset.lineCount > 0")
    fresh.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert fresh.evaluate(LINE_PIXELS) == held
    assert not page.problems and not fresh.problems, page.problems + fresh.problems


def test_a_weigh_by_switch_draws_at_once_from_the_layer_asked_for_ahead(open_widget, default_model):
    """Issue 47 (a Weigh by switch within 100 ms): while idle the page asks for the open layer
    under the other weighing; the switch then draws it, with its one scale's caption, before the
    kernel answers, the same pixels as a page opened weighed; the kernel's answer draws nothing new.
    Switching back draws α again at once, from what the page showed before, asking nothing."""
    from real_widget import answer_request, wire

    import attnscope

    text = "The cat sat on the mat because it was tired. It fell asleep at once."
    widget = attnscope.AttentionWidget(text, model=default_model, layer=2)
    page = open_widget(widget)
    weighing = "window.attnscopeHarness.model.sentMessages.filter((m) => m.type === 'layer' && m.weigh_by)"
    assert answer_request(page, widget, "layer", "m.weigh_by")["weigh_by"] == "value_norm"
    page.wait_for_function("document.querySelector('.attnscope-lines')?.dataset.lineCount > 0")
    alpha = page.evaluate(LINE_PIXELS)
    page.select_option("select.attnscope-weigh", "value_norm")  # no trait comes from the kernel
    page.wait_for_function(f"before => ({LINE_PIXELS})() !== before", arg=alpha)
    page.wait_for_function("document.querySelector('.attnscope-head-view').textContent.includes('one scale for every layer and head')")
    weighed = page.evaluate(LINE_PIXELS)
    assert page.evaluate("window.attnscopeHarness.model.saved.at(-1).weigh_by") == "value_norm"
    widget.weigh_by = "value_norm"  # the kernel's answer to the page's write
    page.evaluate("""s => window.attnscopeHarness.model.emit({attention: window.attnscopeHarness.fromWire(s.attention),
        one_scale: s.one_scale, weigh_by: s.weigh_by})""",
                  {"attention": wire(widget.attention), "one_scale": widget.one_scale, "weigh_by": widget.weigh_by})
    page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate(LINE_PIXELS) == weighed

    fresh = open_widget(attnscope.AttentionWidget(text, model=default_model, layer=2, weigh_by="value_norm"))
    fresh.wait_for_function("document.querySelector('.attnscope-lines')?.dataset.lineCount > 0")
    fresh.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert fresh.evaluate(LINE_PIXELS) == weighed

    # The way back is what the page showed before: drawn at once, nothing asked of the kernel.
    page.select_option("select.attnscope-weigh", "attention")
    page.wait_for_function(f"before => ({LINE_PIXELS})() === before", arg=alpha)
    assert page.evaluate(f"{weighing}.length") == 1
    assert not page.problems and not fresh.problems, page.problems + fresh.problems
