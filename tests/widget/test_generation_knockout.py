"""Knockout on a generation (issue 48 item 3, issue 47 item 4): with an output token selected, the
head view's control scores the token the model chose there, Δ log p with a head zeroed or its
lines blocked, on the exact ids the model read (the prompt through the chat template, the outputs
before it); exact against the independent eager forward test_knockout checks with; the control
says why not while the model writes and on a prompt token; an encoder-decoder's lines are scored by
the part they belong to."""

from __future__ import annotations

import copy

import pytest
import torch
from small_models import model_state, tiny_bart, tiny_t5
from test_knockout import _independent, _llama
from test_knockout_widget import _ask

import attnscope
from attnscope.analyses.knockout import blocked_edges

PROMPT = "The Eiffel Tower is in the city of"
CHAT = ("{% for m in messages %}[CLS] {{ m['role'] }} : {{ m['content'] }} [SEP]{% endfor %}"
        "{% if add_generation_prompt %} assistant :{% endif %}")


@pytest.fixture(scope="module")
def writer(bert_tokenizer):
    tokenizer = copy.deepcopy(bert_tokenizer)
    tokenizer.chat_template = CHAT
    model = _llama(tokenizer)
    model.generation_config.eos_token_id = []  # every run ends at max_new_tokens or a stop
    return attnscope.load(model, tokenizer, device="cpu")


def test_the_chosen_token_of_a_step_is_scored_on_the_ids_the_model_read_exactly(writer, monkeypatch):
    before = model_state(writer.model)
    widget = attnscope.generate(PROMPT, model=writer, max_new_tokens=6, do_sample=True, temperature=2.0, seed=5)
    try:
        run = widget.wait(timeout=120)
        assert run.settings.chat and widget.knockout_control == {"output": "chosen token"}
        first = widget.output_start
        assert first == len(run.prompt_ids) and run.prompt_ids[:3] == writer.tokenizer.convert_tokens_to_ids(
            ["[CLS]", "user", ":"])  # the chat template's ids, as generated
        # A sampled step whose chosen token is not the model's most likely: the target is the choice.
        plains = {t: _independent(writer.model, torch.tensor([run.ids[:t]]), {}, -1) for t in range(first, len(run.ids))}
        token = next(t for t, plain in plains.items() if int(plain.argmax()) != run.ids[t])
        ids, chosen, at = run.ids[:token], run.ids[token], token - 1
        # Re-tokenizing the text read would give other ids: the answer below tells the two apart.
        assert writer.tokenizer(writer.tokenizer.decode(ids))["input_ids"] != ids

        zeroed = _ask(widget, monkeypatch, layer=1, head=2, key=-1, token=token, result_id=widget.result_id)
        reference = _independent(writer.model, torch.tensor([ids]), {}, -1, zeroed={1: [2]})
        plain = plains[token]
        assert zeroed["target"] == widget.tokens[token]  # as the page shows it, not the tokenizer's own form
        assert (zeroed["token"], zeroed["step"], zeroed["position"]) == (token, token - first + 1, at)  # step 1: the first written
        assert abs(zeroed["log_p"] - float(plain[chosen])) <= 1e-5
        assert abs(zeroed["delta"] - float(reference[chosen] - plain[chosen])) <= 1e-5 and abs(zeroed["delta"]) > 1e-3

        key = 4
        lines = _ask(widget, monkeypatch, layer=2, head=0, key=key, token=token, result_id=widget.result_id)
        blocked = blocked_edges(writer, len(ids), [(2, 0, at, key)])
        reference = _independent(writer.model, torch.tensor([ids]), blocked, -1)
        assert abs(lines["delta"] - float(reference[chosen] - plain[chosen])) <= 1e-5 and abs(lines["delta"]) > 1e-3
        assert lines["delta"] == attnscope.knockout(writer, ids, edges=[(2, 0, at, key)], target=chosen).delta.iloc[0]
    finally:
        widget.close()
    assert model_state(writer.model) == before


def test_the_control_says_why_not_while_writing_on_a_prompt_token_and_for_an_earlier_step(writer, monkeypatch):
    widget = attnscope.generate(PROMPT, model=writer, max_new_tokens=50, chat=False)
    try:
        with widget._state_lock:  # the writing thread waits at its next step: it is still writing
            assert widget.generating
            assert "still writing: wait for the end, or Stop" in widget.knockout_control["unavailable"]
            asked = _ask(widget, monkeypatch, layer=0, head=0, token=len(widget.tokens) - 1, result_id=widget.result_id)
            assert "still writing" in asked["error"]
        run = widget.stop(timeout=60)
        assert widget.knockout_control == {"output": "chosen token"}
        first, last = widget.output_start, len(run.ids) - 1
        prompt = _ask(widget, monkeypatch, layer=0, head=0, token=first - 1, result_id=widget.result_id)
        assert f"Token {first - 1} is in the prompt: select an output token (from token {first} on)" in prompt["error"]
        stale = _ask(widget, monkeypatch, layer=0, head=0, token=last, result_id=widget.result_id - 1)
        assert "earlier step of the run" in stale["error"]
        past = _ask(widget, monkeypatch, layer=0, head=0, key=last, token=last, result_id=widget.result_id)
        assert f"key={last} is too large: it must be at most {last - 1}" in past["error"]  # keys before it only
        missing = _ask(widget, monkeypatch, layer=0, head=0, result_id=widget.result_id)
        assert "token must be a whole number, not None" in missing["error"]
        assert "delta" in _ask(widget, monkeypatch, layer=0, head=0, key=0, token=last, result_id=widget.result_id)
    finally:
        widget.close()


@pytest.mark.parametrize("make", [tiny_bart, tiny_t5], ids=["bart", "t5"])
def test_an_encoder_decoders_chosen_token_is_scored_by_part(make, bert_tokenizer, monkeypatch):
    """The page reads the source's tokens, then the decoder's: a selected output token's row is its
    cross-attention over the source, then its self-attention. A key in the source is a
    cross-attention line, a later one the decoder's; the whole head is that head in both. Each
    answer is attnscope.knockout's on the run's own ids (which test_knockout_encoder_decoder
    checks against an independent eager forward)."""
    engine = attnscope.load(make(vocab_size=len(bert_tokenizer), lm_head=True), bert_tokenizer, device="cpu")
    before = model_state(engine.model)
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=4, chat=False)
    try:
        run = widget.wait(timeout=120)
        assert widget.knockout_control == {"output": "chosen token"}
        n_source, token = len(run.prompt_ids), len(run.ids) - 1
        assert widget.output_start == n_source + len(run.start_ids) and len(widget.tokens) == len(run.ids)
        source, read, chosen, query = run.prompt_ids, run.ids[n_source:token], run.ids[token], token - 1 - n_source
        for key, edges, heads, part in [
            (2, [("cross", 1, 3, query, 2)], [], "cross-attention"),
            (n_source + 1, [("decoder", 1, 3, query, 1)], [], "self-attention"),
            (-1, [], [("cross", 1, 3), ("decoder", 1, 3)], "its cross- and self-attention"),
        ]:
            answer = _ask(widget, monkeypatch, layer=1, head=3, key=key, token=token, result_id=widget.result_id)
            expected = attnscope.knockout(engine, source, decoder=read, edges=edges, heads=heads, target=chosen).iloc[0]
            assert answer["part"] == part and answer["position"] == token - 1 and answer["key"] == key
            assert answer["target"] == widget.tokens[token]
            assert answer["delta"] == expected.delta and answer["log_p"] == expected.log_p, part
            assert answer["delta"] != 0, part
        prompt = _ask(widget, monkeypatch, layer=0, head=0, token=n_source, result_id=widget.result_id)
        assert "is in the prompt" in prompt["error"]  # the decoder's start token was not chosen by the model
    finally:
        widget.close()
    assert model_state(engine.model) == before
