"""The neuron view's per-query computation agrees with the model's own attention."""

import float_bounds
import pytest
import torch
import transformers

import attnscope
from attnscope.widget.neuron_numbers import neuron_slice


def test_slice_reproduces_attention_row(default_model):
    result = default_model.run("The cat sat on the mat.")
    for layer, head, i in [(0, 0, 0), (3, 7, 4), (5, 11, len(result.tokens) - 1)]:
        s = neuron_slice(result, layer, head, i)
        d = result.queries.shape[-1]
        assert s.query.shape == (d,) and s.keys.shape == s.products.shape == (len(result.tokens), d)
        keys, query = result.keys[layer, head], result.queries[layer, head, i]
        # Two float32 sums of d products in other orders: each within d·u·Σ|q_m k_m| of the exact one.
        bound = 2 * d * float_bounds.U32 * (keys.abs() @ query.abs())
        assert ((s.products.sum(-1) - keys @ query).abs() <= bound).all()
        largest = float(s.scores[torch.isfinite(s.scores)].abs().max())
        relative = float_bounds.weight_error(largest, d, len(result.tokens))
        assert ((s.softmax - result.attention[layer, head, i]).abs() <= relative * result.attention[layer, head, i] + 1e-12).all()


def test_causal_slice_masks_future_keys(bert_tokenizer):
    config = transformers.GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    result = attnscope.load(transformers.GPT2Model(config), bert_tokenizer, device="cpu").run("one two three four")
    s = neuron_slice(result, 1, 2, 2)
    assert torch.isinf(s.scores[3:]).all() and (s.softmax[3:] == 0).all()
    assert torch.allclose(s.softmax, result.attention[1, 2, 2], atol=1e-5)


def test_out_of_range_is_refused(default_model):
    result = default_model.run("short")
    with pytest.raises(ValueError, match="query_index=9"):
        neuron_slice(result, 0, 0, 9)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "albert", "distilbert", "gpt2"])
def test_neuron_view_works_for_every_family(family, bert_tokenizer):
    from test_engine import small_models

    torch.manual_seed(0)
    result = attnscope.load(small_models()[family](), bert_tokenizer, device="cpu").run("Every family works.", "Yes.")
    last = len(result.tokens) - 1
    s = neuron_slice(result, 2, 3, last)
    assert torch.allclose(s.softmax, result.attention[2, 3, last], atol=1e-5)
