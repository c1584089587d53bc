"""A pruning curve (Voita et al. 2019 §6, Michel et al. 2019 §4): heads removed one at a time, least
important first, and the loss over a corpus measured after each removal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .. import checks
from ..checks import head_pair
from ..engine.attention_model import AttentionModel, model_of
from ..errors import InputError
from .corpus import corpus_settings, documents
from .importance import head_importance
from .losses import Loss, UserLoss, default_loss, heads_off_partial
from .runner import run_partial
from .tables import Grid, analysis_view, tagged


def step_masks(order: Sequence[tuple[int, int]], n_layers: int, n_heads: int, steps: Sequence[int]) -> torch.Tensor:
    """For each step k (heads removed), the head mask with the first k heads of `order` off:
    steps × layers × heads of 1 and 0."""
    masks = torch.ones(len(steps), n_layers, n_heads)
    for index, removed in enumerate(steps):
        for layer, head in order[:removed]:
            masks[index, layer, head] = 0.0
    return masks


def pruning_curve(
    model: AttentionModel,
    corpus: Any,
    loss: Loss | None = None,
    *,
    order: Any = None,
    steps: int | Sequence[int] | None = None,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """The loss over `corpus` with heads removed one at a time (their outputs zeroed, Michel et
    al.'s ξ_h = 0), in `order`: by default Michel et al.'s importance over the same corpus, least
    important first (`head_importance`), or a `head_importance` frame, or (layer, head) pairs.

    steps: after how many heads removed to measure (by default every count, 0 to all of them); an
    int n measures n + 1 evenly spaced counts. The loss is the default of `head_importance`
    (masked-LM, next-token, or in-batch contrastive) or `loss`.

    Returns a DataFrame: removed, kept, loss, and the head removed at that step (layer, head,
    label; none at step 0). Plot it as Voita et al.'s Figure 7: `frame.plot(x="kept", y="loss")`.
    backend: "local" or "ray", as in `head_stats`.
    """
    import pandas as pd

    model = model_of(model, "pruning_curve")
    docs = documents(corpus, column)
    n_layers, n_heads = model.n_layers, model.n_heads
    order = _order(order, model, corpus, loss, column, max_length, batch_size, progress, backend)
    counts = _steps(steps, len(order))
    objective = UserLoss(loss) if loss is not None else default_loss(model)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, gradients=True, backend=backend)
    partial = run_partial(heads_off_partial, model, docs, progress=progress, backend=backend, loss=loss, mode="zero",
                          off=step_masks(order, n_layers, n_heads, counts) == 0, max_length=max_length, batch_size=batch_size,
                          desc="pruning")
    mean = (partial.loss / max(1, partial.examples)).tolist()
    rows = []
    for removed, value in zip(counts, mean, strict=True):
        layer, head = order[removed - 1] if removed else (None, None)
        rows.append({"removed": removed, "kept": n_layers * n_heads - removed, "loss": value, "layer": layer, "head": head,
                     "label": f"{layer}-{head}" if removed else ""})
    frame = pd.DataFrame(rows)
    return tagged(frame, "pruning_curve", model, len(docs), loss=objective.name, order=[list(pair) for pair in order],
                  n_layers=n_layers, n_heads=n_heads)


def _order(order: Any, model, corpus, loss, column, max_length, batch_size, progress, backend) -> list[tuple[int, int]]:
    n_layers, n_heads = model.n_layers, model.n_heads
    if order is None:
        order = head_importance(model, corpus, loss, column=column, max_length=max_length, batch_size=batch_size,
                                progress=progress, backend=backend)
    if getattr(order, "attrs", {}).get("attnscope") == "head_importance":
        ranked = order[order.measure == "importance"].sort_values(["value", "layer", "head"], kind="stable")
        return [(int(layer), int(head)) for layer, head in zip(ranked["layer"], ranked["head"], strict=True)]
    if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
        raise InputError(f"order is a head_importance frame or (layer, head) pairs, not {checks.kind_of(order)}.")
    pairs = [head_pair(pair) for pair in order]
    for layer, head in pairs:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise InputError(f"order has head ({layer}, {head}), and {model.name} has layers 0..{n_layers - 1} and "
                             f"heads 0..{n_heads - 1}.")
    if len(set(pairs)) != len(pairs):
        raise InputError("order names a head twice: each head is removed once.")
    return pairs


def _steps(steps: Any, n: int) -> list[int]:
    if steps is None:
        return list(range(n + 1))
    if isinstance(steps, int) and not isinstance(steps, bool):
        count = checks.integer("steps", steps, minimum=1)
        return sorted({round(i * n / count) for i in range(count + 1)})
    values = [checks.integer("steps", value, minimum=0, maximum=n) for value in steps]
    return sorted(set(values))


def removal_frame(data: Any) -> Any:
    """Every head of the curve's order (its attrs' "order"; else the heads its rows name) at its
    step, 1 for the first removed, and the loss measured once it had gone: at the first measured
    count that includes it (NaN past the last). With steps=12 over 72 heads, each measure came
    after 6 removals: the rows name only the last of each 6, and coloured alone they left 60 of
    the 72 heads blank, read as "not removed"."""
    import bisect

    import pandas as pd

    measured = data[data.removed > 0].sort_values("removed")
    order = [tuple(pair) for pair in data.attrs.get("order") or []]
    if not order:  # a frame without its attrs (read back from a file): the heads its rows name
        order = [(int(layer), int(head)) for layer, head in zip(measured.layer, measured["head"], strict=True)]
        counts = list(range(1, len(order) + 1))
    else:
        counts = [int(count) for count in measured.removed]
    losses = [float(loss) for loss in measured.loss]
    rows = []
    for step, (layer, head) in enumerate(order, start=1):
        at = bisect.bisect_left(counts, step)
        rows.append({"layer": layer, "head": head, "step": float(step), "loss": losses[at] if at < len(losses) else float("nan")})
    return pd.DataFrame(rows, columns=["layer", "head", "step", "loss"])


@analysis_view("pruning_curve")
def pruning_curve_view(data: Any, grid: Grid) -> dict:
    """Each head of the order at the step it went, and the loss once it had gone."""
    heads = removal_frame(data)
    measured = data[data.removed > 0]
    every = "after each head" if len(measured) >= len(heads) else \
        f"after {', '.join(str(int(k)) for k in measured.removed[:6])}{'…' if len(measured) > 6 else ''} heads removed"
    return {"measures": [
        # integer: a count of steps, labelled 1–72, not 0.00–72.00 (min: no head goes at step 0)
        {"key": "step", "label": "Removed at step (1 = first)", "values": grid(heads, "step"), "integer": True, "min": 1},
        {"key": "loss", "label": "Loss once removed (the next measure)", "values": grid(heads, "loss")},
    ], "note": (f"Heads removed least important first (Michel et al. 2019; Voita et al. 2019 §6), one a step, loss: "
                f"{data.attrs.get('loss', '?')}, measured {every}; with every head {float(data.loss.iloc[0]):.4g}, after "
                f"the last step {float(data.loss.iloc[-1]):.4g}. A head's loss is the first measured once it had gone."
                + ("" if len(heads) == int(data.attrs.get("n_layers", 0)) * int(data.attrs.get("n_heads", 0))
                   else " Heads outside the order are blank."))}
