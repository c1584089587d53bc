"""Attention rollout (Abnar & Zuidema 2020) of one run."""

from __future__ import annotations

import torch

from .. import checks
from ..engine import formulas as an
from ..engine.attention_model import (
    AttentionResult,
)
from ..engine.results import key_tokens_of, run_of
from ..errors import InputError


def rollout(result: AttentionResult, residual: float = 0.5) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020) of one result (model.run(text), or a widget: its
    run per token): layers × n × n, entry l rolled out through layers 0…l; row i says how much each
    input token flows into position i.

    residual: the weight of the identity (the residual connection), in [0, 1]; the paper's 0.5."""
    result = run_of(result, "rollout", long=False)  # a widget: its run, as its Rollout tab rolls it out
    residual = checks.fraction("residual", residual)
    if key_tokens_of(result) is not None:
        raise InputError("Rollout follows self-attention through the layers; cross-attention has other keys.")
    return an.rollout(result.attention, residual=residual)
