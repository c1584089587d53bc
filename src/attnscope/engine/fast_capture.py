"""Long inputs: the model runs its own fast attention, and each layer's q, k and row log-sum-exp
are kept instead of the layers × heads × T × T weights.

The capture sits where transformers' attention modules call their attention function (its
AttentionInterface): it sees the post-rotary q and k exactly as the kernel does, the key heads at
their own count, and what else changes the scores (the sliding window, soft-capping, sink
logits). It runs the model's own kernel (sdpa for a model in eager mode; the chunked exact
computation of exact_attention for layers sdpa cannot run), adds each row's log-sum-exp a block
at a time, and checks a few rows of the kernel's output against Σ_j A_ij v_j recomputed from
what it kept: a model that changes its scores in a way this does not know is refused, never
shown wrongly.

A generation step (generation.py) reads one new token against the cache: the capture then holds
each layer's keys so far (`keys_so_far`, with room for the whole run), writes the step's new key
in at `position` (taken from the attention call, not the cache, whose sliding-window layers drop
keys) and keeps the step's query row and its log-sum-exp over every key so far.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import NoAttentionError
from . import value_norms
from .attention_registry import register_attention
from .exact_attention import ScoreRule, attend, block_rows, logsumexp_at, probabilities, row_logsumexp, scores

IMPLEMENTATION = "attnscope_exact_rows"
# Keyword arguments of the attention call that change the scores in ways not reproduced here.
_UNSUPPORTED = ("position_bias", "alibi", "attn_bias", "score_mod", "block_mask", "attention_bias")
_local = threading.local()


@dataclass
class LayerCapture:
    queries: torch.Tensor  # heads × T × d, post-rotary, in the model's dtype and on its device
    keys: torch.Tensor  # key heads × T × d
    lse: torch.Tensor  # heads × T, float32
    rule: ScoreRule
    value_norms: torch.Tensor | None = None  # heads × T: ‖f_h(x_j)‖ (value_norms.py), or None


@dataclass
class FastCapture:
    own_implementation: str
    layers: list[LayerCapture] = field(default_factory=list)
    # Rows of each layer's output checked against the recomputed attention (first, last, between).
    checked_rows: int = 4
    # Each attention module's output projection weight (value_norms.output_projection), by id(module):
    # BERT's is its sibling's, which the attention function cannot find from the module alone.
    projections: dict[int, torch.Tensor] = field(default_factory=dict)
    # A generation step: per layer the keys of every position so far (key heads × room × d, the
    # step's key written in at `position`) and the rule the prefill found, which each step must
    # repeat. None: a prefill or a long run (one pass over the whole text).
    keys_so_far: list[torch.Tensor] | None = None
    position: int = 0
    rules: list[ScoreRule] | None = None
    # A generation step whose output rows are recomputed and checked against the model's kernel: the
    # first steps and then a sample (generation.CHECKED_STEPS). The check is a second attention over
    # every key and a scan of the values; every step's row is exact either way (its log-sum-exp).
    check_step: bool = True
    # A generation run's layers (by index) whose kernel output the CPU's fused kernel with
    # log-sum-exps gave bit for bit on a checked step (_fused_step): their unchecked steps take
    # output and log-sum-exp from that one call. Filled on checked steps; None outside a run.
    fused_layers: dict[int, bool] | None = None
    # A step's layers whose value norms are made at the step's end, all at once (finish_step).
    pending_norms: list[tuple[LayerCapture, torch.Tensor, torch.Tensor]] = field(default_factory=list)


@functools.cache
def _attention_functions() -> tuple[Any, Any]:
    """transformers' sdpa function and its registry (imported once: the kernel is looked up in
    every layer of every generation step)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return sdpa_attention_forward, ALL_ATTENTION_FUNCTIONS


def _own_kernel(name: str):
    """The attention function the model itself would run (sdpa for a model set to eager: the
    same attention, fused, without T × T per layer)."""
    sdpa_attention_forward, functions = _attention_functions()
    if name in (None, "eager", "sdpa", IMPLEMENTATION) or name not in functions:
        return sdpa_attention_forward
    return functions[name]


def _rule(module: Any, query: torch.Tensor, scaling: float | None, is_causal: bool | None, kwargs: dict) -> ScoreRule:
    for name in _UNSUPPORTED:
        if kwargs.get(name) is not None:
            raise NoAttentionError(
                f"{type(module).__name__} adds `{name}` to its attention scores, which attnscope cannot recompute "
                "from queries and keys yet: this model is shown only with its full attention (shorter inputs)."
            )
    sinks = kwargs.get("s_aux")
    return ScoreRule(
        scaling=float(scaling) if scaling is not None else query.shape[-1] ** -0.5,
        causal=bool(is_causal if is_causal is not None else getattr(module, "is_causal", True)),
        window=int(kwargs["sliding_window"]) if kwargs.get("sliding_window") else None,
        softcap=float(kwargs["softcap"]) if kwargs.get("softcap") else None,
        sinks=None if sinks is None else sinks.detach().float().clone(),
    )


def _check_mask(mask: torch.Tensor | None, rule: ScoreRule, n: int, module: Any) -> None:
    """The mask the model built must be the one the rule describes (no padding, no prefix)."""
    if mask is None:
        return
    if mask.dim() != 4 or mask.shape[0] != 1 or mask.shape[-2:] != (n, n):
        raise NoAttentionError(f"{type(module).__name__} was given an attention mask of shape {tuple(mask.shape)}, "
                               "which attnscope cannot recompute.")
    step = block_rows(1, n, device=mask.device)
    for start in range(0, n, step):
        end = min(n, start + step)
        block = mask[0, :, start:end]
        given = block if block.dtype == torch.bool else block == 0
        expected = rule.allowed(torch.arange(start, end, device=mask.device), torch.arange(n, device=mask.device))
        if expected is None:
            expected = torch.ones(end - start, n, dtype=torch.bool, device=mask.device)
        if not bool((given == expected).all()):
            raise NoAttentionError(
                f"{type(module).__name__}'s attention mask is not the causal or sliding-window mask it declares "
                "(padding, or a prefix seen both ways): attnscope cannot recompute its attention from q and k."
            )


def _check_output(module: Any, capture: FastCapture, layer: LayerCapture, value: torch.Tensor, output: torch.Tensor) -> None:
    """A few rows of the kernel's output (T × heads × d_v) against Σ_j A_ij v_j from what was kept."""
    n = layer.queries.shape[1]
    rows = sorted({0, n // 3, (2 * n) // 3, n - 1})[: capture.checked_rows]
    index = torch.tensor(rows, device=layer.queries.device)
    keys = torch.arange(n, device=layer.queries.device)
    p = probabilities(layer.queries[:, index], layer.keys, layer.lse[:, index], layer.rule, index, keys)
    _check_close(module, len(capture.layers), _weighted_values(p, value), output[index].float().transpose(0, 1), value)


def _weighted_values(p: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Σ_j A_ij v_j: p (heads × rows × keys) on value (key heads × keys × d_v) → heads × rows × d_v, float32."""
    n_heads, n_key_heads = p.shape[0], value.shape[0]
    group = n_heads // n_key_heads
    grouped = p.reshape(n_key_heads, group, p.shape[1], p.shape[2])
    return torch.matmul(grouped, value.float()[:, None]).reshape(n_heads, p.shape[1], -1)


def _check_close(module: Any, layer_index: int, recomputed: torch.Tensor, given: torch.Tensor, value: torch.Tensor) -> None:
    """The kernel's output rows (heads × rows × d_v) against the recomputed ones, within rounding."""
    scale = float(value.float().abs().max()) or 1.0
    tolerance = (1e-3 if value.dtype in (torch.float32, torch.float64) else 3e-2) * scale + 1e-5
    difference = float((recomputed - given).abs().max())
    if not difference <= tolerance:
        raise NoAttentionError(
            f"Layer {layer_index} of this model ({type(module).__name__}) attends in a way attnscope does not "
            f"recompute from its queries and keys (output differs by {difference:.2g}): it is not shown on demand, "
            "never shown wrongly. Shorter inputs show its full attention."
        )


def _same_rule(a: ScoreRule, b: ScoreRule) -> bool:
    if (a.scaling, a.causal, a.window, a.softcap) != (b.scaling, b.causal, b.window, b.softcap):
        return False
    if a.sinks is None or b.sinks is None:
        return a.sinks is None and b.sinks is None
    return bool(torch.equal(a.sinks.cpu(), b.sinks.cpu()))


def _decode_step(module, capture: FastCapture, kernel, query, key, value, mask, scaling, is_causal, kwargs):
    """One generation step of one layer: query 1 × heads × 1 × d (the new token), key and value
    1 × key heads × L × d_v (the L keys the cache shows: all so far, or a sliding window's last).
    The new key goes into the layer's keys so far; its row's log-sum-exp is over all of them.
    → (1 × 1 × heads × d_v output, None), the model's own kernel's where it runs the layer."""
    index, t = len(capture.layers), capture.position
    if query.shape[0] != 1 or query.shape[2] != 1:
        raise NoAttentionError("A generation step reads one new token of one text at a time.")
    rule = _rule(module, query, scaling, is_causal, kwargs)
    if not _same_rule(rule, capture.rules[index]):
        raise NoAttentionError(f"Layer {index} ({type(module).__name__}) scored a generation step with other settings "
                               f"than its prompt ({rule} after {capture.rules[index]}): attnscope cannot follow it.")
    rule = capture.rules[index]
    keys = capture.keys_so_far[index]
    q = query[0].detach()
    keys[:, t] = key[0, :, -1].detach()
    visible = key.shape[2]
    first = t + 1 - visible  # the position of the first key the cache shows
    if first < 0 or rule.key_span(t, t + 1, t + 1)[0] < first or not torch.equal(key[0, :, 0].detach(), keys[:, first]):
        raise NoAttentionError(f"Layer {index}'s cache ({type(module).__name__}) does not hold the keys its attention "
                               "reads: attnscope cannot recompute this generation step.")
    if mask is not None:
        rows, cols = torch.tensor([t], device=q.device), torch.arange(first, t + 1, device=q.device)
        given = mask[0, :, -1:, -visible:]
        given = given if given.dtype == torch.bool else given == 0
        expected = rule.allowed(rows, cols)
        if mask.shape[-1] != visible or not bool((given == (True if expected is None else expected)).all()):
            raise NoAttentionError(f"Layer {index}'s mask for a generation step is not the causal or sliding-window "
                                   "mask it declares: attnscope cannot recompute its attention.")
    fused = _fused_step(capture, index, rule, query, key, value, mask, scaling, first)
    if fused is not None and not capture.check_step:
        output, lse = fused
    elif fused is not None and _fused_agrees(module, capture, index, kernel, rule, q, query, key, value, scaling,
                                             is_causal, kwargs, fused):
        output, lse = fused
    else:
        output, lse = _checked_step(module, capture, index, kernel, rule, q, query, key, value, mask, scaling,
                                    is_causal, kwargs, first)
    layer = LayerCapture(queries=q, keys=keys[:, t : t + 1], lse=lse, rule=rule)
    weight = _norms_projection(module, capture)
    if weight is not None:
        capture.pending_norms.append((layer, value[0, :, -1:].detach(), weight))
    capture.layers.append(layer)
    return output, None


def _fused_agrees(module, capture: FastCapture, index: int, kernel, rule: ScoreRule, q, query, key, value, scaling,
                  is_causal, kwargs, fused) -> bool:
    """On a checked step, whether the fused call serves this layer (noted for the unchecked steps
    after it): the model's kernel gives its output bit for bit, and its log-sum-exp is attnscope's
    own over the keys kept. Then the rows from what is kept are the kernel's, with no Σ_j A_ij v_j
    to recompute (the check that made a checked step 4 × an unchecked one on a loaded machine)."""
    output, _ = kernel(module, query, key, value, None, dropout=0.0, scaling=scaling, is_causal=is_causal, **kwargs)
    t = capture.position
    lse = logsumexp_at(q, capture.keys_so_far[index][:, : t + 1], rule, torch.tensor([t], device=q.device))
    agrees = bool(torch.equal(fused[0], output)) and bool(torch.allclose(fused[1], lse, rtol=1e-5, atol=1e-5))
    capture.fused_layers[index] = agrees
    return agrees


def _checked_step(module, capture: FastCapture, index: int, kernel, rule: ScoreRule, q, query, key, value, mask,
                  scaling, is_causal, kwargs, first: int):
    """A step's output and log-sum-exp the long way: the log-sum-exp over every key so far, the
    model's kernel (or the row computed here for soft-capped or sink layers, which sdpa runs
    neither of), and on checked steps the kernel's output against Σ_j A_ij v_j."""
    t = capture.position
    keys = capture.keys_so_far[index]
    rows = torch.tensor([t], device=q.device)
    lse = logsumexp_at(q, keys[:, : t + 1], rule, rows)
    own_row = (rule.softcap is not None or rule.sinks is not None) and capture.own_implementation in ("eager", "sdpa")
    recomputed = None
    if own_row or capture.check_step:
        cols = torch.arange(first, t + 1, device=q.device)
        p = probabilities(q, keys[:, first : t + 1], lse, rule, rows, cols)
        recomputed = _weighted_values(p, value[0].detach())  # heads × 1 × d_v
    if own_row:
        return recomputed.transpose(0, 1)[None].to(value.dtype), lse  # sdpa runs neither: the same row, computed here
    output, _ = kernel(module, query, key, value, mask, dropout=0.0, scaling=scaling, is_causal=is_causal, **kwargs)
    if recomputed is not None:
        _check_close(module, index, recomputed, output[0].detach().float().transpose(0, 1), value[0])
    return output, lse


def _fused_step(capture: FastCapture, index: int, rule: ScoreRule, query, key, value, mask, scaling,
                first: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A step's output (1 × 1 × heads × d_v) and log-sum-exp (heads × 1, float32) from one call of
    the CPU's fused kernel, the one torch's sdpa runs for one query without a mask (key-value
    heads read as they are): one pass over the keys instead of the kernel's and a second for the
    log-sum-exp (which, with the value norms, made a step 1.3–3 × model.generate's). Only where
    the layer's row is plain (every key so far, no mask, soft-cap or sink) and sdpa is the
    model's kernel; on unchecked steps only for layers where it matched the kernel bit for bit on
    a checked one. None otherwise, or where the op refuses."""
    fused = capture.fused_layers
    if fused is None or not (capture.check_step or fused.get(index, False)):
        return None
    if (query.device.type != "cpu" or mask is not None or first != 0 or capture.own_implementation not in ("eager", "sdpa")
            or rule.softcap is not None or rule.sinks is not None or rule.key_span(capture.position, capture.position + 1,
                                                                                   capture.position + 1)[0] != 0):
        return None
    try:
        output, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, 0.0, False,
                                                                                 scale=scaling)
    except (RuntimeError, AttributeError, NotImplementedError):  # a dtype or shape the op does not take
        return None
    return output.transpose(1, 2).contiguous(), lse[0].float()


def _norms_projection(module: Any, capture: FastCapture) -> torch.Tensor | None:
    """The output projection weight value norms are made with (the run's, else the module's
    own); None where none is found or the heads' outputs are gated (value_norms.gated)."""
    if value_norms.gated(module):
        return None
    weight = capture.projections.get(id(module))
    if weight is None:
        try:
            weight, _ = value_norms.output_projection(None, module)
        except LookupError:
            return None
    return weight


def finish_step(capture: FastCapture) -> None:
    """A generation step's value norms, every layer's at once (value_norms.norms_of_layers)."""
    pending, capture.pending_norms = capture.pending_norms, []
    if pending:
        found = value_norms.norms_of_layers([values for _, values, _ in pending], [weight for _, _, weight in pending])
        for (layer, _, _), layer_norms in zip(pending, found):
            layer.value_norms = layer_norms


def _fused_with_lse(module, query, key, value, mask, scaling, is_causal, own: str):
    """The fused attention kernels that also return each row's log-sum-exp: one pass instead of
    two (the CPU's flash attention; on a GPU flash attention for half precision, else the
    memory-efficient kernel). Only where sdpa is the kernel the model would run (eager or sdpa) and
    its mask is plain causal or none; None otherwise, when the op refuses, or when its
    log-sum-exps disagree with attnscope's own on a few rows (_lse_agrees). It is given the model's
    own arguments, as sdpa would be (not attnscope's reading of them: the output check compares
    the two)."""
    if query.device.type not in ("cpu", "cuda") or mask is not None or own not in ("eager", "sdpa"):
        return None
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True)) and query.shape[2] > 1
    group = query.shape[1] // key.shape[1]
    try:
        if query.device.type == "cpu":
            output, lse = _cpu_attention_with_lse(query, key, value, causal, scaling, group)
        else:
            key, value = (t.repeat_interleave(group, dim=1) if group > 1 else t for t in (key, value))
            output, lse = _cuda_attention_with_lse(query, key, value, causal, scaling)
    except (RuntimeError, AttributeError, NotImplementedError):  # a dtype, shape or device the op does not take
        return None
    # The memory-efficient kernel pads its log-sum-exps to a multiple of 32 rows.
    lse = lse[0, :, : query.shape[2]].float().contiguous()
    return output.transpose(1, 2), lse


def _cpu_attention_with_lse(query, key, value, causal: bool, scaling, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The CPU's flash kernel, which reads grouped key-value heads as they are (as sdpa's
    enable_gqa does: the same numbers), and only where it refuses them from keys and values
    repeated for each query head (at 8,192 tokens two copies of 38 MB a layer on SmolLM2)."""
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    try:
        return flash(query, key, value, 0.0, causal, scale=scaling)
    except RuntimeError:
        if group == 1:
            raise
    key, value = (t.repeat_interleave(group, dim=1) for t in (key, value))
    return flash(query, key, value, 0.0, causal, scale=scaling)


def _cuda_attention_with_lse(query, key, value, causal: bool, scaling) -> tuple[torch.Tensor, torch.Tensor]:
    """(B × heads × T × d output, B × heads × T' log-sum-exp) from a CUDA fused kernel."""
    if query.dtype in (torch.float16, torch.bfloat16):
        try:
            found = torch.ops.aten._scaled_dot_product_flash_attention(query, key, value, 0.0, causal, False, scale=scaling)
            return found[0], found[1]
        except RuntimeError:  # a head size or card flash attention does not take
            pass
    found = torch.ops.aten._scaled_dot_product_efficient_attention(query, key, value, None, True, 0.0, causal, scale=scaling)
    return found[0], found[1]


def _lse_agrees(q: torch.Tensor, k: torch.Tensor, rule: ScoreRule, lse: torch.Tensor) -> bool:
    """A fused kernel's log-sum-exps against attnscope's own scores on three rows: a kernel that
    rounds its products (TF32) or means another log base is not kept."""
    n = q.shape[1]
    rows = torch.tensor(sorted({0, n // 2, n - 1}), device=q.device)
    own = torch.logsumexp(scores(q[:, rows], k, rule, rows, torch.arange(k.shape[1], device=q.device)), dim=-1)
    return bool(torch.allclose(lse[:, rows], own, rtol=1e-4, atol=1e-4))


def _value_norms(module: Any, values: torch.Tensor, capture: FastCapture) -> torch.Tensor | None:
    """‖f_h(x_j)‖ of the layer's heads from its values (key heads × T × d): heads × T floats kept,
    never the values themselves; None where _norms_projection finds none."""
    weight = _norms_projection(module, capture)
    return None if weight is None else value_norms.norms(values, weight)


def attention_function(
    module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: torch.Tensor | None,
    dropout: float = 0.0, scaling: float | None = None, is_causal: bool | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: (B × T × heads × d_v output, no weights)."""
    capture: FastCapture | None = getattr(_local, "capture", None)
    kernel = _own_kernel(capture.own_implementation if capture else None)
    if capture is None:  # another thread, or outside a run: the model's own attention, untouched
        return kernel(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs)
    if dropout:
        raise NoAttentionError("Attention dropout is on: the model must be in eval mode.")
    if capture.keys_so_far is not None:
        return _decode_step(module, capture, kernel, query, key, value, attention_mask, scaling, is_causal, kwargs)
    if query.shape[0] != 1 or query.shape[2] != key.shape[2]:
        raise NoAttentionError("On-demand attention reads one text at a time, without a cache.")
    rule = _rule(module, query, scaling, is_causal, kwargs)
    n = query.shape[2]
    _check_mask(attention_mask, rule, n, module)
    q, k, v = query[0].detach(), key[0].detach(), value[0].detach()
    if (rule.softcap is not None or rule.sinks is not None) and capture.own_implementation in ("eager", "sdpa"):
        # sdpa runs neither: the same attention a block of rows at a time, with its log-sum-exp.
        out, lse = attend(q, k, v, rule)
        output = out.transpose(0, 1)[None]
    else:
        fused = _fused_with_lse(module, query, key, value, attention_mask, scaling, is_causal, capture.own_implementation)
        if fused is not None and _lse_agrees(q, k, rule, fused[1]):
            output, lse = fused
        else:
            output, _ = kernel(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                               is_causal=is_causal, **kwargs)
            lse = row_logsumexp(q, k, rule)
    layer = LayerCapture(queries=q.clone(), keys=k.clone(), lse=lse, rule=rule, value_norms=_value_norms(module, v, capture))
    _check_output(module, capture, layer, v, output[0].detach())
    capture.layers.append(layer)
    return output, None


def register() -> None:
    """Make IMPLEMENTATION a name transformers knows (its masks: sdpa's). Harmless outside a run:
    it passes every call to the model's own kernel."""
    from transformers.masking_utils import sdpa_mask

    register_attention(IMPLEMENTATION, attention_function, sdpa_mask)


@contextmanager
def capturing(own_implementation: str | None, projections: dict[int, torch.Tensor] | None = None,
              keys_so_far: list[torch.Tensor] | None = None, position: int = 0,
              rules: list[ScoreRule] | None = None, check_step: bool = True,
              fused_layers: dict[int, bool] | None = None) -> Iterator[FastCapture]:
    """Record, for this thread, every attention call of the block (projections: each module's
    output projection; a generation step's with `keys_so_far`, `position`, `rules` and
    `fused_layers`: FastCapture)."""
    capture = FastCapture(own_implementation=own_implementation or "eager", projections=dict(projections or {}),
                          keys_so_far=keys_so_far, position=position, rules=rules, check_step=check_step,
                          fused_layers=fused_layers)
    previous = getattr(_local, "capture", None)
    _local.capture = capture
    try:
        yield capture
    finally:
        _local.capture = previous
