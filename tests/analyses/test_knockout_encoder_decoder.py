"""Knockout of an encoder-decoder's output token (issue 48 / 47): refused, the error naming what is
not supported (the decoder's output token reads the source through cross-attention, and blocking
decoder → source edges is not implemented), before anything runs, the model left as it came."""

from __future__ import annotations

import pytest
from small_models import model_state, tiny_bart, tiny_t5

import attnscope
from attnscope.errors import InputError

TEXT = "The Eiffel Tower is in the city of"
REFUSAL = (r"is an encoder-decoder model: knockout reads a causal LM's next token or an encoder's masked token, not "
           r"yet a decoder's output token, which also reads the source through cross-attention \(blocking decoder → "
           r"source edges is not supported yet\)")


@pytest.mark.parametrize("make", [tiny_bart, tiny_t5], ids=["bart", "t5"])
def test_an_encoder_decoders_output_token_is_refused_naming_cross_attention(make, bert_tokenizer):
    engine = attnscope.load(make(vocab_size=len(bert_tokenizer), lm_head=True), bert_tokenizer, device="cpu")
    before = model_state(engine.model)
    calls = []
    hook = engine.model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(InputError, match=REFUSAL):
            attnscope.knockout(engine, TEXT, edges=[(1, None, -1, [1, 2])])
        with pytest.raises(InputError, match=REFUSAL):
            attnscope.knockout_sweep(engine, TEXT, keys=[1, 2], window=1, progress=False)
        with pytest.raises(InputError, match=REFUSAL):
            attnscope.knockout_heads(engine, TEXT, progress=False)
    finally:
        hook.remove()
    assert calls == [] and model_state(engine.model) == before
