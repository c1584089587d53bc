"""The hooks that record a full run's queries and keys on the model's own projection modules
(no patched copies of model code), and that switch heads off: which modules are attention, how
their projections are named, and how their outputs split into heads."""

from __future__ import annotations

import math
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import NoAttentionError


@dataclass(frozen=True)
class ProjectionLayout:
    """Where an attention module keeps its query and key projections."""

    query: str | None = None
    key: str | None = None
    value: str | None = None
    # GPT-2 style: one projection whose output is [q | k | v] along the last dimension.
    fused_qkv: str | None = None
    # T5 style: the module adds a learned relative-position bias to q·kᵀ and returns it as its
    # second output; it is captured so that scores and the neuron view include it.
    bias_output: bool = False

    def matches(self, module: torch.nn.Module) -> bool:
        names = [self.fused_qkv] if self.fused_qkv else [self.query, self.key]
        return all(isinstance(getattr(module, n, None), torch.nn.Module) for n in names)


BERT_LIKE = ProjectionLayout(query="query", key="key", value="value")
DISTILBERT = ProjectionLayout(query="q_lin", key="k_lin", value="v_lin")
GPT2 = ProjectionLayout(fused_qkv="c_attn")
PROJ_NAMED = ProjectionLayout(query="q_proj", key="k_proj", value="v_proj")
T5_LIKE = ProjectionLayout(query="q", key="k", value="v", bias_output=True)

# Families tested against their own returned attention (tests/engine/test_engine.py); other model types
# are tried with every layout, first match wins.
LAYOUTS_BY_MODEL_TYPE: dict[str, ProjectionLayout] = {
    "bert": BERT_LIKE,
    "roberta": BERT_LIKE,
    "xlm-roberta": BERT_LIKE,
    "camembert": BERT_LIKE,
    "electra": BERT_LIKE,
    "albert": BERT_LIKE,
    "distilbert": DISTILBERT,
    "gpt2": GPT2,
}
ALL_LAYOUTS = (BERT_LIKE, DISTILBERT, GPT2, PROJ_NAMED, T5_LIKE)
# Above this many bytes of layers × heads × T × T float32, "auto" runs keep q, k and log-sum-exps
# instead (a 4-layer, 8-head model at about 2,900 tokens; MiniLM and BERT-base never at 512).


@dataclass
class Capture:
    """Projection outputs recorded by the hooks, in call order (= layer order)."""

    queries: list[torch.Tensor] = field(default_factory=list)
    keys: list[torch.Tensor] = field(default_factory=list)
    # The value projection's output (x W_V + b_V), for what each key passes (value_norms.py).
    values: list[torch.Tensor] = field(default_factory=list)
    scaling: list[float | None] = field(default_factory=list)
    # Rotary models (Llama, Mistral, Qwen2): each layer's (cos, sin) and the function that applies
    # them, from the model's own module; q and k are shown after rotation, as the model uses them.
    rotary: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    apply_rotary: Any = None
    bias: list[torch.Tensor] = field(default_factory=list)
    # Per call, the sum of the attention module's output (0-d, float32): a NaN weight makes its row
    # of W·V NaN, and so the sum, so finite sums spare a scan of every T × T map.
    output_sums: list[torch.Tensor] = field(default_factory=list)

    def attention_finite(self, n_layers: int) -> bool:
        """True when each of n_layers attention calls gave an output of finite sum (so no weight
        is NaN; softmax gives no ±inf); False when any did not (a NaN, or a sum that overflows:
        then the maps are scanned) or the calls were not all seen."""
        if len(self.output_sums) != n_layers or not self.output_sums:
            return False
        device = self.output_sums[0].device  # a model split over GPUs sums each layer on its own
        return bool(torch.isfinite(torch.stack([s.to(device) for s in self.output_sums])).all())


CROSS_ATTENTION_NAMES = {"encoder_attn", "crossattention", "EncDecAttention", "cross_attn"}


def encoder_decoder_groups(
    model: torch.nn.Module,
) -> tuple[dict[str, list[torch.nn.Module]], ProjectionLayout | None]:
    """Attention modules of an encoder-decoder model, by part: encoder self-attention, decoder
    self-attention and cross-attention (the decoder's attention to the encoder), in layer order."""
    for layout in ALL_LAYOUTS:
        groups: dict[str, list[torch.nn.Module]] = {"encoder": [], "decoder": [], "cross": []}
        for name, module in model.named_modules():
            if not layout.matches(module):
                continue
            parts = name.split(".")
            if parts[-1] in CROSS_ATTENTION_NAMES:
                groups["cross"].append(module)
            elif "decoder" in parts:
                groups["decoder"].append(module)
            else:
                groups["encoder"].append(module)
        if all(groups.values()):
            return groups, layout
    return {}, None


def find_attention_modules(model: torch.nn.Module) -> tuple[list[torch.nn.Module], ProjectionLayout | None]:
    """The self-attention modules of `model` (each once, even when shared across layers as in ALBERT)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    candidates = [LAYOUTS_BY_MODEL_TYPE[model_type]] if model_type in LAYOUTS_BY_MODEL_TYPE else list(ALL_LAYOUTS)
    for layout in candidates:
        found = [
            m
            for m in model.modules()
            if layout.matches(m)
            and not getattr(m, "is_cross_attention", False)
            and "Cross" not in type(m).__name__
        ]
        if found:
            return found, layout
    return [], None


def _module_scaling(module: torch.nn.Module) -> float | None:
    """The scale the module applies to q·kᵀ, when it records one (GPT-2's varies by layer)."""
    scaling = getattr(module, "scaling", None)
    return float(scaling) if isinstance(scaling, (int, float)) else None


def _fused_parts(output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fused projection's [q | k | v] output (GPT-2's c_attn) as its three views."""
    width = output.shape[-1] // 3
    return output[..., :width], output[..., width : 2 * width], output[..., 2 * width :]


@contextmanager
def capture_queries_keys(modules: Sequence[torch.nn.Module], layout: ProjectionLayout) -> Iterator[Capture]:
    """Hook the q/k projections of `modules` for the duration of the block.

    Only calls from this thread are recorded: a forward of the same model in another thread (a
    second widget's run, a callback) must not slip its q and k into this run's."""
    capture = Capture()
    handles = []
    owner = threading.get_ident()

    def mine() -> bool:
        return threading.get_ident() == owner

    def on_query(attention_module: torch.nn.Module):
        def hook(_module, _inputs, output):
            if not mine():
                return
            if layout.fused_qkv:
                query, key, value = _fused_parts(output.detach())
                capture.queries.append(query)
                capture.keys.append(key)
                capture.values.append(value)
            else:
                capture.queries.append(output.detach())
            capture.scaling.append(_module_scaling(attention_module))

        return hook

    def on_key(_module, _inputs, output):
        if mine():
            capture.keys.append(output.detach())

    def on_value(_module, _inputs, output):
        if mine():
            capture.values.append(output.detach())

    def on_attention_call(module, _args, kwargs):
        if not mine():
            return
        rotary = kwargs.get("position_embeddings")
        if isinstance(rotary, tuple) and len(rotary) == 2:
            capture.rotary.append((rotary[0].detach(), rotary[1].detach()))
            capture.apply_rotary = getattr(sys.modules.get(type(module).__module__), "apply_rotary_pos_emb", None)

    def on_attention_output(_module, _inputs, output):
        if not mine():
            return
        main = output[0] if isinstance(output, tuple) else output
        if isinstance(main, torch.Tensor):
            capture.output_sums.append(main.detach().sum(dtype=torch.float32))
        if layout.bias_output and isinstance(output, tuple) and len(output) > 1 and isinstance(output[1], torch.Tensor):
            capture.bias.append(output[1].detach())

    try:
        for module in modules:
            handles.append(module.register_forward_pre_hook(on_attention_call, with_kwargs=True))
            handles.append(module.register_forward_hook(on_attention_output))
            if layout.fused_qkv:
                handles.append(getattr(module, layout.fused_qkv).register_forward_hook(on_query(module)))
            else:
                handles.append(getattr(module, layout.query).register_forward_hook(on_query(module)))
                handles.append(getattr(module, layout.key).register_forward_hook(on_key))
                if isinstance(getattr(module, layout.value or "", None), torch.nn.Module):
                    handles.append(getattr(module, layout.value).register_forward_hook(on_value))
        yield capture
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def capture_values(modules: Sequence[torch.nn.Module], layout: ProjectionLayout) -> Iterator[Capture]:
    """Only the value projections' outputs of `modules` (capture.values, in order), from this
    thread, for the block: what value norms read (a corpus's norm metrics). capture_queries_keys'
    other hooks (q, k, rotary, each output's sum) were half of what the norms added to a head
    finder's forward on MiniLM."""
    capture, handles, owner = Capture(), [], threading.get_ident()

    def on_value(_module, _inputs, output):
        if threading.get_ident() == owner:
            capture.values.append(_fused_parts(output.detach())[2] if layout.fused_qkv else output.detach())

    try:
        for module in modules:
            projection = getattr(module, layout.fused_qkv or layout.value or "", None)
            if isinstance(projection, torch.nn.Module):
                handles.append(projection.register_forward_hook(on_value))
        yield capture
    finally:
        for handle in handles:
            handle.remove()


class _LayerFactors:
    """Per-head factors for each layer's call in turn, taken from `mask` (layers × heads, or
    batch × layers × heads: one row per example), for the calls of the thread that made it only
    (another thread's forward of the same model is left alone). Calls are counted, so a module
    shared by all layers (ALBERT) gets each layer's row in turn."""

    def __init__(self, mask: torch.Tensor):
        self.mask = mask
        self.n_layers, self.n_heads = mask.shape[-2:]
        self.calls = 0
        self.owner = threading.get_ident()

    def mine(self) -> bool:
        return threading.get_ident() == self.owner

    def scale_next(self, values: torch.Tensor) -> torch.Tensor:
        """`values` (..., heads · d, the heads concatenated) with each head scaled by the next
        layer's factors."""
        layer = self.calls % self.n_layers
        self.calls += 1
        factors = self.mask[..., layer, :].to(device=values.device, dtype=values.dtype)
        factors = factors[:, None, :, None] if factors.dim() == 2 else factors[:, None]
        return (values.unflatten(-1, (self.n_heads, -1)) * factors).flatten(-2)


def _fused_part(output: torch.Tensor, part: int, change) -> torch.Tensor:
    """A fused [q | k | v] projection's output with its part 0, 1 or 2 changed by `change`."""
    width = output.shape[-1] // 3
    pieces = [output[..., i * width : (i + 1) * width] for i in range(3)]
    pieces[part] = change(pieces[part])
    return torch.cat(pieces, dim=-1)


@contextmanager
def head_mask_hooks(
    modules: Sequence[torch.nn.Module], layout: ProjectionLayout, mask: torch.Tensor | None
) -> Iterator[None]:
    """Scale each head's output by mask[layer, head] (Michel et al.'s ξ_h) for the block.

    Head h's output is A_h·V_h. Where the module has an output projection over the concatenated
    heads (o_proj / out_proj: Llama, BART, ...), its input is scaled per query head; this is right
    for grouped-query attention, where value heads are shared. Otherwise the value vectors are
    scaled (BERT's output projection lives in another module), which is the same ξ_h·Att_h. Either
    way gradients flow to ξ, model code is untouched, the masked head's own attention weights are
    unchanged and every later layer sees the change.
    """
    if mask is None:
        yield
        return
    factors = _LayerFactors(mask)

    def scale_value(_module, _inputs, output):
        if not factors.mine():
            return None
        return _fused_part(output, 2, factors.scale_next) if layout.fused_qkv else factors.scale_next(output)

    def scale_heads_input(_module, args):
        if not factors.mine():
            return None
        (heads_concatenated, *rest) = args
        return (factors.scale_next(heads_concatenated), *rest)

    handles = []
    try:
        for module in modules:
            output = _output_projection(module)
            if output is not None and not layout.fused_qkv:
                handles.append(output.register_forward_pre_hook(scale_heads_input))
            elif layout.fused_qkv or layout.value:
                handles.append(getattr(module, layout.fused_qkv or layout.value).register_forward_hook(scale_value))
            else:
                raise NoAttentionError("Head masking needs the model's value or output projections, which were not found.")
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def uniform_heads_hooks(
    modules: Sequence[torch.nn.Module], layout: ProjectionLayout | None, uniform: torch.Tensor | None
) -> Iterator[None]:
    """Heads where `uniform[layer, head]` is set attend uniformly, for the block (Kovaleva et al.
    2019's disabled head): their queries are zeroed where the query projection returns them, so
    every score is 0 before the mask and the softmax spreads each row evenly over the keys it may
    see (padding, causal and window masks kept; rotary and q-norm leave a zero query zero). A
    model's own score bias (T5's relative positions) is still added."""
    if uniform is None or not bool(uniform.any()):
        yield
        return
    if layout is None:
        raise NoAttentionError("Uniform attention needs the model's query projections, which were not found.")
    factors = _LayerFactors((~uniform.bool()).float())  # 0 zeroes a head's queries

    def zero_queries(_module, _inputs, output):
        if not factors.mine():
            return None
        return _fused_part(output, 0, factors.scale_next) if layout.fused_qkv else factors.scale_next(output)

    handles = []
    try:
        for module in modules:
            handles.append(getattr(module, layout.fused_qkv or layout.query).register_forward_hook(zero_queries))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _output_projection(module: torch.nn.Module) -> torch.nn.Module | None:
    for name in ("o_proj", "out_proj"):
        candidate = getattr(module, name, None)
        if isinstance(candidate, torch.nn.Module):
            return candidate
    return None


def split_heads(projection: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(1, T, heads·d) → (heads, T, d)."""
    _, t, width = projection.shape
    return projection[0].view(t, n_heads, width // n_heads).transpose(0, 1)


def captured_queries_keys(
    capture: Capture | None, n_layers: int, n_heads: int, model_name: str
) -> tuple[list[torch.Tensor] | None, list[torch.Tensor] | None, list[float]]:
    """Every layer's queries and keys (heads × T × d float32 each, key heads repeated for
    grouped-query attention, rotary embeddings applied) from what the hooks recorded, as views
    where they are (not stacked: results.LayerMaps), and each layer's score scaling; (None, None,
    1s) with a warning when they could not be captured."""
    if capture is None or len(capture.queries) != n_layers or len(capture.keys) != n_layers:
        warnings.warn(
            f"Could not capture queries and keys of {model_name}; attention is shown without them.",
            stacklevel=3,
        )
        return None, None, [1.0] * n_layers
    if capture.rotary and capture.apply_rotary is not None and len(capture.rotary) != n_layers:
        warnings.warn(f"Could not capture the rotary embeddings of {model_name}.", stacklevel=3)
        return None, None, [1.0] * n_layers
    queries, keys = [], []
    # A model split over GPUs (device_map) gives each layer's q and k on its own device.
    device = capture.queries[0].device
    for layer, (q, k) in enumerate(zip(capture.queries, capture.keys)):
        head_dim = q.shape[-1] // n_heads
        q, k = split_heads(q, n_heads), split_heads(k, k.shape[-1] // head_dim)
        if capture.rotary and capture.apply_rotary is not None:
            cos, sin = capture.rotary[layer]
            q, k = (t[0] for t in capture.apply_rotary(q[None], k[None], cos[:1], sin[:1]))
        # Grouped-query attention: query head h uses key head h // (query heads per key head).
        per_key_head = n_heads // k.shape[0]
        k = k if per_key_head == 1 else k.repeat_interleave(per_key_head, dim=0)
        queries.append(q.to(device, torch.float32))
        keys.append(k.to(device, torch.float32))
    head_dim = queries[0].shape[-1]
    scaling = [s if s is not None else 1.0 / math.sqrt(head_dim) for s in capture.scaling]
    return queries, keys, scaling

def captured_score_bias(capture: Capture | None, attention: Any) -> torch.Tensor | None:
    """T5's position bias of every layer (layers × heads × Tq × Tk, the shape of `attention`), or None."""
    if capture is None or len(capture.bias) != attention.shape[0]:
        return None
    return torch.stack([b[0].expand(attention.shape[1:]) for b in capture.bias]).float()


def first_of_each(layers: list[torch.Tensor | None]) -> list[torch.Tensor]:
    """Batch item 0 of every layer's map, float32, on the first layer's device (a model split
    over GPUs gives each layer on its own), as views where they already are. `layers` (a list the
    caller owns) is emptied: what it held is released as the views take over."""
    device = layers[0].device
    first = []
    for index in range(len(layers)):
        first.append(layers[index][0].to(device, torch.float32))
        layers[index] = None
    return first


@contextmanager
def no_capture() -> Iterator[None]:
    yield None
