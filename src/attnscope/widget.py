"""The anywidget: thin glue between an AttentionModel and the views in js/.

Each synced trait is documented where it is declared (`synced`, see contract.py): what it holds,
who writes it, and what a saved page does with it. Payloads are built in payloads.py, requests
and answers go through messages.Channel, and export.py saves the widget's own state as a page.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import uuid
import warnings
from pathlib import Path
from typing import Any

import anywidget
import traitlets
from traitlets import Bool, Dict, Enum, Int, List, Unicode

from . import checks
from . import payloads as pl
from .analyses.sinks import attention_sinks
from .contract import contract_traits, page_writable, synced
from .engine import AttentionModel, AttentionResult, NonFiniteAttentionWarning, head_pair, load
from .errors import AttnscopeError, InputError
from .exact_attention import describe_bytes, full_attention_bytes
from .export import widget_html
from .files import output_path, write_atomic
from .long_answers import LongAnswers
from .messages import Channel, interruptible
from .picture import PictureOutputs
from .results import LongAttentionResult, key_notes_of, notes_of, opening_query, parts_of, run_of
from .views import LONG_VIEWS, SHORT_VIEWS, VIEW_NAMES

STATIC = Path(__file__).parent / "static"
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


CLOSED = "This widget was closed, and its results were freed with it: make a new one with attnscope.show()."

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

    stands_for_its_run = True  # results.run_of reads a widget as its token_result

    _esm = _static("widget.js", _MISSING_BUNDLE_ESM)
    _css = _static("widget.css", "")

    # What is shown
    view = synced(Enum(VIEW_NAMES, default_value="head"), "The open view: head, model, neuron, rollout or analysis; for "
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
                        "{layers, heads, n_tokens, n_key_tokens, data: uint8 bytes, dtype, shape: [L, H, S, S], scale}; "
                        "empty for a long run's too large to make at once (the view asks for them in passes).")
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
        if result is not None:
            result = run_of(result, "result=")  # a widget stands for its run; anything else is named
        self._thumbnail_size = checks.integer("thumbnail_size", thumbnail_size, minimum=1, maximum=4096)
        checks.integer("layer", layer, minimum=0)
        if heads is not None:
            heads = checks.indices("heads", heads, None, "heads")  # the range once the model is known
        self._engine = None if result is not None else resolve_engine(model, tokenizer, device)
        self._prettify = bool(prettify_tokens)
        self._max_length = max_length
        self._attention_mode = attention
        # What the thumbnails and rollout were made from (_view_payloads): reused while it holds.
        self._thumbnails_of: tuple | None = None
        self._rollout_of: tuple | None = None
        self._applying = False
        self._closed = False
        self._masks = [list(head_pair(pair)) for pair in (masked_heads or [])]
        # Until a token is chosen (here, from Python or in the view), a causal long run opens on its last.
        self._focus_chosen = "focus_token" in kwargs
        # Bad input raises here, before anything is displayed: a clear Python error, no blank cell.
        if result is None:
            result = self._run(text, text_b)
        elif self._masks:
            raise InputError(NEEDS_A_MODEL.format(what="Masking heads"))
        include_layers = checks.indices("include_layers", include_layers, result.n_layers, "layers")
        include_heads = checks.indices("include_heads", include_heads, result.n_heads, "heads")
        super().__init__(
            theme=theme, include_layers=include_layers, include_heads=include_heads,
            word_level=bool(word_level), masked_heads=self._masks, editable=self._engine is not None, **kwargs,
        )
        self._apply(result, request_id=0, layer=layer, heads=heads)
        if neuron_query is not None:  # asked for: kept over where the view would open
            self.neuron_query = neuron_query
        # After the first result: the model view's thumbnails need it.
        self.view = view if view is not None else ("text" if self.long_context else "head")
        self.picture_id = uuid.uuid4().hex
        self._pictures = PictureOutputs(self)
        self._channel = Channel(
            self,
            {"neuron": self._answer_neuron, "layer": self._answer_layer,
             **{type_: self._answer_long(type_) for type_ in LongAnswers.TYPES}},
            {"rendered": self._on_rendered},
        )

    def set_state(self, sync_data: dict) -> None:
        """A write from the page (ipywidgets calls this for each update a view sends). The page is
        untrusted input: it may set only the traits the contract lets a view write, each value is
        checked against the kernel's own run, and a write that fails or is interrupted is put back
        whole, on both sides, with the reason in `error`. Nothing escapes to the comm."""
        if self._closed or not isinstance(sync_data, dict):
            return
        writable = page_writable(type(self))
        refused = sorted(name for name in sync_data if name not in writable)
        messages = [f"The page may not set {_names(refused)}: only the kernel does; ignored."] if refused else []
        # Sizes first: the longest list a view writes is one of every head (masked_heads), so a
        # write of millions is refused before traitlets checks its items one by one.
        budget = 4 * self._shown_count("n_layers") * self._shown_count("n_heads") + 64
        too_big = sorted(name for name in sync_data if name in writable and _values_in(sync_data[name], budget) > budget)
        if too_big:
            messages.append(f"The page sent more values in {_names(too_big)} than this model has heads; ignored.")
            refused += too_big
        # true is not 1 here: traitlets' Int takes a bool, and stores one equal to the old value
        # (layer 0, false) without checking it at all. (An edit's own check names its field; the
        # request is {} between edits, so it is always checked.)
        booleans = sorted(name for name in sync_data if name in writable and name not in too_big and name != "request"
                          and not isinstance(self.traits()[name], Bool) and _holds_a_bool(sync_data[name]))
        if booleans:
            messages.append(f"The page sent true or false for {_names(booleans)}, which takes numbers; ignored.")
            refused += booleans
        state = {name: value for name, value in sync_data.items() if name in writable and name not in refused}
        snapshot = self._snapshot()
        try:
            with interruptible():  # the kernel's interrupt stops a slow step, whenever the write came
                super().set_state(state)
        except BaseException as exc:
            self._restore(snapshot)  # the whole widget: one trait's work may have moved others
            messages.append("Interrupted: the view was put back as it was." if isinstance(exc, KeyboardInterrupt) else
                            str(exc) if isinstance(exc, AttnscopeError) else f"{type(exc).__name__}: {exc}")
            refused += list(state)
            if not isinstance(exc, (Exception, KeyboardInterrupt)):
                raise  # SystemExit and the like are not the page's doing
        # The page's copy of what was refused or put back is the kernel's again.
        resend = [name for name in refused if name in self.keys]
        if resend:
            self.send_state(resend)
        # A page's refused write is said until the next write that works (an edit's error stays:
        # the editor keeps the failed text while it shows).
        said = " ".join(messages)
        if said or self.error == self.__dict__.get("_write_error"):
            self._quietly(error=said)
        self._write_error = said
        self._pictures.redraw_later()

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
        self._pictures.display(shell)  # the picture beside it (picture.py)

    def _shown_key(self) -> str:
        """What the picture depends on: every synced trait but the binary payloads (the run's id
        stands for those)."""
        skip = {"attention", "thumbnails", "rollout", "request", "error", "picture_id"}
        state = {name: getattr(self, name) for name in contract_traits(type(self)) if name not in skip}
        return json.dumps(state, sort_keys=True, default=str)

    @property
    def result(self) -> AttentionResult:
        """The AttentionResult behind the current view (tensors on the model's device): word-level
        when `word_level` is on, with `masked_heads` switched off when any are."""
        return self._kept("_drawn_run")

    @property
    def token_result(self) -> AttentionResult:
        """The per-token result (what the neuron view uses), with masked heads applied."""
        return self._kept("_per_token_run")

    def _kept(self, name: str) -> AttentionResult:
        try:
            return self.__dict__[name]
        except KeyError:
            raise InputError(CLOSED) from None

    def close(self) -> None:
        """Close the widget (its views go) and free its results: a closed widget can never be
        shown again, and its tensors (0.2 GB at 512 tokens on bert-base) must not outlive it.
        Closed is final: a later edit, request, `update()` or setting raises instead of rerunning."""
        self._closed = True
        super().close()
        for name in ("_drawn_run", "_per_token_run", "_computed_run"):
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
        self._live()
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
        """Show a run. Everything is computed first and the widget then moves to it in one step:
        a failure or an interrupt on the way leaves the previous run shown, whole."""
        if isinstance(full_result, LongAttentionResult):
            self._apply_long(full_result, request_id, layer)
            return
        parts = parts_of(full_result)
        if parts and self.attention_part not in parts:
            raise InputError(f"attention_part must be one of {list(parts)}.")
        token_result = parts.get(self.attention_part, full_result)
        result = pl.displayed(token_result, self.word_level, self.show_change)
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
        attention = pl.layer_payload(result, layer, self._source(request_id))
        view = "head" if self.view in LONG_VIEWS and self.view not in SHORT_VIEWS else self.view
        (thumbnails, thumbnails_of), (rollout, rollout_of) = self._view_payloads(result, token_result, view)
        shown = dict(
            text=result.text, text_b=result.text_b,
            tokens=pl.shown_tokens(result, self._prettify), key_tokens=pl.shown_key_tokens(result, self._prettify),
            token_notes=notes_of(result) if self._prettify else [],
            key_token_notes=key_notes_of(result) if self._prettify else [],
            token_reading=[], parts=list(parts), sentence_b_start=result.sentence_b_start,
            n_layers=n_layers, n_heads=n_heads, model_name=result.model_name, heads=list(heads),
            sentence_filter=self.sentence_filter if result.sentence_b_start is not None else "all",
            layer=layer, attention=attention,
            neuron_head=min(self.neuron_head, n_heads - 1), neuron_query=self._neuron_query_for(token_result),
            neuron_unavailable="" if token_result.queries is not None else self._no_queries_keys(result.model_name),
            causal=bool(result.causal), thumbnails=thumbnails, rollout=rollout,
            mask_summary=pl.mask_summary(token_result), notice=pl.result_notice(full_result, token_result),
            long_context=False, n_key_heads=n_heads, view=view, error="", result_id=request_id,
        )
        self._show(shown, result, token_result, full_result, thumbnails_of, rollout_of)

    def _show(self, traits: dict, result: AttentionResult, token_result: AttentionResult, full_result: AttentionResult,
              thumbnails_of: tuple | None, rollout_of: tuple | None, atomic: bool = True) -> None:
        """Move the widget to a computed run: its results and every trait, in one message (the view
        never sees tokens of one run with another's attention). Nothing here computes."""
        before = self._snapshot() if atomic else None
        try:
            self._drawn_run, self._per_token_run, self._computed_run = result, token_result, full_result
            self._thumbnails_of, self._rollout_of = thumbnails_of, rollout_of
            # The counts and tokens before what is checked against them (layer, heads, focus_token).
            first = ("n_layers", "n_heads", "tokens")
            self._quietly(**{name: traits[name] for name in first if name in traits},
                          **{name: value for name, value in traits.items() if name not in first})
        except BaseException:
            if before is not None:  # a value refused on the way: the run before stays, whole
                self._restore(before)
            raise

    # The three runs a widget keeps: _computed_run as the engine made it (every part of an
    # encoder-decoder, masks applied); _per_token_run, the part shown, per token (the neuron view's,
    # a long run's answers); _drawn_run, what the views draw (words merged, or the change masking
    # made). What a page's write may change besides the traits; a failed write puts all of it back.
    _KEPT = ("_drawn_run", "_per_token_run", "_computed_run", "_thumbnails_of", "_rollout_of", "_masks", "_focus_chosen",
             "_opened_query")

    def _snapshot(self) -> tuple[dict, dict]:
        return ({name: self.__dict__.get(name) for name in self._KEPT},
                {name: getattr(self, name) for name in contract_traits(type(self))})

    def _restore(self, snapshot: tuple[dict, dict]) -> None:
        kept, traits = snapshot
        self.__dict__.update(kept)
        changed = {name: value for name, value in traits.items() if getattr(self, name) is not value}
        self._show(changed, kept["_drawn_run"], kept["_per_token_run"], kept["_computed_run"],
                   kept["_thumbnails_of"], kept["_rollout_of"], atomic=False)

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
        if self.word_level:
            raise InputError(f"Words merges the full attention, and this text of {result.n_tokens:,} tokens keeps it on "
                             "demand: switch Words off, or give a shorter text.")
        layer = min(self.layer, result.n_layers - 1) if layer is None else layer
        if not 0 <= layer < result.n_layers:
            raise InputError(f"layer={layer} is out of range: the model has layers 0..{result.n_layers - 1}.")
        sinks = pl.analysis_payload(attention_sinks(result), result.n_layers, result.n_heads)
        view = "text" if self.view in SHORT_VIEWS and self.view not in LONG_VIEWS else self.view
        analysis = sinks if not self.analysis or self.analysis.get("kind") == "attention_sinks" else self.analysis
        (thumbnails, thumbnails_of), _ = self._view_payloads(result, result, view, analysis)
        last = result.n_tokens - 1
        shown = dict(
            text=result.text, text_b=result.text_b, tokens=pl.shown_tokens(result, self._prettify),
            key_tokens=[], key_token_notes=[], parts=[],
            token_notes=notes_of(result) if self._prettify else [],
            token_reading=list(result.token_reading or []) if self._prettify else [],
            sentence_b_start=result.sentence_b_start,
            n_layers=result.n_layers, n_heads=result.n_heads, n_key_heads=result.n_key_heads,
            model_name=result.model_name, heads=list(range(result.n_heads)), sentence_filter="all",
            layer=layer, attention={}, long_context=True,
            focus_token=last if result.causal and not self._focus_chosen else min(self.focus_token, last),
            focus_head=self.focus_head if self.focus_head < result.n_heads else -1,
            neuron_head=min(self.neuron_head, result.n_heads - 1), neuron_query=min(self.neuron_query, last),
            neuron_unavailable=_short_only("neuron", result), causal=bool(result.causal),
            analysis=analysis, view=view, thumbnails=thumbnails, rollout={},
            mask_summary="", notice=pl.long_notice(result), error="", result_id=request_id,
        )
        self._show(shown, result, result, result, thumbnails_of, None)

    # Thumbnails and rollout cost a pass over every layer: made only while a view needs them, and
    # remade only when what they were made from changed. What they were made from is recorded with
    # them, after they are made: an interrupted build leaves nothing that claims to be done.
    def _view_payloads(self, result: AttentionResult, token_result: AttentionResult, view: str,
                       analysis: dict | None = None) -> tuple[tuple[dict, tuple | None], tuple[dict, tuple | None]]:
        """((thumbnails, made from), (rollout, made from)) for `view` showing `result`."""
        analysis = self.analysis if analysis is None else analysis
        layers = None if self.include_layers is None else tuple(self.include_layers)
        heads = None if self.include_heads is None else tuple(self.include_heads)
        made_from = (id(result), layers, heads)  # the shown result is alive while this is compared
        if made_from == self._thumbnails_of:
            thumbnails = (self.thumbnails, made_from)
        elif not pl.needs_thumbnails(view, analysis):
            thumbnails = ({}, None)
        elif isinstance(result, LongAttentionResult):
            # Too large to make at once (seconds): the view asks for them in passes ("thumbnails").
            if pl.thumbnail_passes(result, self.include_layers, self._thumbnail_size) > 1:
                thumbnails = ({}, None)
            else:
                thumbnails = (pl.long_thumbnails_payload(result, self.include_layers, self.include_heads, self._thumbnail_size),
                              made_from)
        else:
            thumbnails = (pl.thumbnails_payload(result, self.include_layers, self.include_heads, self._thumbnail_size), made_from)
        made_from = (id(result), self.word_level)
        if made_from == self._rollout_of:
            rollout = (self.rollout, made_from)
        elif view != "rollout" or isinstance(result, LongAttentionResult):
            rollout = ({}, None)
        else:
            rollout = (pl.rollout_payload(token_result, self.word_level), made_from)
        return thumbnails, rollout

    @contextlib.contextmanager
    def _or_put_back(self, change: dict):
        """Around the work a setting starts: when it fails or is interrupted, the setting takes its
        old value again, quietly, and the error goes on to whoever set it (a Python line raises; a
        page's write is answered in `error`, see set_state)."""
        try:
            yield
        except BaseException:
            self._quietly(**{change["name"]: change["old"]})
            raise

    def _quietly(self, **values: Any) -> None:
        """Set traits without the work their observers start (the kernel's own writes)."""
        applying, self._applying = self._applying, True
        try:
            with self.hold_sync():
                for name, value in values.items():
                    setattr(self, name, value)
        finally:
            self._applying = applying

    def _live(self) -> None:
        if self._closed:
            raise InputError(CLOSED)

    @traitlets.observe("view", "include_layers", "include_heads", "analysis")
    def _on_view(self, change: dict) -> None:
        if self._applying or "_drawn_run" not in self.__dict__ and not self._closed:
            return
        with self._or_put_back(change):
            self._live()
            (thumbnails, thumbnails_of), (rollout, rollout_of) = self._view_payloads(self._drawn_run, self._per_token_run, self.view)
            self._thumbnails_of, self._rollout_of = thumbnails_of, rollout_of
            self._quietly(thumbnails=thumbnails, rollout=rollout)

    @traitlets.observe("attention_part", "word_level", "show_change")
    def _on_display_mode(self, change: dict) -> None:
        """What the views show of the same run changed: re-shown from the kept run, no rerun."""
        if self._applying or "_computed_run" not in self.__dict__ and not self._closed:
            return
        with self._or_put_back(change):
            self._live()
            self._apply(self._computed_run, self.result_id)

    @traitlets.validate("masked_heads")
    def _check_masks(self, proposal: dict) -> list:
        return _as_trait_error(self._masks_of, proposal["value"])

    def _masks_of(self, value: list) -> list[list[int]]:
        full = self.__dict__.get("_computed_run")
        if full is not None and len(value) > full.n_layers * full.n_heads:  # sizes first: a page may send millions
            raise InputError(f"masked_heads lists {len(value):,} heads, and the model has {full.n_layers * full.n_heads}.")
        pairs = [list(head_pair(pair)) for pair in value]
        if self._engine is None:
            if pairs:
                raise InputError(NEEDS_A_MODEL.format(what="Masking heads"))
            return []
        result = self.__dict__.get("_drawn_run")
        if isinstance(result, LongAttentionResult) and pairs:
            raise InputError(f"Masking heads needs the full attention, and this text of {result.n_tokens:,} tokens keeps "
                             "it on demand: give a shorter text to mask heads.")
        if self._engine.is_encoder_decoder and pairs:
            raise InputError("Masking heads of encoder-decoder models is not supported yet.")
        self._engine.head_mask(pairs)  # raises InputError naming the bad pair
        return [list(p) for p in sorted({tuple(p) for p in pairs})]

    @traitlets.observe("masked_heads")
    def _on_masks(self, change: dict) -> None:
        """Switching heads off reruns the model; a failure puts the masks back and keeps the view."""
        if self._applying or "_drawn_run" not in self.__dict__ and not self._closed:
            return
        previous = self._masks
        with self._or_put_back(change):
            self._live()
            self._masks = [list(p) for p in change["new"]]
            try:
                self._apply(self._run(self._drawn_run.text, self._drawn_run.text_b), self.result_id)
            except BaseException:
                self._masks = previous
                raise

    def show_analysis(self, data: Any, measure: str | None = None) -> AttentionWidget:
        """Show an analysis result as a layer × head view: a `head_stats`, `head_importance` or
        `syntax_heads` result as heatmaps, `head_distances` as the MDS scatter. Clicking a head
        opens it in the head view."""
        self.analysis = pl.analysis_payload(data, self.n_layers, self.n_heads, measure)
        self.view = "analysis"
        return self

    @traitlets.validate("include_layers", "include_heads")
    def _check_included(self, proposal: dict) -> list[int] | None:
        name = proposal["trait"].name
        if not hasattr(self, "_drawn_run"):
            return proposal["value"]
        count = self._drawn_run.n_layers if name == "include_layers" else self._drawn_run.n_heads
        return _as_trait_error(checks.indices, name, proposal["value"], count, name.split("_")[1])

    @traitlets.validate("heads")
    def _check_heads(self, proposal: dict) -> list[int]:
        heads = proposal["value"]
        n_heads = self._shown_count("n_heads")
        if n_heads and heads:  # an empty list hides every head (the swatches bring them back)
            if len(heads) > n_heads:  # sizes first: a page may send millions
                raise SettingError(f"heads lists {len(heads):,} heads, and the model has {n_heads}.")
            _as_trait_error(checks.indices, "heads", heads, n_heads, "heads")
        return heads

    def _shown_count(self, name: str) -> int:
        """n_layers or n_heads of the shown run, the kernel's own (0 before the first run)."""
        result = self.__dict__.get("_drawn_run")
        return getattr(result, name) if result is not None else 0

    @traitlets.validate("neuron_head", "neuron_query")
    def _check_neuron(self, proposal: dict) -> int:
        name, value = proposal["trait"].name, _whole(proposal)
        if hasattr(self, "_per_token_run"):
            count = self._per_token_run.n_heads if name == "neuron_head" else len(self._per_token_run.tokens)
            if not 0 <= value < count:
                what = "heads" if name == "neuron_head" else "query tokens"
                raise SettingError(f"{name}={value} is out of range: the {what} are numbered 0..{count - 1}.")
        return value

    def _on_rendered(self, _content: dict) -> None:
        self._rendered = True

    def _answer_neuron(self, request: dict, _buffers: list) -> tuple[dict, list]:
        """A "neuron" request: one query's numbers. The answer names the run, the part and the
        number of queries, so the view never files one run's numbers under another's key."""
        if isinstance(self.token_result, LongAttentionResult):
            raise InputError(_short_only("neuron", self.token_result))
        content, buffers = pl.neuron_payload(
            self.token_result, *(checks.integer(k, request.get(k), minimum=0) for k in ("layer", "head", "query"))
        )
        return {**content, "result_id": self.result_id, "part": self.attention_part if parts_of(self._computed_run) else "",
                "n_queries": len(self.token_result.tokens)}, buffers

    def _long_answers(self, type_: str = "attention_rows") -> LongAnswers:
        """The shown long run's answers to the views' requests (long_answers.LongAnswers)."""
        result = self.token_result
        if not isinstance(result, LongAttentionResult):
            raise InputError("This run's thumbnails come whole, in the thumbnails trait." if type_ == "thumbnails"
                             else _long_only("text"))
        return LongAnswers(result, self.result_id, self.include_layers, self.include_heads, self._thumbnail_size)

    def _answer_long(self, type_: str):
        """The channel's handler for one kind of long-run request."""
        return lambda request, _buffers: self._long_answers(type_).handler(type_)(request)

    @traitlets.validate("view")
    def _check_view(self, proposal: dict) -> str:
        view = proposal["value"]
        result = self.__dict__.get("_drawn_run")
        if isinstance(result, LongAttentionResult) and view not in LONG_VIEWS:
            raise SettingError(_short_only(view, result))
        if result is not None and not isinstance(result, LongAttentionResult) and view not in SHORT_VIEWS:
            raise SettingError(_long_only(view))
        return view

    @traitlets.validate("focus_token")
    def _check_focus_token(self, proposal: dict) -> int:
        if self.tokens and not 0 <= _whole(proposal) < len(self.tokens):
            raise SettingError(f"focus_token={proposal['value']} is out of range: the tokens are numbered "
                                       f"0..{len(self.tokens) - 1}.")
        return proposal["value"]

    @traitlets.observe("focus_token")
    def _on_focus_token(self, _change: dict) -> None:
        if not self._applying:
            self._focus_chosen = True

    @traitlets.validate("focus_head")
    def _check_focus_head(self, proposal: dict) -> int:
        n_heads = self._shown_count("n_heads")
        if n_heads and not -1 <= _whole(proposal) < n_heads:
            raise SettingError(f"focus_head={proposal['value']} is out of range: the heads are numbered "
                               f"0..{n_heads - 1}, or -1 for their mean.")
        return proposal["value"]

    @traitlets.validate("sink_aside")
    def _check_sink_aside(self, proposal: dict) -> int:
        return _as_trait_error(checks.integer, "sink_aside", proposal["value"], 0, max(0, len(self.tokens) - 1))

    @traitlets.validate("layer")
    def _check_layer(self, proposal: dict) -> int:
        layer = _whole(proposal)
        n_layers = self._shown_count("n_layers")
        if n_layers and not 0 <= layer < n_layers:
            raise SettingError(f"layer={layer} is out of range: the model has layers 0..{n_layers - 1}.")
        return layer

    @traitlets.observe("layer")
    def _on_layer(self, change: dict) -> None:
        if self._applying or self.long_context:
            return
        with self._or_put_back(change):
            self._quietly(attention=pl.layer_payload(self.result, change["new"], self._source(self.result_id)))

    def _source(self, result_id: int) -> str:
        """What a short run's layer payloads are made from: the run and how it is shown (part,
        words, change). The page files the layers it holds under it (the "layer" request)."""
        return f"{result_id}:{self.attention_part}:{int(self.word_level)}:{int(self.show_change)}"

    def _answer_layer(self, request: dict, _buffers: list) -> tuple[dict, list]:
        """A "layer" request: another layer of the shown run, for the page to hold."""
        result = self.result
        if isinstance(result, LongAttentionResult):
            raise InputError(f"This text of {result.n_tokens:,} tokens keeps its attention on demand: its layers "
                             "come as rows, tiles and windows, not whole.")
        layer = checks.integer("layer", request.get("layer"), minimum=0, maximum=result.n_layers - 1)
        payload = pl.layer_payload(result, layer, self._source(self.result_id))
        data = payload.pop("data")
        return payload, [data]

    @traitlets.validate("request")
    def _check_request(self, proposal: dict) -> dict:
        """An edit is {id, text, text_b}: ids count up from the page's last answered one, below
        2**53 (a number JavaScript holds exactly); anything else is refused before any work."""
        request = proposal["value"]
        if not request:
            return request
        unknown = sorted(set(request) - {"id", "text", "text_b"})
        request_id = request.get("id")
        if unknown:
            raise SettingError(f"An edit holds id, text and text_b, not {', '.join(map(repr, unknown))}.")
        if isinstance(request_id, bool) or not isinstance(request_id, int) or not 0 < request_id < 2**53:
            raise SettingError(f"An edit's id must be a whole number from 1 to 2**53 - 1, not {request_id!r}.")
        if not isinstance(request.get("text"), str) or not isinstance(request.get("text_b"), (str, type(None))):
            raise SettingError("An edit's text must be a string, and its text_b a string or null.")
        return request

    @traitlets.observe("request")
    def _on_request(self, change: dict) -> None:
        """An edit from the browser: recompute, or show why not and keep the last view. An edit
        older than the one answered is stale (answers arrive in order): it is not run."""
        request = change["new"]
        if not request or request["id"] <= self.result_id:
            return
        self._live()
        try:
            result = self._run(request["text"], request.get("text_b"))
            self._apply(result, request["id"])
        except Exception as exc:
            message = str(exc) if isinstance(exc, AttnscopeError) else f"{type(exc).__name__}: {exc}"
            self._quietly(error=message, result_id=request["id"])
        finally:
            # The page's text is kept as the run's, not here: a text the run refused (a lone
            # surrogate) would make every later send of the whole state fail.
            self._quietly(request={})

    @traitlets.observe("text", "text_b")
    def _on_text(self, change: dict) -> None:
        """Setting `widget.text = ...` from Python recomputes; bad input raises and changes nothing."""
        if self._applying:
            return
        with self._or_put_back(change):
            self.update(self.text, self.text_b)

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
        path = output_path(path, "html")  # a path that would replace another kind of file: before any work
        return write_atomic(path, widget_html(self, layers), file_format="html")

    def slide(self, height: int = 560, layers: list[int] | None = None) -> Any:
        """This view as a self-contained iframe for slideshows (RISE), where widgets do not render.

        The standalone page (see save_html) goes in `srcdoc`, escaped as an attribute value, so it
        needs no widget manager, kernel comm or network. The widget fills the iframe's `height`
        and the open view fits into it (the model view shrinks its cells until every row shows).
        """
        import html as html_escaping

        from IPython.display import HTML

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
        if "_drawn_run" not in self.__dict__:
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


def _names(names: list[str]) -> str:
    """Names a page sent, as a message may say them: a name that is not one (a surrogate, a
    megabyte) is quoted with escapes and cut."""
    return ", ".join(name if name.isidentifier() and len(name) <= 40 else ascii(name[:40]) for name in names)


def _holds_a_bool(value: Any) -> bool:
    """Whether a (size-checked) value a page sent holds true or false anywhere."""
    if isinstance(value, bool):
        return True
    if isinstance(value, dict):
        return any(_holds_a_bool(v) for v in value.values())
    return isinstance(value, (list, tuple)) and any(_holds_a_bool(v) for v in value)


def _values_in(value: Any, budget: int) -> int:
    """How many values `value` holds, its lists' and dicts' items counted through; the count
    stops once it passes `budget` (a page's message may hold millions)."""
    count, stack = 0, [value]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            item = [*item.keys(), *item.values()] if len(item) <= budget else range(budget + 1)
        if isinstance(item, (list, tuple, range)):
            if len(item) > budget:
                return budget + 1
            stack.extend(item)
    return count


def _whole(proposal: dict) -> int:
    """A validator's value as a whole number: traitlets' Int takes True for 1, and a page's
    `true` would index a tensor with a boolean."""
    return _as_trait_error(checks.integer, proposal["trait"].name, proposal["value"])


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
    if view is not None and view not in VIEW_NAMES:
        raise InputError(f"Unknown view {view!r}; available: {', '.join(VIEW_NAMES)}.")
    return shown(AttentionWidget(text, text_b, model, view=view, **kwargs))
