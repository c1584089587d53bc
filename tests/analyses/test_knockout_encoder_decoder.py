"""Knockout of an encoder-decoder's output token (issues 47 and 48): the decoder's next token after
what it has read, with edges blocked part by part (encoder, decoder, cross: decoder queries →
source keys) or heads disabled, checked against an independent eager implementation written here
(the scores of the blocked edges −inf before the softmax, in float64), on BART and on T5 (whose
relative-position bias is added to the scores); nothing blocked is the plain forward. The sweeps
read one part's layers: the windows of cross-attention (or the decoder's), each head of a part."""

from __future__ import annotations

import math

import pytest
import torch
from small_models import model_state, tiny_bart, tiny_t5
from transformers.models.bart import modeling_bart
from transformers.models.t5 import modeling_t5

import attnscope
from attnscope.errors import InputError

SOURCE = "The Eiffel Tower is in the city of Paris"
DECODER = "Der Eiffelturm steht"
FAMILIES = {"bart": (tiny_bart, modeling_bart), "t5": (tiny_t5, modeling_t5)}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def seq2seq(request, bert_tokenizer):
    make, module = FAMILIES[request.param]
    engine = attnscope.load(make(vocab_size=len(bert_tokenizer), lm_head=True), bert_tokenizer, device="cpu")
    return engine, module


def _ids(engine):
    source = engine.tokenizer(SOURCE, return_tensors="pt")["input_ids"]
    start = engine.model.config.decoder_start_token_id
    decoder = [start, *engine.tokenizer(text_target=DECODER, add_special_tokens=False)["input_ids"]]
    return source, torch.tensor([decoder])


def _independent(engine, family_module, blocked=None, zeroed=None):
    """log p over the vocabulary after the decoder's last token, from a forward whose eager
    attention is written here, in float64: the model's own score bias (T5's relative positions)
    added, the decoder's self-attention causal, and the scores of `blocked` ((part, layer) →
    heads × queries × keys booleans) −inf before the softmax; `zeroed` ((part, layer) → heads):
    those heads' weights zeroed."""
    where = {id(m): (part, k) for part, modules in engine.groups.items() for k, m in enumerate(modules)}

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, position_bias=None, **kwargs):
        part_layer = where[id(module)]
        scores = (query.double() @ key.double().transpose(2, 3)) * (1.0 if scaling is None else scaling)
        if position_bias is not None:
            scores = scores + position_bias.double()
        n_queries, n_keys = scores.shape[-2:]
        if part_layer[0] == "decoder":
            scores = scores.masked_fill(torch.ones(n_queries, n_keys, dtype=torch.bool).triu(1), -math.inf)
        if part_layer in (blocked or {}):
            scores = scores.masked_fill(blocked[part_layer][None], -math.inf)
        weights = torch.softmax(scores, -1)
        for head in (zeroed or {}).get(part_layer, ()):
            weights[:, head] = 0
        return (weights @ value.double()).to(query.dtype).transpose(1, 2).contiguous(), weights

    source, decoder = _ids(engine)
    # Every config the modules read (T5's encoder and decoder stacks hold copies of the model's).
    configs = list({id(m.config): m.config for m in engine.model.modules() if hasattr(m, "config")}.values())
    original, implementations = family_module.eager_attention_forward, [c._attn_implementation for c in configs]
    family_module.eager_attention_forward = attention
    try:
        for config in configs:
            config._attn_implementation = "eager"
        with torch.inference_mode():
            logits = engine.model(input_ids=source, decoder_input_ids=decoder, use_cache=False).logits
    finally:
        family_module.eager_attention_forward = original
        for config, implementation in zip(configs, implementations):
            config._attn_implementation = implementation
    return torch.log_softmax(logits[0, -1].double(), -1)


def _grid(n_heads, n_queries, n_keys, heads, queries, keys):
    grid = torch.zeros(n_heads, n_queries, n_keys, dtype=torch.bool)
    for head in heads:
        grid[head, torch.tensor(queries)[:, None], torch.tensor(keys)[None, :]] = True
    return grid


def test_nothing_blocked_is_the_plain_forward(seq2seq):
    engine, _ = seq2seq
    source, decoder = _ids(engine)
    with torch.inference_mode():
        plain = torch.log_softmax(engine.model(input_ids=source, decoder_input_ids=decoder).logits[0, -1].double(), -1)
    row = attnscope.knockout(engine, SOURCE, decoder=DECODER).iloc[0]
    assert row.target == engine.tokenizer.convert_ids_to_tokens(int(plain.argmax()))
    assert row.position == decoder.shape[1] - 1
    assert abs(row.log_p - float(plain.max())) <= 1e-6 and row.delta == 0


def test_blocked_edges_of_each_part_are_scores_at_minus_infinity_before_the_softmax(seq2seq):
    engine, family_module = seq2seq
    source, decoder = _ids(engine)
    s, d, h = source.shape[1], decoder.shape[1], engine.n_heads
    last = d - 1
    edges = [("cross", 1, None, last, [1, 2, 3, 4]), ("cross", 0, 2, [last - 1, last], 5),
             ("decoder", 1, None, last, [1, 2]), ("encoder", 0, 1, [3, 4], [0, 1, 2])]
    blocked = {("cross", 1): _grid(h, d, s, range(h), [last], [1, 2, 3, 4]) | _grid(h, d, s, [], [], []),
               ("cross", 0): _grid(h, d, s, [2], [last - 1, last], [5]),
               ("decoder", 1): _grid(h, d, d, range(h), [last], [1, 2]),
               ("encoder", 0): _grid(h, s, s, [1], [3, 4], [0, 1, 2])}
    before = model_state(engine.model)
    frame = attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=edges)
    assert model_state(engine.model) == before
    reference, plain = _independent(engine, family_module, blocked), _independent(engine, family_module)
    target = int(plain.argmax())
    assert frame.target.iloc[0] == engine.tokenizer.convert_ids_to_tokens(target)
    assert abs(frame.log_p_knocked.iloc[0] - float(reference[target])) <= 1e-5
    assert abs(frame.delta.iloc[0] - float(reference[target] - plain[target])) <= 1e-5
    assert abs(frame.delta.iloc[0]) > 1e-3  # the blocked edges mattered
    # Each part alone is its own: cross-attention's edges are not the decoder's.
    alone = attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=edges[:1]).delta.iloc[0]
    reference = _independent(engine, family_module, {("cross", 1): blocked[("cross", 1)]})
    assert abs(alone - float(reference[target] - plain[target])) <= 1e-5


def test_disabled_heads_of_each_part_zero_their_weights(seq2seq):
    engine, family_module = seq2seq
    heads = [("cross", 0, 1), ("decoder", 1, 3), ("encoder", 1, 0)]
    frame = attnscope.knockout(engine, SOURCE, decoder=DECODER, heads=heads)
    zeroed = {(part, layer): [head] for part, layer, head in heads}
    plain = _independent(engine, family_module)
    target = int(plain.argmax())
    reference = _independent(engine, family_module, zeroed=zeroed)
    assert abs(frame.delta.iloc[0] - float(reference[target] - plain[target])) <= 1e-5
    assert abs(frame.delta.iloc[0]) > 1e-4
    uniform = attnscope.knockout(engine, SOURCE, decoder=DECODER, heads=heads[:1], mode="uniform").delta.iloc[0]
    assert math.isfinite(uniform) and uniform != frame.delta.iloc[0]


def test_a_generations_step_is_read_from_its_own_ids(seq2seq):
    """A greedy generation's step t: its source ids and the decoder's ids before t, as given (no
    re-tokenizing): the token the model chose there is knockout's own prediction, and a block of
    cross-attention lines from it changes its log p."""
    from attnscope.engine.generation import generate

    engine, _ = seq2seq
    run = generate(engine, SOURCE, 4, chat=False)
    start = len(run.start_ids)
    for t, chosen in enumerate(run.new_ids):
        read = run.decoder_ids[: start + t]
        row = attnscope.knockout(engine, run.prompt_ids, decoder=read).iloc[0]
        assert row.target == engine.tokenizer.convert_ids_to_tokens(chosen) and row.position == len(read) - 1
    row = attnscope.knockout(engine, run.prompt_ids, decoder=run.decoder_ids[:-1], target=run.new_ids[-1],
                             edges=[("cross", 1, None, -1, list(range(1, len(run.prompt_ids))))]).iloc[0]
    assert row.delta != 0 and row.target == engine.tokenizer.convert_ids_to_tokens(run.new_ids[-1])


def test_what_an_encoder_decoders_knockout_refuses(seq2seq, default_model):
    engine, _ = seq2seq
    before = model_state(engine.model)
    calls = []
    hook = engine.model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        for call, message in [
            (lambda: attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=[(1, None, -1, [1])]),
             r"an encoder-decoder's edge is \(part, layer, head or None, queries, keys\), part one of "
             r"\('encoder', 'decoder', 'cross'\), not \(1, None, -1, \[1\]\)"),
            (lambda: attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=[("cross", 2, None, -1, [1])]),
             r"an edge's layer"),
            (lambda: attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=[("cross", 0, None, -1, [99])]),
             r"an edge's keys"),
            (lambda: attnscope.knockout(engine, SOURCE, decoder=DECODER, heads=[(0, 1)]),
             r"an encoder-decoder's head is \(part, layer, head\)"),
            (lambda: attnscope.knockout(engine, SOURCE, decoder=[10**9]), r"decoder's token id at 0"),
            (lambda: attnscope.knockout_sweep(engine, SOURCE, keys=[1, 2], window=1, part="encoder", progress=False),
             r"part must be one of \('cross', 'decoder'\) for knockout_sweep, not 'encoder'"),
            (lambda: attnscope.knockout_sweep(engine, SOURCE, keys=[99], window=1, progress=False), r"keys"),
            (lambda: attnscope.knockout_heads(engine, SOURCE, part="both", progress=False), r"part must be one of"),
        ]:
            with pytest.raises(InputError, match=message):
                call()
    finally:
        hook.remove()
    assert calls == [] and model_state(engine.model) == before
    # A cross-attention row with every source key blocked leaves the query nothing: said before any run.
    source, _ = _ids(engine)
    with pytest.raises(InputError, match="cross-attention layer 0 leaves a query with no key"):
        attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=[("cross", 0, None, -1, list(range(source.shape[1])))])
    with pytest.raises(InputError, match="decoder= is what an encoder-decoder's decoder has read"):
        attnscope.knockout(default_model, SOURCE, decoder=DECODER)
    with pytest.raises(InputError, match="part= names an encoder-decoder's attention"):
        attnscope.knockout_heads(default_model, SOURCE, part="cross", progress=False)


def test_the_sweeps_read_one_part_each_window_and_head_as_knockout_does(seq2seq):
    """Geva et al.'s windows over the cross-attention's layers (the default) or the decoder's, and
    each head of a part disabled in turn: every row is knockout's with those edges or that head."""
    engine, _ = seq2seq
    source, decoder = _ids(engine)
    last, span = decoder.shape[1] - 1, [1, 2, 3]
    sweep = attnscope.knockout_sweep(engine, SOURCE, span, window=1, decoder=DECODER, progress=False)
    assert sweep.attrs["part"] == "cross" and sweep.first_layer.tolist() == [0, 1]
    for row in sweep.itertuples():
        alone = attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=[("cross", row.first_layer, None, last, span)])
        assert row.delta == alone.delta.iloc[0]
    assert sweep.delta.abs().max() > 1e-4
    own = attnscope.knockout_sweep(engine, SOURCE, [1, 2], window=2, decoder=DECODER, part="decoder", progress=False)
    both = attnscope.knockout(engine, SOURCE, decoder=DECODER, edges=[("decoder", layer, None, last, [1, 2]) for layer in (0, 1)])
    assert len(own) == 1 and own.delta.iloc[0] == both.delta.iloc[0]
    for part in ("cross", "decoder", "encoder"):
        heads = attnscope.knockout_heads(engine, SOURCE, decoder=DECODER, part=part, progress=False)
        assert heads.attrs["part"] == part
        grid = heads[heads.measure == "delta"].set_index(["layer", "head"]).value
        for layer, head in [(0, 1), (1, 3)]:
            alone = attnscope.knockout(engine, SOURCE, decoder=DECODER, heads=[(part, layer, head)]).delta.iloc[0]
            assert grid[(layer, head)] == alone, (part, layer, head)
        assert grid.abs().max() > 1e-5, part
