"""NaN and infinite attention: found per head, named, and said."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..labels import head_label


def has_nonfinite(values: torch.Tensor) -> torch.Tensor:
    """Per row (last dimension), whether it holds NaN or ±inf: the row sum is then NaN or ±inf.
    Cheaper than isfinite over every weight (no T² mask), and rows of probabilities never
    overflow a float32 sum."""
    return ~torch.isfinite(values.sum(-1, dtype=torch.float32))


def nonfinite_heads(attention: torch.Tensor | Sequence[torch.Tensor]) -> list[tuple[int, int]]:
    """(layer, head) of every map in layers × heads × ... (one tensor, or one per layer) that holds
    NaN or ±inf."""
    layers = [attention] if isinstance(attention, torch.Tensor) else [layer.unsqueeze(0) for layer in attention]
    heads, first = [], 0
    for block in layers:
        bad = has_nonfinite(block).flatten(2).any(-1)
        heads += [(first + int(layer), int(head)) for layer, head in bad.nonzero().tolist()]
        first += block.shape[0]
    return heads


def describe_heads(heads: Sequence[tuple[int, int]], limit: int = 12) -> str:
    """"0-1, 0-4, 3-0" (layer-head, counted from 0), shortened past `limit`."""
    names = [head_label(layer, head) for layer, head in heads]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


class NonFiniteAttentionWarning(UserWarning):
    """Some heads' attention holds NaN or infinite values."""


def nonfinite_message(heads: Sequence[tuple[int, int]], n_heads_total: int) -> str:
    return (
        f"Attention holds NaN or infinite values in {len(heads)} of {n_heads_total} heads (layer-head): "
        f"{describe_heads(heads)}. Half-precision overflow or broken weights? Those heads are "
        "drawn empty; run the model in float32 (model.float()) to see them."
    )
