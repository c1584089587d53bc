"""What each key passes, not only how much it is weighed (Kobayashi et al. 2020, "Attention is Not
Only a Weight"): head h's transformed value of token j, f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h, with
W_O^h the head's slice of the output projection and the output bias left out (it is no token's).
Σ_h Σ_j α_hij f_h(x_j) + b_O is the attention block's output (before the residual and any
normalisation), and ‖α_hij f_h(x_j)‖ = α_hij ‖f_h(x_j)‖: one heads × tokens vector of norms a
layer weighs every row.

The value projection's output is recorded by the run's hooks (hooks.capture_queries_keys); the
output projection is the module's own (o_proj, out_proj, o, out_lin, GPT-2's c_proj) or, for
BERT's family, its sibling (attention.output.dense).
"""

from __future__ import annotations

import weakref

import torch

_OWN = ("o_proj", "out_proj", "o", "out_lin", "c_proj")


def output_layer(model: torch.nn.Module | None, attention_module: torch.nn.Module) -> torch.nn.Module:
    """The output projection after `attention_module`'s heads: its own (o_proj, out_proj, o,
    out_lin, c_proj) or, in BERT's family, its sibling's (BertAttention holds .self and
    .output.dense: found through `model`)."""
    own = next((getattr(attention_module, name) for name in _OWN
                if isinstance(getattr(attention_module, name, None), torch.nn.Module)), None)
    if own is not None:
        return own
    if model is None:
        raise LookupError(f"no output projection of its own in {type(attention_module).__name__}")
    parent = parent_of(model, attention_module)
    dense = getattr(getattr(parent, "output", None), "dense", None)
    if not isinstance(dense, torch.nn.Module):
        raise LookupError(f"no output projection found after {type(attention_module).__name__}")
    return dense


# Each model's modules' parents, by the child's id: found once a model, not by walking every module
# at each lookup (a BERT batch's norms walked the model 24 times, 7 % of a head finder's run). An
# entry is checked before it is used: a module moved or replaced since is looked up again.
_PARENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def parent_of(model: torch.nn.Module, module: torch.nn.Module) -> torch.nn.Module | None:
    """The module of `model` that holds `module` as a child, or None where none does."""
    parent = _PARENTS.get(model, {}).get(id(module))
    if parent is None or not any(child is module for child in parent.children()):
        parents = {id(child): m for m in model.modules() for child in m.children()}
        _PARENTS[model] = parents
        parent = parents.get(id(module))
    return parent


def output_projection(model: torch.nn.Module | None, attention_module: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """output_layer's weight as model width × (heads · head size), and its bias (None without one)."""
    layer = output_layer(model, attention_module)
    weight = layer.weight.t() if type(layer).__name__ == "Conv1D" else layer.weight  # GPT-2's Conv1D: in × out
    return weight, getattr(layer, "bias", None)


def gated(module: torch.nn.Module) -> bool:
    """Gated attention outputs (Qwen3-Next, Qwen3.5): the query projection gives each head's query
    and an output gate, [q_h | g_h] a head, twice what the output projection reads, and σ(g_h) at
    query i multiplies head h's output before it. The gate belongs in f, f_h(x_j; i) = (v_hj ⊙
    σ(g_hi)) W_O^h, which then depends on the query too: there is no one norm per key."""
    query, output = getattr(module, "q_proj", None), getattr(module, "o_proj", None)
    return (isinstance(query, torch.nn.Linear) and isinstance(output, torch.nn.Linear)
            and query.out_features == 2 * output.in_features)


def projections(model: torch.nn.Module, modules) -> dict[int, torch.Tensor]:
    """Each attention module's output projection weight by id(module), where one is found (for
    the attention function, which sees the module only)."""
    found = {}
    for module in modules:
        try:
            found[id(module)] = output_projection(model, module)[0]  # the parameter itself: its Gram is kept (_gram)
        except LookupError:
            continue
    return found


def split_values(projected: torch.Tensor, n_heads: int, head_dim: int) -> torch.Tensor:
    """A value projection's output (1 × T × key heads · d) as heads × T × d, a key-value head
    repeated for each query head that reads it (grouped-query attention: h reads h // group)."""
    _, t, width = projected.shape
    values = projected[0].reshape(t, width // head_dim, head_dim).transpose(0, 1)
    group = n_heads // values.shape[0]
    return values if group == 1 else values.repeat_interleave(group, dim=0)


def head_outputs(values: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """f_h(x_j) for every head and token: heads × T × model width (values: heads × T × d)."""
    n_heads, _, head_dim = values.shape
    slices = weight.reshape(weight.shape[0], n_heads, head_dim).permute(1, 2, 0)  # heads × d × width
    return torch.bmm(values, slices.to(values.dtype))


# Each output projection's per-head Gram matrices, by the weight tensor (held weakly: an entry is
# used only for the very tensor it was made from) and its version: a generation step computes norms
# for one token a layer, and making W_O^hᵀ W_O^h again each time was a fifth of a step's time on
# SmolLM2. A weight changed in place has another version; the oldest entries go first.
_GRAMS: dict[tuple, tuple[weakref.ref, torch.Tensor]] = {}
_GRAMS_KEPT = 256


def _gram(weight: torch.Tensor, n_heads: int, head_dim: int) -> torch.Tensor:
    """W_O^hᵀ W_O^h of every head: heads × d × d, float32, on the weight's device."""
    key = (id(weight), weight._version, n_heads, head_dim)
    held = _GRAMS.get(key)
    if held is not None and held[0]() is weight:
        return held[1]
    with torch.no_grad():
        slices = weight.detach().float().reshape(weight.shape[0], n_heads, head_dim).permute(1, 0, 2)  # heads × width × d
        gram = slices.transpose(1, 2) @ slices
    while len(_GRAMS) >= _GRAMS_KEPT:
        _GRAMS.pop(next(iter(_GRAMS)))
    _GRAMS[key] = (weakref.ref(weight), gram)
    return gram


# Up to this many bytes of heads × T × d products, every head's norms are made at once (a few ops,
# not six per key-value head: each op waits on torch's threads on a loaded machine); above it, a
# key-value head at a time (an 8B model's 32 heads at 32,768 tokens would hold 537 MB).
NORMS_AT_ONCE_BYTES = 64 * 2**20


def norms(values: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """‖f_h(x_j)‖ for every head and token (heads × T), through each head's d × d Gram matrix
    W_O^hᵀ W_O^h: T·d² a head instead of T·d·width, and never a heads × T × width tensor (at 32,768
    tokens on an 8B model that would be 17 GB). `values`: heads × T × d, or key-value heads × T × d
    (grouped-query attention: each is read by its group of query heads, never repeated). In
    float32: within 1e-5 of ‖f‖ in float64 on every family tested, at half the time of float64."""
    n_kv, n_tokens, head_dim = values.shape
    n_heads = weight.shape[1] // head_dim
    group = n_heads // n_kv
    gram = _gram(weight, n_heads, head_dim).reshape(n_kv, group, head_dim, head_dim)
    if 4 * n_heads * n_tokens * head_dim <= NORMS_AT_ONCE_BYTES:
        return _norms_at_once(values[None], gram[None])[0]
    out = torch.empty(n_heads, values.shape[1], dtype=torch.float32, device=values.device)
    for g in range(n_kv):  # one key-value head's values at a time, in float32
        v = values[g].float()
        out[g * group : (g + 1) * group] = ((v @ gram[g]) * v).sum(-1).clamp_min(0).sqrt()
    return out


# The Gram matrices of a run's layers stacked (layers × heads × d × d), by the weights' ids and
# versions (held weakly, as _GRAMS): a generation step reads them all for its one token a layer.
_STACKED: dict[tuple, tuple[list[weakref.ref], torch.Tensor]] = {}
_STACKED_KEPT = 8


def _stacked_grams(weights: list[torch.Tensor], n_heads: int, head_dim: int) -> torch.Tensor:
    key = (tuple((id(w), w._version) for w in weights), n_heads, head_dim)
    held = _STACKED.get(key)
    if held is not None and all(ref() is w for ref, w in zip(held[0], weights)):
        return held[1]
    stacked = torch.stack([_gram(w, n_heads, head_dim) for w in weights])
    while len(_STACKED) >= _STACKED_KEPT:
        _STACKED.pop(next(iter(_STACKED)))
    _STACKED[key] = ([weakref.ref(w) for w in weights], stacked)
    return stacked


def norms_of_layers(values: list[torch.Tensor], weights: list[torch.Tensor]) -> list[torch.Tensor]:
    """norms() of several layers (values: key-value heads × T × d each; weights: each layer's
    output projection), in one batched product where their shapes agree and their products fit
    NORMS_AT_ONCE_BYTES: a generation step has one token a layer, and five small products a layer
    were a third of its time on a loaded 2-core machine (each waits on torch's threads); a head
    finder's batch, six a batch, a quarter of what its norm metrics added on MiniLM."""
    shapes = {(tuple(v.shape), v.device, tuple(w.shape), w.device) for v, w in zip(values, weights)}
    n_kv, n_tokens, head_dim = values[0].shape
    n_heads = weights[0].shape[1] // head_dim
    if len(shapes) != 1 or 4 * len(values) * n_heads * n_tokens * head_dim > NORMS_AT_ONCE_BYTES:
        return [norms(v, w) for v, w in zip(values, weights)]
    grams = _stacked_grams(weights, n_heads, head_dim).view(len(values), n_kv, n_heads // n_kv, head_dim, head_dim)
    return list(_norms_at_once(torch.stack(values), grams).unbind(0))


def _norms_at_once(values: torch.Tensor, grams: torch.Tensor) -> torch.Tensor:
    """values: layers × key heads × T × d; grams: layers × key heads × group × d × d →
    layers × heads × T, float32 (a key-value head's query heads in order, as norms')."""
    n_layers, n_kv, n_tokens, head_dim = values.shape
    group = grams.shape[2]
    v = values.float().reshape(n_layers * n_kv, 1, n_tokens, head_dim)
    products = v @ grams.reshape(n_layers * n_kv, group, head_dim, head_dim)  # layers · key heads × group × T × d
    return products.mul_(v).sum(-1).clamp_min_(0).sqrt_().view(n_layers, n_kv * group, n_tokens)


def captured(model: torch.nn.Module, modules, projected: list[torch.Tensor], n_heads: int,
             device: torch.device) -> tuple[list[torch.Tensor] | None, torch.Tensor | None]:
    """Each layer's values (heads × T × d, float32) and ‖f_h(x_j)‖ (layers × heads × T) from the
    value projections a run recorded, one per attention module; (None, None) when they were not
    all recorded or a module's output projection is not found; norms None where heads' outputs are
    gated (gated: the values are kept, what a key passes depends on the query too)."""
    if len(projected) != len(modules) or not projected:
        return None, None
    values, layer_norms = [], []
    for module, output in zip(modules, projected):
        try:
            weight, _ = output_projection(model, module)
        except LookupError:
            return None, None
        head_dim = weight.shape[1] // n_heads
        v = split_values(output, n_heads, head_dim).float()
        values.append(v.to(device))
        layer_norms.append(norms(v, weight.to(v.device)).to(device))
    return values, None if any(gated(module) for module in modules) else torch.stack(layer_norms)


def of_part(model: torch.nn.Module, modules, projected: list[torch.Tensor], n_heads: int,
            device: torch.device) -> dict[str, torch.Tensor | None]:
    """An encoder-decoder part's `values` (layers × heads × keys × d, stacked) and `value_norms`
    (layers × heads × keys), as a result's fields, from what its hooks recorded. Cross-attention's
    value projection reads the encoder's states, so its values and norms are over the encoder's
    tokens, the part's keys: Σ_h Σ_j α_hij f_h(x_j) + b_O is the cross-attention's own output."""
    values, layer_norms = captured(model, modules, projected, n_heads, device)
    return {"values": None if values is None else torch.stack(values), "value_norms": layer_norms}


def missing(model: torch.nn.Module, modules) -> str:
    """Why a model's runs keep no ‖f_h(x_j)‖ per key, as a clause ("a gate multiplies each head's
    output ..."); empty when they keep one (every attention module has an output projection, none
    gated: `captured`'s conditions)."""
    if not modules:
        return "its attention modules were not found, so neither were their value vectors"
    if any(gated(module) for module in modules):
        return ("a gate multiplies each head's output by the query's own factor (Qwen3-Next's gated attention), so what "
                "a key passes depends on the query, and no norm per key says it")
    for module in modules:
        try:
            output_projection(model, module)
        except LookupError:
            return f"no output projection was found after {type(module).__name__}, so what a key passes is unknown"
    return ""


def batch_norms(model: torch.nn.Module, modules, projected: list[torch.Tensor], n_heads: int) -> torch.Tensor | None:
    """‖f_h(x_j)‖ of every document of a batch, B × layers × heads × T (padding positions too: the
    caller cuts them off), from the value projections one forward of the batch recorded (B × T ×
    key heads · d each, one per module, in order); None where `captured` keeps none (not all
    recorded, a projection not found, gated heads)."""
    if len(projected) != len(modules) or not projected or missing(model, modules):
        return None
    values, weights = [], []
    for module, output in zip(modules, projected):
        weight, _ = output_projection(model, module)
        batch, n_tokens, width = output.shape
        head_dim = weight.shape[1] // n_heads
        values.append(output.reshape(batch * n_tokens, width // head_dim, head_dim).transpose(0, 1))  # key heads × B·T × d
        weights.append(weight.to(output.device))
    layers = norms_of_layers(values, weights)  # every layer in one product where they fit
    return torch.stack([n.view(n_heads, batch, n_tokens) for n in layers]).permute(2, 0, 1, 3)
