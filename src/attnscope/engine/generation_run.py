"""What a generation run is (issue 48), whatever the model: its settings, the Generation it grows,
how it picks each token and where each new token's text lies. A decoder's steps
(generation.py) and an encoder-decoder's (encoder_decoder_generation.py) share them."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import checks
from ..errors import InputError

Stop = threading.Event | Callable[[], bool] | None


@dataclass(frozen=True)
class GenerationSettings:
    """How a run chose its tokens: greedy (do_sample False) or sampled at `temperature` from the
    top-p nucleus with `seed` (picked at random and recorded when not given: the run reproduces)."""

    max_new_tokens: int
    do_sample: bool
    temperature: float
    top_p: float
    seed: int | None
    chat: bool


@dataclass(eq=False)
class Generation:
    """A generation run: the prompt as the model read it (chat template applied; an
    encoder-decoder's source), the tokens it wrote and how it chose them; `attention` is every
    token's attention as a LongAttentionResult (exact rows on demand; an encoder-decoder's:
    encoder_decoder_long.EncoderDecoderLongResult over source + decoder tokens), or, from
    model.generate's own output (from_generate), its given rows as an AttentionResult (an
    EncoderDecoderResult for an encoder-decoder). Grows while the run goes on (generation_steps)."""

    model_name: str
    prompt: str
    settings: GenerationSettings | None  # None: not known (from_generate: the user's own model.generate)
    prompt_ids: list[int]
    prompt_text: str  # the prompt as the model read it: with the chat template when chat
    new_ids: list[int] = field(default_factory=list)
    text: str = ""  # the new tokens decoded, special tokens left out
    stopped: bool = False  # stopped by `stop` before max_new_tokens or the end-of-text token
    finish: str | None = None  # "eos", "max_new_tokens" or "stopped"; None while it runs
    # An encoder-decoder's decoder start token (what its decoder reads before the first new token),
    # else empty: a decoder continues the prompt itself.
    start_ids: list[int] = field(default_factory=list)
    _attention: Callable[[], Any] | None = field(default=None, repr=False)
    _shown: tuple[int, Any] | None = field(default=None, repr=False)
    _forget: Callable[[int], None] | None = field(default=None, repr=False)  # token_loop's: drops a stopped run's last steps

    def keep_first(self, steps: int) -> None:
        """A stopped run cut back to its first `steps` new tokens, its rows with them: what a
        page showed when its reader pressed Stop (the steps made while the click travelled are
        dropped). Only a stopped run, never below 0 or above what it has."""
        if self.finish != "stopped" or self._forget is None or not 0 <= steps < self.steps:
            return
        self._forget(steps)
        self._shown = None

    @property
    def steps(self) -> int:
        return len(self.new_ids)

    @property
    def ids(self) -> list[int]:
        """Every token the attention covers, in its order: the prompt (an encoder-decoder's
        source), the decoder's start token where there is one, the new tokens."""
        return self.prompt_ids + self.start_ids + self.new_ids

    @property
    def decoder_ids(self) -> list[int]:
        """What the decoder reads: an encoder-decoder's start token and new tokens; a decoder's
        prompt and new tokens."""
        return self.start_ids + self.new_ids if self.start_ids else self.ids

    @property
    def attention(self) -> Any:
        """The attention over prompt + output so far (made on first read after each step)."""
        if self._shown is None or self._shown[0] != self.steps:
            self._shown = (self.steps, self._attention())
        return self._shown[1]


def settings_of(max_new_tokens, do_sample, temperature, top_p, seed, chat) -> GenerationSettings:
    """The settings, each checked (InputError naming the parameter); a seed picked when sampling without one."""
    max_new_tokens = checks.integer("max_new_tokens", max_new_tokens, minimum=1)
    do_sample = checks.flag("do_sample", do_sample)
    checks.number("temperature", temperature), checks.number("top_p", top_p)  # the messages below say them as given
    if temperature < 0:  # (0 with greedy is a common way to say greedy; below 0 is a slip either way)
        raise InputError(f"temperature={temperature} is below 0: it must be above 0 when sampling "
                         "(1.0 samples from the model's own distribution), and greedy runs (do_sample=False) do not use it.")
    if do_sample and not temperature > 0:
        raise InputError(f"temperature={temperature} with do_sample=True: sampling needs a temperature above 0 "
                         "(1.0 samples from the model's own distribution); do_sample=False is greedy.")
    if not 0 < top_p <= 1:
        raise InputError(f"top_p={top_p} is outside (0, 1]: it is the share of probability the sampled token "
                         "comes from (1.0: every token).")
    if seed is not None:
        seed = checks.integer("seed", seed, minimum=0)
    elif do_sample:
        seed = random.SystemRandom().randrange(2**63)  # recorded: the run reproduces
    return GenerationSettings(max_new_tokens, do_sample, float(temperature), float(top_p), seed, bool(chat))


def eos_ids(engine: Any) -> set[int]:
    """The ids that end a run: the generation config's end-of-text tokens, else the tokenizer's."""
    found = getattr(getattr(engine.model, "generation_config", None), "eos_token_id", None)
    if found is None:
        found = getattr(engine.tokenizer, "eos_token_id", None)
    return set(found if isinstance(found, (list, tuple)) else [] if found is None else [found])


def sampler(settings: GenerationSettings, device: torch.device) -> torch.Generator | None:
    """The random generator a sampled run draws from (seeded: the run reproduces); None when greedy."""
    if not settings.do_sample:
        return None
    return torch.Generator(device=device).manual_seed(settings.seed)


def choose(logits: torch.Tensor, settings: GenerationSettings, generator: torch.Generator | None) -> int:
    """The next token from the last position's logits (vocabulary,)."""
    if not settings.do_sample:
        return int(logits.argmax())
    p = torch.softmax(logits.float() / settings.temperature, dim=-1)
    if settings.top_p < 1:
        ordered, order = p.sort(descending=True)
        before = ordered.cumsum(0) - ordered  # the mass of the more likely tokens
        ordered[before >= settings.top_p] = 0  # the smallest set that reaches top_p (the first always stays)
        p = torch.zeros_like(p).scatter_(0, order, ordered)
    return int(torch.multinomial(p, 1, generator=generator))


def stop_requested(stop: Stop) -> bool:
    if stop is None:
        return False
    return stop.is_set() if isinstance(stop, threading.Event) else bool(stop())


class Reading:
    """Where each generated token's text lies in `start` characters + generated text (for the
    labels): the text decoded so far, measured after each token; the tokens of a character split
    over several share its span, as a fast tokenizer's offsets say."""

    def __init__(self, tokenizer: Any, start: int):
        self.tokenizer, self.start = tokenizer, start
        self.spans: list[tuple[int, int]] = []
        self.raw = ""
        self._pending = 0

    def cut_to(self, ids: list[int]) -> None:
        """The spans of `ids`, a first part of the tokens read (a run cut back): those before the
        last character that ends where its own token does stand as measured; the tokens after it
        are measured again as they came (a character split over tokens may end past the cut)."""
        start = len(ids)
        while start > 0 and (self.spans[start - 1] == (0, 0) or self.spans[start] == self.spans[start - 1]):
            start -= 1
        self.spans, self._pending = self.spans[:start], 0
        self.raw = self.tokenizer.decode(ids[:start], skip_special_tokens=False)
        for n in range(start + 1, len(ids) + 1):
            self.add(ids[:n])

    def add(self, ids: list[int]) -> None:
        self.raw = self.tokenizer.decode(ids, skip_special_tokens=False)
        if self.raw.endswith("\ufffd"):  # a character not complete yet
            self._pending += 1
            self.spans.append((0, 0))
            return
        end = self.start + len(self.raw)
        begin = self.spans[-1 - self._pending][1] if len(self.spans) > self._pending else self.start
        for index in range(len(self.spans) - self._pending, len(self.spans)):
            self.spans[index] = (begin, end)
        self._pending = 0
        self.spans.append((begin, end))


def token_loop(engine: Any, run: Generation, logits: torch.Tensor, settings: GenerationSettings, stop: Stop,
               reading: Reading, feed: Callable[[int, int], torch.Tensor], kept: Any) -> Iterator[Generation]:
    """The steps of a run whose prompt (or source) the model has read, `logits` its next token's:
    yields `run` as it is, then after each new token, and once more when `stop` ended it (finish
    "stopped"). feed(token, step) runs the model on the chosen token (step: 0 for the first new
    one) and returns the next token's logits: each token is read at once, so its row exists when
    its step is shown. kept: the run's buffers, whose `length` counts the positions read (a
    stopped run cut back forgets its last ones: Generation.keep_first)."""

    def forget(steps: int) -> None:
        kept.length -= run.steps - steps
        del run.new_ids[steps:]
        reading.cut_to(run.new_ids)
        run.text = engine.tokenizer.decode(run.new_ids, skip_special_tokens=True)

    run._forget = forget
    generator = sampler(settings, logits.device)
    eos = eos_ids(engine)
    yield run
    while run.finish is None:
        if stop_requested(stop):
            run.stopped, run.finish = True, "stopped"
            break
        token = choose(logits, settings, generator)
        logits = feed(token, run.steps)
        run.new_ids.append(token)
        reading.add(run.new_ids)
        run.text = engine.tokenizer.decode(run.new_ids, skip_special_tokens=True)
        if token in eos:
            run.finish = "eos"
        elif run.steps >= settings.max_new_tokens:
            run.finish = "max_new_tokens"
        yield run
    if run.finish == "stopped":
        yield run


GENERATE_WITH = ("Generate with output_attentions=True, return_dict_in_generate=True, the model in eager attention "
                 "(attn_implementation='eager').")


def given_probabilities(given: Any, name: str, shape: tuple[int, ...], wanted: str) -> torch.Tensor:
    """One of model.generate's returned attentions (1 × heads × queries × keys, as `shape` says:
    None where any size goes, a (lo, hi) pair for a range of key counts) as heads × queries ×
    keys float32 on the CPU, checked to be rows of probabilities; InputError naming it otherwise."""
    ok = given is not None and isinstance(given, torch.Tensor) and given.dim() == len(shape)
    for size, expected in zip(given.shape if ok else (), shape):
        if isinstance(expected, tuple):
            ok = ok and expected[0] <= size <= expected[1]
        elif expected is not None:
            ok = ok and size == expected
    if not ok:
        found = tuple(given.shape) if isinstance(given, torch.Tensor) else None
        raise InputError(f"{name} has shape {found}, not {wanted} (heads × queries × keys). {GENERATE_WITH}")
    block = given[0].detach().float().cpu()
    sums = block.sum(-1)
    if not bool(torch.isfinite(block).all()) or float(block.min()) < -1e-6 or float(sums.max()) > 1 + 1e-3:
        raise InputError(f"{name} is not attention probabilities (rows of weights in [0, 1] summing to at "
                         f"most 1; found {float(block.min()):.3g} … {float(block.max()):.3g}, row sums up to "
                         f"{float(sums.max()):.4g}): pass the attentions, not the scores or logits.")
    return block


def given_rows(steps: Any, n_layers: int, n_sequence: int, name: str = "output.attentions") -> torch.Tensor:
    """output.attentions (per step, per layer: 1 × heads × queries × keys; the prompt's pass, then
    one row a step, a sliding-window layer's over its last keys only) as layers × heads × T × T,
    float32, T the tokens read; each checked to be a row of probabilities. `name`: what the
    messages call them (an encoder-decoder's output.decoder_attentions, its first pass the start token's)."""
    first = steps[0]
    if not isinstance(first, (tuple, list)) or len(first) != n_layers:
        raise InputError(f"{name}[0] holds {len(first) if isinstance(first, (tuple, list)) else 'no'} "
                         f"layers' attentions, not the model's {n_layers}: is it this model's output?")
    n_heads, n_prompt = first[0].shape[1], first[0].shape[-1]
    n = n_prompt + len(steps) - 1
    if n_prompt + len(steps) != n_sequence:
        raise InputError(f"{name} has {len(steps)} steps after a prompt of {n_prompt} tokens, but "
                         f"output.sequences has {n_sequence} tokens, not {n_prompt + len(steps)}.")
    rows = torch.zeros(n_layers, n_heads, n, n, dtype=torch.float32)
    for step, layers in enumerate(steps):
        if not isinstance(layers, (tuple, list)) or len(layers) != n_layers:
            raise InputError(f"{name}[{step}] does not hold one attention per layer ({n_layers}).")
        for layer, given in enumerate(layers):
            queries = n_prompt if step == 0 else 1
            at = 0 if step == 0 else n_prompt + step - 1  # the first query's position
            block = given_probabilities(given, f"{name}[{step}][{layer}]", (1, n_heads, queries, (1, at + queries)),
                                        f"1 × {n_heads} × {queries} × (at most {at + queries})")
            keys = block.shape[-1]
            rows[layer, :, at : at + queries, at + queries - keys : at + queries] = block
    return rows
