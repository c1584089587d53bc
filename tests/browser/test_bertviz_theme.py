"""The BertViz-style model_view and neuron_view follow the host's theme as every widget does
(issue 45 item 2): with BertViz's default display_mode="dark" they opened dark in a light
JupyterLab. An explicit display_mode still wins."""

from __future__ import annotations

import pytest
from real_widget import wire

import attnscope
from attnscope.widget.contract import contract_traits


@pytest.fixture
def in_jupyterlab(watched_page, server):
    """in_jupyterlab(widget, light) → the harness page drawing `widget` in a body marked as
    JupyterLab marks it for its light (or dark) theme."""

    def open_(widget, light: bool):
        page = watched_page(viewport={"width": 1400, "height": 1000}, color_scheme="light" if light else "dark")
        page.goto(f"{server}/tests/browser/harness.html")
        page.wait_for_function("window.harnessReady === true")
        page.evaluate("light => { document.body.dataset.jpThemeLight = String(light); }", light)
        state = {name: wire(getattr(widget, name)) for name in contract_traits(type(widget))}
        assert page.evaluate("s => window.attnscopeHarness.start(window.attnscopeHarness.fromWire(s))", state) == "function"
        page.wait_for_selector(".attnscope-root")
        return page

    return open_


def dark(page) -> bool:
    return page.eval_on_selector(".attnscope-root", "r => r.classList.contains('attnscope-dark')")


def test_model_view_and_neuron_view_open_in_the_hosts_theme(in_jupyterlab, default_model):
    inputs = default_model.tokenizer("The cat sat on the mat.", return_tensors="pt")
    attention = default_model.model(**inputs, output_attentions=True).attentions
    tokens = default_model.tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    model, tokenizer = default_model.model, default_model.tokenizer
    views = {
        "model": lambda **mode: attnscope.model_view(attention, tokens, **mode),
        "neuron": lambda **mode: attnscope.neuron_view(model, "bert", tokenizer, "The cat sat.", **mode),
    }
    for name, view in views.items():
        for light in (True, False):
            page = in_jupyterlab(view(), light)
            assert dark(page) is not light, (name, light)
            assert not page.problems, page.problems
        # Asked for, a theme wins over the host's.
        assert dark(in_jupyterlab(view(display_mode="dark"), light=True)), name
        assert not dark(in_jupyterlab(view(display_mode="light"), light=False)), name
