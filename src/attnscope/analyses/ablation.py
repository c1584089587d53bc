"""Disabling one head, or one layer, at a time (Kovaleva et al. 2019, §6): how much a loss over the
corpus changes when a head's attention is made uniform (the paper's disabled head) or its output
zeroed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import AttentionModel, model_of
from ..errors import InputError
from .corpus import corpus_settings, documents
from .losses import Loss, UserLoss, default_loss, heads_off_partial
from .runner import run_partial
from .tables import Grid, analysis_view, heads_frame, tagged

MODES = ("uniform", "zero")
UNITS = ("head", "layer")


def unit_masks(n_layers: int, n_heads: int, unit: str) -> torch.Tensor:
    """One layers × heads boolean mask per unit, True where it is disabled: every head (layer by
    layer) or every layer."""
    if unit == "head":
        return torch.eye(n_layers * n_heads, dtype=torch.bool).view(-1, n_layers, n_heads)
    return torch.eye(n_layers, dtype=torch.bool)[:, :, None].expand(n_layers, n_layers, n_heads).clone()


def head_ablation(
    model: AttentionModel,
    corpus: Any,
    loss: Loss | None = None,
    *,
    mode: str = "uniform",
    unit: str = "head",
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """The change in a loss over `corpus` when each head (unit="head") or each layer's heads
    (unit="layer") are disabled, one unit at a time: mode="uniform" makes their attention uniform
    over the keys each token may see (Kovaleva et al. 2019's disabled head), "zero" zeroes their
    output (Michel et al.'s ξ_h = 0). The loss is `head_importance`'s default (masked-LM,
    next-token or in-batch contrastive) or `loss`.

    Returns a tidy DataFrame (layer, head, label, measure, value): "change" (the loss disabled
    minus the loss whole; above 0: the unit helped) and "loss", per head; a layer's value is given
    to each of its heads. frame.attrs["base_loss"] is the loss with nothing disabled.
    backend: "local" or "ray", as in `head_stats`.
    """
    model = model_of(model, "head_ablation")
    if not checks.one_of(mode, MODES):
        raise InputError(f"mode is 'uniform' (the head attends evenly) or 'zero' (its output is zeroed), not {checks.short_repr(mode)}.")
    if not checks.one_of(unit, UNITS):
        raise InputError(f"unit is 'head' or 'layer', not {checks.short_repr(unit)}.")
    docs = documents(corpus, column)
    objective = UserLoss(loss) if loss is not None else default_loss(model)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, gradients=True, backend=backend)
    n_layers, n_heads = model.n_layers, model.n_heads
    # The first set switches nothing off: the loss whole.
    off = torch.cat([torch.zeros(1, n_layers, n_heads, dtype=torch.bool), unit_masks(n_layers, n_heads, unit)])
    partial = run_partial(heads_off_partial, model, docs, progress=progress, backend=backend, off=off, mode=mode,
                          loss=loss, max_length=max_length, batch_size=batch_size, desc="disabling heads")
    mean = partial.loss / max(1, partial.examples)
    base, per_unit = float(mean[0]), mean[1:]
    grid = per_unit.view(n_layers, n_heads) if unit == "head" else per_unit[:, None].expand(n_layers, n_heads)
    frame = heads_frame({"change": grid - base, "loss": grid})
    return tagged(frame, "head_ablation", model, len(docs), loss=objective.name, mode=mode, unit=unit, base_loss=base)


@analysis_view("head_ablation")
def head_ablation_view(data: Any, grid: Grid) -> dict:
    mode = "attention made uniform" if data.attrs.get("mode") == "uniform" else "output zeroed"
    unit = "each layer" if data.attrs.get("unit") == "layer" else "each head"
    return {"measures": [
        {"key": "change", "label": "Loss change when disabled", "values": grid(data[data.measure == "change"], "value")},
        {"key": "loss", "label": "Loss when disabled", "values": grid(data[data.measure == "loss"], "value")},
    ], "note": (f"Kovaleva et al. 2019 §6: {unit} disabled in turn ({mode}); loss: {data.attrs.get('loss', '?')}, "
                f"{float(data.attrs.get('base_loss', float('nan'))):.4g} with nothing disabled.")}
