"""The widget on a long run (issue 14's views, kernel side): the text, map, head (a window),
model and analysis views, answers to "attention_rows", "attention_tile" and "attention_window"
requests equal to the full attention, the sink table as the analysis, and clear refusals of what a
long run cannot show."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers
from small_models import SHAPE, TEXT, scaled_up
from test_token_labels import byte_level_bpe

import attnscope
from attnscope import InputError
from attnscope.serialize import decode
from attnscope.widget.messages import MESSAGES
from attnscope.widget.payloads import window_around


@pytest.fixture(scope="module")
def engine():
    # Seeded: the tests that read its heads' sizes (test_weighing) see the same model every run.
    with warnings.catch_warnings(), torch.random.fork_rng():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        # Grouped-query attention (4 query heads on 2 key heads) and a sliding-window layer.
        model = scaled_up(transformers.Qwen2Model(transformers.Qwen2Config(
            vocab_size=320, use_sliding_window=True, sliding_window=8, max_window_layers=1,
            layer_types=["full_attention", "sliding_attention"], **SHAPE)))
    return attnscope.load(model, byte_level_bpe(), device="cpu")


@pytest.fixture(scope="module")
def full(engine):
    return engine.run(TEXT, attention="full")


@pytest.fixture
def widget(engine):
    w = attnscope.AttentionWidget(TEXT, model=engine, attention="on_demand")
    yield w
    w.close()


def ask(widget, type_, **params):
    """A request as the view sends it; → (reply content, buffers)."""
    sent = []
    widget.send = lambda content, buffers=None: sent.append((content, buffers or []))
    widget._channel._receive(widget, {"kind": "request", "type": type_, "id": 7, **params}, [])
    assert len(sent) == 1
    return sent[0]


def values(content, buffers):
    return decode({"data": buffers[0], "dtype": content["dtype"], "shape": content["shape"]})


def test_a_long_run_opens_the_text_view_with_its_sink_table(widget, full):
    assert widget.long_context and widget.view == "text"
    assert widget.tokens == full.labels and widget.n_key_heads == 2 and widget.n_heads == 4
    assert widget.attention == {} and widget.rollout == {}
    assert widget.analysis["kind"] == "attention_sinks"
    alpha = widget.analysis["measures"][0]
    assert alpha["key"] == "alpha_first"
    # The table's α is the full attention's mean over queries on the first token.
    expected = full.attention[:, :, :, 0].mean(-1).flatten().tolist()
    assert alpha["values"] == pytest.approx(expected, abs=1e-5)
    assert "kept as each token's query and key and each row's softmax total" in widget.notice
    assert repr(widget).startswith(f"AttentionWidget({widget.model_name}, {len(full.tokens)} tokens, text view")


@pytest.mark.parametrize("head", [0, 3, -1])
@pytest.mark.parametrize("direction", ["from", "to"])
def test_rows_answer_the_full_attentions_row_or_column(widget, full, head, direction):
    layer, token = 1, 20
    content, buffers = ask(widget, "attention_rows", layer=layer, head=head, token=token, direction=direction)
    assert "error" not in content, content
    assert content["type"] == "attention_rows" and content["id"] == 7 and content["result_id"] == widget.result_id
    got = values(content, buffers)
    heads = full.attention[layer] if head == -1 else full.attention[layer, head][None]
    expected = (heads[:, token, :] if direction == "from" else heads[:, :, token]).mean(0)
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=2e-6)


@pytest.mark.parametrize("token", [0, 20, -1])
def test_the_head_views_window_is_every_heads_full_attention_around_the_token(widget, full, token, monkeypatch):
    n = len(full.tokens)
    token %= n
    # A window smaller than the text, so that it has to be placed.
    monkeypatch.setattr(attnscope.widget.long_answers, "WINDOW_TOKENS", 16)
    content, buffers = ask(widget, "attention_window", layer=1, token=token)
    assert "error" not in content, content
    start, end = content["rows"]
    assert end - start == 16 and start <= token < end and content["n_tokens"] == n
    assert content["shape"] == [4, 16, 16] and content["result_id"] == widget.result_id
    assert torch.allclose(values(content, buffers), full.attention[1, :, start:end, start:end], atol=2e-6)


def test_the_window_moves_by_half_windows_and_keeps_the_token_in_its_middle():
    n, size = 1000, 128
    for token in range(n):
        start, end = window_around(token, n, size)
        assert end - start == size and 0 <= start and end <= n
        assert start % 32 == 0 or end == n
        if size // 4 <= token < n - size // 4:
            assert start + size // 4 <= token < end - size // 4, token  # in the middle half
    # A click inside the middle half keeps the window; one near its edge moves it half a window.
    assert window_around(100, n, size) == window_around(70, n, size) == (32, 160)
    assert window_around(130, n, size) == (96, 224)
    assert window_around(3, 20, size) == (0, 20)


def test_a_long_head_view_opens_on_its_window_and_its_bad_requests_are_answered(widget):
    widget.view = "head"
    assert widget.view == "head" and widget.heads == [0, 1, 2, 3]
    for params, message in [(dict(layer=2, token=0), "layer=2"), (dict(layer=0, token=len(widget.tokens)), "token="),
                            (dict(layer=0), "token must be a whole number")]:
        content, buffers = ask(widget, "attention_window", **params)
        assert message in content["error"] and buffers == []


@pytest.mark.parametrize("reduce", ["max", "mean"])
def test_tiles_are_the_full_attention_cut_and_pooled(widget, full, reduce):
    n = len(full.tokens)
    # Small enough: one token pair a block, exact.
    content, buffers = ask(widget, "attention_tile", layer=0, head=2, rows=[5, 30], cols=[0, 20], bins=64, reduce=reduce)
    assert content["exact"] and content["shape"] == [25, 20]
    assert torch.allclose(values(content, buffers), full.attention[0, 2, 5:30, 0:20], atol=2e-6)
    # The whole map in 8 × 8 blocks of the mean of the heads, pooled after averaging.
    content, buffers = ask(widget, "attention_tile", layer=1, head=-1, rows=[0, n], cols=[0, n], bins=8, reduce=reduce)
    assert not content["exact"] and content["shape"] == [8, 8]
    mean = full.attention[1].mean(0)
    edges = torch.div(torch.arange(n) * 8, n, rounding_mode="floor")
    got = values(content, buffers)
    for a in range(8):
        for b in range(8):
            block = mean[edges == a][:, edges == b]
            want = block.max() if reduce == "max" else block.mean()
            assert torch.isclose(got[a, b], want, atol=2e-6), (a, b)


def test_bad_requests_are_answered_with_what_is_wrong(widget):
    n = len(widget.tokens)
    cases = [
        (dict(layer=5, head=0, token=0, direction="from"), "layer=5"),
        (dict(layer=0, head=4, token=0, direction="from"), "head=4"),
        (dict(layer=0, head=0, token=n, direction="from"), f"token={n}"),
        (dict(layer=0, head=0, token=0, direction="sideways"), "direction"),
        (dict(layer=0, head=0, token="a", direction="from"), "token must be a whole number"),
    ]
    for params, message in cases:
        content, buffers = ask(widget, "attention_rows", **params)
        assert message in content["error"] and buffers == []
    content, _ = ask(widget, "attention_tile", layer=0, head=0, rows=[10, 5], cols=[0, 4], bins=8)
    assert "rows end" in content["error"]
    content, _ = ask(widget, "attention_tile", layer=0, head=0, rows=[0, 5], cols=[0, 4], bins=8, reduce="sum")
    assert "reduce" in content["error"]
    content, _ = ask(widget, "neuron", layer=0)
    assert "neuron view draws the full attention" in content["error"]


def test_views_and_settings_a_long_run_cannot_show_are_refused_clearly(widget):
    for view in ("neuron", "rollout"):
        with pytest.raises(Exception, match=f"The {view} view draws the full attention"):
            widget.view = view
    assert widget.view == "text"
    with pytest.raises(Exception, match="focus_token=.* out of range"):
        widget.focus_token = len(widget.tokens)
    with pytest.raises(Exception, match="focus_head=4 is out of range"):
        widget.focus_head = 4
    with pytest.raises(Exception, match="sink_aside"):
        widget.sink_aside = -1
    with pytest.raises(InputError, match="Masking heads needs the full attention"):
        widget.masked_heads = [[0, 1]]
    assert widget.masked_heads == [] and widget.error == ""


def test_a_causal_long_run_opens_on_its_last_token_until_one_is_chosen(engine, full):
    """Token 0 of a causal model attends only to itself: the text view opens on the last token,
    which follows the text's end through edits until a token is chosen; a chosen one is kept."""
    last = len(full.tokens) - 1
    w = attnscope.AttentionWidget(TEXT, model=engine, attention="on_demand")
    try:
        assert w.causal and w.focus_token == last
        w.update(TEXT + " One more sentence.")
        assert w.focus_token == len(w.tokens) - 1 > last
        w.focus_token = 7  # chosen (from Python, as the view's click sets it)
        w.update(TEXT + " And another one, a little longer.")
        assert w.focus_token == 7
    finally:
        w.close()
    chosen = attnscope.AttentionWidget(TEXT, model=engine, attention="on_demand", focus_token=3)
    assert chosen.focus_token == 3
    chosen.close()


def test_a_bidirectional_long_run_keeps_the_first_token(default_model):
    w = attnscope.AttentionWidget("The cat sat on the mat. " * 8, model=default_model, attention="on_demand")
    assert w.long_context and not w.causal and w.focus_token == 0
    w.close()


def test_model_view_thumbnails_are_each_heads_pooled_map(widget, full):
    widget.view = "model"
    payload = widget.thumbnails
    assert payload["layers"] == [0, 1] and payload["heads"] == [0, 1, 2, 3]
    got = decode(payload)
    size = got.shape[-1]
    assert size == min(widget._thumbnail_size, len(full.tokens))
    n = len(full.tokens)
    edges = torch.div(torch.arange(n) * size, n, rounding_mode="floor")
    block = full.attention[1, 3][edges == 2][:, edges == 1]
    assert abs(float(got[1, 3, 2, 1]) - float(block.max())) <= 1 / 255


def test_thumbnails_too_large_to_make_at_once_are_asked_for_in_passes(engine, full, monkeypatch):
    """Issue 32: a long run whose thumbnails take more than a pass (32,768 tokens: tens of seconds)
    leaves the trait empty, and the view's "thumbnails" requests answer passes whose max is every
    head's pooled map; the picture of such a view says why it is not drawn, the text view's is."""
    from attnscope.widget import payloads as pl
    from attnscope.widget.picture import picture_svg

    n = len(full.tokens)
    monkeypatch.setattr(pl, "PASS_PAIRS", 2 * 4 * n * n // 6)  # 2 layers × 4 heads in about 6 passes
    widget = attnscope.AttentionWidget(TEXT, model=engine, attention="on_demand", view="model", thumbnail_size=8)
    try:
        assert widget.thumbnails == {}
        first, [data] = ask(widget, "thumbnails", **{"pass": 0})
        passes = first["passes"]
        assert passes == 8 and first["layers"] == [0, 1] and first["heads"] == [0, 1, 2, 3]
        assert first["result_id"] == widget.result_id and first["n_tokens"] == n
        maps = [values(first, [data])]
        for index in range(1, passes):
            content, buffers = ask(widget, "thumbnails", **{"pass": index})
            maps.append(values(content, buffers))
        merged = torch.stack(maps).amax(0).view(first["shape"])
        size = first["shape"][-1]
        edges = torch.div(torch.arange(n) * size, n, rounding_mode="floor")
        for layer, head, a, b in ((1, 3, 2, 1), (0, 0, 0, 0), (1, 1, size - 1, size - 2)):
            block = full.attention[layer, head][edges == a][:, edges == b]
            assert abs(float(merged[layer, head, a, b]) - float(block.max())) <= 2e-6
        assert "past these thumbnails" in ask(widget, "thumbnails", **{"pass": passes})[0]["error"]
        svg, why = picture_svg(widget)
        assert svg is None and "refined in the live view" in why
        widget.view = "text"
        assert picture_svg(widget)[0] is not None
    finally:
        widget.close()


def test_an_edit_to_a_short_text_goes_back_to_the_full_views(engine):
    w = attnscope.AttentionWidget(TEXT, model=engine, view="map", attention="on_demand")
    try:
        assert w.view == "map" and w.long_context
        w.focus_token = 30
        w._attention_mode = "auto"
        w.update("A short text.")
        assert not w.long_context and w.view == "head" and w.attention["shape"][0] == 4
        with pytest.raises(Exception, match="The text view is for long inputs"):
            w.view = "text"
        w._attention_mode = "on_demand"
        w.update("Back to a long one, but shorter than before.")
        # The head view stays open: on a long run it shows the window around the selected token.
        assert w.long_context and w.view == "head" and w.focus_token < len(w.tokens)
        w._attention_mode = "auto"
        w.update("Short again.")
        w.view = "rollout"
        w._attention_mode = "on_demand"
        w.update("Long again, from a view a long run cannot show.")
        assert w.long_context and w.view == "text"
    finally:
        w.close()


def test_the_messages_are_declared_for_the_view_to_send():
    for name in ("attention_rows", "attention_tile", "attention_window"):
        assert MESSAGES[name].sender == "view" and MESSAGES[name].kind == "request"
