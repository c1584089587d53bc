"""Gradients and head importance (Clark et al. 2019, section 3.2; Michel et al. 2019)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..engine import formulas as an
from ..engine.attention_model import (
    AttentionModel,
    model_of,
)
from .corpus import Documents, refuse_nonfinite, token_kinds_for, tokens_at, unpadded
from .losses import Loss, UserLoss, default_loss, loss_batches
from .runner import run_corpus
from .tables import Grid, HeadSums, SumsPartial, analysis_view, heads_frame, tagged


def importance_partial(model: AttentionModel, docs: Documents, *, loss: Loss | None, max_length: int, batch_size: int,
                       progress: bool) -> SumsPartial:
    """Σ_x |∂L/∂ξ_h| over `docs` (head_importance divides by the corpus's size)."""
    objective = UserLoss(loss) if loss is not None else default_loss(model)
    total = torch.zeros(model.n_layers, model.n_heads, dtype=torch.float64)
    done = 0
    for _, prepared, inputs in loss_batches(model, docs, objective, batch_size, max_length, "head importance", progress):
        batch = inputs["input_ids"].shape[0]
        xi = torch.ones(batch, model.n_layers, model.n_heads, device=model.device, requires_grad=True)
        outputs = model.forward(inputs, head_mask=xi, track_grad=True)
        refuse_nonfinite(outputs.attentions, docs, done)
        done += batch
        value = objective(outputs, prepared)
        (grad,) = torch.autograd.grad(value.sum(), xi)
        total += grad.abs().sum(0).double().cpu()
    sums = HeadSums()
    sums.total["importance"], sums.count["importance"] = total, torch.full_like(total, float(len(docs)))
    return SumsPartial(sums, len(docs))


def gradients_partial(model: AttentionModel, docs: Documents, *, loss: Loss | None, max_length: int, batch_size: int,
                      progress: bool) -> SumsPartial:
    """Per layer and key type, the sums of mean |∂L/∂A_ij| over `docs`, and their counts."""
    objective = UserLoss(loss) if loss is not None else default_loss(model)
    sums = HeadSums()
    done = 0
    for encoded, prepared, inputs in loss_batches(model, docs, objective, batch_size, max_length, "attention gradients", progress):
        outputs = model.forward(inputs, track_grad=True)
        refuse_nonfinite(outputs.attentions, docs, done)
        done += inputs["input_ids"].shape[0]
        grads = torch.autograd.grad(objective(outputs, prepared).sum(), list(outputs.attentions))
        stacked = torch.stack(list(grads), dim=1)  # B × L × H × T × T
        for index in range(stacked.shape[0]):
            keep, g = unpadded(encoded, stacked, index)
            tokens = tokens_at(model, encoded, index, keep)
            sums.add(an.gradient_by_key_type(g, token_kinds_for(model, tokens, g.device)))
    return SumsPartial(sums, len(docs))


def head_importance(
    model: AttentionModel,
    corpus: Any,
    loss: Loss | None = None,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """Michel et al. 2019: I_h = E_x |∂L/∂ξ_h| for a head mask ξ (all ones), ℓ2-normalised per layer.

    loss(outputs, encoded) → per-example losses (B,) or their sum; by default masked-LM, next-token,
    or in-batch contrastive (see `default_loss`). Each example gets its own ξ, so the expectation
    is over examples, not over batches. Returns a tidy DataFrame (layer, head, label, measure,
    value) with measures "importance" (normalised) and "raw" (E|∂L/∂ξ_h|).

    backend: "local" or "ray", as in `head_stats`. A loss that compares the texts of a batch (the
    in-batch contrastive default) sees the same batches either way: a Ray worker runs whole batches.
    """
    model = model_of(model, "head_importance")
    objective = UserLoss(loss) if loss is not None else default_loss(model)
    run = run_corpus("head_importance", importance_partial, model, corpus, column=column, max_length=max_length,
                     batch_size=batch_size, progress=progress, backend=backend, gradients=True, loss=loss)
    raw = run.partial.sums.result()["importance"]  # E|∂L/∂ξ_h|: the sums over the documents counted
    normalised = an.normalize_importance(raw)
    frame = heads_frame({"importance": normalised, "raw": raw})
    return tagged(frame, "head_importance", model, run.documents, loss=objective.name)


def attention_gradients(
    model: AttentionModel,
    corpus: Any,
    loss: Loss | None = None,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """Clark et al. section 3.2: mean |∂L/∂A_ij| per layer, by key type ([SEP], "./,", other),
    averaged over documents. Returns a tidy DataFrame (layer, key_type, value).

    backend: "local" or "ray", as in `head_importance`."""
    model = model_of(model, "attention_gradients")
    import pandas as pd


    objective = UserLoss(loss) if loss is not None else default_loss(model)
    run = run_corpus("attention_gradients", gradients_partial, model, corpus, column=column, max_length=max_length,
                     batch_size=batch_size, progress=progress, backend=backend, gradients=True, loss=loss)
    mean = run.partial.sums
    rows = [
        (layer, key_type, float(values[layer]))
        for key_type, values in mean.result().items()
        for layer in range(values.shape[0])
    ]
    frame = pd.DataFrame(rows, columns=["layer", "key_type", "value"])
    return tagged(frame, "attention_gradients", model, run.documents, loss=objective.name)


@analysis_view("head_importance")
def head_importance_view(data: Any, grid: Grid) -> dict:
    measures = [
        {"key": "importance", "label": "Importance (ℓ2-normalised per layer)", "values": grid(data[data.measure == "importance"], "value")},
        {"key": "raw", "label": "E|∂L/∂ξ| (raw)", "values": grid(data[data.measure == "raw"], "value")},
    ]
    return {"measures": measures, "note": f"Michel et al. 2019; loss: {data.attrs.get('loss', '?')}."}

