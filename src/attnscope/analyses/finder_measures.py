"""The head finder's measures of one document (analyses/head_finder.py adds them up over the
corpus): every metric of every head, and each query's score for the examples, from attention held
whole (`full_measures`, each metric by its own analysis's formula) or from a long document kept on
demand, a block of rows at a time (`long_measures`); `measured_documents` gives each document's in
corpus order.

A module of its own: what one document measures is the finder's arithmetic (the other analyses'
formulas, and their sums over row blocks where layers × heads × T × T is never held), apart from
what the finder keeps of the corpus (the examples, their merge, the metrics table, the filter).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..engine import formulas as an
from ..engine.attention_model import AttentionModel
from ..engine.results import LongAttentionResult
from .corpus import Documents, document_position, iter_attention, token_kinds_for
from .head_roles import document_measures, rarest_tokens
from .patterns import classify, pattern_shares, segments_of

SINK_EPSILON = 0.3  # Gu et al. 2024's ε
# A decoder's query sees only the tokens up to it: its first ones choose among a few, and their
# largest weight is large whatever the head does (1/2 at the second token of a uniform head), so
# every head's examples would be the documents' starts. A decoder's examples are queries from here.
FIRST_CAUSAL_QUERY = 8
# The metrics as the finder names them (columns of `metrics`), from each source's own names.
STATS = {"cls": "cls", "sep": "sep", "punct": "punct", "prev": "prev_token", "current": "self", "next": "next_token",
         "entropy": "entropy"}
ROLES = {"confidence": "confidence", "rare": "rare"}


@dataclass
class DocumentMeasures:
    """One document's measures as the finder adds them up: `values` (metric → L × H, a mean over
    the document's queries), Voita et al.'s `roles` over `weight` queries ("rare" over
    `rare_weight`), Kovaleva et al.'s pattern of each map (`classes`), and for the examples each
    query's largest weight on an ordinary token (`best`, L × H × n) with `row_of` to read rows."""

    values: dict
    roles: dict
    weight: int
    rare_weight: int
    classes: torch.Tensor
    best: torch.Tensor
    row_of: Any


def _ordinary(special: torch.Tensor, causal: bool) -> torch.Tensor:
    """The keys an example's score reads: not [CLS] or [SEP], nor a decoder's first token (its sink)."""
    ordinary = ~special
    if causal:
        ordinary = ordinary.clone()
        ordinary[0] = False
    return ordinary


def _from_first_query(best: torch.Tensor, causal: bool) -> torch.Tensor:
    """Each query's score for the examples (... × n), a decoder's first queries left out
    (FIRST_CAUSAL_QUERY)."""
    if causal:
        best[..., :FIRST_CAUSAL_QUERY] = float("-inf")
    return best


def first_weighed_shares(rows: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Each row's share of its norm-based weights (Kobayashi et al.'s ‖α_hij f_h(x_j)‖ = α_hij
    ‖f_h(x_j)‖) on the first key: α_hi0 ‖f_h(x_0)‖ / Σ_j α_hij ‖f_h(x_j)‖. rows: ... × H × r × n
    (r rows of attention); norms: ... × H × n → ... × H × r (NaN for a row that passes nothing).
    Never the weighed rows themselves: one product with the norms, no second r × n."""
    passed = (rows @ norms[..., None]).squeeze(-1)  # Σ_j α_ij ‖f(x_j)‖ per row
    return rows[..., 0] * norms[..., :1] / passed


def _sink_rate(alpha: torch.Tensor) -> torch.Tensor:
    """Gu et al.'s sink of a document (1 where the first token's mean share passes ε), NaN where
    the share is unknown."""
    return torch.where(alpha.isnan(), alpha.double(), (alpha > SINK_EPSILON).double())


def norm_values(norms: torch.Tensor, first_weighed: torch.Tensor) -> dict[str, torch.Tensor]:
    """One document's norm metrics (L × H each) from its ‖f_h(x_j)‖ (L × H × n) and the mean over
    its queries of each row's weighed share on the first key (first_weighed_shares)."""
    return {"value_norm": norms.double().mean(-1), "alpha_first_weighed": first_weighed,
            "sink_rate_weighed": _sink_rate(first_weighed)}


def full_measures(attention: torch.Tensor, kinds, counts: list[int], causal: bool,
                  norms: torch.Tensor | None = None) -> DocumentMeasures:
    """A document whose attention (L × H × n × n) is held whole: each metric by its own analysis's
    formula; with its ‖f_h(x_j)‖ (`norms`, L × H × n) the norm metrics too."""
    stats = an.head_statistics(attention, kinds)
    values = {name: stats[source] for source, name in STATS.items()}
    sink = an.sink_measures(attention[..., :1], 1, SINK_EPSILON)
    values.update(alpha_first=sink["alpha_first"], sink_rate=sink["sink"])
    if norms is not None:
        norms = norms.to(attention.device, torch.float32)
        values.update(norm_values(norms, first_weighed_shares(attention, norms).double().mean(-1)))
    special = kinds.cls | kinds.sep
    roles, weight, rare_weight = document_measures(attention, special, counts, causal)
    classes = classify(pattern_shares(attention, segments_of(kinds.sep)))
    ordinary = _ordinary(special, causal).to(attention.device)
    best = _from_first_query(attention.masked_fill(~ordinary, float("-inf")).max(-1).values, causal)
    return DocumentMeasures(values, roles, weight, rare_weight, classes, best,
                            lambda layers, heads, queries: attention[layers, heads, queries])


def long_measures(result: LongAttentionResult, kinds, counts: list[int], causal: bool) -> DocumentMeasures:
    """A long document kept on demand (queries, keys and row log-sum-exps): the same metrics as
    `full_measures`, summed a block of rows at a time (LongAttentionResult.row_blocks), so that
    no layer's heads × n × n is ever held. Each is a mean over rows of what a row gives, but the
    patterns' vertical columns (the two most attended, known after every row): those read the
    column sums, and the diagonal share keeps each row's three band weights until they are known."""
    n, n_layers, n_heads = result.n_tokens, result.n_layers, result.n_heads
    device = result.queries[0].device
    special = (kinds.cls | kinds.sep).cpu()
    ordinary = _ordinary(special, causal).to(device)
    to = {name: mask.to(device) for name, mask in (("cls", kinds.cls), ("sep", kinds.sep), ("punct", kinds.punct))}
    segment = segments_of(kinds.sep.cpu()).to(device)
    pair = bool((segment != segment[0]).any())
    queries = (~special).nonzero().flatten()
    is_query = (~special).to(device)
    target = rarest_tokens(queries, counts, causal, n)
    seeing_row = torch.zeros(n, dtype=torch.bool, device=device)
    if target is not None:
        rare, seeing = target
        rare = rare.to(device)
        seeing_row[queries[seeing]] = True
    shape = (n_layers, n_heads)
    norms = None if result.value_norms is None else result.value_norms.to(device, torch.float32)
    sums = {name: torch.zeros(shape, dtype=torch.float64, device=device)
            for name in ("cls", "sep", "punct", "prev_token", "self", "next_token", "entropy", "first", "block",
                         "confidence", "rare", *(("first_weighed",) if norms is not None else ()))}
    best = torch.empty(n_layers, n_heads, n, device=device)
    classes = torch.empty(shape, dtype=torch.long, device=device)
    positions = torch.arange(n, device=device)
    for layer in range(n_layers):
        columns = torch.zeros(n_heads, n, dtype=torch.float64, device=device)
        band = torch.zeros(n_heads, n, 3, device=device)  # each row's weight on keys i − 1, i, i + 1
        here = {name: total[layer] for name, total in sums.items()}  # this layer's row of each sum

        def add(name: str, value: torch.Tensor, here=here) -> None:
            here[name].add_(value.double())

        for start, end, block in result.row_blocks(layer):  # heads × r × n
            rows = positions[start:end]
            for name, mask in to.items():
                add(name, block[..., mask].sum((-1, -2)))
            for d, name in ((-1, "prev_token"), (0, "self"), (1, "next_token")):
                at = rows + d
                inside = (at >= 0) & (at < n)
                weights = block[:, inside.nonzero().flatten(), at[inside]]
                band[:, rows[inside], d + 1] = weights
                add(name, weights.sum(-1))
            add("entropy", an.entropy(block).sum(-1))
            add("first", block[..., 0].sum(-1))
            if norms is not None:
                add("first_weighed", first_weighed_shares(block, norms[layer]).double().sum(-1))
            columns += block.sum(-2, dtype=torch.float64)
            if pair:
                add("block", (block * (segment[rows][:, None] == segment[None, :])).sum((-1, -2)))
            largest, at = block[:, is_query[rows]].max(-1)
            add("confidence", largest.sum(-1))
            if target is not None:
                add("rare", (rare[at] & seeing_row[rows][is_query[rows]]).sum(-1))
            best[layer, :, start:end] = block.masked_fill(~ordinary, float("-inf")).max(-1).values
        best[layer] = _from_first_query(best[layer], causal)
        mean_columns = columns / n
        top = mean_columns.topk(min(2, n), dim=-1).indices
        vertical_columns = torch.zeros(n_heads, n, dtype=torch.bool, device=device)
        vertical_columns.scatter_(-1, top, True)
        keys = (positions[:, None] + torch.tensor([-1, 0, 1], device=device)).clamp(0, n - 1)  # n × 3
        off_band = ~vertical_columns[:, keys]  # heads × n × 3 (a clamped key's weight is 0 in band)
        classes[layer] = classify({
            "vertical": mean_columns.gather(-1, top).sum(-1),
            "diagonal": (band * off_band).sum((-1, -2)).double() / n,
            "block": sums["block"][layer] / n if pair else torch.zeros(n_heads, dtype=torch.float64, device=device),
        })
    values = {name: sums[name] / n for name in ("cls", "sep", "punct", "prev_token", "self", "next_token", "entropy")}
    values["alpha_first"] = sums["first"] / n
    values["sink_rate"] = (values["alpha_first"] > SINK_EPSILON).double()
    if norms is not None:
        values.update(norm_values(norms, sums["first_weighed"] / n))
    weight = len(queries)
    roles = {"confidence": sums["confidence"] / weight} if weight else {}
    rare_weight = int(target[1].sum()) if target is not None else 0
    if rare_weight:
        roles["rare"] = sums["rare"] / rare_weight

    def row_of(layers, heads, queries):
        return torch.stack([result.attention_rows(int(a), int(h), [int(q)])[0] for a, h, q in zip(layers, heads, queries)])

    return DocumentMeasures(values, roles, weight, rare_weight, classes, best, row_of)


def measured_documents(model: AttentionModel, docs: Documents, long: frozenset, counts: dict[str, int], max_length: int,
              batch_size: int | str) -> Iterator[tuple[int, list[str], DocumentMeasures]]:
    """Every document's measures in corpus order, with its corpus position and tokens: a run of
    short documents from batched forward passes (their attention whole), a long one (`long`:
    corpus positions) kept on demand."""
    causal = bool(getattr(model, "causal", False))
    k = 0
    while k < len(docs):
        if document_position(docs, k) in long:
            text, text_b = docs[k]
            with warnings.catch_warnings():  # a cut text is the corpus settings' doing, as for every document
                warnings.simplefilter("ignore")
                result = model.run(text, text_b, max_length=max_length, attention="on_demand")
            kinds = token_kinds_for(model, result.tokens, result.queries[0].device)
            counted = [counts.get(t, 0) for t in result.tokens]
            yield document_position(docs, k), list(result.tokens), long_measures(result, kinds, counted, causal)
            k += 1
            continue
        end = k
        while end < len(docs) and document_position(docs, end) not in long:
            end += 1
        part = Documents(docs[k:end])
        part.positions = [document_position(docs, i) for i in range(k, end)]
        for i, doc in enumerate(iter_attention(model, part, max_length=max_length, batch_size=batch_size, progress=False,
                                               value_norms=True)):
            counted = [counts.get(t, 0) for t in doc.tokens]
            yield part.positions[i], list(doc.tokens), full_measures(doc.attention, doc.kinds, counted, causal,
                                                                     doc.value_norms)
        k = end
