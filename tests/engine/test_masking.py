"""Head masking (Michel et al.'s ξ_h via the value projections) and word groups, for every family."""

import pytest
import torch
from test_engine import small_models

import attnscope
from attnscope import InputError
from attnscope.engine.texts import groups_from_tokens

TEXT = "The quick brown fox jumps over the lazy dog."


def sharpened(model):
    """Random small models attend almost uniformly; larger weights make a head's removal visible."""
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(8)
    return model


@pytest.mark.parametrize("family", list(small_models()))
def test_masking_a_head_changes_only_later_layers(family, bert_tokenizer):
    torch.manual_seed(0)
    engine = attnscope.load(sharpened(small_models()[family]()), bert_tokenizer, device="cpu")
    plain = engine.run(TEXT)
    masked = engine.run(TEXT, masked_heads=[(1, 2)])
    assert masked.masked_heads == [(1, 2)]
    # Layers 0 and 1 compute their attention before head 1-2's output is used.
    assert torch.equal(masked.attention[:2], plain.attention[:2])
    assert (masked.attention[2] - plain.attention[2]).abs().max() > 1e-3
    # A mask of ones is the identity.
    ones = torch.ones(engine.n_layers, engine.n_heads)
    with torch.inference_mode():
        again = engine.forward(engine.tokenizer(TEXT, return_tensors="pt"), head_mask=ones)
    assert torch.allclose(again.attentions[2][0], plain.attention[2], atol=1e-6)


def test_head_mask_gradient_matches_finite_differences(bert_tokenizer):
    """∂L/∂ξ_h through the hook equals (L(ξ + ε e_h) − L(ξ − ε e_h)) / 2ε."""
    torch.manual_seed(0)
    engine = attnscope.load(small_models()["bert"]().double(), bert_tokenizer, device="cpu")
    encoded = engine.tokenizer(TEXT, return_tensors="pt")

    direction = torch.randn(32, dtype=torch.float64)

    def loss(mask):
        return (engine.forward(encoded, head_mask=mask, track_grad=True).last_hidden_state @ direction).pow(2).mean()

    xi = torch.ones(3, 4, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(loss(xi), xi)
    eps = 1e-5
    bump = torch.zeros(3, 4, dtype=torch.float64)
    bump[0, 3] = eps
    with torch.no_grad():
        numeric = (loss(torch.ones(3, 4, dtype=torch.float64) + bump) - loss(torch.ones(3, 4, dtype=torch.float64) - bump)) / (2 * eps)
    assert grad[0, 3].item() == pytest.approx(numeric.item(), rel=1e-4)
    assert grad.abs().min() > 0


def test_masking_out_of_range_is_a_clear_error(default_model):
    with pytest.raises(InputError, match=r"layer in 0…5 and head in 0…11"):
        default_model.run("a b", masked_heads=[(6, 0)])


def test_word_groups_from_fast_tokenizer_and_fallback(default_model):
    result = default_model.run("Tokenization is unbelievable", "ok")
    words = [[result.tokens[p] for p in group] for group in result.word_groups]
    assert words[0] == ["[CLS]"] and words[-1] == ["[SEP]"]
    assert ["token", "##ization"] in words
    assert ["ok"] in words and words.count(["[SEP]"]) == 2
    assert groups_from_tokens(["[CLS]", "token", "##ization", "is", "[SEP]"], ["[CLS]", "[SEP]"]) == [[0], [1, 2], [3], [4]]
    assert groups_from_tokens(["Hello", "Ġwor", "ld", "Ġ!"]) == [[0], [1, 2], [3]]
