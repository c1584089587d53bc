"""The anywidget: thin glue between an AttentionModel and the views in js/.

Each synced trait is documented where it is declared (`synced`, see contract.py): what it holds,
who writes it, and what a saved page does with it. Payloads are built in payloads.py, requests
and answers go through messages.Channel, and export.py saves the widget's own state as a page.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import uuid
import warnings
import weakref
from pathlib import Path
from typing import Any

import anywidget
import traitlets
from traitlets import Bool, Dict, Enum, Int, List, Unicode

from . import checks
from . import payloads as pl
from .contract import synced
from .engine import AttentionModel, AttentionResult, NonFiniteAttentionWarning, head_pair, load
from .errors import AttnscopeError, InputError
from .exact_attention import describe_bytes, full_attention_bytes
from .files import write_atomic
from .messages import WINDOW_TOKENS, Channel
from .results import LongAttentionResult, key_notes_of, notes_of, opening_query, parts_of

STATIC = Path(__file__).parent / "static"
VIEWS = ("head", "model", "neuron", "rollout", "analysis", "text", "map")
# A long run keeps q, k and log-sum-exps (LongAttentionResult): its views ask for what they draw.
LONG_VIEWS = ("text", "map", "head", "model", "analysis")
SHORT_VIEWS = ("head", "model", "neuron", "rollout", "analysis")
THUMBNAIL_SIZE = 48

# Shown instead of a blank cell when the package was installed without its built front end.
_MISSING_BUNDLE_ESM = """
export default { render({ el }) {
  const p = document.createElement("pre");
  p.textContent = "attnscope: the JavaScript bundle is missing (src/attnscope/static/widget.js). " +
    "Build it with `npm install && npm run build`, or reinstall attnscope.";
  p.style.color = "#b00020";
  el.appendChild(p);
} };
"""


def _static(name: str, fallback: str) -> str:
    """The bundle's text. Never a Path: anywidget turns a path into a watched FileContents whose
    change signal keeps a reference to every widget ever made, so closed widgets were never freed.
    The trailing newline keeps anywidget from reading a one-line bundle as a file name."""
    path = STATIC / name
    return path.read_text(encoding="utf-8").rstrip("\n") + "\n" if path.is_file() else fallback


@functools.lru_cache(maxsize=4)
def _default_engine(device: str | None) -> AttentionModel:
    # Loading takes seconds; every show() without a model reuses the embedded one.
    return load(None, device=device)


def resolve_engine(model: Any = None, tokenizer: Any = None, device: str | None = None) -> AttentionModel:
    if isinstance(model, AttentionModel):
        return model
    if model is None and tokenizer is None:
        return _default_engine(device)
    return load(model, tokenizer, device)


NEEDS_A_MODEL = (
    "{what} needs a model, and this view was made from precomputed attention. "
    "Use attnscope.show(text, model=...) to run a model live."
)



def _long_only(view: str) -> str:
    return (f"The {view} view is for long inputs, whose attention comes on request; this run keeps its full "
            "attention: use the head, model, neuron, rollout or analysis view, or attention='on_demand'.")


def _short_only(view: str, result: LongAttentionResult) -> str:
    full = full_attention_bytes(result.n_layers, result.n_heads, result.n_tokens, result.n_tokens)
    return (
        f"The {view} view draws the full attention, which this text of {result.n_tokens:,} tokens does not keep "
        f"({result.n_layers} layers × {result.n_heads} heads × {result.n_tokens:,}² would take {describe_bytes(full)}): "
        "use the text, map, head (a window of it), model or analysis view, or a shorter text."
    )


class SettingError(InputError, traitlets.TraitError):
    """A widget setting given a value it cannot take (`widget.layer = 99`): an InputError, shown from
    the user's line like every other, that traitlets handles as its own TraitError."""


class AttentionWidget(anywidget.AnyWidget):
    """Live attention views of one text (or text pair) for a model. Layers and heads are counted
    from 0, here and in the views: `layer=5` opens "Layer 5", Hugging Face's `attentions[5]`.

    >>> w = AttentionWidget("The cat sat on the mat.")           # embedded MiniLM
    >>> w = AttentionWidget("A question?", "An answer.", model="bert-base-uncased", layer=5)
    """

    _esm = _static("widget.js", _MISSING_BUNDLE_ESM)
    _css = _static("widget.css", "")

    # What is shown
    view = synced(Enum(VIEWS, default_value="head"), "The open view: head, model, neuron, rollout or analysis; for "
                  "long inputs text, map, head (a window around focus_token), model or analysis.", writer="both", page="view")
    picture_id = synced(Unicode(""), "Names this widget's picture output (picture.py), which the live view hides.")
    text = synced(Unicode(""), "Sentence A as run (an edit arrives as `request`; setting it from Python reruns).")
    text_b = synced(Unicode(None, allow_none=True), "Sentence B (or an encoder-decoder model's decoder text), or None.")
    request = synced(Dict(), "An edit from the browser, {id, text, text_b}; the kernel reruns and answers with "
                     "result_id = id, so the view ignores answers older than what is typed.",
                     writer="view", page="edit", label="the sentence")
    result_id = synced(Int(0), "The id of the edit the current run answers (0 for the first run).")
    error = synced(Unicode(""), "A visible message when an edit or setting failed; the previous view stays.")
    notice = synced(Unicode(""), "Visible notes on the run, a line each: truncation, heads with NaN attention.")
    editable = synced(Bool(True), "False for precomputed attention: no model to rerun, no sentence editor.")

    # The run
    tokens = synced(List(Unicode()), "The query tokens (words when word_level), as shown.")
    key_tokens = synced(List(Unicode()), "Cross-attention: the keys' (encoder's) tokens; otherwise empty.")
    token_notes = synced(List(Unicode()), "Per query token, \"\" or what its label leaves out (the bytes of a character "
                                          "split over tokens), shown on hover.")
    key_token_notes = synced(List(Unicode()), "Cross-attention: the same per key token; otherwise empty.")
    token_reading = synced(List(Unicode()), "A long run: per token, what it adds to the text read as running text "
                                            "(its spaces, no ##), the text view's flow; otherwise empty.")
    sentence_b_start = synced(Int(None, allow_none=True), "Index of sentence B's first token, or None.")
    n_layers = synced(Int(0), "Layers of the shown attention.")
    n_heads = synced(Int(0), "Heads per layer of the shown attention.")
    model_name = synced(Unicode(""), "The model's name, as titles show it.")
    causal = synced(Bool(False), "The shown attention is causal: later tokens are masked.")
    neuron_unavailable = synced(Unicode(""), "Why the neuron view cannot show this run (it needs the queries and keys), "
                                "shown in its tab; \"\" when it can.")
    parts = synced(List(Unicode()), 'Encoder-decoder models: ["encoder", "decoder", "cross"]; otherwise empty.')
    attention_part = synced(Enum(("encoder", "decoder", "cross"), default_value="encoder"),
                            "The part of an encoder-decoder model the views show.",
                            writer="both", page="fixed", label="the attention part")

    # The head view
    layer = synced(Int(0), "The selected layer, 0-based; `attention` carries it.", writer="both", page="layer")
    attention = synced(Dict(), "The selected layer: {layer, data: uint8 bytes, dtype, shape: [heads, Tq, Tk], scale}.")
    heads = synced(List(Int()), "The visible heads, 0-based.", writer="both", page="view")
    sentence_filter = synced(Enum(("all", "aa", "bb", "ab", "ba"), default_value="all"),
                             "Which sentence's tokens attend to which: all, aa, bb, ab or ba.", writer="both", page="view")
    theme = synced(Enum(("auto", "light", "dark"), default_value="auto"),
                   "auto follows JupyterLab's theme.", writer="both", page="view")
    word_level = synced(Bool(False), "Wordpieces merged into words (Clark et al. 4.1): summed as keys, averaged as queries.",
                        writer="both", page="fixed", label="the Words setting")

    # The model view
    thumbnails = synced(Dict(), "Max-pooled S × S maps of the included layers × heads, made while a view needs them: "
                        "{layers, heads, n_tokens, n_key_tokens, data: uint8 bytes, dtype, shape: [L, H, S, S], scale}.")
    include_layers = synced(List(Int(), default_value=None, allow_none=True), "The model view's layers, or None for all.")
    include_heads = synced(List(Int(), default_value=None, allow_none=True), "The model view's heads, or None for all.")
    masked_heads = synced(List(List(Int()), default_value=[]),
                          "[[layer, head], ...] switched off (Michel et al.'s ξ_h = 0); the kernel reruns.",
                          writer="both", page="fixed", label="masked heads")
    show_change = synced(Bool(False), "With masked heads, the head and model views draw |A_masked − A|.",
                         writer="both", page="fixed", label="Show change")
    mask_summary = synced(Unicode(""), "One line on what masking changed.")

    # The neuron, rollout and analysis views
    neuron_head = synced(Int(0), "The neuron view's head; its numbers come by a \"neuron\" request (messages.py).",
                         writer="both", page="view")
    neuron_query = synced(Int(0), "The neuron view's query token.", writer="both", page="view")
    rollout = synced(Dict(), "Abnar & Zuidema's rollout through every layer, made while the Rollout tab is open: "
                     "{n_tokens, data: uint8 bytes, dtype, shape: [L, T, T], scale}, or {error}.")
    analysis = synced(Dict(), "A per-head table from show_analysis() as plain lists (payloads.analysis_payload).")

    # Long inputs: attention on request ("attention_rows" and "attention_tile" messages)
    long_context = synced(Bool(False), "The run kept q, k and row log-sum-exps (a long input): the text and map views "
                          "ask for exact rows and tiles; head, neuron and rollout are off.")
    n_key_heads = synced(Int(0), "Key heads per layer: query head h reads key head h // (n_heads / n_key_heads) "
                         "(grouped-query attention); n_heads otherwise.")
    focus_token = synced(Int(0), "The text view's selected token. A causal long run opens on its last token (token 0 "
                         "attends only to itself) until a token is chosen.", writer="both", page="view")
    focus_head = synced(Int(-1), "The text and map views' head; -1 for the mean of the layer's heads.",
                        writer="both", page="view")
    direction = synced(Enum(("from", "to"), default_value="from"),
                       "The text view shades the attention from the selected token (its row) or to it (its column).",
                       writer="both", page="view")
    sink_aside = synced(Int(0), "The first n tokens set aside from the colour scales (attention sinks), 0 for none.",
                        writer="both", page="view")
    map_reduce = synced(Enum(("max", "mean"), default_value="max"), "How the map pools blocks of token pairs.",
                        writer="both", page="view")

    def __init__(
        self,
        text: str | None = None,
        text_b: str | None = None,
        model: Any = None,
        *,
        tokenizer: Any = None,
        device: str | None = None,
        layer: int = 0,
        heads: list[int] | None = None,
        max_length: int | None = None,
        view: str | None = None,
        theme: str = "auto",
        include_layers: list[int] | None = None,
        include_heads: list[int] | None = None,
        thumbnail_size: int = THUMBNAIL_SIZE,
        word_level: bool = False,
        masked_heads: list[tuple[int, int]] | None = None,
        result: AttentionResult | None = None,
        prettify_tokens: bool = True,
        attention: str = "auto",
        neuron_query: int | None = None,
        **kwargs: Any,
    ):
        # With `result` (precomputed attention, e.g. from the BertViz-style functions) there is no
        # model: the views work, editing and masking say they need one.
        if result is not None and (text is not None or model is not None):
            raise InputError("Give either precomputed attention (result=) or a text to run, not both.")
        if result is None and text is None:
            raise InputError("Give the text to show, e.g. AttentionWidget(\"The cat sat on the mat.\").")
        self._thumbnail_size = checks.integer("thumbnail_size", thumbnail_size, minimum=1, maximum=4096)
        checks.integer("layer", layer, minimum=0)
        if heads is not None:
            heads = checks.indices("heads", heads, None, "heads")  # the range once the model is known
        self._engine = None if result is not None else resolve_engine(model, tokenizer, device)
        self._prettify = bool(prettify_tokens)
        self._max_length = max_length
        self._attention_mode = attention
        self._thumbnails_of: tuple | None = None
        self._rollout_of: tuple | None = None
        self._applying = False
        self._masks = [list(head_pair(pair)) for pair in (masked_heads or [])]
        # Until a token is chosen (here, from Python or in the view), a causal long run opens on its last.
        self._focus_chosen = "focus_token" in kwargs
        self._word_level = bool(word_level)
        # Bad input raises here, before anything is displayed: a clear Python error, no blank cell.
        if result is None:
            result = self._run(text, text_b)
        elif self._masks:
            raise InputError(NEEDS_A_MODEL.format(what="Masking heads"))
        include_layers = checks.indices("include_layers", include_layers, result.n_layers, "layers")
        include_heads = checks.indices("include_heads", include_heads, result.n_heads, "heads")
        super().__init__(
            theme=theme, include_layers=include_layers, include_heads=include_heads,
            word_level=self._word_level, masked_heads=self._masks, editable=self._engine is not None, **kwargs,
        )
        self._apply(result, request_id=0, layer=layer, heads=heads)
        if neuron_query is not None:  # asked for: kept over where the view would open
            self.neuron_query = neuron_query
        # After the first result: the model view's thumbnails need it.
        self.view = view if view is not None else ("text" if self.long_context else "head")
        self.picture_id = uuid.uuid4().hex
        self._pictures: list[str] = []  # display ids of this widget's picture outputs
        self._picture_key: str | None = None
        self._channel = Channel(
            self,
            {"neuron": self._answer_neuron, "attention_rows": self._answer_rows, "attention_tile": self._answer_tile,
             "attention_window": self._answer_window},
            {"rendered": self._on_rendered},
        )

    def _ipython_display_(self, **kwargs: Any) -> None:
        # The BertViz-style functions display their widget at once (BertViz's do, even mid-cell)
        # and return it; when such a call is the cell's last line, its echo must not draw it twice.
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and getattr(self, "_displayed_in_cell", None) == shell.execution_count:
            self._displayed_in_cell = None
            return
        bundle = self._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, None)  # anywidget adds metadata
        display(data, metadata=metadata, raw=True)
        self._display_picture(shell)

    # The picture beside the widget's output (picture.py): drawn at display, redrawn after a cell
    # that changed what the widget shows, so a notebook saved later holds what was last seen.
    def _display_picture(self, shell: Any) -> None:
        from IPython.display import display

        from .picture import picture_bundle

        display_id = f"attnscope-picture-{self.picture_id}-{len(self._pictures)}"
        self._picture_key = self._shown_key()
        display(picture_bundle(self, self.picture_id), raw=True, display_id=display_id)
        if not self._pictures and shell is not None:
            shell.events.register("post_execute", _picture_refresher(self, shell))
        self._pictures.append(display_id)

    def _shown_key(self) -> str:
        """What the picture depends on: every synced trait but the binary payloads (the run's id
        stands for those)."""
        from .contract import contract_traits

        skip = {"attention", "thumbnails", "rollout", "request", "error", "picture_id"}
        state = {name: getattr(self, name) for name in contract_traits(type(self)) if name not in skip}
        return json.dumps(state, sort_keys=True, default=str)

    def _refresh_pictures(self) -> None:
        from IPython.display import update_display

        from .picture import picture_bundle

        key = self._shown_key()
        if key == self._picture_key:
            return
        self._picture_key = key
        bundle = picture_bundle(self, self.picture_id)
        for display_id in self._pictures:
            update_display(bundle, raw=True, display_id=display_id)

    @property
    def result(self) -> AttentionResult:
        """The AttentionResult behind the current view (tensors on the model's device): word-level
        when `word_level` is on, with `masked_heads` switched off when any are."""
        return self._kept("_result")

    @property
    def token_result(self) -> AttentionResult:
        """The per-token result (what the neuron view uses), with masked heads applied."""
        return self._kept("_token_result")

    def _kept(self, name: str) -> AttentionResult:
        try:
            return self.__dict__[name]
        except KeyError:
            raise InputError("This widget was closed, and its results were freed with it.") from None

    def close(self) -> None:
        """Close the widget (its views go) and free its results: a closed widget can never be
        shown again, and its tensors (0.2 GB at 512 tokens on bert-base) must not outlive it."""
        super().close()
        for name in ("_result", "_token_result", "_full_result"):
            self.__dict__.pop(name, None)
        self._applying = True  # the payloads go too, without recomputing anything
        try:
            self.attention, self.thumbnails, self.rollout = {}, {}, {}
        finally:
            self._applying = False

    @property
    def engine(self) -> AttentionModel | None:
        """The model behind the view; None for precomputed attention."""
        return self._engine

    def _run(self, text: str, text_b: str | None) -> AttentionResult:
        """The token-level run with the current masks; the unmasked run is kept to show changes."""
        if self._engine is None:
            raise InputError(NEEDS_A_MODEL.format(what="Changing the text"))
        with warnings.catch_warnings():
            # Truncation and NaN heads are shown in the widget's notice; a warning would print the
            # same under the cell too.
            warnings.filterwarnings("ignore", message="(Input|Decoder text) truncated", category=UserWarning)
            warnings.filterwarnings("ignore", category=NonFiniteAttentionWarning)
            plain = self._engine.run(text, text_b, self._max_length, attention=self._attention_mode)
            if isinstance(plain, LongAttentionResult) and self._masks:
                raise InputError(f"Masking heads needs the full attention, and this text of {plain.n_tokens:,} tokens "
                                 "keeps it on demand: unmask the heads, or give a shorter text.")
            if not self._masks:
                return plain
            masked = self._engine.run(text, text_b, self._max_length, masked_heads=self._masks)
        masked.unmasked = plain
        return masked

    def _apply(self, full_result: AttentionResult, request_id: int, layer: int | None = None, heads: list[int] | None = None) -> None:
        if isinstance(full_result, LongAttentionResult):
            self._apply_long(full_result, request_id, layer)
            return
        parts = parts_of(full_result)
        if parts and self.attention_part not in parts:
            raise InputError(f"attention_part must be one of {list(parts)}.")
        token_result = parts.get(self.attention_part, full_result)
        result = pl.displayed(token_result, self._word_level, self.show_change)
        n_layers, n_heads = result.n_layers, result.n_heads
        # Encoder and decoder may differ in depth: a part switch keeps the layer where it can.
        layer = min(self.layer, n_layers - 1) if layer is None else layer
        if not 0 <= layer < n_layers:
            raise InputError(f"layer={layer} is out of range: the model has layers 0..{n_layers - 1}.")
        if heads is None:
            kept = [h for h in self.heads if h < n_heads]
            heads = kept if self.n_heads == n_heads and self.heads else list(range(n_heads))
        bad = [h for h in heads if not 0 <= h < n_heads]
        if bad:
            raise InputError(f"heads {bad} are out of range: the model has heads 0..{n_heads - 1}.")
        self._result = result
        self._token_result = token_result
        self._full_result = full_result
        self._applying = True
        try:
            with self.hold_sync():  # one message: JS never sees tokens of one run with another's attention
                self.text = result.text
                self.text_b = result.text_b
                self.tokens = pl.shown_tokens(result, self._prettify)
                self.key_tokens = pl.shown_key_tokens(result, self._prettify)
                self.token_notes = notes_of(result) if self._prettify else []
                self.key_token_notes = key_notes_of(result) if self._prettify else []
                self.token_reading = []
                self.parts = list(parts)
                self.sentence_b_start = result.sentence_b_start
                self.n_layers = n_layers
                self.n_heads = n_heads
                self.model_name = result.model_name
                self.heads = list(heads)
                if result.sentence_b_start is None:
                    self.sentence_filter = "all"
                self.layer = layer
                self.attention = pl.layer_payload(result, layer)
                self.neuron_head = min(self.neuron_head, n_heads - 1)
                self.neuron_query = self._neuron_query_for(token_result)
                self.neuron_unavailable = "" if token_result.queries is not None else self._no_queries_keys(result.model_name)
                self.causal = bool(result.causal)
                self._thumbnails_of = self._rollout_of = None
                self.thumbnails, self.rollout = self._thumbnails_if_needed(), self._rollout_if_needed()
                self.mask_summary = pl.mask_summary(token_result)
                self.notice = pl.result_notice(full_result, token_result)
                self.long_context = False
                self.n_key_heads = n_heads
                if self.view in LONG_VIEWS and self.view not in SHORT_VIEWS:
                    self.view = "head"
                self.error = ""
                self.result_id = request_id
        finally:
            self._applying = False

    def _neuron_query_for(self, token_result: AttentionResult) -> int:
        """The neuron view's query for a run: where it opens (results.opening_query: a token of the
        text, not [CLS] or a decoder's start token) until the user picks another, which is kept
        while the queries are the same part's tokens."""
        opening = opening_query(token_result)
        opened = self.__dict__.get("_opened_query")  # (part, query) the view last opened on
        self._opened_query = (self.attention_part, opening)
        if opened is None or opened[0] != self.attention_part or self.neuron_query == opened[1]:
            return opening
        return min(self.neuron_query, len(token_result.tokens) - 1)

    def _no_queries_keys(self, model_name: str) -> str:
        """Why a run has no queries and keys: precomputed attention has no model to capture them from."""
        if self._engine is None:
            return NEEDS_A_MODEL.format(what="The neuron view")
        return f"The neuron view needs the queries and keys, and those of {model_name} could not be captured."

    def _apply_long(self, result: LongAttentionResult, request_id: int, layer: int | None = None) -> None:
        """A long run: tokens, the sink table and what the views need to ask for rows and tiles."""
        if self._word_level:
            raise InputError(f"Words merges the full attention, and this text of {result.n_tokens:,} tokens keeps it on "
                             "demand: switch Words off, or give a shorter text.")
        layer = min(self.layer, result.n_layers - 1) if layer is None else layer
        if not 0 <= layer < result.n_layers:
            raise InputError(f"layer={layer} is out of range: the model has layers 0..{result.n_layers - 1}.")
        from .bertology import attention_sinks

        sinks = pl.analysis_payload(attention_sinks(result), result.n_layers, result.n_heads)
        self._result = self._token_result = self._full_result = result
        self._applying = True
        try:
            with self.hold_sync():
                self.text, self.text_b = result.text, result.text_b
                self.tokens = pl.shown_tokens(result, self._prettify)
                self.key_tokens, self.key_token_notes, self.parts = [], [], []
                self.token_notes = notes_of(result) if self._prettify else []
                self.token_reading = list(result.token_reading or []) if self._prettify else []
                self.sentence_b_start = result.sentence_b_start
                self.n_layers, self.n_heads, self.n_key_heads = result.n_layers, result.n_heads, result.n_key_heads
                self.model_name = result.model_name
                self.heads = list(range(result.n_heads))
                self.sentence_filter = "all"
                self.layer = layer
                self.attention = {}
                self.long_context = True
                last = result.n_tokens - 1
                self.focus_token = last if result.causal and not self._focus_chosen else min(self.focus_token, last)
                if self.focus_head >= result.n_heads:
                    self.focus_head = -1
                self.neuron_head = min(self.neuron_head, result.n_heads - 1)
                self.neuron_query = min(self.neuron_query, result.n_tokens - 1)
                self.neuron_unavailable = _short_only("neuron", result)
                self.causal = bool(result.causal)
                if not self.analysis or self.analysis.get("kind") == "attention_sinks":
                    self.analysis = sinks
                if self.view in SHORT_VIEWS and self.view not in LONG_VIEWS:
                    self.view = "text"
                self._thumbnails_of = self._rollout_of = None
                self.thumbnails, self.rollout = self._thumbnails_if_needed(), {}
                self.mask_summary = ""
                self.notice = pl.long_notice(result)
                self.error = ""
                self.result_id = request_id
        finally:
            self._applying = False

    # Thumbnails and rollout cost a pass over every layer: made only while a view needs them, and
    # remade only when what they depend on changed.
    def _thumbnails_if_needed(self) -> dict:
        if not pl.needs_thumbnails(self.view, self.analysis):
            return self.thumbnails if self._thumbnails_of else {}
        key = self._thumbnail_key()
        if key != self._thumbnails_of:
            self._thumbnails_of = key
            if isinstance(self._result, LongAttentionResult):
                return pl.long_thumbnails_payload(self._result, self.include_layers, self.include_heads, self._thumbnail_size)
            return pl.thumbnails_payload(self._result, self.include_layers, self.include_heads, self._thumbnail_size)
        return self.thumbnails

    def _rollout_if_needed(self) -> dict:
        if self.view != "rollout" or isinstance(self._result, LongAttentionResult):
            return self.rollout if self._rollout_of else {}
        if self._rollout_of != id(self._result):
            self._rollout_of = id(self._result)
            return pl.rollout_payload(self._token_result, self._word_level)
        return self.rollout

    @traitlets.observe("view", "include_layers", "include_heads", "analysis")
    def _on_view(self, change: dict) -> None:
        if self._applying or "_result" not in self.__dict__:
            return
        self.thumbnails, self.rollout = self._thumbnails_if_needed(), self._rollout_if_needed()

    @traitlets.observe("attention_part")
    def _on_part(self, change: dict) -> None:
        if not self._applying and hasattr(self, "_full_result"):
            try:
                self._apply(self._full_result, self.result_id)
            except InputError:
                self._applying = True
                try:
                    self.attention_part = change["old"]
                finally:
                    self._applying = False
                raise

    @traitlets.observe("word_level", "show_change")
    def _on_display_mode(self, change: dict) -> None:
        self._word_level = bool(self.word_level)
        if not self._applying and hasattr(self, "_result"):
            self._apply(self._full_result, self.result_id)

    @traitlets.validate("masked_heads")
    def _check_masks(self, proposal: dict) -> list:
        pairs = [list(map(int, pair)) for pair in proposal["value"]]
        if self._engine is None:
            if pairs:
                raise InputError(NEEDS_A_MODEL.format(what="Masking heads"))
            return []
        result = self.__dict__.get("_result")
        if isinstance(result, LongAttentionResult) and pairs:
            raise InputError(f"Masking heads needs the full attention, and this text of {result.n_tokens:,} tokens keeps "
                             "it on demand: give a shorter text to mask heads.")
        if self._engine.is_encoder_decoder and pairs:
            raise InputError("Masking heads of encoder-decoder models is not supported yet.")
        self._engine.head_mask(pairs)  # raises InputError naming the bad pair
        return [list(p) for p in sorted({tuple(p) for p in pairs})]

    @traitlets.observe("masked_heads")
    def _on_masks(self, change: dict) -> None:
        """Switching heads off reruns the model; a failure shows in the widget and keeps the view."""
        if self._applying or not hasattr(self, "_result"):
            return
        previous = self._masks
        self._masks = [list(p) for p in change["new"]]
        try:
            self._apply(self._run(self._result.text, self._result.text_b), self.result_id)
        except Exception as exc:
            self._masks = previous
            self.error = str(exc)

    def show_analysis(self, data: Any, measure: str | None = None) -> AttentionWidget:
        """Show an analysis result as a layer × head view: a `head_stats`, `head_importance` or
        `syntax_heads` result as heatmaps, `head_distances` as the MDS scatter. Clicking a head
        opens it in the head view."""
        self.analysis = pl.analysis_payload(data, self.n_layers, self.n_heads, measure)
        self.view = "analysis"
        return self

    def _thumbnail_key(self) -> tuple:
        """What the thumbnails depend on; they are remade only when it changes."""
        layers = None if self.include_layers is None else tuple(self.include_layers)
        heads = None if self.include_heads is None else tuple(self.include_heads)
        return (id(self._result), layers, heads)

    @traitlets.validate("include_layers", "include_heads")
    def _check_included(self, proposal: dict) -> list[int] | None:
        name = proposal["trait"].name
        if not hasattr(self, "_result"):
            return proposal["value"]
        count = self._result.n_layers if name == "include_layers" else self._result.n_heads
        return _as_trait_error(checks.indices, name, proposal["value"], count, name.split("_")[1])

    @traitlets.validate("heads")
    def _check_heads(self, proposal: dict) -> list[int]:
        heads = proposal["value"]
        if self.n_heads:
            # An empty list hides every head (the swatches bring them back); each must exist.
            if heads:
                _as_trait_error(checks.indices, "heads", heads, self.n_heads, "heads")
        return heads

    @traitlets.validate("neuron_head", "neuron_query")
    def _check_neuron(self, proposal: dict) -> int:
        name, value = proposal["trait"].name, proposal["value"]
        if hasattr(self, "_token_result"):
            count = self._token_result.n_heads if name == "neuron_head" else len(self._token_result.tokens)
            if not 0 <= value < count:
                what = "heads" if name == "neuron_head" else "query tokens"
                raise SettingError(f"{name}={value} is out of range: the {what} are numbered 0..{count - 1}.")
        return value

    def _on_rendered(self, _content: dict) -> None:
        self._rendered = True

    def _answer_neuron(self, request: dict, _buffers: list) -> tuple[dict, list]:
        """A "neuron" request: one query's numbers. The answer names the run, the part and the
        number of queries, so the view never files one run's numbers under another's key."""
        if isinstance(self._token_result, LongAttentionResult):
            raise InputError(_short_only("neuron", self._token_result))
        content, buffers = pl.neuron_payload(
            self._token_result, *(checks.integer(k, request.get(k), minimum=0) for k in ("layer", "head", "query"))
        )
        return {**content, "result_id": self.result_id, "part": self.attention_part if parts_of(self._full_result) else "",
                "n_queries": len(self._token_result.tokens)}, buffers

    def _long_request(self, request: dict) -> tuple[LongAttentionResult, int, int]:
        result = self._token_result
        if not isinstance(result, LongAttentionResult):
            raise InputError(_long_only("text"))
        layer = checks.integer("layer", request.get("layer"), minimum=0, maximum=result.n_layers - 1)
        head = checks.integer("head", request.get("head"), minimum=-1, maximum=result.n_heads - 1)
        return result, layer, head

    def _answer_rows(self, request: dict, _buffers: list) -> tuple[dict, list]:
        """An "attention_rows" request: the text view's shading, from or to one token."""
        result, layer, head = self._long_request(request)
        token = checks.integer("token", request.get("token"), minimum=0, maximum=result.n_tokens - 1)
        content, buffers = pl.long_rows_payload(result, layer, head, token, request.get("direction"))
        return {**content, "result_id": self.result_id}, buffers

    def _answer_tile(self, request: dict, _buffers: list) -> tuple[dict, list]:
        """An "attention_tile" request: a region of one head's map, pooled to the view's pixels."""
        result, layer, head = self._long_request(request)
        spans = [request.get(name) for name in ("rows", "cols")]
        bins = checks.integer("bins", request.get("bins"), minimum=1, maximum=1024)
        content, buffers = pl.long_tile_payload(result, layer, head, *spans, bins, request.get("reduce", "max"))
        return {**content, "result_id": self.result_id}, buffers

    def _answer_window(self, request: dict, _buffers: list) -> tuple[dict, list]:
        """An "attention_window" request: the head view's lines among the tokens around one."""
        result, layer, _ = self._long_request({"head": -1, **request})
        token = checks.integer("token", request.get("token"), minimum=0, maximum=result.n_tokens - 1)
        content, buffers = pl.long_window_payload(result, layer, token, WINDOW_TOKENS)
        return {**content, "result_id": self.result_id}, buffers

    @traitlets.validate("view")
    def _check_view(self, proposal: dict) -> str:
        view = proposal["value"]
        result = self.__dict__.get("_result")
        if isinstance(result, LongAttentionResult) and view not in LONG_VIEWS:
            raise SettingError(_short_only(view, result))
        if result is not None and not isinstance(result, LongAttentionResult) and view not in SHORT_VIEWS:
            raise SettingError(_long_only(view))
        return view

    @traitlets.validate("focus_token")
    def _check_focus_token(self, proposal: dict) -> int:
        if self.tokens and not 0 <= proposal["value"] < len(self.tokens):
            raise SettingError(f"focus_token={proposal['value']} is out of range: the tokens are numbered "
                                       f"0..{len(self.tokens) - 1}.")
        return proposal["value"]

    @traitlets.observe("focus_token")
    def _on_focus_token(self, _change: dict) -> None:
        if not self._applying:
            self._focus_chosen = True

    @traitlets.validate("focus_head")
    def _check_focus_head(self, proposal: dict) -> int:
        if self.n_heads and not -1 <= proposal["value"] < self.n_heads:
            raise SettingError(f"focus_head={proposal['value']} is out of range: the heads are numbered "
                                       f"0..{self.n_heads - 1}, or -1 for their mean.")
        return proposal["value"]

    @traitlets.validate("sink_aside")
    def _check_sink_aside(self, proposal: dict) -> int:
        return _as_trait_error(checks.integer, "sink_aside", proposal["value"], 0, max(0, len(self.tokens) - 1))

    @traitlets.validate("layer")
    def _check_layer(self, proposal: dict) -> int:
        layer = proposal["value"]
        n_layers = self.n_layers
        if n_layers and not 0 <= layer < n_layers:
            raise SettingError(f"layer={layer} is out of range: the model has layers 0..{n_layers - 1}.")
        return layer

    @traitlets.observe("layer")
    def _on_layer(self, change: dict) -> None:
        if not self._applying and not self.long_context:
            self.attention = pl.layer_payload(self._result, change["new"])

    @traitlets.observe("request")
    def _on_request(self, change: dict) -> None:
        """An edit from the browser: recompute, or show why not and keep the last view."""
        request = change["new"] or {}
        request_id = int(request.get("id", 0))
        try:
            result = self._run(request.get("text", ""), request.get("text_b"))
            self._apply(result, request_id)
        except Exception as exc:
            message = str(exc) if isinstance(exc, AttnscopeError) else f"{type(exc).__name__}: {exc}"
            with self.hold_sync():
                self.error = message
                self.result_id = request_id

    @traitlets.observe("text", "text_b")
    def _on_text(self, change: dict) -> None:
        """Setting `widget.text = ...` from Python recomputes; bad input raises and changes nothing."""
        if self._applying:
            return
        try:
            self.update(self.text, self.text_b)
        except Exception:
            self._applying = True
            try:
                self.text, self.text_b = self._result.text, self._result.text_b
            finally:
                self._applying = False
            raise

    def save_image(self, path: str | Path) -> ImageRequest:
        """Save the current view as PNG or SVG (by the file's suffix), drawn by the widget's view.

        The browser draws the image, so the widget must be displayed. The file is written when the
        view answers, which is right after the cell finishes (a kernel cannot wait for its front
        end in mid-cell); the returned request says when it is done (`.done`, `.error`).
        """
        path = Path(path)
        image_format = path.suffix.lower().lstrip(".")
        if image_format not in ("png", "svg"):
            raise InputError(f"save_image writes .png or .svg files, not {path.name!r}.")
        if not getattr(self, "_rendered", False):
            raise InputError(
                "save_image needs the widget on screen: display it first (make it a cell's last line), "
                "then call save_image in another cell. Or use the PNG/SVG buttons in the widget."
            )
        request = ImageRequest(path, image_format)
        request.id = self._channel.request("image", {"format": image_format}, request.answered)
        return request

    def save_html(self, path: str | Path, layers: list[int] | None = None) -> Path:
        """Write this view as one self-contained, offline HTML file (all layers unless `layers`)."""
        from .export import widget_html

        return write_atomic(path, widget_html(self, layers))

    def slide(self, height: int = 560, layers: list[int] | None = None) -> Any:
        """This view as a self-contained iframe for slideshows (RISE), where widgets do not render.

        The standalone page (see save_html) goes in `srcdoc`, escaped as an attribute value, so it
        needs no widget manager, kernel comm or network. The widget fills the iframe's `height`
        and the open view fits into it (the model view shrinks its cells until every row shows).
        """
        import html as html_escaping

        from IPython.display import HTML

        from .export import widget_html

        height = checks.integer("height", height, minimum=100)
        page = html_escaping.escape(widget_html(self, layers, fit=True), quote=True)
        # Wrapped in a div: IPython warns about a bare <iframe> string.
        return HTML(
            f'<div class="attnscope-slide-frame"><iframe class="attnscope-slide" srcdoc="{page}" '
            f'title="attnscope attention view" style="width: 100%; height: {int(height)}px; border: 0;">'
            "</iframe></div>"
        )

    def update(self, text: str, text_b: str | None = None) -> None:
        """Show another text (pair) with the same model, keeping layer and heads."""
        self._apply(self._run(text, text_b), self.result_id)

    def __repr__(self) -> str:
        if "_result" not in self.__dict__:
            return "AttentionWidget(closed)"
        return f"AttentionWidget({self.model_name}, {len(self.tokens)} tokens, {self.view} view)"


@dataclasses.dataclass
class ImageRequest:
    """A pending `save_image`: `done` turns True once the view has sent the image and it is written."""

    path: Path
    format: str
    done: bool = False
    error: str | None = None
    id: int = 0

    def answered(self, content: dict, buffers: list) -> None:
        """The view's reply: the image's bytes, written atomically, or why there are none."""
        if content.get("error") or not buffers:
            self.error = content.get("error") or "the view sent no image"
            return
        try:
            write_atomic(self.path, bytes(buffers[0]))
        except OSError as exc:  # in a comm callback nobody sees a raise: the request says why
            self.error = f"cannot write {self.path}: {exc.strerror}" if exc.strerror else str(exc)
            return
        self.done = True

    def __repr__(self) -> str:
        state = "written" if self.done else (f"failed: {self.error}" if self.error else "waiting for the view")
        return f"ImageRequest({str(self.path)!r}, {state})"


def _picture_refresher(widget: AttentionWidget, shell: Any):
    """A post_execute hook that redraws the widget's pictures; it holds the widget weakly (a hook
    must not keep a closed widget alive) and unregisters itself once the widget is gone."""
    ref = weakref.ref(widget)

    def refresh() -> None:
        alive = ref()
        if alive is None or "_result" not in alive.__dict__:
            shell.events.unregister("post_execute", refresh)
            return
        try:
            alive._refresh_pictures()
        except Exception as exc:  # a picture must never break the user's next cell
            warnings.warn(f"attnscope: the widget's picture was not redrawn: {exc}", stacklevel=1)

    return refresh


def _as_trait_error(check: Any, *args: Any) -> Any:
    """A check from `checks` inside a trait validator: its message as a TraitError."""
    try:
        return check(*args)
    except InputError as exc:
        raise SettingError(str(exc)) from None


def shown(widget: AttentionWidget) -> AttentionWidget:
    """Display the widget now, wherever the call is (mid-cell, assigned, in a loop), and return it;
    when the call is also the cell's last line, the echo of the returned widget is not drawn a
    second time (`_ipython_display_`). Outside IPython there is nothing to display it in."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return widget
    shell = get_ipython()
    if shell is None:
        return widget
    display(widget)
    widget._displayed_in_cell = shell.execution_count
    return widget


def show(
    text: str,
    text_b: str | None = None,
    model: Any = None,
    view: str | None = None,
    **kwargs: Any,
) -> AttentionWidget:
    """Show `text` in the widget: `attnscope.show("The cat sat on the mat.")`.

    Displays the widget where it is called (also as `widget = attnscope.show(...)`, mid-cell or
    in a loop; once, even as the cell's last line) and returns it: keep it to read `.result` or
    to change it from Python.
    """
    if view is not None and view not in VIEWS:
        raise InputError(f"Unknown view {view!r}; available: {', '.join(VIEWS)}.")
    return shown(AttentionWidget(text, text_b, model, view=view, **kwargs))
