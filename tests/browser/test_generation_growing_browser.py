"""A generation's steps in chromium (issue 48, the per-step message): each step's message carries
what it changed of the token lists, not the lists, and the text view shows every token as the
kernel has it; a second view opened while the model writes asks for the lists once and then grows
with the first; the run's end sends them whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from real_widget import answer_request, emit, gated_generate, wire
from test_head_view_browser import BUNDLE

from attnscope.widget.contract import GROWING, contract_traits

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_generation_page import seeded_engine  # noqa: E402
from test_generation_widget import PROMPT  # noqa: E402

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

STEPS = 6
SECOND_VIEW_AT = 3  # steps shown when the second view opens


def shown(page, box: str) -> list[str]:
    """The tokens a view's text flow shows, as read (the text view's spans, in order)."""
    return page.eval_on_selector_all(f"{box} .attnscope-text-flow [data-index]", "spans => spans.map((s) => s.textContent)")


def test_each_step_grows_the_pages_lists_and_a_view_opened_mid_way_catches_up(page, monkeypatch):
    generation = gated_generate(monkeypatch, PROMPT, model=seeded_engine(), max_new_tokens=STEPS, chat=False)
    widget, sent = generation.widget, generation.sent

    try:
        state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
        assert page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state) == "function"
        prompt = list(widget.token_reading)
        page.wait_for_function(f"document.querySelectorAll('#host .attnscope-text-flow [data-index]').length === {len(prompt)}")
        for step in range(1, STEPS + 1):
            message = generation.step()  # a step is one message (after the last, the run's end sends its own)
            assert message["grown"]
            assert not set(GROWING) & set(message), "a step sends what it changed, not the lists"
            emit(page, message)
            expected = list(widget.token_reading)
            assert len(expected) == len(prompt) + step
            page.wait_for_function(f"document.querySelectorAll('#host .attnscope-text-flow [data-index]').length === {len(expected)}")
            assert shown(page, "#host") == expected
            if step == SECOND_VIEW_AT:
                # The model's lists are still the prompt's: the new view asks for them, once.
                assert page.evaluate("window.attnscopeHarness.renderAgain()") == "function"
                request = answer_request(page, widget, "growing_lists", where="true")
                assert request["type"] == "growing_lists"
                page.wait_for_function(f"document.querySelectorAll('#host-1 .attnscope-text-flow [data-index]').length === {len(expected)}")
                assert shown(page, "#host-1") == expected
            elif step > SECOND_VIEW_AT:
                page.wait_for_function(f"document.querySelectorAll('#host-1 .attnscope-text-flow [data-index]').length === {len(expected)}")
                assert shown(page, "#host-1") == expected
        widget.wait(timeout=60)
        # The end: `grown` emptied, then the lists whole with the Analysis tab's table (steps leave
        # it behind while the tab is closed); both views keep every token.
        for message in sent[-2:]:
            emit(page, message)
        assert sent[-1] == {**{name: getattr(widget, name) for name in GROWING}, "analysis": widget.analysis}
        for box in ("#host", "#host-1"):
            assert shown(page, box) == list(widget.token_reading)
        requests = page.evaluate("window.attnscopeHarness.model.sentMessages.filter((m) => m.kind === 'request')")
        assert [r["type"] for r in requests].count("growing_lists") == 1
        # Both views hear every reply: their requests' ids are the page's, never the same twice.
        assert len({r["id"] for r in requests}) == len(requests)
    finally:
        for _ in range(STEPS):
            generation.gate.release()
        widget.close()
