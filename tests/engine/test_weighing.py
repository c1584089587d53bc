"""Weigh by value norm (issue 47 item 1, Kobayashi et al. 2020): the views draw α·‖f(x)‖ in place
of α. A short run's layers, thumbnails and differences, and a long run's rows, tiles, windows and
thumbnails, are each the full attention times the keys' value norms, on one scale for the run where
the page draws bytes."""

from __future__ import annotations

import pytest
import torch
from small_models import tiny_bart
from test_long_widget import ask, engine, full, values  # noqa: F401  (fixtures)

import attnscope
from attnscope import InputError
from attnscope.engine import exact_attention as exact
from attnscope.engine import weighing
from attnscope.engine.weighing import weighed
from attnscope.serialize import decode

TEXT = "The keeper fed the lion before the storm, and it slept."


def _weighed_full(result):
    """α·‖f‖ straight from a full run: layers × heads × T × T."""
    return result.attention * result.value_norms[:, :, None, :]


@pytest.fixture
def long_widget(engine):  # noqa: F811
    w = attnscope.AttentionWidget(TEXT * 2, model=engine, attention="on_demand", weigh_by="value_norm")
    yield w
    w.close()


@pytest.fixture
def long_full(engine):  # noqa: F811
    return engine.run(TEXT * 2, attention="full")


@pytest.mark.parametrize("head", [2, -1])
@pytest.mark.parametrize("direction", ["from", "to"])
def test_a_long_runs_rows_weighed_by_value_norm_are_the_full_attention_times_the_norms(long_widget, long_full,
                                                                                   head, direction):
    assert long_widget.weigh_by == "value_norm" and long_widget.weigh_unavailable == ""
    weights = _weighed_full(long_full)
    layer, token = 1, 20
    content, buffers = ask(long_widget, "attention_rows", layer=layer, head=head, token=token, direction=direction)
    assert "error" not in content, content
    heads = weights[layer] if head == -1 else weights[layer, head][None]
    expected = (heads[:, token, :] if direction == "from" else heads[:, :, token]).mean(0)
    got = values(content, buffers)
    # α·‖f‖ is not bounded by 1: the same relative error as the attention's rows.
    assert torch.allclose(got, expected, rtol=1e-5, atol=2e-6 * float(weights.max()))
    # Weighing changes what is drawn: the norms differ from key to key.
    plain = (long_full.attention[layer] if head == -1 else long_full.attention[layer, head][None])
    plain = (plain[:, token, :] if direction == "from" else plain[:, :, token]).mean(0)
    assert not torch.allclose(got, plain, atol=1e-3)


@pytest.mark.parametrize("reduce", ["max", "mean"])
def test_a_long_runs_tiles_windows_and_thumbnails_are_weighed_too(long_widget, long_full, reduce):
    weights = _weighed_full(long_full)
    top = float(weights.max())
    n = len(long_full.tokens)
    content, buffers = ask(long_widget, "attention_tile", layer=0, head=3, rows=[5, 30], cols=[0, 20], bins=64, reduce=reduce)
    assert content["exact"] and torch.allclose(values(content, buffers), weights[0, 3, 5:30, 0:20], rtol=1e-5, atol=2e-6 * top)
    content, buffers = ask(long_widget, "attention_tile", layer=1, head=-1, rows=[0, n], cols=[0, n], bins=8, reduce=reduce)
    mean = weights[1].mean(0)
    edges = torch.div(torch.arange(n) * 8, n, rounding_mode="floor")
    got = values(content, buffers)
    for a in range(8):
        for b in range(8):
            block = mean[edges == a][:, edges == b]
            want = block.max() if reduce == "max" else block.mean()
            assert torch.isclose(got[a, b], want, rtol=1e-5, atol=2e-6 * top), (a, b)
    content, buffers = ask(long_widget, "attention_window", layer=1, token=10)
    start, end = content["rows"]
    assert torch.allclose(values(content, buffers), weights[1, :, start:end, start:end], rtol=1e-5, atol=2e-6 * top)
    long_widget.view = "model"
    got = decode(long_widget.thumbnails)
    # On one scale (test_a_long_runs_weighed_thumbnails_share_one_scale): each cell ÷ the largest.
    expected = _pooled(weights, got.shape[-1]) / float(weights.max())
    assert (got - expected).abs().max() <= 1 / 255 / 2 + 1e-6  # one byte a weight


def _pooled(weights, size):
    """Layers × heads × T × T max-pooled to size × size, blocks as the engine cuts them."""
    n = weights.shape[-1]
    edges = torch.div(torch.arange(n) * size, n, rounding_mode="floor")
    pooled = torch.zeros(*weights.shape[:2], size, size)
    for a in range(size):
        for b in range(size):
            pooled[:, :, a, b] = weights[:, :, edges == a][:, :, :, edges == b].amax((-2, -1))
    return pooled


SHARED = {"of": "‖αf(x)‖", "measure": "‖αf(x)‖", "over": "every layer and head shown"}


@pytest.mark.parametrize("layers, heads", [(None, None), ([1], [0, 2])])
def test_a_long_runs_weighed_thumbnails_share_one_scale(engine, long_full, layers, heads):  # noqa: F811
    """Issue 47: a long run's model view, weighed, drew each head on its own scale (and its bytes
    clipped α·‖f‖ at 1), so a head passing small vectors looked as strong as one passing large
    ones. Its thumbnails share one scale over the layers and heads shown: their largest ‖αf(x)‖,
    taken from the max-pooled maps (never T × T), equal to the full attention × the norms."""
    weights = _weighed_full(long_full)
    assert float(weights.max()) > 1  # α·‖f‖ past 1: one byte a weight of [0, 1] clipped it
    widget = attnscope.AttentionWidget(TEXT * 2, model=engine, attention="on_demand", weigh_by="value_norm", view="model",
                                       include_layers=layers, include_heads=heads)
    try:
        shown = weights[layers or slice(None)][:, heads or slice(None)]
        largest = float(shown.max())
        at = torch.unravel_index(shown.argmax(), shown.shape)
        scale = widget.thumbnails["one_scale"]
        assert scale == {**SHARED, "largest": pytest.approx(largest, rel=1e-5),
                         "layer": (layers or [0, 1])[int(at[0])], "head": (heads or [0, 1, 2, 3])[int(at[1])]}
        got = decode(widget.thumbnails)
        assert (got - _pooled(shown, got.shape[-1]) / largest).abs().max() <= 1 / 255 / 2 + 1e-6
        # The heads keep their sizes against each other: a head's strongest cell is its largest ÷ the shared one.
        own = shown.amax((-2, -1)) / largest
        assert (got.amax((-2, -1)) - own).abs().max() <= 1 / 255 / 2 + 1e-6 and float(own.min()) < 0.9
        # Attention itself keeps each head's own scale, and carries none.
        widget.weigh_by = "attention"
        assert "one_scale" not in widget.thumbnails
    finally:
        widget.close()


def test_a_long_runs_weighed_thumbnails_in_passes_say_their_scale(engine, long_full, monkeypatch):  # noqa: F811
    """Thumbnails too large to make at once come in passes (float32): weighed, each answer says
    they share one scale, and the passes' maxima hold the full attention × the norms, whose
    largest is the scale the page draws them on (js/drawing/one_scale.js onOneScale)."""
    from attnscope.widget import payloads as pl

    weights = _weighed_full(long_full)
    n = weights.shape[-1]
    monkeypatch.setattr(pl, "PASS_PAIRS", 2 * 4 * n * n // 6)
    widget = attnscope.AttentionWidget(TEXT * 2, model=engine, attention="on_demand", weigh_by="value_norm", view="model",
                                       thumbnail_size=8)
    try:
        assert widget.thumbnails == {}
        first, buffers = ask(widget, "thumbnails", **{"pass": 0})
        assert first["passes"] > 1 and first["one_scale"] == SHARED and first["weigh_by"] == "value_norm"
        maps = [values(first, buffers)]
        for index in range(1, first["passes"]):
            content, buffers = ask(widget, "thumbnails", **{"pass": index})
            assert content["one_scale"] == SHARED
            maps.append(values(content, buffers))
        merged = torch.stack(maps).amax(0).view(first["shape"])
        top = float(weights.max())
        assert torch.allclose(merged, _pooled(weights, 8), rtol=1e-5, atol=2e-6 * top)
        assert float(merged.max()) == pytest.approx(top, rel=1e-5)
        widget.weigh_by = "attention"
        assert "one_scale" not in ask(widget, "thumbnails", **{"pass": 0})[0]
    finally:
        widget.close()


def test_a_weighed_rule_never_makes_a_rows_log_sum_exp(long_widget):
    rule = long_widget.result.rules[0]
    assert rule.key_log_weights is not None
    q, k = long_widget.result.queries[0], long_widget.result.keys[0]
    with pytest.raises(ValueError, match="log-sum-exp"):
        exact.row_logsumexp(q, k, rule)
    # What the analyses read stays the attention itself.
    assert long_widget.token_result.rules[0].key_log_weights is None


def test_a_short_run_weighed_by_value_norm_draws_alpha_times_the_norm_on_one_scale(default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, layer=3)
    try:
        plain = widget.result
        assert widget.one_scale == {} and widget.weigh_unavailable == ""
        widget.weigh_by = "value_norm"
        scale = widget.one_scale
        weights = _weighed_full(widget.token_result)
        largest = float(weights.max())
        assert scale["measure"] == scale["of"] == "‖αf(x)‖" and scale["largest"] == pytest.approx(largest, rel=1e-6)
        assert (scale["layer"], scale["head"]) == tuple(int(i) for i in torch.unravel_index(weights.argmax(), weights.shape)[:2])
        # What the views draw: α·‖f‖ ÷ the run's largest, one byte a weight.
        drawn = decode(widget.attention)
        assert torch.allclose(drawn, weights[3] / largest, atol=1 / 255 + 1e-6)
        assert torch.allclose(widget.result.attention, weights / largest, atol=1e-6)
        widget.view = "model"
        assert widget.thumbnails and float(decode(widget.thumbnails).max()) == pytest.approx(1.0, abs=1 / 255)
        # Words: α·‖f‖ merged as attention is (summed over a word's pieces as keys).
        widget.word_level = True
        merged = attnscope.engine.results.word_attention(weighed(widget.token_result, "value_norm")).attention
        assert torch.allclose(widget.result.attention, merged / float(merged.max()), atol=1e-6)
        widget.word_level = False
        widget.weigh_by = "attention"
        assert widget.one_scale == {} and torch.equal(widget.result.attention, plain.attention)
    finally:
        widget.close()


def test_masking_shows_the_change_of_the_weighed_weights(default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, masked_heads=[(1, 0)], weigh_by="value_norm",
                                       show_change=True)
    try:
        masked, plain = widget.token_result, widget.token_result.unmasked
        change = (_weighed_full(masked) - _weighed_full(plain)).abs()
        assert widget.one_scale["of"] == "|‖αf(x)‖_masked − ‖αf(x)‖|"
        assert widget.one_scale["largest"] == pytest.approx(float(change.max()), rel=1e-5)
    finally:
        widget.close()


def test_attention_without_values_says_why_it_cannot_be_weighed(default_model):
    run = default_model.run(TEXT)
    precomputed = attnscope.AttentionWidget(result=attnscope.engine.results.AttentionResult(
        tokens=run.tokens, attention=run.attention, scaling=run.scaling, causal=False, model_name="given",
        text=TEXT, text_b=None))
    try:
        assert "not captured" in precomputed.weigh_unavailable
        with pytest.raises(InputError, match="value norm"):
            precomputed.weigh_by = "value_norm"
        assert precomputed.weigh_by == "attention" and precomputed.one_scale == {}
    finally:
        precomputed.close()
    with pytest.raises(InputError, match="value norm"):
        attnscope.AttentionWidget(result=run.__class__(tokens=run.tokens, attention=run.attention, scaling=run.scaling,
                                                       causal=False, model_name="given", text=TEXT, text_b=None),
                                  weigh_by="value_norm")


def test_an_on_demand_run_keeps_the_same_value_norms_as_a_full_run(default_model):
    """BERT's output projection is its sibling's: the attention function finds it through the run."""
    on_demand = default_model.run(TEXT, attention="on_demand")
    full_run = default_model.run(TEXT)
    assert on_demand.value_norms is not None
    assert torch.allclose(on_demand.value_norms, full_run.value_norms, rtol=1e-5, atol=1e-6)


def test_a_head_with_nan_never_sets_the_weighed_runs_scale(default_model):
    import dataclasses

    from attnscope.widget.payloads import displayed

    run = default_model.run(TEXT)
    attention = run.attention.clone()
    attention[1, 2, 0, 0] = float("nan")
    broken = dataclasses.replace(run, attention=attention, nonfinite_heads=[(1, 2)])
    _, scale = displayed(broken, False, False, weigh_by="value_norm")
    weights = _weighed_full(broken)
    assert scale["largest"] == pytest.approx(float(weights.nan_to_num(nan=0.0).max()), rel=1e-6)


def test_cross_attention_weighed_by_value_norm_draws_alpha_times_the_encoder_tokens_norms(bert_tokenizer):
    """BART's cross-attention: its keys are the encoder's tokens, and their values the encoder's
    states through the cross-attention's own value projection; the views draw α·‖f‖ on one scale."""
    bart = attnscope.load(tiny_bart(len(bert_tokenizer)), bert_tokenizer, device="cpu")
    widget = attnscope.AttentionWidget(TEXT, "Der Wärter fütterte den Löwen.", model=bart, attention_part="cross",
                                       weigh_by="value_norm", layer=1)
    try:
        cross = widget.token_result
        assert isinstance(cross, attnscope.CrossAttentionResult) and widget.weigh_unavailable == ""
        weights = _weighed_full(cross)  # decoder tokens × encoder tokens, times the encoder tokens' norms
        assert weights.shape[-1] == len(widget.key_tokens) != weights.shape[-2]
        largest = float(weights.max())
        assert widget.one_scale["of"] == "‖αf(x)‖" and widget.one_scale["largest"] == pytest.approx(largest, rel=1e-6)
        assert torch.allclose(decode(widget.attention), weights[1] / largest, atol=1 / 255 + 1e-6)
        widget.weigh_by = "attention"
        assert widget.one_scale == {} and torch.allclose(widget.result.attention, cross.attention)
    finally:
        widget.close()
    # A cross-attention run given without its values says so.
    given = attnscope.CrossAttentionResult(**{**{f: getattr(cross, f) for f in ("tokens", "attention", "scaling", "causal",
                                                                               "text", "text_b", "key_tokens")},
                                              "model_name": "given"})
    assert "cross-attention keys" in weighing.no_value_norms(given)
    with pytest.raises(InputError, match="value norm"):
        weighed(given, "value_norm")


@pytest.mark.parametrize(("settings", "message"), [
    ({"weigh_by": "norm"}, r"weigh_by must be one of \['attention', 'value_norm'\], not 'norm'"),
    ({"weight_by": "value_norm"}, r"no setting weight_by='value_norm'; did you mean weigh_by=\?"),
    ({"theme": "blue"}, r"theme must be one of \['auto', 'light', 'dark'\], not 'blue'"),
])
def test_a_setting_misspelt_or_out_of_range_is_refused_before_the_model_runs(default_model, monkeypatch, settings, message):
    """The newcomer's trial: `weigh_by="norm"` ended in traitlets' traceback after the run, and
    `weight_by=` was taken silently."""
    ran = []
    monkeypatch.setattr(default_model, "run", lambda *args, **kwargs: ran.append(1))
    with pytest.raises(InputError, match=message):
        attnscope.AttentionWidget(TEXT, model=default_model, **settings)
    assert ran == []
