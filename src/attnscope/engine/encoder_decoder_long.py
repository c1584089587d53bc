"""An encoder-decoder's run kept as queries, keys and row log-sum-exps (a generation, issue 48
item 5): one sequence of tokens, the source's then the decoder's, and one row per token.

- A decoder token's row is its cross-attention over the source (it sums to 1) followed by its
  self-attention over the decoder's tokens up to itself (it sums to 1 too): what it read when it
  was written, both halves exact.
- A source token's row is the encoder's self-attention over the source (the encoder's layer of
  the same index), and nothing on the decoder's tokens, which the encoder never sees.

Each of the three attentions is a `PartAttention`: per layer its queries and keys, its rows'
log-sum-exps and its ScoreRule, and where the model adds a learned relative-position bias to its
scores (T5), that bias as a function of the distance i − j: heads × distances per layer, O(T),
never T × T. Every row, column, tile and pooled map is put together from the parts' exact blocks
(exact_attention.scores), a block of rows at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import checks
from . import exact_attention as exact
from .long_result import LongAttentionResult, pooling, query_index, tile_bins


def relative_bias(table: torch.Tensor, origin: int, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """The bias the model adds at query `rows[a]`, key `cols[b]`: table[:, rows[a] − cols[b] + origin]
    (table: heads × distances) → heads × len(rows) × len(cols). A distance the table does not hold
    is one the mask hides (a decoder's future keys): it reads the nearest entry, then −inf."""
    distance = (rows[:, None] - cols[None, :] + origin).clamp_(0, table.shape[-1] - 1)
    return table[:, distance]


@dataclass
class PartAttention:
    """One attention of an encoder-decoder (the encoder's, the cross-attention or the decoder's),
    every layer: queries[l] heads × Tq × d, keys[l] key heads × Tk × d (the model's dtype),
    lse layers × heads × Tq, rules[l]; bias: layers × heads × distances added to the scores at
    distance i − j + bias_origin, or None. lse and bias are float32, float64 for a float64 model:
    its scores are computed in float64 (T5's are not scaled, and large)."""

    queries: list[torch.Tensor] = field(repr=False)
    keys: list[torch.Tensor] = field(repr=False)
    lse: torch.Tensor = field(repr=False)
    rules: list[exact.ScoreRule] = field(repr=False)
    bias: torch.Tensor | None = field(default=None, repr=False)
    bias_origin: int = 0

    @property
    def n_layers(self) -> int:
        return len(self.queries)

    @property
    def n_heads(self) -> int:
        return int(self.queries[0].shape[0])

    @property
    def nbytes(self) -> int:
        return exact.nbytes(*self.queries, *self.keys, self.lse, self.bias)

    def scores(self, layer: int, heads: slice, q: torch.Tensor, k: torch.Tensor, rows: torch.Tensor,
               cols: torch.Tensor) -> torch.Tensor:
        """The scores the layer's softmax reads for query positions `rows` (q: those rows of
        `heads`) and key positions `cols` (k: those keys, the heads' key heads): the model's
        q·k·scale, its relative-position bias, its mask; heads × rows × cols, in the dtype of lse."""
        s = exact.scores(q, k, self.rules[layer], rows, cols, dtype=self.lse.dtype)
        if self.bias is not None:
            s.add_(relative_bias(self.bias[layer, heads].to(s.device), self.bias_origin, rows.to(s.device),
                                 cols.to(s.device)))
        return s

    def probabilities(self, layer: int, heads: slice, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Exact weights of query positions `rows` on key positions `cols` (the part's own
        positions) for query heads `heads` (all, or one: slice(h, h + 1)): heads × rows × cols, in
        the dtype of lse, on the part's device."""
        q, k = self.queries[layer], self.keys[layer]
        # Every head, or one and its key head (grouped-query attention).
        key_heads = heads if heads.start is None else exact.key_head(heads.start, q.shape[0], k.shape[0])
        key_heads = key_heads if isinstance(key_heads, slice) else slice(key_heads, key_heads + 1)
        rows, cols = rows.to(q.device), cols.to(q.device)
        s = self.scores(layer, heads, q[heads][:, rows], k[key_heads][:, cols], rows, cols)
        return s.sub_(self.lse[layer, heads][:, rows, None].to(s.device)).exp_()


@dataclass(kw_only=True)
class EncoderDecoderLongResult(LongAttentionResult):
    """Source + decoder tokens as one long run (see the module's doc): `tokens` are the source's
    n_source tokens and then the decoder's (its start token first). The inherited queries, keys,
    lse and rules are the decoder's self-attention (its layers and heads are the run's); `encoder`
    is None where the encoder's layers or heads do not pair with the decoder's (the source's rows
    are then empty: `encoder_shown` says so)."""

    n_source: int
    cross: PartAttention = field(repr=False)
    decoder: PartAttention = field(repr=False)
    encoder: PartAttention | None = field(default=None, repr=False)

    @property
    def n_tokens(self) -> int:
        return self.n_source + int(self.decoder.queries[0].shape[1])

    @property
    def causal_from(self) -> int:
        """The decoder's start token: the source's rows before it are the encoder's, which read
        the whole source."""
        return self.n_source

    @property
    def n_decoder_tokens(self) -> int:
        return int(self.decoder.queries[0].shape[1])

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in (self.encoder, self.cross, self.decoder) if part is not None)

    @property
    def encoder_shown(self) -> bool:
        """Whether the source's rows show the encoder's attention (its layers and heads pair with
        the decoder's: layer l's rows are the encoder's layer l)."""
        return self.encoder is not None

    def block(self, layer: int, head: int | None, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """The weights of positions `rows` on positions `cols` (any order) for one head, or every
        head (None): heads × rows × cols, float32, on the model's device, exact. Each pair of
        (source or decoder) rows and columns is one part's block, or 0."""
        device = self.decoder.queries[0].device
        heads = slice(None) if head is None else slice(head, head + 1)
        out = torch.zeros(self.n_heads if head is None else 1, len(rows), len(cols), dtype=torch.float32, device=device)
        rows, cols = rows.to(device), cols.to(device)
        n = self.n_source

        def where(found: torch.Tensor) -> torch.Tensor:
            return found.nonzero().squeeze(1)

        source_rows, decoder_rows, source_cols, decoder_cols = where(rows < n), where(rows >= n), where(cols < n), where(cols >= n)
        encoder = self.encoder
        for part, row_at, col_at, row_shift, col_shift in (
            (encoder, source_rows, source_cols, 0, 0),
            (self.cross, decoder_rows, source_cols, n, 0),
            (self.decoder, decoder_rows, decoder_cols, n, n),
        ):
            if part is None or not len(row_at) or not len(col_at):
                continue
            weights = part.probabilities(layer, heads, rows[row_at] - row_shift, cols[col_at] - col_shift)
            out[:, row_at[:, None], col_at[None, :]] = weights.to(device, torch.float32)
        return out

    def _of(self, layer: int, head: int | None, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """`block` a block of rows at a time (memory: one block), on the CPU."""
        step = exact.block_rows(self.n_heads, len(cols), device=self.decoder.queries[0].device)
        with torch.inference_mode():
            return torch.cat([self.block(layer, head, part, cols).cpu() for part in rows.split(step)], dim=1)

    def attention_rows(self, layer: int, head: int, queries) -> torch.Tensor:
        layer, head = self._layer(layer, head)
        return self._of(layer, head, query_index(queries, self.n_tokens), torch.arange(self.n_tokens))[0]

    def mean_attention_rows(self, layer: int, queries) -> torch.Tensor:
        layer, _ = self._layer(layer)
        return self._of(layer, None, query_index(queries, self.n_tokens), torch.arange(self.n_tokens)).mean(0)

    def attention_columns(self, layer: int, head: int, keys) -> torch.Tensor:
        layer, head = self._layer(layer, head)
        return self._of(layer, head, torch.arange(self.n_tokens), query_index(keys, self.n_tokens, "keys"))[0]

    def mean_attention_columns(self, layer: int, keys) -> torch.Tensor:
        layer, _ = self._layer(layer)
        return self._of(layer, None, torch.arange(self.n_tokens), query_index(keys, self.n_tokens, "keys")).mean(0)

    def attention_tile(self, layer: int, head: int, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        layer, head = self._layer(layer, head)
        (r0, r1), (c0, c1) = self.spans(rows, cols)
        return self._of(layer, head, torch.arange(r0, r1), torch.arange(c0, c1))[0]

    def attention_block(self, layer: int, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        layer, _ = self._layer(layer)
        (r0, r1), (c0, c1) = self.spans(rows, cols)
        return self._of(layer, None, torch.arange(r0, r1), torch.arange(c0, c1))

    def row_blocks(self, layer: int, budget: int | None = None):
        layer, _ = self._layer(layer)
        device = self.decoder.queries[0].device
        step = exact.block_rows(self.n_heads, self.n_tokens, budget, device)
        cols = torch.arange(self.n_tokens, device=device)
        for start in range(0, self.n_tokens, step):
            end = min(self.n_tokens, start + step)
            with torch.inference_mode():
                block = self.block(layer, None, torch.arange(start, end, device=device), cols)
            yield start, end, block

    def first_columns(self, layer: int, n: int) -> torch.Tensor:
        layer, _ = self._layer(layer)
        device = self.decoder.queries[0].device
        with torch.inference_mode():
            return self.block(layer, None, torch.arange(self.n_tokens, device=device),
                              torch.arange(min(n, self.n_tokens), device=device))

    def pooled(self, layer: int, bins: int = 256, reduce: str = "max", sample: tuple[int, int] | None = None) -> torch.Tensor:
        layer, _ = self._layer(layer)
        side = min(checks.integer("bins", bins, minimum=1), self.n_tokens)
        reduce, sample = pooling(reduce, sample)
        return self._pooled(layer, None, (0, self.n_tokens), (0, self.n_tokens), (side, side), reduce, sample, False)

    def pooled_tile(self, layer: int, head: int | None, rows: tuple[int, int], cols: tuple[int, int],
                    bins: tuple[int, int] = (256, 256), reduce: str = "max", sample: tuple[int, int] | None = None) -> torch.Tensor:
        layer, head = self._layer(layer, head)
        spans = self.spans(rows, cols)
        bins = tile_bins(bins)
        reduce, sample = pooling(reduce, sample)
        return self._pooled(layer, head, *spans, bins, reduce, sample, head is None)[0]

    def _pooled(self, layer: int, head: int | None, rows: tuple[int, int], cols: tuple[int, int],
                bins: tuple[int, int], reduce: str, sample: tuple[int, int] | None, average: bool) -> torch.Tensor:
        """rows × cols pooled into bins, as exact_attention.pooled_heads (sample None) and
        pooled_sampled (one pass of `stride` rows) pool one softmax's map: the max of each block,
        or its mean (a pass's sum over the whole block's count). On the CPU; reduce and sample checked (pooling)."""
        device = self.decoder.queries[0].device
        (r0, r1), (c0, c1) = rows, cols
        row_bins, col_bins = min(bins[0], r1 - r0), min(bins[1], c1 - c0)
        row_bin = exact.bin_edges(r1 - r0, row_bins).to(device)
        col_bin = exact.bin_edges(c1 - c0, col_bins).to(device)
        heads = 1 if average or head is not None else self.n_heads
        total = torch.zeros(heads, row_bins, col_bins, dtype=torch.float32, device=device)
        stride, offset = sample if sample is not None else (1, 0)
        positions = torch.arange(r0 + offset, r1, stride, device=device)
        keys = torch.arange(c0, c1, device=device)
        with torch.inference_mode():
            for chunk in positions.split(exact.block_rows(self.n_heads, c1 - c0, device=device)):
                weights = self.block(layer, head, chunk, keys)
                if average:
                    weights = weights.mean(0, keepdim=True)
                exact._pool_into(total, weights, col_bin, row_bin[chunk - r0], reduce)
            pooled = exact._block_means(total, row_bin, col_bin) if reduce == "mean" else total
        return pooled.cpu()
