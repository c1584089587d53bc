"""The engine's invariant and its handling of bad input, for every supported family."""

import json
import socket
import time
import warnings

import pytest
import torch
import transformers
from huggingface_hub import constants

import attnscope
from attnscope import InputError, ModelNotFoundError, NoAttentionError

VOCAB = 30522  # the embedded BERT tokenizer's vocabulary, reused by every small model below
SMALL = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)


def small_models():
    return {
        "bert": lambda: transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL)),
        "roberta": lambda: transformers.RobertaModel(transformers.RobertaConfig(vocab_size=VOCAB, **SMALL)),
        "electra": lambda: transformers.ElectraModel(
            transformers.ElectraConfig(vocab_size=VOCAB, embedding_size=16, **SMALL)
        ),
        "albert": lambda: transformers.AlbertModel(
            transformers.AlbertConfig(vocab_size=VOCAB, embedding_size=16, **SMALL)
        ),
        "distilbert": lambda: transformers.DistilBertModel(
            transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=3, n_heads=4, hidden_dim=37, max_position_embeddings=64)
        ),
        "gpt2": lambda: transformers.GPT2Model(
            transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=3, n_head=4, n_positions=64)
        ),
        # Rotary position embeddings and grouped-query attention (4 query heads share 2 key heads).
        "llama-gqa": lambda: transformers.LlamaModel(
            transformers.LlamaConfig(vocab_size=VOCAB, num_key_value_heads=2, **SMALL)
        ),
        "qwen2-gqa": lambda: transformers.Qwen2Model(
            transformers.Qwen2Config(vocab_size=VOCAB, num_key_value_heads=2, **SMALL)
        ),
        "gpt2-layer-scaled": lambda: transformers.GPT2Model(
            transformers.GPT2Config(
                vocab_size=VOCAB, n_embd=32, n_layer=3, n_head=4, n_positions=64, scale_attn_by_inverse_layer_idx=True
            )
        ),
    }


@pytest.mark.parametrize("family", list(small_models()))
def test_softmax_of_captured_qk_reproduces_model_attention(family, bert_tokenizer):
    torch.manual_seed(0)
    model = small_models()[family]()
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    result = engine.run("The quick brown fox jumps over the lazy dog.", "It was not amused.")

    n_tokens = len(result.tokens)
    assert result.attention.shape == (3, 4, n_tokens, n_tokens)
    assert result.attention.dtype == torch.float32
    assert result.queries.shape == result.keys.shape == (3, 4, n_tokens, 8)
    error = (result.attention_from_qk() - result.attention).abs().max().item()
    assert error <= 1e-5, f"{family}: max abs error {error}"
    # The check must be able to fail: a wrong scale breaks it.
    result.scaling = [s * 2 for s in result.scaling]
    assert (result.attention_from_qk() - result.attention).abs().max().item() > 1e-3


def test_causal_models_are_masked(bert_tokenizer):
    model = small_models()["gpt2"]()
    result = attnscope.load(model, bert_tokenizer, device="cpu").run("one two three four")
    assert result.causal
    future = torch.ones_like(result.attention[0, 0], dtype=torch.bool).triu(1)
    assert result.attention[:, :, future].abs().max().item() == 0.0


def test_albert_shared_layer_is_captured_once_per_layer(bert_tokenizer):
    model = small_models()["albert"]()
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    assert len(engine.attention_modules) == 1  # one shared module, called for each of the 3 layers
    result = engine.run("shared weights")
    assert result.queries.shape[0] == 3
    assert not torch.equal(result.queries[0], result.queries[1])


def test_default_model_is_the_embedded_minilm(default_model):
    result = default_model.run("The cat sat on the mat.", "It was happy.")
    assert result.tokens[:3] == ["[CLS]", "the", "cat"]
    assert result.attention.shape[:2] == (6, 12)
    assert result.sentence_b_start == result.tokens.index("[SEP]") + 1
    assert result.text_b == "It was happy."
    assert default_model.model.config._attn_implementation == "eager"
    assert (result.attention_from_qk() - result.attention).abs().max().item() <= 1e-5
    rows = result.attention.sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)


def test_model_in_training_mode_is_restored(bert_tokenizer):
    model = small_models()["bert"]()
    model.train()
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    first = engine.run("dropout must be off").attention
    second = engine.run("dropout must be off").attention
    assert torch.equal(first, second)
    assert model.training


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_text_is_refused(default_model, text):
    with pytest.raises(InputError, match="empty"):
        default_model.run(text)


def test_batch_is_refused_with_its_size(default_model):
    with pytest.raises(InputError, match="batch of 3"):
        default_model.run(["a", "b", "c"])
    # A batch of one is just one text.
    assert default_model.run(["a"]).tokens == ["[CLS]", "a", "[SEP]"]


def test_long_text_is_truncated_and_says_so(default_model):
    text = " ".join(["word"] * 40)
    with pytest.warns(UserWarning, match="truncated from 42 to 10"):
        result = default_model.run(text, max_length=10)
    assert len(result.tokens) == 10
    assert result.tokens[-1] == "[SEP]"
    assert result.truncated_from == 42


def test_text_beyond_model_positions_is_truncated_to_them(default_model):
    with pytest.warns(UserWarning, match="truncated"):
        result = default_model.run(" ".join(["word"] * 600))
    assert len(result.tokens) == 512
    assert result.attention.shape[-1] == 512


def test_max_length_over_model_limit_is_refused(default_model):
    with pytest.raises(InputError, match="512 positions"):
        default_model.run("hi", max_length=4096)


def test_unknown_model_offline_names_it():
    with pytest.raises(ModelNotFoundError, match="no-such-org/no-such-model.*not cached locally"):
        attnscope.load("no-such-org/no-such-model", device="cpu")


def test_a_misspelled_name_suggests_the_nearest_known_one():
    with pytest.raises(ModelNotFoundError, match=r"'smolm2' is not cached.*Did you mean 'smollm2' \(attnscope's packaged SmolLM2"):
        attnscope.load("smolm2", device="cpu")
    with pytest.raises(ModelNotFoundError) as caught:  # nothing near: no guess
        attnscope.load("no-such-org/no-such-model", device="cpu")
    assert "Did you mean" not in str(caught.value)


@pytest.fixture
def hub_down(monkeypatch):
    """Downloads allowed (no HF_HUB_OFFLINE), and the hub at a local port nothing listens on."""
    from attnscope.engine import hub

    with socket.socket() as closed:  # a port just freed: connections to it are refused at once
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", *hub._PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(hub, "_last_probe", None)
    return hub


def test_without_a_network_a_name_not_cached_fails_at_once_and_says_why(hub_down, monkeypatch):
    """The hub client's retries (24–33 s offline) are never reached: the hub is probed once."""
    calls = []
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained",
                        lambda name, **kwargs: calls.append(kwargs) or (_ for _ in ()).throw(OSError("not cached")))
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError, match=r"'smolm2' is not cached locally, and the Hugging Face hub cannot be "
                       r"reached from here \(127\.0\.0\.1: .*\)\. Did you mean 'smollm2'"):
        attnscope.load("smolm2", device="cpu")
    assert time.monotonic() - start < hub_down.PROBE_SECONDS
    assert [c.get("local_files_only") for c in calls] == [True]  # the download was never tried


def test_the_probe_does_not_decide_when_the_hub_answers_or_a_proxy_stands_between(hub_down, monkeypatch):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{listening.getsockname()[1]}")
        assert hub_down.hub_unreachable() is None
    monkeypatch.setattr(hub_down, "_last_probe", None)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert hub_down.hub_unreachable() is None


def test_a_models_layer_count_is_read_from_its_config_without_loading_it(tmp_path, monkeypatch):
    """hub.config_layers (what the CLI checks --layers with, before torch): the embedded default's,
    a folder's by each family's key, a hub-cache snapshot's; None where it is not known so."""
    from attnscope.engine import hub

    assert hub.config_layers(None) == 6  # the embedded MiniLM
    assert hub.config_layers("smollm2") is None  # one GGUF file, read only on load
    for name, config, expected in [("bert", {"num_hidden_layers": 4}, 4), ("gpt2", {"n_layer": 3}, 3),
                                   ("t5", {"num_layers": 2, "is_encoder_decoder": True}, None),
                                   ("odd", {"num_hidden_layers": True}, None), ("none", {}, None)]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        assert hub.config_layers(str(tmp_path / name)) == expected, name
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    assert hub.config_layers(str(tmp_path / "broken")) is None
    assert hub.config_layers(str(tmp_path / "missing")) is None  # neither a folder nor a cached name
    snapshot = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / ("0f" * 20)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"num_hidden_layers": 5}')
    (tmp_path / "hub" / "models--acme--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny" / "refs" / "main").write_text("0f" * 20)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert hub.config_layers("acme/tiny") == 5


def test_model_without_attention_is_a_clear_error(bert_tokenizer):
    class NoAttentionConfig(transformers.PretrainedConfig):
        model_type = "no-attention-test"

    class NoAttentionModel(transformers.PreTrainedModel):
        config_class = NoAttentionConfig

        def __init__(self, config):
            super().__init__(config)
            self.embed = torch.nn.Embedding(VOCAB, 8)

        def forward(self, input_ids=None, **kwargs):
            return transformers.modeling_outputs.BaseModelOutput(last_hidden_state=self.embed(input_ids))

    engine = attnscope.load(NoAttentionModel(NoAttentionConfig()), bert_tokenizer, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NoAttentionError, match="no attention weights"):
            engine.run("hello")


def test_model_needs_a_tokenizer_or_a_name():
    model = small_models()["bert"]()
    with pytest.raises(attnscope.AttnscopeError, match="tokenizer"):
        attnscope.load(model, device="cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU on this machine")
def test_default_device_is_cuda_when_present(bert_tokenizer):
    engine = attnscope.load(small_models()["bert"](), bert_tokenizer)
    result = engine.run("on the gpu")
    assert result.attention.device.type == "cuda"
    assert (result.attention_from_qk() - result.attention).abs().max().item() <= 1e-5


def test_rotary_models_show_rotated_queries_and_shared_keys(bert_tokenizer):
    """Llama: q and k are captured after the rotary embedding, and with grouped-query attention
    each query head is paired with its shared key head (heads 0 and 1 share key head 0)."""
    torch.manual_seed(0)
    model = small_models()["llama-gqa"]()
    with torch.no_grad():  # sharper attention, so that a missing rotation would show
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(8)
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    result = engine.run("The quick brown fox jumps over the lazy dog.")
    assert result.causal
    assert torch.equal(result.keys[:, 0], result.keys[:, 1]) and torch.equal(result.keys[:, 2], result.keys[:, 3])
    assert not torch.equal(result.keys[:, 1], result.keys[:, 2])
    assert (result.attention_from_qk() - result.attention).abs().max() <= 1e-5
    # Without the rotation (the raw projections), the same check fails.
    encoded = engine.tokenizer("The quick brown fox jumps over the lazy dog.", return_tensors="pt")
    layer0 = engine.model.layers[0].self_attn
    with torch.inference_mode():
        hidden = engine.model.embed_tokens(encoded["input_ids"])
        hidden = engine.model.layers[0].input_layernorm(hidden)
        raw_q = layer0.q_proj(hidden)[0].view(-1, 4, 8).transpose(0, 1)
    unrotated = result.queries.clone()
    unrotated[0] = raw_q
    result.queries = unrotated
    assert (result.attention_from_qk()[0] - result.attention[0]).abs().max() > 1e-3


# Position ids start after the padding index (1): 64 − 2 usable positions. Classes read inside
# the lambdas: the parameters are listed at collection, where reading them imported their modules
# (4.5 s of each pytest worker's collection).
ROBERTA_LIKE = {
    "roberta": lambda: transformers.RobertaModel(transformers.RobertaConfig(vocab_size=VOCAB, **SMALL)),
    "xlm-roberta": lambda: transformers.XLMRobertaModel(transformers.XLMRobertaConfig(vocab_size=VOCAB, **SMALL)),
    "camembert": lambda: transformers.CamembertModel(transformers.CamembertConfig(vocab_size=VOCAB, **SMALL)),
}


def over_limit_families():
    """Every family, with the longest input it can really take (SMALL has 64 positions)."""
    families = {name: (make, 64) for name, make in small_models().items() if name not in ROBERTA_LIKE}
    families.update({name: (make, 62) for name, make in ROBERTA_LIKE.items()})
    return families


@pytest.mark.parametrize("family", list(over_limit_families()))
def test_input_longer_than_the_model_takes_is_truncated_to_what_it_really_takes(family, bert_tokenizer):
    make, limit = over_limit_families()[family]
    torch.manual_seed(0)
    model = make()
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    with pytest.warns(UserWarning, match=rf"truncated from 202 to {limit} tokens \(the model's maximum\)"):
        result = engine.run(" ".join(["word"] * 200))
    assert len(result.tokens) == limit and result.attention.shape[-1] == limit
    assert (result.attention_from_qk() - result.attention).abs().max().item() <= 1e-5
    # The limit is tight where positions are learned: the model itself fails one token further.
    if family not in ("llama-gqa", "qwen2-gqa"):  # rotary positions have no table to run past
        ids = torch.full((1, limit + 1), 1996)
        with pytest.raises((IndexError, RuntimeError)):
            with torch.inference_mode():
                model(input_ids=ids)


def test_a_users_model_leaves_a_run_as_it_came(bert_tokenizer):
    """Each module's train/eval mode, the attention implementation, hooks and config are the user's."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, **SMALL)
    config._attn_implementation = "sdpa"
    model = transformers.BertModel(config)
    model.train()
    model.encoder.layer[0].eval()  # a user froze one block's dropout
    calls = []
    model.register_forward_hook(lambda *args: calls.append(1))

    def state():
        hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
        return {name: m.training for name, m in model.named_modules()}, hooks, model.config.to_dict()

    with torch.inference_mode():  # transformers installs its own output hooks on a first call
        model(input_ids=torch.tensor([[101, 1996, 102]]), output_attentions=True)
    before = state()
    assert model.config._attn_implementation == "sdpa"
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    result = engine.run("The cat sat on the mat.", masked_heads=[(1, 2)])
    attnscope.head_stats(engine, ["The cat sat.", "It slept."], progress=False)
    attnscope.head_importance(engine, ["The cat sat.", "It slept."], progress=False)
    assert state() == before
    assert model.config._attn_implementation == "sdpa"
    assert calls  # the user's own hook ran, and is still there
    assert (result.attention_from_qk() - result.attention).abs().max().item() <= 1e-5  # eager during the run


def test_loading_is_quiet_and_leaves_the_progress_setting_as_it_was(capfd):
    from transformers.utils import logging as hf_logging

    import attnscope

    assert hf_logging.is_progress_bar_enabled()
    attnscope.load(device="cpu")
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()  # the user's own loads still show theirs
    hf_logging.disable_progress_bar()
    try:
        attnscope.load(device="cpu")
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.enable_progress_bar()


def test_a_model_from_a_folder_is_named_not_shown_as_its_path(bert_tokenizer, tmp_path):
    """Titles show the model's name (issue 30): the embedded model, by path or as a ready model
    whose config holds that path, is all-MiniLM-L6-v2; a local folder by a name it says."""
    from transformers import AutoModel

    from attnscope.engine.models import DEFAULT_MODEL_LABEL, default_model_path

    embedded = default_model_path()
    assert attnscope.load(str(embedded), device="cpu").name == DEFAULT_MODEL_LABEL
    ready = AutoModel.from_pretrained(embedded)
    assert ready.config.name_or_path == str(embedded)  # what the title showed before
    assert attnscope.load(ready, device="cpu").name == DEFAULT_MODEL_LABEL
    tiny = small_models()["bert"]()
    for folder, name in [
        (tmp_path / "bert-tiny" / "model", "bert-tiny"),  # a package's "model" folder: the one around it
        (tmp_path / "hub" / "models--acme--tiny-bert" / "snapshots" / ("0f" * 20), "acme/tiny-bert"),  # the hub cache
        (tmp_path / "run-3" / "checkpoint-500", "run-3/checkpoint-500"),
        (tmp_path / "my-finetune", "my-finetune"),
    ]:
        tiny.save_pretrained(folder)
        bert_tokenizer.save_pretrained(folder)
        assert attnscope.load(str(folder), device="cpu").name == name
        reloaded = AutoModel.from_pretrained(folder)
        assert attnscope.load(reloaded, bert_tokenizer, device="cpu").name == name
    # A hub name stays as it is; a model with no name or path is named by its class.
    from attnscope.engine.models import model_label

    assert model_label("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert attnscope.load(small_models()["bert"](), bert_tokenizer, device="cpu").name == "BertModel"


# --- bounds: a huge paste, a huge full attention


class TokenizerSpy:
    """The engine's tokenizer, recording how many characters each call was given."""

    def __init__(self, tokenizer):
        self.tokenizer, self.sizes = tokenizer, []

    def __call__(self, text=None, *args, **kwargs):
        texts = text if isinstance(text, (list, tuple)) else [text]
        self.sizes.append(sum(len(t) for t in texts if isinstance(t, str)))
        return self.tokenizer(text, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def test_a_long_text_is_read_a_piece_at_a_time_and_counted_exactly(default_model, monkeypatch):
    from attnscope.engine import attention_model as engine_module

    text = " ".join(f"word{i % 97} and, more" for i in range(40_000))  # 613,000 characters, 200,002 tokens
    full = default_model.tokenizer(text, truncation=False, verbose=False)["input_ids"]
    spy = TokenizerSpy(default_model.tokenizer)
    monkeypatch.setattr(default_model.loaded, "tokenizer", spy)
    with pytest.warns(UserWarning, match=f"truncated from {len(full)} to 512"):
        result = default_model.run(text)
    # The whole text was tokenized, twice, only to count it (about 150 bytes a character: 15 GB for
    # a 100 MB paste); now no call holds more than a piece.
    assert max(spy.sizes) <= engine_module.PIECE_CHARACTERS
    assert result.truncated_from == len(full) and result.input_ids[0].tolist() == full[:511] + [full[-1]]


def test_a_text_past_the_character_limit_is_refused_at_once(default_model):
    import time

    from attnscope.engine.attention_model import MAX_TEXT_CHARACTERS

    start = time.perf_counter()
    with pytest.raises(InputError, match=r"^text has 2,000,000 characters, more than the 1,000,000 a run reads, and "
                       r"all-MiniLM-L6-v2 \(embedded\) reads only its first 512 tokens of it \(a few characters each\): "
                       r"pass the part to see, e\.g\. text\[:100_000\]\.$"):
        default_model.run("word " * 400_000)
    assert time.perf_counter() - start < 1  # 10 MB took 52 s and 1.9 GB before
    with pytest.raises(InputError, match=r"^text_b has 1,000,001 characters"):
        attnscope.AttentionWidget("Hi.", "x" * (MAX_TEXT_CHARACTERS + 1), model=default_model)


def test_full_attention_past_the_budget_is_refused_before_the_model_runs(default_model, monkeypatch):
    from attnscope.engine import attention_model as engine_module

    monkeypatch.setattr(engine_module, "FULL_ATTENTION_MAX", 2**20)  # 1 MB: a 202-token text keeps 11.8 MB
    monkeypatch.setattr(default_model, "forward", lambda *a, **k: pytest.fail("the model ran"))
    text = "word " * 200
    with pytest.raises(InputError, match=r"^attention='full' would keep 6 layers × 12 heads × 202² weights, 11\.8 MB, more than "
                       r"the 1\.0 MB a run may hold \(attnscope\.engine\.attention_model\.FULL_ATTENTION_MAX\): use attention='on_demand'"):
        default_model.run(text, attention="full")
    with pytest.raises(InputError, match=r"^Masking heads, which needs the full attention, would keep 6 layers × 12 heads"):
        default_model.run(text, masked_heads=[(0, 0)])
    monkeypatch.undo()
    monkeypatch.setattr(engine_module, "FULL_ATTENTION_MAX", 2**20)
    # "auto" keeps it on demand instead, as past FULL_ATTENTION_LIMIT.
    assert isinstance(default_model.run(text), attnscope.LongAttentionResult)


def test_a_run_keeps_its_layers_apart_until_every_layer_is_read(bert_tokenizer):
    """The head view draws one layer: an edit reads it without the layers × heads × T × T copy
    (results.LayerMaps). Reading `attention` stacks them once, to the same numbers."""
    torch.manual_seed(0)
    model = small_models()["bert"]()
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    text = "The quick brown fox jumps over the lazy dog."
    result = engine.run(text)
    held = result.__dict__["_attention"]
    assert type(held).__name__ == "LayerMaps"
    assert (result.n_layers, result.n_heads) == (3, 4)
    layers = [result.layer_attention(layer).clone() for layer in range(3)]
    assert type(result.__dict__["_attention"]).__name__ == "LayerMaps"  # layers read one by one: still apart
    assert torch.equal(result.attention, torch.stack(layers))
    assert (result.attention_from_qk() - result.attention).abs().max().item() <= 1e-5
    assert isinstance(result.__dict__["_attention"], torch.Tensor)
    assert held.layers == [None, None, None]  # the apart layers were released as they were copied
    assert torch.equal(result.layer_attention(1), layers[1])


def test_nonfinite_heads_are_found_per_layer_as_in_one_tensor():
    from attnscope.engine.nonfinite import nonfinite_heads

    attention = torch.rand(3, 4, 5, 5)
    attention[1, 2, 3, 0] = float("nan")
    attention[2, 0, 0, 4] = float("inf")
    assert nonfinite_heads(attention) == nonfinite_heads(list(attention)) == [(1, 2), (2, 0)]
