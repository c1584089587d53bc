"""The analysis side of the widget: word-level toggle, rollout view, head masking, show_analysis."""

import json
import math
import re

import pytest
import torch
import transformers
from test_engine import SMALL, VOCAB
from test_page_input import page_writes

import attnscope
from attnscope import InputError
from attnscope.engine import formulas as an
from attnscope.serialize import decode

TEXT = "Tokenization is unbelievable."
CORPUS = ["The cat sat on the mat.", "Dogs bark, loudly.", "Attention is all you need."]


@pytest.fixture
def widget(default_model):
    return attnscope.AttentionWidget(TEXT, model=default_model)


def test_word_level_toggle_merges_pieces_and_back(widget):
    assert widget.tokens[1:3] == ["Token", "##ization"]
    token_payload = decode(widget.attention)
    widget.word_level = True
    assert widget.tokens[1] == "Tokenization" and len(widget.tokens) == 6
    merged = an.merge_words(widget.token_result.attention[0], widget.token_result.word_groups)
    assert torch.allclose(decode(widget.attention), merged, atol=1 / 255)
    assert widget.token_result.tokens[1:3] == ["token", "##ization"]  # the neuron view stays per token
    widget.word_level = False
    assert widget.tokens[1:3] == ["Token", "##ization"]
    assert torch.equal(decode(widget.attention), token_payload)


def test_rollout_is_sent_only_for_its_view(widget):
    assert widget.rollout == {}
    widget.view = "rollout"
    sent = decode(widget.rollout)
    assert sent.shape == (6, 7, 7) and widget.rollout["n_tokens"] == 7
    assert torch.allclose(sent, an.rollout(widget.result.attention), atol=1 / 255)
    widget.word_level = True  # recomputed for words
    assert decode(widget.rollout).shape == (6, 6, 6)
    widget.view = "head"
    widget.update("A new sentence here.")
    assert widget.rollout == {}


@pytest.mark.parametrize("bad, says", [
    ({"layer": 6}, "rollout_choice's layer=6 is too large: it must be at most 5"),
    ({"layer": "2"}, "rollout_choice's layer must be a whole number, not '2'"),
    ({"layer": True, "rows_to_1": True}, "rollout_choice's layer must be a whole number, not True"),
    ({"rows_to_1": "no"}, "rollout_choice's rows_to_1 must be True or False, not 'no'"),
    ({"rows": True}, "rollout_choice holds layer, leave_out_special, rows_to_1, not ['rows']"),
])
def test_a_rollout_choice_the_run_cannot_take_is_refused_and_changes_nothing(widget, bad, says):
    page_writes(widget, rollout_choice={"layer": 1})
    assert widget.rollout_choice == {"layer": 1} and widget.error == ""
    page_writes(widget, rollout_choice=bad)
    assert widget.rollout_choice == {"layer": 1} and says in widget.error
    with pytest.raises(InputError, match=re.escape(says)):
        widget.rollout_choice = bad


def test_a_page_value_equal_to_the_kernels_in_python_only_is_refused_not_stored_unchecked(widget):
    """{"layer": true} == {"layer": 1} in Python: traitlets stored it unchecked as no change, and
    the page then drew the last layer (true is no layer) while the kernel held layer 1."""
    page_writes(widget, rollout_choice={"layer": 1})
    sent = []
    widget.send_state = lambda key=None: sent.append(key)
    page_writes(widget, rollout_choice={"layer": True})
    assert repr(widget.rollout_choice) == "{'layer': 1}" and "true or false for a number in rollout_choice" in widget.error
    assert any("rollout_choice" in keys for keys in sent), "the page's copy is set back to the kernel's"
    page_writes(widget, rollout_choice={"layer": 1})  # the same value, of the same kinds: nothing to say
    assert widget.error == ""


def test_masking_reruns_summarises_and_shows_the_change(widget):
    plain = widget.result.attention.clone()
    widget.masked_heads = [[1, 3], [0, 0], [1, 3]]
    assert widget.masked_heads == [[0, 0], [1, 3]]  # sorted, duplicates dropped
    assert widget.result.masked_heads == [(0, 0), (1, 3)]
    assert torch.equal(widget.result.attention[0], plain[0])
    assert not torch.allclose(widget.result.attention[5], plain[5])
    assert widget.mask_summary.startswith("Masked 0-0, 1-3: attention changes from layer 1 on")

    widget.layer = 5
    widget.show_change = True
    change = (widget.token_result.attention - plain).abs()
    assert torch.allclose(decode(widget.attention), change[5] / change.max(), atol=1 / 255)
    assert decode(widget.attention).max() > 0.1  # visible lines, not a faint 1/255 residue

    widget.update("Masks stay on for a new sentence.")
    assert widget.result.masked_heads == [(0, 0), (1, 3)]
    widget.show_change = False
    widget.masked_heads = []
    assert widget.mask_summary == ""
    fresh = attnscope.AttentionWidget("Masks stay on for a new sentence.", model=widget.engine)
    assert torch.equal(widget.result.attention, fresh.result.attention)


def test_bad_mask_is_refused_and_the_view_is_kept(widget):
    before = widget.attention
    with pytest.raises(InputError, match="Cannot mask head"):
        widget.masked_heads = [[6, 0]]
    assert widget.masked_heads == [] and widget.attention is before


def test_show_analysis_head_stats_and_importance(widget):
    stats = attnscope.head_stats(widget.engine, CORPUS, progress=False)
    widget.show_analysis(stats, measure="sep")
    payload = widget.analysis
    assert widget.view == "analysis" and payload["kind"] == "head_stats" and payload["measure"] == "sep"
    sep = next(m for m in payload["measures"] if m["key"] == "sep")
    expected = stats[stats.measure == "sep"].sort_values(["layer", "head"]).value.tolist()
    assert sep["values"] == pytest.approx(expected) and sep["max"] == pytest.approx(max(expected))
    importance = attnscope.head_importance(widget.engine, CORPUS, progress=False)
    widget.show_analysis(importance)
    assert [m["key"] for m in widget.analysis["measures"]] == ["importance", "raw"]
    assert "in-batch contrastive" in widget.analysis["note"]
    normalised = importance[importance.measure == "importance"].sort_values(["layer", "head"])
    assert widget.analysis["measures"][0]["values"] == pytest.approx(normalised.value.tolist())
    with pytest.raises(InputError, match="measure='nope'"):
        widget.show_analysis(stats, measure="nope")
    with pytest.raises(InputError, match="show_analysis takes"):
        widget.show_analysis(stats.to_dict())


def test_the_readers_measure_is_the_widgets_and_is_pictured_and_saved(widget):
    """Issue 45: the heatmap's measure (and the scatter's colouring) the reader picks was the page's
    alone; the kernel's picture and the saved page drew the first. It is the widget's analysis_choice now."""
    import xml.etree.ElementTree as ET

    from attnscope.widget.export import page_state
    from attnscope.widget.picture import picture_svg

    def texts() -> list[str]:
        svg, why = picture_svg(widget)
        assert why == ""
        return [node.text for node in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]

    def title() -> str:
        return texts()[0]

    stats = attnscope.head_stats(widget.engine, CORPUS, progress=False)
    widget.show_analysis(stats)
    first, other = [m["label"] for m in widget.analysis["measures"][:2]]
    assert first in title()
    page_writes(widget, analysis_choice={"measure": widget.analysis["measures"][1]["key"]})
    assert widget.error == "" and widget.analysis_choice == {"measure": widget.analysis["measures"][1]["key"]}
    assert other in title() and first not in title()
    assert page_state(widget)["state"]["analysis_choice"] == widget.analysis_choice  # the saved page opens on it
    # The same analysis shown again (a cell run twice) keeps it; a measure named in the call wins.
    widget.show_analysis(stats)
    assert other in title()
    widget.show_analysis(stats, measure=widget.analysis["measures"][0]["key"])
    assert widget.analysis_choice == {} and first in title()
    # What the page may not choose: refused, naming it, and nothing changes.
    for bad, says in [({"measure": "nope"}, "measure must be one of this analysis's measures"),
                      ({"measure": 3}, "not 3"), ({"x": "sep"}, "holds a heatmap's measure, not ['x']")]:
        page_writes(widget, analysis_choice=bad)
        assert widget.analysis_choice == {} and says in widget.error, bad
        with pytest.raises(InputError, match=re.escape(says)):
            widget.analysis_choice = bad
    # An analysis without that measure drops it. The MDS scatter's choice is its colouring.
    widget.analysis_choice = {"measure": "sep"}
    widget.show_analysis(attnscope.head_importance(widget.engine, CORPUS, progress=False))
    assert widget.analysis_choice == {}
    widget.show_analysis(attnscope.head_distances(widget.engine, CORPUS, progress=False))
    assert "Layer 5" not in texts() and "previous token" in texts()  # coloured by behaviour
    page_writes(widget, analysis_choice={"color": "layer"})
    assert widget.error == "" and "Layer 5" in texts() and "previous token" not in texts()
    for bad, says in [({"measure": "sep"}, "holds the scatter's color, not ['measure']"),
                      ({"color": "heads"}, "color must be one of behaviour, layer, not 'heads'")]:
        with pytest.raises(InputError, match=re.escape(says)):
            widget.analysis_choice = bad


def test_show_analysis_refuses_another_models_table(widget, bert_tokenizer):
    small = attnscope.load(transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL)), bert_tokenizer)
    other = attnscope.AttentionWidget(TEXT, model=small)  # 3 layers × 4 heads
    stats = attnscope.head_stats(widget.engine, CORPUS, progress=False)  # 6 × 12
    with pytest.raises(InputError, match="analyse the same model"):
        other.show_analysis(stats)
    # The other way, a smaller model's heads fit the grid: refused all the same, naming both shapes.
    small_stats = attnscope.head_stats(small, CORPUS, progress=False)
    shown = widget.analysis
    with pytest.raises(InputError, match=r"model with 3 layers × 4 heads, and the widget's model has 6 × 12: analyse the same model"):
        widget.show_analysis(small_stats)
    finder = attnscope.head_finder(small, CORPUS[:2], progress=False)
    with pytest.raises(InputError, match=r"3 layers × 4 heads.*6 × 12"):
        widget.show_analysis(finder)
    assert widget.analysis == shown  # what was shown stays


def test_show_analysis_distances_brings_thumbnails_for_hover(widget):
    distances = attnscope.head_distances(widget.engine, CORPUS, progress=False)
    assert widget.thumbnails == {}
    widget.show_analysis(distances)
    assert len(widget.analysis["points"]) == 2 * 72 and len(widget.analysis["behaviours"]) == 72
    assert widget.thumbnails["shape"][:2] == [6, 12]


def test_show_analysis_syntax_heads_by_relation(widget):
    syntax = attnscope.syntax_heads(widget.engine, CORPUS, progress=False)
    widget.show_analysis(syntax)
    keys = [m["key"] for m in widget.analysis["measures"]]
    assert keys[0] == "All" and "det" in keys
    assert "machine parses" in widget.analysis["note"]


def test_saved_page_opens_on_the_rollout_with_its_data(widget):
    # It once fell back to the head view (its rollout tab hung); a page now opens as the widget stood.
    from attnscope.widget.export import page_state

    widget.view = "rollout"
    state = page_state(widget)["state"]
    n = len(widget.result.tokens)
    assert state["view"] == "rollout"
    layers = widget.result.n_layers
    assert state["rollout"]["shape"] == [layers, n, n] and len(state["rollout"]["data"]) == layers * n * n


def test_save_image_needs_a_displayed_view_and_a_known_format(widget, tmp_path):
    with pytest.raises(InputError, match=r"\.png or \.svg"):
        widget.save_image(tmp_path / "view.jpg")
    with pytest.raises(InputError, match="display it first"):
        widget.save_image(tmp_path / "view.png")
    widget._handle_custom_msg({"kind": "event", "type": "rendered"}, [])
    sent = []
    widget.send = lambda content, buffers=None: sent.append(content)
    request = widget.save_image(tmp_path / "view.svg")
    widget._handle_custom_msg({"kind": "reply", "type": "image", "id": sent[0]["id"], "error": "boom"}, [])
    assert request.error == "boom" and not request.done and not (tmp_path / "view.svg").exists()


def _strict_json(text):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def sinks_with_non_finite_values(widget):
    """attention_sinks of the widget's run with head 0-0's alpha_first +∞, 0-1's −∞ and 0-2's NaN
    (a half-precision overflow, a user's own column)."""
    frame = attnscope.attention_sinks(widget.result)
    frame.loc[0:2, "alpha_first"] = [math.inf, -math.inf, math.nan]
    return frame


def test_non_finite_analysis_values_are_valid_json_in_the_comm_and_in_a_saved_page(widget, tmp_path):
    widget.show_analysis(sinks_with_non_finite_values(widget))
    # The trait as ipywidgets sends it (jupyter_client packs messages with allow_nan=False).
    sent = _strict_json(json.dumps(widget.analysis, allow_nan=False))
    alpha = sent["measures"][0]
    assert alpha["key"] == "alpha_first" and alpha["values"][:3] == ["inf", "-inf", None]
    assert alpha["max"] == max(v for v in alpha["values"] if isinstance(v, float))  # the scale ignores ±∞
    # The saved page's data, read as JSON.parse reads it (Python wrote `Infinity`, which it refuses).
    page = widget.save_html(tmp_path / "sinks.html").read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="attnscope-data-\w+">(.*?)</script>', page, re.S).group(1)
    saved = _strict_json(data)["json"]["state"]["analysis"]
    assert saved["measures"][0]["values"][:3] == ["inf", "-inf", None]


def test_any_non_finite_number_in_a_page_is_written_as_null():
    from attnscope.widget.export import script_safe_json

    value = {"a": [1.5, math.nan, {"b": -math.inf}], "c": (math.inf, "text"), "d": 2}
    assert _strict_json(script_safe_json(value)) == {"a": [1.5, None, {"b": None}], "c": [None, "text"], "d": 2}


def test_an_analysis_that_is_not_numbers_or_has_no_place_for_a_head_is_refused(widget):
    frame = attnscope.attention_sinks(widget.result)
    frame["alpha_first"] = frame["alpha_first"].astype(object)
    frame.loc[3, "alpha_first"] = "high"
    with pytest.raises(InputError, match=r"This analysis's 'alpha_first' column holds 'high' for layer 0, head 3, not a number"):
        widget.show_analysis(frame)
    distances = attnscope.head_distances(widget.engine, CORPUS, progress=False)
    distances.loc[5, "x"] = math.nan
    with pytest.raises(InputError, match=r"This head_distances layout has NaN or infinite coordinates"):
        widget.show_analysis(distances)
