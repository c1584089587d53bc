"""The head finder's norm metrics (issue 47, Kobayashi et al. 2020): value_norm, alpha_first_weighed,
sink_rate_weighed and first_weighed_ratio, each checked against a computation of its own, in float64,
from a run's full attention and what each key passes, f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h, made here
from the value projection's recorded output and the output projection's weight (never the engine's
norms): on the embedded MiniLM (a post-LN encoder, [CLS] first), on a tiny random Llama whose 4
query heads read 2 key-value heads (a decoder, its batches padded) and on a tiny GPT-2 (q|k|v from
one fused projection, a Conv1D output projection). A gated model (Qwen3-Next) keeps
no norm per key: NaN columns, and the finder says why."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from small_models import FAMILIES, gated_qwen3_next, sharpened

import attnscope
from attnscope.analyses.head_finder import NORM_METRICS
from attnscope.engine import value_norms

TEXTS = ["The keeper fed the old lion before the storm, and it slept.", "Dogs bark at the mailman every morning.",
         "Paris is the capital of France.", "She read the book twice, slowly; then she wept."]
EPSILON = 0.3  # Gu et al.'s ε, as the sink rate reads it


def _head_outputs_norms(engine, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One run's full attention (L × H × n × n) and ‖f_h(x_j)‖ (L × H × n), float64, the norms from
    the value projection's output as the run records it here (a hook of this test's own) through
    each head's slice of the output projection; a key-value head serves query heads h·G … h·G+G−1."""
    values = []
    modules = engine.attention_modules
    fused = all(hasattr(m, "c_attn") for m in modules)  # GPT-2: [q | k | v] from one projection
    value_of = [m.c_attn if fused else getattr(m, "value", None) or m.v_proj for m in modules]
    pick = (lambda out: out[0].chunk(3, -1)[2]) if fused else (lambda out: out[0])
    handles = [v.register_forward_hook(lambda _m, _i, out: values.append(pick(out).detach().double())) for v in value_of]
    try:
        result = engine.run(text)  # shorter than the finder's 128 tokens: no cut either way
    finally:
        for handle in handles:
            handle.remove()
    attention = result.attention.double()
    n_layers, n_heads, n, _ = attention.shape
    norms = torch.empty(n_layers, n_heads, n, dtype=torch.float64)
    for layer, module in enumerate(modules):
        weight = value_norms.output_layer(engine.model, module).weight.detach().double()  # width × H·d
        weight = weight.T if fused else weight  # Conv1D keeps in × out
        head_dim = weight.shape[1] // n_heads
        v = values[layer].view(n, -1, head_dim)  # n × key heads × d
        group = n_heads // v.shape[1]
        for head in range(n_heads):
            f = v[:, head // group] @ weight[:, head * head_dim:(head + 1) * head_dim].T  # n × width
            norms[layer, head] = f.norm(dim=-1)
    return attention, norms


def _expected(engine, texts) -> dict[str, np.ndarray]:
    """Each norm metric (L × H) over `texts`, as the finder's docstring defines it."""
    per_doc = {"value_norm": [], "alpha_first_weighed": [], "sink_rate_weighed": [], "alpha_first": []}
    for text in texts:
        attention, norms = _head_outputs_norms(engine, text)
        weighed = attention * norms[:, :, None, :]  # ‖α_hij f_h(x_j)‖, L × H × n × n
        share = (weighed[..., 0] / weighed.sum(-1)).mean(-1)
        per_doc["value_norm"].append(norms.mean(-1))
        per_doc["alpha_first_weighed"].append(share)
        per_doc["sink_rate_weighed"].append((share > EPSILON).double())
        per_doc["alpha_first"].append(attention[..., 0].mean(-1))
    out = {name: torch.stack(values).mean(0).numpy() for name, values in per_doc.items()}
    out["first_weighed_ratio"] = out["alpha_first_weighed"] / out["alpha_first"]
    return out


def _grid(finder, name: str) -> np.ndarray:
    metrics = finder.metrics.sort_values(["layer", "head"])
    n_layers, n_heads = int(metrics.layer.max()) + 1, int(metrics["head"].max()) + 1
    return metrics[name].to_numpy(float).reshape(n_layers, n_heads)


@pytest.fixture(scope="module")
def gqa_llama(bert_tokenizer):
    torch.manual_seed(0)
    return attnscope.load(sharpened(FAMILIES["llama (grouped-query)"]()), bert_tokenizer, device="cpu")


@pytest.fixture(scope="module")
def fused_gpt2(bert_tokenizer):
    torch.manual_seed(0)
    return attnscope.load(sharpened(FAMILIES["gpt2 (fused q|k|v, Conv1D)"]()), bert_tokenizer, device="cpu")


@pytest.mark.parametrize("which", ["MiniLM", "llama (GQA)", "gpt2 (fused)"])
def test_each_norm_metric_is_its_formula_on_full_attention_and_norms(which, default_model, gqa_llama, fused_gpt2):
    engine = {"MiniLM": default_model, "llama (GQA)": gqa_llama, "gpt2 (fused)": fused_gpt2}[which]
    finder = attnscope.head_finder(engine, TEXTS, batch_size=3, induction=False, progress=False)  # batches padded
    expected = _expected(engine, TEXTS)
    assert finder.metrics.attrs["value_norms"] == ""
    for name in NORM_METRICS:
        ours = _grid(finder, name)
        assert not np.isnan(ours).any(), name
        np.testing.assert_allclose(ours, expected[name], rtol=2e-5, atol=1e-6, err_msg=f"{which}: {name}")
    # The metrics differ from the weight's: what flows is not what is weighed.
    assert np.abs(_grid(finder, "alpha_first_weighed") - _grid(finder, "alpha_first")).max() > 0.005
    assert finder.metric_names.index("value_norm") == finder.metric_names.index("sink_rate") + 1


def test_a_filter_reads_the_norm_metrics(default_model):
    finder = attnscope.head_finder(default_model, TEXTS, batch_size=4, progress=False)
    metrics = finder.metrics
    found = finder.find("sink_rate > 0.5 and sink_rate_weighed < 0.5 and first_weighed_ratio < 0.5")
    expected = metrics[(metrics.sink_rate > 0.5) & (metrics.sink_rate_weighed < 0.5) & (metrics.first_weighed_ratio < 0.5)]
    assert 0 < len(found) < len(metrics) and found.label.tolist() == expected.label.tolist()
    assert finder.find("value_norm > 1e9").empty
    assert "sink_rate_weighed" in finder.tidy().measure.unique()


def test_a_gated_model_gets_nan_norm_columns_and_says_why(bert_tokenizer):
    engine = attnscope.load(gated_qwen3_next(), bert_tokenizer, device="cpu")
    finder = attnscope.head_finder(engine, TEXTS[:2], induction=False, progress=False)
    for name in NORM_METRICS:
        assert finder.metrics[name].isna().all(), name
    assert not finder.metrics["alpha_first"].isna().any()
    why = finder.metrics.attrs["value_norms"]
    assert "gate" in why and "sink_rate_weighed" in why and "NaN" in why
    assert "gate" in finder._repr_html_()
    assert finder.find("sink_rate_weighed > 0.5").empty  # NaN keeps no head


def test_the_finders_picture_draws_a_norm_metric(default_model):
    """The picture (picture.js, the page's own drawing) on a norm metric as y and another as colour,
    with a filter on a third: named on its axes and its colour bar, the filter's heads drawn."""
    import xml.etree.ElementTree as ET

    from attnscope.widget import picture as picture_module
    from attnscope.widget.picture import picture_svg

    if not (picture_module.STATIC / "picture.js").is_file():
        pytest.skip("JS bundle not built")
    finder = attnscope.head_finder(default_model, TEXTS, batch_size=4, progress=False)
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model)
    try:
        widget.show_analysis(finder)
        widget.analysis_choice = {"x": "alpha_first", "y": "alpha_first_weighed", "color": "value_norm",
                                "filter": "first_weighed_ratio < 0.5"}
        svg, why = picture_svg(widget)
    finally:
        widget.close()
    assert why == ""
    root = ET.fromstring(svg)
    shown = [node.text for node in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"alpha_first", "alpha_first_weighed", "colour: value_norm"} <= set(shown)
    kept = finder.find("first_weighed_ratio < 0.5")
    points = [c for c in root.iter("{http://www.w3.org/2000/svg}circle") if c.get("class") == "point"]
    assert 0 < len(points) == len(kept) < len(finder.metrics)
    # Up by the weighed share: the kept head that passes [CLS] most is drawn highest.
    heights = [float(c.get("cy")) for c in points]
    assert heights.index(min(heights)) == int(np.argmax(kept.alpha_first_weighed.to_numpy()))
