"""What the neuron view's numbers are computed from, for one layer, head and query token i.

The maths itself (q × k_j, the scores, the softmax, α_ij·v_j, the head's output o_i = Σ_j α_ij v_j
and α_ij‖f_h(x_j)‖) has one definition, js/drawing/neuron_maths.js, which the live widget, the saved page
and the kernel's picture all run on the same float16 inputs. Why there and not here: a saved page
must answer any head and query of its saved layers offline. Computed here, it would have to store
every query's scores, softmax and output (heads × T² per layer, more than the attention itself);
computed there, it stores what this module hands out (queries, keys, values and ‖f‖: heads × T × d
per layer), and the kernel's answer is the same bytes sliced from the same tensors, so the live and
the saved numbers are identical (tests/widget/test_neuron.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..engine.attention_model import AttentionResult


@dataclass
class NeuronInputs:
    query: torch.Tensor  # (d,): q_i
    keys: torch.Tensor  # (Tk, d): k_j (grouped-query: the key-value head query head h reads)
    scaling: float  # scores are q·k_j · scaling (+ bias_j)
    causal: bool  # keys j > i are masked
    bias: torch.Tensor | None = None  # (Tk,): T5's position bias of row i, else None
    values: torch.Tensor | None = None  # (Tk, d): v_j of the key-value head h reads; None where not captured
    norms: torch.Tensor | None = None  # (Tk,): ‖f_h(x_j)‖ = ‖(x_j W_V^h + b_V^h) W_O^h‖ (value_norms.py)
    # A learned sink logit (gpt-oss): one more term in the softmax's sum, so the row keeps the
    # sink's share and sums to less than 1. A short run's result carries no sink rule (only a long
    # run's ScoreRule does): None.
    sink: float | None = None


def check_indices(result: AttentionResult, layer: int, head: int, query_index: int) -> None:
    if result.queries is None or result.keys is None:
        raise ValueError(f"Queries and keys were not captured for {result.model_name}: no neuron view.")
    n_layers, n_heads, n_tokens, _ = result.queries.shape
    for name, value, bound in (("layer", layer, n_layers), ("head", head, n_heads), ("query_index", query_index, n_tokens)):
        if not 0 <= value < bound:
            raise ValueError(f"{name}={value} is out of range 0..{bound - 1}.")


def neuron_inputs(result: AttentionResult, layer: int, head: int, query_index: int) -> NeuronInputs:
    """The captured tensors the neuron maths reads for one query (float32, views, not copies)."""
    check_indices(result, layer, head, query_index)
    values = result.values[layer, head] if result.values is not None else None
    norms = result.value_norms[layer, head] if result.value_norms is not None and values is not None else None
    bias = result.score_bias[layer, head, query_index] if result.score_bias is not None else None
    return NeuronInputs(query=result.queries[layer, head, query_index], keys=result.keys[layer, head],
                        scaling=float(result.scaling[layer]), causal=bool(result.causal), bias=bias,
                        values=values, norms=norms)


def repeated_group(*tensors: torch.Tensor) -> int:
    """How many consecutive query heads share each key-value head in `tensors` (each layers ×
    heads × T × d, grouped-query heads repeated, as a run keeps keys and values): the largest group
    whose heads are equal in every layer of every tensor, 1 when none are. A saved page stores each
    shared head once (a lossless choice: the heads it leaves out are equal to the one it keeps)."""
    n_heads = tensors[0].shape[1]

    def shared(tensor: torch.Tensor, group: int) -> bool:
        grouped = tensor.reshape(tensor.shape[0], n_heads // group, group, *tensor.shape[2:])
        return torch.equal(grouped, grouped[:, :, :1].expand_as(grouped))

    return next((group for group in range(n_heads, 1, -1)
                 if n_heads % group == 0 and all(shared(t, group) for t in tensors)), 1)
