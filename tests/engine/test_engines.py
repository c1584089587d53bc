"""The model a call names (engine/engines.py): a name the user loaded is run as loaded, not
loaded again (a newcomer's generate(model="smollm2") after attnscope.load("smollm2") waited 10 s
for a second copy)."""

from __future__ import annotations

import gc

import pytest
import torch
import transformers

import attnscope
from attnscope.engine import attention_model, engines
from attnscope.engine.engines import resolve_engine


@pytest.fixture
def hub(bert_tokenizer, monkeypatch):
    """load_model as if each name were on the hub: a small random BERT a load; the loads made."""
    real = attention_model.load_model
    loads = []

    def load_model(model, tokenizer, device):
        if not isinstance(model, str):
            return real(model, tokenizer, device)
        loads.append((model, device))
        torch.manual_seed(len(loads))
        config = transformers.BertConfig(vocab_size=bert_tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=20)
        return real(transformers.BertModel(config).eval(), bert_tokenizer, device)

    monkeypatch.setattr(attention_model, "load_model", load_model)
    engines._named_engine.cache_clear()
    yield loads
    engines._named_engine.cache_clear()


def test_a_name_the_user_loaded_is_run_as_loaded_not_loaded_again(hub):
    mine = attnscope.load("some-org/some-model")
    assert resolve_engine("some-org/some-model") is mine
    assert resolve_engine("some-org/some-model", device="cpu") is mine  # the device it is on, named
    assert hub == [("some-org/some-model", None)]
    other = resolve_engine("some-org/other-model")  # a name nobody loaded: loaded, once
    assert resolve_engine("some-org/other-model") is other and other is not mine
    assert hub == [("some-org/some-model", None), ("some-org/other-model", None)]


def test_a_model_the_user_let_go_is_not_kept_and_a_name_loaded_again_is_loaded(hub):
    attnscope.load("some-org/some-model")  # not held
    gc.collect()
    engines._named_engine.cache_clear()
    resolve_engine("some-org/some-model")
    assert len(hub) == 2
    # attnscope.load itself always loads: the user asked for a model of their own.
    assert attnscope.load("some-org/some-model") is not attnscope.load("some-org/some-model")


def test_a_wrong_device_is_still_refused_by_the_load_naming_it(hub):
    with pytest.raises(attnscope.InputError, match="not a device"):
        resolve_engine("some-org/some-model", device="nowhere")
