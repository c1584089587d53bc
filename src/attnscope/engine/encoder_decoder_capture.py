"""An encoder-decoder's generation, captured where transformers calls the attention function
(issue 48 item 5): the source's pass through the encoder, then one decoder token a step through
the cache, each attention call recognised by its module (encoder, decoder self-attention or
cross-attention, and its layer).

Kept per layer, in buffers with room for the whole run (allocated once):
- the encoder's queries, keys and row log-sum-exps over the source (one pass);
- the cross-attention's keys over the source (the first step's, which the cache then reuses),
  and each step's query row and its log-sum-exp over the source;
- the decoder's queries and keys (the step's key taken from the attention call) and each step's
  log-sum-exp over its keys so far;
- where the model adds a relative-position bias to its scores (T5's `position_bias`), that bias
  as a function of the distance i − j (encoder_decoder_long.relative_bias): a step adds the bias
  of its one new distance. A bias that is no function of i − j is refused, never shown wrongly.

The layer's output is the model's own kernel's; on the first steps and a sample after
(generation.checked_step) it is checked against Σ_j A_ij v_j recomputed from what was kept, as
fast_capture checks a decoder's, and the cache's keys against the kept ones. A step adds O(1)
per layer and head to what is kept and reads O(T): never T × T.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..errors import NoAttentionError
from . import exact_attention as exact
from .attention_registry import register_attention
from .encoder_decoder_long import PartAttention, relative_bias
from .fast_capture import _check_close, _own_kernel, _weighted_values

IMPLEMENTATION = "attnscope_encoder_decoder_rows"
PARTS = ("encoder", "decoder", "cross")
# Keyword arguments of the attention call that change the scores in ways not reproduced here.
_UNSUPPORTED = ("alibi", "attn_bias", "score_mod", "block_mask", "attention_bias", "sliding_window", "softcap", "s_aux")
_local = threading.local()


class EncoderDecoderCapture:
    """What a generation keeps of an encoder-decoder's attention (see the module's doc), filled by
    the attention calls of each forward run under `capturing`.

    name: the model's, for messages; groups: the engine's attention modules by part
    (hooks.encoder_decoder_groups), in layer order; room: the decoder positions the run may reach
    (its start token and every new token); own_implementation: the attention the model itself
    runs (its kernel gives the output)."""

    def __init__(self, name: str, groups: dict[str, list[Any]], room: int, own_implementation: str | None):
        self.name = name
        self.which = {id(module): (part, layer) for part in PARTS for layer, module in enumerate(groups[part])}
        self.n_layers = {part: len(groups[part]) for part in PARTS}
        self.room = room
        self.kernel = _own_kernel(own_implementation)
        self.parts: dict[str, PartAttention | None] = dict.fromkeys(PARTS)
        self.n_source = 0
        self.length = 0  # decoder positions filled
        self.position = 0  # the decoder position of the step being run
        self.check = True  # whether this forward's outputs and caches are checked
        self.calls: dict[str, int] = dict.fromkeys(PARTS, 0)

    # -- the calls ------------------------------------------------------------------------------

    def attend(self, module, query, key, value, mask, dropout, scaling, is_causal, kwargs):
        """One attention call: kept, and the model's own kernel's output returned."""
        found = self.which.get(id(module))
        if found is None:
            raise NoAttentionError(f"{type(module).__name__} is no attention module attnscope found in this model.")
        part, layer = found
        if dropout:
            raise NoAttentionError("Attention dropout is on: the model must be in eval mode.")
        for name in _UNSUPPORTED:
            if kwargs.get(name) is not None:
                raise NoAttentionError(f"{type(module).__name__} adds `{name}` to its scores, which attnscope cannot "
                                       "recompute for an encoder-decoder's generation.")
        if query.shape[0] != 1:
            raise NoAttentionError("A generation reads one text at a time.")
        _check_mask(mask, module)
        output, _ = self.kernel(module, query, key, value, mask, dropout=0.0, scaling=scaling, is_causal=is_causal,
                                **kwargs)
        q, k, v = query[0].detach(), key[0].detach(), value[0].detach()
        bias = kwargs.get("position_bias")
        bias = None if bias is None else bias.detach()
        rule = exact.ScoreRule(scaling=float(scaling) if scaling is not None else q.shape[-1] ** -0.5,
                               causal=part == "decoder")
        kept = {"encoder": self._encoder, "decoder": self._decoder, "cross": self._cross}[part]
        weights = kept(module, layer, q, k, rule, bias)
        if weights is not None:
            rows, p = weights
            given = output[0].detach().float().transpose(0, 1)[:, rows]
            _check_close(module, layer, _weighted_values(p.float(), v), given, v)
        self.calls[part] += 1
        return output, None

    def _part(self, name: str, layer: int, q: torch.Tensor, k: torch.Tensor, rule: exact.ScoreRule,
              n_queries: int, n_keys: int | None, n_bias: int | None, origin: int) -> PartAttention:
        """The part's buffers, made at its first layer's first call, each layer's at its first."""
        part = self.parts[name]
        if part is None:
            n_layers = self.n_layers[name]
            dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
            part = self.parts[name] = PartAttention(
                queries=[], keys=[], rules=[], bias_origin=origin,
                lse=torch.zeros(n_layers, q.shape[0], n_queries, dtype=dtype, device=q.device),
                bias=None if n_bias is None else torch.zeros(n_layers, q.shape[0], n_bias, dtype=dtype, device=q.device))
        if layer == len(part.queries):
            part.queries.append(q.new_zeros(q.shape[0], n_queries, q.shape[-1]))
            part.keys.append(k.new_zeros(k.shape[0], n_keys, k.shape[-1]) if n_keys is not None else k.clone())
            part.rules.append(rule)
        elif layer > len(part.queries) or part.rules[layer] != rule:
            raise NoAttentionError(f"The {name} attention's layer {layer} was called out of order or with other "
                                   "settings than before: attnscope cannot follow it.")
        return part

    def _encoder(self, module, layer, q, k, rule, bias):
        """The source's pass: its queries, keys, log-sum-exps and relative-position bias."""
        n = q.shape[1]
        if k.shape[1] != n or self.length:
            raise NoAttentionError("The encoder reads the source once, before the decoder's first step.")
        self.n_source = n
        table = _bias_table(bias, n, module) if bias is not None else None
        part = self._part("encoder", layer, q, k, rule, n, None, None if table is None else 2 * n - 1, n - 1)
        if (table is None) != (part.bias is None):
            raise NoAttentionError("The encoder's layers add a position bias in some layers and not others.")
        part.queries[layer].copy_(q)
        if table is not None:
            part.bias[layer] = table
        positions = torch.arange(n, device=q.device)
        for rows in positions.split(exact.block_rows(q.shape[0], n, device=q.device)):
            s = part.scores(layer, slice(None), q[:, rows], part.keys[layer], rows, positions)
            part.lse[layer, :, rows] = torch.logsumexp(s, dim=-1)
        rows = torch.tensor(sorted({0, n // 2, n - 1}), device=q.device)
        return rows, part.probabilities(layer, slice(None), rows, positions)

    def _cross(self, module, layer, q, k, rule, bias):
        """A step's cross-attention row over the source: its query and log-sum-exp (the keys: the
        first step's, which the cache reuses)."""
        t, n = self.position, self.n_source
        if q.shape[1] != 1 or k.shape[1] != n:
            raise NoAttentionError(f"The cross-attention of layer {layer} read {k.shape[1]} keys for a source of {n} "
                                   "tokens, or more than one new token: attnscope cannot follow it.")
        if bias is not None and bool(bias.any()):
            raise NoAttentionError(f"{type(module).__name__} adds a position bias to its cross-attention, which "
                                   "attnscope cannot recompute.")
        part = self._part("cross", layer, q, k, rule, self.room, None, None, 0)
        if t and self.check and not torch.equal(part.keys[layer], k):
            raise NoAttentionError(f"Layer {layer}'s cross-attention cache changed its keys between steps.")
        part.queries[layer][:, t] = q[:, 0]
        rows, cols = torch.tensor([t], device=q.device), torch.arange(n, device=q.device)
        s = part.scores(layer, slice(None), q, part.keys[layer], rows, cols)
        part.lse[layer, :, t] = torch.logsumexp(s, dim=-1)[:, 0]
        return (torch.tensor([0]), part.probabilities(layer, slice(None), rows, cols)) if self.check else None

    def _decoder(self, module, layer, q, k, rule, bias):
        """A step's self-attention row: its query, its key (written in at its position), its
        log-sum-exp over every key so far and its bias at the one new distance."""
        t = self.position
        if q.shape[1] != 1 or k.shape[1] != t + 1:
            raise NoAttentionError(f"Layer {layer}'s cache ({type(module).__name__}) does not hold every key so far "
                                   f"({k.shape[1]} for position {t}): attnscope cannot recompute this step.")
        part = self._part("decoder", layer, q, k[:, :0], rule, self.room, self.room,
                          None if bias is None else self.room, 0)
        if (bias is None) != (part.bias is None):
            raise NoAttentionError("The decoder adds a position bias at some steps or layers and not others.")
        keys = part.keys[layer]
        if self.check and not torch.equal(keys[:, :t], k[:, :t]):
            raise NoAttentionError(f"Layer {layer}'s cache ({type(module).__name__}) does not hold the keys its "
                                   "attention read before: attnscope cannot recompute this step.")
        keys[:, t] = k[:, t]
        part.queries[layer][:, t] = q[:, 0]
        if bias is not None:
            row = _bias_row(bias, q.shape[0], part.bias.dtype)  # heads × (t + 1): keys 0..t, distances t..0
            part.bias[layer, :, t] = row[:, 0]
            if not torch.equal(part.bias[layer, :, : t + 1].flip(-1), row):
                raise NoAttentionError(f"{type(module).__name__}'s position bias is no function of the distance "
                                       "between query and key: attnscope cannot recompute it.")
        rows, cols = torch.tensor([t], device=q.device), torch.arange(t + 1, device=q.device)
        s = part.scores(layer, slice(None), q, keys[:, : t + 1], rows, cols)
        part.lse[layer, :, t] = torch.logsumexp(s, dim=-1)[:, 0]
        return (torch.tensor([0]), part.probabilities(layer, slice(None), rows, cols)) if self.check else None

    # -- what a run shows -----------------------------------------------------------------------

    def step_done(self, prefill: bool) -> None:
        """After a forward: every layer of every part was called once (the encoder's only in the
        first), and the step's position is filled."""
        expected = {"encoder": self.n_layers["encoder"] if prefill else 0,
                    "decoder": self.n_layers["decoder"], "cross": self.n_layers["cross"]}
        if self.calls != expected:
            ran, wanted = sum(self.calls.values()), sum(expected.values())
            raise NoAttentionError(f"{self.name} cannot generate with attention: {ran} of the {wanted} attention calls "
                                   "of its pass went through transformers' attention functions, where attnscope keeps "
                                   "each step's rows (its family computes attention its own way). "
                                   "attnscope.show(source, text_b=output, model=...) shows a given output's attention.")
        self.calls = dict.fromkeys(PARTS, 0)
        self.length = self.position + 1

    def shown(self) -> tuple[PartAttention | None, PartAttention, PartAttention]:
        """(encoder, cross, decoder) over the decoder positions filled: views of the buffers. The
        encoder is None where its layers or heads do not pair with the decoder's."""
        n = self.length
        cross, decoder = self._filled(self.parts["cross"], n, False), self._filled(self.parts["decoder"], n, True)
        encoder = self.parts["encoder"]
        if encoder is not None and (encoder.n_layers, encoder.n_heads) != (decoder.n_layers, decoder.n_heads):
            encoder = None
        return encoder, cross, decoder

    @staticmethod
    def _filled(part: PartAttention, n: int, own_keys: bool) -> PartAttention:
        """The part's first n decoder positions (its keys too where they are the decoder's own)."""
        return PartAttention(queries=[q[:, :n] for q in part.queries],
                             keys=[k[:, :n] if own_keys else k for k in part.keys],
                             lse=part.lse[:, :, :n], rules=part.rules,
                             bias=None if part.bias is None else part.bias[:, :, :n], bias_origin=part.bias_origin)


def _check_mask(mask: torch.Tensor | None, module: Any) -> None:
    """No padding: every key the call reads is one its query may see (a decoder step's are all
    before it; the source has no padding)."""
    if mask is None:
        return
    allowed = mask if mask.dtype == torch.bool else mask == 0
    if not bool(allowed.all()):
        raise NoAttentionError(f"{type(module).__name__} was given a mask that hides some keys (padding): "
                               "attnscope cannot recompute its attention.")


def _bias_row(bias: torch.Tensor, n_heads: int, dtype: torch.dtype) -> torch.Tensor:
    """A position bias of 1 × heads (or 1) × queries × keys as heads × keys of its last query, in `dtype`."""
    return bias[0, :, -1].to(dtype).expand(n_heads, -1)


def _bias_table(bias: torch.Tensor, n: int, module: Any) -> torch.Tensor:
    """The encoder's position bias (1 × heads × n × n) as heads × (2n − 1), its value at distance
    i − j + n − 1 (float32; float64 for a float64 model); refused where it is no function of i − j."""
    full = bias[0].to(torch.float64 if bias.dtype == torch.float64 else torch.float32)
    table = torch.cat([full[:, 0, :].flip(-1), full[:, 1:, 0]], dim=-1)  # distances −(n−1) … n − 1
    positions = torch.arange(n, device=table.device)
    if full.shape[-2:] != (n, n) or not torch.equal(relative_bias(table, n - 1, positions, positions),
                                                    full.expand(table.shape[0], n, n)):
        raise NoAttentionError(f"{type(module).__name__}'s position bias is no function of the distance between "
                               "query and key: attnscope cannot recompute it.")
    return table


def attention_function(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                       is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: the model's own kernel's output, kept by this
    thread's capture (another thread's call, or one outside a run, is passed through untouched)."""
    capture: EncoderDecoderCapture | None = getattr(_local, "capture", None)
    if capture is None:
        return _own_kernel(None)(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                 is_causal=is_causal, **kwargs)
    return capture.attend(module, query, key, value, attention_mask, dropout, scaling, is_causal, kwargs)


def register() -> None:
    """Make IMPLEMENTATION a name transformers knows (its masks: sdpa's)."""
    from transformers.masking_utils import sdpa_mask

    register_attention(IMPLEMENTATION, attention_function, sdpa_mask)


@contextmanager
def capturing(capture: EncoderDecoderCapture, position: int, check: bool) -> Iterator[EncoderDecoderCapture]:
    """Record this thread's attention calls of the block into `capture`, the decoder at `position`."""
    capture.position, capture.check = position, check
    capture.calls = dict.fromkeys(PARTS, 0)
    previous = getattr(_local, "capture", None)
    _local.capture = capture
    try:
        yield capture
    finally:
        _local.capture = previous
