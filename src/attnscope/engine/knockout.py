"""Attention knockout (Geva et al. 2023): chosen edges query → key, in chosen layers and heads,
blocked by setting their scores to −inf before the softmax, inside the model's own attention
kernel (sdpa or eager), so that with nothing blocked a run is the model's own forward, bit for bit.

transformers 5 calls every attention through its registry: the functions here are registered
there (attention_registry.py) and read the blocked edges of the current thread's run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import InputError
from .attention_registry import register_attention
from .eager_blocks import own_eager

SDPA, EAGER = "attnscope_knockout_sdpa", "attnscope_knockout_eager"
_local = threading.local()


@dataclass
class Blocked:
    """The edges a run blocks: per layer, heads × queries × keys booleans (True: blocked)."""

    layers: dict[int, torch.Tensor] = field(default_factory=dict)
    layer_of: dict[int, int] = field(default_factory=dict)  # id(attention module) → its layer


def register() -> None:
    from transformers.masking_utils import eager_mask, sdpa_mask

    register_attention(SDPA, _sdpa, sdpa_mask)
    register_attention(EAGER, _eager, eager_mask)


def implementation_for(own: str | None) -> str:
    """The knockout function that wraps the kernel the model runs itself."""
    return EAGER if own == "eager" else SDPA


def _blocked_here(module: Any) -> tuple[int, torch.Tensor] | None:
    """This layer's blocked edges in the current thread's run (heads × queries × keys), or None."""
    blocked_by: Blocked | None = getattr(_local, "blocked", None)
    layer = None if blocked_by is None else blocked_by.layer_of.get(id(module))
    blocked = None if layer is None else blocked_by.layers.get(layer)
    return None if blocked is None else (layer, blocked)


def _with_blocks(layer: int, blocked: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                 mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """The run's mask (or, without one, the causal mask the kernel would apply) with the blocked
    edges at −inf: one additive float mask, heads × queries × keys."""
    n_queries, n_keys = query.shape[2], key.shape[2]
    additive = torch.zeros(1, 1, n_queries, n_keys, dtype=query.dtype, device=query.device)
    if mask is not None:
        mask = mask[:, :, :, :n_keys]
        additive = additive + (mask.to(query.dtype) if mask.dtype != torch.bool
                               else torch.zeros_like(mask, dtype=query.dtype).masked_fill(~mask, float("-inf")))
    elif causal and n_queries > 1:
        future = torch.ones(n_queries, n_keys, dtype=torch.bool, device=query.device).triu(1)
        additive = additive.masked_fill(future, float("-inf"))
    additive = additive.masked_fill(blocked.to(query.device)[None], float("-inf"))
    if torch.isinf(additive).all(-1).any():
        raise InputError(f"Knocking out these edges in layer {layer} leaves a query with no key to attend to: "
                         "keep at least one key of every query (a decoder's first token sees only itself).")
    return additive


def _sdpa(module: Any, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    here = _blocked_here(module)
    if here is not None:  # else the model's own call, untouched
        causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
        attention_mask, is_causal = _with_blocks(*here, query, key, attention_mask, causal), False
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  is_causal=is_causal, **kwargs)


def _eager(module: Any, query, key, value, attention_mask, scaling=None, dropout: float = 0.0, **kwargs):
    here = _blocked_here(module)
    if here is not None:  # eager masks are additive floats that carry the causal part already
        attention_mask = _with_blocks(*here, query, key, attention_mask, False)
    return own_eager(module)(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


@contextmanager
def blocking(blocked: Blocked) -> Iterator[None]:
    """The edges `blocked` names are blocked in this thread's attention calls for the block."""
    previous = getattr(_local, "blocked", None)
    _local.blocked = blocked
    try:
        yield
    finally:
        _local.blocked = previous


def token_log_probs(engine: Any, encoded: Any, position: int, blocked: dict[int, torch.Tensor] | None = None,
                    head_mask: torch.Tensor | None = None, uniform: torch.Tensor | None = None) -> torch.Tensor:
    """log p over the vocabulary that the model's LM head reads at `position` (float64, on the
    CPU): a causal LM's next token, a masked LM's token at a [MASK]. One forward through the
    model's own attention kernel, with `blocked` edges (layer → heads × T × T booleans) and
    disabled heads (head_mask: factors; uniform: heads that attend evenly). Nothing blocked or
    disabled: the model's plain forward."""
    from .borrowing import attention_implementation
    from .hooks import head_mask_hooks, uniform_heads_hooks

    register()
    implementation = implementation_for(attention_implementation(engine.model))
    plan = Blocked(layers=dict(blocked or {}), layer_of={id(m): k for k, m in enumerate(engine.attention_modules)})
    logits = engine.locked_forward(encoded, implementation, blocking(plan),
                                   head_mask_hooks(engine.attention_modules, engine.layout, head_mask),
                                   uniform_heads_hooks(engine.attention_modules, engine.layout, uniform)).logits
    return torch.log_softmax(logits[0, position].double(), dim=-1).cpu()
