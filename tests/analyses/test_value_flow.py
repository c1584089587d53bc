"""Kobayashi et al. 2020's comparison as an analysis (issue 47 item 5): α received, ‖f(x)‖ and
‖α f(x)‖ per layer and kind of token, by their definition, the same on demand as whole, and the
paper's finding on the embedded MiniLM."""

from __future__ import annotations

import numpy as np
import torch
import transformers

import attnscope
from attnscope.analyses.value_flow import KINDS, document_flow

TEXTS = ["The keeper fed the lion before the storm, and it slept.", "Paris is the capital of France; it is large.",
         "She read the book twice, then gave it away."]


def test_each_measure_is_its_definition_on_one_document(default_model):
    result = default_model.run(TEXTS[0])
    flow = document_flow(default_model, result)
    tokens = result.tokens
    n = len(tokens)
    other = [j for j, t in enumerate(tokens) if j > 0 and t not in ("[SEP]", ",", ".")]
    sep = [j for j, t in enumerate(tokens) if t == "[SEP]"]
    for layer in (0, 3, 5):
        a, f = result.attention[layer].double(), result.value_norms[layer].double()  # H × T × T, H × T
        received = a.sum(1) / n  # H × T: the mean over queries
        for name, per_key in (("alpha", received), ("norm", f), ("weighted", received * f)):
            for kind, keys in (("other", other), ("[SEP]", sep), ("[CLS] / first token", [0])):
                expected = float(per_key[:, keys].mean())
                assert abs(float(flow[name][layer, KINDS.index(kind)]) - expected) <= 1e-9, (name, kind, layer)


def test_a_long_run_gives_the_same_measures_as_a_whole_one(bert_tokenizer):
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=37, max_position_embeddings=256)
    engine = attnscope.load(transformers.Qwen2Model(config).eval(), bert_tokenizer, device="cpu")
    whole = attnscope.value_flow(engine, TEXTS, attention="full", progress=False)
    long = attnscope.value_flow(engine, TEXTS, attention="on_demand", progress=False)
    a, b = whole.value.to_numpy(float), long.value.to_numpy(float)
    assert (np.isnan(a) == np.isnan(b)).all()
    np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=1e-5, atol=1e-7)


def test_the_embedded_models_special_tokens_receive_much_and_pass_little(default_model):
    """The paper's finding: [SEP] (and [CLS]) take a large share of attention, but weighed by what
    they pass their share shrinks, where the other tokens' grows."""
    flow = attnscope.value_flow(default_model, TEXTS, progress=False)
    wide = flow.pivot_table(index=["layer", "kind"], columns="measure", values="value")
    ratio = (wide["weighted"] / wide["alpha"]).unstack("kind")  # layer × kind: what a unit of α passes
    assert (ratio["[SEP]"] < ratio["other"]).sum() >= 4, ratio
    assert flow.attrs["attnscope"] == "value_flow" and set(flow.kind) == set(KINDS)


def test_the_analysis_tab_shows_layers_by_kind_of_token_and_refuses_another_models(default_model):
    """A layout of its own (issue 46 §1): layers × kinds of token, not × heads, in the widget, its
    saved page and its picture."""
    import pytest

    from attnscope import InputError
    from attnscope.analyses.value_flow import KIND_LABELS

    flow = attnscope.value_flow(default_model, TEXTS, progress=False)
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model)
    try:
        widget.show_analysis(flow)
        payload = widget.analysis
        assert widget.view == "analysis" and payload["kind"] == "value_flow"
        assert payload["n_layers"] == default_model.n_layers and payload["n_heads"] == len(KINDS)
        assert [c["label"] for c in payload["columns"]] == list(KIND_LABELS) and [c["name"] for c in payload["columns"]] == list(KINDS)
        alpha = next(m for m in payload["measures"] if m["key"] == "alpha")
        row = flow[(flow.measure == "alpha") & (flow.layer == 3) & (flow.kind == "[SEP]")]
        assert alpha["values"][3 * len(KINDS) + KINDS.index("[SEP]")] == pytest.approx(float(row.value.iloc[0]))
        assert "Kobayashi" in payload["note"]
        picture, why = attnscope.widget.picture.picture_svg(widget)
        assert picture is not None, why
        assert ">SEP<" in picture and ">punc<" in picture
    finally:
        widget.close()
    torch.manual_seed(0)
    other = attnscope.load(transformers.BertModel(transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)).eval(), default_model.tokenizer,
        device="cpu")
    widget = attnscope.AttentionWidget(TEXTS[0], model=other)
    try:
        with pytest.raises(InputError, match="6 layers, and the widget's model 2"):
            widget.show_analysis(flow)
    finally:
        widget.close()
