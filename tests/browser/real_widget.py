"""A real widget's state in the harness page (harness.html), and the kernel's answers to its
requests, for browser tests that drive the built bundle with what Python computed."""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass, field
from typing import Any


def wire(value):
    """Widget trait values as JSON, bytes as base64 (the harness turns them into DataViews)."""
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [wire(v) for v in value]
    return value


def answer_request(page, widget, type_: str, where: str | None = None) -> dict:
    """The view's last request, of `type_`, answered by the widget's own handler as the kernel
    would; returns the request. where: a JS condition on the message `m`, to answer the newest
    request of that type that meets it, whatever the page sent after it."""
    replies = []
    widget.send = lambda content, buffers=None: replies.append((content, buffers))
    if where is None:  # the page's last request (an event, such as "painted" after the first drawing, is none)
        last = "window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind !== 'event')"
        page.wait_for_function(f"{last}?.type === {type_!r}")
        request = page.evaluate(last)
    else:
        found = f"window.attnscopeHarness.model.sentMessages.findLast((m) => m.type === {type_!r} && ({where}))"
        page.wait_for_function(f"{found} !== undefined")
        request = page.evaluate(found)
    widget._handle_custom_msg(request, [])
    content, buffers = replies[-1]
    page.evaluate(
        """([content, arrays]) => { const h = window.attnscopeHarness;
            h.model.emitCustom(content, arrays.map((b) => new DataView(Uint8Array.from(b).buffer))); }""",
        [content, [list(b) for b in buffers or []]],
    )
    return request


def answer_neuron_request(page, widget) -> dict:
    """The neuron view's request for numbers, answered by the widget's own handler as the kernel
    would; returns the request once the view shows the numbers."""
    request = answer_request(page, widget, "neuron")
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    return request


def emit(page, state: dict) -> None:
    """A kernel's update message (its state) delivered to the harness page's model."""
    page.evaluate("m => window.attnscopeHarness.model.emit(window.attnscopeHarness.fromWire(m))", wire(state))


@dataclass
class GatedGeneration:
    """attnscope.generate whose steps each wait for `gate.release()` once computed; the widget's
    update messages are kept in `sent` (`arrived` set at each) for the test to deliver (emit)."""

    widget: Any
    gate: threading.Semaphore
    sent: list = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)

    def step(self) -> dict:
        """Lets one step out and returns its message."""
        self.arrived.clear()
        before = len(self.sent)
        self.gate.release()
        assert self.arrived.wait(60)
        return self.sent[before]


def gated_generate(monkeypatch, *args, **kwargs) -> GatedGeneration:
    """attnscope.generate(*args, **kwargs) with its steps gated (GatedGeneration)."""
    import attnscope
    from attnscope.widget import generation_widget

    gate = threading.Semaphore(0)
    original = generation_widget.generation_steps

    def gated(*step_args, **step_kwargs):
        steps = original(*step_args, **step_kwargs)
        yield next(steps)  # the prompt's pass, in generate() itself
        for run in steps:
            if not gate.acquire(timeout=60):
                return
            yield run

    monkeypatch.setattr(generation_widget, "generation_steps", gated)
    run = GatedGeneration(attnscope.generate(*args, **kwargs), gate)

    def send(msg, buffers=None):
        if msg.get("method") == "update":
            run.sent.append(msg["state"])
            run.arrived.set()

    run.widget._send = send
    return run
