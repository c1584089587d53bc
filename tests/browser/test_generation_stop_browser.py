"""A generation's Stop in chromium (issue 48): the page says how many new tokens it showed when
Stop was pressed, and the kernel keeps those, dropping the steps it made while the click
travelled, so the text stays as the reader saw it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from real_widget import wire
from test_head_view_browser import BUNDLE

import attnscope
from attnscope.widget import generation_widget
from attnscope.widget.contract import contract_traits

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_generation_page import seeded_engine  # noqa: E402
from test_generation_widget import PROMPT  # noqa: E402

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

SHOWN = 3  # steps the page draws before its reader presses Stop
IN_FLIGHT = 2  # steps the kernel makes meanwhile, whose messages have not reached the page


def test_stop_keeps_the_tokens_the_page_showed_not_those_made_while_the_click_travelled(page, monkeypatch):
    gate = threading.Semaphore(0)  # a step is computed, then waits here until the test lets it out
    original = generation_widget.generation_steps

    def gated(*args, **kwargs):
        steps = original(*args, **kwargs)
        yield next(steps)  # the prompt's pass, in generate() itself
        for run in steps:
            if not gate.acquire(timeout=60):
                return
            yield run

    monkeypatch.setattr(generation_widget, "generation_steps", gated)
    widget = attnscope.generate(PROMPT, model=seeded_engine(), max_new_tokens=40, chat=False)
    sent, arrived = [], threading.Event()

    def send(msg, buffers=None):
        if msg.get("method") == "update":
            sent.append(msg["state"])
            arrived.set()

    def flow_count() -> int:
        return page.evaluate("document.querySelectorAll('#host .attnscope-text-flow [data-index]').length")

    try:
        widget._send = send
        state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
        assert page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state) == "function"
        n_prompt = len(widget.tokens)
        for _ in range(SHOWN):  # drawn in the page
            arrived.clear()
            before = len(sent)
            gate.release()
            assert arrived.wait(60)
            page.evaluate("m => window.attnscopeHarness.model.emit(window.attnscopeHarness.fromWire(m))", wire(sent[before]))
        page.wait_for_function(f"document.querySelectorAll('#host .attnscope-text-flow [data-index]').length === {n_prompt + SHOWN}")
        forwarded = len(sent)
        for _ in range(IN_FLIGHT):  # made in the kernel, their messages still on the way
            arrived.clear()
            gate.release()
            assert arrived.wait(60)
        assert widget.generation.steps == SHOWN + IN_FLIGHT
        page.click("#host .attnscope-stop")
        stop = page.evaluate("window.attnscopeHarness.model.sentMessages.findLast((m) => m.type === 'stop')")
        assert stop == {"kind": "event", "type": "stop", "shown": SHOWN}
        widget._handle_custom_msg(stop, [])
        gate.release()  # the step that sees the stop
        gate.release()
        run = widget.wait(timeout=60)
        assert (run.finish, run.steps) == ("stopped", SHOWN) and len(widget.tokens) == n_prompt + SHOWN
        # The page gets the rest in order: the steps in flight, then the stopped run cut back, and the
        # end's lists whole, as the reader saw them.
        for message in sent[forwarded:]:
            page.evaluate("m => window.attnscopeHarness.model.emit(window.attnscopeHarness.fromWire(m))", wire(message))
        page.wait_for_function("document.querySelector('#host .attnscope-stop').hidden")
        assert flow_count() == n_prompt + SHOWN
        assert page.eval_on_selector_all("#host .attnscope-text-flow [data-index]", "s => s.map((x) => x.textContent)") \
            == list(widget.token_reading)
        notice = page.eval_on_selector("#host .attnscope-notice", "n => n.textContent")
        assert notice.startswith(f"Generated greedily: {SHOWN} new tokens of at most 40, stopped.")
    finally:
        for _ in range(8):
            gate.release()
        widget.close()
