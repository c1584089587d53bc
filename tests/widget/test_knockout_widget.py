"""The head view's knockout control, the kernel's side (issue 47 item 4): what it offers for a
run, and its answer to a "knockout" request, which is attnscope.knockout's for the same edges."""

from __future__ import annotations

import pytest
import transformers
from test_knockout import MASKED, TEXT, _llama

import attnscope


@pytest.fixture(scope="module")
def decoder(bert_tokenizer):
    return attnscope.load(_llama(bert_tokenizer), bert_tokenizer, device="cpu")


def _ask(widget, monkeypatch, **params):
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append(content))
    widget._handle_custom_msg({"kind": "request", "type": "knockout", "id": 7, **params}, [])
    (content,) = sent
    assert (content["kind"], content["type"], content["id"]) == ("reply", "knockout", 7)
    return content


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
def test_a_request_is_answered_with_what_knockout_says_for_the_same_head_or_lines(decoder, monkeypatch):
    widget = attnscope.AttentionWidget(TEXT, model=decoder)
    last = len(widget.tokens) - 1
    assert widget.knockout_control == {"position": last, "output": "next token"}
    head = _ask(widget, monkeypatch, layer=1, head=2, key=-1, result_id=widget.result_id)
    expected = attnscope.knockout(decoder, TEXT, heads=[(1, 2)]).iloc[0]
    assert head["delta"] == expected.delta and head["target"] == expected.target and head["key"] == -1
    assert (head["layer"], head["head"], head["position"], head["masked"]) == (1, 2, last, False)
    lines = _ask(widget, monkeypatch, layer=2, head=0, key=3, result_id=widget.result_id)
    assert lines["delta"] == attnscope.knockout(decoder, TEXT, edges=[(2, 0, last, 3)]).delta.iloc[0] != 0
    refused = _ask(widget, monkeypatch, layer=2, head=9, key=3, result_id=widget.result_id)
    assert "head=9" in refused["error"]
    stale = _ask(widget, monkeypatch, layer=0, head=0, result_id=widget.result_id - 1)
    assert "earlier text" in stale["error"]
    first = _ask(widget, monkeypatch, layer=0, head=0, key=last, result_id=widget.result_id)
    assert "delta" in first  # the last token keeps the others
    widget.word_level = True
    assert "switch off Words" in widget.knockout_control["unavailable"]
    assert "switch off Words" in _ask(widget, monkeypatch, layer=0, head=0, result_id=widget.result_id)["error"]


def test_the_control_says_why_a_run_cannot_be_scored(default_model, bert_tokenizer, monkeypatch):
    widget = attnscope.AttentionWidget(TEXT, model=default_model)
    assert "no masked-LM head" in widget.knockout_control["unavailable"]
    assert "no masked-LM head" in _ask(widget, monkeypatch, layer=0, head=0, result_id=widget.result_id)["error"]
    pair = attnscope.AttentionWidget("A question?", "An answer.", model=default_model)
    assert "sentence B" in pair.knockout_control["unavailable"]
    precomputed = attnscope.AttentionWidget(result=widget.token_result)
    assert "precomputed attention" in precomputed.knockout_control["unavailable"]
    config = transformers.BertConfig(vocab_size=len(bert_tokenizer), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=48, max_position_embeddings=64)
    masked_lm = attnscope.load(transformers.BertForMaskedLM(config).eval(), bert_tokenizer, device="cpu")
    mlm = attnscope.AttentionWidget(MASKED, model=masked_lm)
    at = mlm.tokens.index("[MASK]")
    assert mlm.knockout_control == {"position": at, "output": "masked token"}
    answer = _ask(mlm, monkeypatch, layer=1, head=1, key=2, result_id=mlm.result_id)
    assert answer["delta"] == attnscope.knockout(masked_lm, MASKED, edges=[(1, 1, at, 2)]).delta.iloc[0]
    mlm.update("No mask here.")
    assert "0 mask tokens" in mlm.knockout_control["unavailable"]
