"""An encoder-decoder model's run (BART, Marian, T5): encoder self-attention over the text, decoder
self-attention and cross-attention over the decoder's text read with teacher forcing, each part an
AttentionResult with its queries, keys and value norms. `engine` is the AttentionModel running it
(its tokenizer, model, hooks' groups and its encoding and labelling steps)."""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from typing import Any

import torch

from ..errors import NoAttentionError
from . import value_norms
from .hooks import capture_queries_keys, captured_queries_keys, captured_score_bias, first_of_each
from .results import AttentionResult, CrossAttentionResult, EncoderDecoderResult, LayerMaps
from .texts import check_known_words, groups_from_tokens
from .token_labels import TokenLabels, labels_for_tokenizer


def teacher_forced_ids(engine: Any, decoder_text: str, max_length: int) -> tuple[torch.Tensor, int, Any]:
    """Teacher forcing: the decoder reads its start token, then the target text shifted right.
    Also the target's untruncated length, and the target's encoding (its offsets, for labels)."""
    full_length = len(engine.tokenizer(text_target=decoder_text, truncation=False, verbose=False)["input_ids"])
    target = engine.tokenizer(text_target=decoder_text, truncation=True, max_length=max_length, return_tensors="pt",
                            return_offsets_mapping=bool(getattr(engine.tokenizer, "is_fast", False)))
    start = decoder_start_id(engine)
    ids = target["input_ids"][:, :-1] if target["input_ids"].shape[1] > 1 else target["input_ids"]
    return torch.cat([torch.full((1, 1), start, dtype=ids.dtype), ids], dim=1), full_length, target


def decoder_start_id(engine: Any) -> int:
    """The token the decoder reads first: the config's decoder start token (else its padding or
    beginning-of-text token, as transformers falls back)."""
    config = engine.model.config
    start = next(
        (v for v in (getattr(config, n, None) for n in ("decoder_start_token_id", "pad_token_id", "bos_token_id"))
         if isinstance(v, int)),
        None,
    )
    if start is None:
        raise NoAttentionError(f"{engine.name} names no decoder start token, so its decoder cannot be run.")
    return start


def labels_of_decoder_text(engine: Any, target: Any, decoder_ids: torch.Tensor, decoder_text: str) -> TokenLabels:
    """The decoder's labels: the start token's name, then the target's spans shifted right
    with it (the target's last token is not read)."""
    tokens = list(engine.tokenizer.convert_ids_to_tokens(decoder_ids[0].tolist()))
    mapping = target.get("offset_mapping")
    offsets = sequence_ids = None
    if mapping is not None:
        n = len(tokens) - 1
        offsets = [(0, 0), *mapping[0].tolist()[:n]]
        sequence_ids = [None, *target.sequence_ids(0)[:n]]
    labels = labels_for_tokenizer(engine.tokenizer, tokens, ids=decoder_ids[0].tolist(), offsets=offsets,
                                  sequence_ids=sequence_ids, texts=[decoder_text])
    # The start token is no piece of the text, whatever the vocabulary calls it ([unused1]).
    return dataclasses.replace(labels, covers_text=[False, *labels.covers_text[1:]])

def run_encoder_decoder(engine: Any, text: str, decoder_text: str | None, max_length: int, reason: str) -> EncoderDecoderResult:
    """Encoder self-attention over `text`; decoder self-attention and cross-attention over
    `decoder_text` (e.g. a translation), or over `text` itself when none is given."""
    encoded, full_length, read = engine.encode(text, None, max_length)
    input_ids = encoded["input_ids"]
    check_known_words(engine.tokenizer, input_ids[0])
    truncated_from = full_length if full_length > input_ids.shape[1] else None
    if truncated_from is not None:
        warnings.warn(f"Input truncated from {full_length} to {input_ids.shape[1]} tokens ({reason}).", stacklevel=4)
    decoder_text_read = decoder_text if decoder_text is not None else text
    decoder_ids, decoder_length, target = teacher_forced_ids(engine, decoder_text_read, max_length)
    decoder_truncated_from = decoder_length if decoder_length > decoder_ids.shape[1] else None
    if decoder_truncated_from is not None:
        warnings.warn(
            f"Decoder text truncated from {decoder_length} to {decoder_ids.shape[1]} tokens ({reason}).", stacklevel=4
        )
    tokens = list(engine.tokenizer.convert_ids_to_tokens(input_ids[0].tolist()))
    decoder_tokens = list(engine.tokenizer.convert_ids_to_tokens(decoder_ids[0].tolist()))
    labels = engine.labels_of_encoding(encoded, tokens, read)
    decoder_labels = labels_of_decoder_text(engine, target, decoder_ids, decoder_text_read)
    inputs = {**encoded, "decoder_input_ids": decoder_ids}
    captures = {}
    with contextlib.ExitStack() as stack:
        for part, modules in engine.groups.items():
            captures[part] = stack.enter_context(capture_queries_keys(modules, engine.layout)) if engine.layout else None
        outputs = engine.forward(inputs)

    found = {part: list(getattr(outputs, f"{part}_attentions", None) or []) for part in ("encoder", "decoder", "cross")}
    outputs = None  # only the attentions are kept (and freed layer by layer below)
    parts: dict[str, AttentionResult] = {}
    for part, attentions in found.items():
        if not attentions or any(a is None for a in attentions):
            raise NoAttentionError(f"Model {engine.name} returned no {part} attention weights.")
        attention = LayerMaps(first_of_each(attentions))
        found[part] = None
        n_layers, n_heads = attention.shape[:2]
        queries, keys, scaling = captured_queries_keys(captures[part], n_layers, n_heads, engine.name)
        queries, keys = (None if layers is None else LayerMaps(layers) for layers in (queries, keys))
        specials = getattr(engine.tokenizer, "all_special_tokens", ())
        # The encoder's words come from the text's spans (its offsets) when the tokenizer gives them.
        encoder_words = labels.words or groups_from_tokens(tokens, specials)
        decoder_words = decoder_labels.words or groups_from_tokens(decoder_tokens, specials)
        fields = dict(
            tokens=tokens if part == "encoder" else decoder_tokens,
            labels=(labels if part == "encoder" else decoder_labels).labels,
            token_notes=(labels if part == "encoder" else decoder_labels).notes,
            covers_text=(labels if part == "encoder" else decoder_labels).covers_text,
            attention=attention,
            queries=queries,
            keys=keys,
            scaling=scaling,
            causal=part == "decoder",
            model_name=engine.name,
            text=text,
            text_b=decoder_text,
            truncated_from=truncated_from,
            input_ids=input_ids if part == "encoder" else decoder_ids,
            word_groups=encoder_words if part == "encoder" else decoder_words,
            score_bias=captured_score_bias(captures[part], attention),
            nonfinite_heads=engine.warned_nonfinite_heads(attention, captures[part]),
            **value_norms.of_part(engine.model, engine.groups[part], captures[part].values if captures[part] else [],
                                  n_heads, attention.layers[0].device))
        if part == "cross":
            parts[part] = CrossAttentionResult(**fields, key_tokens=tokens, key_labels=labels.labels,
                                               key_token_notes=labels.notes, key_word_groups=encoder_words)
        else:
            parts[part] = AttentionResult(**fields)
    return EncoderDecoderResult.of(parts, decoder_truncated_from)
