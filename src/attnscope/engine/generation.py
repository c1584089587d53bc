"""Watch the model write (issue 48): generation token by token with exact attention at every step.

Design. Hugging Face caches keys after the rotary step, so the attention row of a generated token
at position t is softmax(q_t · K[:t+1]ᵀ · scale + what the layer adds: its window, soft-cap, sink
logit), the ScoreRule of exact_attention. The prompt runs once through the model's own fast
attention with fast_capture (its q, k and row log-sum-exps, as a long run's); each step feeds one
token through the cache, and the same attention function keeps that token's query row, its key
(taken from the attention call: sliding-window caches drop old keys) and its row's log-sum-exp
over every key so far. The run is therefore a LongAttentionResult over prompt + generated tokens,
and every long view reads it unchanged.

Memory: per layer the queries and keys of every position (the KV cache's size, in buffers with
room for the whole run, allocated once) and one log-sum-exp a head a position; a step adds O(1)
per layer and head and reads O(T). Never T × T, never a step's full rows.

Each chosen token is fed through the model at once (not at the next step), so its row exists when
the step is shown: the last token costs the one forward model.generate leaves out.

Exactness: every row equals one eager forward over prompt + output to 1e-6 in float64; in float32
to 1e-4, because the cached and the full forward round differently (SmolLM2: ~1e-5).

The model leaves each step as it came (borrowing.borrowed), and nothing is held between steps: a
stopped or abandoned run leaves nothing running and keeps the text so far.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .. import checks
from ..errors import InputError, NoAttentionError
from .attention_model import AttentionModel, model_of
from .encoder_decoder_generation import check_lengths, encoder_decoder_steps, from_encoder_decoder_output
from .exact_attention import ScoreRule
from .fast_capture import LayerCapture
from .generation_run import Generation, GenerationSettings, Reading, Stop, eos_ids, given_rows, settings_of, token_loop
from .models import forward_parameters, max_positions
from .results import AttentionResult, LongAttentionResult
from .run_progress import layer_progress
from .texts import groups_from_tokens, single_text
from .token_labels import labels_for_tokenizer

# Steps that check the model kernel's output against the recomputed row (checked_step).
CHECKED_STEPS = 4
CHECK_EVERY = 32


@dataclass
class _Kept:
    """Per layer the queries (heads × room × d) and keys (key heads × room × d) of every position
    so far, and the row log-sum-exps (layers × heads × room, float32), value norms likewise;
    `length` positions filled."""

    queries: list[torch.Tensor]
    keys: list[torch.Tensor]
    lse: torch.Tensor
    value_norms: torch.Tensor | None
    rules: list[ScoreRule]
    length: int

    @classmethod
    def of_prompt(cls, layers: list[LayerCapture], room: int) -> _Kept:
        n = layers[0].queries.shape[1]

        def buffer(t: torch.Tensor) -> torch.Tensor:  # t: heads × n (× d) → heads × room (× d), t first
            out = t.new_empty((t.shape[0], room, *t.shape[2:]))
            out[:, :n] = t
            return out

        norms = None if any(layer.value_norms is None for layer in layers) else \
            torch.stack([buffer(layer.value_norms) for layer in layers])
        return cls(queries=[buffer(layer.queries) for layer in layers], keys=[buffer(layer.keys) for layer in layers],
                   lse=torch.stack([buffer(layer.lse) for layer in layers]), value_norms=norms,
                   rules=[layer.rule for layer in layers], length=n)

    def add(self, layers: list[LayerCapture]) -> None:
        """One step's captures (its keys are written in already, by fast_capture); every layer's
        log-sum-exps and norms in one write each."""
        t = self.length
        for index, layer in enumerate(layers):
            self.queries[index][:, t] = layer.queries[:, 0]
        self.lse[:, :, t] = torch.stack([layer.lse[:, 0] for layer in layers])
        if self.value_norms is not None:
            if any(layer.value_norms is None for layer in layers):
                self.value_norms = None
            else:
                self.value_norms[:, :, t] = torch.stack([layer.value_norms[:, 0] for layer in layers])
        self.length = t + 1

    @property
    def nbytes(self) -> int:
        """What the buffers take, filled or not."""
        return sum(t.numel() * t.element_size() for t in (*self.queries, *self.keys, self.lse)
                   + ((self.value_norms,) if self.value_norms is not None else ()))


def checked_step(step: int) -> bool:
    """Whether step `step` (0: the first new token) checks the model's own output against the
    recomputed row (fast_capture.FastCapture.check_step): the first CHECKED_STEPS and every
    CHECK_EVERY-th after. A kernel that attends otherwise shows at once; the check was a third of a
    step's time on SmolLM2 at 512 tokens."""
    return step < CHECKED_STEPS or step % CHECK_EVERY == 0


def _generating_model(model: Any) -> AttentionModel:
    engine = model_of(model, "generate")
    hf = engine.model
    head = hf.get_output_embeddings() if hasattr(hf, "get_output_embeddings") else None
    if engine.is_encoder_decoder:
        if head is None:
            raise InputError(f"model={engine.name} ({type(hf).__name__}) cannot generate: it is an encoder-decoder "
                             "without its language-modelling head. Load its conditional-generation model, e.g. "
                             "BartForConditionalGeneration or AutoModelForSeq2SeqLM.from_pretrained(...).")
        if not engine.groups:
            raise InputError(f"model={engine.name} ({type(hf).__name__}) cannot generate with attention: attnscope "
                             "does not find its encoder's, decoder's and cross-attention modules.")
        return engine
    if head is None or not engine.causal:
        raise InputError(f"model={engine.name} ({type(hf).__name__}) cannot generate: it has no language-modelling "
                         "head on a causal decoder (an encoder reads text but does not write it). Load a causal LM, "
                         "e.g. attnscope.load('smollm2') or AutoModelForCausalLM.from_pretrained(...).")
    return engine


def _prompt_ids(engine: AttentionModel, prompt: str, chat: bool) -> tuple[str, Any]:
    """The prompt as the model reads it (the chat template's text when chat) and its encoding."""
    tokenizer = engine.tokenizer
    if chat:
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
    else:
        text = prompt
    offsets = bool(getattr(tokenizer, "is_fast", False))
    encoded = tokenizer(text, add_special_tokens=not chat, return_tensors="pt", return_offsets_mapping=offsets)
    return text, encoded


def generation_steps(
    model: Any, prompt: str, max_new_tokens: int = 32, *, do_sample: bool = False, temperature: float = 1.0,
    top_p: float = 1.0, seed: int | None = None, chat: bool | None = None, stop: Stop = None,
) -> Iterator[Generation]:
    """Generate token by token, yielding the same Generation after the prompt's pass (steps 0),
    after each new token, and once more when `stop` ended it (finish "stopped"); its attention is
    exact at every step.

    model: an AttentionModel of a causal LM (attnscope.load). prompt: the text to continue. An
    encoder-decoder's (BART, T5) prompt is its source: its run is encoder_decoder_generation's,
    each step's cross-attention over the source and self-attention over the output kept exact.
    do_sample False: greedy; True: sampled at `temperature` from the `top_p` nucleus with `seed`.
    chat: read the prompt as a user's message through the tokenizer's chat template (the default
    where the tokenizer has one, e.g. SmolLM2-Instruct). stop: a threading.Event or a callable,
    checked before each step: once set, the run ends with the text so far (finish "stopped").
    Nothing runs between steps: a caller may stop iterating at any time.
    """
    engine = _generating_model(model)
    prompt = single_text(prompt, "prompt")
    if prompt is None:
        raise InputError("prompt=None: give the text the model continues, as a str.")
    if not prompt.strip():
        raise InputError(f"prompt={checks.short_repr(prompt)} is empty: give the text the model continues.")
    has_template = bool(getattr(engine.tokenizer, "chat_template", None))
    chat = None if chat is None else checks.flag("chat", chat)
    if chat is None:
        chat = has_template
    elif chat and not has_template:
        raise InputError(f"chat=True, but {engine.name}'s tokenizer has no chat template: chat=False reads the prompt "
                         "as plain text.")
    settings = settings_of(max_new_tokens, do_sample, temperature, top_p, seed, chat)
    prompt_text, encoded = _prompt_ids(engine, prompt, settings.chat)
    prompt_ids = encoded["input_ids"].to(engine.device)
    if prompt_ids.shape[1] == 0:
        raise InputError(f"prompt={checks.short_repr(prompt)} gives no tokens: give the text the model continues.")
    engine.check_token_ids(prompt_ids)
    n_prompt = prompt_ids.shape[1]
    if engine.is_encoder_decoder:  # the prompt is the source the decoder reads by cross-attention
        check_lengths(engine, prompt, n_prompt, settings)
        yield from encoder_decoder_steps(engine, prompt, prompt_text, encoded, settings, stop, checked_step)
        return
    limit = max_positions(engine.model, engine.tokenizer)
    if limit is not None and n_prompt + settings.max_new_tokens > limit:
        raise InputError(f"max_new_tokens={settings.max_new_tokens} after a prompt of {n_prompt} tokens is more than "
                         f"{engine.name}'s {limit} positions: at most {max(0, limit - n_prompt)} new tokens fit.")
    yield from _run(engine, prompt, prompt_text, encoded, prompt_ids, settings, stop)


def _run(engine: AttentionModel, prompt: str, prompt_text: str, encoded: Any, prompt_ids: torch.Tensor,
         settings: GenerationSettings, stop: Stop) -> Iterator[Generation]:
    from transformers import DynamicCache

    parameters = forward_parameters(engine.model)
    cache_name = "cache" if "cache" in parameters else "past_key_values"
    extra = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}
    cache = DynamicCache(config=engine.model.config)
    n_prompt = prompt_ids.shape[1]
    # A long prompt's pass takes tens of seconds on a CPU (SmolLM2: ~30 s at 7,123 tokens) before
    # anything is shown: its layers are counted aloud, as a long run's are.
    counting = layer_progress(engine.attention_modules, n_prompt, f"reading the prompt's {n_prompt:,} tokens")
    output, layers = engine.captured_forward({"input_ids": prompt_ids, cache_name: cache, "use_cache": True, **extra},
                                             counting=counting)
    kept = _Kept.of_prompt(layers, n_prompt + settings.max_new_tokens)
    fused_layers: dict[int, bool] = {}  # the layers whose steps one fused call serves (fast_capture._fused_step)
    logits, output, layers = output.logits[0, -1], None, None
    reading = Reading(engine.tokenizer, len(prompt_text))
    run = Generation(model_name=engine.name, prompt=prompt, settings=settings, prompt_ids=prompt_ids[0].tolist(),
                     prompt_text=prompt_text)
    run._attention = lambda: _long_result(engine, run, kept, encoded, reading)

    def feed(token: int, step: int) -> torch.Tensor:
        ids = torch.tensor([[token]], device=prompt_ids.device)
        engine.check_token_ids(ids)
        output, layers = engine.captured_forward({"input_ids": ids, cache_name: cache, "use_cache": True, **extra},
                                                 keys_so_far=kept.keys, position=kept.length, rules=kept.rules,
                                                 check_step=checked_step(step), fused_layers=fused_layers)
        kept.add(layers)
        return output.logits[0, -1]

    yield from token_loop(engine, run, logits, settings, stop, reading, feed, kept)


def generate(model: Any, prompt: str, max_new_tokens: int = 32, *, do_sample: bool = False, temperature: float = 1.0,
             top_p: float = 1.0, seed: int | None = None, chat: bool | None = None, stop: Stop = None,
             on_step: Callable[[Generation], Any] | None = None) -> Generation:
    """generation_steps run to its end: the finished Generation. on_step(run) is called at each of
    its yields (a widget draws there)."""
    run = None
    for run in generation_steps(model, prompt, max_new_tokens, do_sample=do_sample, temperature=temperature,
                                top_p=top_p, seed=seed, chat=chat, stop=stop):
        if on_step is not None:
            on_step(run)
    return run


def _long_result(engine: AttentionModel, run: Generation, kept: _Kept, encoded: Any, reading: Reading) -> LongAttentionResult:
    """Prompt + output so far as a LongAttentionResult whose tensors are views of the buffers."""
    n = kept.length
    tokenizer = engine.tokenizer
    ids = run.ids
    tokens = tokenizer.convert_ids_to_tokens(ids)
    mapping = encoded.get("offset_mapping")
    offsets = sequence_ids = None
    if mapping is not None:
        special = set(getattr(tokenizer, "all_special_ids", ()) or ())
        offsets = [tuple(pair) for pair in mapping[0].tolist()] + reading.spans
        sequence_ids = list(encoded.sequence_ids(0)) + [None if i in special else 0 for i in run.new_ids]
    labels = labels_for_tokenizer(tokenizer, tokens, ids=ids, offsets=offsets, sequence_ids=sequence_ids,
                                  texts=[run.prompt_text + reading.raw])
    if n != len(ids):
        raise NoAttentionError(f"The run kept {n} positions for {len(ids)} tokens.")  # never: a bug if seen
    return LongAttentionResult(
        tokens=list(tokens),
        labels=labels.labels,
        token_notes=labels.notes,
        token_reading=labels.reading,
        queries=[q[:, :n] for q in kept.queries],
        keys=[k[:, :n] for k in kept.keys],
        lse=kept.lse[:, :, :n],
        value_norms=None if kept.value_norms is None else kept.value_norms[:, :, :n],
        rules=kept.rules,
        causal=any(rule.causal for rule in kept.rules),
        model_name=engine.name,
        text=run.prompt_text + reading.raw,
        input_ids=torch.tensor([ids]),
        word_groups=labels.words or groups_from_tokens(tokens, getattr(tokenizer, "all_special_tokens", ())),
    )


def from_generate(output: Any, model: Any, source: Any = None) -> Generation:
    """A Generation from the user's own `model.generate(ids, output_attentions=True,
    return_dict_in_generate=True)` output (one sequence): its per-step rows, given, not
    recomputed, as an AttentionResult (layers × heads × T × T) over the tokens the model read,
    the prompt and every new token but the last (model.generate never reads its last token back).
    An encoder-decoder's (BART, T5) is an EncoderDecoderResult of its encoder's, decoder's and
    cross-attention (encoder_decoder_generation.from_encoder_decoder_output); its output holds no source
    tokens: `source` gives them (the input ids given to model.generate, or the source text).
    model: the AttentionModel of the model that generated (its tokenizer and name)."""
    engine = _generating_model(model)
    if engine.is_encoder_decoder or getattr(output, "decoder_attentions", None) is not None:
        return from_encoder_decoder_output(output, engine, source)
    if source is not None:  # not taken silently: a decoder's prompt is in its output, and this may be another
        raise InputError(f"source= is an encoder-decoder's source, and {engine.name} is a decoder: its output.sequences "
                         f"hold the prompt; leave source out (got {checks.short_repr(source)}).")
    steps = getattr(output, "attentions", None)
    if not steps or getattr(output, "sequences", None) is None:
        raise InputError(f"output ({type(output).__name__}) has no attentions: generate with "
                         "output_attentions=True, return_dict_in_generate=True, the model in eager attention "
                         "(attn_implementation='eager').")
    sequences = output.sequences
    if sequences.dim() != 2 or sequences.shape[0] != 1:
        raise InputError(f"output.sequences has shape {tuple(sequences.shape)}: from_generate reads one sequence (1 × T).")
    rows = given_rows(steps, engine.n_layers, sequences.shape[1])
    n_prompt = rows.shape[2] - len(steps) + 1
    ids = sequences[0].tolist()
    new_ids = ids[n_prompt:]
    read = ids[: rows.shape[2]]
    tokenizer = engine.tokenizer
    tokens = tokenizer.convert_ids_to_tokens(read)
    prompt_text = tokenizer.decode(ids[:n_prompt], skip_special_tokens=False)
    labels = labels_for_tokenizer(tokenizer, tokens, ids=read)
    attention = AttentionResult(
        tokens=list(tokens), attention=rows, scaling=[], causal=True, model_name=engine.name,
        text=tokenizer.decode(read, skip_special_tokens=False), text_b=None, input_ids=torch.tensor([read]),
        word_groups=groups_from_tokens(tokens, getattr(tokenizer, "all_special_tokens", ())),
        labels=labels.labels, token_notes=labels.notes, covers_text=labels.covers_text,
    )
    finish = "eos" if new_ids and new_ids[-1] in eos_ids(engine) else "max_new_tokens"
    return Generation(model_name=engine.name, prompt=prompt_text, settings=None, prompt_ids=ids[:n_prompt],
                      prompt_text=prompt_text, new_ids=new_ids, text=tokenizer.decode(new_ids, skip_special_tokens=True),
                      finish=finish, _attention=lambda: attention)
