"""The attention-sink table of a run that grows (a generation, a token a step): GrowingSinks reads
only each step's new rows and gives attention_sinks(run)'s table of every step."""

from __future__ import annotations

import warnings

import pytest
import torch
from small_models import families, scaled_up
from test_token_labels import byte_level_bpe

import attnscope
from attnscope.analyses.sinks import GrowingSinks
from attnscope.engine.generation import generation_steps

PROMPT = "The café is naïve, and the lake near Zürich is cold."
MEASURES = ["alpha_first", "first_n_mass"]


def engine_of(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scaled_up(families(window=4, lm_head=True)[name]())
    model.generation_config.eos_token_id = []
    return attnscope.load(model, byte_level_bpe(), device="cpu")


@pytest.mark.parametrize("name", ["llama (GQA)", "qwen2 (GQA, sliding window)", "gemma2 (soft-capping)", "gpt-oss (sink logits)"])
def test_each_steps_table_is_attention_sinks_of_that_step_reading_only_the_new_rows(name, monkeypatch):
    engine = engine_of(name)
    growing, read = GrowingSinks(), []
    for k, run in enumerate(generation_steps(engine, PROMPT, 5, chat=False)):
        result = run.attention
        kind = type(result)
        block, columns = kind.attention_block, kind.first_columns

        def counted_block(self, layer, rows, cols, _block=block):
            read.append((rows, cols))
            return _block(self, layer, rows, cols)

        def counted_columns(self, layer, n, _columns=columns):
            read.append(((0, self.n_tokens), (0, n)))
            return _columns(self, layer, n)

        monkeypatch.setattr(kind, "attention_block", counted_block)
        monkeypatch.setattr(kind, "first_columns", counted_columns)
        read.clear()
        table = growing(result)
        monkeypatch.setattr(kind, "attention_block", block)
        monkeypatch.setattr(kind, "first_columns", columns)
        whole = attnscope.attention_sinks(result, progress=False)
        assert table[["layer", "head", "key_head", "sink"]].equals(whole[["layer", "head", "key_head", "sink"]])
        assert torch.allclose(torch.tensor(table[MEASURES].to_numpy()), torch.tensor(whole[MEASURES].to_numpy()),
                              rtol=1e-6, atol=1e-7), (name, k)
        assert table.attrs == whole.attrs
        n = result.n_tokens
        first_row = 0 if k == 0 else n - 1  # the prompt's rows once, then one row a step
        assert read and all(rows == (first_row, n) and cols == (0, 4) for rows, cols in read), read[:2]
        assert len(read) == result.n_layers


def test_another_run_of_the_model_starts_again_and_a_short_run_is_read_whole():
    """A run at least as long as the one read, of the same model, whose tokens differ: not taken for its next step."""
    engine = engine_of("llama (GQA)")
    growing = GrowingSinks()
    runs = [run.attention for run in generation_steps(engine, PROMPT, 3, chat=False)]
    growing(runs[-1])
    other = engine.run("The lake is cold, and the café near Zürich is far away, so we stay.", attention="on_demand")
    assert other.n_tokens >= runs[-1].n_tokens
    for result in (other, engine.run("A short text.")):
        table, whole = growing(result), attnscope.attention_sinks(result, progress=False)
        assert torch.allclose(torch.tensor(table[MEASURES].to_numpy()), torch.tensor(whole[MEASURES].to_numpy()), atol=1e-7)


def test_an_encoder_decoders_steps_are_read_whole(bert_tokenizer):
    """Its rows are its cross-attention over the source, then its own: not rows a step adds."""
    from small_models import tiny_bart

    engine = attnscope.load(tiny_bart(lm_head=True), bert_tokenizer, device="cpu")
    growing = GrowingSinks()
    for run in generation_steps(engine, PROMPT, 2, chat=False):
        table, whole = growing(run.attention), attnscope.attention_sinks(run.attention, progress=False)
        assert table.equals(whole)
