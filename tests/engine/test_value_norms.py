"""What each key passes (issue 47, Kobayashi et al. 2020): f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h from
what a run records, checked by the identity that defines it: Σ_h Σ_j α_hij f_h(x_j) + b_O is the
attention block's own output (before the residual and any normalisation), in each family's layout:
BERT, GQA (Llama, Qwen2), GPT-2's fused Conv1D, Gemma 2's soft-capped scores and sliding windows
(its output projection's output, before its post-attention norm), gpt-oss's sink logits (rows that
sum to less than 1: the sink's share is kept, never renormalised), Qwen3-Next's output gate (σ(gate) of
the query multiplies the head's output before o_proj: it belongs in f, which then depends on the query,
so the engine keeps no per-key norm for it), and each part of BART (encoder, decoder and cross-attention,
whose keys are the encoder's tokens)."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from small_models import FAMILIES, families, gated_qwen3_next, sharpened, tiny_bart
from small_models import TEXT as LONG_TEXT
from test_token_labels import byte_level_bpe

import attnscope
from attnscope.engine import value_norms, weighing

TEXT = "The keeper fed the lion before the storm, and it slept."
# Families that soft-cap or sink their scores (small_models.families(), read by a byte-level BPE
# of 320 tokens): a text longer than their sliding window of 8.
RECOMPUTED = ["gemma2 (soft-capping)", "gpt-oss (sink logits)"]


@pytest.fixture(scope="module")
def bpe():
    return byte_level_bpe()


def _engine(family, default_model, bert_tokenizer, bpe, dtype=torch.float32):
    """The family's sharpened small model, loaded, and the text it reads."""
    if family in RECOMPUTED:
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gpt-oss's config warns of its RoPE scaling
            model = sharpened(families()[family]()).to(dtype)
        if dtype == torch.float64:  # gpt-oss's experts: torch's grouped matmul has no float64
            model.config._experts_implementation = "eager"
        return attnscope.load(model, bpe, device="cpu"), LONG_TEXT
    if FAMILIES[family] is None:
        return default_model, TEXT
    torch.manual_seed(0)
    return attnscope.load(sharpened(FAMILIES[family]()).to(dtype), bert_tokenizer, device="cpu"), TEXT


@contextlib.contextmanager
def _block_outputs(model, modules):
    """Each attention module's block output, as its own output projection gives it (float64)."""
    outputs = {}
    handles = [value_norms.output_layer(model, module).register_forward_hook(
        lambda _m, _i, out, k=k: outputs.__setitem__(k, out[0].detach().double()))
        for k, module in enumerate(modules)]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


def _identity_error(model, modules, attention, values, outputs, label, tolerance=1e-5) -> float:
    """Asserts Σ_h Σ_j α_hij f_h(x_j) + b_O = the block's output for every layer (attention: a
    layer's heads × Tq × Tk; values: a layer's heads × Tk × d) and returns the largest error
    relative to the output's largest entry."""
    worst = 0.0
    for layer, module in enumerate(modules):
        weight, bias = value_norms.output_projection(model, module)
        f = value_norms.head_outputs(values(layer).double(), weight.detach().double())  # heads × Tk × width
        rebuilt = torch.einsum("hij,hjd->id", attention(layer).double(), f)
        if bias is not None:
            rebuilt = rebuilt + bias.detach().double()
        scale = max(1.0, outputs[layer].abs().max().item())
        torch.testing.assert_close(rebuilt, outputs[layer], rtol=0, atol=tolerance * scale, msg=f"{label}, layer {layer}")
        worst = max(worst, (rebuilt - outputs[layer]).abs().max().item() / scale)
    return worst


@pytest.mark.parametrize("family", [*FAMILIES, *RECOMPUTED])
def test_the_weighted_values_sum_to_the_attention_blocks_own_output(family, default_model, bert_tokenizer, bpe):
    engine, text = _engine(family, default_model, bert_tokenizer, bpe)
    model = engine.model
    with _block_outputs(model, engine.attention_modules) as outputs:
        result = engine.run(text)
    assert result.values is not None and result.value_norms.shape == (engine.n_layers, engine.n_heads, len(result.tokens))
    _identity_error(model, engine.attention_modules, lambda k: result.attention[k], lambda k: result.values[k], outputs, family)
    for layer, module in enumerate(engine.attention_modules):
        weight, _ = value_norms.output_projection(model, module)
        f = value_norms.head_outputs(result.values[layer].double(), weight.detach().double())
        torch.testing.assert_close(result.value_norms[layer].double(), f.norm(dim=-1), rtol=1e-5, atol=1e-7)
    if family == "gpt-oss (sink logits)":  # the sink keeps its share: rows sum to less than 1
        assert float(result.attention.sum(-1).min()) < 0.5


@pytest.mark.parametrize("family", [f for f in (*FAMILIES, *RECOMPUTED) if FAMILIES.get(f, ...) is not None])
def test_the_identity_holds_in_float64(family, default_model, bert_tokenizer, bpe):
    """In float64 the identity is exact to rounding: a wrong key, head, scale or bias would show far above it."""
    engine, text = _engine(family, default_model, bert_tokenizer, bpe, dtype=torch.float64)
    with _block_outputs(engine.model, engine.attention_modules) as outputs:
        result = engine.run(text)
    error = _identity_error(engine.model, engine.attention_modules, lambda k: result.attention[k],
                            lambda k: result.values[k], outputs, family, tolerance=1e-6)
    assert error < 1e-6


def test_grouped_query_heads_read_their_key_value_heads_values(bert_tokenizer):
    """Query heads 0 and 1 share key-value head 0, heads 2 and 3 share head 1: their values are
    the same vectors, and their norms differ only through their own slice of W_O."""
    torch.manual_seed(0)
    engine = attnscope.load(sharpened(FAMILIES["llama (grouped-query)"]()), bert_tokenizer, device="cpu")
    result = engine.run(TEXT)
    values = result.values[0]
    assert torch.equal(values[0], values[1]) and torch.equal(values[2], values[3]) and not torch.equal(values[1], values[2])
    assert not torch.allclose(result.value_norms[0, 0], result.value_norms[0, 1])


def test_norms_at_once_per_key_value_head_and_per_layer_are_the_norms_of_f(monkeypatch):
    """‖f_h(x_j)‖ from the Gram matrices, every head at once, a key-value head at a time (above
    NORMS_AT_ONCE_BYTES) and several layers at once, against f_h(x_j) made whole (float64)."""
    torch.manual_seed(0)
    values = [torch.randn(2, 5, 4) for _ in range(3)]  # key-value heads × T × d: 4 query heads, groups of 2
    weights = [torch.randn(8, 16) for _ in range(3)]  # width × heads · d
    expected = [value_norms.head_outputs(v.double().repeat_interleave(2, 0), w.double()).norm(dim=-1) for v, w in zip(values, weights)]
    at_once = [value_norms.norms(v, w) for v, w in zip(values, weights)]
    monkeypatch.setattr(value_norms, "NORMS_AT_ONCE_BYTES", 0)
    by_head = [value_norms.norms(v, w) for v, w in zip(values, weights)]
    layers = value_norms.norms_of_layers(values, weights)
    for found in (at_once, by_head, layers):
        for norm, want in zip(found, expected):
            assert norm.shape == (4, 5) and torch.allclose(norm.double(), want, rtol=1e-5), (norm, want)


def test_the_embedded_models_special_tokens_pass_less_than_their_weight_says():
    """Kobayashi et al.'s finding, on the embedded MiniLM: [CLS] and [SEP] take much attention and
    pass small vectors; their norm is below the other tokens' in most layers."""
    engine = attnscope.load(device="cpu")
    result = engine.run("The keeper fed the lion before the storm, and then the lion slept until dawn.")
    special = torch.tensor([t in ("[CLS]", "[SEP]") for t in result.tokens])
    norms = result.value_norms.mean(1)  # layers × T
    smaller = (norms[:, special].mean(-1) < norms[:, ~special].mean(-1)).sum().item()
    assert smaller >= engine.n_layers // 2 + 1, norms


@pytest.mark.parametrize("family", ["llama (grouped-query)", "qwen2 (value biases, grouped-query)", *RECOMPUTED])
def test_a_long_run_keeps_the_same_norms_and_never_the_values(family, default_model, bert_tokenizer, bpe):
    """On demand, the norms are taken where the attention function sees the values (key heads
    × T × d, never repeated per query head) and only heads × T floats are kept; its exact rows
    times the values (recorded here, on the value projections) rebuild the block's output."""
    engine, text = _engine(family, default_model, bert_tokenizer, bpe)
    full = engine.run(text, attention="full")
    projected = []
    handles = [module.v_proj.register_forward_hook(lambda _m, _i, out: projected.append(out.detach()))
               for module in engine.attention_modules]
    try:
        with _block_outputs(engine.model, engine.attention_modules) as outputs:
            long = engine.run(text, attention="on_demand")
    finally:
        for handle in handles:
            handle.remove()
    assert long.value_norms.shape == full.value_norms.shape
    torch.testing.assert_close(long.value_norms, full.value_norms, rtol=1e-5, atol=1e-6)
    assert not hasattr(long, "values")
    n, d = long.n_tokens, projected[0].shape[-1] // engine.model.config.num_key_value_heads  # d: a head's width
    _identity_error(engine.model, engine.attention_modules,
                    lambda k: torch.stack([long.attention_rows(k, h, range(n)) for h in range(long.n_heads)]),
                    lambda k: value_norms.split_values(projected[k], engine.n_heads, d), outputs, family)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_part_of_an_encoder_decoder_sums_to_its_own_output(dtype, bert_tokenizer):
    """BART: encoder and decoder self-attention, and cross-attention, whose values are the encoder's
    states through the cross-attention's own value projection: its norms are over the encoder's
    tokens (the part's keys), and α (decoder tokens × encoder tokens) times them rebuilds its out_proj's output."""
    engine = attnscope.load(tiny_bart(len(bert_tokenizer)).to(dtype), bert_tokenizer, device="cpu")
    with contextlib.ExitStack() as stack:
        outputs = {part: stack.enter_context(_block_outputs(engine.model, modules)) for part, modules in engine.groups.items()}
        result = engine.run(TEXT, "Der Wärter fütterte den Löwen.")
    encoder_tokens = len(result.parts["encoder"].tokens)
    for part, modules in engine.groups.items():
        run = result.parts[part]
        assert run.value_norms is not None and run.value_norms.shape == (*run.attention.shape[:2], run.attention.shape[-1])
        assert run.values.shape[2] == (encoder_tokens if part != "decoder" else len(run.tokens))
        _identity_error(engine.model, modules, lambda k, run=run: run.attention[k], lambda k, run=run: run.values[k],
                        outputs[part], part, tolerance=1e-5 if dtype == torch.float32 else 1e-6)
        for layer, module in enumerate(modules):
            weight, _ = value_norms.output_projection(engine.model, module)
            f = value_norms.head_outputs(run.values[layer].double(), weight.detach().double())
            torch.testing.assert_close(run.value_norms[layer].double(), f.norm(dim=-1), rtol=1e-5, atol=1e-7)


def test_a_gated_heads_output_belongs_in_f_and_leaves_no_norm_per_key(bert_tokenizer):
    """Qwen3-Next: o_proj reads each head's Σ_j α_hij v_hj times σ(g_hi), the gate of query i. With
    the gate in f, f_h(x_j; i) = (v_hj ⊙ σ(g_hi)) W_O^h, the identity holds; without it, it fails.
    ‖α f‖ then depends on the query as well as the key, so the run keeps its values but no norms,
    and says why it cannot be weighed."""
    engine = attnscope.load(gated_qwen3_next(), bert_tokenizer, device="cpu")
    queries = []
    handles = [module.q_proj.register_forward_hook(lambda _m, _i, out: queries.append(out[0].detach().double()))
               for module in engine.attention_modules]
    try:
        with _block_outputs(engine.model, engine.attention_modules) as outputs:
            result = engine.run(TEXT)
    finally:
        for handle in handles:
            handle.remove()
    assert all(value_norms.gated(module) for module in engine.attention_modules)
    assert result.values is not None and result.value_norms is None
    assert "Qwen3-Next" in weighing.no_value_norms(result)
    for layer, module in enumerate(engine.attention_modules):
        n, (heads, d) = len(result.tokens), result.values.shape[1::2]
        gate = torch.sigmoid(queries[layer].view(n, heads, 2 * d)[..., d:].transpose(0, 1))  # heads × T × d
        weight, bias = value_norms.output_projection(engine.model, module)
        slices = weight.detach().double().reshape(-1, heads, d).permute(1, 2, 0)  # heads × d × width
        mixed = result.attention[layer].double() @ result.values[layer].double()  # heads × T × d: Σ_j α_hij v_hj
        rebuilt = torch.einsum("hid,hdw->iw", mixed * gate, slices) + bias.detach().double()
        scale = max(1.0, outputs[layer].abs().max().item())
        torch.testing.assert_close(rebuilt, outputs[layer], rtol=0, atol=1e-5 * scale)
        ungated = torch.einsum("hid,hdw->iw", mixed, slices) + bias.detach().double()
        assert (ungated - outputs[layer]).abs().max().item() > 100 * 1e-5 * scale


def test_the_output_projection_is_found_again_after_a_module_is_replaced(default_model):
    """BERT's output projection is its attention's sibling (found through the parents, kept a model):
    a module replaced since is looked up again, never answered from what was kept."""
    import copy

    model = copy.deepcopy(default_model.model)
    attention = model.encoder.layer[0].attention
    assert value_norms.output_layer(model, attention.self) is attention.output.dense
    attention.output.dense = torch.nn.Linear(384, 384)
    assert value_norms.output_layer(model, attention.self) is attention.output.dense
    replaced = copy.deepcopy(attention.self)
    attention.self = replaced
    assert value_norms.parent_of(model, replaced) is attention
    moved = model.encoder.layer[1].attention.self
    model.encoder.layer[1].attention.self = torch.nn.Identity()
    assert value_norms.parent_of(model, moved) is None
    with pytest.raises(LookupError):
        value_norms.output_layer(model, moved)
