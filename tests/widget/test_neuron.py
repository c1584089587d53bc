"""The neuron view's numbers (issue 47 item 2: past the softmax) agree with the model's own
attention and its own per-head output, and the live widget's and the saved page's are the same.

Their maths has one definition, js/drawing/neuron_maths.js (widget/neuron_numbers.py says why); these
tests run it in Node.js (node_js.py) on what the kernel captured."""

import base64

import float_bounds
import pytest
import torch
import transformers
from node_js import live_neuron_answer, neuron_maths, neuron_numbers, saved_neuron_answer
from small_models import FAMILIES, sharpened
from test_value_norms import TEXT

import attnscope
from attnscope.engine import value_norms
from attnscope.widget import export
from attnscope.widget.neuron_numbers import neuron_inputs


def maths(result, layer, head, i, double=True):
    """neuronMaths on the captured float32 inputs (not rounded to float16), as tensors."""
    piece = neuron_inputs(result, layer, head, i)
    as_list = lambda t: None if t is None else t.double().flatten().tolist()
    out = neuron_maths({"query": as_list(piece.query), "keys": as_list(piece.keys), "values": as_list(piece.values),
                        "norms": as_list(piece.norms), "bias": as_list(piece.bias), "d": int(piece.query.shape[0]),
                        "queryIndex": i, "scaling": piece.scaling, "causal": piece.causal, "sink": piece.sink})
    numbers = lambda v: torch.tensor([float(x) for x in v], dtype=torch.float64)
    return piece, {k: numbers(v) if isinstance(v, list) else v for k, v in out.items()}


def test_maths_reproduces_the_attention_row(default_model):
    result = default_model.run("The cat sat on the mat.")
    n, d = len(result.tokens), result.queries.shape[-1]
    for layer, head, i in [(0, 0, 0), (3, 7, 4), (5, 11, n - 1)]:
        _, out = maths(result, layer, head, i)
        assert out["products"].shape == (n * d,) and out["weighted"].shape == (n * d,) and out["output"].shape == (d,)
        keys, query = result.keys[layer, head].double(), result.queries[layer, head, i].double()
        assert torch.allclose(out["products"].view(n, d), keys * query, rtol=0, atol=1e-12)
        largest = float(out["scores"].abs().max())
        relative = float_bounds.weight_error(largest, d, n)
        row = result.attention[layer, head, i].double()
        assert ((out["softmax"] - row).abs() <= relative * row + 1e-12).all()
        assert out["sinkShare"] == 0 and abs(float(out["softmax"].sum()) - 1) < 1e-12


def test_causal_maths_masks_future_keys(bert_tokenizer):
    config = transformers.GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    result = attnscope.load(transformers.GPT2Model(config), bert_tokenizer, device="cpu").run("one two three four")
    _, out = maths(result, 1, 2, 2)
    assert all(s == float("-inf") for s in out["scores"][3:]) and (out["softmax"][3:] == 0).all()
    assert (out["weighted"].view(len(result.tokens), -1)[3:] == 0).all()  # a masked key passes nothing
    assert torch.allclose(out["softmax"], result.attention[1, 2, 2].double(), atol=1e-5)


def test_out_of_range_is_refused(default_model):
    result = default_model.run("short")
    with pytest.raises(ValueError, match="query_index=9"):
        neuron_inputs(result, 0, 0, 9)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "albert", "distilbert", "gpt2"])
def test_neuron_view_works_for_every_family(family, bert_tokenizer):
    from test_engine import small_models

    torch.manual_seed(0)
    result = attnscope.load(small_models()[family](), bert_tokenizer, device="cpu").run("Every family works.", "Yes.")
    last = len(result.tokens) - 1
    _, out = maths(result, 1, 3, last)
    assert torch.allclose(out["softmax"], result.attention[1, 3, last].double(), atol=1e-5)


def engine_of(family, default_model, bert_tokenizer):
    if FAMILIES[family] is None:
        return default_model
    torch.manual_seed(0)
    return attnscope.load(sharpened(FAMILIES[family]()), bert_tokenizer, device="cpu")


def run_with_head_outputs(engine):
    """The run and each layer's per-head outputs as the model computes them: the input of its
    output projection (1 × T × heads · d, head h's o_i at columns h·d … (h+1)·d), in float64."""
    taken = {}
    handles = [value_norms.output_layer(engine.model, module).register_forward_pre_hook(
        lambda _m, args, k=k: taken.__setitem__(k, args[0][0].detach().double()))
        for k, module in enumerate(engine.attention_modules)]
    try:
        result = engine.run(TEXT)
    finally:
        for handle in handles:
            handle.remove()
    return result, taken


@pytest.mark.parametrize("family", ["bert (the embedded MiniLM)", "llama (grouped-query)"])
def test_the_heads_output_is_the_attention_modules_own(family, default_model, bert_tokenizer):
    """o_i = Σ_j α_ij v_j equals what the attention module hands its output projection, for head h
    and query i; grouped-query heads read their key-value head's values; α_ij‖f_h(x_j)‖ equals
    ‖α_ij f_h(x_j)‖ with f from the output projection (value_norms.head_outputs)."""
    engine = engine_of(family, default_model, bert_tokenizer)
    result, taken = run_with_head_outputs(engine)
    n = len(result.tokens)
    for layer, head, i in [(0, 0, 0), (1, 1, n // 2), (engine.n_layers - 1, engine.n_heads - 1, n - 1), (0, 2, 3)]:
        piece, out = maths(result, layer, head, i)
        d = piece.query.shape[0]
        own = taken[layer][i, head * d : (head + 1) * d]
        scale = max(1.0, float(own.abs().max()))
        torch.testing.assert_close(out["output"], own, rtol=0, atol=1e-5 * scale, msg=f"{family} {layer}-{head} query {i}")
        weight, _ = value_norms.output_projection(engine.model, engine.attention_modules[layer])
        f = value_norms.head_outputs(result.values[layer].double(), weight.detach().double())[head]  # T × width
        torch.testing.assert_close(piece.norms.double(), f.norm(dim=-1), rtol=1e-5, atol=1e-7)
        assert torch.equal(piece.norms, result.value_norms[layer, head])
        alpha = result.attention[layer, head, i].double()
        torch.testing.assert_close(out["weightedNorms"], (alpha[:, None] * f).norm(dim=-1), rtol=1e-4, atol=1e-7)
    if "grouped" in family:  # heads 0 and 1 read key-value head 0: the same values, other outputs
        assert torch.equal(neuron_inputs(result, 0, 0, 3).values, neuron_inputs(result, 0, 1, 3).values)


@pytest.mark.parametrize("family", ["bert (the embedded MiniLM)", "llama (grouped-query)"])
def test_the_live_and_the_saved_answers_are_the_same(family, default_model, bert_tokenizer):
    """A "neuron" request answered by the kernel and by the saved page (js/transport/saved.js, from what the
    page stores) gives the same content and the same bytes, so the same numbers; those numbers,
    through float16, still give the module's own per-head output."""
    engine = engine_of(family, default_model, bert_tokenizer)
    widget = attnscope.AttentionWidget(TEXT, model=engine, view="neuron")
    page = export.page_data(widget)
    store = export.page_state(widget)["served"]["neuron"]
    grouped = "grouped" in family
    assert store["key_group"] == (2 if grouped else 1)
    assert store["keys"]["shape"][1] == engine.n_heads // store["key_group"] == store["values"]["shape"][1]
    n = len(widget.tokens)
    for layer, head, i in [(0, 0, 0), (1, 3, n - 1), (engine.n_layers - 1, 1, n // 2)]:
        # The kernel answers the layer's store; the view cuts the query from it as the saved page does.
        content, buffers = widget._answer_neuron({"layer": layer}, [])
        assert (content["layer"], content["n_queries"], content["result_id"]) == (layer, n, widget.result_id)
        live = live_neuron_answer(content, buffers, {"layer": layer, "head": head, "query": i})
        saved = saved_neuron_answer(page, {"layer": layer, "head": head, "query": i})
        assert saved["content"] == live["content"]
        assert saved["buffers"] == live["buffers"]
        assert live["content"]["inputs"] == ["query", "keys", "values", "norms"]
    # What the view draws, from the float16 answer: within float16's rounding of the module's own.
    result, taken = run_with_head_outputs(engine)
    content, buffers = widget._answer_neuron({"layer": 1}, [])
    answer = live_neuron_answer(content, buffers, {"layer": 1, "head": 3, "query": n - 1})
    content, buffers = answer["content"], [base64.b64decode(b) for b in answer["buffers"]]
    drawn = neuron_numbers(content, buffers)
    d = content["d"]
    own = taken[1][n - 1, 3 * d : 4 * d]
    output = torch.tensor(drawn["output"], dtype=torch.float64)
    assert (output - own).abs().max() <= 2e-2 * max(1.0, float(own.abs().max()))
    assert abs(sum(drawn["softmax"]) - 1) < 1e-9 and len(drawn["weighted"]) == n * d
