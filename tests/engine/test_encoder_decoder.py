"""Encoder-decoder models (BART, Marian): encoder, decoder and cross attention, with q and k."""

import pytest
import torch
import transformers
from test_engine import VOCAB
from test_neuron import maths as neuron_maths_of

import attnscope
from attnscope import InputError
from attnscope.serialize import decode
from attnscope.widget.neuron_numbers import neuron_inputs

SOURCE = "The quick brown fox jumps."
TARGET = "Der schnelle braune Fuchs springt."
SHAPE = dict(
    d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64,
)


def encoder_decoder_models():
    return {
        "bart": lambda: transformers.BartModel(transformers.BartConfig(vocab_size=VOCAB, **SHAPE)),
        "marian": lambda: transformers.MarianMTModel(
            transformers.MarianConfig(vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0, **SHAPE)
        ),
    }


@pytest.fixture(scope="module")
def bart(bert_tokenizer):
    torch.manual_seed(0)
    return attnscope.load(encoder_decoder_models()["bart"](), bert_tokenizer, device="cpu")


@pytest.mark.parametrize("family", list(encoder_decoder_models()))
def test_every_part_reproduces_the_models_attention_from_q_and_k(family, bert_tokenizer):
    torch.manual_seed(0)
    model = encoder_decoder_models()[family]()
    with torch.no_grad():  # sharper attention, so that a wrong pairing would show
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(8)
    result = attnscope.load(model, bert_tokenizer, device="cpu").run(SOURCE, TARGET)
    parts = result.parts
    assert set(parts) == {"encoder", "decoder", "cross"} and result is parts["encoder"]
    # One type per kind of result: the run, plain self-attention, cross-attention with its own keys.
    assert isinstance(result, attnscope.EncoderDecoderResult)
    assert type(parts["decoder"]) is attnscope.AttentionResult
    assert isinstance(parts["cross"], attnscope.CrossAttentionResult)
    n_src, n_dec = len(parts["encoder"].tokens), len(parts["decoder"].tokens)
    assert parts["encoder"].attention.shape == (2, 4, n_src, n_src)
    assert parts["decoder"].attention.shape == (3, 4, n_dec, n_dec)
    assert parts["cross"].attention.shape == (3, 4, n_dec, n_src)
    assert parts["cross"].tokens == parts["decoder"].tokens and parts["cross"].key_tokens == parts["encoder"].tokens
    assert parts["decoder"].causal and not parts["cross"].causal and not parts["encoder"].causal
    for name, part in parts.items():
        assert (part.attention_from_qk() - part.attention).abs().max() <= 1e-5, name
    # The check can fail: cross-attention with the decoder's own keys does not reproduce it.
    wrong = parts["cross"]
    wrong.keys = parts["decoder"].keys[..., :n_src, :]
    assert (wrong.attention_from_qk() - wrong.attention).abs().max() > 1e-3


def test_decoder_reads_its_start_token_then_the_target(bart):
    result = bart.run(SOURCE, TARGET)
    decoder_ids = result.parts["decoder"].input_ids[0].tolist()
    target = bart.tokenizer(text_target=TARGET)["input_ids"]
    assert decoder_ids[0] == bart.model.config.decoder_start_token_id
    assert decoder_ids[1:] == target[:-1]
    # Without a decoder text the decoder reads the source itself (as BertViz's tutorial does).
    assert bart.run(SOURCE).parts["decoder"].tokens[1:] == bart.run(SOURCE).tokens[:-1]


def test_neuron_slice_of_cross_attention_uses_encoder_keys(bart):
    cross = bart.run(SOURCE, TARGET).parts["cross"]
    piece = neuron_inputs(cross, layer=1, head=2, query_index=3)
    assert piece.keys.shape == (len(cross.key_tokens), 8)
    assert torch.equal(piece.keys, cross.keys[1, 2])
    _, numbers = neuron_maths_of(cross, 1, 2, 3)
    assert torch.allclose(numbers["softmax"], cross.attention[1, 2, 3].double(), atol=1e-5)


def test_widget_switches_parts_and_keeps_what_it_can(bart):
    widget = attnscope.AttentionWidget(SOURCE, TARGET, model=bart, layer=1)
    assert widget.parts == ["encoder", "decoder", "cross"] and widget.key_tokens == []
    widget.attention_part = "cross"
    assert widget.n_layers == 3 and widget.layer == 1
    assert decode(widget.attention).shape == (4, len(widget.tokens), len(widget.key_tokens))
    widget.layer = 2
    widget.attention_part = "encoder"  # two layers: the view moves to the last one
    assert widget.layer == 1 and widget.key_tokens == []

    widget.attention_part = "cross"
    widget.view = "model"
    assert widget.thumbnails["shape"] == [3, 4, len(widget.tokens), len(widget.key_tokens)]
    widget.view = "rollout"
    assert "choose the encoder or the decoder" in widget.rollout["error"]
    widget.attention_part = "decoder"
    assert decode(widget.rollout).shape[0] == 3

    widget.attention_part = "cross"
    widget.word_level = True  # both sides merge into their own words
    shown = decode(widget.attention)
    assert shown.shape[-1] == len(widget.key_tokens)
    assert torch.allclose(shown.sum(-1), torch.ones(shown.shape[:-1]), atol=0.05)

    with pytest.raises(InputError, match="not supported yet"):
        widget.masked_heads = [[0, 0]]


def test_widget_answers_the_neuron_view_for_cross_attention(bart):
    widget = attnscope.AttentionWidget(SOURCE, TARGET, model=bart, view="neuron")
    widget.attention_part = "cross"
    sent = []
    widget.send = lambda content, buffers=None: sent.append((content, buffers))
    widget._handle_custom_msg({"kind": "request", "type": "neuron", "id": 7, "layer": 0}, [])
    reply, buffers = sent[0]
    assert reply["part"] == "cross" and reply["n_queries"] == len(widget.tokens) and len(buffers) == len(reply["paths"])
    store = reply["store"]
    assert store["queries"]["shape"][2] == len(widget.tokens) and store["keys"]["shape"][2] == len(widget.key_tokens)
    # Cross-attention's values are the encoder's states through its value projection: one per key token.
    assert store["values"]["shape"][2] == store["norms"]["shape"][2] == len(widget.key_tokens)
    assert sorted(path[0] for path in reply["paths"]) == ["keys", "norms", "queries", "values"]
    run = widget.token_result
    assert run.values.shape[2] == run.value_norms.shape[2] == len(widget.key_tokens)


def t5_model():
    return transformers.T5Model(transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=3, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0))


@pytest.mark.parametrize("family", [*encoder_decoder_models(), "t5"])
def test_neuron_view_opens_on_a_token_of_the_text_in_every_part(family, bert_tokenizer):
    """Issue 30: BART's cross-attention neuron view opened on the decoder's start token, "[unused1]"
    (the BERT vocabulary's name for BART's id 2). It opens on a token of the text: the first, or
    for the causal decoder the last (the first sees only itself). A query the user picks is kept."""
    torch.manual_seed(0)
    model = t5_model() if family == "t5" else encoder_decoder_models()[family]()
    widget = attnscope.AttentionWidget(SOURCE, TARGET, model=attnscope.load(model, bert_tokenizer, device="cpu"),
                                       view="neuron")
    expected = {"encoder": ("The", SOURCE), "cross": ("Der", TARGET), "decoder": (".", TARGET)}
    for part in ("encoder", "cross", "decoder"):
        widget.attention_part = part
        word, text = expected[part]
        assert widget.tokens[widget.neuron_query] == word, (part, widget.tokens, widget.neuron_query)
        assert widget.token_result.covers_text[:1] == [False] and word in text
    widget.neuron_query = 3
    widget.update(SOURCE, "Der braune Fuchs.")
    assert widget.neuron_query == 3  # picked: kept over a rerun
    widget.attention_part = "cross"  # other queries: where the part opens
    assert widget.tokens[widget.neuron_query] == "Der"


    """T5 adds a learned position bias to q·kᵀ (and does not scale it): both are captured."""
    torch.manual_seed(0)
    model = t5_model()
    with torch.no_grad():  # a strong position bias, so that leaving it out would show
        for module in model.modules():
            if getattr(module, "has_relative_attention_bias", False):
                module.relative_attention_bias.weight.normal_(0, 3)
    result = attnscope.load(model, bert_tokenizer, device="cpu").run(SOURCE, TARGET)
    for name, part in result.parts.items():
        assert part.score_bias is not None and part.scaling == [1.0] * part.attention.shape[0]
        assert (part.attention_from_qk() - part.attention).abs().max() <= 1e-4, name
    encoder = result.parts["encoder"]
    _, numbers = neuron_maths_of(encoder, 0, 1, 2)  # the bias row goes into the scores
    assert torch.allclose(numbers["softmax"], encoder.attention[0, 1, 2].double(), atol=1e-4)
    encoder.score_bias = None  # without the bias the check fails
    assert (encoder.attention_from_qk() - encoder.attention).abs().max() > 1e-3


def test_neuron_reply_names_how_scores_are_made(bart, bert_tokenizer):
    from attnscope.widget.payloads import score_label

    cross = bart.run(SOURCE, TARGET).parts["cross"]
    assert cross.queries.shape[-1] == 8 and score_label(cross, 0) == "q·k / √d"
    cross.scaling = [1.0] * 3
    cross.score_bias = torch.zeros_like(cross.attention)
    assert score_label(cross, 0) == "q·k + position bias"


@pytest.mark.parametrize("family", [*encoder_decoder_models(), "t5"])
def test_source_and_target_longer_than_the_model_takes_are_both_truncated(family, bert_tokenizer):
    torch.manual_seed(0)
    if family == "t5":  # relative positions: no table, the config's n_positions (512) is the limit
        model = transformers.T5Model(transformers.T5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2, num_heads=4,
            decoder_start_token_id=0, pad_token_id=0))
        limit = 512
    else:
        model, limit = encoder_decoder_models()[family](), 64
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    long_source, long_target = " ".join(["word"] * (limit + 20)), " ".join(["word"] * (limit + 30))
    with pytest.warns(UserWarning) as seen:
        result = engine.run(long_source, long_target)
    messages = " ".join(str(w.message) for w in seen)
    assert f"Input truncated from {limit + 22} to {limit} tokens" in messages
    assert f"Decoder text truncated from {limit + 32} to {limit} tokens" in messages
    for name, part in result.parts.items():
        assert part.attention.shape[-1] == limit and part.attention.shape[-2] == limit, name
        assert (part.attention_from_qk() - part.attention).abs().max() <= 1e-4, name
