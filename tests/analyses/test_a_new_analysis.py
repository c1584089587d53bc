"""Adding an analysis is one module (issue 33): this file's first half is such a module, written
as src/attnscope/analyses/<name>.py would be (its partial, whose results merge, its DataFrame and
its conversion for the analysis view), and the widget shows it with nothing else changed, in the
layout it declares (the heatmap by default). An analysis with a layout of its own adds one JS module,
js/views/<layout>_layout.js: tests/browser/test_a_new_layout.py builds one and sees it in the live widget,
the saved page and the picture."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest
import torch

import attnscope
from attnscope.analyses.corpus import Documents, iter_attention
from attnscope.analyses.runner import heads_analysis
from attnscope.analyses.tables import Grid, HeadSums, analysis_view

# ---- the module -------------------------------------------------------------------------------


@dataclass
class FirstTokenPartial:
    sums: HeadSums
    documents: int

    def merge(self, other: FirstTokenPartial) -> FirstTokenPartial:
        return FirstTokenPartial(self.sums.merge(other.sums), self.documents + other.documents)


def first_token_partial(model, docs: Documents, *, max_length: int, batch_size: int, progress: bool) -> FirstTokenPartial:
    """Per head, the mean attention on each document's first token."""
    sums = HeadSums()
    for doc in iter_attention(model, docs, max_length=max_length, batch_size=batch_size, desc="first token", progress=progress):
        sums.add({"first_token": doc.attention[..., 0].mean(-1)})
    return FirstTokenPartial(sums, len(docs))


def first_token(model, corpus, *, max_length=None, batch_size="auto", progress=False, backend="local") -> pd.DataFrame:
    return heads_analysis("first_token", first_token_partial, model, corpus, max_length=max_length, batch_size=batch_size,
                          progress=progress, backend=backend)


@analysis_view("first_token")
def first_token_view(data: pd.DataFrame, grid: Grid) -> dict:
    return {"measures": [{"key": "first_token", "label": "Attention on the first token", "values": grid(data, "value")}],
            "note": f"Over {data.attrs['documents']} documents."}


# ---- the tests --------------------------------------------------------------------------------

TEXTS = ["The cat sat on the mat.", "A dog barked twice.", "Rain fell all day in Zürich."]


def test_a_new_analysis_module_is_shown_in_the_analysis_view_with_nothing_else_changed(default_model):
    frame = first_token(default_model, TEXTS, batch_size=2)
    expected = torch.stack([default_model.run(text).attention[..., 0].mean(-1) for text in TEXTS]).mean(0)
    assert list(frame.columns) == ["layer", "head", "label", "measure", "value"]
    assert torch.allclose(torch.tensor(frame.value.to_numpy()).view_as(expected).float(), expected, atol=1e-5)
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model).show_analysis(frame)
    assert widget.view == "analysis" and widget.analysis["kind"] == "first_token"
    assert widget.analysis["layout"] == "heatmap"  # what it declares: @analysis_view's default
    (measure,) = widget.analysis["measures"]
    assert measure["key"] == "first_token" and widget.analysis["note"] == "Over 3 documents."
    assert measure["values"] == pytest.approx(expected.flatten().tolist(), abs=1e-5)


def test_what_the_analysis_view_does_not_know_is_refused_naming_what_it_shows(default_model):
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model)
    frame = pd.DataFrame({"layer": [0], "head": [0], "value": [1.0]})
    with pytest.raises(attnscope.InputError, match=r"show_analysis takes what attnscope\.[a-z_, ]*head_stats, .*first_token"):
        widget.show_analysis(frame)
