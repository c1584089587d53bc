"""What the analyses share: per-head sums over documents (a partial aggregate that merges) and
the tidy DataFrame of layer × head values, tagged with what made it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import (
    AttentionModel,
)
from ..errors import InputError
from ..labels import head_label


def heads_frame(values: dict[str, torch.Tensor]):
    """measure → L × H tensors as a tidy DataFrame: layer, head, label, measure, value."""
    import pandas as pd

    rows = []
    for measure, tensor in values.items():
        grid = tensor.detach().cpu().double()
        for layer in range(grid.shape[0]):
            for head in range(grid.shape[1]):
                rows.append((layer, head, head_label(layer, head), measure, float(grid[layer, head])))
    return pd.DataFrame(rows, columns=["layer", "head", "label", "measure", "value"])


def tagged(frame, kind: str, engine: AttentionModel, n_documents: int, **extra):
    frame.attrs.update({"attnscope": kind, "model": engine.name, "documents": n_documents, **extra})
    return frame


class HeadSums:
    """Per measure, the sums and counts of L × H values over documents, NaN left out (a document
    with no [SEP] says nothing of attention to [SEP]). A partial aggregate: the sums of any split
    of a corpus, merged, are the whole corpus's (corpus.py runs the parts on a Ray cluster)."""

    def __init__(self):
        self.total: dict[str, torch.Tensor] = {}
        self.count: dict[str, torch.Tensor] = {}

    def add(self, values: dict[str, torch.Tensor], weight: float = 1.0) -> None:
        """One document's values; `weight`: how many it averages (its tokens), for a mean over
        tokens rather than over documents."""
        for key, value in values.items():
            value = value.detach().double().cpu()
            valid = ~torch.isnan(value)
            if key not in self.total:
                self.total[key] = torch.zeros_like(value)
                self.count[key] = torch.zeros_like(value)
            self.total[key] += torch.where(valid, value * weight, torch.zeros_like(value))
            self.count[key] += valid.double() * weight

    def merge(self, other: HeadSums) -> HeadSums:
        merged = HeadSums()
        for part in (self, other):
            for key in part.total:
                merged.total[key] = merged.total.get(key, 0) + part.total[key]
                merged.count[key] = merged.count.get(key, 0) + part.count[key]
        return merged

    def result(self) -> dict[str, torch.Tensor]:
        return {k: self.total[k] / self.count[k] for k in self.total}  # 0/0 → NaN: never seen


@dataclass
class SumsPartial:
    """What a part of a corpus adds to an analysis of per-head sums (head_importance, attention_gradients,
    head_roles, attention_patterns): the sums and counts, and the documents."""

    sums: HeadSums
    documents: int

    def merge(self, other: SumsPartial) -> SumsPartial:
        return SumsPartial(self.sums.merge(other.sums), self.documents + other.documents)


# A per-head grid of an analysis's column: grid(rows, column) → layers × heads values, as the
# analysis view reads them (payloads.analysis_payload makes it, checking the model's shape).
Grid = Callable[[Any, str], list]
# kind → how that kind is shown: (data, grid) → {"measures": [{key, label, values}], "note": ...,
# and for a scatter "points" and "behaviours"}. A measure may say what its values are:
# "categories" (their names, values index them) or "integer": True (counts, steps: no decimals).
ANALYSIS_VIEWS: dict[str, Callable[[Any, Grid], dict]] = {}


def analysis_view(kind: str):
    """Registers a module's conversion of its result (`frame.attrs["attnscope"] == kind`) for the
    widget's analysis view: a new analysis is shown once its module is imported (analyses/__init__)."""
    def register(convert: Callable[[Any, Grid], dict]) -> Callable[[Any, Grid], dict]:
        ANALYSIS_VIEWS[kind] = convert
        return convert
    return register


def analysis_kind(data: Any) -> str | None:
    """The kind of an analysis's result: what its tag says (tagged)."""
    return getattr(data, "analysis_kind", None) or (data.attrs.get("attnscope") if hasattr(data, "attrs") else None)



FRAME_COLUMNS = ("head", "label", "layer", "measure", "value")


def analysis_frame(frame: Any, reader: str, made_by: str) -> Any:
    """`frame` when it is a tidy frame as the analyses return (layer, head, label, measure, value);
    else InputError naming `reader` (the function that reads it), what it got and what makes one."""
    import pandas as pd

    if isinstance(frame, pd.DataFrame) and set(FRAME_COLUMNS) <= set(frame.columns):
        return frame
    got = checks.kind_of(frame)
    if isinstance(frame, pd.DataFrame):
        got = f"a DataFrame of {', '.join(map(str, frame.columns[:8]))}" if len(frame.columns) else "a DataFrame of no columns"
    raise InputError(f"{reader} reads what {made_by} returns (a DataFrame of {', '.join(FRAME_COLUMNS)}), not {got}.")
