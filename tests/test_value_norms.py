"""What each key passes (issue 47, Kobayashi et al. 2020): f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h from
what a run records, checked by the identity that defines it: Σ_h Σ_j α_hij f_h(x_j) + b_O is the
attention block's own output (before the residual and any normalisation), in each family's layout."""

from __future__ import annotations

import pytest
import torch
from small_models import FAMILIES, sharpened

import attnscope
from attnscope.engine import value_norms

TEXT = "The keeper fed the lion before the storm, and it slept."


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_weighted_values_sum_to_the_attention_blocks_own_output(family, default_model, bert_tokenizer):
    if FAMILIES[family] is None:
        engine = default_model
    else:
        torch.manual_seed(0)
        engine = attnscope.load(sharpened(FAMILIES[family]()), bert_tokenizer, device="cpu")
    model = engine.model
    projections = [value_norms.output_projection(model, module) for module in engine.attention_modules]
    outputs = {}  # each layer's attention block output, as its own output projection gives it
    handles = [value_norms.output_layer(model, module).register_forward_hook(
        lambda _m, _i, out, k=k: outputs.__setitem__(k, out[0].detach().double()))
        for k, module in enumerate(engine.attention_modules)]
    try:
        result = engine.run(TEXT)
    finally:
        for handle in handles:
            handle.remove()
    assert result.values is not None and result.value_norms.shape == (engine.n_layers, engine.n_heads, len(result.tokens))
    for layer, (weight, bias) in enumerate(projections):
        f = value_norms.head_outputs(result.values[layer].double(), weight.detach().double())  # heads × T × width
        rebuilt = torch.einsum("hij,hjd->id", result.attention[layer].double(), f)
        if bias is not None:
            rebuilt = rebuilt + bias.detach().double()
        scale = outputs[layer].abs().max().item()
        torch.testing.assert_close(rebuilt, outputs[layer], rtol=0, atol=1e-5 * max(1.0, scale), msg=family)
        torch.testing.assert_close(result.value_norms[layer].double(), f.norm(dim=-1), rtol=1e-5, atol=1e-7)


def test_grouped_query_heads_read_their_key_value_heads_values(bert_tokenizer):
    """Query heads 0 and 1 share key-value head 0, heads 2 and 3 share head 1: their values are
    the same vectors, and their norms differ only through their own slice of W_O."""
    torch.manual_seed(0)
    engine = attnscope.load(sharpened(FAMILIES["llama (grouped-query)"]()), bert_tokenizer, device="cpu")
    result = engine.run(TEXT)
    values = result.values[0]
    assert torch.equal(values[0], values[1]) and torch.equal(values[2], values[3]) and not torch.equal(values[1], values[2])
    assert not torch.allclose(result.value_norms[0, 0], result.value_norms[0, 1])


def test_the_embedded_models_special_tokens_pass_less_than_their_weight_says():
    """Kobayashi et al.'s finding, on the embedded MiniLM: [CLS] and [SEP] take much attention and
    pass small vectors; their norm is below the other tokens' in most layers."""
    engine = attnscope.load(device="cpu")
    result = engine.run("The keeper fed the lion before the storm, and then the lion slept until dawn.")
    special = torch.tensor([t in ("[CLS]", "[SEP]") for t in result.tokens])
    norms = result.value_norms.mean(1)  # layers × T
    smaller = (norms[:, special].mean(-1) < norms[:, ~special].mean(-1)).sum().item()
    assert smaller >= engine.n_layers // 2 + 1, norms


@pytest.mark.parametrize("family", ["llama (grouped-query)", "qwen2 (value biases, grouped-query)"])
def test_a_long_run_keeps_the_same_norms_and_never_the_values(family, bert_tokenizer):
    """On demand, the norms are taken where the attention function sees the values (key heads
    × T × d, never repeated per query head) and only heads × T floats are kept."""
    torch.manual_seed(0)
    engine = attnscope.load(sharpened(FAMILIES[family]()), bert_tokenizer, device="cpu")
    full = engine.run(TEXT, attention="full")
    long = engine.run(TEXT, attention="on_demand")
    assert long.value_norms.shape == full.value_norms.shape
    torch.testing.assert_close(long.value_norms, full.value_norms, rtol=1e-5, atol=1e-6)
    assert not hasattr(long, "values")
