"""Attention sinks per head (Xiao et al. 2023; Gu et al. 2024): of one run, or over a corpus."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .. import checks
from ..engine import formulas as an
from ..engine.attention_model import (
    AttentionModel,
)
from ..engine.exact_attention import key_head as exact_key_head
from ..engine.results import LongAttentionResult, run_of
from ..errors import InputError
from ..labels import head_label
from ..progress import progress as progress_bar
from .corpus import Documents, document_position, documents
from .runner import run_partial
from .tables import Grid, HeadSums, SumsPartial, analysis_view


def attention_sinks(result: Any, corpus: Any = None, *, n_first: int = 4, epsilon: float = 0.3, column: str | Sequence[str] | None = None,
                    max_length: int | None = None, attention: str = "auto", progress: bool = True, backend: str = "local"):
    """Per head, how much attention goes to the first tokens of one run (a result, or a widget's
    run): the long-context counterpart of Clark et al.'s attention to [SEP].

    Columns: layer, head, label, key_head (the key head it reads, grouped-query attention),
    alpha_first (Gu et al. 2024's importance of the first token: the mean over queries of the
    attention on it), first_n_mass (the mean attention on the first n_first tokens; StreamingLLM
    keeps 4), sink (alpha_first > epsilon; Gu et al.'s ε = 0.3). `frame.attrs["sink_rate"]` is
    the share of sink heads, their "sink metric". Long results read only the first columns of each
    head (exact, from q, k and log-sum-exps), never T × T.

    Over a corpus, `attention_sinks(model, texts)`: each measure is averaged over the documents
    (each run as `model.run(text, attention=attention, max_length=max_length)`, so long documents
    keep q, k and log-sum-exps, never T × T), and `sink` says the mean alpha_first passes ε.
    backend: "local" or "ray", as in `head_stats`.
    """
    progress = checks.flag("progress", progress)
    if isinstance(result, AttentionModel):
        return _corpus_sinks(result, corpus, n_first=n_first, epsilon=epsilon, column=column, max_length=max_length,
                             attention=attention, progress=progress, backend=backend)
    if corpus is not None:
        raise InputError("attention_sinks(result) reads one run; for a corpus pass the model: attention_sinks(model, texts).")
    given = [name for name, value, default in (("column", column, None), ("max_length", max_length, None),
                                                ("attention", attention, "auto"), ("backend", backend, "local"))
             if not (value is default or isinstance(value, str) and value == default)]
    if given:  # not ignored silently: they say how a corpus runs, and this run has run
        raise InputError(f"{', '.join(f'{name}=' for name in given)} set how a corpus is run: attention_sinks(model, texts, "
                         f"{given[0]}=...); attention_sinks(result) reads a run made already.")
    result = run_of(result, "attention_sinks")
    n_first = checks.integer("n_first", n_first, minimum=1)
    epsilon = checks.fraction("epsilon", epsilon)
    measures = _sink_measures(result, n_first, epsilon)
    n_key_heads = result.n_key_heads if isinstance(result, LongAttentionResult) else result.n_heads
    return _sinks_frame(measures, n_key_heads, epsilon, model_name=result.model_name, n_first=n_first)


def _sink_measures(result: Any, n_first: int, epsilon: float) -> dict[str, torch.Tensor]:
    """alpha_first and first_n_mass of one run, L × H each."""
    per_layer = [an.sink_measures(result.first_columns(layer, n_first), n_first, epsilon) for layer in range(result.n_layers)]
    return {key: torch.stack([m[key].double().cpu() for m in per_layer]) for key in ("alpha_first", "first_n_mass")}


def _sinks_frame(measures: dict[str, torch.Tensor], n_key_heads: int, epsilon: float, **attrs):
    import pandas as pd

    alpha, mass = measures["alpha_first"], measures["first_n_mass"]
    n_layers, n_heads = alpha.shape
    rows = [
        dict(layer=layer, head=head, label=head_label(layer, head), key_head=exact_key_head(head, n_heads, n_key_heads),
             alpha_first=float(alpha[layer, head]), first_n_mass=float(mass[layer, head]), sink=bool(alpha[layer, head] > epsilon))
        for layer in range(n_layers) for head in range(n_heads)
    ]
    frame = pd.DataFrame(rows, columns=["layer", "head", "label", "key_head", "alpha_first", "first_n_mass", "sink"])
    frame.attrs.update(attnscope="attention_sinks", sink_rate=float(frame["sink"].mean()), epsilon=epsilon,
                       shape=[n_layers, n_heads], **attrs)
    return frame


def sinks_partial(model: AttentionModel, docs: Documents, *, n_first: int, epsilon: float, max_length: int | None,
                  attention: str, progress: bool) -> SumsPartial:
    """The sums of each document's sink measures (one run a document, at any length)."""
    sums = HeadSums()
    for k, (text, text_b) in enumerate(progress_bar(docs, len(docs), "attention sinks", progress, unit="text")):
        result = model.run(text, text_b, max_length=max_length, attention=attention)
        measures = _sink_measures(result, n_first, epsilon)
        if not all(bool(torch.isfinite(v).all()) for v in measures.values()):
            raise InputError(f"Text {document_position(docs, k)} of the corpus gives NaN or infinite attention on its first "
                             "tokens, so the analysis stops rather than average it in. Run the model in float32 (model.float()).")
        sums.add(measures)
    return SumsPartial(sums, len(docs))


def _corpus_sinks(model: AttentionModel, corpus: Any, *, n_first: int, epsilon: float, column, max_length, attention: str,
                  progress: bool, backend: str):

    if corpus is None:
        raise InputError("attention_sinks(model, texts) needs the texts.")
    n_first = checks.integer("n_first", n_first, minimum=1)
    epsilon = checks.fraction("epsilon", epsilon)
    docs = documents(corpus, column)
    partial = run_partial(sinks_partial, model, docs, progress=progress, backend=backend, n_first=n_first, epsilon=epsilon,
                          max_length=max_length, attention=attention)
    n_key_heads = getattr(getattr(model.model, "config", None), "num_key_value_heads", None) or model.n_heads
    return _sinks_frame(partial.sums.result(), n_key_heads, epsilon, model_name=model.name, n_first=n_first,
                        documents=len(docs))


class GrowingSinks:
    """attention_sinks of a causal run that grows by query rows (a generation, a token a step): each
    layer's attention on the first n_first keys summed over the queries so far, and at each step
    only the new queries' rows read (heads × new rows × n_first a layer), where attention_sinks
    reads every query's. Earlier rows never change in a causal run, so the means are
    attention_sinks(result)'s, to float64 rounding. A run that does not extend the last one (its
    tokens so far, or the last layer's query of the last token read, differ) starts again; another
    kind of run is read whole."""

    def __init__(self, n_first: int = 4, epsilon: float = 0.3):
        self.n_first, self.epsilon = n_first, epsilon
        self._sums: torch.Tensor | None = None  # layers × heads × n_first, float64
        self._rows = 0
        self._of: tuple | None = None  # (model, layers, heads, n_first) of the run read
        self._tokens: list[str] = []  # its tokens read so far
        self._last_query: torch.Tensor | None = None  # the last layer's query of the last token read

    def __call__(self, result: Any):
        # (An encoder-decoder's run is read whole: its rows are built of two parts.)
        if not (type(result) is LongAttentionResult and result.causal):
            return attention_sinks(result, n_first=self.n_first, epsilon=self.epsilon, progress=False)
        n, n_first = result.n_tokens, min(self.n_first, result.n_tokens)
        run = (result.model_name, result.n_layers, result.n_heads, n_first)
        if not self._extended_by(result, run):
            self._sums, self._rows, self._of = None, 0, run
        if n > self._rows:
            # The first read takes every row (as attention_sinks does); each later one, the new rows.
            new = torch.stack([(result.first_columns(layer, n_first).cpu() if self._rows == 0 else
                                result.attention_block(layer, (self._rows, n), (0, n_first))).double().sum(-2)
                               for layer in range(result.n_layers)])
            if not bool(torch.isfinite(new).all()):
                return attention_sinks(result, n_first=self.n_first, epsilon=self.epsilon, progress=False)
            self._sums = new if self._sums is None else self._sums + new
            self._rows, self._tokens = n, list(result.tokens)
            self._last_query = self._query_of(result, n - 1)
        # The mean over queries as one row of columns: the measures' one definition (formulas.sink_measures).
        measures = an.sink_measures((self._sums / n).unsqueeze(-2), self.n_first, self.epsilon)
        return _sinks_frame(measures, result.n_key_heads, self.epsilon, model_name=result.model_name, n_first=self.n_first)

    @staticmethod
    def _query_of(result: LongAttentionResult, token: int) -> torch.Tensor:
        return result.queries[-1][..., token, :].detach().to("cpu", torch.float32).clone()

    def _extended_by(self, result: LongAttentionResult, run: tuple) -> bool:
        """Whether `result` is the run read so far with rows added (a generation's next step)."""
        rows = self._rows
        return (run == self._of and rows > 0 and result.n_tokens >= rows and result.tokens[:rows] == self._tokens
                and torch.equal(self._query_of(result, rows - 1), self._last_query))


@analysis_view("attention_sinks", of_a_long_run=attention_sinks, of_a_growing_run=GrowingSinks)
def attention_sinks_view(data: Any, grid: Grid) -> dict:
    n_first = data.attrs.get("n_first", 4)
    measures = [
        {"key": "alpha_first", "label": "Attention on the first token (Gu et al.'s α)", "values": grid(data, "alpha_first")},
        {"key": "first_n_mass", "label": f"Attention on the first {n_first} tokens", "values": grid(data, "first_n_mass")},
        {"key": "sink", "label": f"Sink head (α > {data.attrs.get('epsilon', 0.3)})",
         "values": grid(data.assign(sink=data["sink"].astype(float)), "sink"), "integer": True},  # 0 or 1
    ]
    note = (f"Attention sinks of this text: {data.attrs.get('sink_rate', 0):.0%} of heads put more than "
            f"{data.attrs.get('epsilon', 0.3)} of their attention on the first token (Gu et al. 2024; "
            "StreamingLLM keeps the first 4).")
    return {"measures": measures, "note": note}

