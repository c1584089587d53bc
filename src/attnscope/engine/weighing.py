"""What a view draws each attention weight as: the weight α itself, or Kobayashi et al. 2020's
norm-based weight ‖α_hij · f_h(x_j)‖ = α_hij · ‖f_h(x_j)‖ (value_norms.py: f_h(x_j) is what key j
passes through head h, (x_j W_V^h + b_V^h) W_O^h, without the output bias).

A short run's weighed result holds α·‖f‖ as its attention (layers × heads × T × T, the keys'
norms broadcast over the rows). A long run's keeps its queries, keys and row log-sum-exps, and
its rules add log ‖f_h(x_j)‖ to the scores after the softmax's log-sum-exp
(exact_attention.ScoreRule.key_log_weights): every row, tile and pooled map it serves is then
α·‖f‖, exact, and nothing of size T × T is made. A learned sink's share stays out of the rows, as
in the attention itself: weights are never renormalised.
"""

from __future__ import annotations

import dataclasses

import torch

from .. import checks
from ..errors import InputError
from .encoder_decoder_long import EncoderDecoderLongResult
from .results import AttentionResult, LongAttentionResult

# The weighings, as the widget's `weigh_by` trait names them, and how captions write the weight.
WEIGHINGS = ("attention", "value_norm")
WEIGHT_SYMBOL = {"attention": "A", "value_norm": "‖αf(x)‖"}


def no_value_norms(result: AttentionResult | LongAttentionResult) -> str:
    """Why a run cannot be weighed by value norm: empty when it can."""
    if result.value_norms is not None:
        return ""
    if isinstance(result, EncoderDecoderLongResult):  # its rows read three attentions, each with its own values
        return (f"Weighing by value norm is not kept for {result.model_name}'s generation: an output token's row reads "
                "the cross-attention's values and the decoder's own, and those are not recorded yet. "
                "attnscope.show(source, text_b=output, model=...) weighs a given output's attention.")
    if getattr(result, "key_tokens", None) is not None:
        return (f"Weighing by value norm needs what each key passes, and the value vectors of {result.model_name}'s "
                "cross-attention keys (the encoder's tokens through its value projection) were not captured: "
                "precomputed attention has none.")
    return (f"Weighing by value norm needs what each key passes (its value vector and the output projection), "
            f"and those of {result.model_name} were not captured: precomputed attention has no values, "
            "and a model whose attention cannot be hooked has none either; where a gate multiplies each head's output "
            "by the query's own factor (Qwen3-Next), what a key passes depends on the query, and no norm per key says it.")


def weighed(result: AttentionResult | LongAttentionResult, weigh_by: str) -> AttentionResult | LongAttentionResult:
    """`result` as the views draw it for `weigh_by` ("attention": itself; "value_norm": α·‖f‖)."""
    if not checks.one_of(weigh_by, WEIGHINGS):
        raise InputError(f"weigh_by must be one of {list(WEIGHINGS)}, not {checks.short_repr(weigh_by)}.")
    if weigh_by == "attention":
        return result
    reason = no_value_norms(result)
    if reason:
        raise InputError(reason)
    norms = result.value_norms.float()  # layers × heads × T keys
    if isinstance(result, LongAttentionResult):
        logs = norms.log()  # a norm of 0 passes nothing: log 0 = −inf, weight 0
        rules = [dataclasses.replace(rule, key_log_weights=logs[layer]) for layer, rule in enumerate(result.rules)]
        return dataclasses.replace(result, rules=rules)
    first = result.layer_attention(0)
    # Written in place, a layer at a time: one pass over L × H × T × T (a stack of products is two).
    attention = torch.empty(result.attention_shape, dtype=torch.float32, device=first.device)
    norms = norms.to(first.device)
    for layer in range(result.n_layers):
        torch.mul(result.layer_attention(layer), norms[layer, :, None, :], out=attention[layer])
    return dataclasses.replace(result, attention=attention, unmasked=None, compared=None)
