"""The head finder (issue 35): every head of a model measured on a corpus in one pass, with the texts
where it fires.

For every head: Clark et al.'s statistics (attention to [CLS], [SEP] and punctuation, to the
previous token, itself and the next, entropy), the first-token sink (Gu et al.'s α_first, and the
share of documents where it passes ε, the sink rate), Voita et al.'s confidence and previous,
next and rare-word shares, Kovaleva et al.'s five patterns, and for a decoder Olsson et al.'s
induction score (repeated random tokens: from the second copy, the attention on the token after the
current token's first occurrence). And Kobayashi et al. 2020's view of what a head passes ("Attention
is Not Only a Weight": key j's contribution to query i is α_hij f_h(x_j), f_h(x_j) = (x_j W_V^h +
b_V^h) W_O^h, engine/value_norms.py), from the norms the same forward records:

- value_norm: the mean over a document's tokens of ‖f_h(x_j)‖, the size of what the head passes
  from a token (in the model's units: compare heads, not models), a mean over documents;
- alpha_first_weighed: alpha_first measured on the norm-based weights ‖α_hij f_h(x_j)‖ = α_hij
  ‖f_h(x_j)‖ instead of α: per query the first token's ([CLS]'s) share of the row's weighed total,
  α_hi0 ‖f_h(x_0)‖ / Σ_j α_hij ‖f_h(x_j)‖, its mean over the queries, then over documents;
- sink_rate_weighed: the share of documents whose alpha_first_weighed passes Gu et al.'s ε = 0.3,
  as sink_rate is of alpha_first;
- first_weighed_ratio: alpha_first_weighed ÷ alpha_first (of the corpus means): below 1 where the
  weight overstates what the first token passes (a sink that is seen but passes little), above 1
  where it understates it.

A model whose runs keep no norm per key (gated attention: the gate makes what a key passes depend
on the query; no output projection found) gets NaN in these columns, and `metrics.attrs
["value_norms"]` says why. And its top examples: the documents and query positions where
its largest weight on an ordinary token (not [CLS], [SEP] or a decoder's first token) is highest
(a decoder's from position FIRST_CAUSAL_QUERY on: its first queries have few tokens to choose from),
each kept sparse (its strongest keys), merged across batches and Ray workers. A long document is
kept on demand (queries, keys, row log-sum-exps) and measured a block of rows at a time.

What one document measures is finder_measures.py's; the filter's grammar is finder_filter.py's.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import checks
from ..engine import value_norms
from ..engine.attention_model import AttentionModel
from ..engine.results import fallback_labels
from ..errors import InputError
from ..labels import head_label
from ..progress import progress as progress_bar
from .corpus import Documents, document_position
from .example_text import example_spans, example_text, running_pieces
from .finder_choice import FILTER_CHARACTERS, finder_choice
from .finder_filter import safe_filter
from .finder_measures import measured_documents
from .head_roles import corpus_tokens
from .importance import head_importance
from .patterns import PATTERNS
from .runner import run_corpus
from .syntax import syntax_heads
from .tables import Grid, HeadSums, analysis_view

TOP_EXAMPLES = 8  # per head
TOP_KEYS = 8  # per example, each above KEY_FLOOR (Neuronpedia's HeadVis keeps the top 8 above 0.005)
KEY_FLOOR = 0.005
INDUCTION_LENGTH = 50  # random tokens, repeated once
INDUCTION_SEQUENCES = 4
# Said wherever the column shows: the score is not measured on the corpus.
INDUCTION_NOTE = (f"induction: Olsson et al.'s score on {INDUCTION_SEQUENCES} sequences of {INDUCTION_LENGTH} random "
                  "tokens, each repeated once, not on the corpus")
# Kobayashi et al.'s norm metrics (module docstring), in the order of the columns.
NORM_METRICS = ("value_norm", "alpha_first_weighed", "sink_rate_weighed", "first_weighed_ratio")
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


def document_examples(best: torch.Tensor, row_of, doc: int, floors: torch.Tensor | None = None,
                      k: int = TOP_EXAMPLES) -> dict:
    """Each head's best queries of one document: (layer, head) → its top k Examples, only those
    above the head's `floors` (L × H: the k-th score kept so far, −inf while fewer are kept). A
    query scoring no more than that would not be kept: documents come in corpus order, and of two
    equal scores the earlier document's is kept.
    best: L × H × n, each query's largest weight on an ordinary token; row_of(layers, heads,
    queries): those rows of the document's attention (m × n), for the strongest keys."""
    top_scores, top_queries = best.topk(min(k, best.shape[-1]), dim=-1)
    floor = torch.full(best.shape[:2], float("-inf")) if floors is None else floors
    kept = (top_scores > floor.to(top_scores.device)[..., None]).nonzero()  # candidates: layer, head, rank
    out: dict[tuple[int, int], list[Example]] = {}
    if len(kept) == 0:
        return out
    layers, heads, ranks = kept.unbind(-1)
    queries = top_queries[layers, heads, ranks]
    rows = row_of(layers, heads, queries)
    keys_w, keys_at = rows.topk(min(TOP_KEYS, rows.shape[-1]), dim=-1)
    found = zip(layers.tolist(), heads.tolist(), queries.tolist(), top_scores[layers, heads, ranks].tolist(),
                keys_at.tolist(), keys_w.tolist())
    for layer, head, query, score, at, weights in found:
        keys = [(p, round(w, 6)) for p, w in zip(at, weights) if w > KEY_FLOOR]
        out.setdefault((layer, head), []).append(Example((score, -doc, -query), score, doc, query, keys))
    return out




def finder_partial(model: AttentionModel, docs: Documents, *, counts: dict[str, int], long: frozenset = frozenset(),
                   max_length: int | None, batch_size: int | str, progress: bool) -> FinderPartial:
    sums = HeadSums()
    examples: dict[tuple[int, int], list[Example]] = {}
    tokens: dict[int, list[str]] = {}
    texts: dict[int, tuple[str, str | None]] = {}
    floors = None  # each head's k-th example score so far (document_examples)
    text_of = {document_position(docs, k): tuple(doc) for k, doc in enumerate(docs)}
    measured = measured_documents(model, docs, long, counts, max_length, batch_size)
    for position, doc_tokens, m in progress_bar(measured, len(docs), "head finder", progress, unit="document"):
        sums.add(m.values)
        if m.weight:
            sums.add({"confidence": m.roles["confidence"]}, weight=m.weight)
        if m.rare_weight:
            sums.add({"rare": m.roles["rare"]}, weight=m.rare_weight)
        sums.add({PATTERN_NAMES[name]: (m.classes == i).double() for i, name in enumerate(PATTERNS)})
        if floors is None:
            floors = torch.full(m.best.shape[:2], float("-inf"))
        for key, heap in document_examples(m.best, m.row_of, position, floors).items():
            examples[key] = _top(examples.get(key, []) + heap)
            if len(examples[key]) == TOP_EXAMPLES:
                floors[key] = examples[key][-1].score
        tokens[position] = doc_tokens
        texts[position] = text_of[position]
    needed = {e.doc for heap in examples.values() for e in heap}
    return FinderPartial(sums, examples, {d: _shown_tokens(t) for d, t in tokens.items() if d in needed},
                         {d: t for d, t in texts.items() if d in needed}, len(docs))


def _shown_tokens(tokens: list[str]) -> list[str]:
    """A document's tokens as its examples show them: byte-level pieces decoded ("Ġkeeper" reads
    "keeper", as the head view shows it), the spaces around a label dropped (the words are set
    apart anyway), a piece of only spaces kept as the label says it."""
    return [label.strip() or label for label in fallback_labels(tokens).labels]


def induction_scores(model: AttentionModel, length: int = INDUCTION_LENGTH, sequences: int = INDUCTION_SEQUENCES,
                     seed: int = 0, progress: bool = False) -> torch.Tensor:
    """Olsson et al. 2022's induction score of every head (L × H): random token sequences of
    `length`, each repeated once; from each token of the second copy, the mean attention on the
    token that followed its first occurrence."""
    generator = torch.Generator().manual_seed(seed)
    vocabulary = len(model.tokenizer)
    special = set(getattr(model.tokenizer, "all_special_ids", ()))
    ordinary = torch.tensor([i for i in range(min(vocabulary, 50_000)) if i not in special])
    total = None
    for _ in progress_bar(range(sequences), sequences, "induction (repeated random tokens)", progress, unit="sequence"):
        first = ordinary[torch.randint(len(ordinary), (length,), generator=generator)]
        ids = torch.cat([first, first])[None]
        outputs = model.forward({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
        attention = torch.stack([a[0] for a in outputs.attentions]).float()  # L × H × 2n × 2n
        queries = torch.arange(length, 2 * length - 1)
        targets = queries - length + 1  # the token after the first occurrence of the query's token
        score = attention[..., queries, targets].mean(-1).double().cpu()
        total = score if total is None else total + score
    return total / sequences




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
    running: dict = field(default_factory=dict)  # doc → per token, what it adds to the text as it reads (running_pieces)

    @property
    def model_shape(self) -> list[int]:
        """[layers, heads] of the model measured (its metrics hold every head)."""
        return [int(self.metrics["layer"].max()) + 1, int(self.metrics["head"].max()) + 1]

    @property
    def metric_names(self) -> list[str]:
        return [c for c in self.metrics.columns if c not in ("layer", "head", "label")]

    def find(self, expression: str):
        """The heads a filter keeps, as rows of `metrics` ("layer >= 6 and sink_rate > 0.5")."""
        if not isinstance(expression, str):
            raise InputError(f"expression must be a filter, a condition as text, e.g. \"layer >= 6 and sink_rate > 0.5\", not "
                             f"{checks.kind_of(expression)}.")
        if len(expression) > FILTER_CHARACTERS:
            raise InputError(f"expression must be at most {FILTER_CHARACTERS:,} characters of text, e.g. \"layer >= 6 and "
                             f"sink_rate > 0.5\"; this one has {len(expression):,}.")
        try:
            keep = safe_filter(expression, ["layer", "head", *self.metric_names])
        except InputError as exc:  # what is wrong in it, said of the parameter
            raise InputError(f"expression={checks.short_repr(expression)}: {exc}") from None
        rows = self.metrics.to_dict("records")
        return self.metrics[[bool(keep(row)) for row in rows]]

    def examples(self, layer: int, head: int):
        """The head's top examples: document, query position and token, score, the strongest keys
        as (token, weight), and the example's text (`example_spans`: the query in its context, and
        its strongest key's) as the document reads, with the query [[marked]] and its strongest key
        <<marked>>; shown whole (pandas would cut it at 50 characters, before the marks)."""
        from .examples_frame import ExamplesFrame

        layer = checks.integer("layer", layer, minimum=0, maximum=int(self.metrics.layer.max()))
        head = checks.integer("head", head, minimum=0, maximum=int(self.metrics["head"].max()))

        rows = []
        for e in self.top.get((layer, head), []):
            tokens = self.tokens[e.doc]
            text = example_text(tokens, self.running.get(e.doc), e.query, e.keys[0][0] if e.keys else None)
            rows.append({"doc": e.doc, "query": e.query, "query_token": tokens[e.query], "score": e.score,
                         "keys": [(tokens[p], w) for p, w in e.keys], "text": text})
        return ExamplesFrame(rows, columns=["doc", "query", "query_token", "score", "keys", "text"])

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
                f"find(...) filters, examples(layer, head) shows where a head fires.{self._notes(' ')}</p>"
                + self.metrics.head(12).to_html(index=False))

    def _notes(self, before: str = "") -> str:
        """What a column measures that is not the corpus (the induction score), and why the norm
        metrics are NaN where they are, as sentences."""
        notes = [self.metrics.attrs.get(key) or "" for key in ("induction", "value_norms")]
        return "".join(f"{before}{note[0].upper()}{note[1:]}." for note in notes if note)


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
    (module docstring). Among the metrics, Kobayashi et al. 2020's, from the value norms ‖f_h(x_j)‖
    the same forward records: value_norm (the mean ‖f_h(x_j)‖ over a document's tokens: what the
    head passes), alpha_first_weighed (alpha_first on the norm-based weights α_hij ‖f_h(x_j)‖: the
    first token's share of each query's weighed total), sink_rate_weighed (the share of documents
    where that passes ε = 0.3) and first_weighed_ratio (alpha_first_weighed ÷ alpha_first: below 1
    where the weight overstates what the first token passes); NaN, with the reason in
    `metrics.attrs["value_norms"]`, for a model whose runs keep no norm per key (gated attention).
    induction: Olsson et al.'s induction score (default: for decoders, whose
    causal attention makes it mean what it says), measured on repeated random tokens, not on the
    corpus (`metrics.attrs["induction"]` says so). The metrics that need more than the attention
    come from their own analyses, each a pass of its own: importance=True adds Michel et al.'s
    importance (`head_importance`: gradients, about three forwards); syntax= (a CoNLL-U file, parsed
    sentences or texts, as `syntax_heads` takes) adds each head's syntax accuracy over every
    relation ("syntax", its better direction). backend: "local" or "ray", as in `head_stats`.
    max_length: Clark et al.'s 128 tokens unless given; a longer document (max_length=32768 on a
    long-context model) that a run keeps on demand (as the widget does, past FULL_ATTENTION_LIMIT
    bytes of full attention) is measured a block of rows at a time, never layers × heads × T × T."""
    import pandas as pd

    # The switches first, before the corpus runs (importance="no" is true, and an array's truth raises).
    induction = None if induction is None else checks.flag("induction", induction)
    importance = checks.flag("importance", importance)
    run = run_corpus("head_finder", finder_partial, model, corpus, column=column, max_length=max_length,
                     batch_size=batch_size, progress=progress, backend=backend,
                     prepare=lambda model, docs, max_length: dict(zip(("counts", "long"), _corpus_tokens(model, docs, max_length))))
    model, partial, max_length, batch_size = run.model, run.partial, run.max_length, run.batch_size
    values = partial.sums.result()
    if induction is None:
        induction = bool(getattr(model, "causal", False))
    if induction:
        values["induction"] = induction_scores(model, progress=progress)
    if importance:
        frame = head_importance(model, corpus, column=column, max_length=max_length, batch_size=batch_size,
                                progress=progress, backend=backend)
        values["importance"] = _grid(frame[frame.measure == "importance"], "value", values["cls"].shape)
    if syntax is not None:
        try:
            heads = syntax_heads(model, syntax, progress=progress, backend=backend).accuracy
        except InputError as error:  # said of syntax=, which the user gave, not of a corpus they did not
            raise InputError(f"syntax= (the parsed sentences for the syntax metric): {error}") from None
        best = heads[heads.relation == "All"].groupby(["layer", "head"], as_index=False)["accuracy"].max()
        values["syntax"] = _grid(best, "accuracy", values["cls"].shape)
    no_norms = _norm_metrics(values, partial.sums.count, partial.documents, model)
    order = ["cls", "sep", "punct", "prev_token", "self", "next_token", "entropy", "alpha_first", "sink_rate",
             *NORM_METRICS, "confidence", "rare", *PATTERN_NAMES.values(), "induction", "importance", "syntax"]
    n_layers, n_heads = values["cls"].shape
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            row = {"layer": layer, "head": head, "label": head_label(layer, head)}
            row.update({name: float(values[name][layer, head]) for name in order if name in values})
            rows.append(row)
    metrics = pd.DataFrame(rows)
    top = {key: sorted(heap, reverse=True) for key, heap in partial.examples.items()}
    running = {d: running_pieces(model.token_labels(*partial.texts[d], max_length=max_length), len(tokens))
               for d, tokens in partial.tokens.items()}
    metrics.attrs["induction"] = INDUCTION_NOTE if induction else ""
    metrics.attrs["value_norms"] = no_norms
    return HeadFinder(metrics, top, partial.tokens, partial.texts, run.documents, model.name,
                      {d: pieces for d, pieces in running.items() if pieces is not None})


def _norm_metrics(values: dict, counts: dict, documents: int, model: AttentionModel) -> str:
    """Adds the ratio of the weighed to the plain first-token share (of the corpus means) to
    `values`; where the runs of some document kept no ‖f_h(x_j)‖ (`counts`: HeadSums's, of the
    corpus's `documents`), every norm metric as NaN instead, and → why (the
    sentence `metrics.attrs["value_norms"]` keeps; empty where they were measured)."""
    measured = int(counts["value_norm"].min()) if "value_norm" in counts else 0
    if "value_norm" in counts and measured == documents:
        values["first_weighed_ratio"] = values["alpha_first_weighed"] / values["alpha_first"]
        return ""
    for name in NORM_METRICS:
        values[name] = torch.full_like(values["alpha_first"], float("nan"))
    why = value_norms.missing(getattr(model, "model", None), getattr(model, "attention_modules", None) or [])
    if not why and measured:  # never a mean over some of the corpus as if it were all of it
        why = f"the runs of only {measured} of the {documents} documents kept them"
    return (f"{', '.join(NORM_METRICS)} are NaN: they weigh each "
            f"key by what it passes (Kobayashi et al.'s ‖f_h(x_j)‖), and for {model.name} "
            f"{why or 'the value vectors were not recorded by the corpus run'}")


def _corpus_tokens(model: AttentionModel, docs: Documents, max_length: int) -> tuple[dict[str, int], frozenset]:
    """How often each token occurs in the corpus (Voita et al.'s rare word), and which documents
    (corpus positions) are long: those a run of the model keeps on demand by itself
    (AttentionModel.keeps_on_demand: full attention over FULL_ATTENTION_LIMIT), as the widget opens them."""
    counts: Counter[str] = Counter()
    long = set()
    for k, tokens in enumerate(corpus_tokens(model, docs, max_length)):
        counts.update(tokens)
        if model.keeps_on_demand(len(tokens)):
            long.add(document_position(docs, k))
    return dict(counts), frozenset(long)


def _pieces(tokens: list[str], positions: set[int]) -> list[list]:
    """The runs of `positions` in order, each as [start, its tokens]."""
    pieces: list[list] = []
    for i in sorted(positions):
        if pieces and pieces[-1][0] + len(pieces[-1][1]) == i:
            pieces[-1][1].append(tokens[i])
        else:
            pieces.append([i, [tokens[i]]])
    return pieces


def _grid(rows, column: str, shape) -> torch.Tensor:
    """A tidy frame's per-head column as a layers × heads tensor."""
    grid = torch.full(tuple(shape), float("nan"), dtype=torch.float64)
    for layer, head, value in zip(rows["layer"], rows["head"], rows[column]):
        grid[int(layer), int(head)] = float(value)
    return grid


@analysis_view("head_finder", layout="finder", check_choice=finder_choice)
def head_finder_view(data: HeadFinder, grid: Grid) -> dict:
    """Every metric as a measure (the finder's scatter, its picture and its table read them, as the
    widget's analysis_choice picks them), and each head's top examples with the documents they point at."""
    tidy = data.tidy()
    measures = [{"key": name, "label": name, "values": grid(tidy[tidy.measure == name], "value")}
                for name in data.metric_names]
    examples, shown = {}, {}  # shown: doc → the positions its examples show
    for (layer, head), heap in data.top.items():
        for e in heap:
            spans = example_spans(len(data.tokens[e.doc]), e.query, e.keys[0][0] if e.keys else None)
            examples.setdefault(f"{layer}-{head}", []).append([e.doc, e.query, e.score, [[p, w] for p, w in e.keys],
                                                               [list(span) for span in spans]])
            shown.setdefault(e.doc, set()).update(i for start, end in spans for i in range(start, end))
    # Each document's tokens that some example shows, as pieces [start, tokens] (a long document's
    # 32k tokens are not all sent): what each adds to the text as it reads where that is known
    # ("running"), and its text for opening it.
    docs = {str(d): {"pieces": _pieces(data.running.get(d) or data.tokens[d], shown[d]), "running": d in data.running,
                     "n": len(data.tokens[d]), "text": data.texts[d][0], "text_b": data.texts[d][1]} for d in shown}
    return {"measures": measures, "finder": {"examples": examples, "docs": docs},
            "note": f"Every head of {data.model_name} over {data.documents} documents (attnscope.head_finder).{data._notes(' ')}"}
