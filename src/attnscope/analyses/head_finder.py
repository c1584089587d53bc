"""The head finder (issue 35): every head of a model measured on a corpus in one pass, with the texts
where it fires.

For every head: Clark et al.'s statistics (attention to [CLS], [SEP] and punctuation, to the
previous token, itself and the next, entropy), the first-token sink (Gu et al.'s α_first, and the
share of documents where it passes ε, the sink rate), Voita et al.'s confidence and previous,
next and rare-word shares, Kovaleva et al.'s five patterns, and for a decoder Olsson et al.'s
induction score (repeated random tokens: from the second copy, the attention on the token after the
current token's first occurrence). And its top examples: the documents and query positions where
its largest weight on an ordinary token (not [CLS], [SEP] or a decoder's first token) is highest,
each kept sparse (its strongest keys), merged across batches and Ray workers.
"""

from __future__ import annotations

import ast
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import checks
from ..engine import formulas as an
from ..engine.attention_model import AttentionModel, model_of
from ..errors import InputError
from ..labels import head_label
from .corpus import Documents, corpus_settings, document_position, documents, iter_attention
from .head_roles import document_measures, token_counts
from .importance import head_importance
from .patterns import PATTERNS, classify, pattern_shares, segments_of
from .runner import run_partial
from .syntax import syntax_heads
from .tables import Grid, HeadSums, analysis_view

SINK_EPSILON = 0.3  # Gu et al. 2024's ε
TOP_EXAMPLES = 8  # per head
TOP_KEYS = 8  # per example, each above KEY_FLOOR (Neuronpedia's HeadVis keeps the top 8 above 0.005)
KEY_FLOOR = 0.005
INDUCTION_LENGTH = 50  # random tokens, repeated once
INDUCTION_SEQUENCES = 4
# The metrics as the finder names them (columns of `metrics`), from each source's own names.
STATS = {"cls": "cls", "sep": "sep", "punct": "punct", "prev": "prev_token", "current": "self", "next": "next_token",
         "entropy": "entropy"}
ROLES = {"confidence": "confidence", "rare": "rare"}
FILTER_CHARACTERS = 2000  # the longest filter taken (find, and the widget's finder_choice)
# Kovaleva et al.'s patterns as names a filter can say ("vertical_diagonal > 0.5").
PATTERN_NAMES = {name: name.replace(" + ", "_") for name in PATTERNS}


@dataclass(order=True)
class Example:
    """One query of one document where a head fires: `score` is its largest weight on an ordinary
    token; `keys` its strongest keys (position, weight)."""

    sort_key: tuple = field(repr=False)  # (score, −doc, −query): the heap keeps the highest, ties to the first
    score: float = field(compare=False)
    doc: int = field(compare=False)
    query: int = field(compare=False)
    keys: list = field(compare=False)


@dataclass
class FinderPartial:
    sums: HeadSums
    examples: dict  # (layer, head) → heap of Example
    tokens: dict  # doc → its tokens (those some example needs)
    texts: dict  # doc → (text, text_b), for opening it in the widget
    documents: int

    def merge(self, other: FinderPartial) -> FinderPartial:
        examples = {key: _top(self.examples.get(key, []) + other.examples.get(key, []))
                    for key in {**self.examples, **other.examples}}
        needed = {e.doc for heap in examples.values() for e in heap}
        tokens = {d: t for d, t in {**self.tokens, **other.tokens}.items() if d in needed}
        texts = {d: t for d, t in {**self.texts, **other.texts}.items() if d in needed}
        return FinderPartial(self.sums.merge(other.sums), examples, tokens, texts, self.documents + other.documents)


def _top(examples: list[Example], k: int = TOP_EXAMPLES) -> list[Example]:
    return heapq.nlargest(k, examples)


def document_examples(attention: torch.Tensor, ordinary: torch.Tensor, doc: int, floors: torch.Tensor | None = None,
                      k: int = TOP_EXAMPLES) -> dict:
    """Each head's best queries of one document: (layer, head) → its top k Examples, only those
    above the head's `floors` (L × H: the k-th score kept so far, −inf while fewer are kept). A
    query scoring no more than that would not be kept: documents come in corpus order, and of two
    equal scores the earlier document's is kept."""
    masked = attention.masked_fill(~ordinary.to(attention.device), float("-inf"))  # keys that are ordinary tokens
    best, _ = masked.max(-1)  # L × H × n: each query's largest weight on an ordinary token
    top_scores, top_queries = best.topk(min(k, best.shape[-1]), dim=-1)
    floor = torch.full(best.shape[:2], float("-inf")) if floors is None else floors
    kept = (top_scores > floor.to(top_scores.device)[..., None]).nonzero()  # candidates: layer, head, rank
    out: dict[tuple[int, int], list[Example]] = {}
    if len(kept) == 0:
        return out
    layers, heads, ranks = kept.unbind(-1)
    queries = top_queries[layers, heads, ranks]
    keys_w, keys_at = attention[layers, heads, queries].topk(min(TOP_KEYS, attention.shape[-1]), dim=-1)
    rows = zip(layers.tolist(), heads.tolist(), queries.tolist(), top_scores[layers, heads, ranks].tolist(),
               keys_at.tolist(), keys_w.tolist())
    for layer, head, query, score, at, weights in rows:
        keys = [(p, round(w, 6)) for p, w in zip(at, weights) if w > KEY_FLOOR]
        out.setdefault((layer, head), []).append(Example((score, -doc, -query), score, doc, query, keys))
    return out


def finder_partial(model: AttentionModel, docs: Documents, *, counts: dict[str, int], max_length: int | None,
                   batch_size: int | str, progress: bool) -> FinderPartial:
    sums = HeadSums()
    examples: dict[tuple[int, int], list[Example]] = {}
    tokens: dict[int, list[str]] = {}
    texts: dict[int, tuple[str, str | None]] = {}
    causal = bool(getattr(model, "causal", False))
    floors = None  # each head's k-th example score so far (document_examples)
    for k, doc in enumerate(iter_attention(model, docs, max_length=max_length, batch_size=batch_size, desc="head finder",
                                           progress=progress)):
        attention, kinds = doc.attention, doc.kinds
        stats = an.head_statistics(attention, kinds)
        sums.add({name: stats[source] for source, name in STATS.items()})
        first = attention[..., :1]
        sink = an.sink_measures(first, 1, SINK_EPSILON)
        sums.add({"alpha_first": sink["alpha_first"], "sink_rate": sink["sink"]})
        special = kinds.cls | kinds.sep
        roles, weight, rare_weight = document_measures(attention, special, [counts.get(t, 0) for t in doc.tokens], causal)
        if weight:
            sums.add({name: roles[source] for source, name in ROLES.items() if source != "rare"}, weight=weight)
        if rare_weight:
            sums.add({"rare": roles["rare"]}, weight=rare_weight)
        classes = classify(pattern_shares(attention, segments_of(kinds.sep)))
        sums.add({PATTERN_NAMES[name]: (classes == i).double() for i, name in enumerate(PATTERNS)})
        ordinary = ~special
        if causal:
            ordinary = ordinary.clone()
            ordinary[0] = False
        position = document_position(docs, k)
        if floors is None:
            floors = torch.full(attention.shape[:2], float("-inf"))
        for key, heap in document_examples(attention, ordinary, position, floors).items():
            examples[key] = _top(examples.get(key, []) + heap)
            if len(examples[key]) == TOP_EXAMPLES:
                floors[key] = examples[key][-1].score
        tokens[position] = list(doc.tokens)
        texts[position] = tuple(docs[k])
    needed = {e.doc for heap in examples.values() for e in heap}
    return FinderPartial(sums, examples, {d: t for d, t in tokens.items() if d in needed},
                         {d: t for d, t in texts.items() if d in needed}, len(docs))


def induction_scores(model: AttentionModel, length: int = INDUCTION_LENGTH, sequences: int = INDUCTION_SEQUENCES,
                     seed: int = 0) -> torch.Tensor:
    """Olsson et al. 2022's induction score of every head (L × H): random token sequences of
    `length`, each repeated once; from each token of the second copy, the mean attention on the
    token that followed its first occurrence."""
    generator = torch.Generator().manual_seed(seed)
    vocabulary = len(model.tokenizer)
    special = set(getattr(model.tokenizer, "all_special_ids", ()))
    ordinary = torch.tensor([i for i in range(min(vocabulary, 50_000)) if i not in special])
    total = None
    for _ in range(sequences):
        first = ordinary[torch.randint(len(ordinary), (length,), generator=generator)]
        ids = torch.cat([first, first])[None]
        outputs = model.forward({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
        attention = torch.stack([a[0] for a in outputs.attentions]).float()  # L × H × 2n × 2n
        queries = torch.arange(length, 2 * length - 1)
        targets = queries - length + 1  # the token after the first occurrence of the query's token
        score = attention[..., queries, targets].mean(-1).double().cpu()
        total = score if total is None else total + score
    return total / sequences


def _safe_filter(expression: str, columns: Sequence[str]):
    """A filter as users write it ("layer >= 6 and sink_rate > 0.5"): comparisons of metric names and
    numbers, joined by and / or / not and parentheses (nothing: every head). → a function of a row
    (dict). Anything else (calls, attributes, names that are no metric) is refused by name."""
    if not expression.strip():
        return lambda row: True
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise InputError(f"The filter {expression!r} does not read as a condition: {error.msg}.") from None
    compare = {ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b, ast.Lt: lambda a, b: a < b,
               ast.LtE: lambda a, b: a <= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}

    def build(node):
        if isinstance(node, ast.BoolOp):
            parts = [build(v) for v in node.values]
            if isinstance(node.op, ast.And):
                return lambda row: all(p(row) for p in parts)
            return lambda row: any(p(row) for p in parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = build(node.operand)
            return lambda row: not inner(row)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            value = -node.operand.value
            return lambda row: value
        if isinstance(node, ast.Compare):
            ops = []
            for op in node.ops:
                if type(op) not in compare:
                    raise InputError(f"The filter {expression!r} uses {type(op).__name__}: use <, <=, >, >=, == or !=.")
                ops.append(compare[type(op)])
            items = [build(node.left)] + [build(c) for c in node.comparators]
            return lambda row: all(op(items[i](row), items[i + 1](row)) for i, op in enumerate(ops))
        if isinstance(node, ast.Name):
            if node.id not in columns:
                raise InputError(f"The filter names {node.id!r}, which is no metric: use {', '.join(columns)}.")
            return lambda row: row[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return lambda row: node.value
        raise InputError(f"The filter {expression!r} may only compare metrics with numbers (and, or, not, parentheses).")

    return build(tree.body)


@dataclass
class HeadFinder:
    """Every head's metrics (`metrics`: one row per head: layer, head, label and a column per
    metric), its top examples (`examples(layer, head)`), and a filter (`find("layer >= 3 and
    sink_rate > 0.5")`)."""

    analysis_kind = "head_finder"

    metrics: Any
    top: dict  # (layer, head) → [Example], best first
    tokens: dict  # doc → tokens
    texts: dict  # doc → (text, text_b)
    documents: int
    model_name: str

    @property
    def metric_names(self) -> list[str]:
        return [c for c in self.metrics.columns if c not in ("layer", "head", "label")]

    def find(self, expression: str):
        """The heads a filter keeps, as rows of `metrics` ("layer >= 6 and sink_rate > 0.5")."""
        if not isinstance(expression, str) or len(expression) > FILTER_CHARACTERS:
            raise InputError(f"A filter is a condition as text, e.g. \"layer >= 6 and sink_rate > 0.5\", not "
                             f"{checks.kind_of(expression)}.")
        keep = _safe_filter(expression, ["layer", "head", *self.metric_names])
        rows = self.metrics.to_dict("records")
        return self.metrics[[bool(keep(row)) for row in rows]]

    def examples(self, layer: int, head: int):
        """The head's top examples: document, query position and token, score, the strongest keys
        as (token, weight), and the document's text with the query [[marked]] and its strongest key
        <<marked>>."""
        import pandas as pd

        layer = checks.integer("layer", layer, minimum=0, maximum=int(self.metrics.layer.max()))
        head = checks.integer("head", head, minimum=0, maximum=int(self.metrics["head"].max()))
        rows = []
        for e in self.top.get((layer, head), []):
            tokens = self.tokens[e.doc]
            strongest = e.keys[0][0] if e.keys else None
            marked = [f"[[{t}]]" if i == e.query else f"<<{t}>>" if i == strongest else t for i, t in enumerate(tokens)]
            rows.append({"doc": e.doc, "query": e.query, "query_token": tokens[e.query], "score": e.score,
                         "keys": [(tokens[p], w) for p, w in e.keys], "text": " ".join(marked)})
        return pd.DataFrame(rows, columns=["doc", "query", "query_token", "score", "keys", "text"])

    def tidy(self):
        """The metrics as the other analyses give them: layer, head, label, measure, value."""
        frame = self.metrics.melt(id_vars=["layer", "head", "label"], var_name="measure", value_name="value")
        frame.attrs.update({"attnscope": "head_finder", "model": self.model_name, "documents": self.documents})
        return frame

    def kept_bytes(self) -> int:
        """What the examples keep, roughly: per example its numbers and keys, and the tokens of
        the documents they point at."""
        examples = sum(len(heap) * (24 + 12 * TOP_KEYS) for heap in self.top.values())
        return examples + sum(sum(len(t) + 8 for t in tokens) for tokens in self.tokens.values())

    def _repr_html_(self) -> str:
        return (f"<p><b>Head finder</b>: {len(self.metrics)} heads of {self.model_name} over {self.documents} documents; "
                f"find(...) filters, examples(layer, head) shows where a head fires.</p>" + self.metrics.head(12).to_html(index=False))


def head_finder(
    model: AttentionModel,
    corpus: Any,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    induction: bool | None = None,
    importance: bool = False,
    syntax: Any = None,
    progress: bool = True,
    backend: str = "local",
) -> HeadFinder:
    """Every head of `model` measured on `corpus` in one pass over it, with its top examples
    (module docstring). induction: Olsson et al.'s induction score (default: for decoders, whose
    causal attention makes it mean what it says). The metrics that need more than the attention
    come from their own analyses, each a pass of its own: importance=True adds Michel et al.'s
    importance (`head_importance`: gradients, about three forwards); syntax= (a CoNLL-U file, parsed
    sentences or texts, as `syntax_heads` takes) adds each head's syntax accuracy over every
    relation ("syntax", its better direction). backend: "local" or "ray", as in `head_stats`."""
    import pandas as pd

    model = model_of(model, "head_finder")
    docs = documents(corpus, column)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, backend=backend)
    counts = token_counts(model, docs, max_length)
    partial = run_partial(finder_partial, model, docs, progress=progress, backend=backend, counts=counts,
                          max_length=max_length, batch_size=batch_size)
    values = partial.sums.result()
    if induction is None:
        induction = bool(getattr(model, "causal", False))
    if induction:
        values["induction"] = induction_scores(model)
    if importance:
        frame = head_importance(model, corpus, column=column, max_length=max_length, batch_size=batch_size,
                                progress=progress, backend=backend)
        values["importance"] = _grid(frame[frame.measure == "importance"], "value", values["cls"].shape)
    if syntax is not None:
        heads = syntax_heads(model, syntax, progress=progress, backend=backend).accuracy
        best = heads[heads.relation == "All"].groupby(["layer", "head"], as_index=False)["accuracy"].max()
        values["syntax"] = _grid(best, "accuracy", values["cls"].shape)
    order = ["cls", "sep", "punct", "prev_token", "self", "next_token", "entropy", "alpha_first", "sink_rate",
             "confidence", "rare", *PATTERN_NAMES.values(), "induction", "importance", "syntax"]
    n_layers, n_heads = values["cls"].shape
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            row = {"layer": layer, "head": head, "label": head_label(layer, head)}
            row.update({name: float(values[name][layer, head]) for name in order if name in values})
            rows.append(row)
    metrics = pd.DataFrame(rows)
    top = {key: sorted(heap, reverse=True) for key, heap in partial.examples.items()}
    return HeadFinder(metrics, top, partial.tokens, partial.texts, len(docs), model.name)


def _grid(rows, column: str, shape) -> torch.Tensor:
    """A tidy frame's per-head column as a layers × heads tensor."""
    grid = torch.full(tuple(shape), float("nan"), dtype=torch.float64)
    for layer, head, value in zip(rows["layer"], rows["head"], rows[column]):
        grid[int(layer), int(head)] = float(value)
    return grid


@analysis_view("head_finder")
def head_finder_view(data: HeadFinder, grid: Grid) -> dict:
    """Every metric as a measure (the finder's scatter, its picture and its table read them, as the
    widget's finder_choice picks them), and each head's top examples with the documents they point at."""
    tidy = data.tidy()
    measures = [{"key": name, "label": name, "values": grid(tidy[tidy.measure == name], "value")}
                for name in data.metric_names]
    examples = {f"{layer}-{head}": [[e.doc, e.query, e.score, [[p, w] for p, w in e.keys]] for e in heap]
                for (layer, head), heap in data.top.items() if heap}
    docs = {str(d): {"tokens": data.tokens[d], "text": data.texts[d][0], "text_b": data.texts[d][1]} for d in data.tokens}
    return {"measures": measures, "finder": {"examples": examples, "docs": docs},
            "note": f"Every head of {data.model_name} over {data.documents} documents (attnscope.head_finder)."}
