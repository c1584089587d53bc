"""Standalone HTML opened from disk in chromium with every network request refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import attnscope
from attnscope.cli import main as cli_main
from attnscope.export import script_safe_json

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
    page.wait_for_function("Number(document.querySelector('canvas.attnscope-lines')?.dataset.lineCount) > 0")
    assert page.evaluate("window.pwned") is None
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.input_value("input.attnscope-text") == HOSTILE + " The cat sat."

    # Only the saved layers are offered... and switching redraws from the stored data.
    page.select_option("select.attnscope-layer", index=3)
    page.wait_for_function("document.querySelector('.attnscope-status').textContent === ''")
    assert int(page.eval_on_selector("canvas.attnscope-lines", "c => c.dataset.lineCount")) > 0

    page.click("button.attnscope-tab[data-view='model']")
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '36'")

    # The neuron view computes from the stored q and k what the kernel would have sent.
    page.click("button.attnscope-tab[data-view='neuron']")
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    softmax = page.eval_on_selector_all(
        ".attnscope-neuron-softmax .attnscope-neuron-number",
        "ns => ns.map(n => Number(n.textContent.trim().split(/\\s+/).pop()))",
    )
    expected = widget.result.attention[3, 0, 0].tolist()
    assert len(softmax) == len(expected)
    assert max(abs(a - b) for a, b in zip(softmax, expected)) < 2e-3

    # Editing needs a kernel: the page says so instead of failing silently.
    page.click("button.attnscope-tab[data-view='head']")
    page.fill("input.attnscope-text", "something else")
    page.press("input.attnscope-text", "Enter")
    page.wait_for_function("document.querySelector('.attnscope-error').textContent.includes('saved page')")
    assert page.input_value("input.attnscope-text") == "something else"
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
