"""Attention knockout measured on the output (issue 47 item 4): blocked edges are the scores set to
−inf before the softmax, checked against an independent eager implementation; nothing blocked is
the plain forward; disabled heads, the window sweep, and what is refused."""

from __future__ import annotations

import math

import pytest
import torch
import transformers
from transformers.models.bert import modeling_bert
from transformers.models.llama import modeling_llama

import attnscope
from attnscope.analyses.knockout import blocked_edges, knockout_heads_view, knockout_sweep_view
from attnscope.errors import InputError

TEXT = "The Eiffel Tower is in the city of"
SHAPE = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
             max_position_embeddings=64)


def _llama(tokenizer, implementation="sdpa", **shape):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), attn_implementation=implementation, **{**SHAPE, **shape})
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 2 and "embed" not in name:
                parameter.normal_(0, 0.2)  # sharp attention: a wrong edge shows
    return model


@pytest.fixture(scope="module")
def decoder(bert_tokenizer):
    return attnscope.load(_llama(bert_tokenizer), bert_tokenizer, device="cpu")


def _independent(model, ids, blocked, position, zeroed=None):
    """log p after `position`, from a forward whose eager attention is written here: the scores of
    blocked (layer → heads × T × T) edges set to −inf before the softmax; zeroed (layer → heads):
    those heads' outputs zeroed."""
    calls = iter(range(model.config.num_hidden_layers))

    def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        layer = next(calls)
        group = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(group, 1), value.repeat_interleave(group, 1)
        scores = (query.double() @ key.double().transpose(2, 3)) * scaling
        n = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
        if layer in blocked:
            scores = scores.masked_fill(blocked[layer][None], -math.inf)
        weights = torch.softmax(scores, -1)
        for head in (zeroed or {}).get(layer, ()):
            weights[:, head] = 0
        return (weights @ value.double()).to(query.dtype).transpose(1, 2).contiguous(), weights

    original = modeling_llama.eager_attention_forward
    modeling_llama.eager_attention_forward = attention
    try:
        model.config._attn_implementation = "eager"
        with torch.inference_mode():
            logits = model(input_ids=ids).logits
    finally:
        modeling_llama.eager_attention_forward = original
        model.config._attn_implementation = "sdpa"
    return torch.log_softmax(logits[0, position].double(), -1)


def test_nothing_blocked_is_the_plain_forward(decoder):
    ids = decoder.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        plain = torch.log_softmax(decoder.model(input_ids=ids).logits[0, -1].double(), -1)
    frame = attnscope.knockout(decoder, TEXT)
    row = frame.iloc[0]
    assert row.target == decoder.tokenizer.convert_ids_to_tokens(int(plain.argmax()))
    assert abs(row.log_p - float(plain.max())) <= 1e-6 and abs(row.log_p_knocked - row.log_p) <= 1e-6 and row.delta == 0


def test_blocked_edges_are_scores_at_minus_infinity_before_the_softmax(decoder):
    ids = decoder.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    n = ids.shape[1]
    last = n - 1
    edges = [(1, None, last, [2, 3]), (2, 0, [last - 1, last], 1), (3, 3, last, range(1, 5))]
    blocked = blocked_edges(decoder, n, edges)
    assert sorted(blocked) == [1, 2, 3] and int(blocked[1].sum()) == 4 * 2 and int(blocked[2].sum()) == 2
    frame = attnscope.knockout(decoder, TEXT, edges=edges)
    reference = _independent(decoder.model, ids, blocked, last)
    plain = _independent(decoder.model, ids, {}, last)
    target = int(plain.argmax())
    assert abs(frame.log_p_knocked.iloc[0] - float(reference[target])) <= 1e-5
    assert abs(frame.delta.iloc[0] - float(reference[target] - plain[target])) <= 1e-5
    assert abs(frame.delta.iloc[0]) > 1e-3  # the blocked edges mattered: the comparison is not of two plain runs


def test_disabled_heads_zero_or_uniform_change_the_output_and_leave_the_model_as_it_came(decoder):
    before = [dict(m._forward_hooks) for m in decoder.model.modules()], decoder.model.config._attn_implementation
    zero = attnscope.knockout(decoder, TEXT, heads=[(0, 1), (2, 3)])
    uniform = attnscope.knockout(decoder, TEXT, heads=[(0, 1), (2, 3)], mode="uniform")
    assert zero.delta.iloc[0] != 0 and uniform.delta.iloc[0] != 0 and zero.delta.iloc[0] != uniform.delta.iloc[0]
    assert ([dict(m._forward_hooks) for m in decoder.model.modules()], decoder.model.config._attn_implementation) == before


def test_the_window_sweep_blocks_the_last_token_from_a_span_in_each_window(decoder):
    sweep = attnscope.knockout_sweep(decoder, TEXT, keys=[2, 3], window=2, progress=False)
    assert list(sweep.first_layer) == [0, 1, 2] and list(sweep.last_layer) == [1, 2, 3]
    for row in sweep.itertuples():
        edges = [(layer, None, -1, [2, 3]) for layer in range(row.first_layer, row.last_layer + 1)]
        assert row.delta == pytest.approx(attnscope.knockout(decoder, TEXT, edges=edges).delta.iloc[0], abs=1e-12)
    assert sweep.attrs["keys"] == [2, 3] and sweep.attrs["window"] == 2


def test_token_ids_are_read_as_given_with_a_target_id(decoder):
    ids = decoder.tokenizer(TEXT, add_special_tokens=False)["input_ids"]  # no [CLS]: not what the text reads as
    edges = [(1, None, -1, [0, 2])]
    plain = _independent(decoder.model, torch.tensor([ids]), {}, -1)
    target = int(plain.argsort()[-3])  # a token other than the prediction
    frame = attnscope.knockout(decoder, ids, edges=edges, target=target)
    reference = _independent(decoder.model, torch.tensor([ids]), blocked_edges(decoder, len(ids), edges), -1)
    row = frame.iloc[0]
    assert row.position == len(ids) - 1 and row.target == decoder.tokenizer.convert_ids_to_tokens(target)
    assert abs(row.log_p - float(plain[target])) <= 1e-5 and abs(row.log_p_knocked - float(reference[target])) <= 1e-5
    assert abs(row.delta) > 1e-3 and frame.attrs["text"] == ids
    same = attnscope.knockout(decoder, torch.tensor(ids), edges=edges, target=target).iloc[0]
    assert same.delta == row.delta
    assert attnscope.knockout(decoder, TEXT, edges=edges).log_p.iloc[0] != row.log_p  # the text reads other ids
    for given, match in [([], "non-empty str or a list of token ids, not "), ([3, "a"], "token id at 1 must be a whole"),
                         ([3, len(decoder.tokenizer)], f"token id at 1={len(decoder.tokenizer)} is too large"),
                         ([-1], "token id at 0=-1 is too small"), (torch.tensor([ids]), r"one sequence \(1-D\)"),
                         (3.5, "non-empty str or a list of token ids")]:
        with pytest.raises(InputError, match=match):
            attnscope.knockout(decoder, given)
    with pytest.raises(InputError, match="target=99999 is too large"):
        attnscope.knockout(decoder, ids, target=99999)


def _passes(model, run) -> list[int]:
    """How many positions each forward of `run()` fed the model."""
    lengths = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kwargs: lengths.append(kwargs["input_ids"].shape[1]),
                                           with_kwargs=True)
    try:
        run()
    finally:
        hook.remove()
    return lengths


def test_a_sweep_reads_the_text_once_then_one_token_a_window_through_its_cache(decoder):
    n = decoder.tokenizer(TEXT, return_tensors="pt")["input_ids"].shape[1]
    # the plain forward, the unblocked pass through the cache, one pass a window
    assert _passes(decoder.model, lambda: attnscope.knockout_sweep(decoder, TEXT, keys=[2, 3], window=2,
                                                                   progress=False)) == [n, 1, 1, 1, 1]
    # edges from earlier queries: the positions from the first blocked query on
    assert _passes(decoder.model, lambda: attnscope.knockout(decoder, TEXT, edges=[(1, None, [4, 6], 1)])) == [n, n - 4, n - 4]


def test_a_window_shorter_than_the_text_reads_the_whole_text_each_time(bert_tokenizer):
    torch.manual_seed(0)
    config = transformers.MistralConfig(vocab_size=len(bert_tokenizer), sliding_window=4, **SHAPE)
    windowed = attnscope.load(transformers.MistralForCausalLM(config).eval(), bert_tokenizer, device="cpu")
    n = bert_tokenizer(TEXT, return_tensors="pt")["input_ids"].shape[1]
    assert _passes(windowed.model, lambda: attnscope.knockout_sweep(windowed, TEXT, keys=-2, window=2,
                                                                    progress=False)) == [n] * 4


def test_what_knockout_refuses(decoder, default_model):
    with pytest.raises(InputError, match="encoder with no masked-LM head.*embedded MiniLM has none"):
        attnscope.knockout(default_model, TEXT)
    with pytest.raises(InputError, match=r"keys has \[99\] out of range: positions are numbered 0..11 \(or -12..-1 from the end\)"):
        attnscope.knockout_sweep(decoder, TEXT, keys=[2, 99], window=2)
    with pytest.raises(InputError, match="leaves a query with no key"):
        attnscope.knockout(decoder, TEXT, edges=[(0, None, 0, 0)])  # the first token sees only itself
    with pytest.raises(InputError, match="target='Paris is' is"):
        attnscope.knockout(decoder, TEXT, target="Paris is")
    with pytest.raises(InputError, match=r"edges: an edge is \(layer, head or None, queries, keys\)"):
        attnscope.knockout(decoder, TEXT, edges=[(0, 1)])
    with pytest.raises(InputError, match="mode must be one of"):
        attnscope.knockout(decoder, TEXT, heads=[(0, 0)], mode="half")


MASKED = "The Eiffel Tower is in the city of [MASK] ."


@pytest.fixture(scope="module")
def masked_lm(bert_tokenizer):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(bert_tokenizer), hidden_size=64, num_hidden_layers=3,
                                     num_attention_heads=4, intermediate_size=96, max_position_embeddings=64)
    model = transformers.BertForMaskedLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 2 and "embeddings" not in name:
                parameter.normal_(0, 0.2)
    return attnscope.load(model, bert_tokenizer, device="cpu")


def _independent_bert(model, ids, blocked, position):
    """An encoder's masked-token log p with the blocked edges' scores −inf before the softmax, in
    an eager attention written here (no mask: one unpadded text)."""
    calls = iter(range(model.config.num_hidden_layers))

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        layer = next(calls)
        scores = (query.double() @ key.double().transpose(2, 3)) * (query.shape[-1] ** -0.5)
        if layer in blocked:
            scores = scores.masked_fill(blocked[layer][None], -math.inf)
        weights = torch.softmax(scores, -1)
        return (weights @ value.double()).to(query.dtype).transpose(1, 2).contiguous(), weights

    original = modeling_bert.eager_attention_forward
    modeling_bert.eager_attention_forward = attention
    implementation = model.config._attn_implementation
    try:
        model.config._attn_implementation = "eager"
        with torch.inference_mode():
            logits = model(input_ids=ids).logits
    finally:
        modeling_bert.eager_attention_forward = original
        model.config._attn_implementation = implementation
    return torch.log_softmax(logits[0, position].double(), -1)


def test_an_encoder_with_a_masked_lm_head_reads_its_mask_token_exactly(masked_lm):
    ids = masked_lm.tokenizer(MASKED, return_tensors="pt")["input_ids"]
    at = ids[0].tolist().index(masked_lm.tokenizer.mask_token_id)
    plain = _independent_bert(masked_lm.model, ids, {}, at)
    frame = attnscope.knockout(masked_lm, MASKED)
    assert frame.position.iloc[0] == at and frame.attrs["output"] == "masked token"
    assert abs(frame.log_p.iloc[0] - float(plain.max())) <= 1e-5 and frame.delta.iloc[0] == 0
    edges = [(0, None, at, [1, 2, 3]), (2, 1, at, range(4, 8)), (1, None, [0, at], at)]
    blocked = blocked_edges(masked_lm, ids.shape[1], edges)
    knocked = attnscope.knockout(masked_lm, MASKED, edges=edges)
    reference = _independent_bert(masked_lm.model, ids, blocked, at)
    target = int(plain.argmax())
    assert abs(knocked.delta.iloc[0] - float(reference[target] - plain[target])) <= 1e-5
    assert abs(knocked.delta.iloc[0]) > 1e-3
    with pytest.raises(InputError, match="position=2 holds .*not the mask token '\\[MASK\\]'"):
        attnscope.knockout(masked_lm, MASKED, position=2)
    with pytest.raises(InputError, match="The text has 0 mask tokens"):
        attnscope.knockout(masked_lm, TEXT)
    sweep = attnscope.knockout_sweep(masked_lm, MASKED, keys=[4, 5], window=2, progress=False)
    assert list(sweep.first_layer) == [0, 1] and sweep.attrs["position"] == at


def test_each_head_disabled_in_turn_is_a_heads_frame_the_analysis_view_shows(masked_lm, decoder):
    frame = attnscope.knockout_heads(masked_lm, MASKED, progress=False)
    assert list(frame.columns) == ["layer", "head", "label", "measure", "value"] and len(frame) == 3 * 4
    assert set(frame.measure) == {"delta"} and frame.attrs["attnscope"] == "knockout_heads"
    for layer, head in [(0, 1), (2, 3)]:
        one = attnscope.knockout(masked_lm, MASKED, heads=[(layer, head)]).delta.iloc[0]
        assert frame[(frame.layer == layer) & (frame["head"] == head)].value.iloc[0] == pytest.approx(one, abs=1e-12)
    uniform = attnscope.knockout_heads(decoder, TEXT, mode="uniform", progress=False)
    one = attnscope.knockout(decoder, TEXT, heads=[(1, 2)], mode="uniform").delta.iloc[0]
    assert uniform[(uniform.layer == 1) & (uniform["head"] == 2)].value.iloc[0] == pytest.approx(one, abs=1e-12)
    from attnscope.widget.payloads import analysis_payload

    shown = analysis_payload(frame, 3, 4)
    assert shown["kind"] == "knockout_heads" and shown["measure"] == "drop"
    assert shown["measures"][0]["values"] == pytest.approx(list(-frame.value))
    assert "'" + frame.attrs["target"] + "'" in shown["note"] and "masked token" in shown["note"]
    assert knockout_heads_view is not None
    with pytest.raises(InputError, match="mode must be one of"):
        attnscope.knockout_heads(decoder, TEXT, mode="half", progress=False)


def test_the_sweep_in_the_analysis_view_is_a_column_of_windows_by_first_layer(decoder):
    from attnscope.widget.payloads import analysis_payload

    sweep = attnscope.knockout_sweep(decoder, TEXT, keys=[2, 3], window=2, progress=False)
    shown = analysis_payload(sweep, 4, 4)
    assert shown["n_heads"] == 1 and shown["columns"][0]["name"] == "window of 2 layers from here"
    assert shown["measures"][0]["values"][:3] == pytest.approx(list(-sweep.delta)) and shown["measures"][0]["values"][3] is None
    assert knockout_sweep_view is not None
    with pytest.raises(InputError, match="analyse the same model"):
        analysis_payload(sweep, 6, 4)
