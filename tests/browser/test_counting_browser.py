"""Layers and heads are counted from 0 in the views, as the Python API counts them (issue 30 item 6):
`AttentionWidget(text, layer=2)` opens "Layer 2", and BertViz's head_view(layer=2, heads=[0])
shows layer 2 and head 0, live, in a saved page and in the kernel's picture."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import torch
from test_export_geometry import exported
from test_head_view_browser import BUNDLE

import attnscope
from attnscope.widget.picture import picture_svg

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

TEXT = "The cat sat on the mat."
HEAD_READY = "Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0"
SHOWN = """() => ({
  layer: document.querySelector('select.attnscope-layer').selectedOptions[0].textContent,
  layerTip: document.querySelector('select.attnscope-layer').closest('label').title,
  on: [...document.querySelectorAll('.attnscope-swatch[aria-pressed="true"]')].map((s) => [s.textContent, s.title]),
  swatches: [...document.querySelectorAll('.attnscope-swatch')].map((s) => s.textContent),
})"""


def svg_texts(svg: str) -> list[str]:
    return [node.text or "" for node in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]


def test_a_widget_opened_on_layer_2_shows_layer_2(open_widget, default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, layer=2, heads=[0, 11])
    page = open_widget(widget)
    page.wait_for_function(HEAD_READY)
    shown = page.evaluate(SHOWN)
    assert shown["layer"] == "2" and "counted from 0" in shown["layerTip"]
    assert shown["swatches"] == [str(h) for h in range(12)]
    assert [text for text, _ in shown["on"]] == ["0", "11"] and shown["on"][1][1].startswith("Head 11:")
    image = svg_texts(exported(page, "svg", 7).decode("utf-8"))
    assert image[0] == "all-MiniLM-L6-v2 (embedded) · layer 2" and {"0", "11"} <= set(image)
    assert "all-MiniLM-L6-v2 (embedded) · layer 2" in svg_texts(picture_svg(widget)[0])  # the kernel's picture
    assert not page.problems, page.problems
    widget.close()


def bertviz_attention(model):
    result = model.run(TEXT)
    return tuple(layer.unsqueeze(0) for layer in result.attention.float()), list(result.tokens)


def test_bertviz_head_view_layer_2_head_0_shows_layer_2_head_0(open_widget, default_model, watched_page, tmp_path):
    attention, tokens = bertviz_attention(default_model)
    assert all(isinstance(a, torch.Tensor) for a in attention)
    widget = attnscope.head_view(attention, tokens, layer=2, heads=[0])
    page = open_widget(widget)
    page.wait_for_function(HEAD_READY)
    shown = page.evaluate(SHOWN)
    assert shown["layer"] == "2" and shown["on"] == [["0", "Head 0: click to toggle, double-click to show it alone"]]
    assert not page.problems, page.problems
    widget.close()
    # BertViz's html_action="return": the saved page says the same.
    path = tmp_path / "head_view.html"
    path.write_text(attnscope.head_view(attention, tokens, layer=2, heads=[0], html_action="return").data, encoding="utf-8")
    saved = watched_page(viewport={"width": 1100, "height": 900})
    saved.goto(path.as_uri())
    saved.wait_for_function(HEAD_READY)
    shown = saved.evaluate(SHOWN)
    assert shown["layer"] == "2" and [text for text, _ in shown["on"]] == ["0"]
    assert not saved.problems, saved.problems
