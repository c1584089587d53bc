"""A long input's run (`LongAttentionResult`): each layer's post-rotary queries and keys and
every row's log-sum-exp, from which any row, column, tile or pooled overview is computed exactly
on demand, and layers × heads × T × T never is.

A module of its own, apart from results.py's runs that hold their attention: it holds no
attention tensor and reads every number through exact_attention.py, a block of rows at a time.
attention_model.py (from what fast_capture.py captures) and generation.py make it; `query_index`
reads positions as users give them, for both kinds of run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import checks
from ..errors import InputError, NoAttentionError
from . import exact_attention as exact


def query_index(queries, n: int, name: str = "queries") -> torch.Tensor:
    """Positions as a 1-D long tensor: an int, a range, a slice or a sequence of ints (-1 the
    last); InputError naming `name` (the parameter: queries, keys) otherwise."""
    if isinstance(queries, slice):
        return torch.arange(n)[queries]
    if isinstance(queries, torch.Tensor) or hasattr(queries, "__array__"):  # NumPy's positions too
        values = torch.as_tensor(queries).flatten().tolist()
        named = [f"{name}[{i}]" for i in range(len(values))]
    elif isinstance(queries, (range, list, tuple)):
        values, named = list(queries), [f"{name}[{i}]" for i in range(len(queries))]
    elif checks.is_integer(queries):
        values, named = [queries], [name]
    else:
        raise InputError(f"{name} must be a position, a range, a slice or a list of positions (whole numbers from "
                         f"-{n} to {n - 1}), not {checks.short_repr(queries)}.")
    positions = [checks.integer(said, q, minimum=-n, maximum=n - 1) for said, q in zip(named, values)]
    return torch.tensor([q % n for q in positions], dtype=torch.long)


@dataclass(kw_only=True)
class LongAttentionResult:
    """A long input's attention, kept as each layer's post-rotary queries and keys and the
    log-sum-exp of every row: any row, tile or pooled overview is exact, and layers × heads × T × T
    is never allocated. Made by `AttentionModel.run` for long inputs (fast_capture.py).

    queries[l]: heads × T × d, keys[l]: key heads × T × d (grouped-query attention: query head h
    reads key head h // (heads / key heads)), in the model's dtype on its device;
    lse: layers × heads × T, float32; rules[l]: what layer l does to its scores.
    """

    tokens: list[str]
    queries: list[torch.Tensor] = field(repr=False)
    keys: list[torch.Tensor] = field(repr=False)
    lse: torch.Tensor = field(repr=False)
    rules: list[exact.ScoreRule] = field(repr=False)
    causal: bool
    model_name: str
    text: str
    text_b: str | None = None
    sentence_b_start: int | None = None
    truncated_from: int | None = None
    input_ids: torch.Tensor | None = field(default=None, repr=False)
    # ‖f_h(x_j)‖ of every layer's heads (layers × heads × T, on the model's device), as a full
    # run's `value_norms`; None where not captured.
    value_norms: torch.Tensor | None = field(default=None, repr=False)
    word_groups: list[list[int]] | None = None
    labels: list[str] | None = None
    token_notes: list[str] | None = None
    # Per token, what it adds to the text read as running text (token_labels.TokenLabels.reading).
    token_reading: list[str] | None = None

    @property
    def n_layers(self) -> int:
        return len(self.queries)

    @property
    def causal_from(self) -> int:
        """The first token whose row is masked past itself when the run is causal: every row's."""
        return 0

    @property
    def n_heads(self) -> int:
        return int(self.queries[0].shape[0])

    @property
    def n_key_heads(self) -> int:
        return int(self.keys[0].shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.queries[0].shape[1])

    @property
    def nbytes(self) -> int:
        """What the kept queries, keys and log-sum-exps take."""
        return exact.nbytes(*self.queries, *self.keys, self.lse)

    @property
    def attention(self) -> torch.Tensor:
        full = exact.full_attention_bytes(self.n_layers, self.n_heads, self.n_tokens, self.n_tokens)
        raise NoAttentionError(
            f"This run of {self.n_tokens:,} tokens keeps its attention as queries and keys "
            f"({exact.describe_bytes(self.nbytes)}): all of it, {self.n_layers} layers × {self.n_heads} heads × "
            f"{self.n_tokens:,}², would take {exact.describe_bytes(full)}. Ask for what you need: "
            "attention_rows(layer, head, queries), attention_tile(layer, head, rows, cols) or pooled(layer)."
        )

    def key_head(self, head: int) -> int:
        """The key head query head `head` reads (grouped-query attention)."""
        head = checks.integer("head", head, minimum=0, maximum=self.n_heads - 1)
        return exact.key_head(head, self.n_heads, self.n_key_heads)

    def _layer(self, layer: int, head: int | None = None) -> tuple[int, int | None]:
        layer = checks.integer("layer", layer, minimum=0, maximum=self.n_layers - 1)
        if head is not None:
            head = checks.integer("head", head, minimum=0, maximum=self.n_heads - 1)
        return layer, head

    def attention_rows(self, layer: int, head: int, queries) -> torch.Tensor:
        """Rows `queries` (an int, a range, a slice or a list) of one head over every key:
        len(queries) × T, float32, on the CPU; computed on the model's device, exact."""
        layer, head = self._layer(layer, head)
        return self._exact(exact.rows_of_heads, layer, head, queries, "queries")[0]

    def mean_attention_rows(self, layer: int, queries) -> torch.Tensor:
        """The mean over the layer's heads of rows `queries`: len(queries) × T, float32 on the
        CPU, exact; every head in one pass."""
        layer, _ = self._layer(layer)
        return self._exact(exact.rows_of_heads, layer, None, queries, "queries").mean(0)

    def attention_columns(self, layer: int, head: int, keys) -> torch.Tensor:
        """Columns `keys` (an int, a range, a slice or a list) of one head: how much every query
        attends to each of them, T × len(keys), float32 on the CPU, exact."""
        layer, head = self._layer(layer, head)
        return self._exact(exact.columns_of_heads, layer, head, keys, "keys")[0]

    def mean_attention_columns(self, layer: int, keys) -> torch.Tensor:
        """The mean over the layer's heads of columns `keys`: T × len(keys), float32 on the CPU,
        exact; every head in one pass."""
        layer, _ = self._layer(layer)
        return self._exact(exact.columns_of_heads, layer, None, keys, "keys").mean(0)

    def _exact(self, compute, layer: int, head: int | None, positions, name: str) -> torch.Tensor:
        """compute(q, k, lse, rule, index) (exact.rows_of_heads or columns_of_heads) for one head
        or every head (None) of a checked layer, at `positions` as the user gave them (as `name`); on the CPU."""
        index = query_index(positions, self.n_tokens, name)
        with torch.inference_mode():
            return compute(*self._of_heads(layer, head), index).cpu()

    def spans(self, rows, cols) -> list[tuple[int, int]]:
        """`rows` and `cols` as checked (start, end) pairs of positions (a page sends them)."""
        spans = []
        for name, span in (("rows", rows), ("cols", cols)):
            if not isinstance(span, (tuple, list)) or len(span) != 2:
                raise InputError(f"{name} must be a (start, end) pair of positions, not {checks.short_repr(span)}.")
            start = checks.integer(f"{name} start", span[0], minimum=0, maximum=self.n_tokens - 1)
            end = checks.integer(f"{name} end", span[1], minimum=start + 1, maximum=self.n_tokens)
            spans.append((start, end))
        return spans

    def _of_heads(self, layer: int, head: int | None):
        """The layer's q, k, lse and rule for one query head (and its key head), or for every head (None)."""
        q, k, lse, rule = self.queries[layer], self.keys[layer], self.lse[layer], self.rules[layer]
        if head is None:
            return q, k, lse, rule
        kh = self.key_head(head)
        return q[head : head + 1], k[kh : kh + 1], lse[head : head + 1], rule.of_heads(head, head + 1)

    def attention_tile(self, layer: int, head: int, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        """A[layer, head, rows[0]:rows[1], cols[0]:cols[1]]: float32 on the CPU, exact."""
        layer, head = self._layer(layer, head)
        spans = self.spans(rows, cols)
        with torch.inference_mode():
            tile = exact.tile(*self._of_heads(layer, head), *spans)
        return tile[0].cpu()

    def attention_block(self, layer: int, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        """Every head's A[layer, :, rows[0]:rows[1], cols[0]:cols[1]]: heads × rows × cols, float32
        on the CPU, exact (the head view's window of a long text)."""
        layer, _ = self._layer(layer)
        spans = self.spans(rows, cols)
        with torch.inference_mode():
            block = exact.tile(*self._of_heads(layer, None), *spans)
        return block.cpu()

    def row_blocks(self, layer: int, budget: int | None = None) -> Iterator[tuple[int, int, torch.Tensor]]:
        """Every head's rows of `layer`, a block at a time: (start, end, heads × (end − start) × T
        float32 on the model's device, exact), each block under `budget` bytes
        (exact.block_bytes by default). A measure over every row never holds T × T."""
        layer, _ = self._layer(layer)
        q, k, lse, rule = self._of_heads(layer, None)
        step = exact.block_rows(self.n_heads, self.n_tokens, budget, q.device)
        for start in range(0, self.n_tokens, step):
            end = min(self.n_tokens, start + step)
            with torch.inference_mode():  # not held across the yield: the caller's code runs as it would
                block = exact.tile(q, k, lse, rule, (start, end), (0, self.n_tokens))
            yield start, end, block

    def first_columns(self, layer: int, n: int) -> torch.Tensor:
        """Every head's attention on the first n keys, from every query: heads × T × n, float32,
        on the model's device, exact (sink metrics read it)."""
        layer, _ = self._layer(layer)
        with torch.inference_mode():
            return exact.first_columns(self.queries[layer], self.keys[layer], self.lse[layer], self.rules[layer], n)

    def pooled(self, layer: int, bins: int = 256, reduce: str = "max", sample: tuple[int, int] | None = None) -> torch.Tensor:
        """Every head of `layer` pooled into bins × bins blocks of T × T (the max or the mean of
        each block): heads × bins × bins, float32 on the CPU, computed a block of rows at a time.
        sample (stride, offset): one pass of `stride` over the rows (exact_attention.pooled_sampled)."""
        layer, _ = self._layer(layer)
        bins = checks.integer("bins", bins, minimum=1)
        reduce, sample = pooling(reduce, sample)
        q, k, lse, rule = self.queries[layer], self.keys[layer], self.lse[layer], self.rules[layer]
        with torch.inference_mode():
            if sample is not None and sample[0] > 1:
                side = min(bins, self.n_tokens)
                pooled = exact.pooled_sampled(q, k, lse, rule, (side, side), reduce, *sample)
            else:
                pooled = exact.pooled_heads(q, k, lse, rule, bins, reduce)
        return pooled.cpu()

    def pooled_tile(self, layer: int, head: int | None, rows: tuple[int, int], cols: tuple[int, int],
                    bins: tuple[int, int] = (256, 256), reduce: str = "max", sample: tuple[int, int] | None = None) -> torch.Tensor:
        """rows × cols of one head (None: the mean of the layer's heads) pooled into at most
        bins blocks a side, the max or mean of each: float32 on the CPU. A side no longer than its
        bins is one position a block, so a small enough tile is the exact attention.
        sample (stride, offset): one pass of `stride` over the rows (exact_attention.pooled_sampled)."""
        layer, head = self._layer(layer, head)
        spans = self.spans(rows, cols)
        bins = tile_bins(bins)
        reduce, sample = pooling(reduce, sample)
        with torch.inference_mode():
            if sample is not None and sample[0] > 1:
                pooled = exact.pooled_sampled(*self._of_heads(layer, head), bins, reduce, *sample,
                                              rows=spans[0], cols=spans[1], average=head is None)
            else:
                pooled = exact.pooled_heads(*self._of_heads(layer, head), bins, reduce, rows=spans[0],
                                            cols=spans[1], average=head is None)
        return pooled[0].cpu()


def pooling(reduce: Any, sample: Any) -> tuple[str, tuple[int, int] | None]:
    """A pooled map's `reduce` ("max" or "mean") and `sample` (None, or a (stride, offset) pass:
    stride ≥ 1, offset in 0..stride − 1), checked."""
    if not checks.one_of(reduce, ("max", "mean")):
        raise InputError(f"reduce must be 'max' or 'mean', not {checks.short_repr(reduce)}.")
    if sample is None:
        return reduce, None
    if isinstance(sample, (str, bytes)) or not isinstance(sample, (tuple, list)) or len(sample) != 2:
        raise InputError(f"sample must be None or a (stride, offset) pair of whole numbers, not {checks.short_repr(sample)}.")
    stride = checks.integer("sample's stride", sample[0], minimum=1)
    return reduce, (stride, checks.integer("sample's offset", sample[1], minimum=0, maximum=stride - 1))


def tile_bins(bins: Any) -> tuple[int, int]:
    """A pooled tile's bins: a (rows, columns) pair of whole numbers from 1, checked."""
    if isinstance(bins, (str, bytes)) or not isinstance(bins, (tuple, list)) or len(bins) != 2:
        raise InputError(f"bins must be a (rows, columns) pair of whole numbers, not {checks.short_repr(bins)}.")
    return checks.integer("bins", bins[0], minimum=1), checks.integer("bins", bins[1], minimum=1)
