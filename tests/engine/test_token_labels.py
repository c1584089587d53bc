"""Tokens as the text reads (issue 19): every tokenizer family, every script.

Each family's tokenizer is trained here, offline, with the `tokenizers` library, and run on text
with accents, CJK, emoji, right-to-left script and combining marks."""

from __future__ import annotations

import json
import re

import pytest
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

import attnscope
from attnscope.engine.results import word_attention
from attnscope.engine.token_labels import CONTINUATION, join_labels, label_tokens

TEXT = "The café is naïve, 日本 🙂 שלום e\u0301cole Zürich."
CORPUS = ["The café is naïve.", "Hello world, this is a test of the tokenizer.", "Zürich has a lake.",
          "The school is near the lake.", "A naïve test of words."] * 4
# What a byte-level label looks like when it is not decoded: Ã© for é, Ġ for a space, ðŁ for emoji.
MOJIBAKE = re.compile("[ÃÂĠðŁæĹ]|<0x")


def byte_level_bpe():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


BYTES = [f"<0x{b:02X}>" for b in range(256)]


def sentencepiece_bpe_byte_fallback():
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Metaspace(), decoders.ByteFallback(), decoders.Fuse()])
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", *BYTES]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def sentencepiece_unigram_byte_fallback():
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>"))
    spec = json.loads(tok.to_str())
    spec["model"]["vocab"] += [[piece, -30.0] for piece in BYTES]
    spec["model"]["byte_fallback"] = True
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def wordpiece():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    chars = sorted(set("".join(CORPUS) + TEXT) - {" "})
    tok.train_from_iterator(CORPUS + [TEXT], trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], initial_alphabet=chars))
    tok.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]",
                                                sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]")


FAMILIES = {
    "byte-level BPE": byte_level_bpe,
    "BPE with byte fallback": sentencepiece_bpe_byte_fallback,
    "unigram with byte fallback": sentencepiece_unigram_byte_fallback,
    "WordPiece": wordpiece,
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request):
    tokenizer = FAMILIES[request.param]()
    if request.param == "WordPiece":
        model = transformers.BertModel(transformers.BertConfig(
            vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=128)).eval()
    else:
        torch.manual_seed(0)
        model = transformers.GPT2Model(transformers.GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=128)).eval()
    return request.param, attnscope.load(model, tokenizer, device="cpu")


def comparable(text: str, family: str) -> str:
    # WordPiece splits at spaces and punctuation and drops the spaces: compare without them.
    # SentencePiece prepends a space to the text (its "▁" token shows as one): that is its own.
    return re.sub(r"\s+", "", text) if family == "WordPiece" else text.removeprefix(" ")


def shown(result):
    """The labels of the text's tokens (special tokens left out)."""
    return [label for label, kind in zip(result.labels, result.tokens) if kind not in ("<s>", "</s>", "[CLS]", "[SEP]", "<|endoftext|>")]


def test_the_labels_read_as_the_text(family):
    name, engine = family
    result = engine.run(TEXT)
    labels = shown(result)
    assert not [label for label in labels if MOJIBAKE.search(label)], list(zip(result.tokens, result.labels))
    assert comparable(join_labels(labels), name) == comparable(TEXT, name)
    # Every position is still there: one label per token, the split characters marked.
    assert len(result.labels) == len(result.tokens)


def test_a_split_character_shows_once_and_its_other_tokens_say_whose_bytes_they_hold(family):
    name, engine = family
    result = engine.run(TEXT)
    marked = [i for i, label in enumerate(result.labels) if label == CONTINUATION]
    if name == "WordPiece":
        assert not marked  # WordPiece never splits a character
        return
    assert marked, list(zip(result.tokens, result.labels))
    for i in marked:
        note = result.token_notes[i]
        assert re.search(r"bytes( [0-9A-F]{2})+ of “[^”]+”", note), note
        character = re.search(r"“([^”]+)”", note).group(1)
        assert any(character in result.labels[j] for j in range(i)), (i, note)
    for character in ("日", "本", "🙂"):
        assert sum(character in label for label in result.labels) == 1, (character, result.labels)


def test_word_merging_finds_the_texts_words(family):
    name, engine = family
    words = shown(word_attention(engine.run(TEXT)))
    # The text's words: letters with their combining marks, punctuation and emoji on their own.
    expected = ["The", "café", "is", "naïve", ",", "日本", "🙂", "שלום", "e\u0301cole", "Zürich", "."]
    assert [w.strip() for w in words if w.strip()] == expected, words


def test_a_long_runs_text_view_reads_as_the_text(family):
    """The text view flows the tokens as running text: each token adds the text since the one
    before, its spaces included, with no "##" (WordPiece labels leave spaces out), and a character
    split over tokens reads once: "près", not "prè↑s" (issue 30); a line break breaks the line,
    marked ↵ (escaped as "\\n", a list or a poem read as one line)."""
    name, engine = family
    text = TEXT + "\nA second line,  two spaces."
    result = engine.run(text, attention="on_demand")
    reading = result.token_reading
    assert len(reading) == len(result.tokens)
    assert CONTINUATION not in "".join(reading), list(zip(result.tokens, reading))
    # The tokens of a split character add nothing; the token list still marks them.
    for label, read in zip(result.labels, reading):
        assert (read == "") == (label == CONTINUATION), (label, read)
    specials = {"[CLS]", "[SEP]", "<s>", "</s>", "<|endoftext|>"}
    read = "".join(r for r, t in zip(reading, result.tokens) if t not in specials)
    expected = text.replace("\n", "↵\n")  # a line break shows as ↵ and breaks the line there (labels: \n)
    assert read.removeprefix(" ") == expected, list(zip(result.tokens, reading))
    widget = attnscope.show(text, model=engine, attention="on_demand")
    assert widget.token_reading == reading and widget.tokens == result.labels
    widget.close()


def test_special_tokens_keep_their_names(family):
    name, engine = family
    result = engine.run(TEXT, "Ok.") if name == "WordPiece" else engine.run(TEXT)
    specials = {"[CLS]", "[SEP]", "<s>", "<|endoftext|>"}
    for token, label in zip(result.tokens, result.labels):
        if token in specials:
            assert label == token


def test_pieces_without_offsets_are_decoded_where_their_bytes_are_complete():
    # GPT-2's byte-level strings for "café 日" and SentencePiece byte-fallback pieces for "é".
    labels = label_tokens(["caf", "Ã©", "Ġæ", "Ĺ", "¥"], special=[False] * 5, byte_level=True)
    assert labels.labels == ["caf", "é", " 日", CONTINUATION, CONTINUATION]
    assert labels.notes[3].startswith("bytes 97 of “日”")
    fallback = label_tokens(["▁caf", "<0xC3>", "<0xA9>", "</s>"], special=[False, False, False, True])
    assert fallback.labels == [" caf", "é", CONTINUATION, "</s>"]
    # Bytes that never complete a character are shown as bytes, not as a replacement character.
    broken = label_tokens(["<0xE6>", "▁ok"], special=[False, False])
    assert broken.labels == ["\\xE6", " ok"]


def test_precomputed_attention_gets_decoded_labels():
    tokens = ["<|endoftext|>", "The", "Ġcaf", "Ã©", "Ġæ", "Ĺ", "¥"]
    attention = [torch.full((1, 2, len(tokens), len(tokens)), 1.0 / len(tokens))]
    widget = attnscope.head_view(attention, tokens)
    assert widget.tokens == ["<|endoftext|>", "The", " caf", "é", " 日", CONTINUATION, CONTINUATION]
    widget.close()


def test_byte_tokens_sharing_one_span_show_each_character_on_the_token_of_its_first_byte():
    # A unigram vocabulary with byte fallback gives every byte of "של" the span of both letters.
    tokens = ["▁", "<0xD7>", "<0xA9>", "<0xD7>", "<0x9C>"]
    labels = label_tokens(tokens, special=[False] * 5, offsets=[(0, 1)] + [(1, 3)] * 4,
                          sequence_ids=[0] * 5, texts=[" של"])
    assert labels.labels == [" ", "ש", CONTINUATION, "ל", CONTINUATION]
    assert labels.notes[2] == "bytes A9 of “ש”, shown on an earlier token"
    assert labels.words == [[0, 1, 2, 3, 4]]
    # Bytes that do not spell the span are left with the span as given (shown once).
    odd = label_tokens(["<0xD7>", "<0xA9>"], special=[False, False], offsets=[(0, 2)] * 2,
                       sequence_ids=[0, 0], texts=["ab"])
    assert odd.labels == ["ab", CONTINUATION]


def test_an_encoder_decoder_with_a_byte_level_tokenizer_shows_both_texts_and_the_keys_notes():
    # BART's scheme: byte-level BPE for the encoder's text and the decoder's.
    tokenizer = byte_level_bpe()
    tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(0)
    model = transformers.BartModel(transformers.BartConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, decoder_start_token_id=tokenizer.eos_token_id)).eval()
    engine = attnscope.load(model, tokenizer, device="cpu")
    widget = attnscope.AttentionWidget("日本 café", "naïve 🙂", model=engine, attention_part="cross")
    assert join_labels(widget.key_tokens) == "日本 café"  # the encoder's text, as keys
    assert "naïve" in join_labels(widget.tokens) and "🙂" in join_labels(widget.tokens)
    assert not [label for label in widget.tokens + widget.key_tokens if MOJIBAKE.search(label)]
    marked = [i for i, label in enumerate(widget.key_tokens) if label == CONTINUATION]
    assert marked and all("of “" in widget.key_token_notes[i] for i in marked)
    # The encoder's words are the text's words.
    widget.word_level = True
    assert [w.strip() for w in widget.key_tokens] == ["日本", "café"]
    widget.close()


UNKNOWN = "Our café in Zu\u0308rich serves 🍕 and 寿司, caf🍕e 🙂🙂 and ☕\ufe0f."


def test_unk_names_the_text_it_stands_for(default_model):
    """Issue 30: an emoji typed into the sentence became "[UNK]" with no hint of the text it
    replaced. [UNK] keeps its name (what the model read); its note, shown on hover, names the
    text from the tokenizer's offsets, for each [UNK] of the text, beside accents and CJK."""
    result = default_model.run(UNKNOWN)
    unknown = [(label, note) for token, label, note in zip(result.tokens, result.labels, result.token_notes)
               if token == "[UNK]"]
    stood_for = ["🍕", "寿", "caf🍕e", "🙂🙂", "☕"]  # ☕'s variation selector is no token's
    assert unknown == [("[UNK]", f"stands for “{text}” in the text") for text in stood_for], unknown
    assert "Zu\u0308rich" in result.labels and "café" in result.labels and "司" in result.labels
    assert all(note == "" for token, note in zip(result.tokens, result.token_notes) if token != "[UNK]")
    # Merged into words, a word keeps what its [UNK] stands for.
    words = word_attention(result)
    assert [(label, note) for label, note in zip(words.labels, words.token_notes) if note] == [
        ("[UNK]", "stands for “🍕” in the text"), ("[UNK]", "stands for “寿” in the text"),
        ("[UNK]", "stands for “caf🍕e” in the text"), ("[UNK]", "stands for “🙂🙂” in the text"),
        ("[UNK]", "stands for “☕” in the text")]
    widget = attnscope.AttentionWidget(UNKNOWN, model=default_model)
    assert widget.token_notes == result.token_notes
    widget.close()
