"""A generation saved and shared (issue 48 items 3 and 6): the saved page keeps each output token's
row sparse, its largest weights for every layer, head and the mean of the heads, as the run's own
rows have them, within a budget it states truly; the widget says where the output begins; the
notebook's picture shows the generated text and the selected step."""

from __future__ import annotations

import html
import re
import warnings

import numpy as np
import pytest
import torch
from small_models import families, scaled_up
from test_generation_widget import PROMPT
from test_token_labels import byte_level_bpe

import attnscope
from attnscope.widget import long_answers
from attnscope.widget.export import page_state
from attnscope.widget.picture import picture_svg

STEPS = 6


def seeded_engine():
    """test_generation_widget's random Llama, the same each run: the same tokens to read and click."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scaled_up(families(window=4, lm_head=True)["llama (GQA)"]())
    model.generation_config.eos_token_id = []  # it writes every step asked for
    return attnscope.load(model, byte_level_bpe(), device="cpu")


@pytest.fixture(scope="module")
def generated():
    widget = attnscope.generate(PROMPT, model=seeded_engine(), max_new_tokens=STEPS, chat=False)
    widget.wait(timeout=120)
    yield widget
    widget.close()


def part(store: dict, name: str) -> np.ndarray:
    """One of a kept-steps part's arrays (keys, weights or share), as the page holds it."""
    given = store[name]
    return np.frombuffer(given["data"], dtype=given["dtype"]).reshape(given["shape"])


def kept_rows(store: dict, kind: str):
    """(layer, head (-1: the mean), step, keys, weights, share) of every row the page keeps."""
    keys, weights, share = (part(store[kind], name) for name in ("keys", "weights", "share"))
    for slot, layer in enumerate(store["layers"]):
        for head in range(store["n_heads"]) if kind == "heads" else [-1]:
            at = (slot, head) if kind == "heads" else (slot,)
            for step in range(store["kept"]):
                yield layer, head, step, keys[(*at, step)], weights[(*at, step)].astype(np.float32), float(share[(*at, step)])


def full_rows(result, layer: int, head: int, tokens: range) -> np.ndarray:
    """The run's own rows (what the live text view is sent), float32."""
    rows = result.mean_attention_rows(layer, tokens) if head == -1 else result.attention_rows(layer, head, tokens)
    return rows.numpy()


def check_rows(store: dict, result) -> dict:
    """Each kept row is its full row's largest weights, exact to float16, with the share of the
    row's weight they hold; → the true shares, by kind."""
    first, shares = store["first"], {"heads": [], "mean": []}
    rows = {}
    for kind in shares:
        for layer, head, step, keys, weights, share in kept_rows(store, kind):
            if (layer, head) not in rows:
                rows[layer, head] = full_rows(result, layer, head, range(first, first + store["kept"]))
            row = rows[layer, head][step]
            assert len(set(keys.tolist())) == len(keys), "a key kept twice"
            assert np.allclose(weights, row[keys], rtol=2**-11, atol=1e-7), (layer, head, step)
            left_out = np.delete(row, keys)
            assert left_out.size == 0 or left_out.max() <= row[keys].min() * (1 + 1e-5) + 1e-7, "not the largest"
            true_share = float(row[keys].sum() / row.sum())
            assert share == pytest.approx(true_share, rel=1e-3, abs=1e-4)
            shares[kind].append(true_share)
    return shares


def test_the_widget_says_where_the_output_begins(generated, default_model):
    run = generated.generation
    assert generated.output_start == len(run.prompt_ids) and len(generated.tokens) == len(run.ids)
    assert attnscope.AttentionWidget("The cat sat.", model=default_model).output_start == -1


def test_a_saved_page_keeps_each_steps_largest_weights_and_says_truly_how_much(generated, monkeypatch):
    monkeypatch.setattr(long_answers, "STEP_MEAN_KEYS", 5)  # fewer than the tokens: the mean's rows are cut too
    page = page_state(generated)
    store = page["served"]["steps"]
    first = generated.output_start
    assert (store["first"], store["steps"], store["kept"]) == (first, STEPS, STEPS)
    assert store["layers"] == list(range(generated.n_layers)) and store["n_tokens"] == len(generated.tokens)
    assert (store["head_keys"], store["mean_keys"]) == (long_answers.STEP_HEAD_KEYS, 5)
    assert part(store["heads"], "keys").shape == (generated.n_layers, generated.n_heads, STEPS, long_answers.STEP_HEAD_KEYS)
    shares = check_rows(store, generated.result)
    percent = long_answers._percent
    for kind, said in (("heads", "each head's row keeps its 8 largest weights"), ("mean", "the mean of the heads its 5 largest")):
        mean, least = float(np.mean(shares[kind])), min(shares[kind])
        assert least < 0.999  # something is dropped: the statement is about a cut
        assert store["summary"][kind]["mean"] == pytest.approx(mean, abs=1e-5)
        assert store["summary"][kind]["least"] == pytest.approx(least, abs=1e-5)
        assert f"{said} ({percent(mean)}" in store["note"] and f"at least {percent(least)})" in store["note"]
    assert "Steps after" not in store["note"]  # every step is kept
    assert store["note"] in page["state"]["notice"].splitlines()
    # The head view's window around each kept token, where the live widget puts it.
    windows = [long_answers.pl.window_around(first + step, store["n_tokens"], store["window_tokens"])[0] for step in range(STEPS)]
    assert store["window_starts"] == windows


def test_steps_past_the_budget_are_not_kept_and_the_page_says_so(generated, monkeypatch):
    monkeypatch.setattr(long_answers, "KEPT_STEPS", 4)
    store = page_state(generated)["served"]["steps"]
    assert (store["steps"], store["kept"], len(store["window_starts"])) == (STEPS, 4, 4)
    assert part(store["heads"], "keys").shape[2] == 4
    first = generated.output_start
    assert f"replays steps 1–4 (tokens {first}–{first + 3})" in store["note"] and "Steps after 4 are not kept." in store["note"]
    check_rows(store, generated.result)


def test_a_page_weighed_by_value_norm_keeps_the_weighed_rows(generated):
    generated.weigh_by = "value_norm"
    try:
        store = page_state(generated)["served"]["steps"]
        check_rows(store, generated.result)  # the drawn run: α·‖f‖
        plain = full_rows(generated.generation.attention, 1, 2, range(generated.output_start, generated.output_start + 1))
        weighed = full_rows(generated.result, 1, 2, range(generated.output_start, generated.output_start + 1))
        assert not np.allclose(plain, weighed)  # the check above read other numbers than attention's
    finally:
        generated.weigh_by = "attention"


def svg_text(svg: str) -> str:
    """What an SVG says, its lines joined (a caption wraps where the picture's width ends)."""
    return " ".join(html.unescape(text) for text in re.findall(r">([^<]*)</text>", svg))


def test_the_notebooks_picture_shows_the_generated_text_and_the_selected_step(generated):
    first = generated.output_start
    generated.focus_token = first + 2
    written = "".join(generated.token_reading[first:]).strip()[:20]
    try:
        svg, why = picture_svg(generated)
        assert svg is not None, why
        said = svg_text(svg)
        assert f"The model wrote {STEPS} tokens after a prompt of {first}: “{written}" in said
        assert f"Step 3 of {STEPS}:" in said and f"(token {first + 2}), attention from it" in said
        assert f"the {STEPS} tokens the model wrote (from token {first})" in said and "#d4650b" in svg  # the output marked
        generated.view = "head"
        svg, why = picture_svg(generated)
        assert svg is not None, why
        said = svg_text(svg)
        assert f"The model wrote {STEPS} tokens after a prompt of {first}:" in said and f"(step 3 of {STEPS})" in said
    finally:
        generated.view, generated.focus_token = "text", len(generated.tokens) - 1
