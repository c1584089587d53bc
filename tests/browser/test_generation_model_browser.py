"""A generation's model view in chromium (issue 48 item 3): clicking an output token changes every
cell to that token's row, on the saved page (offline, from its kept steps) and in the live widget
(the kernel's exact rows, through the widget's own handler), with a caption naming the token and step."""

from __future__ import annotations

import numpy as np
import pytest
from real_widget import answer_request
from test_generation_page_browser import (  # noqa: F401 (fixtures)
    FLOW, STEPS, generated, kept_row, saved, select_token, shown_tokens,
)
from test_head_view_browser import BUNDLE

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

CANVAS = "canvas.attnscope-thumbnails"
NOTE = ".attnscope-model-view .attnscope-scale-note"


def lines_of(rows) -> int:
    """The lines a row's cells draw: each weight at least 10% of its head's largest (THUMBNAIL_MIN_WEIGHT)."""
    return sum(int((row >= 0.1 * row.max()).sum()) for row in rows if row.max() > 0)


def open_tab(page, name: str) -> None:
    page.click(f".attnscope-tabs button:has-text('{name}')")


def shown_row(page, token: int, lines: int) -> None:
    page.wait_for_function(f"document.querySelector('{CANVAS}')?.dataset.row === '{token}'")
    assert page.eval_on_selector(CANVAS, "c => Number(c.dataset.lineCount)") == lines


def test_a_click_on_an_output_token_shows_its_kept_row_in_every_cell_of_the_saved_page(saved, generated):
    page, store = saved
    first = generated.output_start
    one, two = [i for i in shown_tokens(generated) if i - first + 1 <= store["kept"]][:2]
    for token in (one, two):
        open_tab(page, "Text")
        page.click(f"{FLOW} .attnscope-text-token[data-index='{token}']")
        select_token(page, token, token - first + 1)
        open_tab(page, "Model")
        kept = [np.zeros(len(generated.tokens), np.float32) for _ in range(generated.n_layers * generated.n_heads)]
        for layer in range(generated.n_layers):
            for head in range(generated.n_heads):
                keys, weights, _ = kept_row(store, layer, head, token)
                kept[layer * generated.n_heads + head][keys] = weights
        shown_row(page, token, lines_of(kept))
        assert page.eval_on_selector(CANVAS, "c => Number(c.dataset.cells)") == generated.n_layers * generated.n_heads
        note = page.text_content(NOTE)
        assert note.startswith(f"Token {token} “{generated.tokens[token]}” (step {token - first + 1} of {STEPS}): its row in every "
                               "layer and head. This saved page keeps each head's 8 largest weights of the row"), note
    assert not page.problems, page.problems


def test_a_click_on_an_output_token_shows_its_exact_row_in_every_cell_of_the_live_widget(open_widget, generated):
    page = open_widget(generated, width=1400, height=1000)
    first, n = generated.output_start, len(generated.tokens)
    answer_request(page, generated, "attention_rows")  # the text view opens on the last token
    clicked = shown_tokens(generated)[0]
    page.click(f"{FLOW} .attnscope-text-token[data-index='{clicked}']")
    answer_request(page, generated, "attention_rows")
    select_token(page, clicked, clicked - first + 1)
    open_tab(page, "Model")
    request = answer_request(page, generated, "token_rows")
    assert request["token"] == clicked
    full = generated.result
    rows = [full.attention_rows(layer, head, [clicked])[0].numpy() for layer in range(generated.n_layers) for head in range(generated.n_heads)]
    shown_row(page, clicked, lines_of(rows))
    assert page.text_content(NOTE).startswith(f"Token {clicked} “{generated.tokens[clicked]}” (step {clicked - first + 1} of {STEPS}): "
                                              "its row in every layer and head. Line opacity")  # whole rows: no note of what is kept
    assert n - 1 != clicked
    assert not page.problems, page.problems
