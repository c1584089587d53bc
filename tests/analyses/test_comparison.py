"""What fine-tuning changes (Kovaleva et al. 2019, §5; issue 34): the per-head cosine similarity of
two models' maps over a corpus, its mean per layer, its refusals and its analysis view."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest
import torch
import transformers

import attnscope
from attnscope.analyses.comparison import map_cosines
from attnscope.engine.results import AttentionResult
from attnscope.errors import InputError
from attnscope.files import STATIC

VOCAB = 30522
TEXTS = ["The keeper fed the lion before the storm.", "Paris is the capital of France.",
         "She read the book twice, then gave it away.", "Dogs bark."]


def small_bert(layers: int = 3) -> transformers.BertModel:
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                                     intermediate_size=37, max_position_embeddings=64)
    return transformers.BertModel(config).eval()


@pytest.fixture(scope="module")
def base_and_tuned(bert_tokenizer):
    """A model and a copy whose layer 1 queries were changed (as fine-tuning would): layer 0 reads the
    same input with the same weights, so its maps are equal; layer 1's are not."""
    base = small_bert()
    tuned = copy.deepcopy(base)
    with torch.no_grad():
        query = tuned.encoder.layer[1].attention.self.query
        query.weight.copy_(torch.randn(query.weight.shape, generator=torch.Generator().manual_seed(1)) * 2.0)
    return attnscope.load(base, bert_tokenizer, device="cpu"), attnscope.load(tuned, bert_tokenizer, device="cpu")


def test_a_model_and_its_copy_compare_head_by_head(base_and_tuned):
    base, tuned = base_and_tuned
    frame = attnscope.attention_similarity(base, tuned, TEXTS, progress=False)
    assert list(frame.columns) == ["layer", "head", "label", "measure", "value"]
    assert len(frame) == 3 * 4 and set(frame.measure) == {"cosine"}
    by_layer = attnscope.similarity_by_layer(frame)
    assert by_layer[0] == pytest.approx(1.0, abs=1e-9)  # before the changed layer: the same maps
    assert by_layer[1] < 0.95  # the changed queries move the heads of layer 1
    assert frame.attrs["attnscope"] == "attention_similarity" and frame.attrs["documents"] == len(TEXTS)
    # A model against itself is 1 everywhere.
    same = attnscope.attention_similarity(base, base, TEXTS, progress=False)
    assert same.value.to_numpy() == pytest.approx(1.0, abs=1e-9)


def test_each_head_is_the_mean_over_documents_of_its_maps_cosine(base_and_tuned):
    base, tuned = base_and_tuned
    frame = attnscope.attention_similarity(base, tuned, TEXTS, batch_size=3, progress=False)
    expected = torch.stack([map_cosines(base.run(t).attention, tuned.run(t).attention) for t in TEXTS]).mean(0)
    got = torch.tensor(frame.sort_values(["layer", "head"]).value.to_numpy()).view(3, 4)
    torch.testing.assert_close(got, expected.double(), rtol=0, atol=1e-6)
    # The direct formula, for one head: Σ a·b / (‖a‖‖b‖).
    a, b = base.run(TEXTS[0]).attention[1, 2].flatten(), tuned.run(TEXTS[0]).attention[1, 2].flatten()
    assert float(map_cosines(base.run(TEXTS[0]).attention, tuned.run(TEXTS[0]).attention)[1, 2]) == pytest.approx(
        float(a @ b / (a.norm() * b.norm())), abs=1e-6)


def test_models_that_cannot_be_compared_are_refused_by_name(base_and_tuned, bert_tokenizer):
    base, _ = base_and_tuned
    deeper = attnscope.load(small_bert(layers=4), bert_tokenizer, device="cpu")
    with pytest.raises(InputError, match="3 layers × 4 heads.*4 × 4"):
        attnscope.attention_similarity(base, deeper, TEXTS, progress=False)
    other_vocab = transformers.BertTokenizerFast(vocab_file=None, tokenizer_object=_tiny_tokenizer())
    stranger = attnscope.load(small_bert(), other_vocab, device="cpu")
    with pytest.raises(InputError, match="one tokenizer"):
        attnscope.attention_similarity(base, stranger, TEXTS, progress=False)
    with pytest.raises(InputError, match="second model.*attnscope.load"):
        attnscope.attention_similarity(base, "bert-base-uncased", TEXTS, progress=False)


def _tiny_tokenizer():
    """A WordPiece vocabulary trained here (another tokenizer than the embedded model's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordPieceTrainer(vocab_size=60, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer.train_from_iterator(TEXTS * 5, trainer)
    return tokenizer


def test_the_similarity_map_is_shown_in_the_analysis_view(base_and_tuned):
    base, tuned = base_and_tuned
    frame = attnscope.attention_similarity(base, tuned, TEXTS, progress=False)
    widget = attnscope.AttentionWidget(TEXTS[0], model=base)
    widget.show_analysis(frame)
    measures = widget.analysis["measures"]
    assert [m["key"] for m in measures] == ["cosine"]
    values = measures[0]["values"]  # layer by layer, head by head
    assert values == pytest.approx(frame.sort_values(["layer", "head"]).value.tolist(), abs=1e-6)
    assert values[:4] == pytest.approx([1.0] * 4, abs=1e-6)
    assert "Kovaleva" in widget.analysis["note"]
    # A fine-tuned copy loaded from the same files has its base's name (kovaleva.ipynb): "X and X" named nothing.
    assert base.name == tuned.name
    assert measures[0]["label"] == f"Cosine similarity of the maps: the first and the second model (both named {base.name})"


# The widget's compare mode: two models' runs of one text, either drawn, or their difference.


def layer_of(widget) -> torch.Tensor:
    from attnscope.serialize import decode

    return decode(widget.attention)


def test_the_widget_shows_either_model_or_their_difference_on_one_scale(base_and_tuned):
    base, tuned = base_and_tuned
    text = TEXTS[0]
    widget = attnscope.AttentionWidget(text, model=base, compare=tuned, layer=1)
    assert widget.compared_model == tuned.name and widget.compare_shown == "first"
    first, second = base.run(text).attention[1], tuned.run(text).attention[1]
    step = 1 / 255  # the layer payload's one-byte weights
    torch.testing.assert_close(layer_of(widget), first, rtol=0, atol=step)
    widget.compare_shown = "second"
    torch.testing.assert_close(layer_of(widget), second, rtol=0, atol=step)
    widget.compare_shown = "difference"
    difference = (tuned.run(text).attention - base.run(text).attention).abs()
    largest = float(difference.max())
    assert largest > 0.05  # the copy's changed layer draws lines
    # One scale for the whole run: every layer's weights are |difference| ÷ the run's largest.
    torch.testing.assert_close(layer_of(widget), difference[1] / largest, rtol=0, atol=step)
    assert widget.one_scale["largest"] == pytest.approx(largest, abs=1e-6)
    assert widget.model_name.startswith("|")
    widget.layer = 0  # before the changed layer: nothing differs
    assert float(layer_of(widget).max()) == 0.0
    # An edit reruns both models; the choice stays, on the new run's scale.
    widget.text = TEXTS[1]
    difference = (tuned.run(TEXTS[1]).attention - base.run(TEXTS[1]).attention).abs()
    torch.testing.assert_close(layer_of(widget), difference[0] / difference.max(), rtol=0, atol=step)
    assert widget.one_scale["largest"] == pytest.approx(float(difference.max()), abs=1e-6)
    assert widget.compare_shown == "difference"
    # The neuron view reads the shown model's queries and keys.
    widget.compare_shown = "second"
    assert torch.equal(widget.token_result.queries, tuned.run(TEXTS[1]).queries)


def test_compare_mode_refuses_what_it_cannot_show_and_keeps_the_view(base_and_tuned, bert_tokenizer):
    base, tuned = base_and_tuned
    widget = attnscope.AttentionWidget(TEXTS[0], model=base, compare=tuned, compare_shown="second", layer=2)
    shown = layer_of(widget)
    with pytest.raises(InputError, match="Masking heads while comparing"):
        widget.masked_heads = [[0, 1]]
    assert widget.masked_heads == [] and torch.equal(layer_of(widget), shown)
    with pytest.raises(InputError, match="compare=.*one tokenizer"):
        attnscope.AttentionWidget(TEXTS[0], model=base, compare=attnscope.load(small_bert(), transformers.BertTokenizerFast(
            tokenizer_object=_tiny_tokenizer()), device="cpu"))
    with pytest.raises(InputError, match="compare=.*4 × 4"):
        attnscope.AttentionWidget(TEXTS[0], model=base, compare=attnscope.load(small_bert(layers=4), bert_tokenizer, device="cpu"))
    alone = attnscope.AttentionWidget(TEXTS[0], model=base)
    with pytest.raises(InputError, match="needs a second model"):
        alone.compare_shown = "difference"
    assert alone.compare_shown == "first" and alone.compared_model == ""
    with pytest.raises(InputError, match="Comparing two models needs a model"):
        attnscope.AttentionWidget(result=base.run(TEXTS[0]), compare=tuned)


def test_a_page_write_of_the_compare_choice_is_checked_like_any_other(base_and_tuned):
    """The page is untrusted: a value outside the choices, or a choice without a second model, is
    refused with a visible message and the view stays."""
    base, tuned = base_and_tuned
    alone = attnscope.AttentionWidget(TEXTS[0], model=base)
    shown = layer_of(alone)
    alone.set_state({"compare_shown": "second"})
    assert alone.compare_shown == "first" and "needs a second model" in alone.error
    assert torch.equal(layer_of(alone), shown)
    pair = attnscope.AttentionWidget(TEXTS[0], model=base, compare=tuned)
    pair.set_state({"compare_shown": "both"})
    assert pair.compare_shown == "first" and "compare_shown" in pair.error


def test_each_view_says_which_model_it_shows(base_and_tuned):
    """The title names the model drawn (a copy of the same name: which one); the neuron view's
    answers name the model, so the page never shows one model's numbers under the other's; the
    neuron and rollout views, which follow one model, say so for the difference."""
    base, tuned = base_and_tuned
    widget = attnscope.AttentionWidget(TEXTS[0], model=base, compare=tuned, layer=1)
    assert base.name == tuned.name and widget.model_name == f"First model: {base.name}"
    first, _ = widget._answer_neuron({"layer": 1, "head": 0, "query": 2}, [])
    widget.compare_shown = "second"
    assert widget.model_name == f"Second model: {base.name}"
    second, _ = widget._answer_neuron({"layer": 1, "head": 0, "query": 2}, [])
    assert (first["shown"], second["shown"]) == ("first", "second")
    widget.compare_shown = "difference"
    assert "choose the first or the second model" in widget.neuron_unavailable
    widget.view = "rollout"
    assert "choose the first or the second model" in widget.rollout["error"]
    widget.compare_shown = "first"
    assert "error" not in widget.rollout and widget.rollout["shape"][0] == 3
    alone = attnscope.AttentionWidget(TEXTS[0], model=base)
    assert alone.model_name == base.name and alone._answer_neuron({"layer": 0, "head": 0, "query": 1}, [])[0]["shown"] == ""


# Issue 45 item 1: a difference is drawn on one scale for every layer and head, the run's largest
# change, which the views name; a head's own largest would make a change of 0.035 look as busy as
# one of 0.58.


def _run(attention: torch.Tensor, name: str) -> AttentionResult:
    n = attention.shape[-1]
    return AttentionResult(tokens=[f"t{i}" for i in range(n)], attention=attention, scaling=[1.0] * attention.shape[0],
                           causal=False, model_name=name, text="x", text_b=None)


def test_a_difference_is_scaled_once_for_the_whole_run_not_head_by_head():
    from attnscope.serialize import decode
    from attnscope.widget import payloads as pl

    first = torch.softmax(torch.randn(6, 2, 5, 5, generator=torch.Generator().manual_seed(0)), -1)
    second = first.clone()
    second[0, 0, 1, 2] += 0.035  # layer 0 head 0: a small change
    second[5, 0, 3, 4] -= 0.58  # layer 5 head 0: the run's largest
    second[2, 1, 0, 0] = float("nan")  # a broken head (the notice names it) sets no scale
    shown, scale = pl.displayed(_run(first, "base"), False, False, against=_run(second, "tuned"))
    assert scale == {"of": "|second − first|", "measure": "change", "largest": pytest.approx(0.58, abs=1e-6), "layer": 5, "head": 0}
    step = 1 / 255  # the payloads' one-byte weights
    thumbnails = decode(pl.thumbnails_payload(shown, None, None, 5))
    per_head = thumbnails.flatten(2).amax(-1)
    assert float(per_head[5, 0]) == pytest.approx(1.0, abs=step)
    # The small head's strongest line is 0.035 / 0.58 of the large one's, not as dark.
    assert float(per_head[0, 0] / per_head[5, 0]) == pytest.approx(0.035 / 0.58, abs=2 * step)
    assert float(decode(pl.layer_payload(shown, 0)).max()) == pytest.approx(0.035 / 0.58, abs=step)
    # Attention itself is sent as it is, with no scale.
    plain, none = pl.displayed(_run(first, "base"), False, False)
    assert none == {} and torch.equal(plain.attention, first)


def test_the_widget_names_its_differences_scale_and_its_model_view_shares_it(base_and_tuned):
    from attnscope.serialize import decode

    base, tuned = base_and_tuned
    widget = attnscope.AttentionWidget(TEXTS[0], model=base, compare=tuned, view="model")
    assert widget.one_scale == {}
    widget.compare_shown = "difference"
    difference = (tuned.run(TEXTS[0]).attention - base.run(TEXTS[0]).attention).abs()
    where = torch.unravel_index(difference.argmax(), difference.shape)
    assert widget.one_scale == {"of": "|second − first|", "measure": "change", "largest": pytest.approx(float(difference.max()), abs=1e-6),
                                       "layer": int(where[0]), "head": int(where[1])}
    per_head = decode(widget.thumbnails).flatten(2).amax(-1)
    expected = difference.flatten(2).amax(-1) / difference.max()
    torch.testing.assert_close(per_head, expected, rtol=0, atol=1 / 255)
    widget.compare_shown = "second"
    assert widget.one_scale == {}
    widget.close()


@pytest.mark.skipif(not (STATIC / "picture.js").is_file(), reason="JS bundle not built")
def test_the_saved_picture_of_a_difference_draws_every_head_on_its_one_scale_and_says_so(base_and_tuned):
    """The kernel's picture (the views' own scene code in QuickJS): each cell's strongest line is its
    head's largest change ÷ the run's largest, to within draw_lines' 32 opacity levels."""
    import xml.etree.ElementTree as ET

    from attnscope.widget.picture import picture_svg

    base, tuned = base_and_tuned
    widget = attnscope.AttentionWidget(TEXTS[0], model=base, compare=tuned, view="model", compare_shown="difference")
    svg, why = picture_svg(widget)
    assert why == "" and svg is not None
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    # The cells from the grid's labels: "Layer r" beside row r's middle, "Head h" over column h's.
    labels = {cls: [float(node.get("y" if cls == "row-label" else "x")) for node in root.iter(f"{ns}text")
                    if node.get("class") == cls] for cls in ("row-label", "col-label")}
    rows, cols = labels["row-label"], labels["col-label"]
    cell = cols[1] - cols[0]
    darkest: dict[tuple[int, int], float] = {}
    for path in root.iter(f"{ns}path"):
        for x, y in re.findall(r"M([\d.]+) ([\d.]+)", path.get("d")):
            at = (int((float(y) - rows[0] + cell / 2) // cell), int((float(x) - cols[0] + cell / 2) // cell))
            darkest[at] = max(darkest.get(at, 0.0), float(path.get("stroke-opacity")))
    difference = (tuned.run(TEXTS[0]).attention - base.run(TEXTS[0]).attention).abs()
    largest = float(difference.max())
    levels = 32
    for (layer, head), change in np.ndenumerate((difference.flatten(2).amax(-1) / largest).numpy()):
        expected = math.ceil(change * levels) / levels if change >= 1 / levels else 0.0
        assert darkest.get((layer, head), 0.0) == pytest.approx(expected, abs=1 / levels + 1e-9), (layer, head)
    # The view tells heads apart: some changed heads are drawn faint (each head's own scale drew them all full).
    assert max(darkest.values()) == 1.0 and any(0 < v < 0.75 for v in darkest.values())
    shown = " ".join(node.text or "" for node in root.iter(f"{ns}text"))
    assert "one scale for every layer and head" in shown and f"strongest line = {largest:.3f}" in shown
    assert "its head's largest" not in shown
    widget.close()
