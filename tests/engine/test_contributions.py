"""Contributions through whole layers (issue 47 item 3, ALTI: Ferrando et al. 2022): the identities
that define the decomposition, on the embedded MiniLM (post-LN) and a small Llama (pre-norm,
grouped-query); rows that are shares; streaming that changes nothing; and a float64 reference
written here straight from the paper's formula, without the engine's streaming or scaling."""

from __future__ import annotations

import copy
import dataclasses
import re

import pytest
import torch
import traitlets
import transformers
from small_models import FAMILIES, SMALL, VOCAB, sharpened

import attnscope
from attnscope.engine import contributions as alti
from attnscope.engine import formulas

TEXT = "The keeper fed the lion before the storm, and it slept."


def _engine(family: str, default_model, bert_tokenizer):
    if FAMILIES[family] is None:
        return default_model
    torch.manual_seed(0)
    return attnscope.load(sharpened(FAMILIES[family]()), bert_tokenizer, device="cpu")


def _block_outputs(engine) -> tuple[dict, list]:
    """Hooks that record each block's real output: post-LN, the LayerNorm's input z and output y;
    pre-norm, the residual sum y (what the second norm reads)."""
    outputs, handles, model = {"z": [], "y": []}, [], engine.model

    def layer_norm(_module, args, out):  # returns None: the output stays the model's
        outputs["z"].append(args[0][0].detach())
        outputs["y"].append(out[0].detach())

    def residual_sum(_module, args):
        outputs["y"].append(args[0][0].detach())

    for module in engine.attention_modules:
        if alti.family(engine) == "post":
            norm = alti._parent(model, alti.value_norms.output_layer(model, module)).LayerNorm
            handles.append(norm.register_forward_hook(layer_norm))
        else:
            handles.append(alti._parent(model, module).post_attention_layernorm.register_forward_pre_hook(residual_sum))
    return outputs, handles


@pytest.mark.parametrize("family", ["bert (the embedded MiniLM)", "llama (grouped-query)"])
def test_the_terms_sum_to_the_blocks_own_output(family, default_model, bert_tokenizer):
    """Σ_j T_i(x_j) + b_O is the block's sum before the LayerNorm; after its linear part,
    Σ_j L_i(T_i(x_j)) + L_i(b_O) is the LayerNorm's output less β: to 1e-5 of the model's own
    float32 numbers, and to 1e-12 in float64 against the LayerNorm's formula."""
    engine = _engine(family, default_model, bert_tokenizer)
    outputs, handles = _block_outputs(engine)
    try:
        with alti.capturing_blocks(engine) as capture:
            result = engine.run(TEXT)
    finally:
        for handle in handles:
            handle.remove()
    for layer in range(result.n_layers):
        parts = alti.block_parts(engine, capture, layer)
        attention = result.attention[layer]
        bias = parts.output_bias if parts.output_bias is not None else torch.zeros_like(parts.summed[0])
        raw = alti.normalised_terms(dataclasses.replace(parts, norm=None), attention, 0)  # T × T × W: T_i(x_j)
        summed = outputs["z" if parts.norm is not None else "y"][layer]
        scale = max(1.0, summed.abs().max().item())
        torch.testing.assert_close(raw.sum(1) + bias, summed, rtol=0, atol=1e-5 * scale, msg=f"{family} {layer}")
        if parts.norm is None:
            continue
        sigma = parts.norm.sigma(parts.summed)
        terms = alti.normalised_terms(parts, attention, 0)  # L_i(T_i(x_j))
        expected = outputs["y"][layer] - parts.norm.bias
        torch.testing.assert_close(terms.sum(1) + parts.norm.centred(bias) / sigma, expected, rtol=0,
                                   atol=1e-5 * max(1.0, expected.abs().max().item()))
        exact = parts.to(torch.float64)  # z from its own terms: the float64 identity is the algebra's, not float32's
        exact.summed = alti.normalised_terms(dataclasses.replace(exact, norm=None), attention.double(), 0).sum(1) + exact.output_bias
        terms64 = alti.normalised_terms(exact, attention.double(), 0)
        rebuilt = terms64.sum(1) + exact.norm.centred(exact.output_bias) / exact.norm.sigma(exact.summed) + exact.norm.bias
        layer_norm = torch.nn.functional.layer_norm(exact.summed, exact.summed.shape[-1:], exact.norm.weight,
                                                    exact.norm.bias, exact.norm.eps)
        torch.testing.assert_close(rebuilt, layer_norm, rtol=0, atol=1e-12)
        torch.testing.assert_close(exact.output(), layer_norm, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["alti", "norm"])
@pytest.mark.parametrize("family", ["bert (the embedded MiniLM)", "llama (grouped-query)", "qwen2 (value biases, grouped-query)"])
def test_each_row_is_a_share_of_the_output(family, method, default_model, bert_tokenizer):
    engine = _engine(family, default_model, bert_tokenizer)
    found = attnscope.contributions(engine, TEXT, method=method)
    for matrices in (found.layers, found.rolled):
        assert (matrices >= 0).all()
        torch.testing.assert_close(matrices.sum(-1), torch.ones(matrices.shape[:-1]), rtol=0, atol=1e-5)
    if engine.causal:  # a decoder's output i takes nothing from a later token
        later = torch.triu(torch.ones(len(found.tokens), len(found.tokens), dtype=torch.bool), 1)
        assert (found.layers[:, later] == 0).all()


def test_blocks_of_rows_give_the_whole_computation(default_model):
    """One row a block, odd blocks cut from the run's, and the whole map at once: the same C."""
    with alti.capturing_blocks(default_model) as capture:
        result = default_model.run(TEXT)
    n = len(result.tokens)
    for layer in (0, 5):
        parts = alti.block_parts(default_model, capture, layer)
        attention = result.attention[layer]
        whole = alti.layer_contributions(parts, [(0, n, attention)], budget=2**40)
        one_row = alti.layer_contributions(parts, [(0, n, attention)], budget=1)
        uneven = [(0, 5, attention[:, :5]), (5, 6, attention[:, 5:6]), (6, n, attention[:, 6:])]
        torch.testing.assert_close(one_row, whole, rtol=0, atol=1e-6)
        torch.testing.assert_close(alti.layer_contributions(parts, uneven, budget=4 * n * 64 * 3), whole, rtol=0, atol=1e-6)
        norms = alti.norm_layer_contributions(parts, [(0, n, attention)])
        torch.testing.assert_close(alti.norm_layer_contributions(parts, uneven), norms, rtol=0, atol=1e-6)
        # The factored form is the terms' own L2 norms, made shares.
        lengths = alti.normalised_terms(parts, attention, 0).double().norm(dim=-1)
        torch.testing.assert_close(norms.double(), lengths / lengths.sum(-1, keepdim=True), rtol=0, atol=1e-6)


def test_a_long_run_streams_its_rows_to_the_same_contributions(bert_tokenizer):
    """On demand (q, k and log-sum-exps; rows made a block at a time) as with the full attention."""
    torch.manual_seed(0)
    engine = attnscope.load(sharpened(FAMILIES["llama (grouped-query)"]()), bert_tokenizer, device="cpu")
    for method in ("alti", "norm"):
        full = attnscope.contributions(engine, TEXT, attention="full", method=method)
        long = attnscope.contributions(engine, TEXT, attention="on_demand", method=method)
        torch.testing.assert_close(long.layers, full.layers, rtol=0, atol=1e-5)
        torch.testing.assert_close(long.rolled, full.rolled, rtol=0, atol=1e-5)


def test_the_rollout_of_identity_layers_is_identity_and_of_others_their_product():
    eye = torch.eye(7).expand(4, 7, 7)
    assert torch.equal(formulas.rolled_out(eye), eye)
    torch.manual_seed(0)
    mixing = torch.rand(3, 5, 5)
    rolled = formulas.rolled_out(mixing)
    torch.testing.assert_close(rolled[2], mixing[2] @ mixing[1] @ mixing[0])


def _hooks(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_the_model_leaves_as_it_came_even_when_the_run_fails(bert_tokenizer):
    torch.manual_seed(0)
    hf = sharpened(FAMILIES["llama (grouped-query)"]())
    hf.layers[0].train()  # a user's own mix of modes
    modes = [m.training for m in hf.modules()]
    config = copy.deepcopy(hf.config.to_dict())
    engine = attnscope.load(hf, bert_tokenizer, device="cpu")
    engine.run(TEXT)  # transformers installs its own output-collecting hooks at the first forward, and keeps them
    hooks = _hooks(hf)
    assert [m.training for m in hf.modules()] == modes
    attnscope.contributions(engine, TEXT)
    with pytest.raises(attnscope.InputError):
        alti.run_contributions(engine, "   ")  # the run refuses it inside the capture
    assert _hooks(hf) == hooks and [m.training for m in hf.modules()] == modes and hf.config.to_dict() == config


def test_a_family_without_a_known_layout_is_refused_by_name(bert_tokenizer):
    engine = attnscope.load(FAMILIES["gpt2 (fused q|k|v, Conv1D)"]().eval(), bert_tokenizer, device="cpu")
    with pytest.raises(attnscope.InputError, match=r"GPT2Model.*\(gpt2\) is not one of them.*bert.*llama"):
        attnscope.contributions(engine, TEXT)


# ---- a reference straight from the paper, float64, no streaming ------------------------------


def _reference(hf, input_ids, method: str = "alti") -> torch.Tensor:
    """ALTI of a BertModel or LlamaModel from its weights, in float64: T_i(x_j) whole (T × T × W),
    the LayerNorm's linear part applied to each, c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁) over the
    sum (method "norm": c_ij = ‖T_i(x_j)‖₂, Kobayashi et al. 2021), rolled out by products."""
    hf = copy.deepcopy(hf).double().eval()
    hf.set_attn_implementation("eager")
    with torch.no_grad():
        out = hf(input_ids=input_ids, output_attentions=True, output_hidden_states=True)
    bert = hf.config.model_type == "bert"
    layers = hf.encoder.layer if bert else hf.layers
    n_heads, rolled = hf.config.num_attention_heads, None
    for index, layer in enumerate(layers):
        x = out.hidden_states[index][0]  # T × W: the layer's input
        alpha = out.attentions[index][0]  # H × T × T
        if bert:
            attention, w_o, b_o = layer.attention.self, layer.attention.output.dense.weight, layer.attention.output.dense.bias
            v = attention.value(x)
        else:
            norm = layer.input_layernorm
            x_hat = norm.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
            v, w_o, b_o = layer.self_attn.v_proj(x_hat), layer.self_attn.o_proj.weight, layer.self_attn.o_proj.bias
        d = w_o.shape[1] // n_heads
        v = v.view(len(x), -1, d)  # T × key heads × d
        v = v.repeat_interleave(n_heads // v.shape[1], dim=1)
        f = torch.stack([v[:, h] @ w_o[:, h * d:(h + 1) * d].T for h in range(n_heads)])  # H × T × W
        terms = torch.einsum("hij,hjw->ijw", alpha, f) + torch.diag_embed(x.T).permute(1, 2, 0)  # T_i(x_j) + δ_ij x_i
        z = terms.sum(1) + (0 if b_o is None else b_o)
        if bert:
            ln = layer.attention.output.LayerNorm
            sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + ln.eps)
            terms = ln.weight * (terms - terms.mean(-1, keepdim=True)) / sigma[:, None]
            y = torch.nn.functional.layer_norm(z, z.shape[-1:], ln.weight, ln.bias, ln.eps)
        else:
            y = z
        if method == "alti":
            c = (y.abs().sum(-1)[:, None] - (y[:, None] - terms).abs().sum(-1)).clamp_min(0)
        else:
            c = terms.norm(dim=-1)
        c = c / c.sum(-1, keepdim=True)
        rolled = c if rolled is None else c @ rolled
    return rolled


@pytest.mark.parametrize("method", ["alti", "norm"])
@pytest.mark.parametrize("family", ["bert", "llama"])
def test_the_engine_matches_the_papers_formula_in_float64(family, method, bert_tokenizer):
    torch.manual_seed(0)
    hf = sharpened(transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL)) if family == "bert"
                   else FAMILIES["llama (grouped-query)"]())
    engine = attnscope.load(hf, bert_tokenizer, device="cpu")
    found = attnscope.contributions(engine, TEXT, method=method)
    input_ids = bert_tokenizer(TEXT, return_tensors="pt")["input_ids"]
    expected = _reference(hf, input_ids, method)
    assert found.rolled.shape[-1] == input_ids.shape[1]
    torch.testing.assert_close(found.rolled[-1].double(), expected, rtol=0, atol=2e-5)


def test_the_method_is_named_in_the_frame_and_a_wrong_one_is_refused_saying_the_two(default_model):
    alti_found = attnscope.contributions(default_model, TEXT)
    norm_found = attnscope.contributions(default_model, TEXT, method="norm")
    assert alti_found.frame.attrs["method"].startswith("ALTI") and alti_found.method == alti_found.frame.attrs["method"]
    assert "Kobayashi et al. 2021" in norm_found.method
    # Printed, it says what measured it and what it holds, not every matrix.
    assert repr(norm_found).startswith("Contributions(norms of attention, residual and LayerNorm (Kobayashi et al. 2021)")
    assert f"6 layers × {len(norm_found.tokens)} tokens" in repr(norm_found) and len(repr(norm_found)) < 400
    assert (alti_found.layers - norm_found.layers).abs().max() > 0.05  # two measures, not one named twice
    for wrong in ("ALTI", "globenc", None, ["norm"]):
        with pytest.raises(attnscope.InputError, match=r"method is 'alti' .* or 'norm' .*, not"):
            attnscope.contributions(default_model, TEXT, method=wrong)


def test_the_frame_is_tidy_and_reads_the_matrices(default_model):
    found = attnscope.contributions(default_model, TEXT)
    frame, n = found.frame, len(found.tokens)
    assert list(frame.columns) == ["layer", "position", "token", "measure", "value"]
    assert len(frame) == 3 * default_model.n_layers * n and frame.attrs["attnscope"] == "contributions"
    sep = frame[(frame.measure == "rolled") & (frame.layer == 5) & (frame.position == n - 1)].value.item()
    assert sep == pytest.approx(found.rolled[5, :, n - 1].double().mean().item(), abs=1e-9)
    own = frame[(frame.measure == "self") & (frame.layer == 2)].value.to_numpy()
    assert own == pytest.approx(torch.diagonal(found.layers[2]).numpy(), abs=1e-9)


# ---- the Rollout tab's mode: ALTI contributions in the widget -------------------------------


def _rolled(widget) -> torch.Tensor:
    from attnscope.serialize import decode

    return decode(widget.rollout)


def test_the_widget_in_contributions_mode_carries_the_rolled_matrix_and_switches_back(default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, view="rollout")
    rollout = _rolled(widget)
    assert widget.rollout["mode"] == "rollout"
    widget.rollout_mode = "contributions"
    found = attnscope.contributions(default_model, TEXT)
    assert widget.rollout["mode"] == "contributions" and widget.rollout["n_tokens"] == len(found.tokens)
    step = widget.rollout["scale"]
    assert (_rolled(widget) - found.rolled).abs().max() <= step / 2 + 1e-6  # within the uint8 quantisation
    assert (rollout - found.rolled).abs().max() > 10 * step  # the two differ: the test could tell them apart
    widget.rollout_mode = "rollout"
    assert widget.rollout["mode"] == "rollout" and torch.equal(_rolled(widget), rollout)


def test_the_norm_contributions_mode_carries_the_norms_rolled_and_says_its_name_in_errors(default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, view="rollout", rollout_mode="norm_contributions")
    found = attnscope.contributions(default_model, TEXT, method="norm")
    assert widget.rollout["mode"] == "norm_contributions"
    assert repr(widget).endswith("tokens, rollout view (Norm contributions))")  # the text that stands in for it
    assert (_rolled(widget) - found.rolled).abs().max() <= widget.rollout["scale"] / 2 + 1e-6
    widget.rollout_mode = "contributions"  # ALTI's, a different matrix under its own mode
    alti_rolled = attnscope.contributions(default_model, TEXT).rolled
    assert widget.rollout["mode"] == "contributions" and (_rolled(widget) - alti_rolled).abs().max() <= widget.rollout["scale"] / 2 + 1e-6
    masked = attnscope.AttentionWidget(TEXT, model=default_model, masked_heads=[[0, 1]], view="rollout",
                                       rollout_mode="norm_contributions")
    assert masked.rollout["error"].startswith("Norm contributions follow the whole model")


def test_contributions_mode_merges_words_before_the_rollout(default_model):
    text = "Tokenization is unbelievable."
    widget = attnscope.AttentionWidget(text, model=default_model, view="rollout", rollout_mode="contributions",
                                       word_level=True)
    found = attnscope.contributions(default_model, text)
    merged = formulas.rolled_out(formulas.merge_words(found.layers[:, None], widget.token_result.word_groups)[:, 0])
    assert len(widget.tokens) < len(found.tokens) and _rolled(widget).shape == merged.shape
    assert (_rolled(widget) - merged).abs().max() <= widget.rollout["scale"] / 2 + 1e-6
    assert torch.allclose(merged.sum(-1), torch.ones(merged.shape[:-1]), atol=1e-5)  # rows still shares


def test_contributions_mode_of_an_unsupported_family_shows_why_in_the_tab(bert_tokenizer):
    engine = attnscope.load(FAMILIES["gpt2 (fused q|k|v, Conv1D)"]().eval(), bert_tokenizer, device="cpu")
    widget = attnscope.AttentionWidget(TEXT, model=engine, view="rollout")
    widget.rollout_mode = "contributions"  # no traceback: the tab's payload says why
    assert re.search(r"GPT2Model.*\(gpt2\) is not one of them", widget.rollout["error"])
    assert widget.rollout_mode == "contributions" and widget.error == ""
    widget.rollout_mode = "rollout"
    assert "error" not in widget.rollout and widget.rollout["mode"] == "rollout"


def test_contributions_mode_without_a_model_or_with_masks_says_why(default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, masked_heads=[[0, 1]], view="rollout",
                                       rollout_mode="contributions")
    assert "unmask the heads" in widget.rollout["error"]
    precomputed = attnscope.AttentionWidget(result=widget.token_result.unmasked, view="rollout", rollout_mode="contributions")
    assert "needs a model" in precomputed.rollout["error"]
    with pytest.raises(traitlets.TraitError, match="rollout_mode"):
        precomputed.rollout_mode = "alti"


def test_a_saved_page_holds_the_contributions_mode_it_was_saved_in(default_model):
    from attnscope.widget.export import page_state

    widget = attnscope.AttentionWidget(TEXT, model=default_model, view="head", rollout_mode="contributions")
    assert widget.rollout == {}  # made only while the tab is open ...
    page = page_state(widget)
    state = page["state"]  # ... and for the page, in the mode it shows
    assert state["rollout_mode"] == "contributions" and state["rollout"]["mode"] == "contributions"
    assert page["traits"]["rollout_mode"]["page"] == "fixed"


def test_the_pages_write_of_the_contributions_mode_is_taken_and_a_bad_one_refused(default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, view="rollout")
    widget.set_state({"rollout_mode": "contributions"})  # the select in the tab, as ipywidgets passes it on
    assert widget.rollout_mode == "contributions" and widget.rollout["mode"] == "contributions" and widget.error == ""
    widget.set_state({"rollout_mode": "<b>alti</b>"})
    assert widget.rollout_mode == "contributions" and widget.rollout["mode"] == "contributions"
    assert "rollout_mode" in widget.error
