"""Contributions through whole layers (issue 47): ALTI (Ferrando et al. 2022, "Measuring the Mixing
of Contextual Information in the Transformer"), the residual and the normalisation included, rolled
out through the layers. The formula, and what it leaves out, are in engine/contributions.py.
method="norm" measures the same terms by their length instead (Kobayashi et al. 2021, rolled out as
GlobEnc rolls them): it factors, and costs a fraction of ALTI's time.

Unlike attention rollout (Abnar & Zuidema, analyses/rollout.py), which mixes the mean attention
with a fixed half of identity for the residual, ALTI weighs each token by how close what it passes,
through the values, the output projection, the residual and the LayerNorm, comes to the output:
a token that takes much attention but passes a small vector ([CLS], [SEP]: Kobayashi et al. 2020)
gets little, and the residual's real share (large in BERT) replaces rollout's fixed half.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from .. import checks
from ..engine import formulas as an
from ..engine.attention_model import model_of
from ..engine.contributions import run_contributions
from ..errors import InputError

# contributions' `method`: what each names, as the frame's attrs and the docs say it.
METHODS = {"alti": "ALTI (Ferrando et al. 2022)",
           "norm": "norms of attention, residual and LayerNorm (Kobayashi et al. 2021), rolled out as GlobEnc (Modarressi et al. 2022)"}
MEASURES = {
    "contribution": "what the token gives the layer's outputs: the mean over queries of C_ij",
    "rolled": "what the token gives the layer's outputs from the input on: the mean over queries of R_ij",
    "self": "what the token's output keeps of itself in the layer: C_jj",
}


class Contributions(NamedTuple):
    """contributions()'s answer. frame: tidy DataFrame (layer, position, token, measure, value);
    rolled: layers × T × T, entry l row i what output i of layer l takes from each input token
    (rows sum to 1; what the rollout view draws); layers: layers × T × T, each layer's own C;
    tokens: the run's T tokens."""

    frame: Any
    rolled: torch.Tensor
    layers: torch.Tensor
    tokens: list[str]

    @property
    def method(self) -> str:
        """What measured C: METHODS' sentence for the call's `method` (the frame's attrs too)."""
        return self.frame.attrs.get("method", "")

    def __repr__(self) -> str:
        # Short: the tuple's own repr printed every matrix (12,769 characters for 9 tokens).
        n_layers, n = self.layers.shape[:2]
        return (f"Contributions({self.method}: {n_layers} layers × {n} tokens; .frame (layer, position, token, "
                f"measure, value), .rolled and .layers ({n_layers} × {n} × {n}), .tokens)")


def _frame(layers: torch.Tensor, rolled: torch.Tensor, tokens: list[str], causal: bool):
    import numpy as np
    import pandas as pd

    n_layers, n, _ = layers.shape
    # A decoder's key j is seen by the T − j queries from it on: the mean is over those.
    seen = torch.arange(n, 0, -1, dtype=torch.float64) if causal else torch.full((n,), float(n), dtype=torch.float64)
    per_measure = {"contribution": layers.double().sum(-2) / seen, "rolled": rolled.double().sum(-2) / seen,
                   "self": torch.diagonal(layers.double(), dim1=-2, dim2=-1)}  # each layers × T
    blocks = len(per_measure) * n_layers  # one block of T rows per (measure, layer), measures outermost
    return pd.DataFrame({
        "layer": np.tile(np.repeat(np.arange(n_layers), n), len(per_measure)),
        "position": np.tile(np.arange(n), blocks),
        "token": np.tile(np.array(tokens, dtype=object), blocks),
        "measure": np.repeat(np.array(list(per_measure), dtype=object), n_layers * n),
        "value": torch.cat([values.flatten() for values in per_measure.values()]).numpy(),
    })


def contributions(model: Any, text: str, text_b: str | None = None, *, max_length: int | None = None,
                  attention: str = "auto", method: str = "alti") -> Contributions:
    """ALTI contributions of one text (module docstring): each layer's token-to-token mixing C
    (T × T, the residual and the LayerNorm counted) and its rollout R (R_0 = C_0, R_l = C_l R_{l−1}).
    A long input is read a block of query rows at a time (attention="on_demand", or "auto" past
    the full-attention limit): never T × T × width. model: an AttentionModel (attnscope.load) of
    a supported family (BERT, RoBERTa; Llama, Mistral, Qwen2); others are refused by name.
    method: "alti" (C_ij: the L1 proximity of token j's term to output i), or "norm" (C_ij: the
    term's L2 norm, Kobayashi et al. 2021, a row's norms made shares; a fraction of ALTI's time).
    Returns Contributions(frame, rolled, layers, tokens); frame: layer, position, token, measure
    ("contribution", "rolled", "self": MEASURES), value."""
    model = model_of(model, "contributions")
    if not checks.one_of(method, METHODS):
        raise InputError(f"method is 'alti' (Ferrando et al. 2022's L1 proximity) or 'norm' (Kobayashi et al. 2021's "
                         f"norms), not {checks.short_repr(method)}.")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"text must be a non-empty str, not {checks.kind_of(text)}.")
    result, layers = run_contributions(model, text, text_b, max_length=max_length, attention=attention, method=method)
    rolled = an.rolled_out(layers)
    frame = _frame(layers, rolled, list(result.tokens), bool(result.causal))
    frame.attrs.update({"attnscope": "contributions", "model": model.name, "text": text, "method": METHODS[method]})
    return Contributions(frame, rolled, layers, list(result.tokens))
