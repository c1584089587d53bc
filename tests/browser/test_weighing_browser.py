"""Weigh by value norm in the browser (issue 47 item 1): the control, what the views then say they
draw, and a saved page opened from disk with every network request refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import attnscope

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")

TEXT = "The keeper fed the lion before the storm, and it slept."


@pytest.fixture
def offline_page(watched_page):
    page = watched_page(offline=True)
    page.context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    return page


def test_the_head_view_weighed_by_value_norm_says_so_and_draws_on_the_runs_scale(open_widget, default_model):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, layer=2)
    widget.weigh_by = "value_norm"
    page = open_widget(widget, width=1400, height=1000)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    choice = page.locator("select.attnscope-weigh")
    assert choice.is_visible() and choice.input_value() == "value_norm" and not choice.is_disabled()
    assert "Kobayashi et al. 2020" in page.eval_on_selector("select.attnscope-weigh", "s => s.closest('label').title")
    note = page.text_content(".attnscope-window-note")
    largest = f"{widget.one_scale['largest']:.3f}"
    assert note.startswith("‖αf(x)‖, one scale for every layer and head") and f"strongest line = {largest}" in note
    # Choosing it in the page writes the trait the kernel checks.
    choice.select_option("attention")
    assert page.evaluate("window.attnscopeHarness.model.get('weigh_by')") == "attention"
    widget.close()


def test_a_saved_page_keeps_its_weighing_offline(offline_page, default_model, tmp_path):
    widget = attnscope.AttentionWidget(TEXT, model=default_model, weigh_by="value_norm")
    path = widget.save_html(tmp_path / "weighed.html", layers=[0, 2])
    offline_page.goto(path.as_uri())
    offline_page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    assert offline_page.input_value("select.attnscope-weigh") == "value_norm"
    assert offline_page.is_disabled("select.attnscope-weigh")  # the other weighing's numbers are not in it
    assert offline_page.text_content(".attnscope-window-note").startswith("‖αf(x)‖, one scale")
    widget.close()


def test_a_long_runs_saved_text_view_names_what_it_shades(offline_page, default_model, tmp_path):
    widget = attnscope.AttentionWidget(TEXT * 3, model=default_model, attention="on_demand", weigh_by="value_norm")
    assert widget.long_context and widget.view == "text"
    path = widget.save_html(tmp_path / "long.html")
    offline_page.goto(path.as_uri())
    offline_page.wait_for_function("document.querySelector('.attnscope-text-caption')?.textContent.startsWith('‖αf(x)‖ from')")
    assert offline_page.input_value("select.attnscope-weigh") == "value_norm"
    widget.close()


def test_a_long_runs_saved_model_view_draws_its_weighed_heads_on_one_scale(offline_page, default_model, tmp_path):
    """Issue 47: a long run's model view, weighed, drew each head on its own largest ‖αf(x)‖. Its
    saved page draws every head shown on one scale, their largest, and says so."""
    widget = attnscope.AttentionWidget(TEXT * 3, model=default_model, attention="on_demand", weigh_by="value_norm", view="model")
    scale = widget.thumbnails["one_scale"]
    path = widget.save_html(tmp_path / "long_model.html")
    offline_page.goto(path.as_uri())
    offline_page.wait_for_function("Number(document.querySelector('canvas.attnscope-thumbnails')?.dataset.lineCount) > 0")
    note = offline_page.text_content(".attnscope-scale-note")
    assert note.startswith("‖αf(x)‖, one scale for every layer and head shown: "
                           f"strongest line = {scale['largest']:.3f}, the largest ‖αf(x)‖ (layer {scale['layer']}, head {scale['head']})")
    assert "its head's largest" not in note
    widget.close()


MODEL_PIXELS = "() => document.querySelector('canvas.attnscope-thumbnails').toDataURL()"


def test_a_weigh_by_switch_in_the_model_view_draws_its_cells_at_once(open_widget, default_model):
    """Issue 47 (a Weigh by switch within 100 ms), the model view: while it is open and idle the page
    asks for the other weighing with its cells; the switch draws them before the kernel answers,
    the same pixels as a page opened weighed, and the kernel's answer draws nothing new."""
    from real_widget import answer_request, wire

    text = "The cat sat on the mat because it was tired."
    widget = attnscope.AttentionWidget(text, model=default_model, view="model")
    page = open_widget(widget)
    answer_request(page, widget, "layer", "m.thumbnails")  # the other weighing, with the cells
    page.wait_for_function("Number(document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells) > 0")
    alpha = page.evaluate(MODEL_PIXELS)
    page.select_option("select.attnscope-weigh", "value_norm")  # no trait comes from the kernel
    page.wait_for_function(f"before => ({MODEL_PIXELS})() !== before", arg=alpha)
    page.wait_for_function("document.querySelector('.attnscope-model-view').textContent.includes('one scale for every layer and head')")
    weighed = page.evaluate(MODEL_PIXELS)
    widget.weigh_by = "value_norm"  # the kernel's answer to the page's write
    page.evaluate("""s => window.attnscopeHarness.model.emit({attention: window.attnscopeHarness.fromWire(s.attention),
        thumbnails: window.attnscopeHarness.fromWire(s.thumbnails), one_scale: s.one_scale, weigh_by: s.weigh_by})""",
                  {"attention": wire(widget.attention), "thumbnails": wire(widget.thumbnails), "one_scale": widget.one_scale,
                   "weigh_by": widget.weigh_by})
    page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate(MODEL_PIXELS) == weighed

    fresh = open_widget(attnscope.AttentionWidget(text, model=default_model, view="model", weigh_by="value_norm"))
    fresh.wait_for_function("Number(document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells) > 0")
    fresh.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert fresh.evaluate(MODEL_PIXELS) == weighed
    assert not page.problems and not fresh.problems, page.problems + fresh.problems
