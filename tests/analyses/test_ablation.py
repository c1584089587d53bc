"""Disabling heads and layers (issue 34, Kovaleva et al. 2019 §6): uniform attention through the
model's own query projections, and the loss change of each head or layer disabled."""

from __future__ import annotations

import pytest
import torch
from test_engine import small_models

import attnscope
from attnscope import InputError
from attnscope.analyses.ablation import unit_masks
from attnscope.analyses.losses import InBatchContrastiveLoss

TEXTS = ["The cat sat on the mat.", "A dog barked twice at the cat.", "Rain fell all day in Zürich.", "She read the letter again."]


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama-gqa", "distilbert"])
def test_a_uniform_head_spreads_each_row_evenly_over_the_keys_it_may_see(family, bert_tokenizer):
    torch.manual_seed(0)
    engine = attnscope.load(small_models()[family](), bert_tokenizer, device="cpu")
    encoded = bert_tokenizer(["The quick brown fox jumps.", "A dog."], padding=True, return_tensors="pt")
    plain = engine.forward(encoded).attentions
    uniform = torch.zeros(3, 4, dtype=torch.bool)
    uniform[1, 2] = True
    changed = engine.forward(encoded, uniform=uniform).attentions
    mask = encoded["attention_mask"].bool()
    for doc in range(2):
        n = int(mask[doc].sum())
        rows = changed[1][doc, 2][mask[doc]][:, mask[doc]]
        allowed = torch.tril(torch.ones(n, n)) if engine.causal else torch.ones(n, n)
        expected = allowed / allowed.sum(-1, keepdim=True)
        assert torch.allclose(rows, expected, atol=1e-6), family
    # Layer 1's other heads and the layers before it do not change; the layers after it do.
    assert torch.equal(changed[0], plain[0])
    assert torch.allclose(changed[1][:, [0, 1, 3]], plain[1][:, [0, 1, 3]], atol=1e-6)
    assert (changed[2] - plain[2]).abs().max() > 1e-7  # random weights attend nearly evenly: a small change
    # The hooks go with the block: the next forward is the plain one.
    assert torch.equal(engine.forward(encoded).attentions[2], plain[2])


def test_each_unit_disables_one_head_or_one_layers_heads():
    heads = unit_masks(2, 3, "head")
    assert heads.shape == (6, 2, 3) and heads.sum().item() == 6 and heads[4][1, 1]
    layers = unit_masks(2, 3, "layer")
    assert layers.shape == (2, 2, 3) and layers[1].tolist() == [[False] * 3, [True] * 3]


def loss_with(engine, texts, **disabled):
    encoded = engine.tokenizer(texts, padding=True, return_tensors="pt")
    return float(InBatchContrastiveLoss()(engine.forward(encoded, **disabled), encoded).double().mean())


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
def test_the_change_is_the_loss_with_the_unit_disabled_less_the_loss_whole(default_model):
    frame = attnscope.head_ablation(default_model, TEXTS, batch_size=4, progress=False)
    base = loss_with(default_model, TEXTS)
    assert frame.attrs["base_loss"] == pytest.approx(base, rel=1e-5)
    change = frame[frame.measure == "change"].set_index(["layer", "head"]).value
    loss = frame[frame.measure == "loss"].set_index(["layer", "head"]).value
    for layer, head in [(0, 2), (3, 7), (5, 11)]:
        uniform = torch.zeros(6, 12, dtype=torch.bool)
        uniform[layer, head] = True
        assert loss[(layer, head)] == pytest.approx(loss_with(default_model, TEXTS, uniform=uniform), rel=1e-5)
        assert change[(layer, head)] == pytest.approx(loss[(layer, head)] - frame.attrs["base_loss"], rel=1e-5, abs=1e-12)
    zeroed = attnscope.head_ablation(default_model, TEXTS, mode="zero", unit="layer", batch_size=4, progress=False)
    mask = torch.ones(6, 12)
    mask[2] = 0
    by_layer = zeroed[zeroed.measure == "loss"].set_index(["layer", "head"]).value
    assert by_layer[(2, 0)] == by_layer[(2, 11)] == pytest.approx(loss_with(default_model, TEXTS, head_mask=mask), rel=1e-5)
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model).show_analysis(frame)
    assert [m["key"] for m in widget.analysis["measures"]] == ["change", "loss"]
    assert widget.analysis["note"].startswith("Kovaleva et al. 2019 §6: each head disabled in turn (attention made uniform)")


@pytest.mark.parametrize("kwargs, message", [({"mode": "random"}, "mode is 'uniform'"), ({"unit": "neuron"}, "unit is 'head' or 'layer'")])
def test_a_wrong_mode_or_unit_is_named(default_model, kwargs, message):
    with pytest.raises(InputError, match=message):
        attnscope.head_ablation(default_model, TEXTS, progress=False, **kwargs)
