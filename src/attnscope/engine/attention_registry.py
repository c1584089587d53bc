"""The attention functions attnscope adds to transformers' registry (its AttentionInterface)."""

from __future__ import annotations

from collections.abc import Callable

_registered: set[str] = set()


def register_attention(name: str, function: Callable, masks: Callable) -> None:
    """Make `name` an attention implementation transformers knows: `function`, given the masks
    `masks` builds (transformers' eager_mask or sdpa_mask). Once per name."""
    if name in _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, masks)
    _registered.add(name)
