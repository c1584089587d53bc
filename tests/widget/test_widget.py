"""The widget's traits: what the browser receives, and how edits and bad input are handled."""

import pytest
import torch
import traitlets

import attnscope
from attnscope import AttentionWidget, InputError
from attnscope.serialize import decode, pool_thumbnails


@pytest.fixture
def widget(default_model):
    return AttentionWidget("The cat sat on the mat.", "It was happy.", model=default_model, layer=2)


def test_traits_describe_the_run(widget):
    result = widget.result
    assert widget.tokens == result.labels  # the text's own spans, not the vocabulary's lowercased pieces
    assert widget.sentence_b_start == result.sentence_b_start
    assert (widget.n_layers, widget.n_heads) == (6, 12)
    assert widget.heads == list(range(12))
    assert widget.model_name == result.model_name
    assert widget.text == "The cat sat on the mat." and widget.text_b == "It was happy."


def test_attention_is_one_layer_of_uint8_bytes(widget):
    payload = widget.attention
    n = len(widget.tokens)
    assert payload["layer"] == 2
    assert payload["dtype"] == "uint8" and isinstance(payload["data"], bytes)
    assert payload["shape"] == [12, n, n] and len(payload["data"]) == 12 * n * n
    assert torch.allclose(decode(payload), widget.result.attention[2].cpu(), atol=0.5 / 255 + 1e-6)


def test_a_mostly_zero_layer_crosses_as_its_nonzero_bytes(default_model):
    """A 512-token layer is mostly zero bytes: it goes as a bitmap and its nonzero bytes, half
    of its size or less, and reads back to the very bytes of the dense payload."""
    from attnscope import serialize

    text = " ".join(["The committee said that the report it had asked for was late again."] * 40)
    result = default_model.run(text)
    layer = result.attention[0]
    sent = serialize.quantize_uint8(layer)
    assert sent["encoding"] == "nonzero" and sent["shape"] == list(layer.shape)
    assert len(sent["data"]) <= layer.numel() / 2
    dense = {**sent, "data": (layer.mul(255).round().clamp(0, 255).to(torch.uint8)).numpy().tobytes()}
    del dense["encoding"]
    assert torch.equal(decode(sent), decode(dense))
    # A dense map (pooled thumbnails) goes as it is.
    assert "encoding" not in serialize.quantize_uint8(torch.full((64, 64), 0.5))


def test_layer_change_sends_that_layer(widget):
    widget.layer = 5
    assert widget.attention["layer"] == 5
    assert torch.allclose(decode(widget.attention), widget.result.attention[5].cpu(), atol=0.5 / 255 + 1e-6)
    with pytest.raises(traitlets.TraitError, match="out of range"):
        widget.layer = 6


def test_every_new_run_is_filed_under_a_new_source(widget):
    """The page keeps the layers it holds while their `source` stays (js/transport/requests.js): a new text
    from Python, or heads masked, is a new run and must not reuse the last one's source, or the
    page draws the old run's layers over the new tokens. A way of showing the same run keeps the
    run's id (its layers are still right)."""
    sources = [widget.attention["source"]]
    widget.update("A different sentence, of another length.")
    sources.append(widget.attention["source"])
    widget.masked_heads = [(0, 1)]
    sources.append(widget.attention["source"])
    widget.layer = 3
    assert widget.attention["source"] == sources[-1]  # the same run: its other layers stay right
    assert len(set(sources)) == 3, sources
    widget.request = {"id": widget.result_id + 1, "text": "The page's own edit.", "text_b": None}
    assert widget.attention["source"] not in sources  # and the page's next edit still goes through


def test_browser_edit_recomputes_and_answers_its_id(widget):
    widget.heads = [0, 3]
    widget.request = {"id": 7, "text": "Dogs bark loudly.", "text_b": None}
    assert widget.result_id == 7
    assert widget.tokens == ["[CLS]", "Dogs", "bark", "loudly", ".", "[SEP]"]
    assert widget.sentence_b_start is None and widget.sentence_filter == "all"
    assert widget.attention["shape"] == [12, 6, 6]
    assert widget.attention["layer"] == 2  # the user's layer and heads survive the edit
    assert widget.heads == [0, 3]
    assert widget.error == ""


def test_rapid_edits_leave_the_latest(widget):
    for i, text in enumerate(["A", "A b", "A b c"], start=1):
        widget.request = {"id": i, "text": text, "text_b": None}
    assert widget.result_id == 3
    assert widget.tokens == ["[CLS]", "A", "b", "c", "[SEP]"]


def test_bad_browser_edit_shows_error_and_keeps_the_view(widget):
    before = (list(widget.tokens), widget.attention["data"])
    widget.request = {"id": 4, "text": "   ", "text_b": None}
    assert "empty" in widget.error
    assert widget.result_id == 4  # the browser stops waiting
    assert (widget.tokens, widget.attention["data"]) == before
    widget.request = {"id": 5, "text": "Fixed.", "text_b": None}
    assert widget.error == "" and widget.tokens[1] == "Fixed"


def test_long_edit_is_truncated_with_a_notice(default_model):
    widget = AttentionWidget("short", model=default_model, max_length=8)
    assert widget.notice == ""
    widget.request = {"id": 1, "text": " ".join(["word"] * 20), "text_b": None}
    assert len(widget.tokens) == 8
    assert "truncated: 22 tokens → 8" in widget.notice


def test_python_text_assignment_recomputes(widget):
    widget.text = "New words here."
    assert widget.tokens[1:4] == ["New", "words", "here"]
    with pytest.raises(InputError):
        widget.text = ""
    assert widget.text == "New words here."  # the failed change did not stick


def test_constructor_refuses_bad_input(default_model):
    with pytest.raises(InputError, match="empty"):
        AttentionWidget("", model=default_model)
    with pytest.raises(InputError, match="batch of 2"):
        AttentionWidget(["a", "b"], model=default_model)
    with pytest.raises(attnscope.AttnscopeError, match="layer=9"):
        AttentionWidget("hi", model=default_model, layer=9)
    with pytest.raises(attnscope.AttnscopeError, match="heads \\[12\\]"):
        AttentionWidget("hi", model=default_model, heads=[0, 12])


def test_show_is_the_one_liner(default_model):
    widget = attnscope.show("Hello world", model=default_model)
    assert isinstance(widget, AttentionWidget) and widget.view == "head"
    with pytest.raises(ValueError, match="Unknown view 'graph'"):
        attnscope.show("Hello", model=default_model, view="graph")


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("cell, count", [
    ("w = attnscope.show('The cat sat.', model=model)", 1),  # assigned: getting started's first example
    ("attnscope.show('The cat sat.', model=model)", 1),  # the cell's last line: shown once, not echoed again
    ("for t in ['A cat.', 'A dog.']:\n    attnscope.show(t, model=model)", 2),  # in a loop: each
    ("w = attnscope.show('The cat sat.', model=model)\nw", 1),  # assigned, then echoed: once
])
def test_show_displays_where_it_is_called_and_never_twice(default_model, monkeypatch, cell, count):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    published = []
    monkeypatch.setattr(shell.display_pub, "publish", lambda data, metadata=None, **kw: published.append(data))
    shell.user_ns.update(attnscope=attnscope, model=default_model)
    result = shell.run_cell(cell, store_history=True)
    assert result.success, result.error_in_exec
    widgets = [data for data in published if WIDGET_MIME in data]
    assert len(widgets) == count
    assert len({data[WIDGET_MIME]["model_id"] for data in widgets}) == count



def test_thumbnail_pooling_keeps_thin_structures():
    from attnscope.serialize import pool_thumbnails

    attention = torch.zeros(1, 2, 8, 8)
    attention[0, 0] = torch.eye(8)
    attention[0, 1, :, 7] = 1.0  # everything attends to the last token
    pooled = pool_thumbnails(attention, 4)
    assert pooled.shape == (1, 2, 4, 4)
    assert torch.equal(pooled[0, 0], torch.eye(4))
    assert torch.equal(pooled[0, 1][:, 3], torch.ones(4)) and pooled[0, 1][:, :3].sum() == 0
    assert pool_thumbnails(attention, 16) is attention  # short inputs are sent as they are


def test_model_view_thumbnails_are_made_only_when_shown(default_model):
    widget = AttentionWidget(" ".join(["word"] * 60), model=default_model)
    assert widget.thumbnails == {}  # the head view's first paint does not pay for them
    widget.view = "model"
    thumbs = widget.thumbnails
    assert thumbs["layers"] == list(range(6)) and thumbs["heads"] == list(range(12))
    assert thumbs["shape"] == [6, 12, 48, 48] and len(thumbs["data"]) == 6 * 12 * 48 * 48
    assert thumbs["n_tokens"] == 62
    widget.include_layers, widget.include_heads = [1, 4], [0, 11]
    assert widget.thumbnails["shape"] == [2, 2, 48, 48]
    expected = pool_thumbnails(widget.result.attention[[1, 4]][:, [0, 11]], 48)
    assert torch.allclose(decode(widget.thumbnails), expected, atol=0.5 / 255 + 1e-6)
    widget.request = {"id": 1, "text": "short one", "text_b": None}
    assert widget.thumbnails["shape"] == [2, 2, 4, 4]  # a new run refreshes the shown thumbnails


def test_included_layers_and_heads_are_checked(default_model):
    with pytest.raises(attnscope.AttnscopeError, match=r"include_layers=\[\] selects nothing"):
        AttentionWidget("hi", model=default_model, include_layers=[])
    with pytest.raises(attnscope.AttnscopeError, match="include_heads has \\[12\\]"):
        AttentionWidget("hi", model=default_model, include_heads=[3, 12])


def test_neuron_request_is_answered_with_the_layers_float16_store(widget, monkeypatch):
    """A "neuron" request is answered with the layer's queries, keys, values and ‖f‖ (what a saved
    page stores), so the page draws any head's and query's numbers of that layer itself."""
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append((content, buffers)))
    widget._handle_custom_msg({"kind": "request", "type": "neuron", "id": 3, "layer": 4}, [])
    (content, buffers), = sent
    n, d, heads = len(widget.tokens), 32, widget.n_heads
    assert (content["kind"], content["type"], content["id"], content["layer"]) == ("reply", "neuron", 3, 4)
    store = content["store"]
    assert store["layers"] == [4] and not store["causal"] and content["n_queries"] == n
    # What js/drawing/neuron_maths.js computes from: q, keys, values, ‖f‖ (issue 47: past the softmax).
    sizes = {path[0]: len(b) for path, b in zip(content["paths"], buffers)}
    assert sizes == {"queries": 2 * heads * n * d, "keys": 2 * heads * n * d, "values": 2 * heads * n * d, "norms": 2 * heads * n}
    norms = torch.frombuffer(bytearray(buffers[[p[0] for p in content["paths"]].index("norms")]), dtype=torch.float16).float()
    assert torch.allclose(norms.reshape(heads, n), widget.token_result.value_norms[4].cpu(), rtol=1e-3)
    widget._handle_custom_msg({"kind": "request", "type": "neuron", "id": 4, "layer": 99}, [])
    assert "layer=99" in sent[-1][0]["error"]


def test_a_layer_request_answers_that_layer_of_the_shown_run_under_its_source(widget, monkeypatch):
    """The page asks for the layers around the open one ("layer"): each answer is the layer as the
    trait would hold it, with the source the page files it under; a new run or another way of
    showing it has another source, and the page drops what it held."""
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append((content, buffers)))

    def ask(layer, request_id=1):
        widget._handle_custom_msg({"kind": "request", "type": "layer", "id": request_id, "layer": layer}, [])
        return sent[-1]

    content, [data] = ask(4)
    assert (content["kind"], content["type"], content["id"], content["layer"]) == ("reply", "layer", 1, 4)
    assert content["source"] == widget.attention["source"]
    widget.layer = 4
    assert data == widget.attention["data"] and content["shape"] == widget.attention["shape"]
    assert content["scale"] == widget.attention["scale"]
    for wrong in (-1, 6, "2", None):  # 0..5 only
        assert "layer" in ask(wrong)[0]["error"] and "data" not in ask(wrong)[0]
    sources = {widget.attention["source"]}
    widget.word_level = True
    sources.add(ask(0)[0]["source"])
    assert ask(0)[0]["source"] == widget.attention["source"]
    widget.word_level = False
    widget.request = {"id": 9, "text": "Dogs bark.", "text_b": None}
    sources.add(widget.attention["source"])
    assert len(sources) == 3
    content, [data] = ask(3)
    assert content["source"] == widget.attention["source"] and content["shape"] == [12, 5, 5] and len(data) == 12 * 25


@pytest.mark.parametrize("settings", [{}, {"word_level": True}, {"show_change": True, "masked_heads": [[1, 3]]}],
                         ids=["tokens", "words", "a masking's change"])
def test_a_layer_asked_under_the_other_weighing_is_what_the_switch_then_draws(widget, monkeypatch, settings):
    """The page asks for the open layer under the other weighing while idle ({layer, weigh_by}), so
    a Weigh by switch draws at once: the answer is the very bytes, scale, source and one_scale the
    widget's traits hold once the switch comes, and says which shown run it was asked against."""
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append((content, buffers)))
    for name, value in settings.items():
        setattr(widget, name, value)

    def ask(**request):
        widget._handle_custom_msg({"kind": "request", "type": "layer", "id": 1, **request}, [])
        return sent[-1]

    for weigh_by in ("value_norm", "attention"):
        shown = widget.attention["source"]
        content, [data] = ask(layer=widget.layer, weigh_by=weigh_by)
        assert content["of"] == shown and content["weigh_by"] == weigh_by and content["source"] != shown
        assert widget.weigh_by != weigh_by  # asking switched nothing
        widget.weigh_by = weigh_by
        assert content["source"] == widget.attention["source"] and data == widget.attention["data"]
        assert (content["shape"], content["scale"], content["layer"]) == (widget.attention["shape"], widget.attention["scale"], widget.layer)
        assert content["one_scale"] == widget.one_scale
    assert widget.one_scale == {} if not settings.get("show_change") else widget.one_scale["measure"] == "change"
    for wrong in ("norm", 3, None):
        assert "weigh_by" in ask(layer=0, weigh_by=wrong)[0]["error"]


def test_the_model_views_cells_asked_under_the_other_weighing_are_what_the_switch_then_shows(default_model, monkeypatch):
    widget = AttentionWidget("The cat sat on the mat.", model=default_model, view="model", include_heads=[1, 4, 7])
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append((content, buffers)))
    widget._handle_custom_msg({"kind": "request", "type": "layer", "id": 1, "layer": 0, "weigh_by": "value_norm",
                               "thumbnails": True}, [])
    content, [layer_bytes, cells] = sent[-1]
    widget.weigh_by = "value_norm"
    assert layer_bytes == widget.attention["data"] and cells == widget.thumbnails["data"]
    assert content["thumbnails"] == {name: value for name, value in widget.thumbnails.items() if name != "data"}
    assert content["thumbnails"]["heads"] == [1, 4, 7] and content["one_scale"] == widget.one_scale
    widget._handle_custom_msg({"kind": "request", "type": "layer", "id": 2, "layer": 0, "weigh_by": "attention",
                               "thumbnails": "yes"}, [])
    assert "thumbnails" in sent[-1][0]["error"]


def test_a_model_without_value_norms_refuses_the_other_weighing_by_its_reason(default_model, monkeypatch):
    widget = AttentionWidget("The cat sat.", model=default_model)
    widget._per_token_run.value_norms = None
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append((content, buffers)))
    widget._handle_custom_msg({"kind": "request", "type": "layer", "id": 1, "layer": 0, "weigh_by": "value_norm"}, [])
    assert "norm" in sent[-1][0]["error"] and not sent[-1][1]


def test_thumbnails_follow_a_selection_made_while_hidden(default_model):
    widget = AttentionWidget("a few words here", model=default_model, view="model")
    widget.view = "head"
    widget.include_heads = [5]
    widget.view = "model"
    assert widget.thumbnails["heads"] == [5] and widget.thumbnails["shape"][1] == 1


def test_a_closed_widget_is_freed_with_its_results(default_model):
    import gc
    import weakref

    widget = AttentionWidget("The cat sat on the mat.", model=default_model)
    alive, result = weakref.ref(widget), weakref.ref(widget.result.attention)
    widget.close()
    with pytest.raises(attnscope.InputError, match="closed"):
        _ = widget.result
    del widget
    gc.collect()
    assert alive() is None and result() is None
