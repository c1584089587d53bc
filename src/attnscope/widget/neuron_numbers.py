"""The neuron view's numbers: how one query token's attention is computed, step by step.

For a layer, head and query token i: q_i, every key k_j, the element-wise products q_i × k_j,
the scaled dot products q_i·k_j · scale (+ the causal mask), and their softmax. Computed with
torch on the tensors' device, for that one query only, so nothing of size T²·d is ever built.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..engine.attention_model import AttentionResult


@dataclass
class NeuronSlice:
    query: torch.Tensor  # (d,)
    keys: torch.Tensor  # (T, d)
    products: torch.Tensor  # (T, d): query × key, element-wise
    scores: torch.Tensor  # (T,): q·k · scale, -inf where the causal mask hides a key
    softmax: torch.Tensor  # (T,)


def neuron_slice(result: AttentionResult, layer: int, head: int, query_index: int) -> NeuronSlice:
    if result.queries is None or result.keys is None:
        raise ValueError(f"Queries and keys were not captured for {result.model_name}: no neuron view.")
    n_layers, n_heads, n_tokens, _ = result.queries.shape
    for name, value, bound in (("layer", layer, n_layers), ("head", head, n_heads), ("query_index", query_index, n_tokens)):
        if not 0 <= value < bound:
            raise ValueError(f"{name}={value} is out of range 0..{bound - 1}.")
    query = result.queries[layer, head, query_index]
    keys = result.keys[layer, head]
    products = keys * query
    scores = products.sum(-1) * result.scaling[layer]
    if result.score_bias is not None:  # T5: the learned relative-position bias
        scores = scores + result.score_bias[layer, head, query_index]
    if result.causal:
        scores = scores.masked_fill(torch.arange(keys.shape[0], device=scores.device) > query_index, float("-inf"))
    return NeuronSlice(query=query, keys=keys, products=products, scores=scores, softmax=torch.softmax(scores, -1))
