"""Front-end timings in headless Debian chromium, with the widget's real state for a real run.

The page is tests/browser/harness.html (the built bundle + a fake anywidget model). The widget's
state is made by AttentionWidget in Python exactly as the kernel would send it, handed to the page
as DataViews, and timed from render() to the next painted frame. Kernel-side times (making a
layer's payload, a neuron-view slice) are measured in Python and added to the browser's redraw:
the local websocket hop of a real notebook is not included.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import shutil
import threading
import time
from pathlib import Path

from chromium import CHROMIUM_ARGS
from ipywidgets.widgets.widget import _remove_buffers

from attnscope import AttentionWidget
from attnscope.widget.payloads import layer_payload

ROOT = Path(__file__).resolve().parent.parent

# In the page: rebuild the state (buffers → DataViews), render, and wait for the frame to be painted.
RENDER_AND_TIME = """
async ({state, buffers, paths}) => {
  const views = buffers.map((b64) => { const s = atob(b64); const u = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i); return new DataView(u.buffer); });
  paths.forEach((path, i) => { let o = state; for (const k of path.slice(0, -1)) o = o[k]; o[path.at(-1)] = views[i]; });
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  await frame();
  const t0 = performance.now();
  window.attnscopeHarness.start(state);
  await frame();
  return performance.now() - t0;
}
"""

# Replace one trait (or answer a neuron request) and time until the next painted frame.
EMIT_AND_TIME = """
async ({kind, content, b64s, paths}) => {
  const views = b64s.map((b64) => { const s = atob(b64); const u = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i); return new DataView(u.buffer); });
  paths.forEach((path, i) => { let o = content; for (const k of path.slice(0, -1)) o = o[k]; o[path.at(-1)] = views[i]; });
  const m = window.attnscopeHarness.model;
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  await frame();
  const t0 = performance.now();
  if (kind === "custom") m.emitCustom(content, views); else m.emit(content);
  await frame();
  return performance.now() - t0;
}
"""


# Click an element and time until the painted frame where `root`'s data-query is `query`.
CLICK_AND_TIME = """
async ([selector, root, query]) => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  await frame();
  const t0 = performance.now();
  document.querySelector(selector).click();
  while (document.querySelector(root).dataset.query !== query) await frame();
  await frame();
  return performance.now() - t0;
}
"""


def split_state(state: dict) -> tuple[dict, list[bytes], list[list]]:
    """The widget state as the comm sends it: JSON without buffers, the buffers, and their paths."""
    stripped, paths, buffers = _remove_buffers(state)
    return stripped, [bytes(b) for b in buffers], [list(p) for p in paths]


def state_bytes(widget: AttentionWidget) -> int:
    stripped, buffers, _ = split_state(widget.get_state())
    return len(json.dumps(stripped).encode()) + sum(len(b) for b in buffers)


def b64(buffers: list[bytes]) -> list[str]:
    return [base64.b64encode(b).decode() for b in buffers]


def median_ms(fn, repeats: int) -> float:
    times = sorted(fn() for _ in range(repeats))
    return times[len(times) // 2]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_root():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(ROOT)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/tests/browser/harness.html"


def bench_front_end(engine, text: str, repeats: int = 5, browser=None) -> dict:
    """First paint, layer switch, neuron token switch and JS heap for one model and text.

    `browser` is an open playwright Chromium to reuse (the test session has one, and
    playwright's sync API allows one per thread); without it a headless one is launched."""
    from contextlib import ExitStack

    from playwright.sync_api import sync_playwright

    head = AttentionWidget(text, model=engine)
    model_view = AttentionWidget(text, model=engine, view="model")
    result = head.result
    n_tokens = len(result.tokens)
    row = {
        "bytes_before_head_paint": state_bytes(head),
        "bytes_before_model_paint": state_bytes(model_view),
    }

    # Kernel side of a layer switch and of a neuron-view token switch.
    def time_payload():
        start = time.perf_counter()
        layer_payload(result, 1)
        return (time.perf_counter() - start) * 1000

    def time_neuron():  # the kernel's answer for a layer: the view then draws any query of it
        start = time.perf_counter()
        head._answer_neuron({"layer": 1}, [])
        return (time.perf_counter() - start) * 1000

    kernel_layer_ms = median_ms(time_payload, repeats)
    kernel_neuron_ms = median_ms(time_neuron, repeats)

    httpd, url = serve_root()
    try:
        with ExitStack() as stack:
            if browser is None:
                p = stack.enter_context(sync_playwright())
                browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=CHROMIUM_ARGS)
                stack.callback(browser.close)
            pages = []
            stack.callback(lambda: [pg.close() for pg in pages if not pg.is_closed()])

            def fresh_page():
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                pages.append(page)
                page.goto(url)
                page.wait_for_function("window.harnessReady === true")
                return page

            def first_paint(widget) -> tuple[float, object]:
                stripped, buffers, paths = split_state(widget.get_state())
                page = fresh_page()
                ms = page.evaluate(RENDER_AND_TIME, {"state": stripped, "buffers": b64(buffers), "paths": paths})
                return ms, page

            head_paints, model_paints = [], []
            for _ in range(repeats):
                ms, page = first_paint(model_view)
                model_paints.append(ms)
                assert int(page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.cells")) > 0
                page.close()
            for _ in range(repeats):
                ms, page = first_paint(head)
                head_paints.append(ms)
                page.close()

            # Heap and the switches on one live head view.
            ms, page = first_paint(head)
            cdp = page.context.new_cdp_session(page)
            cdp.send("HeapProfiler.collectGarbage")
            cdp.send("Performance.enable")
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            row["js_heap_bytes_head"] = int(metrics["JSHeapUsedSize"])

            layer_ms = []
            for i in range(repeats):
                layer = 1 + i % (result.n_layers - 1)
                page.evaluate("layer => { const s = document.querySelector('select.attnscope-layer');"
                              " s.value = String(layer); s.dispatchEvent(new Event('change')); }", layer)
                stripped, buffers, paths = split_state({"attention": layer_payload(result, layer)})
                layer_ms.append(page.evaluate(EMIT_AND_TIME, {"kind": "trait", "content": stripped, "b64s": b64(buffers), "paths": paths}))
                assert int(page.eval_on_selector(".attnscope-lines", "c => c.dataset.lineCount")) >= 0

            # Neuron view: the view's request for the layer answered with the kernel's own answer;
            # then clicks on other query tokens, drawn from that layer with nothing asked.
            page.evaluate("window.attnscopeHarness.model.emit({view: 'neuron'})")
            # The view also says "rendered" once; only its neuron requests are counted here.
            neuron_requests = "window.attnscopeHarness.model.sentMessages.filter(m => m.type === 'neuron')"
            page.wait_for_function(f"{neuron_requests}.length > 0")
            request = page.evaluate(f"{neuron_requests}.at(-1)")
            answer, buffers = head._answer_neuron({"layer": request["layer"]}, [])
            content = {"kind": "reply", "type": "neuron", "id": request["id"], **answer}
            page.evaluate(EMIT_AND_TIME, {"kind": "custom", "content": content, "b64s": b64(buffers), "paths": []})
            page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
            neuron_ms = []
            for i in range(repeats):
                token = (i * 37 + 5) % n_tokens
                neuron_ms.append(page.evaluate(CLICK_AND_TIME, [f".attnscope-neuron-queries .attnscope-token[data-index='{token}']",
                                                                ".attnscope-neuron-view", str(token)]))
            assert page.evaluate(f"{neuron_requests}.length") == 1
            cdp.send("HeapProfiler.collectGarbage")
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            row["js_heap_bytes_after_neuron"] = int(metrics["JSHeapUsedSize"])
    finally:
        httpd.shutdown()

    row.update({
        "head_first_paint_ms": round(sorted(head_paints)[len(head_paints) // 2], 1),
        "model_first_paint_ms": round(sorted(model_paints)[len(model_paints) // 2], 1),
        "layer_switch_ms": round(kernel_layer_ms + sorted(layer_ms)[len(layer_ms) // 2], 1),
        "neuron_switch_ms": round(kernel_neuron_ms + sorted(neuron_ms)[len(neuron_ms) // 2], 1),
        "kernel_layer_payload_ms": round(kernel_layer_ms, 1),
        "kernel_neuron_slice_ms": round(kernel_neuron_ms, 1),
    })
    return row
