"""A generation's model view of the selected token (issue 48 item 3): the "token_rows" answer is that
token's exact row in every included layer × head, the rows of one eager forward over the prompt and
the output (never a T × T map), weighed by value norm as the run is; the notebook's picture of the
model view draws it and says so. A tiny random Llama: no SmolLM2, nothing downloaded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_generation import eager_attention
from test_generation_page import STEPS, generated, seeded_engine, svg_text  # noqa: F401 (a fixture)

from attnscope.errors import InputError
from attnscope.widget.long_answers import LongAnswers
from attnscope.widget.picture import picture_svg


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
