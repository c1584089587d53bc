"""Attention knockout (Geva et al. 2023): chosen edges query → key, in chosen layers and heads,
blocked by setting their scores to −inf before the softmax, inside the model's own attention
kernel (sdpa or eager), so that with nothing blocked a run is the model's own forward, bit for bit.

transformers 5 calls every attention through its registry: the functions here are registered
there (attention_registry.py) and read the blocked edges of the current thread's run.

Reuse. In a causal decoder, blocking edges whose first query is at position s changes nothing
before s, in any layer: the tokens before s run once (their KV cache kept), and each knocked run
feeds only positions s … the read position through that cache (the plain forward's, cut at s).
A sweep of Geva's windows, the edges from the last token, is then one token's pass a window, not
the whole text's: SmolLM2's 30 windows at 64 tokens took 31 full forwards, now about 5 forwards'
time. A cached pass rounds differently from a full one (SmolLM2: Δ moved by up to 4e-6), so each
knocked run's Δ is taken against the unblocked run along the same path, cached or not: a block
that changes nothing gives Δ = 0 exactly, and the plain log p is the plain forward's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import InputError, NoAttentionError
from .attention_registry import register_attention
from .eager_blocks import own_eager

SDPA, EAGER = "attnscope_knockout_sdpa", "attnscope_knockout_eager"
CHECKED_ROWS = 256  # blocked queries checked at a time: heads × 256 × T booleans, 19 MB at 8,192 tokens on SmolLM2
_local = threading.local()


@dataclass(frozen=True, slots=True)
class EdgeBlock:
    """Edges blocked in one layer: every query → key of `queries` × `keys` (positions), in `heads`
    (None: every head). A run holds these, not a grid: a block from the last token to a span at
    8,192 tokens is a few dozen numbers, where a heads × T × T grid was 0.6 GB a layer (SmolLM2)."""

    heads: tuple[int, ...] | None
    queries: tuple[int, ...]
    keys: tuple[int, ...]


# A layer's key: its number, or (part, number) in an encoder-decoder ("encoder", "decoder" for the
# decoder's self-attention, "cross" for its attention to the source).
LayerKey = int | tuple[str, int]
PARTS = ("encoder", "decoder", "cross")


def layer_name(key: LayerKey) -> str:
    """"layer 3", or "cross-attention layer 3" in an encoder-decoder: what messages call it."""
    if isinstance(key, tuple):
        part, layer = key
        return f"{'cross-attention' if part == 'cross' else part} layer {layer}"
    return f"layer {key}"


def layer_keys(engine: Any) -> dict[int, LayerKey]:
    """id(attention module) → its layer key: its layer, or (part, layer) in an encoder-decoder."""
    if getattr(engine, "is_encoder_decoder", False):
        return {id(m): (part, k) for part, modules in engine.groups.items() for k, m in enumerate(modules)}
    return {id(m): k for k, m in enumerate(engine.attention_modules)}


@dataclass
class Blocked:
    """The edges a run blocks: per layer (its LayerKey), its edge blocks (the union of their edges is blocked)."""

    layers: dict[LayerKey, tuple[EdgeBlock, ...]] = field(default_factory=dict)
    layer_of: dict[int, LayerKey] = field(default_factory=dict)  # id(attention module) → its layer key
    first_query: int = 0  # the position of a call's first query: > 0 when earlier ones come from the cache


def grid_rows(blocks: tuple[EdgeBlock, ...], n_heads: int, queries: torch.Tensor, n_keys: int) -> torch.Tensor:
    """The blocked edges of `queries` (sorted positions) to keys 0 … n_keys - 1: heads × queries ×
    keys booleans (True: blocked), made for these rows only. n_heads 1: the blocks' every-head edges."""
    rows = torch.zeros(n_heads, len(queries), n_keys, dtype=torch.bool)
    for block in blocks:
        positions = torch.tensor(block.queries, dtype=torch.long)
        at = torch.searchsorted(queries, positions)
        inside = at < len(queries)
        at, positions = at[inside], positions[inside]
        at = at[queries[at] == positions]  # the rows of the block's queries among these
        keys = torch.tensor([k for k in block.keys if k < n_keys], dtype=torch.long)
        if len(at) and len(keys):
            heads = torch.arange(n_heads) if block.heads is None else torch.tensor(block.heads, dtype=torch.long)
            rows[heads[:, None, None], at[None, :, None], keys[None, None, :]] = True
    return rows


def dense(blocks: tuple[EdgeBlock, ...], n_heads: int, n: int) -> torch.Tensor:
    """The blocks as one heads × n × n grid (True: blocked): for a look or a reference, not a run."""
    return grid_rows(blocks, n_heads, torch.arange(n), n)


def register() -> None:
    from transformers.masking_utils import eager_mask, sdpa_mask

    register_attention(SDPA, _sdpa, sdpa_mask)
    register_attention(EAGER, _eager, eager_mask)


def implementation_for(own: str | None) -> str:
    """The knockout function that wraps the kernel the model runs itself."""
    return EAGER if own == "eager" else SDPA


def _blocked_here(module: Any) -> tuple[LayerKey, tuple[EdgeBlock, ...], int] | None:
    """This layer's edge blocks in the current thread's run and the position of the call's first
    query, or None."""
    blocked_by: Blocked | None = getattr(_local, "blocked", None)
    layer = None if blocked_by is None else blocked_by.layer_of.get(id(module))
    blocks = None if layer is None else blocked_by.layers.get(layer)
    return None if not blocks else (layer, blocks, blocked_by.first_query)


def _with_blocks(layer: LayerKey, blocks: tuple[EdgeBlock, ...], first_query: int, query: torch.Tensor, key: torch.Tensor,
                 mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """The run's mask (or, without one, the causal mask the kernel would apply) with the blocked
    edges at −inf: one additive float mask, heads (or 1, the same for all) × queries × keys. The queries are positions
    first_query … (the earlier ones in the cache), the keys every position from 0: only the rows
    of the queries this call computes are made. Cross-attention's keys are the source's."""
    n_heads, n_queries, n_keys = query.shape[1], query.shape[2], key.shape[2]
    if first_query and n_keys != first_query + n_queries:  # never: the reuse is chosen only where the cache keeps every key
        raise NoAttentionError(f"Knockout in {layer_name(layer)}: {n_keys} keys for queries at {first_query}..."
                               f"{first_query + n_queries - 1}; the cache did not keep every earlier key.")
    additive = torch.zeros(1, 1, n_queries, n_keys, dtype=query.dtype, device=query.device)
    if mask is not None:
        mask = mask[:, :, :, :n_keys]
        additive = additive + (mask.to(query.dtype) if mask.dtype != torch.bool
                               else torch.zeros_like(mask, dtype=query.dtype).masked_fill(~mask, float("-inf")))
    elif causal and n_queries > 1:
        future = torch.ones(n_queries, n_keys, dtype=torch.bool, device=query.device).triu(1 + first_query)
        additive = additive.masked_fill(future, float("-inf"))
    # Blocks of every head make one row set for all (broadcast): heads times less in a full pass.
    every_head = all(block.heads is None for block in blocks)
    rows = grid_rows(blocks, 1 if every_head else n_heads, torch.arange(first_query, first_query + n_queries), n_keys)
    additive = additive.masked_fill(rows.to(query.device)[None], float("-inf"))
    if torch.isinf(additive).all(-1).any():
        raise InputError(f"Knocking out these edges in {layer_name(layer)} leaves a query with no key to attend to: "
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


class KnockoutRuns:
    """Knocked runs over one tokenized text, each read at `position`: log p over the vocabulary
    that the model's LM head gives there (a causal LM's next token, a masked LM's token at a
    [MASK], an encoder-decoder's next output token after its decoder's ids; float64, on the CPU).
    `plain` is the model's plain forward. Prefix caches are kept for the runs that follow (see the
    module's note on reuse); an encoder-decoder's runs are whole passes (its source is read again)."""

    def __init__(self, engine: Any, encoded: Any, position: int):
        from .borrowing import attention_implementation

        register()
        self.engine, self.encoded, self.position = engine, encoded, position
        decoded = "decoder_input_ids" in encoded
        self.n = int(encoded["decoder_input_ids" if decoded else "input_ids"].shape[1])  # the positions read
        source = int(encoded["input_ids"].shape[1])
        # Each part's keys: the source's for the encoder and cross-attention, the decoder's own.
        self._keys = {"encoder": source, "cross": source, "decoder": self.n}
        self._implementation = implementation_for(attention_implementation(engine.model))
        self._layer_of = layer_keys(engine)
        self._prefixes: dict[int, tuple[Any, torch.Tensor]] = {}  # first query → (its prefix's cache, unblocked log p)
        self._whole: Any = None  # the plain forward's cache, where a cached pass can stand for a full one
        if self._reusable():
            from transformers import DynamicCache

            self._whole = DynamicCache(config=engine.model.config)
        self.plain = self._full({}, cache=self._whole)

    def knocked(self, blocked: dict[LayerKey, tuple[EdgeBlock, ...]] | None = None, head_mask: Any = None,
                uniform: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """log p with `blocked` edges (layer key → its edge blocks) and disabled heads (head_mask:
        factors, layers × heads; uniform: heads that attend evenly; in an encoder-decoder each a
        dict part → its grid), and log p with nothing blocked along the same path (the plain
        forward, or the same cached pass): their difference is Δ."""
        blocked = {layer: kept for layer, blocks in (blocked or {}).items()
                   if (kept := tuple(b for b in blocks if b.queries and b.keys and b.heads != ()))}
        self._check_every_query_keeps_a_key(blocked)
        first = self._first_changed(blocked, head_mask, uniform)
        if first is None:
            return self.plain, self.plain
        if first == 0:
            return self._full(blocked, head_mask, uniform), self.plain
        if first not in self._prefixes:
            cache = self._prefix_cache(first)
            self._prefixes[first] = (cache, self._cached(first, cache, {}))
        cache, unblocked = self._prefixes[first]
        return self._cached(first, cache, blocked), unblocked

    def _first_changed(self, blocked, head_mask, uniform) -> int | None:
        """The first position whose states the knockout changes, where a cache of the ones before
        it may be reused (a causal decoder's first blocked query; else 0); None where nothing that
        the read position sees changes."""
        disabled = bool(_grids(head_mask)) or any(bool(grid.any()) for grid in _grids(uniform).values())
        if disabled:
            return 0
        if not blocked:
            return None
        if self._whole is None:
            return 0
        first = min(min(block.queries) for blocks in blocked.values() for block in blocks)
        return None if first > self.position else first

    def _reusable(self) -> bool:
        """Whether a cached pass can stand for the full one: a causal decoder whose cache keeps
        every key of this text (no sliding window or chunk shorter than it)."""
        engine = self.engine
        config = getattr(engine.model, "config", None)
        parameters = engine._forward_parameters
        spans = [getattr(config, name, None) for name in ("sliding_window", "attention_chunk_size")]
        return (engine.causal and not engine.is_encoder_decoder and "use_cache" in parameters
                and bool({"cache", "past_key_values"} & parameters)
                and all(not isinstance(span, int) or span <= 0 or span >= self.n for span in spans))

    def _check_every_query_keeps_a_key(self, blocked: dict[LayerKey, tuple[EdgeBlock, ...]]) -> None:
        """Refuse blocks that leave a query no key, before any run (whichever rows a run computes):
        the rows of the blocked queries only, heads × CHECKED_ROWS of them × keys at a time."""
        for layer, blocks in blocked.items():
            part = layer[0] if isinstance(layer, tuple) else None
            n_keys = self.n if part is None else self._keys[part]
            causal = self.engine.causal if part is None else part == "decoder"
            every = torch.tensor(sorted({q for block in blocks for q in block.queries}), dtype=torch.long)
            if any(self._leaves_no_key(blocks, queries, n_keys, causal) for queries in every.split(CHECKED_ROWS)):
                raise InputError(f"Knocking out these edges in {layer_name(layer)} leaves a query with no key to attend "
                                 "to: keep at least one key of every query (a decoder's first token sees only itself).")

    def _leaves_no_key(self, blocks: tuple[EdgeBlock, ...], queries: torch.Tensor, n_keys: int, causal: bool) -> bool:
        left = grid_rows(blocks, self.engine.n_heads, queries, n_keys)
        if causal:  # a causal query does not see the keys after it
            left |= torch.arange(n_keys)[None, :] > queries[:, None]
        return bool(left.all(-1).any())

    def _full(self, blocked, head_mask=None, uniform=None, cache=None) -> torch.Tensor:
        """log p from a pass over the whole text (filling `cache` when given)."""
        from .hooks import head_mask_hooks, uniform_heads_hooks

        engine = self.engine
        plan = Blocked(layers=blocked, layer_of=self._layer_of)
        inputs = {} if cache is None else self._inputs(0, self.n, cache)
        # Each part's heads by its own modules (their calls counted in layer order): an
        # encoder-decoder's decoder calls its self- and cross-attention in turn.
        modules = engine.groups if getattr(engine, "is_encoder_decoder", False) else {None: engine.attention_modules}
        disabling = [hooks(modules[part], engine.layout, grid)
                     for hooks, grids in ((head_mask_hooks, _grids(head_mask)), (uniform_heads_hooks, _grids(uniform)))
                     for part, grid in grids.items()]
        logits = engine.locked_forward(self.encoded, self._implementation, blocking(plan), *disabling, **inputs).logits
        return torch.log_softmax(logits[0, self.position].double(), dim=-1).cpu()

    def _inputs(self, start: int, end: int, cache: Any) -> dict:
        """Positions start … end - 1 of the text, after `cache` holds the ones before."""
        parameters = self.engine._forward_parameters
        inputs = {"input_ids": self.encoded["input_ids"][:, start:end], "use_cache": True,
                  ("cache" if "cache" in parameters else "past_key_values"): cache}
        if "attention_mask" in self.encoded:
            inputs["attention_mask"] = self.encoded["attention_mask"][:, :end]
        if start > 0 and "logits_to_keep" in parameters:
            inputs["logits_to_keep"] = 1
        return inputs

    def _prefix_cache(self, length: int) -> Any:
        """The cache of positions 0 … length - 1: the plain forward's cut short where its layers
        allow (the same keys and values: a causal position's do not depend on later ones), else a
        pass over them."""
        from transformers import DynamicCache

        cut = _cut(self._whole, length)
        if cut is not None:
            return cut
        cache = DynamicCache(config=self.engine.model.config)
        self.engine.locked_forward(self.encoded, self._implementation, **self._inputs(0, length, cache))
        return cache

    def _cached(self, first: int, prefix: Any, blocked) -> torch.Tensor:
        """log p from positions first … position fed through a copy of the prefix's cache."""
        plan = Blocked(layers=blocked, layer_of=self._layer_of, first_query=first)
        logits = self.engine.locked_forward(self.encoded, self._implementation, blocking(plan),
                                            **self._inputs(first, self.position + 1, _copy_of(prefix))).logits
        return torch.log_softmax(logits[0, -1].double(), dim=-1).cpu()


def _grids(disabled: Any) -> dict:
    """Disabled heads as part → grid (None: a decoder's or an encoder's only part); {} for none."""
    if disabled is None:
        return {}
    return {part: grid for part, grid in disabled.items() if grid is not None} if isinstance(disabled, dict) else {None: disabled}


def _dynamic_layers(cache: Any) -> list | None:
    """The cache's layers where each is one of transformers' dynamic layers, which extend by
    concatenation (new tensors; the old ones are never written); else None."""
    from transformers import cache_utils

    layers = getattr(cache, "layers", None)
    extends = tuple(getattr(cache_utils, name) for name in ("DynamicLayer", "DynamicSlidingWindowLayer")
                    if hasattr(cache_utils, name))
    if not layers or not extends or any(type(layer) not in extends for layer in layers):
        return None
    return layers


def _copy_of(cache: Any) -> Any:
    """A cache a pass may extend, the prefix's left as it was: a dynamic cache's tensors are
    shared, not copied (a copy of every layer's keys and values was a third of a cached pass);
    any other cache is copied whole."""
    import copy

    layers = _dynamic_layers(cache)
    if layers is None:
        return copy.deepcopy(cache)
    return copy.deepcopy(cache, {id(t): t for layer in layers for t in vars(layer).values() if isinstance(t, torch.Tensor)})


def _cut(cache: Any, length: int) -> Any:
    """A copy of `cache` holding its first `length` positions, or None where its layers are not
    plain dynamic ones that hold every position from the first."""
    from transformers import cache_utils

    layers = None if cache is None else _dynamic_layers(cache)
    if layers is None or any(type(layer) is not cache_utils.DynamicLayer for layer in layers):
        return None
    cut = _copy_of(cache)
    for layer in cut.layers:
        layer.keys, layer.values = layer.keys[..., :length, :], layer.values[..., :length, :]
    return cut
