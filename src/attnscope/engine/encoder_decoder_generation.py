"""An encoder-decoder writes (BART, T5; issue 48 item 5): the source through the encoder once, then
the decoder from its start token, one new token a step through the cache, each step's
cross-attention over the source and self-attention over the output so far kept exact
(encoder_decoder_capture.py). The run is an EncoderDecoderLongResult over source + decoder tokens: a
decoder token's row is what it read when it was written, the source by cross-attention, then
the output before it by self-attention (encoder_decoder_long.py).

The model leaves each step as it came (models.borrowed), and nothing is held between steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from .. import checks
from ..errors import InputError, NoAttentionError
from . import encoder_decoder_capture
from .borrowing import attention_implementation, borrowed
from .encoder_decoder_long import EncoderDecoderLongResult
from .encoder_decoder_run import decoder_start_id
from .generation_run import GENERATE_WITH, Generation, GenerationSettings, Reading, Stop, eos_ids, given_probabilities, given_rows, token_loop
from .models import forward_parameters, max_positions
from .results import AttentionResult, CrossAttentionResult, EncoderDecoderResult
from .texts import groups_from_tokens
from .token_labels import labels_for_tokenizer


def check_lengths(engine: Any, prompt: str, n_source: int, settings: GenerationSettings) -> None:
    """The source and the decoder's start token + new tokens each within the model's positions."""
    limit = max_positions(engine.model, engine.tokenizer)
    if limit is None:
        return
    if n_source > limit:
        raise InputError(f"prompt={checks.short_repr(prompt)} (the source) is {n_source} tokens, more than "
                         f"{engine.name}'s {limit} positions: give a shorter source.")
    if 1 + settings.max_new_tokens > limit:
        raise InputError(f"max_new_tokens={settings.max_new_tokens} is more than {engine.name}'s decoder holds: it reads "
                         f"its start token and each new token, {limit} positions, so at most {limit - 1} new tokens fit.")


def start_id(engine: Any) -> int:
    """The decoder's first token as model.generate picks it: the generation config's decoder start
    token, else its beginning-of-text token (mBART names no start token), else the config's."""
    config = getattr(engine.model, "generation_config", None)
    for name in ("decoder_start_token_id", "bos_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return decoder_start_id(engine)


def encoder_decoder_steps(engine: Any, prompt: str, prompt_text: str, encoded: Any, settings: GenerationSettings,
                          stop: Stop, checked: Callable[[int], bool]) -> Iterator[Generation]:
    """generation.generation_steps for an encoder-decoder: the source `encoded` (prompt_text as
    the model reads it) through the encoder, then the decoder's steps. checked(step): whether that
    step's outputs are checked against the recomputed rows (generation.checked_step)."""
    from transformers import DynamicCache, EncoderDecoderCache

    source_ids = encoded["input_ids"].to(engine.device)
    start = start_id(engine)
    parameters = forward_parameters(engine.model)
    cache_name = "cache" if "cache" in parameters else "past_key_values"
    extra = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}
    config = engine.model.config
    cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
    kept = encoder_decoder_capture.EncoderDecoderCapture(engine.name, engine.groups, 1 + settings.max_new_tokens,
                                                 attention_implementation(engine.model))
    decoder_ids = torch.tensor([[start]], device=source_ids.device)
    output = _forward(engine, kept, {"input_ids": source_ids, "decoder_input_ids": decoder_ids, cache_name: cache,
                                     "use_cache": True, **extra}, position=0, check=True)
    encoder_states = output.encoder_last_hidden_state
    logits, output = output.logits[0, -1], None
    reading = Reading(engine.tokenizer, 0)
    run = Generation(model_name=engine.name, prompt=prompt, settings=settings, prompt_ids=source_ids[0].tolist(),
                     prompt_text=prompt_text, start_ids=[start])
    run._attention = lambda: long_result(engine, run, kept, encoded, reading)

    def feed(token: int, step: int) -> torch.Tensor:
        ids = torch.tensor([[token]], device=source_ids.device)
        engine.check_token_ids(ids)
        output = _forward(engine, kept, {"encoder_outputs": (encoder_states,), "decoder_input_ids": ids,
                                         cache_name: cache, "use_cache": True, **extra},
                          position=kept.length, check=checked(step))
        return output.logits[0, -1]

    yield from token_loop(engine, run, logits, settings, stop, reading, feed, kept)


def _forward(engine: Any, kept: encoder_decoder_capture.EncoderDecoderCapture, inputs: dict, position: int, check: bool) -> Any:
    """One forward through encoder_decoder_capture's attention (the first: the encoder's too), under the
    engine's run lock; the model leaves as it came."""
    encoder_decoder_capture.register()
    with engine._lock, borrowed(engine.model, encoder_decoder_capture.IMPLEMENTATION), torch.inference_mode(), \
            encoder_decoder_capture.capturing(kept, position, check):
        output = engine.model(**inputs)
    kept.step_done(prefill="input_ids" in inputs)
    return output


def long_result(engine: Any, run: Generation, kept: encoder_decoder_capture.EncoderDecoderCapture, encoded: Any,
                reading: Reading) -> EncoderDecoderLongResult:
    """Source + decoder tokens so far as an EncoderDecoderLongResult over views of the buffers.
    The decoder's tokens start a line of their own in the running text."""
    tokenizer = engine.tokenizer
    ids = run.ids
    tokens = list(tokenizer.convert_ids_to_tokens(ids))
    n_source = len(run.prompt_ids)
    mapping = encoded.get("offset_mapping")
    offsets = sequence_ids = None
    if mapping is not None:
        special = set(getattr(tokenizer, "all_special_ids", ()) or ())
        offsets = [tuple(pair) for pair in mapping[0].tolist()] + [(0, 0)] * len(run.start_ids) + reading.spans
        sequence_ids = (list(encoded.sequence_ids(0)) + [None] * len(run.start_ids)
                        + [None if i in special else 1 for i in run.new_ids])
    labels = labels_for_tokenizer(tokenizer, tokens, ids=ids, offsets=offsets, sequence_ids=sequence_ids,
                                  texts=[run.prompt_text, reading.raw])
    token_reading = None
    if labels.reading is not None:
        token_reading = list(labels.reading)
        token_reading[n_source] = "\n" + token_reading[n_source]
    encoder, cross, decoder = kept.shown()
    if n_source + decoder.queries[0].shape[1] != len(ids):
        raise NoAttentionError(f"The run kept {decoder.queries[0].shape[1]} decoder positions for "
                               f"{len(ids) - n_source} tokens.")  # never: a bug if seen
    return EncoderDecoderLongResult(
        tokens=tokens,
        labels=labels.labels,
        token_notes=labels.notes,
        token_reading=token_reading,
        queries=decoder.queries,
        keys=decoder.keys,
        lse=decoder.lse,
        rules=decoder.rules,
        causal=True,
        model_name=engine.name,
        text=run.prompt_text,
        input_ids=torch.tensor([ids]),
        word_groups=labels.words or groups_from_tokens(tokens, getattr(tokenizer, "all_special_tokens", ())),
        n_source=n_source,
        encoder=encoder,
        cross=cross,
        decoder=decoder,
    )


def from_encoder_decoder_output(output: Any, engine: Any, source: Any) -> Generation:
    """generation.from_generate of an encoder-decoder's model.generate output: its
    encoder_attentions (1 × heads × S × S a layer), decoder_attentions and cross_attentions (per
    step, per layer: the step's row over the decoder's tokens so far, over the source) as an
    EncoderDecoderResult over the source (`source`: the input ids given to model.generate, or the
    source text) and the decoder's tokens read (its start token and every new token but the last)."""
    if not engine.is_encoder_decoder:
        raise InputError(f"output is an encoder-decoder model's (it has decoder_attentions), and model={engine.name} "
                         "is not one: pass the model that generated it.")
    encoder, steps, cross = (getattr(output, f"{part}_attentions", None) for part in ("encoder", "decoder", "cross"))
    sequences = getattr(output, "sequences", None)
    if not encoder or not steps or not cross or sequences is None:
        raise InputError(f"output ({type(output).__name__}) has no encoder, decoder and cross attentions. {GENERATE_WITH}")
    if sequences.dim() != 2 or sequences.shape[0] != 1:
        raise InputError(f"output.sequences has shape {tuple(sequences.shape)}: from_generate reads one sequence (1 × T).")
    if source is None:
        raise InputError("source=None: an encoder-decoder's generate output holds no source tokens (its sequences are "
                         "the decoder's): pass the input ids given to model.generate, or the source text, as source=.")
    source_ids = _source_ids(engine, source)
    n_source, n_layers = len(source_ids), len(engine.groups["decoder"])
    if not isinstance(encoder, (tuple, list)) or len(encoder) != len(engine.groups["encoder"]):
        raise InputError(f"output.encoder_attentions does not hold one attention per layer of {engine.name}'s encoder "
                         f"({len(engine.groups['encoder'])}): is it this model's output?")
    n_read = encoder[0].shape[-1] if isinstance(encoder[0], torch.Tensor) else None
    if n_read != n_source:
        raise InputError(f"source has {n_source} tokens, and output.encoder_attentions[0] reads {n_read}: give the input "
                         "ids given to model.generate (or its text).")
    n_heads = encoder[0].shape[1]
    encoder_rows = torch.stack([given_probabilities(a, f"output.encoder_attentions[{layer}]", (1, n_heads, n_source, n_source),
                                                    f"1 × {n_heads} × {n_source} × {n_source}")
                                for layer, a in enumerate(encoder)])
    decoder_rows = given_rows(steps, n_layers, sequences.shape[1], "output.decoder_attentions")
    if not isinstance(cross, (tuple, list)) or len(cross) != len(steps):
        raise InputError(f"output.cross_attentions does not hold one step's attentions for each of the {len(steps)} steps.")
    cross_rows = torch.stack([torch.cat([given_probabilities(step[layer], f"output.cross_attentions[{t}][{layer}]",
                                                             (1, decoder_rows.shape[1], 1, n_source),
                                                             f"1 × {decoder_rows.shape[1]} × 1 × {n_source}")
                                         for t, step in enumerate(cross)], dim=1) for layer in range(n_layers)])
    ids = sequences[0].tolist()
    read = ids[: decoder_rows.shape[2]]
    tokenizer = engine.tokenizer
    source_text = tokenizer.decode(source_ids, skip_special_tokens=False)
    new_ids = ids[1:]
    text = tokenizer.decode(new_ids, skip_special_tokens=True)
    source_tokens, tokens = (list(tokenizer.convert_ids_to_tokens(i)) for i in (source_ids, read))
    source_labels, labels = (labels_for_tokenizer(tokenizer, t, ids=i) for t, i in ((source_tokens, source_ids), (tokens, read)))
    specials = getattr(tokenizer, "all_special_tokens", ())
    source_words = groups_from_tokens(source_tokens, specials)
    shared = dict(scaling=[], model_name=engine.name, text=source_text, text_b=text)
    decoder = dict(tokens=tokens, labels=labels.labels, token_notes=labels.notes,
                   covers_text=[False, *labels.covers_text[1:]],  # the start token is no piece of the text
                   input_ids=torch.tensor([read]), word_groups=groups_from_tokens(tokens, specials), **shared)
    parts = {
        "encoder": AttentionResult(tokens=source_tokens, labels=source_labels.labels, token_notes=source_labels.notes,
                                   covers_text=source_labels.covers_text, attention=encoder_rows, causal=False,
                                   input_ids=torch.tensor([source_ids]), word_groups=source_words, **shared),
        "decoder": AttentionResult(attention=decoder_rows, causal=True, **decoder),
        "cross": CrossAttentionResult(attention=cross_rows, causal=False, key_tokens=source_tokens,
                                      key_labels=source_labels.labels, key_token_notes=source_labels.notes,
                                      key_word_groups=source_words, **decoder),
    }
    attention = EncoderDecoderResult.of(parts)
    finish = "eos" if new_ids and new_ids[-1] in eos_ids(engine) else "max_new_tokens"
    return Generation(model_name=engine.name, prompt=source_text, settings=None, prompt_ids=source_ids,
                      prompt_text=source_text, start_ids=ids[:1], new_ids=new_ids, text=text, finish=finish,
                      _attention=lambda: attention)


def _source_ids(engine: Any, source: Any) -> list[int]:
    """The source's token ids: given (a 1 × S tensor or a list), or the text through the tokenizer."""
    if isinstance(source, str):
        return engine.tokenizer(source)["input_ids"]
    try:  # tensors in a list, or words, are not one tensor of ids
        ids = torch.as_tensor(source) if isinstance(source, (torch.Tensor, list, tuple)) or hasattr(source, "__array__") else None
    except (TypeError, ValueError, RuntimeError, OverflowError):
        ids = None
    if ids is None or ids.dtype.is_floating_point or ids.dim() not in (1, 2) or (ids.dim() == 2 and ids.shape[0] != 1) \
            or not ids.numel():
        raise InputError(f"source must be the input ids given to model.generate (1 × S) or the source text, not "
                         f"{checks.short_repr(source)}.")
    return ids.flatten().tolist()
