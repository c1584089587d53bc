"""The heads' confidence and roles of Voita et al. 2019 (§4 and §5): how confident each head is,
and whether it is positional (its largest weight on the token before or after), rare-word (on the
sentence's least frequent token) or syntactic (from a `syntax_heads` result), over a corpus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import AttentionModel
from ..errors import InputError
from .corpus import Documents, device_batch_size, encode_batch, in_batches, iter_attention, tokens_at
from .runner import heads_analysis
from .tables import Grid, HeadSums, SumsPartial, analysis_view

MEASURES = {
    "confidence": "Confidence: mean largest weight of a token's row",
    "previous": "Largest weight on the token before (share of tokens)",
    "next": "Largest weight on the token after (share of tokens)",
    "rare": "Largest weight on the sentence's rarest token (share of tokens)",
}
# Voita et al.'s thresholds (§5.1, §5.2): positional when the largest weight is on one neighbour in
# at least 90 % of cases; syntactic when a relation's accuracy is "at least 10 % higher" than the
# baseline at the relation's most frequent offset, read here as 10 percentage points.
POSITIONAL = 0.9
SYNTACTIC_MARGIN = 0.10
# Voita et al. give no threshold for rare-word heads (§5.3: they found one per model by its
# importance, in layer 1; on OpenSubtitles it points to the rarest token in 66 % of the cases where
# that token is outside the 500 most frequent): ours is half of the tokens.
RARE = 0.5
# The relations Voita et al. score (English, Universal Dependencies names: dobj is UD's obj).
RELATIONS = ("nsubj", "obj", "dobj", "amod", "advmod")


def rarest_tokens(queries: torch.Tensor, counts: Sequence[int], causal: bool, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Voita et al.'s rare-word target of one document: the rarest of its non-special tokens
    (`queries`) as a mask over its n positions, and which queries the "rare" share averages
    (a decoder's: those at or after the rarest token). A decoder's first token is no candidate
    (most heads rest their weight on it, an attention sink, whatever it is); a tie counts each of
    the tied tokens. None when fewer than two tokens are candidates."""
    candidates = [int(i) for i in queries if not (causal and int(i) == 0)]
    if len(candidates) <= 1:
        return None
    fewest = min(counts[i] for i in candidates)
    rarest = [i for i in candidates if counts[i] == fewest]
    rare = torch.zeros(n, dtype=torch.bool)
    rare[rarest] = True
    seeing = (queries >= min(rarest)) if causal else torch.ones_like(queries, dtype=torch.bool)
    return rare, seeing


def document_measures(attention: torch.Tensor, special: torch.Tensor, counts: Sequence[int],
                      causal: bool = False) -> tuple[dict[str, torch.Tensor], int, int]:
    """One document's measures (L × H each, means over its queries), how many queries the
    measures average and how many "rare" averages. The queries are the tokens that are not special
    ([CLS], [SEP], BOS, EOS; Voita et al. leave out EOS).
    counts: each token's count in the corpus; "rare" is the share of queries whose largest weight
    is on the rarest token (`rarest_tokens`)."""
    queries = (~special).nonzero().flatten()
    if len(queries) == 0:
        return {}, 0, 0
    rows = attention[..., queries, :]  # L × H × q × n
    largest, at = rows.max(-1)
    offsets = at - queries.to(at.device)
    measures = {
        "confidence": largest.mean(-1),
        "previous": (offsets == -1).double().mean(-1),
        "next": (offsets == 1).double().mean(-1),
    }
    target = rarest_tokens(queries, counts, causal, attention.shape[-1])
    if target is None:
        return measures, len(queries), 0
    rare, seeing = target
    hits = rare.to(at.device)[at][..., seeing.to(at.device)]
    measures["rare"] = hits.double().mean(-1)
    return measures, len(queries), int(seeing.sum())


def roles_partial(model: AttentionModel, docs: Documents, *, counts: dict[str, int], max_length: int | None,
                  batch_size: int, progress: bool) -> SumsPartial:
    sums = HeadSums()
    for doc in iter_attention(model, docs, max_length=max_length, batch_size=batch_size, desc="head roles", progress=progress):
        special = doc.kinds.cls | doc.kinds.sep
        measures, weight, rare_weight = document_measures(doc.attention, special, [counts.get(token, 0) for token in doc.tokens],
                                                          causal=model.causal)
        rare = measures.pop("rare", None)
        if weight:
            sums.add(measures, weight=weight)
        if rare_weight:
            sums.add({"rare": rare}, weight=rare_weight)
    return SumsPartial(sums, len(docs))


def corpus_tokens(model: AttentionModel, docs: Documents, max_length: int) -> Iterator[list[str]]:
    """Each document's tokens as the runs read them (the same truncation): the tokenizer alone, in
    batches of 64 documents (one at a time for a tokenizer without a pad token, as the runs do)."""
    for batch in in_batches(docs, device_batch_size(model, 64)):
        encoded = encode_batch(model, batch, max_length)
        for index in range(len(batch)):
            keep = encoded["attention_mask"][index].nonzero().flatten()
            yield tokens_at(model, encoded, index, keep)


def token_counts(model: AttentionModel, docs: Documents, max_length: int) -> dict[str, int]:
    """How often each token occurs in the corpus, as the runs read it (`corpus_tokens`)."""
    counts: Counter[str] = Counter()
    for tokens in corpus_tokens(model, docs, max_length):
        counts.update(tokens)
    return dict(counts)


def head_roles(
    model: AttentionModel,
    corpus: Any,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
    counts: Mapping[str, int] | None = None,
):
    """Voita et al. 2019's measures of every head over a corpus, averaged over its tokens (each
    token a query; [CLS], [SEP], BOS and EOS left out, as Voita et al. leave out EOS):

    - confidence: the mean of each row's largest weight;
    - previous, next: how often the largest weight is on the token before, or after;
    - rare: how often it is on the sentence's least frequent token, its frequency counted over the
      corpus as the model reads it (ties: any of the tied tokens). On a small corpus most words
      occur once and tie: give `counts` (token → count, as the tokenizer writes tokens) from a
      larger one, as Voita et al. counted over their training data.

    Returns a tidy DataFrame (layer, head, label, measure, value); `roles(frame)` names each head's
    roles. backend: "local" or "ray", as in `head_stats`.
    """
    def counted(model: AttentionModel, docs: Documents, max_length: int) -> dict:
        if counts is None:
            return {"counts": token_counts(model, docs, max_length)}
        if not isinstance(counts, Mapping) or not all(isinstance(v, int) and not isinstance(v, bool) for v in counts.values()):
            raise InputError(f"counts maps each token to how often it occurs (a dict of str → int), not {checks.kind_of(counts)}.")
        return {"counts": dict(counts)}

    return heads_analysis("head_roles", roles_partial, model, corpus, column=column, max_length=max_length,
                          batch_size=batch_size, progress=progress, backend=backend, prepare=counted)


def roles(frame, syntax: Any = None, *, positional: float = POSITIONAL, rare: float = RARE,
          margin: float = SYNTACTIC_MARGIN, relations: Sequence[str] = RELATIONS):
    """Each head's roles from a `head_roles` frame: "positional" (previous or next at least
    `positional`), "rare words" (rare at least `rare`) and, given a `syntax_heads` result,
    "syntactic: <relation>" for each of `relations` whose accuracy (either direction) beats that
    relation's best fixed-offset baseline by at least `margin`. → DataFrame: layer, head, label,
    confidence, roles (a list, empty for none), role (the first, or "none")."""
    import pandas as pd

    needed = {"layer", "head", "label", "measure", "value"}
    if not (isinstance(frame, pd.DataFrame) and needed <= set(frame.columns) and frame.attrs.get("attnscope") == "head_roles"):
        raise InputError(f"roles names heads from what head_roles returns, not {checks.kind_of(frame)}.")
    positional, rare = checks.fraction("positional", positional), checks.fraction("rare", rare)
    margin = checks.fraction("margin", margin)
    wide = frame.pivot_table(index=["layer", "head", "label"], columns="measure", values="value").reset_index()
    wide.columns.name = None
    syntactic = _syntactic(syntax, margin, relations) if syntax is not None else {}
    named = []
    for row in wide.to_dict("records"):
        found = []
        if max(row.get("previous", 0), row.get("next", 0)) >= positional:
            found.append("positional")
        if row.get("rare", 0) >= rare:
            found.append("rare words")
        found += [f"syntactic: {relation}" for relation in syntactic.get((row["layer"], row["head"]), [])]
        named.append(found)
    wide["roles"] = named
    wide["role"] = [found[0] if found else "none" for found in named]
    result = pd.DataFrame(wide[["layer", "head", "label", "confidence", "roles", "role"]])
    result.attrs.update({"attnscope": "roles", "model": frame.attrs.get("model", ""), "documents": frame.attrs.get("documents"),
                         **({"shape": frame.attrs["shape"]} if "shape" in frame.attrs else {}),
                         "syntax": syntax is not None, "positional": positional, "rare": rare})
    return result


def _syntactic(syntax: Any, margin: float, relations: Sequence[str]) -> dict[tuple[int, int], list[str]]:
    if getattr(syntax, "analysis_kind", None) != "syntax_heads":
        raise InputError(f"roles reads syntactic heads from what syntax_heads returns, not {checks.kind_of(syntax)}.")
    found: dict[tuple[int, int], list[str]] = {}
    for relation in relations:
        accuracy = syntax.accuracy[syntax.accuracy.relation == relation]
        if accuracy.empty:
            continue
        baseline = float(syntax.baseline[syntax.baseline.relation == relation]["accuracy"].max())
        best = accuracy.groupby(["layer", "head"])["accuracy"].max()
        for (layer, head), value in best.items():
            if value >= baseline + margin:
                found.setdefault((int(layer), int(head)), []).append(relation)
    return found


@analysis_view("head_roles")
def head_roles_view(data: Any, grid: Grid) -> dict:
    measures = [{"key": key, "label": label, "values": grid(data[data.measure == key], "value")}
                for key, label in MEASURES.items() if key in set(data.measure)]
    return {"measures": measures, "note": f"Voita et al. 2019, over {data.attrs.get('documents', '?')} documents."}


@analysis_view("roles")
def roles_view(data: Any, grid: Grid) -> dict:
    """The role map: each head coloured by its (first) role; its confidence beside."""
    categories = ["none", "positional", "rare words", *sorted({role for role in data.role if role.startswith("syntactic")})]
    index = data.assign(category=[float(categories.index(role)) if role in categories else float("nan") for role in data.role])
    syntax = "" if data.attrs.get("syntax") else " Syntactic roles need a syntax_heads result: roles(frame, syntax)."
    return {"measures": [{"key": "role", "label": "Role (Voita et al. 2019)", "values": grid(index, "category"), "categories": categories},
                         {"key": "confidence", "label": MEASURES["confidence"], "values": grid(data, "confidence")}],
            "note": f"Voita et al. 2019's roles, over {data.attrs.get('documents', '?')} documents: positional (the largest "
                    f"weight on one neighbour in ≥ {data.attrs.get('positional', POSITIONAL):.0%} of tokens), rare words (on the "
                    f"rarest token in ≥ {data.attrs.get('rare', RARE):.0%}; "
                    f"our threshold).{syntax}"}
