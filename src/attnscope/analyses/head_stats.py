"""Per-head statistics and behaviours (Clark et al. 2019, sections 3 and 6): head_stats,
behaviours and head_distances, each a partial aggregate per part of a corpus.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import checks
from ..engine import formulas as an
from ..engine.attention_model import (
    AttentionModel,
    model_of,
)
from ..errors import InputError
from .corpus import Documents, iter_attention
from .runner import heads_analysis, run_corpus
from .tables import Grid, HeadSums, analysis_view, heads_frame, tagged


@dataclass
class HeadPartial:
    """What a part of a corpus adds to head_stats or head_distances: the per-head sums, the summed
    K × K Jensen–Shannon divergences (head_distances only) and the number of documents."""

    sums: HeadSums
    divergence: torch.Tensor | None
    documents: int

    def merge(self, other: HeadPartial) -> HeadPartial:
        if self.divergence is None or other.divergence is None:
            divergence = self.divergence if other.divergence is None else other.divergence
        else:
            divergence = self.divergence + other.divergence
        return HeadPartial(self.sums.merge(other.sums), divergence, self.documents + other.documents)


def head_partial(kind: str, model: AttentionModel, docs: Documents, *, max_length: int | None, batch_size: int,
                 progress: bool) -> HeadPartial:
    """The partial aggregate of `docs` for head_stats ("stats") or head_distances ("distances")."""
    sums = HeadSums()
    divergence = None
    desc = "head stats" if kind == "stats" else "head distances"
    for doc in iter_attention(model, docs, max_length=max_length, batch_size=batch_size, desc=desc, progress=progress):
        if kind == "distances":
            n_layers, n_heads = doc.attention.shape[:2]
            js = an.js_divergence(doc.attention.reshape(n_layers * n_heads, *doc.attention.shape[2:])).double().cpu()
            divergence = js if divergence is None else divergence + js
        sums.add(an.head_statistics(doc.attention, doc.kinds))
    return HeadPartial(sums, divergence, len(docs))


def head_stats(
    model: AttentionModel,
    corpus: Any,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """Clark et al.'s per-head statistics, per document then averaged over documents.

    Returns a tidy DataFrame (layer, head, label, measure, value); measures are the keys of
    `attnscope.engine.formulas.MEASURE_LABELS` (cls, sep, punct, sep_sep, other_sep, prev, current, next,
    entropy, entropy_cls). Show it with `widget.show_analysis(frame)`.

    backend: "local" (this process, batches of `batch_size` on the model's device) or "ray": the
    same analysis as a Ray Data pipeline, one model actor per GPU (or per CPU when there is none)
    on the cluster `ray.init()` joins (`pip install "attnscope[ray]"`); the same numbers.
    """
    return heads_analysis("head_stats", functools.partial(head_partial, "stats"), model, corpus, column=column,
                          max_length=max_length, batch_size=batch_size, progress=progress, backend=backend)


def behaviours(stats) -> Any:
    """Each head's behaviour label (Clark et al.'s thresholds) from a `head_stats` frame.

    The rules are tested in `analysis.BEHAVIOUR_RULES`' order, first match wins: broad, previous,
    next, [CLS], [SEP], punctuation. Clark's General_Analysis.ipynb runs them as successive ifs, so
    the last match wins: its priority is punctuation, [SEP], [CLS], broad, previous, next. Only a
    head over two thresholds can be labelled differently, and the thresholds nearly exclude each
    other ([CLS], [SEP] and "./," are disjoint keys, each > 0.6; entropy > 3.8 nats with > 0.5 on
    one key needs over ~500 tokens; previous/next overlap [CLS]/[SEP] by one query, which matters
    only under ~10 tokens). Measured with the embedded MiniLM on the notebook's corpus (20 pairs,
    and its 40 sentences one by one): no head passes two thresholds, 0 of 72 labels change.
    """
    import pandas as pd

    needed = {"layer", "head", "label", "measure", "value"}
    if not (isinstance(stats, pd.DataFrame) and needed <= set(stats.columns)):
        raise InputError(f"behaviours labels heads from what head_stats returns (a DataFrame of {', '.join(sorted(needed))}), "
                         f"not {checks.kind_of(stats)}{'' if not isinstance(stats, pd.DataFrame) else ' of ' + ', '.join(map(str, stats.columns))}.")
    wide = stats.pivot_table(index=["layer", "head", "label"], columns="measure", values="value").reset_index()
    wide.columns.name = None
    wide["behaviour"] = [an.behaviour_of(row) for row in wide.to_dict("records")]
    return pd.DataFrame(wide[["layer", "head", "label", "behaviour"]])


def head_distances(
    model: AttentionModel,
    corpus: Any,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    n_init: int = 1,
    seed: int = 0,
    backend: str = "local",
):
    """Jensen–Shannon divergence between every pair of heads, summed over tokens and documents,
    laid out in 2-D with metric MDS (Clark et al. section 6).

    Returns a DataFrame (layer, head, label, x, y, behaviour); the full K × K divergence matrix is
    in `frame.attrs["distances"]` (a nested list, rows in the frame's order).

    n_init, seed: MDS starts, as `analysis.mds`. Clark ran sklearn's MDS with n_init=5 random
    starts; n_init=1 (the default) is one SMACOF run from classical MDS, deterministic. n_init=5
    adds 4 seeded random starts and keeps the lowest stress. Measured with the embedded MiniLM:
    on the notebook's 20 sentence pairs n_init=5 lowers the raw stress by 0.4 % (2.273e6, from
    the classical start's 2.283e6; by 1.9 % with Clark's max_iter=1000, where the random starts
    converge further); on 5 single sentences every random start ends worse (best 37,599 against
    28,438), so n_init=5 keeps the classical layout.

    backend: "local" or "ray", as in `head_stats`.
    """
    model = model_of(model, "head_distances")
    an.check_n_init(n_init, seed)  # before the corpus runs, not after
    run = run_corpus("head_distances", functools.partial(head_partial, "distances"), model, corpus, column=column,
                     max_length=max_length, batch_size=batch_size, progress=progress, backend=backend)
    partial = run.partial
    total = partial.divergence
    layout = an.mds(total, n_init=n_init, seed=seed)
    labels = behaviours(heads_frame(partial.sums.result()))
    frame = labels.assign(x=layout[:, 0].cpu().numpy(), y=layout[:, 1].cpu().numpy())
    frame = frame[["layer", "head", "label", "x", "y", "behaviour"]]
    return tagged(frame, "head_distances", run.model, run.documents, distances=total.cpu().tolist())


@analysis_view("head_stats")
def head_stats_view(data: Any, grid: Grid) -> dict:
    measures = [{"key": key, "label": label, "values": grid(data[data.measure == key], "value")}
                for key, label in an.MEASURE_LABELS.items() if key in set(data.measure)]
    return {"measures": measures, "note": f"Clark et al. 2019 §3, averaged over {data.attrs.get('documents', '?')} documents."}


@analysis_view("head_distances", layout="scatter", needs=("thumbnails",))
def head_distances_view(data: Any, grid: Grid) -> dict:
    """The heads laid out by MDS: a scatter, coloured by behaviour."""
    frame = data.sort_values(["layer", "head"])
    points = [v for xy in zip(frame.x, frame.y) for v in (float(xy[0]), float(xy[1]))]
    if not all(math.isfinite(v) for v in points):
        raise InputError("This head_distances layout has NaN or infinite coordinates, which no scatter can place: "
                         "make it again with attnscope.head_distances (its corpus analyses refuse NaN attention).")
    behaviours = list(frame.behaviour)
    grid(frame, "x")  # checks the shape
    return {"measures": [], "points": points, "behaviours": behaviours,
            "note": "Jensen–Shannon divergence between heads, laid out by MDS (Clark et al. 2019 §6)."}

