"""Layers and heads are counted from 0 everywhere: the API, the DataFrames, messages and the views
(issue 30 item 6). The views' side is js/drawing/labels.js, checked against the same examples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import attnscope
from attnscope.engine.nonfinite import nonfinite_message
from attnscope.errors import InputError
from attnscope.labels import EXAMPLES, head_label, head_name, label_examples

ROOT = Path(__file__).resolve().parents[2]


def test_a_head_is_named_as_the_python_api_counts_it():
    assert head_label(7, 9) == "7-9"  # Clark et al.'s 8-10
    assert head_name(0, 11) == "layer 0, head 11"


def test_the_views_get_the_same_names_through_the_contract():
    text = (ROOT / "js" / "transport" / "contract.js").read_text(encoding="utf-8")
    rows = json.loads(re.search(r"export const HEAD_LABEL_EXAMPLES = (\[.*?\]);", text, re.S).group(1).replace(",\n]", "\n]"))
    assert rows == label_examples() and len(rows) == len(EXAMPLES)  # js/drawing/labels.test.js checks labels.js against them


def test_the_nan_message_names_heads_as_the_api_counts_them():
    message = nonfinite_message([(1, 0), (2, 0)], 12)
    assert "(layer-head): 1-0, 2-0." in message and "1-based" not in message


def test_an_analysis_of_another_model_names_the_head_it_does_not_have(default_model):
    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)  # 6 layers × 12 heads
    stats = pd.DataFrame({"layer": [6], "head": [0], "label": ["6-0"], "measure": ["sep"], "value": [0.5]})
    stats.attrs["attnscope"] = "head_stats"
    with pytest.raises(InputError, match=r"has layer 6, head 0, but the widget's model has 6 layers × 12 heads "
                                         r"\(layers 0\.\.5, heads 0\.\.11\)"):
        widget.show_analysis(stats)
    widget.close()


def test_range_errors_give_the_range_counted_from_0(default_model):
    with pytest.raises(InputError, match=r"layer=6 is out of range: the model has layers 0\.\.5\."):
        attnscope.AttentionWidget("The cat sat.", model=default_model, layer=6)
    with pytest.raises(InputError, match=r"heads \[12\] are out of range: the model has heads 0\.\.11\."):
        attnscope.AttentionWidget("The cat sat.", model=default_model, heads=[12])


def test_the_mask_summary_counts_layers_as_the_api_does(default_model):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model, masked_heads=[(2, 5)])
    # Layers 0-2 compute their attention before head 2-5's output is used: layer 3 is the first to change.
    assert widget.mask_summary.startswith("Masked 2-5: attention changes from layer 3 on;"), widget.mask_summary
    widget.close()
