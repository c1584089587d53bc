"""A generation saved and shared (issue 48 items 3 and 6): the saved page keeps each output token's
row sparse, its largest weights for every layer, head and the mean of the heads, as the run's own
rows have them, within a budget it states truly; the widget says where the output begins; the
notebook's picture shows the generated text and the selected step; the model view draws the selected
token's row in every layer and head."""

from __future__ import annotations

import html
import re
import warnings

import numpy as np
import pytest
import torch
from small_models import families, scaled_up
from test_generation import eager_attention
from test_generation_widget import PROMPT
from test_token_labels import byte_level_bpe

import attnscope
from attnscope.errors import InputError
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


def test_the_pictures_quote_reads_as_the_text_line_breaks_as_arrows_not_escapes():
    """A newcomer's saved list read “1. Red\\n2. Blue\\n3. Green”: the picture had no text to quote
    from (picture._page_of emptied it), so it quoted the tokens' readings, escapes and all."""
    engine = seeded_engine()
    written = engine.tokenizer.convert_tokens_to_ids(["A", "Ċ"])  # "A", then a line break, in turn
    steps = []

    def choose(_module, _inputs, logits):  # the test's own model, its hook removed below
        logits = torch.full_like(logits, -1e4)
        logits[..., written[len(steps) % 2]] = 0
        steps.append(1)
        return logits

    hook = engine.model.lm_head.register_forward_hook(choose)
    try:
        widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=5, chat=False)
        run = widget.wait(timeout=120)
    finally:
        hook.remove()
    try:
        assert run.text == "A\nA\nA" and widget.token_reading[widget.output_start:] == ["A", "↵\n", "A", "↵\n", "A"]
        svg, why = picture_svg(widget)
        assert svg is not None, why
        assert "The model wrote 5 tokens after a prompt of" in svg_text(svg) and "“A ↵ A ↵ A”" in svg_text(svg)
    finally:
        widget.close()


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


def test_in_a_notebook_page_the_picture_is_drawn_once_the_run_has_ended(monkeypatch):
    """Issue 48's speed: a picture drawn while the model writes is stale at once, and its drawing
    and publication delayed the first token's message (112 ms at 8,160 tokens). From a notebook
    page's cell, the output says it is drawn at the end; nothing is drawn while the run goes on,
    the cell's end included; the finished run is drawn once, all its tokens in it."""
    import asyncio
    import threading
    import types

    from attnscope.widget import picture as picture_module

    displayed, published, drawn_while, made = [], [], [], {}
    monkeypatch.setattr(picture_module.PictureOutputs, "QUIET_S", 0.05)

    def display(obj, **kwargs):  # IPython's display: a widget displays itself and its picture
        return obj._ipython_display_() if hasattr(obj, "_ipython_display_") else displayed.append(obj)

    monkeypatch.setattr("IPython.display.display", display)
    monkeypatch.setattr("IPython.display.update_display", lambda bundle, **kw: published.append(bundle))
    real_drawn = picture_module._drawn
    monkeypatch.setattr(picture_module, "_drawn", lambda page: (drawn_while.append(made["widget"].generation.finish), real_drawn(page))[1])
    shell = types.SimpleNamespace(kernel=types.SimpleNamespace(get_parent=lambda channel: {"metadata": {"cellId": "c1"}}),
                                  events=types.SimpleNamespace(register=lambda *a: None, unregister=lambda *a: None),
                                  execution_count=1)
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    gate = threading.Event()  # the run's steps wait until the cell has ended
    steps = attnscope.engine.generation.generation_steps
    monkeypatch.setattr("attnscope.widget.generation_widget.generation_steps",
                        lambda *a, **kw: (run for run in steps(*a, **kw) if run.steps < 2 or gate.wait(30)))

    async def cell():
        made["widget"] = widget = attnscope.generate(PROMPT, model=seeded_engine(), max_new_tokens=STEPS, chat=False)
        widget._pictures._after_cell()  # the cell ends while the model writes
        await asyncio.sleep(0.2)
        assert widget.generation.finish is None and drawn_while == [] and published == []
        gate.set()
        while not published:
            await asyncio.sleep(0.02)

    outcome = {}

    def kernel():  # the kernel's loop, in a thread of its own (pytest's may hold one in this one)
        try:
            asyncio.run(cell())
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            gate.set()

    runner = threading.Thread(target=kernel)
    runner.start()
    runner.join(timeout=120)
    try:
        if "error" in outcome:
            raise outcome["error"]
        notes = [bundle.get("text/plain", "") for bundle in displayed if isinstance(bundle, dict)]
        assert any(picture_module.DRAWN_AT_END in note for note in notes), notes
        assert drawn_while == ["max_new_tokens"]  # one drawing, of the finished run
        [bundle] = published
        assert f"The model wrote {STEPS} tokens" in svg_text(bundle["image/svg+xml"])
    finally:
        made["widget"].close()


# The model view of the selected token (issue 48 item 3): the "token_rows" answer is that token's
# exact row in every included layer × head, the rows of one eager forward over the prompt and the
# output (never a T × T map), weighed by value norm as the run is.

def token_rows(widget, token: int) -> tuple[dict, np.ndarray]:
    """The kernel's answer to the model view's request, through the widget's channel handler."""
    content, buffers = widget._answer_long("token_rows")({"kind": "request", "type": "token_rows", "token": token}, [])
    return content, np.frombuffer(buffers[0], dtype=np.float32).reshape(content["shape"])


@pytest.fixture(scope="module")
def full(generated):
    """Per layer heads × T × T from one eager forward over the prompt and the output (the same
    seeded weights as the widget's model)."""
    return eager_attention(seeded_engine().model, generated.generation.ids)


def test_the_answer_is_the_tokens_row_of_the_full_attention_in_every_layer_and_head(generated, full):
    n = len(generated.tokens)
    for token in (generated.output_start, n - 1):
        content, rows = token_rows(generated, token)
        assert content["token"] == token and content["n_tokens"] == n and content["result_id"] == generated.result_id
        assert content["layers"] == list(range(generated.n_layers)) and content["heads"] == list(range(generated.n_heads))
        assert rows.shape == (generated.n_layers, generated.n_heads, 1, n)  # one row a cell: O(T), not T × T
        for layer in range(generated.n_layers):
            assert np.allclose(rows[layer, :, 0], full[layer][:, token].numpy(), atol=1e-4), (token, layer)
        assert rows[:, :, 0, token + 1:].max(initial=0) == 0  # causal: nothing after the token


def test_the_answer_keeps_to_the_included_layers_and_heads(generated, full):
    token = generated.output_start + 1
    generated.include_layers, generated.include_heads = [1], [0, 2]
    try:
        content, rows = token_rows(generated, token)
        assert content["layers"] == [1] and content["heads"] == [0, 2] and rows.shape[:2] == (1, 2)
        assert np.allclose(rows[0, :, 0], full[1][[0, 2], token].numpy(), atol=1e-4)
    finally:
        generated.include_layers = generated.include_heads = None


def test_weighed_by_value_norm_the_rows_are_the_weighed_runs(generated, full):
    token = len(generated.tokens) - 1
    generated.weigh_by = "value_norm"
    try:
        content, rows = token_rows(generated, token)
        assert content["weigh_by"] == "value_norm"
        weighed = torch.stack([generated.result.attention_block(layer, (token, token + 1), (0, len(generated.tokens)))
                               for layer in range(generated.n_layers)]).numpy()
        assert np.allclose(rows, weighed, rtol=1e-6, atol=1e-7)
        assert not np.allclose(rows[:, :, 0], np.stack([f[:, token].numpy() for f in full]), atol=1e-3)  # not attention's
    finally:
        generated.weigh_by = "attention"


def test_a_bad_token_is_refused_with_its_name(generated):
    with pytest.raises(InputError, match="token"):
        token_rows(generated, len(generated.tokens))


def test_the_notebooks_picture_of_the_model_view_draws_the_selected_tokens_row(generated):
    first = generated.output_start
    generated.focus_token, generated.view = first + 2, "model"
    try:
        svg, why = picture_svg(generated)
        assert svg is not None, why
        said = svg_text(svg)
        word = generated.tokens[first + 2]
        assert f"Token {first + 2} “{word}” (step 3 of {STEPS}): its row in every layer and head." in said
    finally:
        generated.view, generated.focus_token = "text", len(generated.tokens) - 1
