"""Exact attention from queries, keys and each row's log-sum-exp, never the whole T × T.

With one layer's post-rotary q (heads × T × d), k (key heads × T × d, grouped-query attention
kept at its own count) and the log-sum-exp of every row of its scores, any entry is exact:

    A[h, i, j] = exp(s[h, i, j] − lse[h, i]),  s = rule(q_i · k_j · scale)

where the rule is what the model does to its scores: the causal mask, a sliding window,
soft-capping (Gemma 2), a per-head sink logit in the softmax's denominator (gpt-oss). Rows,
tiles and pooled overviews are computed on the tensors' device, a block of rows at a time, so
memory stays at one block whatever T is.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

# One block of scores (heads × rows × keys, float32) is kept under this many bytes on the CPU
# (a few of them fit its caches). A GPU takes larger blocks, up to GPU_BLOCK_BYTES or an eighth of
# its free memory: 64 MiB blocks there are ~36 rows at 32,768 tokens, and their launches, not the
# arithmetic, took the time (a 32,768-token run 50 times its forward on an H200).
BLOCK_BYTES = 64 * 2**20
GPU_BLOCK_BYTES = 2**30


def block_bytes(device: torch.device | None) -> int:
    """The score block budget on `device` (BLOCK_BYTES; GPU_BLOCK_BYTES on a GPU with room)."""
    if device is None or device.type != "cuda":
        return BLOCK_BYTES
    free, _ = torch.cuda.mem_get_info(device)
    return max(BLOCK_BYTES, min(GPU_BLOCK_BYTES, free // 8))


@dataclass(frozen=True)
class ScoreRule:
    """How one layer turns q·k into the scores its softmax reads, as the model does."""

    scaling: float
    causal: bool
    # Query i sees key j only when i − j < window (transformers' sliding-window layers).
    window: int | None = None
    # scores → tanh(scores / softcap) · softcap before the mask (Gemma 2).
    softcap: float | None = None
    # Per query head, one extra logit in every row's softmax that attends to nothing (gpt-oss).
    sinks: torch.Tensor | None = None
    # Per query head and key, log w_j added to the scores after the mask and the softmax's
    # log-sum-exp, so the rows read α_ij·w_j (heads × T keys; Kobayashi et al.'s value norms,
    # results.LongAttentionResult.weighed). Never used to make a row's log-sum-exp.
    key_log_weights: torch.Tensor | None = None

    def of_heads(self, start: int, end: int) -> ScoreRule:
        """The rule of query heads start..end−1 (what differs by head sliced to them)."""
        if self.key_log_weights is None:
            return self
        return dataclasses.replace(self, key_log_weights=self.key_log_weights[start:end])

    def allowed(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor | None:
        """rows × cols, True where query `rows[a]` may attend to key `cols[b]`; None: all may."""
        if (not self.causal and self.window is None) or not len(rows) or not len(cols):
            return None
        # A block wholly below the diagonal and inside the window needs no mask (most of a long map).
        nearest, farthest = int(rows.min()) - int(cols.max()), int(rows.max()) - int(cols.min())
        if (not self.causal or nearest >= 0) and (self.window is None or farthest < self.window):
            return None
        offset = rows[:, None] - cols[None, :]
        allowed = torch.ones_like(offset, dtype=torch.bool)
        if self.causal:
            allowed &= offset >= 0
        if self.window is not None:
            allowed &= offset < self.window
        return allowed

    def key_span(self, row_start: int, row_end: int, n_keys: int) -> tuple[int, int]:
        """The keys rows row_start..row_end−1 can see: fewer than T for causal or windowed layers."""
        end = min(row_end, n_keys) if self.causal else n_keys
        start = max(0, row_start - self.window + 1) if self.window is not None else 0
        return start, max(start, end)


def key_head(head: int, n_heads: int, n_key_heads: int) -> int:
    """Grouped-query attention: query head h reads key head h // (query heads per key head)."""
    return head // (n_heads // n_key_heads)


def block_rows(n_heads: int, n_keys: int, budget: int | None = None, device: torch.device | None = None) -> int:
    """Rows per block so that heads × rows × keys float32 scores stay under `budget` bytes
    (block_bytes(device) by default)."""
    budget = block_bytes(device) if budget is None else budget
    return max(1, budget // (4 * max(1, n_heads) * max(1, n_keys)))


def scores(q: torch.Tensor, k: torch.Tensor, rule: ScoreRule, rows: torch.Tensor, cols: torch.Tensor,
           out: torch.Tensor | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Scores of query positions `rows` against key positions `cols`, masked to −inf.

    q: heads × len(rows) × d; k: key heads × len(cols) × d (heads a multiple of key heads).
    out: a float32 buffer of heads × len(rows) × len(cols) to write them in (a fresh block of
    scores is the largest allocation here, and allocating it costs as much as the matmul).
    dtype: what they are computed in (float64 for a float64 model's rows to 1e-6, where its
    scores are large: T5 does not scale them).
    → heads × len(rows) × len(cols), `dtype`.
    """
    n_heads, n_key_heads = q.shape[0], k.shape[0]
    group = n_heads // n_key_heads
    n_rows, n_cols = q.shape[1], k.shape[1]
    # The scale goes on q (rows × d), not on the scores (rows × keys): the same numbers, a pass fewer.
    # Each key head's query heads as one matrix of rows: one matmul per key head.
    q32 = (q.to(dtype) * rule.scaling).reshape(n_key_heads, group * n_rows, q.shape[2])
    target = None if out is None else out.view(n_key_heads, group * n_rows, n_cols)
    s = torch.matmul(q32, k.to(dtype).transpose(-1, -2), out=target).view(n_heads, n_rows, n_cols)
    if rule.softcap is not None:
        s = torch.tanh(s / rule.softcap).mul_(rule.softcap)
    _mask_(s, rule, rows.to(s.device), cols.to(s.device))
    if rule.key_log_weights is not None:
        s.add_(rule.key_log_weights.to(s.device)[:, None, cols.to(s.device)])
    return s


def _mask_(s: torch.Tensor, rule: ScoreRule, rows: torch.Tensor, cols: torch.Tensor) -> None:
    """−inf where a row may not see a column. Only the columns that some row may not see are
    touched: for a causal block those past its first row (the diagonal part), not all of it."""
    if (not rule.causal and rule.window is None) or not len(rows) or not len(cols):
        return
    seen_by_all = torch.ones_like(cols, dtype=torch.bool)  # columns every row of the block sees
    if rule.causal:
        seen_by_all &= cols <= rows.min()
    if rule.window is not None:
        seen_by_all &= cols > rows.max() - rule.window
    if bool(seen_by_all.all()):
        return
    some = (~seen_by_all).nonzero().squeeze(1)
    first, last = int(some[0]), int(some[-1])
    if last - first + 1 == len(some):  # one run of columns (a causal diagonal): a slice, no copies
        part = s[..., first : last + 1]
        part.masked_fill_(~rule.allowed(rows, cols[first : last + 1]), float("-inf"))
    else:
        s[..., some] = s[..., some].masked_fill(~rule.allowed(rows, cols[some]), float("-inf"))


def _scored_blocks(q: torch.Tensor, k: torch.Tensor, rule: ScoreRule, budget: int | None):
    """A block of rows at a time: (start, end, key_start, key_end, scores, row log-sum-exp with
    the sink logit when the layer has one), keys limited to those the rows can see."""
    if rule.key_log_weights is not None:
        raise ValueError("A rule that weighs keys reads rows; a row's log-sum-exp is the softmax's, made without it.")
    n_heads, n_rows, n_keys = q.shape[0], q.shape[1], k.shape[1]
    sinks = None if rule.sinks is None else rule.sinks.to(device=q.device, dtype=torch.float32)[:, None]
    step = block_rows(n_heads, n_keys, budget, q.device)
    for start in range(0, n_rows, step):
        end = min(n_rows, start + step)
        key_start, key_end = rule.key_span(start, end, n_keys)
        rows = torch.arange(start, end, device=q.device)
        cols = torch.arange(key_start, key_end, device=q.device)
        s = scores(q[:, start:end], k[:, key_start:key_end], rule, rows, cols)
        lse = torch.logsumexp(s, dim=-1)
        if sinks is not None:
            lse = torch.logaddexp(lse, sinks)
        yield start, end, key_start, key_end, s, lse


def row_logsumexp(q: torch.Tensor, k: torch.Tensor, rule: ScoreRule, budget: int | None = None) -> torch.Tensor:
    """log Σ_j exp(s_ij) (with the sink logit, when the layer has one) for every head and row:
    heads × T, float32, computed a block of rows at a time on q's device."""
    out = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)
    for start, end, _, _, _, lse in _scored_blocks(q, k, rule, budget):
        out[:, start:end] = lse
    return out


def logsumexp_at(q: torch.Tensor, k: torch.Tensor, rule: ScoreRule, rows: torch.Tensor) -> torch.Tensor:
    """row_logsumexp for query rows at positions `rows` (q: heads × len(rows) × d, those rows
    only) over keys 0…n−1 (k: key heads × n × d): heads × len(rows), float32. A generation step's
    one new row, without scoring the rows before it."""
    key_start, key_end = rule.key_span(int(rows.min()), int(rows.max()) + 1, k.shape[1])
    cols = torch.arange(key_start, key_end, device=q.device)
    lse = torch.logsumexp(scores(q, k[:, key_start:key_end], rule, rows.to(q.device), cols), dim=-1)
    if rule.sinks is not None:
        lse = torch.logaddexp(lse, rule.sinks.to(device=q.device, dtype=torch.float32)[:, None])
    return lse


def probabilities(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, rows: torch.Tensor, cols: torch.Tensor
) -> torch.Tensor:
    """Attention weights of query positions `rows` on key positions `cols` (q, lse: those rows
    only, heads first): heads × len(rows) × len(cols), float32, exact. A sink logit needs no
    term here: it is in lse."""
    s = scores(q, k, rule, rows, cols)
    return s.sub_(lse[..., None]).exp_()  # in place: a block of scores is the largest thing here


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rule: ScoreRule, budget: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's output Σ_j A_ij v_j and its row log-sum-exp, a block of rows at a time: the
    model's attention computed without T × T, for layers the fused kernels cannot run (soft-capped
    or sink logits). q: heads × T × d; k, v: key heads × T × d. → (heads × T × d_v in v's dtype, lse)."""
    n_heads, n_rows, n_key_heads = q.shape[0], q.shape[1], k.shape[0]
    group = n_heads // n_key_heads
    out = torch.empty(n_heads, n_rows, v.shape[-1], dtype=v.dtype, device=q.device)
    lse = torch.empty(n_heads, n_rows, dtype=torch.float32, device=q.device)
    for start, end, key_start, key_end, s, block_lse in _scored_blocks(q, k, rule, budget):
        p = torch.exp(s - block_lse[..., None])
        values = v[:, key_start:key_end].float()
        o = torch.matmul(p.reshape(n_key_heads, group, end - start, -1), values[:, None])
        out[:, start:end] = o.reshape(n_heads, end - start, -1).to(v.dtype)
        lse[:, start:end] = block_lse
    return out, lse


def rows_of_heads(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, queries: torch.Tensor,
    budget: int | None = None,
) -> torch.Tensor:
    """Rows `queries` of every head given over every key: heads × len(queries) × T, float32, on
    q's device. All heads in one pass: a head at a time, the mean of 8 heads' rows at 32,768
    tokens was 8 rounds of small ops, each a wait for torch's threads (18–78 ms beside a busy page).

    q: heads × T × d, k: their key heads × T × d, lse: heads × T (one layer)."""
    n_heads, n_keys = q.shape[0], k.shape[1]
    queries = queries.to(q.device)
    out = torch.empty(n_heads, len(queries), n_keys, dtype=torch.float32, device=q.device)
    step = block_rows(n_heads, n_keys, budget, q.device)
    cols = torch.arange(n_keys, device=q.device)
    for start in range(0, len(queries), step):
        rows = queries[start : start + step]
        out[:, start : start + len(rows)] = probabilities(q[:, rows], k, lse[:, rows], rule, rows, cols)
    return out


def tile(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, rows: tuple[int, int], cols: tuple[int, int],
) -> torch.Tensor:
    """A[:, rows[0]:rows[1], cols[0]:cols[1]] of every head given (q, lse: heads first; k: their
    key heads): heads × rows × cols, float32, exact, on q's device."""
    row_index = torch.arange(rows[0], rows[1], device=q.device)
    col_index = torch.arange(cols[0], cols[1], device=q.device)
    return probabilities(q[:, rows[0] : rows[1]], k[:, cols[0] : cols[1]], lse[:, rows[0] : rows[1]], rule,
                         row_index, col_index)


def first_columns(q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, n: int,
                  budget: int | None = None) -> torch.Tensor:
    """Every head's attention on the first n keys, from every query: heads × T × n, float32,
    exact. O(T · n · d) per head: sink metrics at 32k tokens without touching T × T."""
    return columns_of_heads(q, k, lse, rule, torch.arange(min(n, k.shape[1])), budget)


def bin_edges(n: int, bins: int) -> torch.Tensor:
    """Which of `bins` equal bins each of n positions falls in (bins ≤ n)."""
    return torch.div(torch.arange(n) * bins, n, rounding_mode="floor")


def _span(span: tuple[int, int] | None, n: int) -> tuple[int, int]:
    return (0, n) if span is None else (int(span[0]), int(span[1]))


def _row_blocks(rule: ScoreRule, rows: tuple[int, int], cols: tuple[int, int], n_keys: int, step: int):
    """(start, end, key_start, key_end) for each block of `step` rows of the span `rows`, with the
    keys of `cols` those rows can see; blocks that see none of them are skipped (they pool to 0)."""
    (r0, r1), (c0, c1) = rows, cols
    for start in range(r0, r1, step):
        end = min(r1, start + step)
        key_start, key_end = rule.key_span(start, end, n_keys)
        key_start, key_end = max(key_start, c0), min(key_end, c1)
        if key_end > key_start:
            yield start, end, key_start, key_end


def pooled_heads(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, bins: int | tuple[int, int],
    reduce: str = "max", budget: int | None = None, rows: tuple[int, int] | None = None,
    cols: tuple[int, int] | None = None, average: bool = False,
) -> torch.Tensor:
    """Every head's attention over rows × cols (all of T × T by default) pooled into equal blocks,
    the max or the mean of each: heads × row bins × col bins, float32, on q's device; computed a
    block of rows at a time. `bins` is one count for both sides or (row bins, col bins), each at
    most the span's length (a span no longer than its bins is exact, one position a bin).
    `average`: the mean over heads is pooled (1 × bins × bins), not each head."""
    if reduce not in ("max", "mean"):
        raise ValueError(f"reduce must be 'max' or 'mean', not {reduce!r}")
    n_heads, n_keys = q.shape[0], k.shape[1]
    (r0, r1), (c0, c1) = _span(rows, q.shape[1]), _span(cols, n_keys)
    row_bins, col_bins = (bins, bins) if isinstance(bins, int) else bins
    if rows is None and cols is None and isinstance(bins, int):
        row_bins = col_bins = min(bins, r1 - r0, c1 - c0)  # the whole matrix: square blocks
    row_bins, col_bins = min(row_bins, r1 - r0), min(col_bins, c1 - c0)
    if reduce == "max" and not average and (r1 - r0) % row_bins == 0 and (c1 - c0) % col_bins == 0:
        return _max_pooled_even(q, k, lse, rule, (r0, r1), (c0, c1), row_bins, col_bins, budget)
    device = q.device
    row_bin = bin_edges(r1 - r0, row_bins).to(device)
    col_bin = bin_edges(c1 - c0, col_bins).to(device)
    n_out = 1 if average else n_heads
    total = torch.zeros(n_out, row_bins, col_bins, dtype=torch.float32, device=device)
    for start, end, key_start, key_end in _row_blocks(rule, (r0, r1), (c0, c1), n_keys, block_rows(n_heads, c1 - c0, budget, q.device)):
        _pool_block(total, q, k, lse, rule, torch.arange(start, end, device=device), (key_start, key_end),
                    col_bin[key_start - c0 : key_end - c0], row_bin[start - r0 : end - r0], reduce, average)
    return _block_means(total, row_bin, col_bin) if reduce == "mean" else total


def _pool_block(total: torch.Tensor, q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule,
                rows: torch.Tensor, keys: tuple[int, int], col_in_bins: torch.Tensor, row_in_bins: torch.Tensor,
                reduce: str, average: bool) -> None:
    """The weights of query positions `rows` on the keys [keys[0], keys[1]) pooled into `total`."""
    cols = torch.arange(keys[0], keys[1], device=q.device)
    if reduce == "max" and not average and scores_first(q.device):
        s = scores(q[:, rows], k[:, keys[0] : keys[1]], rule, rows, cols)
        first, by_bin = _columns_by_bin(col_in_bins)
        best = s[..., by_bin].amax(-1).sub_(lse[:, rows, None]).exp_()  # heads × rows × the block's column bins
        region = total[:, :, first : first + by_bin.shape[0]]
        region.scatter_reduce_(1, row_in_bins[None, :, None].expand_as(best), best, "amax")
        return
    p = probabilities(q[:, rows], k[:, keys[0] : keys[1]], lse[:, rows], rule, rows, cols)
    if average:
        p = p.mean(0, keepdim=True)
    _pool_into(total, p, col_in_bins, row_in_bins, reduce)


def scores_first(device: torch.device) -> bool:
    """Whether a head's max over bins of unequal size pools the scores over each column bin first
    (gathered, bins × widest) and exponentiates only those (exp is increasing: the largest weight
    is exp(the largest score − lse)). On a GPU, scattering every weight into its bin's cell makes
    a bin's hundreds of weights contend for one address: an H200 pooled 32,768-token thumbnails
    10 × slower than equal bins. On a CPU the scatter is the faster (8,192 tokens, 2 cores: 0.7 s
    against 0.8 s for the gather)."""
    return device.type != "cpu"


def _columns_by_bin(col_in_bins: torch.Tensor) -> tuple[int, torch.Tensor]:
    """A block's columns grouped by column bin (bins are runs of consecutive columns): the first
    bin, and for each bin its columns' positions in the block, padded to the widest bin by
    repeating its last column (a repeat adds nothing to a max): bins × widest."""
    first = int(col_in_bins[0])
    counts = torch.bincount(col_in_bins - first)
    starts = torch.cumsum(counts, 0) - counts
    offsets = torch.arange(int(counts.max()), device=col_in_bins.device)
    return first, starts[:, None] + torch.minimum(offsets[None, :], (counts - 1)[:, None])


def _pool_into(total: torch.Tensor, p: torch.Tensor, col_in_bins: torch.Tensor, row_in_bins: torch.Tensor, reduce: str) -> None:
    """A block of weights (heads × its rows × its keys) into `total` (heads × row bins × col
    bins): each key into its column bin, then each row into its row bin; the max of each block,
    or its sum (keys outside the span hold 0: they add nothing to a max or a sum)."""
    by_col = torch.zeros(p.shape[0], p.shape[1], total.shape[2], dtype=torch.float32, device=p.device)
    if reduce == "max":
        by_col.scatter_reduce_(2, col_in_bins.expand_as(p), p, "amax")
        total.scatter_reduce_(1, row_in_bins[None, :, None].expand_as(by_col), by_col, "amax")
    else:
        by_col.index_add_(2, col_in_bins, p)
        total.index_add_(1, row_in_bins, by_col)


def _block_means(total: torch.Tensor, row_bin: torch.Tensor, col_bin: torch.Tensor) -> torch.Tensor:
    """Sums pooled by _pool_into divided by each block's whole count of pairs."""
    row_count = torch.bincount(row_bin, minlength=total.shape[1]).float()
    col_count = torch.bincount(col_bin, minlength=total.shape[2]).float()
    return total.div_(row_count[None, :, None] * col_count[None, None, :])


def pooled_sampled(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, bins: tuple[int, int], reduce: str,
    stride: int, offset: int, rows: tuple[int, int] | None = None, cols: tuple[int, int] | None = None,
    average: bool = False, budget: int | None = None,
) -> torch.Tensor:
    """One of `stride` passes over pooled_heads' map: only the rows r of the span with
    (r − start) % stride == offset. "max": the largest weight of those rows in each block; the
    passes' maxima make the map's. "mean": their weights' sum divided by the whole block's count;
    the passes add up to the map's mean. Each pass costs 1 / stride of the map, so a page can show
    a first pass at once and refine it: every block has rows in every pass when stride is at most
    the rows a block holds."""
    if reduce not in ("max", "mean"):
        raise ValueError(f"reduce must be 'max' or 'mean', not {reduce!r}")
    n_heads, n_keys = q.shape[0], k.shape[1]
    (r0, r1), (c0, c1) = _span(rows, q.shape[1]), _span(cols, n_keys)
    row_bins, col_bins = min(bins[0], r1 - r0), min(bins[1], c1 - c0)
    device = q.device
    row_bin = bin_edges(r1 - r0, row_bins).to(device)
    col_bin = bin_edges(c1 - c0, col_bins).to(device)
    n_out = 1 if average else n_heads
    total = torch.zeros(n_out, row_bins, col_bins, dtype=torch.float32, device=device)
    positions = torch.arange(r0 + offset, r1, stride, device=device)
    for chunk in positions.split(block_rows(n_heads, c1 - c0, budget, q.device)):
        key_start, key_end = rule.key_span(int(chunk[0]), int(chunk[-1]) + 1, n_keys)
        key_start, key_end = max(key_start, c0), min(key_end, c1)
        if key_end <= key_start:
            continue
        _pool_block(total, q, k, lse, rule, chunk, (key_start, key_end), col_bin[key_start - c0 : key_end - c0],
                    row_bin[chunk - r0], reduce, average)
    return _block_means(total, row_bin, col_bin) if reduce == "mean" else total


def _max_pooled_even(q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, rows: tuple[int, int],
                     cols: tuple[int, int], row_bins: int, col_bins: int, budget: int | None) -> torch.Tensor:
    """pooled_heads' max over bins of equal size. exp is increasing, so the largest probability
    of a block is exp(its largest score − lse): the scores are pooled first and only the pooled
    ones are exponentiated (a bin's worth fewer exps). Blocks are whole row bins; their key spans
    are widened to whole column bins (the masked keys score −inf: they add nothing to a max), and
    every block's scores go into one buffer. The same numbers as pooling the probabilities."""
    (r0, r1), (c0, c1) = rows, cols
    n_heads, n_keys = q.shape[0], k.shape[1]
    row_width, col_width = (r1 - r0) // row_bins, (c1 - c0) // col_bins
    step = max(row_width, block_rows(n_heads, c1 - c0, budget, q.device) // row_width * row_width)
    buffer = torch.empty(n_heads * min(step, r1 - r0) * (c1 - c0), dtype=torch.float32, device=q.device)
    total = torch.zeros(n_heads, row_bins, col_bins, dtype=torch.float32, device=q.device)
    for start, end, key_start, key_end in _row_blocks(rule, rows, cols, n_keys, step):
        key_start = c0 + (key_start - c0) // col_width * col_width
        key_end = c0 + -(-(key_end - c0) // col_width) * col_width
        n_rows, n_cols = end - start, key_end - key_start
        s = scores(q[:, start:end], k[:, key_start:key_end], rule, torch.arange(start, end, device=q.device),
                   torch.arange(key_start, key_end, device=q.device), out=buffer[: n_heads * n_rows * n_cols])
        best = s.view(n_heads, n_rows, n_cols // col_width, col_width).amax(-1)
        best = best.sub_(lse[:, start:end, None]).exp_()
        best = best.view(n_heads, n_rows // row_width, row_width, -1).amax(2)
        row_at, col_at = (start - r0) // row_width, (key_start - c0) // col_width
        region = total[:, row_at : row_at + n_rows // row_width, col_at : col_at + n_cols // col_width]
        torch.maximum(region, best, out=region)
    return total


def columns_of_heads(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, rule: ScoreRule, keys: torch.Tensor,
    budget: int | None = None,
) -> torch.Tensor:
    """Every head's attention on key positions `keys`, from every query: heads × T × len(keys),
    float32, exact (what attends to a token: its column). O(T · len(keys) · d) per head."""
    n_heads, n_rows = q.shape[0], q.shape[1]
    keys = keys.to(q.device)
    out = torch.empty(n_heads, n_rows, len(keys), dtype=torch.float32, device=q.device)
    step = block_rows(n_heads, len(keys), budget, q.device)
    for start in range(0, n_rows, step):
        end = min(n_rows, start + step)
        rows = torch.arange(start, end, device=q.device)
        out[:, start:end] = probabilities(q[:, start:end], k[:, keys], lse[:, start:end], rule, rows, keys)
    return out


def nbytes(*tensors: torch.Tensor | None) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def full_attention_bytes(n_layers: int, n_heads: int, n_queries: int, n_keys: int) -> int:
    """What layers × heads × T × T float32 would take."""
    return 4 * n_layers * n_heads * n_queries * n_keys


def describe_bytes(n: int) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{math.ceil(n / 1e3)} kB"
