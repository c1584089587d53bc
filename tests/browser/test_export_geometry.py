"""Export equals the screen: the SVG's text sits where the view's labels sit on screen.

Both come from one scene per view (js/drawing/scene.js); the SVG is asked for as the kernel asks
(save_image's "image" request), then its <text> positions are compared with the on-screen
labels' boxes, relative to one reference label in each.
"""

from __future__ import annotations

import base64
import re
import struct

import numpy as np
import pytest
from test_head_view_browser import BUNDLE, TOKENS, neuron_reply, start, start_model_view

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

# [text, y centre] of the on-screen labels matching `selector`.
SCREEN = """selector => [...document.querySelectorAll(selector)].map((n) => {
  const box = n.getBoundingClientRect(); return [n.textContent, box.top + box.height / 2]; })"""
# [text, y] of the SVG's text elements of class `role`.
SVG = """([svg, role]) => { const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  return [...doc.querySelectorAll(`text.${role}`)].map((t) => [t.textContent, Number(t.getAttribute("y"))]); }"""


def exported(page, image_format: str, request_id: int) -> bytes:
    """The image's bytes, asked for as the kernel's save_image asks."""
    page.evaluate("""([id, format]) => window.attnscopeHarness.model.emitCustom(
        {kind: "request", type: "image", id, format}, [])""", [request_id, image_format])
    page.wait_for_function("id => window.attnscopeHarness.model.sentMessages.some((m) => m.kind === 'reply' && m.id === id)",
                           arg=request_id)
    reply = page.evaluate("""id => { const h = window.attnscopeHarness.model;
        const i = h.sentMessages.findIndex((m) => m.kind === 'reply' && m.id === id);
        const b = h.sentBuffers[i][0]; const bytes = new Uint8Array(b.buffer ?? b, b.byteOffset ?? 0, b.byteLength);
        let text = ""; for (const byte of bytes) text += String.fromCharCode(byte);
        return {error: h.sentMessages[i].error, data: btoa(text)}; }""", request_id)
    assert not reply["error"], reply["error"]
    return base64.b64decode(reply["data"])


def exported_svg(page) -> str:
    return exported(page, "svg", 991).decode("utf-8")


def relative(rows, reference):
    return [(text, round(y - reference, 1)) for text, y in rows]


def test_head_view_svg_labels_sit_where_the_screen_shows_them(page):
    start(page)
    svg = exported_svg(page)
    for side, role in (("left", "token-left"), ("right", "token-right")):
        screen = page.evaluate(SCREEN, f".attnscope-head-view .attnscope-{side} .attnscope-token-text")
        image = page.evaluate(SVG, [svg, role])
        assert [t for t, _ in image] == [t for t, _ in screen] == TOKENS
        got, want = relative(image, image[0][1]), relative(screen, screen[0][1])
        assert all(abs(a[1] - b[1]) <= 1.5 for a, b in zip(got, want)), (got, want)


def test_neuron_view_svg_rows_are_the_screens_rows(page):
    start(page, view="neuron", neuron_head=1, neuron_query=2)
    page.wait_for_function("window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind === 'request')?.type === 'neuron'")
    request = page.evaluate("window.attnscopeHarness.model.sentMessages.findLast((m) => m.kind === 'request')")
    rng = np.random.default_rng(1)
    heads, d, n = 2, 8, len(TOKENS)
    neuron_reply(page, request["id"], rng.normal(size=(heads, n, d)), rng.normal(size=(heads, n, d)),
                 rng.normal(size=(heads, n, d)), 1 + rng.random((heads, n)))
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    svg = exported_svg(page)
    screen_keys = page.evaluate(SCREEN, ".attnscope-neuron-view .attnscope-right .attnscope-token-text")
    screen_queries = page.evaluate(SCREEN, ".attnscope-neuron-queries .attnscope-token-text")
    image_keys, image_queries = page.evaluate(SVG, [svg, "key-token"]), page.evaluate(SVG, [svg, "query-token"])
    assert [t for t, _ in image_queries] == [t for t, _ in screen_queries] == TOKENS
    # Every label relative to the first key token: query token j beside key row j, on both.
    # Past the softmax: the ‖f(x)‖ numbers in the key rows too.
    screen_norms = page.evaluate(SCREEN, ".attnscope-neuron-norms .attnscope-neuron-number span:last-child")
    image_norms = page.evaluate(SVG, [svg, "norms"])
    assert [t for t, _ in image_norms] == [t for t, _ in screen_norms] and len(image_norms) == len(TOKENS)
    for image, screen in ((image_keys, screen_keys), (image_queries, screen_queries), (image_norms, screen_norms)):
        got, want = relative(image, image_keys[0][1]), relative(screen, screen_keys[0][1])
        assert all(abs(a[1] - b[1]) <= 1.5 for a, b in zip(got, want)), (got, want)
    assert not page.problems, page.problems


# [text, x centre, y centre] of the on-screen labels matching `selector`.
SCREEN_XY = """selector => [...document.querySelectorAll(selector)].map((n) => {
  const box = n.getBoundingClientRect(); return [n.textContent, box.left + box.width / 2, box.top + box.height / 2]; })"""
SVG_XY = """([svg, role]) => { const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  return [...doc.querySelectorAll(`text.${role}`)].map((t) => [t.textContent, Number(t.getAttribute("x")), Number(t.getAttribute("y"))]); }"""


def test_model_view_svg_grid_labels_sit_at_the_screens_cells(page):
    start_model_view(page)
    svg = exported_svg(page)
    for selector, role, axis, texts in (
        (".attnscope-grid-layers span", "row-label", 2, ["Layer 0", "Layer 1"]),
        (".attnscope-grid-heads span", "col-label", 1, ["Head 0", "Head 1"]),
    ):
        screen, image = page.evaluate(SCREEN_XY, selector), page.evaluate(SVG_XY, [svg, role])
        assert [t for t, *_ in image] == [t for t, *_ in screen] == texts
        got = [round(row[axis] - image[0][axis], 1) for row in image]
        want = [round(row[axis] - screen[0][axis], 1) for row in screen]
        assert got == pytest.approx(want, abs=1.5) and got[1] == 84, (got, want)  # one cell (CELL) apart
    assert not page.problems, page.problems


def test_png_export_is_the_scene_drawn_at_twice_its_size(page):
    start(page)
    width, height = (int(v) for v in re.match(r'<svg[^>]* width="(\d+)" height="(\d+)"', exported_svg(page)).groups())
    png = exported(page, "png", 992)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (2 * width, 2 * height)
    # Ink where the lines run, not a blank page: the canvas drawing, decoded by the browser.
    inked = page.evaluate("""async (b64) => { const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const bitmap = await createImageBitmap(new Blob([bytes], {type: "image/png"}));
        const c = new OffscreenCanvas(bitmap.width, bitmap.height); const ctx = c.getContext("2d"); ctx.drawImage(bitmap, 0, 0);
        const d = ctx.getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) n++; return n; }""",
        base64.b64encode(png).decode())
    assert inked > 1000
    assert not page.problems, page.problems
