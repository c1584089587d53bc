"""Standalone HTML opened from disk in chromium with every network request refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import attnscope
from attnscope.edges.cli import main as cli_main
from attnscope.widget.export import script_safe_json

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
HOSTILE = "</script><script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">"

pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")


def test_json_is_escaped_for_script_context():
    text = script_safe_json({"t": HOSTILE + " & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    import json

    assert json.loads(text)["t"] == HOSTILE + " & \u2028"


@pytest.fixture
def offline_page(watched_page):
    page = watched_page(offline=True)
    page.requests = []

    def refuse(route):
        # Only the file itself may load: any other request is a network dependency.
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            page.requests.append(route.request.url)
            route.abort()

    page.context.route("**/*", refuse)
    return page


def test_saved_page_works_offline_with_a_hostile_sentence(offline_page, default_model, tmp_path):
    page = offline_page
    widget = attnscope.AttentionWidget(HOSTILE + " The cat sat.", "It was happy.", model=default_model)
    path = widget.save_html(tmp_path / "view.html", layers=[0, 3, 5])
    page.goto(path.as_uri())
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    assert page.evaluate("window.pwned") is None
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.input_value("input.attnscope-text") == HOSTILE + " The cat sat."

    # Only the saved layers are offered... and switching redraws from the stored data.
    page.select_option("select.attnscope-layer", index=3)
    page.wait_for_function("document.querySelector('.attnscope-status').textContent === ''")
    assert int(page.eval_on_selector(".attnscope-lines", "c => c.dataset.lineCount")) > 0

    page.click("button.attnscope-tab[data-view='model']")
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '36'")

    # The neuron view computes from the stored q and k what the kernel would have sent.
    page.click("button.attnscope-tab[data-view='neuron']")
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    softmax = page.eval_on_selector_all(
        ".attnscope-neuron-softmax .attnscope-neuron-number",
        "ns => ns.map(n => Number(n.textContent.trim().split(/\\s+/).pop()))",
    )
    expected = widget.result.attention[3, 0, widget.neuron_query].tolist()  # the query the view opens on
    assert len(softmax) == len(expected)
    assert max(abs(a - b) for a, b in zip(softmax, expected)) < 2e-3

    # Editing needs the live widget: the sentence is read-only and the page says so, instead of a
    # box that looks editable and does nothing.
    page.click("button.attnscope-tab[data-view='head']")
    assert page.eval_on_selector("input.attnscope-text", "i => i.readOnly")
    assert "edit the text in the live widget" in page.text_content(".attnscope-page-note")
    before = page.input_value("input.attnscope-text")
    page.click("input.attnscope-text")
    page.keyboard.type("something else")
    page.keyboard.press("Enter")
    assert page.input_value("input.attnscope-text") == before
    assert not page.requests, page.requests
    assert not page.problems, page.problems
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "standalone.png"))


def test_cli_renders_a_page_and_reports_errors(tmp_path, capsys, offline_page):
    out = tmp_path / "cli.html"
    assert cli_main(["render", "Dogs bark.", "--layers", "1,2", "--view", "model", "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    offline_page.goto(out.as_uri())
    offline_page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '24'")
    assert not offline_page.problems

    assert cli_main(["render", "   ", "-o", str(tmp_path / "x.html")]) == 2
    assert "empty" in capsys.readouterr().err
    assert cli_main(["render", "hi", "--model", "no-such-org/none", "-o", str(tmp_path / "y.html")]) == 2
    assert "not cached locally" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["render", "hi", "--layers", "one", "-o", str(tmp_path / "z.html")])


# Token text with C0/C1 controls, DEL and a lone surrogate (precomputed attention can bring any).
CONTROL_TOKENS = ["[CLS]", "a\x00b", "\x1b[31m", "tab\there", "\ud800x", "\x7f\x85", "[SEP]"]


def test_control_characters_in_tokens_export_valid_svg_and_png(offline_page, tmp_path):
    import xml.etree.ElementTree as ElementTree

    import torch

    page = offline_page
    n = len(CONTROL_TOKENS)
    attention = tuple(torch.softmax(torch.randn(1, 2, n, n, generator=torch.Generator().manual_seed(i)), -1) for i in range(2))
    path = attnscope.head_view(attention, CONTROL_TOKENS).save_html(tmp_path / "controls.html")
    page.goto(path.as_uri())
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")

    with page.expect_download(timeout=15000) as svg_download:
        page.click("button.attnscope-export-button[data-format='svg']")
    svg = open(svg_download.value.path(), "rb").read()
    root = ElementTree.fromstring(svg)  # expat: well-formed XML 1.0, or it raises
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for shown in ["a\u2400b", "\u241b[31m", "tab\u2409here", "\ufffdx", "\u2421\\u0085"]:
        assert texts.count(shown) == 2, (shown, texts)  # both token columns
    errors = page.evaluate(
        "svg => new DOMParser().parseFromString(svg, 'image/svg+xml').getElementsByTagName('parsererror').length",
        svg.decode("utf-8"),
    )
    assert errors == 0

    with page.expect_download(timeout=15000) as png_download:
        page.click("button.attnscope-export-button[data-format='png']")
    png = open(png_download.value.path(), "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert page.is_hidden(".attnscope-error"), page.text_content(".attnscope-error")
    assert not page.requests and not page.problems, (page.requests, page.problems)


def _two_pages():
    import torch

    sentences = [["[CLS]", "alpha", "beta", "[SEP]"], ["[CLS]", "gamma", "delta", "epsilon", "[SEP]"]]
    pages = []
    for tokens in sentences:
        n = len(tokens)
        attention = tuple(torch.full((1, 2, n, n), 1 / n) for _ in range(2))
        pages.append(attnscope.head_view(attention, tokens, html_action="return").data)
    return sentences, pages


MOUNTED_TOKENS = """() => [...document.querySelectorAll('.attnscope-root')]
    .map(root => [...new Set([...root.querySelectorAll('.attnscope-token-text')].map(t => t.textContent))])"""


def test_two_returned_pages_in_one_document_each_mount_their_own_data(offline_page, tmp_path):
    import re

    sentences, pages = _two_pages()
    page = offline_page
    # What a notebook does with two HTML outputs: both pages' markup in one document, in order.
    style = re.search(r"<style>.*?</style>", pages[0], re.S).group(0)
    bodies = [re.search(r"<body>(.*)</body>", p, re.S).group(1) for p in pages]
    path = tmp_path / "two.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'>{style}</head><body>"
                    f"<div class='out'>{bodies[0]}</div><div class='out'>{bodies[1]}</div></body></html>", encoding="utf-8")
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelectorAll('.attnscope-lines').length === 2")
    assert page.evaluate(MOUNTED_TOKENS) == sentences
    assert page.evaluate("[...document.querySelectorAll('.out')].map(o => o.querySelectorAll('.attnscope-root').length)") == [1, 1]
    ids = page.evaluate("[...document.querySelectorAll('[id]')].map(e => e.id)")
    assert len(ids) == len(set(ids)) == 4, ids

    # Outputs added later, as JupyterLab (scripts re-created in place) and the classic notebook
    # (jQuery: scripts run from copies appended to <head>) insert them.
    for mode in ["lab", "classic"]:
        page.goto((tmp_path / "two.html").as_uri())
        page.evaluate("document.body.replaceChildren()")
        page.evaluate(
            """([pages, mode]) => { for (const html of pages) {
                const out = document.createElement('div');
                out.className = 'out';
                document.body.appendChild(out);
                out.innerHTML = html;  // scripts inserted this way do not run...
                for (const old of out.querySelectorAll('script')) {  // ...so the notebook runs them
                  if (mode === 'classic' && old.type) continue;  // jQuery leaves JSON data in place
                  const script = document.createElement('script');
                  for (const a of old.attributes) script.setAttribute(a.name, a.value);
                  script.textContent = old.textContent;
                  if (mode === 'lab') old.replaceWith(script);
                  else { document.head.appendChild(script); script.remove(); old.remove(); }
                }
              } }""",
            [pages, mode],
        )
        assert page.evaluate(MOUNTED_TOKENS) == sentences, mode
        assert page.evaluate("[...document.querySelectorAll('.out')].map(o => o.querySelectorAll('.attnscope-root').length)") == [1, 1]
    assert not page.requests and not page.problems, (page.requests, page.problems)
