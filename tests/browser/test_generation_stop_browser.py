"""A generation's page in chromium (issue 48): it says when its first whole drawing is on screen
("painted", the kernel's cue for the first new token); and its Stop says how many new tokens it
showed when pressed, the kernel keeps those, dropping the steps it made while the click
travelled, so the text stays as the reader saw it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from real_widget import answer_request, emit, gated_generate, wire
from test_head_view_browser import BUNDLE

from attnscope.widget.contract import contract_traits

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_generation_page import seeded_engine  # noqa: E402
from test_generation_widget import PROMPT  # noqa: E402

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

SHOWN = 3  # steps the page draws before its reader presses Stop
IN_FLIGHT = 2  # steps the kernel makes meanwhile, whose messages have not reached the page


def test_stop_keeps_the_tokens_the_page_showed_not_those_made_while_the_click_travelled(page, monkeypatch):
    generation = gated_generate(monkeypatch, PROMPT, model=seeded_engine(), max_new_tokens=40, chat=False)
    widget, sent = generation.widget, generation.sent

    def flow_count() -> int:
        return page.evaluate("document.querySelectorAll('#host .attnscope-text-flow [data-index]').length")

    try:
        state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
        assert page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state) == "function"
        n_prompt = len(widget.tokens)
        for _ in range(SHOWN):  # drawn in the page
            emit(page, generation.step())
        page.wait_for_function(f"document.querySelectorAll('#host .attnscope-text-flow [data-index]').length === {n_prompt + SHOWN}")
        forwarded = len(sent)
        for _ in range(IN_FLIGHT):  # made in the kernel, their messages still on the way
            generation.step()
        assert widget.generation.steps == SHOWN + IN_FLIGHT
        page.click("#host .attnscope-stop")
        stop = page.evaluate("window.attnscopeHarness.model.sentMessages.findLast((m) => m.type === 'stop')")
        assert stop == {"kind": "event", "type": "stop", "shown": SHOWN}
        widget._handle_custom_msg(stop, [])
        generation.gate.release()  # the step that sees the stop
        generation.gate.release()
        run = widget.wait(timeout=60)
        assert (run.finish, run.steps) == ("stopped", SHOWN) and len(widget.tokens) == n_prompt + SHOWN
        # The page gets the rest in order: the steps in flight, then the stopped run cut back, and the
        # end's lists whole, as the reader saw them.
        in_flight = 0
        for message in sent[forwarded:]:
            emit(page, message)
            if page.evaluate("window.attnscopeHarness.model.get('generating')"):
                in_flight += 1
                # A step in flight is not drawn, even for a moment: the text stays as the reader saw it.
                page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
                assert flow_count() == n_prompt + SHOWN
        assert in_flight >= IN_FLIGHT
        page.wait_for_function("document.querySelector('#host .attnscope-stop').hidden")
        assert flow_count() == n_prompt + SHOWN
        assert page.eval_on_selector_all("#host .attnscope-text-flow [data-index]", "s => s.map((x) => x.textContent)") \
            == list(widget.token_reading)
        notice = page.eval_on_selector("#host .attnscope-notice", "n => n.textContent")
        assert notice.startswith(f"Generated greedily: {SHOWN} new tokens of at most 40, stopped.")
    finally:
        for _ in range(8):
            generation.gate.release()
        widget.close()


def test_painted_is_said_once_the_selected_row_is_shaded_not_at_the_first_drawing(page, monkeypatch):
    """Said at the first drawing ("computing…"), the first new token came while the row's answer
    was being shaded: at 8,160 tokens its trip and drawing took 51 + 52 ms, a step's 1 + 14 ms."""
    generation = gated_generate(monkeypatch, PROMPT, model=seeded_engine(), max_new_tokens=4, chat=False)
    widget = generation.widget
    painted = "window.attnscopeHarness.model.sentMessages.filter((m) => m.type === 'painted').length"
    try:
        state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
        assert page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state) == "function"
        page.wait_for_function("window.attnscopeHarness.model.sentMessages.some((m) => m.type === 'attention_rows')")
        for _ in range(3):  # frames drawn while the row is on its way
            page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert page.evaluate(painted) == 0
        answer_request(page, widget, "attention_rows")
        page.wait_for_function(f"{painted} === 1")
        page.wait_for_function("!document.querySelector('#host .attnscope-text-flow').classList.contains('attnscope-stale')")
        # Each step says "computing…" until its row comes, and Stop goes when the run ends, each in
        # room kept for it: the header does not reflow as the run steps and ends (a long title
        # wrapped and unwrapped, the whole view jumping a line).
        header = """(() => { const q = (s) => document.querySelector('#host ' + s).getBoundingClientRect();
            return [document.querySelector('#host .attnscope-status').textContent, q('.attnscope-status').width,
                    q('.attnscope-stop').width, q('.attnscope-header').height]; })()"""
        idle = page.evaluate(header)
        sent = len(generation.sent)
        emit(page, generation.step())
        busy = page.evaluate(header)
        assert (idle[0], busy[0]) == ("", "computing…") and idle[1:] == busy[1:] and min(idle[1:]) > 0
        for _ in range(8):
            generation.gate.release()
        widget.wait(timeout=60)
        for message in generation.sent[sent + 1:]:
            emit(page, message)
        page.wait_for_function("document.querySelector('#host .attnscope-stop').hidden")
        assert page.evaluate(header)[1:] == idle[1:]
    finally:
        for _ in range(8):
            generation.gate.release()
        widget.close()
