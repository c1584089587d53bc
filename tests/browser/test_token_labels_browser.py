"""A byte-level BPE model's tokens read as the text in the head view and in its SVG (issue 19):
"café" and an emoji, not "cafÃ©" and "ðŁĻĤ"; a split character's other tokens are marked and
name its bytes on hover."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
import torch
import transformers

import attnscope

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")
sys.path.insert(0, str(ROOT / "tests"))
from real_widget import answer_neuron_request, wire  # noqa: E402
from test_token_labels import CONTINUATION, byte_level_bpe  # noqa: E402


def test_cafe_and_an_emoji_read_as_written_on_screen_and_in_the_svg(watched_page, tmp_path):
    tokenizer = byte_level_bpe()
    torch.manual_seed(0)
    model = transformers.GPT2Model(transformers.GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=64))
    widget = attnscope.AttentionWidget("The café 🙂 is naïve.", model=attnscope.load(model.eval(), tokenizer, device="cpu"))
    path = widget.save_html(tmp_path / "bytes.html")
    page = watched_page(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    page.goto(path.as_uri())
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    shown = page.eval_on_selector_all(".attnscope-left .attnscope-token-text", "ts => ts.map(t => [t.textContent, t.title])")
    labels = [text for text, _ in shown]
    assert " café" in labels and "🙂" in labels and " naïve" in labels, labels
    assert not any("Ã" in label or "ð" in label for label in labels), labels
    marks = [title for text, title in shown if text == CONTINUATION]
    assert marks and all("of “🙂”" in title and "bytes" in title for title in marks), shown

    with page.expect_download(timeout=15000) as download:
        page.click("button.attnscope-export-button[data-format='svg']")
    root = ElementTree.fromstring(open(download.value.path(), "rb").read())
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert " café" in texts and "🙂" in texts, texts
    assert not page.problems, page.problems


def test_an_emoji_typed_into_the_sentence_shows_the_text_its_unk_stands_for(open_widget, default_model):
    """Issue 30: typed into the sentence, an emoji became "[UNK]" with no hint of the text it
    replaced. Each [UNK] names its text on hover (and is marked as having a note), in the head
    view's columns and the neuron view's, beside accents and CJK."""
    from test_token_labels import UNKNOWN

    widget = attnscope.AttentionWidget("The cat sat.", model=default_model)
    page = open_widget(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    sentence = page.locator("input.attnscope-text").first
    sentence.fill(UNKNOWN)
    sentence.press("Enter")
    page.wait_for_function("t => window.attnscopeHarness.model.saved.some((s) => s.request?.text === t)", arg=UNKNOWN)
    widget.request = page.evaluate("() => window.attnscopeHarness.model.saved.at(-1).request")  # the kernel reruns
    assert widget.error == "" and widget.text == UNKNOWN
    page.evaluate("s => window.attnscopeHarness.model.emit(window.attnscopeHarness.fromWire(s))",
                  {name: wire(getattr(widget, name)) for name in ("tokens", "token_notes", "attention", "text", "result_id")})
    page.wait_for_function("n => document.querySelectorAll('.attnscope-left .attnscope-token-text').length === n",
                           arg=len(widget.tokens))
    stood_for = ["🍕", "寿", "caf🍕e", "🙂🙂", "☕"]
    for side in ("left", "right"):
        shown = page.eval_on_selector_all(
            f".attnscope-head-view .attnscope-{side} .attnscope-token-text",
            "ts => ts.map(t => [t.textContent, t.title, getComputedStyle(t).textDecorationStyle])")
        assert [(text, title) for text, title, _ in shown if text == "[UNK]"] == \
            [("[UNK]", f"stands for “{text}” in the text") for text in stood_for], shown
        assert all(style == "dotted" for _, title, style in shown if title), shown
        assert "Zu\u0308rich" in [text for text, _, _ in shown] and "寿" not in [text for text, _, _ in shown]
    page.evaluate("() => window.attnscopeHarness.model.emit({view: 'neuron'})")
    answer_neuron_request(page, widget)
    titles = page.eval_on_selector_all(".attnscope-neuron-queries .attnscope-token-text", "ts => ts.map(t => t.title)")
    assert [t for t in titles if t] == [f"stands for “{text}” in the text" for text in stood_for]
    assert not page.problems, page.problems
