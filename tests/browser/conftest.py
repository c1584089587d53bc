"""Browser-test fixtures: the repository served over HTTP, and the harness page on it."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(QuietHandler, directory=str(ROOT))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def page(watched_page, server):
    page = watched_page(viewport={"width": 900, "height": 700})
    page.goto(f"{server}/tests/browser/harness.html")
    page.wait_for_function("window.harnessReady === true")
    return page


@pytest.fixture
def open_widget(watched_page, server):
    """open_widget(widget, width=, height=) → the harness page drawing a real widget's state (its traits as Python has them)."""
    from real_widget import wire

    from attnscope.widget.contract import contract_traits

    def open_(widget, width: int = 1100, height: int = 900):
        page = watched_page(viewport={"width": width, "height": height})
        page.goto(f"{server}/tests/browser/harness.html")
        page.wait_for_function("window.harnessReady === true")
        state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
        assert page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state) == "function"
        return page

    return open_
