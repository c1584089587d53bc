"""How far two float32 computations of the same attention can honestly differ: bounds for tests that
compare two paths (eager softmax and on-demand rows, whole and a block at a time), taken from the
error analysis of those paths rather than from what one machine's float kernels happened to give.

A float32 weight is w = exp(x), with x = s − c: s = scale · q·k, c the row's offset (eager: the
row's max, then a division by Σ exp; on demand: the fused kernel's log-sum-exp). With unit
roundoff u = 2⁻²⁴ and M the largest |s| or |c| (≈ the largest |log-sum-exp|, since the weights that
matter have s near c):
- s, a head_dim-term dot product and a scaling: at most (√head_dim + 1)·u·M (the probabilistic
  rounding model of Higham & Mary 2019: the errors of a d-term sum grow as √d, not d, in practice);
- c: the same for the max term it is anchored on, plus u·M for the log of a sum;
- x = s − c: u·2M; exp: u; eager's division by a sum of n terms: (√n + 1)·u.
So one path's w carries a relative error of at most ((2√d + 4)·M + √n + 2)·u, and two paths
differ by at most twice that. A weight's error scales with the weight: a sum of a row's weights
(≤ 1) differs by at most that relative error, and so does its mean over rows.

On MiniLM (d = 32, M ≈ 38) this is 6.9e-5; the largest difference seen on one machine was 1.1e-5
for a single weight and 1.05e-6 for a mean of them (issue 46: an atol of 1e-6 failed there).
"""

from __future__ import annotations

import math

U32 = 2.0**-24  # float32's unit roundoff


def weight_error(largest_logit: float, head_dim: int, n_keys: int) -> float:
    """The most two float32 paths' softmax weights w can differ, relative to w (see above)."""
    one_path = ((2 * math.sqrt(head_dim) + 4) * largest_logit + math.sqrt(n_keys) + 2) * U32
    return 2 * one_path


def entropy_error(relative: float, n_keys: int) -> float:
    """A row's entropy −Σ w log w when each w is off by at most `relative`·w: Σ|1 + log w|·w·relative
    ≤ (1 + log n)·relative."""
    return (1 + math.log(n_keys)) * relative


def weight_error_of_runs(runs) -> float:
    """weight_error for on-demand runs (LongAttentionResult): their largest |log-sum-exp|, head
    size and length."""
    largest = max(float(run.lse.abs().max()) for run in runs)
    head_dim = max(int(run.queries[0].shape[-1]) for run in runs)
    n = max(run.n_tokens for run in runs)
    return weight_error(largest, head_dim, n)
