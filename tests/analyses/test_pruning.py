"""The pruning curve (issue 34, Voita et al. 2019 §6): heads removed least important first, the
loss measured after each removal."""

from __future__ import annotations

import pytest
import torch

import attnscope
from attnscope import InputError
from attnscope.analyses.losses import InBatchContrastiveLoss
from attnscope.analyses.pruning import step_masks

TEXTS = ["The cat sat on the mat.", "A dog barked twice at the cat.", "Rain fell all day in Zürich.", "She read the letter again."]


def test_each_steps_mask_switches_off_the_first_heads_of_the_order():
    masks = step_masks([(1, 2), (0, 0), (1, 0)], 2, 3, [0, 1, 3])
    assert masks.shape == (3, 2, 3)
    assert masks[0].sum() == 6 and masks[1][1, 2] == 0 and masks[1].sum() == 5
    assert masks[2].tolist() == [[0, 1, 1], [0, 1, 0]]


def direct_loss(engine, texts, removed):
    """The in-batch contrastive loss of the texts as one batch, with `removed` heads off."""
    encoded = engine.tokenizer(texts, padding=True, return_tensors="pt")
    mask = torch.ones(engine.n_layers, engine.n_heads)
    for layer, head in removed:
        mask[layer, head] = 0
    outputs = engine.forward(encoded, head_mask=mask)
    return float(InBatchContrastiveLoss()(outputs, encoded).double().mean())


def test_the_curve_is_the_loss_with_the_first_k_heads_of_the_order_off(default_model):
    order = [(5, 3), (0, 2), (2, 7), (4, 0)]
    frame = attnscope.pruning_curve(default_model, TEXTS, order=order, batch_size=4, progress=False)
    assert list(frame.columns) == ["removed", "kept", "loss", "layer", "head", "label"]
    assert frame.removed.tolist() == [0, 1, 2, 3, 4] and frame.kept.tolist() == [72, 71, 70, 69, 68]
    assert frame.label.tolist() == ["", "5-3", "0-2", "2-7", "4-0"]
    for k in range(5):
        # The contrastive loss of four unlike sentences is small (~1e-6): compared relatively.
        assert frame.loss[k] == pytest.approx(direct_loss(default_model, TEXTS, order[:k]), rel=1e-4), k
    assert frame.loss[0] != pytest.approx(frame.loss[4], rel=0.05)  # the heads removed matter
    # Fewer steps, measured at the counts asked for.
    some = attnscope.pruning_curve(default_model, TEXTS, order=order, steps=[0, 4], batch_size=4, progress=False)
    assert some.removed.tolist() == [0, 4] and some.loss.tolist() == pytest.approx([frame.loss[0], frame.loss[4]], rel=1e-9)


def test_by_default_heads_go_least_important_first(default_model):
    frame = attnscope.pruning_curve(default_model, TEXTS, steps=3, batch_size=4, progress=False)
    importance = attnscope.head_importance(default_model, TEXTS, batch_size=4, progress=False)
    ranked = importance[importance.measure == "importance"].sort_values("value", kind="stable")
    assert frame.attrs["order"][:10] == [[int(layer), int(head)] for layer, head in zip(ranked["layer"][:10], ranked["head"][:10], strict=True)]
    assert frame.removed.tolist() == [0, 24, 48, 72] and frame.kept.tolist()[-1] == 0
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model).show_analysis(frame)
    step, loss = widget.analysis["measures"]
    assert step["key"] == "step" and loss["key"] == "loss"
    assert step["min"] == 1  # the key starts at the first step (it read 0, a step no head goes at)
    # Every head at its own step (measured every 24, the rows name only the last of each 24: those
    # alone left 69 of the 72 heads blank), and the loss measured once it had gone.
    measured = dict(zip(frame.removed, frame.loss, strict=True))
    for rank, (layer, head) in enumerate(frame.attrs["order"], start=1):
        cell = layer * 12 + head
        assert step["values"][cell] == rank
        assert loss["values"][cell] == pytest.approx(measured[next(k for k in (24, 48, 72) if k >= rank)])
    assert "measured after 24, 48, 72 heads removed" in widget.analysis["note"] and "blank" not in widget.analysis["note"]
    assert sum(value is not None for value in step["values"]) == 72  # every head has a step, not only the 3 measured last


@pytest.mark.parametrize("kwargs, message", [
    ({"order": [(0, 0), (0, 0)]}, "names a head twice"),
    ({"order": [(6, 0)]}, r"has head \(6, 0\)"),
    ({"order": "0-1"}, "order is a head_importance frame or"),
    ({"order": [(0, 0)], "steps": [2]}, "steps"),
])
def test_a_wrong_order_or_step_is_named(default_model, kwargs, message):
    with pytest.raises(InputError, match=message):
        attnscope.pruning_curve(default_model, TEXTS, progress=False, **kwargs)
