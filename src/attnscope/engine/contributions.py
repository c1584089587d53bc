"""ALTI, Aggregation of Layer-wise Token-to-token Interactions (Ferrando, Gállego & Costa-jussà
2022, "Measuring the Mixing of Contextual Information in the Transformer"): how much each input
token of an attention block makes each of its outputs, the residual and the normalisation included.

One block's output for token i decomposes over its input tokens j (x: the residual stream entering
the block, T × W):

    z_i = Σ_j T_i(x_j) + b_O,    T_i(x_j) = Σ_h α_hij f_h(x_j) + δ_ij x_i

with f_h(x_j) = (x̂_j W_V^h + b_V^h) W_O^h (value_norms.py; x̂ = x in BERT, the input norm's output in
a pre-norm decoder). A post-LN block (BERT) then gives y_i = LN(z_i) = γ ⊙ (z_i − μ(z_i)) / σ(z_i) + β,
and with its linear part at row i, L_i(v) = γ ⊙ (v − μ(v)) / σ(z_i) (σ of the whole row, fixed):

    y_i = Σ_j L_i(T_i(x_j)) + L_i(b_O) + β.

A pre-norm block (Llama, Qwen2, Mistral) ends at the residual sum: y_i = z_i and L_i is the
identity; its input norm scales each x_j by its own RMS only, so it sits inside f_h(x_j), exactly.

The contribution of j to i is the terms' L1 proximity to the output (the paper's eq. 9, 10):

    c_ij = max(0, ‖y_i‖₁ − ‖y_i − L_i(T_i(x_j))‖₁),    C_ij = c_ij / Σ_k c_ik

with y_i the block's real output, its biases included, as the authors' code compares
(mt-upc/transformer-contributions); the rows are rolled out through the layers by products,
R^0 = C^0, R^l = C^l R^(l−1) (analyses/contributions.py).

What is approximated, as in the paper: the LayerNorm is linear only with σ(z_i) held fixed (it is
the row's own); the bias L_i(b_O) + β is no token's; the feed-forward block (and a post-LN
model's second LayerNorm) is left out: it acts on each token alone and mixes none.

Cost: the terms T_i(x_j) are T × T × W for a layer (a 32-layer, 4,096-wide model at 1,000 tokens:
16 GB a layer), and the L1 distance does not factor: they are made and reduced a few keys of a
block of query rows at a time, under terms_block_bytes. σ(z_i) multiplies row i's terms, target and
‖y_i‖₁ alike, so it cancels in C: rows are compared at σ_i·y_i, a pass fewer.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch

from ..errors import InputError
from . import value_norms
from .exact_attention import block_bytes

# Post-LN encoders whose attention block ends in BertSelfOutput (dense, then LayerNorm(· + x)).
POST_NORM_TYPES = ("bert", "roberta")
# Pre-norm decoders whose layer is x + o_proj(attention(input_layernorm(x))).
PRE_NORM_TYPES = ("llama", "mistral", "qwen2")
_VALUE_NAMES = ("value", "v_proj")
# One block of terms (keys × rows × W float32) on the CPU: it is made (the target subtracted in the
# product) and reduced in a second pass while it is still in the cache. Measured on MiniLM at 512
# tokens (4 keys a block), 2-core CPU, its six layers: 3, 6 and 12 MiB alike (0.26-0.35 s), 24 MiB 0.53 s.
TERMS_BLOCK_BYTES = 3 * 2**20


class Scratch:
    """Flat buffers kept from one block (and layer) to the next: a fresh tensor of megabytes is a
    fresh mapping of pages, and on this CPU faulting them in cost the products 2 to 4 times their
    time (a norm layer of MiniLM at 512 tokens: 14 to 33 ms with fresh tensors)."""

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """A tensor of `shape` with `like`'s dtype and device, over memory kept under `name`
        (its values whatever they were)."""
        numel = math.prod(shape)
        kept = self._buffers.get(name)
        if kept is None or kept.numel() < numel or kept.dtype != like.dtype or kept.device != like.device:
            kept = self._buffers[name] = torch.empty(numel, dtype=like.dtype, device=like.device)
        return kept[:numel].view(shape)


@dataclass
class LinearNorm:
    """A post-LN block's LayerNorm: γ, β (W each) and ε."""

    weight: torch.Tensor
    bias: torch.Tensor
    eps: float

    def sigma(self, summed: torch.Tensor) -> torch.Tensor:
        """σ(z_i) as LayerNorm takes it (biased variance, ε inside the root): T × 1."""
        return (summed.var(-1, unbiased=False, keepdim=True) + self.eps).sqrt()

    def centred(self, vectors: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """γ ⊙ (v − μ(v)) over the last axis: σ_i · L_i(v); written into `out` (any layout of the
        same shape) when given."""
        out = torch.sub(vectors, vectors.mean(-1, keepdim=True), out=out)
        return out.mul_(self.weight)


@dataclass
class BlockParts:
    """What ALTI reads of one attention block over T tokens of model width W, on one device."""

    inputs: torch.Tensor  # T × W: the residual stream x entering the block
    head_vectors: torch.Tensor  # H × T × W: f_h(x_j)
    summed: torch.Tensor  # T × W: z, the residual plus the output projection's output (its bias in)
    output_bias: torch.Tensor | None  # W: b_O, no token's
    norm: LinearNorm | None  # post-LN: the LayerNorm after the sum; pre-norm: None

    def to(self, dtype: torch.dtype) -> BlockParts:
        convert = lambda t: None if t is None else t.to(dtype)
        norm = None if self.norm is None else LinearNorm(convert(self.norm.weight), convert(self.norm.bias), self.norm.eps)
        return BlockParts(convert(self.inputs), convert(self.head_vectors), convert(self.summed),
                          convert(self.output_bias), norm)

    def output(self) -> torch.Tensor:
        """y: T × W, the block's output (LN(z) post-LN, z pre-norm)."""
        if self.norm is None:
            return self.summed
        return self.norm.centred(self.summed) / self.norm.sigma(self.summed) + self.norm.bias


@dataclass
class _Scaled:
    """A block's parts at σ_i scale, the terms' layout ready for a batched product over keys."""

    vectors: torch.Tensor  # T × H × W: σ-free γ-centred f_h(x_j) (f_h(x_j) itself pre-norm), key-major
    residual: torch.Tensor  # T × W: likewise x_i
    target: torch.Tensor  # T × W: σ_i · y_i
    sigma: torch.Tensor  # T × 1 (ones pre-norm)


def _key_major_vectors(parts: BlockParts) -> tuple[torch.Tensor, torch.Tensor]:
    """σ_i · L_i of each f_h(x_j), key-major (T × H × W), and of each x_i (T × W): the vectors
    themselves pre-norm."""
    if parts.norm is None:
        return parts.head_vectors.transpose(0, 1).contiguous(), parts.inputs
    # Centred straight into the key-major layout: three fresh H × T × W tensors (centred, scaled,
    # then transposed) were 10 ms of each MiniLM layer's 48 at 512 tokens.
    n_heads, n_tokens, width = parts.head_vectors.shape
    key_major = torch.empty(n_tokens, n_heads, width, dtype=parts.head_vectors.dtype, device=parts.head_vectors.device)
    parts.norm.centred(parts.head_vectors, out=key_major.transpose(0, 1))
    return key_major, parts.norm.centred(parts.inputs)


def _scaled(parts: BlockParts) -> _Scaled:
    vectors, residual = _key_major_vectors(parts)
    if parts.norm is None:
        ones = torch.ones(parts.summed.shape[0], 1, dtype=parts.summed.dtype, device=parts.summed.device)
        return _Scaled(vectors, residual, parts.summed, ones)
    norm = parts.norm
    sigma = norm.sigma(parts.summed)
    return _Scaled(vectors, residual, norm.centred(parts.summed) + sigma * norm.bias, sigma)


def _scaled_terms(scaled: _Scaled, key_major: torch.Tensor, start: int) -> torch.Tensor:
    """σ_i · L_i(T_i(x_j)) for rows i = start…start + r − 1 and keys j < K: K × r × W (key-major:
    one batched product per key over the heads). key_major: the attention rows as K × H × r
    (_key_major)."""
    n_keys, n_rows = key_major.shape[0], key_major.shape[2]
    terms = torch.bmm(key_major.transpose(1, 2).to(scaled.vectors.dtype), scaled.vectors[:n_keys])
    # The residual, x_i, is i's alone: added along the diagonal j = start + i, a view (indexing
    # the pairs gathered and scattered them: a fifth of the time on MiniLM at 512 tokens).
    terms.diagonal(-start, 0, 1).add_(scaled.residual[start : start + n_rows].t())
    return terms


def _key_major(attention_rows: torch.Tensor, scratch: Scratch | None = None) -> torch.Tensor:
    """H × r × K attention rows as K × H × r, contiguous, whose transpose (1, 2) is each key's
    r × H operand (BLAS reads it transposed): bmm on the unpermuted view was 3 to 4 times slower on
    the CPU, and this layout is one 2-D transpose, half the time of a K × r × H copy. Made once for
    a block of rows as given (a run's whole layer), and sliced."""
    heads, n_rows, n_keys = attention_rows.shape
    flat = attention_rows.reshape(heads * n_rows, n_keys).t()
    if scratch is None:
        return flat.contiguous().view(n_keys, heads, n_rows)
    return scratch.get("key_major", (n_keys, heads * n_rows), attention_rows).copy_(flat).view(n_keys, heads, n_rows)


def normalised_terms(parts: BlockParts, attention_rows: torch.Tensor, start: int) -> torch.Tensor:
    """L_i(T_i(x_j)) for rows i = start… (r of them) and every key j: r × K × W (attention_rows:
    H × r × K). Summed over j with L_i(b_O) + β added, they are y_i (tests/engine/test_contributions.py)."""
    scaled = _scaled(parts)
    terms = _scaled_terms(scaled, _key_major(attention_rows), start).transpose(0, 1)
    return terms / scaled.sigma[start : start + attention_rows.shape[1], :, None]


def terms_block_bytes(device: torch.device) -> int:
    """The budget of one block of terms: TERMS_BLOCK_BYTES on the CPU (a block reduced while it is
    still in the cache), exact_attention.block_bytes on a GPU."""
    return TERMS_BLOCK_BYTES if device.type == "cpu" else block_bytes(device)


def keys_per_block(n_rows: int, width: int, budget: int) -> int:
    """Keys whose keys × n_rows × W float32 terms stay under `budget` bytes."""
    return max(1, budget // (4 * max(1, n_rows) * max(1, width)))


def _block_proximity(scaled: _Scaled, key_major: torch.Tensor, rows: tuple[int, int], keys: tuple[int, int],
                     shifts: torch.Tensor, target_norms: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """‖σy_i‖₁ − ‖σy_i − σL_i(T_i(x_j))‖₁ for rows i in [a, b) and keys j in [k0, k1): keys × rows.
    key_major: attention rows [a, b) as K × H × (b − a) (_key_major); shifts: −σy_i for every row,
    made once a layer. One batched product a key, over every row of the block at once (rows × H by
    H × W: the longest product the layout allows; a block of a few rows over every key made
    products of 16 rows, and packing each key's H × W cost as much as the product). buffer: flat,
    at least keys × rows × W, written over: the same memory for every block of a layer (a new one
    each block was a fresh mapping of pages, and made the product take 2 to 4 times as long)."""
    (a, b), (k0, k1) = rows, keys
    shape = (k1 - k0, b - a, shifts.shape[-1])
    terms = buffer[: shape[0] * shape[1] * shape[2]].view(shape)
    # The target subtracted in the product itself: baddbmm adds it to −σy_i broadcast over the keys.
    torch.baddbmm(shifts[a:b].expand(shape), key_major[k0:k1].transpose(1, 2).to(scaled.vectors.dtype), scaled.vectors[k0:k1],
                  out=terms)  # keys × rows × W: σL_i(T_i(x_j)) − σy_i
    # The residual, x_i, is i's alone: added where key j is row i, a view along the (key, row) diagonal.
    lo, hi = max(a, k0), min(b, k1)
    if lo < hi:
        terms.diagonal(k0 - a, 0, 1).add_(scaled.residual[lo:hi].t())
    # ‖·‖₁ as |·| in place, then a sum: linalg.vector_norm(·, 1) took 10 times as long on the CPU
    # (MiniLM at 512 tokens: 404 of the 890 ms).
    distance = terms.abs_().sum(-1)  # keys × rows
    return (target_norms[a:b] - distance).clamp_min_(0)


def layer_contributions(parts: BlockParts, attention_blocks: Iterable[tuple[int, int, torch.Tensor]], *,
                        causal: bool = False, budget: int | None = None, scratch: Scratch | None = None) -> torch.Tensor:
    """ALTI's C for one block: T × T (row i: how much each input token j makes output i; rows
    sum to 1), float32 on the parts' device. attention_blocks: (start, end, H × (end − start) × T)
    for every row, in any block sizes (a run's rows, or a long run's row_blocks); each is read a
    few keys at a time, so that one block of terms (keys × rows × W) stays under `budget` bytes
    (terms_block_bytes). causal: key j > i gets nothing (its α is 0), so the keys stop at the
    block's last row, and a key's terms start at its own row."""
    scaled = _scaled(parts)
    n_tokens, width = parts.summed.shape
    budget = terms_block_bytes(parts.summed.device) if budget is None else budget
    target_norms = torch.linalg.vector_norm(scaled.target, 1, -1)  # T: ‖σy_i‖₁
    shifts = scaled.target.neg()
    out = torch.zeros(n_tokens, n_tokens, dtype=torch.float32, device=parts.summed.device)
    scratch = Scratch() if scratch is None else scratch
    for start, end, block in attention_blocks:
        key_major = _key_major(block, scratch)  # T × H × rows
        n_keys = end if causal else n_tokens
        step = min(n_keys, keys_per_block(end - start, width, budget))
        buffer = scratch.get("terms", (step * (end - start) * width,), scaled.vectors)
        for k0 in range(0, n_keys, step):
            k1 = min(n_keys, k0 + step)
            a = max(start, k0) if causal else start  # causal: rows before key k0 take none of keys k0…
            proximity = _block_proximity(scaled, key_major[:, :, a - start :], (a, end), (k0, k1), shifts, target_norms,
                                         buffer)
            out[a:end, k0:k1] = proximity.t()
        _make_shares(out[start:end, :n_keys], start, causal)
    return out


def _make_shares(rows: torch.Tensor, start: int, causal: bool) -> None:
    """Rows start… of C (r × keys), in place: a causal run's later keys exactly 0 (their α is 0, and
    their measure 0 but for rounding), then each row divided by its sum."""
    if causal:
        n_rows, n_keys = rows.shape
        later = torch.arange(n_keys, device=rows.device)[None, :] > torch.arange(start, start + n_rows, device=rows.device)[:, None]
        rows.masked_fill_(later, 0)
    rows /= rows.sum(-1, keepdim=True).clamp_min(torch.finfo(rows.dtype).tiny)


def norm_layer_contributions(parts: BlockParts, attention_blocks: Iterable[tuple[int, int, torch.Tensor]], *,
                             causal: bool = False, budget: int | None = None, scratch: Scratch | None = None) -> torch.Tensor:
    """Kobayashi et al. 2021's norms ("Incorporating Residual and Normalization Layers into Analysis of
    Masked Language Models", ATTN-RES-LN) as one block's C, T × T like layer_contributions: n_ij =
    ‖L_i(T_i(x_j))‖₂, the same terms as ALTI's measured by their own length, and C_ij = n_ij / Σ_k n_ik
    (rolled out by products as GlobEnc, Modarressi et al. 2022, rolls them). Unlike the L1 distance,
    the L2 norm factors: with g_hj = σ_i L_i(f_h(x_j)) (σ-free: σ_i cancels in the row's shares) and
    r_i likewise of x_i,

        σ_i² n_ij² = α_ijᵀ G_j α_ij + δ_ij (2 α_ij · (g_·j r_j) + ‖r_j‖²),    G_j = [g_hj · g_h'j]  (H × H),

    so a layer costs T × H × H × W for the Gram matrices and T × T × H² for the forms: no T × T × W
    terms. `budget` is unused (nothing of width W per pair is made); kept for one call shape."""
    del budget
    scratch = Scratch() if scratch is None else scratch
    vectors, residual = _key_major_vectors(parts)  # g_hj and r_j without σ, which cancels in the shares
    n_tokens = parts.summed.shape[0]
    gram = torch.bmm(vectors, vectors.transpose(1, 2))  # T × H × H: G_j
    cross = torch.bmm(vectors, residual[:, :, None])[..., 0]  # T × H: g_hj · r_j
    own = residual.pow(2).sum(-1)  # T: ‖r_j‖²
    out = torch.zeros(n_tokens, n_tokens, dtype=torch.float32, device=parts.summed.device)
    for start, end, block in attention_blocks:
        n_keys = end if causal else n_tokens
        key_major = _key_major(block, scratch)[:n_keys].to(vectors.dtype)  # K × H × rows
        forms = torch.bmm(gram[:n_keys], key_major, out=scratch.get("forms", key_major.shape, key_major))
        squared = forms.mul_(key_major).sum(1)  # K × rows: α_ijᵀ G_j α_ij
        lo, hi = start, min(end, n_keys)  # the residual, x_i, where key j is row i
        diagonal = squared.diagonal(-start)  # (j = start + r, r): rows lo…hi − 1
        diagonal += 2 * (key_major.diagonal(-start, 0, 2).t() * cross[lo:hi]).sum(-1) + own[lo:hi]
        rows = out[start:end, :n_keys]
        rows.copy_(squared.clamp_min_(0).sqrt_().t())
        _make_shares(rows, start, causal)
    return out


# How a block's C is measured: contributions' `method` (analyses/contributions.py).
LAYER_METHODS = {"alti": layer_contributions, "norm": norm_layer_contributions}


def _parent(model: torch.nn.Module, child: torch.nn.Module) -> torch.nn.Module:
    parent = value_norms.parent_of(model, child)
    if parent is None:
        raise LookupError(f"{type(child).__name__} is not part of {type(model).__name__}")
    return parent


def family(model) -> str:
    """"post" (BERT's post-LN) or "pre" (a pre-norm decoder); InputError naming the model otherwise.
    `model`: an AttentionModel."""
    model_type = getattr(getattr(model.model, "config", None), "model_type", None)
    if model_type in POST_NORM_TYPES and not model.is_encoder_decoder:
        return "post"
    if model_type in PRE_NORM_TYPES:
        return "pre"
    raise InputError(
        f"Contributions (ALTI, norms) follow the residual and the normalisation of a known layer layout, and {model.name} "
        f"({model_type or type(model.model).__name__}) is not one of them: supported are the post-LN encoders "
        f"{', '.join(POST_NORM_TYPES)} and the pre-norm decoders {', '.join(PRE_NORM_TYPES)}.")


@dataclass
class BlockCapture:
    """Per layer, recorded during one run: x entering the block (T × W), the value projection's
    output (1 × T × key heads · d) and the output projection's (T × W, b_O in)."""

    inputs: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    projected: list[torch.Tensor] = field(default_factory=list)


@contextlib.contextmanager
def capturing_blocks(model) -> Iterator[BlockCapture]:
    """Hooks that record each attention block's input, values and output projection during the
    block (an AttentionModel's run), only from this thread, removed after whatever happens."""
    kind = family(model)
    hf, capture, handles, owner = model.model, BlockCapture(), [], threading.get_ident()

    def record(into: list, pick):
        def hook(_module, args, output=None):
            if threading.get_ident() == owner:
                into.append(pick(args, output).detach())
        return hook

    try:
        for module in model.attention_modules:
            value = next((getattr(module, n) for n in _VALUE_NAMES if isinstance(getattr(module, n, None), torch.nn.Module)), None)
            if value is None:
                raise InputError(f"{model.name}'s attention has no value projection (value, v_proj) to read f_h(x_j) from.")
            handles.append(value.register_forward_hook(record(capture.values, lambda a, o: o)))
            out_layer = value_norms.output_layer(hf, module)
            handles.append(out_layer.register_forward_hook(record(capture.projected, lambda a, o: o[0])))
            if kind == "post":  # BertSelfOutput(attention output, x): x is its second argument
                handles.append(_parent(hf, out_layer).register_forward_pre_hook(record(capture.inputs, lambda a, o: a[1][0])))
            else:  # the decoder layer's input norm reads x
                norm = _parent(hf, module).input_layernorm
                handles.append(norm.register_forward_pre_hook(record(capture.inputs, lambda a, o: a[0][0])))
        yield capture
    finally:
        for handle in handles:
            handle.remove()


def block_parts(model, capture: BlockCapture, layer: int) -> BlockParts:
    """Layer `layer`'s BlockParts (float32, on the model's device) from a capture of one run."""
    module = model.attention_modules[layer]
    weight, bias = value_norms.output_projection(model.model, module)
    head_dim = weight.shape[1] // model.n_heads
    values = value_norms.split_values(capture.values[layer], model.n_heads, head_dim).float()
    inputs = capture.inputs[layer].float()
    norm = None
    if family(model) == "post":
        layer_norm = _parent(model.model, value_norms.output_layer(model.model, module)).LayerNorm
        norm = LinearNorm(layer_norm.weight.detach().float(), layer_norm.bias.detach().float(), float(layer_norm.eps))
    return BlockParts(inputs=inputs, head_vectors=value_norms.head_outputs(values, weight.detach().float()),
                      summed=inputs + capture.projected[layer].float(),
                      output_bias=None if bias is None else bias.detach().float(), norm=norm)


def attention_row_blocks(result, layer: int) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Every row of a run's layer as (start, end, H × rows × T): the whole kept map at once, or a
    long run's exact row blocks (never T × T)."""
    if hasattr(result, "row_blocks"):
        yield from result.row_blocks(layer)
    else:
        maps = result.layer_attention(layer)
        yield 0, maps.shape[-2], maps


def run_contributions(model, text: str, text_b: str | None = None, *, max_length: int | None = None,
                      attention: str = "auto", budget: int | None = None, method: str = "alti"):
    """Run `model` (an AttentionModel) on the text with the blocks recorded and return (the run,
    layers × T × T per-layer C, float32 on the CPU), C measured by `method` (LAYER_METHODS: "alti",
    "norm"). The model leaves as it came (hooks removed)."""
    measure = LAYER_METHODS[method]
    with model._lock, capturing_blocks(model) as capture:  # the lock: no other run's layers in this capture
        result = model.run(text, text_b, max_length=max_length, attention=attention)
    if not (len(capture.inputs) == len(capture.values) == len(capture.projected) == result.n_layers):
        raise InputError(f"{model.name} ran its attention blocks other than once per layer: contributions cannot be read.")
    layers, scratch = [], Scratch()  # one set of buffers for every layer
    with torch.inference_mode():
        for layer in range(result.n_layers):
            parts = block_parts(model, capture, layer)
            layers.append(measure(parts, attention_row_blocks(result, layer), causal=result.causal, budget=budget,
                                  scratch=scratch).cpu())
            capture.values[layer] = capture.inputs[layer] = capture.projected[layer] = None  # freed as read
    return result, torch.stack(layers)
