"""A long run's text and map views in chromium, live through the harness, their requests answered
by the widget's own handlers as the kernel would (issue 30, item 10): the running text reads
"près de Zürich", not "prè↑s de Zü↑rich", and the map's hover card follows a wheel zoom."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import transformers
from test_head_view_browser import BUNDLE
from test_saved_state import answer_as_the_kernel

import attnscope

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from small_models import SHAPE, TEXT, scaled_up  # noqa: E402
from test_token_labels import CONTINUATION, byte_level_bpe  # noqa: E402

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

# è and ü are two byte tokens each in this vocabulary; 347 tokens, more than the map's 256 overview blocks.
LONG = "Il habite près de Zürich. " + TEXT * 4


@pytest.fixture(scope="module")
def engine():
    model = scaled_up(transformers.Qwen2Model(transformers.Qwen2Config(vocab_size=320, **SHAPE)))
    return attnscope.load(model, byte_level_bpe(), device="cpu")


@pytest.fixture
def live(open_widget):
    return lambda widget: open_widget(widget, width=1400, height=1000)


def requests_sent(page) -> int:
    return page.evaluate("window.attnscopeHarness.model.sentMessages.filter((m) => m.kind === 'request').length")


def answer_next(page, widget, sent_before: int) -> None:
    """Waits for a request after the first `sent_before`, then answers the latest as the kernel."""
    page.wait_for_function(f"window.attnscopeHarness.model.sentMessages.filter((m) => m.kind === 'request').length > {sent_before}")
    answer_as_the_kernel(page, widget)


def test_the_running_text_reads_a_split_character_once_and_each_of_its_tokens_stays_selectable(live, engine):
    widget = attnscope.AttentionWidget(LONG, model=engine, attention="on_demand", view="text")
    e = widget.tokens.index("è")
    assert widget.tokens[e + 1] == CONTINUATION  # the case: è's second byte is a token of its own
    page = live(widget)
    answer_next(page, widget, 0)
    flow = ".attnscope-text-flow"
    page.wait_for_function(f"document.querySelector('{flow}').dataset.shading === 'done'")
    shown = page.text_content(flow)
    assert shown.startswith("Il habite près de Zürich.") and CONTINUATION not in shown, shown[:60]
    # è selects its first token; clicked again, its second; the outline stays on è.
    selected = f"{flow} .attnscope-selected"
    for expected in (e, e + 1):
        sent = requests_sent(page)
        page.click(f"{flow} .attnscope-text-token[data-index='{e}']")
        assert page.evaluate("window.attnscopeHarness.model.saved.at(-1).focus_token") == expected
        answer_next(page, widget, sent)
        page.wait_for_function(f"document.querySelector('.attnscope-text-caption').textContent.includes('(token {expected})')")
        assert page.eval_on_selector_all(selected, "s => s.map(x => [x.dataset.index, x.textContent])") == [[str(e), "è"]]
    assert page.get_attribute(f"{flow} [aria-selected='true']", "data-index") == str(e + 1)
    assert "bytes" in page.text_content(".attnscope-text-caption")  # the caption names what the token holds
    assert not page.problems, page.problems


def test_the_maps_hover_card_follows_a_wheel_zoom(live, engine):
    widget = attnscope.AttentionWidget(LONG, model=engine, attention="on_demand", view="map")
    n = len(widget.tokens)
    assert n > 256  # the whole map is pooled blocks; zoomed in, exact pairs
    page = live(widget)
    answer_next(page, widget, 0)
    canvas = "canvas.attnscope-map"
    page.wait_for_function(f"document.querySelector('{canvas}')?.dataset.region === '0,{n},0,{n}'")
    box = page.locator(canvas).bounding_box()
    x, y = box["x"] + 96 + 150, box["y"] + 84 + 200  # inside the map (its margins: 96 left, 84 top)
    page.mouse.move(x, y)
    card = ".attnscope-map-view .attnscope-tooltip"
    page.wait_for_selector(f"{card}:not([hidden])")
    assert page.text_content(card).startswith("around ")  # a block of the overview
    sent = requests_sent(page)
    for _ in range(6):
        page.mouse.wheel(0, -400)
        page.wait_for_timeout(30)
    page.wait_for_timeout(500)  # the wheel at rest (a slow machine may have asked for a region on the way)
    answer_next(page, widget, sent)  # the region it rests on
    page.wait_for_function(f"document.querySelector('{canvas}').dataset.exact === 'true'")
    after_zoom = page.text_content(card)
    # The pointer has not moved: the card says what is under it now, as a move there would.
    page.mouse.move(x + 1, y)
    page.mouse.move(x, y)
    assert page.text_content(card) == after_zoom
    assert not after_zoom.startswith("around "), after_zoom  # an exact pair now, not the old block
    assert not page.problems, page.problems
