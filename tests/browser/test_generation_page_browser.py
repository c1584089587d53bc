"""A generation in chromium (issue 48 items 3 and 6): the saved page, offline, replays the steps it
keeps (a click on an output token, or the arrow keys, shades the text by that step's kept row, and
the head view draws it), says so for a step it does not keep, and marks where the output begins;
the live widget marks it and names the step too."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from real_widget import answer_request
from test_head_view_browser import BUNDLE
from test_saved_state import answer_as_the_kernel

import attnscope
from attnscope.widget import long_answers

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_generation_page import kept_rows, seeded_engine  # noqa: E402
from test_generation_widget import PROMPT  # noqa: E402

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

STEPS, KEPT = 8, 4
FLOW = ".attnscope-text-flow"
CAPTION = ".attnscope-text-caption"


@pytest.fixture(scope="module")
def generated():
    widget = attnscope.generate(PROMPT, model=seeded_engine(), max_new_tokens=STEPS, chat=False)
    widget.wait(timeout=120)
    yield widget
    widget.close()


@pytest.fixture
def saved(generated, tmp_path, watched_page, monkeypatch):
    """(page, the steps it keeps): the generation's saved page, keeping its first KEPT steps, opened offline."""
    monkeypatch.setattr(long_answers, "KEPT_STEPS", KEPT)
    store = long_answers.LongAnswers.of(generated).steps(generated.output_start, list(range(generated.n_layers)))
    path = generated.save_html(tmp_path / "generation.html")
    page = watched_page(offline=True, viewport={"width": 1400, "height": 1000})
    page.context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    page.goto(path.as_uri())
    page.wait_for_function(f"document.querySelector('{FLOW}')?.dataset.shading === 'done'")
    return page, store


def shown_tokens(widget) -> list[int]:
    """The output tokens with text of their own (a random model writes bytes, some of them parts
    of a character shown on the token before): those a reader can click."""
    return [i for i in range(widget.output_start, len(widget.tokens)) if widget.token_reading[i].strip()]


def kept_row(store, layer: int, head: int, token: int) -> tuple[np.ndarray, np.ndarray, float]:
    step = token - store["first"]
    kind = "mean" if head == -1 else "heads"
    return next((keys, weights, share) for l_, h, s, keys, weights, share in kept_rows(store, kind)
                if (l_, h, s) == (layer, head, step))


def select_token(page, token: int, step: int) -> None:
    page.wait_for_function(f"document.querySelector('{CAPTION}').textContent.startsWith('Step {step} of {STEPS}:')")
    page.wait_for_function(f"document.querySelector('{FLOW} [aria-selected=\"true\"]')?.dataset.index === '{token}'")


def check_shading(page, store, layer: int, head: int, token: int) -> None:
    """The text is shaded by the kept row: its top list is the kept weights, every token not kept
    has the zero weight's shade, and each kept weight of some size has another."""
    keys, weights, share = kept_row(store, layer, head, token)
    percent = long_answers._percent(share)
    page.wait_for_function(f"document.querySelector('{CAPTION}').textContent.includes('largest weights ({percent} of its weight)')")
    listed = page.eval_on_selector_all(".attnscope-top-item", "items => items.map(i => i.querySelector('.attnscope-top-where').textContent)")
    kept = {k: w for k, w in zip(keys.tolist(), weights.tolist()) if w > 0}
    pairs = [tuple(text.strip().split(" · ")) for text in listed]
    # The list is the kept row's largest, each with its kept weight (ties in either order).
    assert [value for _, value in pairs] == [f"{w:.3f}" for w in sorted(kept.values(), reverse=True)[:12]]
    assert all(f"{kept[int(token)]:.3f}" == value for token, value in pairs)
    shades = page.eval_on_selector_all(f"{FLOW} .attnscope-text-token", "spans => spans.map(s => s.style.background)")
    blank = {shades[i] for i in range(len(shades)) if i not in set(keys.tolist())}
    assert len(blank) <= 1, blank  # the weights left out show as 0 (a row kept whole leaves none out)
    largest = weights.max()
    assert all(shades[k] not in blank for k, w in zip(keys.tolist(), weights.tolist()) if w >= 0.05 * largest)


def test_a_click_on_an_output_token_replays_its_kept_row_and_the_keys_step_on(saved, generated):
    page, store = saved
    first = generated.output_start
    shown = shown_tokens(generated)
    clicked = next(i for i in shown if i - first + 1 < KEPT)  # a kept step with a kept step after it
    page.select_option(".attnscope-text-view select.attnscope-focus-head", "0")
    page.click(f"{FLOW} .attnscope-text-token[data-index='{clicked}']")
    select_token(page, clicked, clicked - first + 1)
    assert "This saved page keeps this row's 8 largest weights" in page.text_content(CAPTION)
    check_shading(page, store, 0, 0, clicked)
    page.keyboard.press("ArrowRight")  # the next step, from the keys
    select_token(page, clicked + 1, clicked - first + 2)
    check_shading(page, store, 0, 0, clicked + 1)
    page.keyboard.press("ArrowLeft")  # and back
    select_token(page, clicked, clicked - first + 1)
    check_shading(page, store, 0, 0, clicked)
    # Another layer and the mean of its heads: the page keeps them too.
    page.select_option(".attnscope-text-view select.attnscope-focus-head", "-1")
    page.select_option("select.attnscope-layer", "1")  # the selection stays
    assert "mean of the layer's heads, layer 1. This saved page keeps this row's" in page.text_content(CAPTION)
    check_shading(page, store, 1, -1, clicked)
    assert not page.problems, page.problems


def test_a_step_the_page_does_not_keep_says_so(saved, generated):
    page, _ = saved
    first = generated.output_start
    later = next((i for i in shown_tokens(generated) if i - first + 1 > KEPT), None)
    assert later is not None, "the model wrote no visible token past the kept steps"
    page.click(f"{FLOW} .attnscope-text-token[data-index='{later}']")
    page.wait_for_function(f"document.querySelector('{CAPTION}').textContent.includes('steps after {KEPT} of {STEPS} are not kept')")
    caption = page.text_content(CAPTION)
    assert caption.startswith(f"Token {later} (step {later - first + 1}): steps after {KEPT} of {STEPS} are not kept. "
                              f"This saved page keeps the rows of steps 1–{KEPT} (tokens {first}–{first + KEPT - 1}): its row "
                              "needs the live widget"), caption
    assert page.evaluate(f"document.querySelector('{FLOW}').classList.contains('attnscope-stale')")
    page.click(f"{FLOW} .attnscope-text-token[data-index='1']")  # a prompt token's row is not kept either
    page.wait_for_function(f"document.querySelector('{CAPTION}').textContent.startsWith('Token 1 is in the prompt.')")
    assert f"replays steps 1–{KEPT}" in page.text_content(".attnscope-notice") and f"Steps after {KEPT} are not kept." in \
        page.text_content(".attnscope-notice")  # the budget, said where the page opens
    assert not page.problems, page.problems


def test_the_output_is_marked_where_it_begins(saved, generated):
    page, _ = saved
    first = generated.output_start
    mark = page.locator(f"{FLOW} .attnscope-output-mark")
    assert mark.is_visible() and mark.text_content() == "output ▸"
    assert mark.evaluate("m => m.nextElementSibling.dataset.index") == str(first)
    marked = page.eval_on_selector_all(f"{FLOW} .attnscope-text-token", "s => s.map(x => x.classList.contains('attnscope-output'))")
    assert marked == [i >= first for i in range(len(generated.tokens))]
    # The head view around a kept step draws its kept rows, and says what it leaves out.
    clicked = shown_tokens(generated)[0]
    page.click(f"{FLOW} .attnscope-text-token[data-index='{clicked}']")
    page.click(".attnscope-tabs button:has-text('Head')")
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    caption = page.text_content(".attnscope-head-view")
    assert f"(step {clicked - first + 1} of {STEPS})" in caption and "lines from the prompt's tokens are not drawn" in caption
    assert not page.problems, page.problems


def test_the_live_widget_marks_the_output_and_names_the_step(open_widget, generated):
    page = open_widget(generated, width=1400, height=1000)
    answer_as_the_kernel(page, generated)
    last = len(generated.tokens) - 1
    select_token(page, last, STEPS)
    assert page.locator(f"{FLOW} .attnscope-output-mark").is_visible()
    assert "largest weights" not in page.text_content(CAPTION)  # the live row is whole
    assert not page.problems, page.problems


# The model view (issue 48 item 3): clicking an output token changes every cell to that token's row,
# on the saved page (from its kept steps) and in the live widget (the kernel's exact rows).
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
