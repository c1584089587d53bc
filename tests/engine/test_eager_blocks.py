"""Eager attention a few heads at a time (engine/eager_blocks.py): the model's own eager numbers,
for the families whose eager code it knows, and the model's own eager function for the rest."""

import pytest
import torch
import transformers
from test_engine import SMALL, VOCAB, small_models

import attnscope
from attnscope.engine import eager_blocks
from attnscope.engine.borrowing import borrowed

TEXTS = ["The quick brown fox jumps over the lazy dog.", "It was not amused, and said so at length to everyone."]


def own_eager_outputs(model, encoded):
    with torch.inference_mode(), borrowed(model, "eager"):
        return model(**encoded, output_attentions=True)


@pytest.fixture
def calls(monkeypatch):
    """How often each path ran: the blocks, or a module's own eager function."""
    counted = {"blocks": 0, "own": 0}
    own_eager = eager_blocks.own_eager

    def counting_own(module):
        function = own_eager(module)

        def own(*args, **kwargs):
            counted["own"] += 1
            return function(*args, **kwargs)

        return own

    real_softmax = torch.softmax

    def counting_softmax(*args, **kwargs):
        if "out" in kwargs:
            counted["blocks"] += 1
        return real_softmax(*args, **kwargs)

    monkeypatch.setattr(eager_blocks, "own_eager", counting_own)
    monkeypatch.setattr(eager_blocks.torch, "softmax", counting_softmax)
    return counted


@pytest.mark.parametrize("family", list(small_models()))
def test_a_padded_batch_gets_the_models_own_eager_numbers(family, bert_tokenizer, calls, monkeypatch):
    """Weights and outputs as the model's eager attention gives them, on a padded batch of two
    (the analyses' case) and with blocks of one head (so that blocks really split the heads)."""
    torch.manual_seed(0)
    model = small_models()[family]()
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    monkeypatch.setattr(eager_blocks, "BLOCK_BYTES", 1)
    encoded = bert_tokenizer(TEXTS, return_tensors="pt", padding=True)
    expected = own_eager_outputs(model, encoded)
    assert eager_blocks.serves(model) == (engine._weights_attention == eager_blocks.IMPLEMENTATION)
    if family in ("bert", "roberta", "electra", "llama-gqa", "qwen2-gqa"):
        assert eager_blocks.serves(model)
    if family.startswith("gpt2"):  # its eager function scales and masks in its own way
        assert not eager_blocks.serves(model)
    calls.update(blocks=0, own=0)
    got = engine.forward(encoded)
    if engine._weights_attention == eager_blocks.IMPLEMENTATION:
        assert calls["blocks"] == 3 * 4 and calls["own"] == 0  # 3 layers of 4 one-head blocks
    else:
        assert calls["blocks"] == 0
    for ours, theirs in zip(got.attentions, expected.attentions, strict=True):
        assert ours.shape == theirs.shape
        assert (ours - theirs).abs().max().item() <= 1e-6
    assert (got.last_hidden_state - expected.last_hidden_state).abs().max().item() <= 1e-5
    assert model.config._attn_implementation == "sdpa"  # the model's own setting, back


def test_what_the_blocks_do_not_reproduce_goes_to_the_modules_own_eager(bert_tokenizer, calls):
    """A backward pass (head importance), another dtype: the module's own eager function, with
    the same arguments."""
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL))
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    encoded = bert_tokenizer(TEXTS[:1], return_tensors="pt")
    mask = torch.ones(3, 4, requires_grad=True)
    outputs = engine.forward(encoded, head_mask=mask, track_grad=True)
    outputs.attentions[-1].sum().backward()
    assert calls == {"blocks": 0, "own": 3} and mask.grad is not None and mask.grad.abs().sum() > 0

    calls.update(blocks=0, own=0)
    model.double()
    try:
        expected = own_eager_outputs(model, encoded)
        got = engine.forward(encoded)
    finally:
        model.float()
    assert calls == {"blocks": 0, "own": 3}
    assert all(torch.equal(a, b) for a, b in zip(got.attentions, expected.attentions))


def test_a_model_with_its_own_eager_code_runs_eager_itself(bert_tokenizer):
    """Gemma 2 soft-caps its scores in its own eager function: not served, its numbers are eager's."""
    torch.manual_seed(0)
    config = transformers.Gemma2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, head_dim=8, intermediate_size=37,
                                       attn_logit_softcapping=5.0, max_position_embeddings=64)
    model = transformers.Gemma2Model(config)
    assert not eager_blocks.serves(model)
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    assert engine._weights_attention == "eager"
    encoded = bert_tokenizer(TEXTS[:1], return_tensors="pt")
    expected = own_eager_outputs(model, encoded)
    got = engine.forward(encoded)
    assert all(torch.equal(a, b) for a, b in zip(got.attentions, expected.attentions))


def test_a_run_on_the_blocks_reproduces_its_attention_from_q_and_k(default_model):
    """The embedded MiniLM runs on the blocks; its attention is still softmax(q·kᵀ·scale)."""
    assert default_model._weights_attention == eager_blocks.IMPLEMENTATION
    result = default_model.run(TEXTS[0], TEXTS[1])
    assert (result.attention_from_qk() - result.attention).abs().max().item() <= 1e-5


def test_finite_outputs_spare_the_scan_and_a_nan_head_is_still_found(bert_tokenizer, monkeypatch):
    """The maps are scanned for NaN only when an attention output's sum is not finite; a head
    made NaN is then named exactly as a scan of every map names it."""
    from attnscope.engine import attention_model, nonfinite

    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL))
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    scans = []
    real_scan = attention_model.nonfinite_heads
    monkeypatch.setattr(attention_model, "nonfinite_heads", lambda layers: scans.append(1) or real_scan(layers))
    result = engine.run(TEXTS[0])
    assert scans == [] and result.nonfinite_heads == []

    with torch.no_grad():
        model.encoder.layer[1].attention.self.query.weight[8:16] = float("nan")  # head 1 of layer 1
    with pytest.warns(nonfinite.NonFiniteAttentionWarning):
        result = engine.run(TEXTS[0])
    assert scans == [1]
    assert result.nonfinite_heads == nonfinite.nonfinite_heads(result.attention)
    assert (1, 1) in result.nonfinite_heads and (1, 0) not in result.nonfinite_heads


def test_a_model_that_refuses_the_blocks_runs_eager_and_keeps_its_setting(bert_tokenizer, monkeypatch):
    """transformers may refuse a registered attention for a model (older code, a remote model's
    own checks): the run falls back to eager, and the model keeps its own setting after."""
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL))
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    own_setter = model.set_attn_implementation
    asked = []

    def refusing(implementation):
        asked.append(implementation)
        if implementation == eager_blocks.IMPLEMENTATION:
            raise ValueError("not for this model")
        return own_setter(implementation)

    monkeypatch.setattr(model, "set_attn_implementation", refusing)
    encoded = bert_tokenizer(TEXTS[:1], return_tensors="pt")
    got = engine.forward(encoded)
    assert asked == [eager_blocks.IMPLEMENTATION, "eager"]
    monkeypatch.undo()
    expected = own_eager_outputs(model, encoded)
    assert all(torch.equal(a, b) for a, b in zip(got.attentions, expected.attentions))
    assert model.config._attn_implementation == "sdpa"


def test_a_mask_per_head_is_cut_as_the_heads_are(bert_tokenizer, monkeypatch):
    """A 4-D mask with one map per head (a caller's own) is added to each head's block, as eager adds it."""
    from transformers.models.bert import modeling_bert

    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL))
    module = model.encoder.layer[0].attention.self
    query, key, value = (torch.randn(2, 4, 6, 8) for _ in range(3))
    mask = torch.zeros(2, 4, 6, 6)
    mask[0, 1, :, 3:] = torch.finfo(torch.float32).min  # head 1 of the first text sees only its first 3 keys
    mask[1, 3, 2:, :2] = torch.finfo(torch.float32).min
    monkeypatch.setattr(eager_blocks, "BLOCK_BYTES", 1)  # one head a block
    with torch.inference_mode():
        ours_output, ours = eager_blocks.attention_function(module, query, key, value, mask, scaling=0.3)
        their_output, theirs = modeling_bert.eager_attention_forward(module, query, key, value, mask, scaling=0.3)
        shared_output, shared = eager_blocks.attention_function(module, query, key, value, mask[:, :1], scaling=0.3)
        their_shared_output, their_shared = modeling_bert.eager_attention_forward(module, query, key, value, mask[:, :1], scaling=0.3)
    assert torch.allclose(ours, theirs, atol=1e-7) and torch.allclose(ours_output, their_output, atol=1e-6)
    assert ours[0, 1, :, 3:].abs().max() == 0 and ours[0, 0, :, 3:].abs().max() > 0
    assert torch.allclose(shared, their_shared, atol=1e-7) and torch.allclose(shared_output, their_shared_output, atol=1e-6)


class NotebookSelfAttention(transformers.models.bert.modeling_bert.BertSelfAttention):
    """A user's subclass, defined outside transformers (as in a notebook): it runs its base's eager code."""


def test_a_users_subclass_runs_its_base_files_eager_numbers(bert_tokenizer):
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL))
    for layer in model.encoder.layer:
        layer.attention.self.__class__ = NotebookSelfAttention
    assert eager_blocks.serves(model)
    assert eager_blocks.own_eager(model.encoder.layer[0].attention.self) is transformers.models.bert.modeling_bert.eager_attention_forward
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    encoded = bert_tokenizer(TEXTS[:1], return_tensors="pt")
    expected = own_eager_outputs(model, encoded)
    got = engine.forward(encoded)
    assert all((a - b).abs().max() <= 1e-6 for a, b in zip(got.attentions, expected.attentions))


def test_attention_outputs_not_seen_for_every_layer_mean_a_scan():
    """Without a finite sum for each layer (a module whose output is no tensor, a layer missed),
    the maps are scanned, never taken as finite."""
    from attnscope.engine.hooks import Capture

    capture = Capture()
    assert not capture.attention_finite(3)
    capture.output_sums += [torch.tensor(1.0), torch.tensor(2.0)]
    assert not capture.attention_finite(3)
    capture.output_sums.append(torch.tensor(3.0))
    assert capture.attention_finite(3)
    capture.output_sums[1] = torch.tensor(float("nan"))
    assert not capture.attention_finite(3)
