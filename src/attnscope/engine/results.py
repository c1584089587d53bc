"""Results of a run: attention of every layer and head, with what made it.

`word_attention` derives the word-level result the views and analyses share. A long input's run,
which keeps queries, keys and log-sum-exps in place of its attention, is long_result.py's
`LongAttentionResult` (imported from here too: `run_of` takes either).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import checks
from ..errors import InputError, NoAttentionError
from . import formulas as an
from .long_result import LongAttentionResult, query_index
from .token_labels import TokenLabels, join_labels, label_tokens, word_notes


class LayerMaps:
    """Each layer's tensor as the model gave it (attention: heads × Tq × Tk; queries, keys:
    heads × T × d; float32, on one device), not yet stacked. A view that draws one layer (the head
    view after an edit) reads it as it is; the layers × ... tensor is copied together the first
    time something asks for all of them (for `attention` a 67 MB copy at 512 tokens on MiniLM,
    most of it page faults of fresh memory)."""

    def __init__(self, layers: list[torch.Tensor]):
        self.layers = layers

    @property
    def shape(self) -> torch.Size:
        return torch.Size((len(self.layers), *self.layers[0].shape))

    def stacked(self) -> torch.Tensor:
        """layers × ...; the layers are released as they are copied (the peak is one
        copy and a layer, not two)."""
        first = self.layers[0]
        stacked = torch.empty(self.shape, dtype=torch.float32, device=first.device)
        for index in range(len(self.layers)):
            stacked[index] = self.layers[index]
            self.layers[index] = None
        del first
        return stacked


@dataclass(kw_only=True)
class AttentionResult:
    """Self-attention of one run (an encoder, a decoder-only model, or one part of an
    encoder-decoder model). Tensors live on the model's device.

    attention: layers × heads × T × T (float32), row i = how query token i attends to each key.
    queries, keys: layers × heads × T × head_dim (float32); None when they were not captured
    (precomputed attention, word-level results, models whose attention cannot be hooked).
    Cross-attention and encoder-decoder runs are the subclasses below.
    """

    tokens: list[str]  # the tokenizer's own strings (convert_ids_to_tokens)
    attention: torch.Tensor
    scaling: list[float]
    causal: bool
    model_name: str
    text: str
    text_b: str | None
    sentence_b_start: int | None = None
    queries: torch.Tensor | None = None
    keys: torch.Tensor | None = None
    values: torch.Tensor | None = field(default=None, repr=False)
    truncated_from: int | None = None
    input_ids: torch.Tensor | None = field(default=None, repr=False)
    # Token positions of each word ([CLS]/[SEP] are words of their own), for word-level views.
    word_groups: list[list[int]] | None = None
    # Heads switched off for this run (layer, head), 0-based; see `head_mask_hooks`.
    masked_heads: list[tuple[int, int]] = field(default_factory=list)
    # The same input without masking, when the caller keeps it to show what masking changed.
    unmasked: AttentionResult | None = field(default=None, repr=False)
    # The same input through a second model that shares the tokenizer (a widget's compare mode:
    # a model and its fine-tuned copy), when the caller keeps it to show both.
    compared: AttentionResult | None = field(default=None, repr=False)
    # Added to q·kᵀ·scale before the softmax (T5's relative-position bias): layers × heads × Tq × Tk.
    score_bias: torch.Tensor | None = field(default=None, repr=False)
    # Heads (layer, head), 0-based, whose attention holds NaN or ±inf (half-precision overflow,
    # broken weights); the views say so and the analyses refuse them.
    nonfinite_heads: list[tuple[int, int]] = field(default_factory=list)
    # Kobayashi et al.'s ‖f_h(x_j)‖ (value_norms.py): layers × heads × T keys, float32; None when
    # not captured (precomputed attention, word level). Cross-attention's: over its keys, the encoder's tokens.
    value_norms: torch.Tensor | None = field(default=None, repr=False)
    # What each token shows (token_labels.py): the text it covers; None → decoded from `tokens`.
    labels: list[str] | None = None
    # Per token, "" or what its label leaves out (the bytes of a character split over tokens).
    token_notes: list[str] | None = None
    # Per token, whether it stands for characters of the text (token_labels.TokenLabels.covers_text);
    # None → guessed from `tokens`.
    covers_text: list[bool] | None = None

    @property
    def n_layers(self) -> int:
        return int(self.attention_shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.attention_shape[1])

    @property
    def attention_shape(self) -> torch.Size:
        """layers × heads × Tq × Tk, without stacking layers the engine left apart (LayerMaps)."""
        return self.__dict__["_attention"].shape

    def layer_attention(self, layer: int) -> torch.Tensor:
        """One layer's attention, heads × Tq × Tk, without stacking the others (LayerMaps)."""
        held = self.__dict__["_attention"]
        return held.layers[layer] if isinstance(held, LayerMaps) and held.layers[0] is not None else self.attention[layer]

    def scores(self) -> torch.Tensor:
        """q·kᵀ scaled as the model scales it, plus the model's mask: layers × heads × T × T."""
        if self.queries is None or self.keys is None:
            raise NoAttentionError("Queries and keys were not captured for this model.")
        scale = torch.tensor(self.scaling, device=self.queries.device, dtype=self.queries.dtype)
        scores = torch.matmul(self.queries, self.keys.transpose(-1, -2)) * scale.view(-1, 1, 1, 1)
        if self.score_bias is not None:
            scores = scores + self.score_bias
        if self.causal:
            t = scores.shape[-1]
            future = torch.ones(t, t, dtype=torch.bool, device=scores.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        return scores

    def attention_from_qk(self) -> torch.Tensor:
        """softmax(q·kᵀ·scale + mask): reproduces `attention` (the engine's invariant)."""
        return torch.softmax(self.scores(), dim=-1)

    def first_columns(self, layer: int, n: int) -> torch.Tensor:
        """Every head's attention on the first n keys: heads × T × n (as for long inputs)."""
        layer = checks.integer("layer", layer, minimum=0, maximum=self.n_layers - 1)
        return self.attention[layer, :, :, :n].float()

    def attention_rows(self, layer: int, head: int, queries) -> torch.Tensor:
        """Rows `queries` of one head: len(queries) × keys, float32, on the CPU (as for long inputs)."""
        layer, head = _layer_head(layer, head, self.n_layers, self.n_heads)
        index = query_index(queries, self.attention.shape[-2])
        return self.attention[layer, head][index.to(self.attention.device)].float().cpu()


def _stacked_on_read(name: str, doc: str) -> property:
    """A dataclass field that reads as a tensor: a LayerMaps given to it is stacked on first read
    (the field stays a field: constructors, `dataclasses.replace` and `fields` name it)."""
    key = "_" + name

    def read(self: AttentionResult) -> torch.Tensor | None:
        held = self.__dict__[key]
        if isinstance(held, LayerMaps):
            held = self.__dict__[key] = held.stacked()
        return held

    def hold(self: AttentionResult, value: torch.Tensor | LayerMaps | None) -> None:
        self.__dict__[key] = value

    return property(read, hold, doc=doc)


AttentionResult.attention = _stacked_on_read("attention", "layers × heads × Tq × Tk (float32)")
AttentionResult.queries = _stacked_on_read("queries", "layers × heads × T × head_dim (float32), or None")
AttentionResult.keys = _stacked_on_read("keys", "layers × heads × T × head_dim (float32), or None")
AttentionResult.values = _stacked_on_read(
    "values", "layers × heads × T × head_dim (float32): the value projection's output, key-value heads repeated, or None")


@dataclass(kw_only=True)
class CrossAttentionResult(AttentionResult):
    """Cross-attention: the decoder's tokens (queries, `tokens`) attend to the encoder's
    (`key_tokens`); attention is layers × heads × Tq × Tk."""

    key_tokens: list[str]
    key_word_groups: list[list[int]] | None = None
    key_labels: list[str] | None = None
    key_token_notes: list[str] | None = None


@dataclass(kw_only=True)
class EncoderDecoderResult(AttentionResult):
    """An encoder-decoder run: its own fields are one part's (the encoder's when the run has one),
    and `parts` holds each part, "encoder", "decoder" and "cross", as a result of its own."""

    parts: dict[str, AttentionResult]
    # The decoder's text was cut to fit: its untruncated length.
    decoder_truncated_from: int | None = None

    @classmethod
    def of(cls, parts: dict[str, AttentionResult], decoder_truncated_from: int | None = None) -> EncoderDecoderResult:
        """The run of `parts`, standing as the first self-attention part (the encoder's if given)."""
        first = next((parts[p] for p in ("encoder", "decoder") if p in parts), None) or next(iter(parts.values()))
        own = {f.name: getattr(first, f.name) for f in dataclasses.fields(AttentionResult)}
        run = cls(**own, parts={}, decoder_truncated_from=decoder_truncated_from)
        run.parts = {name: run if part is first else part for name, part in parts.items()}
        return run


def _layer_head(layer, head, n_layers: int, n_heads: int) -> tuple[int, int]:
    return (checks.integer("layer", layer, minimum=0, maximum=n_layers - 1),
            checks.integer("head", head, minimum=0, maximum=n_heads - 1))


def _stands_for_a_run(value: Any) -> bool:
    """A widget: known by its class's mark (AttentionWidget.stands_for_its_run), not imported, as
    the widget is a layer above results."""
    return getattr(type(value), "stands_for_its_run", False) is True


def run_of(value: Any, what: str, *, long: bool = True) -> AttentionResult | LongAttentionResult:
    """`value` as the run `what` reads: a result (model.run(text)), or a widget, which stands for
    its run per token with its masks (widget.token_result; Words and Show change are ways of
    showing it). InputError saying what it got otherwise; long False: a long run (q, k and
    log-sum-exps, no T × T) is refused too, saying how to keep the full attention."""
    if not isinstance(value, (AttentionResult, LongAttentionResult)) and _stands_for_a_run(value):
        value = value.token_result  # a widget's run; InputError for a closed widget
    if isinstance(value, LongAttentionResult):
        if not long:
            raise InputError(f"{what} needs the full attention, and this run of {value.n_tokens:,} tokens keeps it on "
                             "demand (queries, keys and log-sum-exps): run it with attention='full', or a shorter text.")
        return value
    if not isinstance(value, AttentionResult):
        hint = " (an analysis: show it with widget.show_analysis)" if hasattr(value, "attrs") and \
            getattr(value, "attrs", {}).get("attnscope") else ""
        raise InputError(f"{what} reads one run: a result (model.run(text)) or a widget, not {checks.kind_of(value)}{hint}.")
    return value


def key_tokens_of(result: AttentionResult) -> list[str] | None:
    """The key tokens when they are not the query tokens (cross-attention), else None."""
    return result.key_tokens if isinstance(result, CrossAttentionResult) else None


def parts_of(result: AttentionResult) -> dict[str, AttentionResult]:
    """An encoder-decoder run's parts by name; empty for any other result."""
    return result.parts if isinstance(result, EncoderDecoderResult) else {}


_NAMED = re.compile(r"^(\[[A-Za-z_][A-Za-z0-9_]*\]|<[^<>\s]+>|<\|[^|]+\|>)$")  # [CLS], [unused1], </s>, <|endoftext|>


def fallback_labels(tokens: list[str]) -> TokenLabels:
    """Labels for tokens without a tokenizer at hand (precomputed attention): special-looking
    names kept, byte-level pieces decoded when the tokens use GPT-2's space marker."""
    special = [bool(_NAMED.match(t)) and not t.startswith("<0x") for t in tokens]
    return label_tokens(tokens, special=special, byte_level=any(t.startswith("Ġ") for t in tokens))


def labels_of(result: AttentionResult) -> list[str]:
    """What the query tokens show: the run's labels, or labels decoded from its tokens."""
    return list(result.labels) if result.labels is not None else fallback_labels(list(result.tokens)).labels


def notes_of(result: AttentionResult) -> list[str]:
    """Per query token, "" or what its label leaves out (a split character's bytes)."""
    if result.token_notes is not None:
        return list(result.token_notes)
    return [""] * len(result.tokens) if result.labels is not None else fallback_labels(list(result.tokens)).notes


def key_labels_of(result: AttentionResult) -> list[str] | None:
    """What the key tokens show when they are not the query tokens (cross-attention), else None."""
    if not isinstance(result, CrossAttentionResult):
        return None
    return list(result.key_labels) if result.key_labels is not None else fallback_labels(list(result.key_tokens)).labels


def key_notes_of(result: AttentionResult) -> list[str]:
    """Per key token of cross-attention, "" or what its label leaves out; empty for self-attention."""
    if not isinstance(result, CrossAttentionResult):
        return []
    if result.key_token_notes is not None:
        return list(result.key_token_notes)
    if result.key_labels is not None:
        return [""] * len(result.key_tokens)
    return fallback_labels(list(result.key_tokens)).notes


def covers_text_of(result: AttentionResult) -> list[bool]:
    """Per query token, whether it stands for characters of the text: the run's flags, or guessed
    from the tokens (special-looking names do not)."""
    if result.covers_text is not None:
        return list(result.covers_text)
    return list(fallback_labels(list(result.tokens)).covers_text)


def opening_query(result: AttentionResult) -> int:
    """The query the neuron view opens on: a token of the text, not [CLS] or a decoder's start
    token. With causal attention the last (it sees the whole text; the first sees only itself),
    otherwise the first. 0 when no token stands for the text."""
    of_text = [i for i, covers in enumerate(covers_text_of(result)) if covers]
    if not of_text:
        return 0
    return of_text[-1] if result.causal else of_text[0]


def word_attention(result: AttentionResult) -> AttentionResult:
    """The result with wordpieces merged into words: attention TO a word is summed over its pieces,
    FROM a word averaged over them (rows still sum to 1). Queries and keys do not merge, so the
    word-level result has none (the neuron view stays token-level). A widget stands for its run."""
    result = run_of(result, "word_attention", long=False)
    if result.word_groups is None:
        raise InputError("This result has no word boundaries (its word_groups are None), so its words cannot be merged.")
    groups = result.word_groups
    key_groups = key_tokens = None
    if isinstance(result, CrossAttentionResult):  # the keys are the encoder's tokens
        if result.key_word_groups is None:
            raise InputError("This cross-attention result has no word boundaries for its keys.")
        key_groups = result.key_word_groups
        key_tokens = an.merge_tokens(result.key_tokens, key_groups)
        key_words = [join_labels([key_labels_of(result)[p] for p in g]) for g in key_groups]
    merged = an.merge_words(result.attention, groups, key_groups)
    b_start = None
    if result.sentence_b_start is not None:
        b_start = next((w for w, g in enumerate(groups) if g[0] >= result.sentence_b_start), None)
    labels = labels_of(result)
    covers = covers_text_of(result)
    fields = dict(
        tokens=an.merge_tokens(result.tokens, groups),
        # A word shows its tokens' labels joined: the word as the text writes it.
        labels=[join_labels([labels[p] for p in g]) for g in groups],
        token_notes=word_notes(groups, notes_of(result)),
        covers_text=[any(covers[p] for p in g) for g in groups],
        sentence_b_start=b_start,
        attention=merged,
        queries=None,
        keys=None,
        scaling=list(result.scaling),
        causal=result.causal,
        model_name=result.model_name,
        text=result.text,
        text_b=result.text_b,
        truncated_from=result.truncated_from,
        word_groups=[[w] for w in range(len(groups))],
        masked_heads=list(result.masked_heads),
    )
    if key_tokens is not None:
        return CrossAttentionResult(**fields, key_tokens=key_tokens, key_labels=key_words,
                                    key_token_notes=word_notes(key_groups, key_notes_of(result)),
                                    key_word_groups=[[w] for w in range(len(key_tokens))])
    return AttentionResult(**fields)
