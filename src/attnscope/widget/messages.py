"""Requests and answers over the widget's custom messages, the kernel's side of js/transport/channel.js.

Every message is an envelope (the same on both sides, and in a saved page, where the static model
answers in the kernel's place):
- request: {kind: "request", type, id, ...params}, answered by exactly one
- reply:   {kind: "reply", type, id, ...content} (the request's type and id), or {..., error}
- event:   {kind: "event", type, ...}, no answer.

The message types are declared once, in MESSAGES below; js/transport/contract.js is generated from it
(contract.contract_js) and tests/widget/test_contract.py checks that the views send only these.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Message:
    """One message type: its kind, who sends it, what it carries and what answers it."""

    type: str
    kind: str  # "request" or "event"
    sender: str  # "view" or "kernel"
    doc: str


# An "attention_tile" request for the whole map asks for this many blocks a side (fewer tokens:
# one a token); a saved page holds those answers, so both sides read this one number.
OVERVIEW_BINS = 256
# The head view of a long run draws the lines among this many tokens around the selected one.
WINDOW_TOKENS = 128

MESSAGES = {
    message.type: message
    for message in (
        Message("neuron", "request", "view",
                "{layer} → what js/drawing/neuron_maths.js computes any head's and query's numbers of that layer from, "
                "as a saved page stores it (export.neuron_store: queries, keys, values, ‖f(x_j)‖ and T5's bias as "
                "float16, scaling, causal): {store, paths} with the store's bytes as buffers at `paths`, and "
                "layer, result_id, part, shown and n_queries so the view files the answer under the run it belongs to."),
        Message("layer", "request", "view",
                "{layer} → that layer of the shown run, as the `attention` trait would hold it: {layer, dtype, "
                "shape, scale[, encoding], source} and its bytes as one buffer (payloads.layer_payload). The head view asks "
                "for the layers around the open one while the page is idle, so a layer switch draws at once. {layer, "
                "weigh_by} with the other weighing: the layer as that Weigh by switch will draw it, with weigh_by, "
                "one_scale (the trait's value after the switch) and `of`, the source of the run shown when it was asked "
                "(layer_answers.py), so a switch draws at once too; with thumbnails true (the model view is open), its "
                "cells as the `thumbnails` trait will hold them as well, their bytes the second buffer."),
        Message("attention_rows", "request", "view",
                '{layer, head (-1: the mean of the layer\'s heads), token, direction: "from" | "to"} → the '
                "exact attention from that token to every token (its row) or to it from every token (its "
                "column), one float32 buffer of T values (payloads.long_rows_payload), with result_id."),
        Message("attention_tile", "request", "view",
                '{layer, head (-1: mean), rows: [start, end], cols: [start, end], bins, reduce: "max" | "mean"} '
                "→ that region pooled into at most bins × bins blocks, one float32 buffer, with its shape and "
                "`exact` when every block is one token pair (payloads.long_tile_payload), with result_id. With "
                "`pass` (0, 1, ...): one of the `passes` the answer names, over 1 / passes of the rows, so that a "
                "large map shows at once and refines (max: the passes' elementwise max; mean: their sum)."),
        Message("attention_window", "request", "view",
                "{layer, token} → every head's exact attention among the WINDOW_TOKENS tokens around that "
                "token, rows and columns [start, end): heads × W × W, one float32 buffer, with rows: [start, "
                "end] (payloads.long_window_payload), with result_id."),
        Message("thumbnails", "request", "view",
                "{pass} → a long run's model view thumbnails, one of the `passes` the answer names "
                "(payloads.long_thumbnails_pass: every included head max-pooled over 1 / passes of its rows, "
                "float32 [layers, heads, S, S], with layers, heads and n_tokens), for thumbnails too large to "
                "make at once (the trait then stays empty); the passes' elementwise max is the whole. Weighed by "
                "value norm, with one_scale {of, measure, over}: the page draws every head shown on one scale, the "
                "largest of the passes so far (payloads.long_thumbnails_scale)."),
        Message("token_rows", "request", "view",
                "{token} → that token's exact row (its attention to every token, weighed as the run is) in every "
                "included layer × head, float32 [layers, heads, 1, T] with layers, heads, token and n_tokens "
                "(long_answers.token_rows_payload): a long run's model view of the selected token. A saved "
                "generation page answers it from its kept steps (js/transport/saved.js stepAnswer)."),
        Message("knockout", "request", "view",
                "{layer, head, key (-1: the whole head), result_id} → Δ log p of the token the model predicts "
                "(knockout_control's position) with that head's output zeroed, or the lines from that position to "
                "token `key` in that head blocked: attnscope.knockout's row {position, target, log_p, log_p_knocked, "
                "delta} with layer, head, key, masked and result_id (widget/knockout_answers.py). On a generation "
                "with `token` (an output token): the token the model chose there, read from token − 1 on the ids "
                "before it; the answer adds token and step."),
        Message("growing_lists", "request", "view",
                "{} → the lists a generation grows (contract.GROWING: tokens, token_reading, token_notes, text) "
                "as the kernel holds them, with result_id: for a view that cannot apply a step's `grown` (one opened "
                "while the model writes, whose lists are the prompt's), js/transport/growing.js."),
        Message("image", "request", "kernel", '{format: "svg" | "png"} → the view\'s image as one buffer (save_image).'),
        Message("rendered", "event", "view", "A view exists: save_image needs one to answer."),
        Message("painted", "event", "view", "The view's first whole drawing (nothing it asked for still computing: "
                "the text view's selected row shaded) is on screen, two frames after it: a generation shown by a "
                "notebook page makes its first new token then, at most PAINT_WAIT_S after it starts, so that the "
                "token does not wait behind the page's drawing of a long prompt (generation_widget.py)."),
        Message("stop", "event", "view", "{shown: the new tokens the page shows} The Stop button while `generating`: "
                "the kernel ends the generation between two steps and keeps the first `shown` new tokens, what the "
                "reader saw (every token made where `shown` is not a count of them; generation_widget.py)."),
    )
}

@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """The kernel's interrupt (SIGINT) reaches the work inside: a page's write or request.

    ipykernel turns SIGINT on only around the message it handles alone; a comm message that
    arrives while another is still being handled (ipykernel 7.4: a request of the page's just
    before a click) is handled "concurrently", with SIGINT still ignored, and its work could not
    be interrupted. Here it is turned on for the work, and set back after."""
    # == (not is): a handler set back from a saved value reads as the plain number 1.
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def on_the_main_shell(comm: Any) -> None:
    """The page's messages to this comm are handled on the kernel's main shell, as the cells are.

    ipykernel 7.4 hands a comm's messages to the subshell that the page's last answered message
    came from (JupyterLab 4.6 tags widget messages with one): after the first request answered,
    every write and request of the page ran in that subshell's thread. There the kernel's
    interrupt (SIGINT, the main thread's) never reaches a slow step, and a cell changing the
    widget would run beside it, on state that is not guarded for two threads. Without those
    attributes (other kernels, older ipykernel) nothing changes."""
    publish = getattr(comm, "publish_msg", None)
    if publish is None or not hasattr(comm, "_reply_subshell_ids"):
        return

    def publish_from_the_main_shell(*args: Any, **kwargs: Any) -> Any:
        try:
            return publish(*args, **kwargs)
        finally:
            with getattr(comm, "_reply_subshell_lock", contextlib.nullcontext()):
                comm._reply_subshell_id = None
                comm._reply_subshell_ids.clear()

    comm.publish_msg = publish_from_the_main_shell


Handler = Callable[[dict, list], "tuple[dict, list] | dict"]
ReplyCallback = Callable[[dict, list], None]

# Unique for the kernel's life: an answered request's id is never reused.
_REQUEST_IDS = itertools.count(1)


class Channel:
    """Answers the view's requests with `handlers[type](content, buffers)` (returning content or
    (content, buffers)); a handler's exception becomes the reply's `error`, so the view shows it
    instead of waiting forever. `request` sends the kernel's own requests to the view."""

    def __init__(self, widget: Any, handlers: dict[str, Handler], events: dict[str, Callable[[dict], None]] | None = None):
        unknown = set(handlers) - {t for t, m in MESSAGES.items() if m.sender == "view" and m.kind == "request"}
        unknown |= set(events or {}) - {t for t, m in MESSAGES.items() if m.sender == "view" and m.kind == "event"}
        if unknown:
            raise ValueError(f"{sorted(unknown)} are not messages the view sends (messages.MESSAGES)")
        self._widget = widget
        self._handlers = handlers
        self._events = events or {}
        self._pending: dict[int, ReplyCallback] = {}
        widget.on_msg(self._receive)
        on_the_main_shell(getattr(widget, "comm", None))

    def request(self, type_: str, params: dict, on_reply: ReplyCallback) -> int:
        if type_ not in MESSAGES or MESSAGES[type_].sender != "kernel":
            raise ValueError(f"{type_!r} is not a request the kernel sends (messages.MESSAGES)")
        request_id = next(_REQUEST_IDS)
        self._pending[request_id] = on_reply
        self._widget.send({"kind": "request", "type": type_, "id": request_id, **params})
        return request_id

    def _receive(self, _widget: Any, content: Any, buffers: list) -> None:
        with interruptible():
            self._handle(content, buffers)

    def _handle(self, content: Any, buffers: list) -> None:
        if not isinstance(content, dict):
            return
        kind, type_ = content.get("kind"), content.get("type")
        if kind == "event" and type_ in self._events:
            self._events[type_](content)
        elif kind == "reply":
            callback = self._pending.pop(content.get("id"), None)
            if callback is not None:
                callback(content, list(buffers or []))
        elif kind == "request" and type_ in self._handlers:
            self._answer(content, list(buffers or []))

    def _answer(self, request: dict, buffers: list) -> None:
        # The id is echoed for the view to match its answer: an id no view sends (NaN, a megabyte
        # of text) is not echoed, as the comm could not send it.
        request_id = request.get("id")
        envelope = {"kind": "reply", "type": request["type"],
                    "id": request_id if type(request_id) is int and abs(request_id) < 2**53 else None}
        try:
            answer = self._handlers[request["type"]](request, buffers)
        except (Exception, KeyboardInterrupt) as exc:
            # An interrupted request is answered too: the view must never wait for ever.
            error = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc) or type(exc).__name__
            self._widget.send({**envelope, "error": error})
            return
        content, reply_buffers = answer if isinstance(answer, tuple) else (answer, [])
        self._widget.send({**envelope, **content}, buffers=reply_buffers)
