"""The model's own eager attention, computed a few heads at a time.

transformers' plain eager attention (the code most families share, BERT's and Llama's) makes
each layer's heads × T × T scores, scales them, adds the mask and takes the softmax as separate
passes over fresh T² tensors: at 512 tokens on bert-base its attention ops take 88 ms a forward
where the fused kernel (sdpa) takes 39 ms. The same operations on a cache-sized block of heads at
a time, the softmax written straight into the weights that are returned, give the same numbers
(the same ops in the same order) in 66 ms. Only a module whose own eager function is
byte-for-byte one of those plain ones is served, in float32 without gradients; anything else
(soft-capping, sinks, another dtype, a backward pass) goes to the module's own eager function.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from ..errors import NoAttentionError
from .attention_registry import register_attention

IMPLEMENTATION = "attnscope_eager_blocks"
# Scores of this many bytes at a time: a block that stays in a core's L2 cache.
BLOCK_BYTES = 2 * 1024 * 1024


def _code_key(function: Any) -> tuple | None:
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    return (code.co_code, code.co_consts, code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount)


_plain: dict[tuple, str] = {}


def _plain_kinds() -> dict[tuple, str]:
    """The code of transformers' plain eager functions: BERT's (scaling optional, softmax in the
    scores' dtype) and Llama's (key-value heads repeated, softmax in float32)."""
    if not _plain:
        from transformers.models.bert import modeling_bert
        from transformers.models.llama import modeling_llama

        _plain[_code_key(modeling_bert.eager_attention_forward)] = "bert"
        _plain[_code_key(modeling_llama.eager_attention_forward)] = "llama"
        _plain[("repeat_kv", _code_key(modeling_llama.repeat_kv))] = "repeat_kv"
    return _plain


def _modeling_file(module: Any) -> Any:
    """The modeling file of the module's class, or of the nearest base class whose file has an
    eager attention function (a user's subclass in a notebook runs its base's)."""
    files = [sys.modules.get(cls.__module__) for cls in type(module).__mro__]
    return next((f for f in files if hasattr(f, "eager_attention_forward")), files[0])


def own_eager(module: Any) -> Any:
    """The eager attention function of the module's modeling file (what it runs in eager mode)."""
    return getattr(_modeling_file(module), "eager_attention_forward", None)


_plain_files: dict[str, bool] = {}


def _is_plain(modeling: Any) -> bool:
    """Whether a modeling file's eager function (and repeat_kv) is one of the plain ones; kept per file."""
    name = getattr(modeling, "__name__", None)
    if name not in _plain_files:
        _plain_files[name] = _reads_plain(modeling)
    return _plain_files[name]


def _reads_plain(modeling: Any) -> bool:
    kinds = _plain_kinds()
    kind = kinds.get(_code_key(getattr(modeling, "eager_attention_forward", None)))
    if kind == "llama":  # its repeat_kv must be Llama's too
        return kinds.get(("repeat_kv", _code_key(getattr(modeling, "repeat_kv", None)))) == "repeat_kv"
    return kind == "bert"


def serves(model: torch.nn.Module) -> bool:
    """Whether every module of the model that calls transformers' attention functions has a plain
    eager function in its modeling file (then IMPLEMENTATION gives exactly eager's numbers)."""
    files = {id(f): f for f in map(_modeling_file, model.modules())}.values()
    calling = [f for f in files if hasattr(f, "ALL_ATTENTION_FUNCTIONS")]
    return bool(calling) and all(_is_plain(modeling) for modeling in calling)


def attention_function(
    module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: torch.Tensor | None,
    scaling: float | None = None, dropout: float = 0.0, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' attention-function signature: (B × T × heads × d_v output, B × heads × T × T weights)."""
    modeling = _modeling_file(module)
    if (torch.is_grad_enabled() or (dropout and module.training) or query.dtype != torch.float32
            or key.dtype != torch.float32 or value.dtype != torch.float32 or not _is_plain(modeling)):
        own = own_eager(module)
        if own is None:
            raise NoAttentionError(f"{type(module).__name__} has no eager attention function to run for its weights.")
        return own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    if scaling is None:  # BERT's default; Llama's always passes it
        scaling = query.size(-1) ** -0.5
    group = query.shape[1] // key.shape[1]
    if group > 1:  # Llama's repeat_kv: query head h reads key-value head h // group
        key, value = (t.repeat_interleave(group, dim=1) for t in (key, value))
    batch, heads, n_queries, _ = query.shape
    n_keys = key.shape[2]
    weights = torch.empty(batch, heads, n_queries, n_keys, dtype=query.dtype, device=query.device)
    output = torch.empty(batch, heads, n_queries, value.shape[-1], dtype=query.dtype, device=query.device)
    per_block = heads if query.device.type != "cpu" else max(1, min(heads, BLOCK_BYTES // (4 * batch * n_queries * n_keys)))
    scores = torch.empty(batch, per_block, n_queries, n_keys, dtype=query.dtype, device=query.device)
    masks = [None] * heads
    if attention_mask is not None:
        attention_mask = attention_mask[:, :, :, :n_keys]
        # One mask for every head (eager's), or one per head (a 4-D mask a caller built), cut as the heads are.
        masks = attention_mask.split(per_block, dim=1) if attention_mask.shape[1] > 1 else [attention_mask] * heads
    blocks = zip(*(t.split(per_block, dim=1) for t in (query, key.transpose(2, 3), value, weights, output)), masks)
    for query_block, keys_block, value_block, weights_block, output_block, mask in blocks:
        block = scores[:, : query_block.shape[1]]
        torch.matmul(query_block, keys_block, out=block)
        block.mul_(scaling)
        if mask is not None:
            block.add_(mask)
        torch.softmax(block, dim=-1, out=weights_block)
        torch.matmul(weights_block, value_block, out=output_block)
    return output.transpose(1, 2).contiguous(), weights


def register() -> None:
    """Make IMPLEMENTATION a name transformers knows, with eager's masks."""
    from transformers.masking_utils import eager_mask

    register_attention(IMPLEMENTATION, attention_function, eager_mask)
