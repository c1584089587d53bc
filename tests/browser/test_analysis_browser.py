"""The analysis views of the built bundle in headless chromium, fed the real widget's state."""

from __future__ import annotations

import pytest
from real_widget import answer_neuron_request, wire
from test_head_view_browser import BUNDLE

import attnscope

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

CORPUS = ["The cat sat on the mat.", "Dogs bark, loudly, at night.", "Attention is all you need."]


def saved(page) -> dict:
    return page.evaluate("() => window.attnscopeHarness.model.saved.at(-1)")


def test_rollout_view_draws_a_token_matrix(open_widget, default_model):
    widget = attnscope.AttentionWidget("The <b>keeper</b> climbed.", model=default_model, view="rollout")
    page = open_widget(widget)
    # It opens without [CLS] and [SEP] (issue 30), which would otherwise take most of the colour.
    page.wait_for_function(f"document.querySelector('canvas.attnscope-matrix')?.dataset.n === '{len(widget.tokens) - 2}'")
    assert page.eval_on_selector("canvas.attnscope-matrix", "c => c.dataset.layer") == "5"  # the last layer first
    labels = page.eval_on_selector_all(".attnscope-matrix-left span", "s => s.map(x => x.textContent)")
    assert labels == widget.tokens[1:-1] and page.query_selector(".attnscope-matrix-view b") is None
    assert page.problems == []


def test_head_stats_heatmap_opens_a_head(open_widget, default_model):
    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    widget.show_analysis(attnscope.head_stats(default_model, CORPUS, progress=False), measure="cls")
    page = open_widget(widget)
    page.wait_for_function("document.querySelector('canvas.attnscope-headmap')?.dataset.cells === '72'")
    assert page.eval_on_selector("canvas.attnscope-headmap", "c => c.dataset.measure") == "cls"
    box = page.query_selector("canvas.attnscope-headmap").bounding_box()
    page.mouse.move(box["x"] + 28 * 4 + 5, box["y"] + 28 * 2 + 5)  # layer 2, head 4
    tooltip = page.inner_text(".attnscope-headmap-view .attnscope-tooltip")
    assert tooltip.startswith("2-4 · Attention to [CLS]: ")
    page.mouse.click(box["x"] + 28 * 4 + 5, box["y"] + 28 * 2 + 5)
    state = saved(page)
    assert (state["view"], state["layer"], state["heads"]) == ("head", 2, [4])
    assert page.problems == []


def test_the_heatmaps_measure_is_the_widgets_and_a_saved_page_opens_on_it(open_widget, watched_page, default_model, tmp_path):
    """Issue 45: the measure the reader picks is written to analysis_choice, which the kernel takes
    (its picture draws it) and a saved page opens on; it was the page's alone."""
    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    widget.show_analysis(attnscope.head_stats(default_model, CORPUS, progress=False))
    page = open_widget(widget)
    page.wait_for_function("document.querySelector('canvas.attnscope-headmap')?.dataset.cells === '72'")
    first = widget.analysis["measure"]
    assert page.eval_on_selector("canvas.attnscope-headmap", "c => c.dataset.measure") == first
    # The colour bar stands under the map, from its left: it stood centred in the view, far right of it.
    bar = page.query_selector(".attnscope-headmap-view .attnscope-colorbar-bar").bounding_box()
    grid = page.query_selector(".attnscope-headmap-grid").bounding_box()
    assert grid["x"] <= bar["x"] <= grid["x"] + 8, (bar, grid)
    page.select_option("select.attnscope-measure", "cls")
    assert page.eval_on_selector("canvas.attnscope-headmap", "c => c.dataset.measure") == "cls"
    assert saved(page)["analysis_choice"] == {"measure": "cls"}
    widget.set_state({"analysis_choice": saved(page)["analysis_choice"]})  # as the kernel gets it: taken
    assert widget.analysis_choice == {"measure": "cls"} and widget.error == ""
    assert page.problems == []

    path = widget.save_html(tmp_path / "stats.html")
    reopened = watched_page()
    reopened.goto(path.as_uri())
    reopened.wait_for_function("document.querySelector('canvas.attnscope-headmap')?.dataset.cells === '72'")
    assert reopened.eval_on_selector("canvas.attnscope-headmap", "c => c.dataset.measure") == "cls"
    assert reopened.input_value("select.attnscope-measure") == "cls"
    assert reopened.problems == []


def test_distance_scatter_hovers_with_a_map(open_widget, default_model):
    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    widget.show_analysis(attnscope.head_distances(default_model, CORPUS, progress=False))
    page = open_widget(widget)
    page.wait_for_function("document.querySelector('canvas.attnscope-scatter')?.dataset.points === '72'")
    # Hover the first head's point, where the canvas says it drew it.
    box = page.query_selector("canvas.attnscope-scatter").bounding_box()
    x, y = (float(v) for v in page.get_attribute("canvas.attnscope-scatter", "data-positions").split(",")[:2])
    page.mouse.move(box["x"] + x + 1, box["y"] + y + 2)
    tooltip = page.query_selector(".attnscope-scatter-view .attnscope-tooltip")
    assert tooltip.is_visible()
    assert page.eval_on_selector(".attnscope-tooltip-map", "c => c.width") > 0
    assert page.problems == []


def test_words_box_and_mask_mode_send_their_traits(open_widget, default_model):
    widget = attnscope.AttentionWidget("Tokenization is unbelievable.", model=default_model, view="model")
    page = open_widget(widget)
    page.wait_for_function("Number(document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells) === 72")
    page.check("input.attnscope-words")
    assert saved(page)["word_level"] is True
    page.check("input.attnscope-mask-mode")
    # Measured once the view has redrawn in mask mode (its hint says so), not before.
    page.get_by_text("Click a head to switch it off", exact=False).wait_for(timeout=10_000)
    box = page.query_selector("canvas.attnscope-thumbnails").bounding_box()
    cell = int(page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.cell"))
    page.mouse.click(box["x"] + cell * 3 + 10, box["y"] + cell * 1 + 10)
    state = saved(page)
    assert state["masked_heads"] == [[1, 3]] and state["view"] == "model"
    assert page.problems == []


def test_precomputed_attention_has_no_editor_and_says_what_needs_a_model(open_widget, default_model):
    """Issue 30: precomputed attention's Neuron tab said "queries and keys could not be captured",
    and its model view offered to mask heads, which the kernel refused out of sight."""
    result = default_model.run("The cat sat.")
    widget = attnscope.head_view(tuple(a[None] for a in result.attention), result.tokens)
    page = open_widget(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    assert page.is_hidden(".attnscope-editor")
    page.click("button.attnscope-tab[data-view='neuron']")
    page.evaluate("() => window.attnscopeHarness.model.emit({view: 'neuron'})")  # the kernel's echo
    body = page.locator(".attnscope-body:not([hidden])")
    body.get_by_text("The neuron view needs a model, and this view was made from precomputed attention.",
                     exact=False).wait_for(timeout=10_000)
    assert "could not be captured" not in body.inner_text()
    assert page.is_hidden("select.attnscope-neuron-head")  # nothing to choose: no "click a token" hint
    assert page.is_disabled("button.attnscope-export-button[data-format='png']")
    page.evaluate("() => window.attnscopeHarness.model.emit({view: 'model'})")
    page.wait_for_selector("canvas.attnscope-thumbnails", state="attached")
    assert page.is_hidden(".attnscope-maskbar") and page.is_hidden("input.attnscope-mask-mode")
    assert page.problems == []


def _families():
    from test_engine import small_models

    return list(small_models())


@pytest.mark.parametrize("family", _families())
def test_every_family_renders_head_and_model_views(open_widget, family, bert_tokenizer):
    import torch
    from test_engine import small_models

    torch.manual_seed(0)
    engine = attnscope.load(small_models()[family](), bert_tokenizer, device="cpu")
    widget = attnscope.AttentionWidget("The quick brown fox jumps.", model=engine)
    page = open_widget(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    # Causal models say that later tokens are masked.
    assert page.is_visible(".attnscope-causal-note") == ("gpt2" in family or "gqa" in family)
    widget.view = "model"  # the kernel makes the thumbnails; the page is given the new state
    page.evaluate(
        "s => window.attnscopeHarness.model.emit(window.attnscopeHarness.fromWire(s))",
        {"thumbnails": wire(widget.thumbnails), "view": "model"},
    )
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '12'")
    assert page.problems == []


def test_image_export_buttons_and_save_image(open_widget, default_model, tmp_path):
    widget = attnscope.AttentionWidget("The <cat> sat.", model=default_model)
    page = open_widget(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    with page.expect_download() as svg_download:
        page.click("button.attnscope-export-button[data-format='svg']")
    svg = (tmp_path / "view.svg")
    svg_download.value.save_as(svg)
    text = svg.read_text()
    assert text.startswith("<svg") and ">&lt;</text>" in text  # the "<" token, escaped
    with page.expect_download() as png_download:
        page.click("button.attnscope-export-button[data-format='png']")
    png_download.value.save_as(tmp_path / "view.png")
    assert (tmp_path / "view.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # widget.save_image: the kernel asks the view, the view answers with the bytes.
    assert page.evaluate("() => window.attnscopeHarness.model.sentMessages.some(m => m.type === 'rendered')")
    widget._handle_custom_msg({"kind": "event", "type": "rendered"}, [])
    sent = []
    widget.send = lambda content, buffers=None: sent.append(content)
    request = widget.save_image(tmp_path / "saved.png")
    assert not request.done and sent == [{"kind": "request", "type": "image", "id": request.id, "format": "png"}]
    page.evaluate("m => window.attnscopeHarness.model.emitCustom(m, [])", sent[0])
    page.wait_for_function("() => window.attnscopeHarness.model.sentMessages.some(m => m.type === 'image')")
    reply, data = page.evaluate(
        """() => { const h = window.attnscopeHarness.model;
            const i = h.sentMessages.findIndex(m => m.type === 'image');
            const bytes = new Uint8Array(h.sentBuffers[i][0]);
            return [h.sentMessages[i], Array.from(bytes)]; }"""
    )
    widget._handle_custom_msg(reply, [bytes(data)])
    assert request.done and (tmp_path / "saved.png").read_bytes()[:4] == b"\x89PNG"
    assert page.problems == []


@pytest.mark.parametrize("family", ["bart", "marian"])
def test_encoder_decoder_parts_in_all_three_views(open_widget, bert_tokenizer, family):
    """BART: the Attention selector, cross-attention with encoder tokens on the right, its model
    view thumbnails and its neuron view, answered by the widget's own handler."""
    import torch
    from test_encoder_decoder import SOURCE, TARGET, encoder_decoder_models

    torch.manual_seed(0)
    engine = attnscope.load(encoder_decoder_models()[family](), bert_tokenizer, device="cpu")
    widget = attnscope.AttentionWidget(SOURCE, TARGET, model=engine)
    widget.attention_part = "cross"
    page = open_widget(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    assert page.is_visible("select.attnscope-part") and page.input_value("select.attnscope-part") == "cross"
    right = page.eval_on_selector_all(".attnscope-right .attnscope-token-text", "ns => ns.map(n => n.textContent)")
    left = page.eval_on_selector_all(".attnscope-left .attnscope-token-text", "ns => ns.map(n => n.textContent)")
    assert right == widget.key_tokens and left == widget.tokens and len(right) != len(left)
    page.select_option("select.attnscope-part", "decoder")
    assert saved(page)["attention_part"] == "decoder"

    widget.view = "model"
    page.evaluate(
        "s => window.attnscopeHarness.model.emit(window.attnscopeHarness.fromWire(s))",
        {"thumbnails": wire(widget.thumbnails), "view": "model", "attention_part": "cross"},
    )
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '12'")
    assert int(page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.lineCount")) > 0

    page.evaluate("() => window.attnscopeHarness.model.emit({view: 'neuron'})")
    request = answer_neuron_request(page, widget)
    keys = page.eval_on_selector_all(".attnscope-neuron-view .attnscope-right .attnscope-token-text", "ns => ns.map(n => n.textContent)")
    assert keys == widget.key_tokens
    assert len(page.query_selector_all(".attnscope-neuron-softmax .attnscope-neuron-number")) == len(widget.key_tokens)
    # It opens on the decoder text's first token, not its start token ("[unused1]" in BERT's vocabulary).
    query = page.eval_on_selector(".attnscope-neuron-queries .attnscope-selected", "n => n.textContent")
    assert request["layer"] == widget.layer and query == widget.tokens[2] == "Der", (request, query)
    # The neuron view saves as an image too: its key tokens are the encoder's.
    with page.expect_download() as download:
        page.click("button.attnscope-export-button[data-format='svg']")
    svg = open(download.value.path(), encoding="utf-8").read()
    assert "q × k" in svg and all(f">{t}</text>" in svg for t in widget.key_tokens if "<" not in t)
    assert page.problems == []


@pytest.mark.parametrize("family", ["bart", "t5"])
def test_saved_page_of_cross_attention_computes_its_neuron_view(watched_page, bert_tokenizer, tmp_path, family):
    import torch
    from test_encoder_decoder import SOURCE, TARGET, encoder_decoder_models, t5_model

    torch.manual_seed(0)
    if family == "t5":  # with its relative-position bias, which the page must add to the scores
        model = t5_model()
        with torch.no_grad():
            for module in model.modules():
                if getattr(module, "has_relative_attention_bias", False):
                    module.relative_attention_bias.weight.normal_(0, 3)
    else:
        model = encoder_decoder_models()[family]()
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    widget = attnscope.AttentionWidget(SOURCE, TARGET, model=engine)
    widget.attention_part = "cross" if family == "bart" else "decoder"
    path = widget.save_html(tmp_path / "cross.html")
    page = watched_page()
    page.goto(path.as_uri())
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    page.click("button.attnscope-tab[data-view='neuron']")
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    softmax = page.eval_on_selector_all(
        ".attnscope-neuron-softmax .attnscope-neuron-number", "ns => ns.map(n => Number(n.textContent.trim().split(/\\s+/).pop()))"
    )
    expected = widget.token_result.attention[0, 0, widget.neuron_query].tolist()  # the query it opens on
    assert len(softmax) == len(widget.key_tokens or widget.tokens) == len(expected)
    assert max(abs(a - b) for a, b in zip(softmax, expected)) < 2e-3
    assert page.problems == []


def test_a_saved_page_with_infinite_analysis_values_mounts_and_says_them(watched_page, default_model, tmp_path):
    import math

    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    frame = attnscope.attention_sinks(widget.result)
    frame.loc[0:2, "alpha_first"] = [math.inf, -math.inf, math.nan]  # heads 0-0, 0-1, 0-2
    widget.show_analysis(frame)
    path = widget.save_html(tmp_path / "sinks.html")  # its data held `Infinity`: JSON.parse failed, nothing mounted
    page = watched_page()
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelector('canvas.attnscope-headmap')?.dataset.cells === '72'")
    box = page.query_selector("canvas.attnscope-headmap").bounding_box()
    said = []
    for head in range(4):
        page.mouse.move(box["x"] + 28 * head + 5, box["y"] + 5)
        said.append(page.inner_text(".attnscope-headmap-view .attnscope-tooltip").split(": ")[-1])
    assert said[:3] == ["∞", "−∞", "n/a"] and float(said[3]) == pytest.approx(frame.alpha_first[3], abs=1e-3)
    assert page.problems == []


def finder_points(page) -> list[tuple[float, float]]:
    """Where the finder's canvas drew each head's point (the scene's positions), layer-major."""
    values = page.get_attribute("canvas.attnscope-finder-scatter", "data-positions").split(",")
    return [(float(x), float(y)) for x, y in zip(values[::2], values[1::2])]


def test_the_finders_choice_is_the_widgets_and_a_click_picks_the_head_drawn_there(open_widget, watched_page, default_model,
                                                                                 tmp_path):
    """Issue 35: the axes, filter and head the reader picks are written to analysis_choice (which the
    kernel takes), the canvas's clicks land on the heads where its scene drew them on the new axes,
    and a saved page reopens on the same plot."""
    import math

    finder = attnscope.head_finder(default_model, CORPUS, progress=False)
    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    widget.show_analysis(finder)
    page = open_widget(widget)
    page.wait_for_function("document.querySelector('canvas.attnscope-finder-scatter')?.dataset.kept === '72'")
    before = finder_points(page)
    selects = page.locator(".attnscope-finder-bar select")
    selects.nth(0).select_option("cls")
    choice = saved(page)["analysis_choice"]
    assert choice == {"x": "cls", "y": "sink_rate", "color": "prev_token", "filter": "", "head": None}
    widget.set_state({"analysis_choice": choice})  # as the kernel gets it: taken
    assert widget.analysis_choice == choice and widget.error == ""
    assert page.get_attribute("canvas.attnscope-finder-scatter", "data-x") == "cls"
    points = finder_points(page)
    assert points != before  # redrawn on the new x axis
    # Across by cls: the head of the largest cls is rightmost, of the smallest leftmost.
    cls = finder.metrics.sort_values(["layer", "head"]).cls.to_list()
    xs = [x for x, _ in points]
    assert xs.index(max(xs)) == cls.index(max(cls)) and xs.index(min(xs)) == cls.index(min(cls))
    # A click on the head standing furthest from the others picks it.
    def room(i):
        return min(math.dist(points[i], p) for j, p in enumerate(points) if j != i)

    target = max(range(len(points)), key=room)
    label = f"{target // 12}-{target % 12}"
    box = page.query_selector("canvas.attnscope-finder-scatter").bounding_box()
    page.mouse.click(box["x"] + points[target][0] + 1, box["y"] + points[target][1] - 1)
    assert saved(page)["analysis_choice"] == {**choice, "head": label}
    assert page.get_attribute(".attnscope-finder-table tr.attnscope-selected", "data-head") == label
    assert page.inner_text(".attnscope-finder-examples .attnscope-finder-title").startswith(f"Where head {label} fires")
    page.fill("input.attnscope-finder-filter", "layer >= 3")
    assert saved(page)["analysis_choice"]["filter"] == "layer >= 3"
    assert page.get_attribute("canvas.attnscope-finder-scatter", "data-kept") == "36"
    widget.set_state({"analysis_choice": saved(page)["analysis_choice"]})
    assert widget.error == ""
    assert page.problems == []

    # The saved page opens on the same plot: the same axes, filter, head and points.
    path = widget.save_html(tmp_path / "finder.html")
    reopened = watched_page()
    reopened.goto(path.as_uri())
    reopened.wait_for_function("document.querySelector('canvas.attnscope-finder-scatter')?.dataset.kept === '36'")
    assert [reopened.locator(".attnscope-finder-bar select").nth(i).input_value() for i in range(3)] == ["cls", "sink_rate", "prev_token"]
    assert reopened.input_value("input.attnscope-finder-filter") == "layer >= 3"
    assert reopened.inner_text(".attnscope-finder-examples .attnscope-finder-title").startswith(f"Where head {label} fires")
    assert finder_points(reopened) == finder_points(page)
    assert reopened.problems == []
