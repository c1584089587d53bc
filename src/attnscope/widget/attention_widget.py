"""The anywidget: a run of an AttentionModel (or precomputed attention) shown in the views in
js/, rerun on an edit, a change of masks or of the text; its trait writes are checked in
widget_checks.py and what it shows of a run is computed in widget_state.py.

Each synced trait is documented where it is declared (`synced`, see contract.py): what it holds,
who writes it, and what a saved page does with it. Payloads are built in payloads.py, requests
and answers go through messages.Channel, and export.py saves the widget's own state as a page.
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
from typing import Any

import traitlets

from .. import checks
from ..analyses.tables import check_choice
from ..checks import check_comparable
from ..engine.attention_model import AttentionModel
from ..engine.engines import resolve_engine
from ..engine.nonfinite import NonFiniteAttentionWarning
from ..engine.results import AttentionResult, LongAttentionResult, run_of
from ..errors import AttnscopeError, InputError
from . import payloads as pl
from .contract import GROWING, contract_traits
from .export import neuron_store, split_buffers
from .knockout_answers import answer_knockout
from .layer_answers import answer_layer
from .long_answers import LongAnswers
from .messages import Channel
from .page_input import take_page_write
from .picture import PictureOutputs, display_with_picture, shown
from .views import VIEW_NAMES
from .widget_checks import CheckedTraits, constructor_settings
from .widget_outputs import WidgetOutputs
from .widget_state import CONTRIBUTION_MODES, NEEDS_A_MODEL, RunState, Settings, long_only, run_state, short_only, source, view_payloads

THUMBNAIL_SIZE = 48


CLOSED = "This widget was closed, and its results were freed with it: make a new one with attnscope.show()."

class AttentionWidget(WidgetOutputs, CheckedTraits):
    """Live attention views of one text (or text pair) for a model. Layers and heads are counted
    from 0, here and in the views: `layer=5` opens "Layer 5", Hugging Face's `attentions[5]`.

    >>> w = AttentionWidget("The cat sat on the mat.")           # embedded MiniLM
    >>> w = AttentionWidget("A question?", "An answer.", model="bert-base-uncased", layer=5)

    compare: a second model run on the same text, for "what did fine-tuning change?": a loaded
    AttentionModel, a Hugging Face name or path, or a PreTrainedModel (given this widget's
    tokenizer unless it is an AttentionModel). It must have the same layers × heads and read the
    text into the same tokens (one vocabulary): a base model and its fine-tuned copy. The Show
    control draws the first model, the second, or |second − first|, every head on one scale whose
    strongest line is the largest change in the run (`one_scale`). Short inputs only (a run
    kept on demand is refused), and heads cannot be masked while comparing.
    """

    stands_for_its_run = True  # results.run_of reads a widget as its token_result

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
        compare: Any = None,
        **kwargs: Any,
    ):
        # With `result` (precomputed attention, e.g. from the BertViz-style functions) there is no
        # model: the views work, editing and masking say they need one.
        constructor_settings(type(self), {"theme": theme, **kwargs})  # before the model runs: a typo is never taken silently
        if result is not None:  # its kind first: what is wrong with it says more than "not both"
            result = run_of(result, "result=")  # a widget stands for its run; anything else is named
        if result is not None and (text is not None or model is not None):
            raise InputError("Give either precomputed attention (result=) or a text to run, not both.")
        if result is None and text is None:
            raise InputError("text is None: give the text to show, e.g. AttentionWidget(\"The cat sat on the mat.\").")
        self._thumbnail_size = checks.integer("thumbnail_size", thumbnail_size, minimum=1, maximum=4096)
        checks.integer("layer", layer, minimum=0)
        if heads is not None:
            heads = checks.indices("heads", heads, None, "heads")  # the range once the model is known
        self._engine = None if result is not None else resolve_engine(model, tokenizer, device)
        self._compare_engine = None
        if compare is not None:
            if self._engine is None:
                raise InputError(NEEDS_A_MODEL.format(what="Comparing two models"))
            try:
                self._compare_engine = resolve_engine(compare, tokenizer or self._engine.tokenizer, device)
            except AttnscopeError as error:  # said of compare=, not of the widget's model
                raise type(error)(f"compare: {error}") from None
            check_comparable(self._engine, self._compare_engine, "compare=")
        self._prettify = checks.flag("prettify_tokens", prettify_tokens)
        self._max_length = max_length
        self._attention_mode = attention
        # What the thumbnails and rollout were made from (widget_state.view_payloads): reused while it holds.
        self._thumbnails_of: tuple | None = None
        self._rollout_of: tuple | None = None
        self._applying = False
        self._closed = False
        self._masks = [list(pair) for pair in checks.head_pairs("masked_heads", masked_heads)]
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
            word_level=checks.flag("word_level", word_level), masked_heads=self._masks, editable=self._engine is not None, **kwargs,
        )
        self._apply(result, request_id=0, layer=layer, heads=heads)
        if neuron_query is not None:  # asked for: kept over where the view would open
            self.neuron_query = neuron_query
        if "focus_token" in kwargs and not self.long_context:  # asked for: the run's state marks none
            self.focus_token = kwargs["focus_token"]
        # After the first result: the model view's thumbnails need it.
        self.view = view if view is not None else ("text" if self.long_context else "head")
        self.picture_id = uuid.uuid4().hex
        self._pictures = PictureOutputs(self)
        self._channel = Channel(
            self,
            {"neuron": self._answer_neuron, "layer": self._answer_layer, "knockout": lambda r, _: self._answer_knockout(r),
             "growing_lists": lambda _r, _b: self._answer_growing_lists(),
             **{type_: self._answer_long(type_) for type_ in LongAnswers.TYPES}},
            {"rendered": self._on_rendered, "stop": self._on_stop, "painted": self._on_painted},
        )

    def set_state(self, sync_data: dict) -> None:
        """A view's write (ipywidgets' update), taken as untrusted input (page_input.take_page_write)."""
        take_page_write(self, sync_data, super().set_state)

    def _ipython_display_(self, **kwargs: Any) -> None:
        display_with_picture(self, **kwargs)

    @property
    def result(self) -> AttentionResult:
        """The AttentionResult behind the current view (tensors on the model's device): word-level
        when `word_level` is on, with `masked_heads` switched off when any are. Where the views draw a
        difference (Show change, compare_shown "difference") or α·‖f‖, its attention is that ÷ `one_scale["largest"]`."""
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
            raise InputError(NEEDS_A_MODEL.format(what="Changing the text (text, text_b)"))
        with warnings.catch_warnings():
            # Truncation and NaN heads are shown in the widget's notice; a warning would print the
            # same under the cell too.
            warnings.filterwarnings("ignore", message="(Input|Decoder text) truncated", category=UserWarning)
            warnings.filterwarnings("ignore", category=NonFiniteAttentionWarning)
            if self._compare_engine is not None and self._masks:
                raise InputError("Masking heads while comparing two models is not supported: unmask the heads, or "
                                 "show each model in a widget of its own.")
            plain = self._engine.run(text, text_b, self._max_length, attention=self._attention_mode)
            if self._compare_engine is not None:
                plain.compared = self._second_run(plain, text, text_b)
            if isinstance(plain, LongAttentionResult) and self._masks:
                raise InputError(f"Masking heads needs the full attention, and this text of {plain.n_tokens:,} tokens "
                                 "keeps it on demand: unmask the heads, or give a shorter text.")
            if not self._masks:
                return plain
            masked = self._engine.run(text, text_b, self._max_length, masked_heads=self._masks)
        masked.unmasked = plain
        return masked

    def _second_run(self, first: AttentionResult | LongAttentionResult, text: str, text_b: str | None) -> AttentionResult:
        """The compared model's run of the same text, token for token."""
        if isinstance(first, LongAttentionResult):
            raise InputError(f"Comparing two models draws both full attentions, and this text of {first.n_tokens:,} "
                             "tokens keeps its attention on demand: give a shorter text.")
        second = self._compare_engine.run(text, text_b, self._max_length, attention="full")
        if second.tokens != first.tokens:
            raise InputError(f"The two models read this text into other tokens ({len(first.tokens)} and "
                             f"{len(second.tokens)}): comparing needs one tokenizer.")
        return second

    def _settings(self) -> Settings:
        """What the state of a run depends on besides the run (widget_state.run_state)."""
        return Settings(
            view=self.view, layer=self.layer, heads=list(self.heads), n_heads=self.n_heads,
            attention_part=self.attention_part, word_level=self.word_level, show_change=self.show_change,
            compare_shown=self.compare_shown, weigh_by=self.weigh_by,
            sentence_filter=self.sentence_filter, neuron_head=self.neuron_head, neuron_query=self.neuron_query,
            focus_token=self.focus_token, focus_head=self.focus_head, analysis=self.analysis,
            include_layers=self.include_layers, include_heads=self.include_heads, thumbnail_size=self._thumbnail_size,
            prettify=self._prettify, has_model=self._engine is not None, focus_chosen=self._focus_chosen, max_length=self._max_length,
            opened_query=self.__dict__.get("_opened_query"), thumbnails=self.thumbnails, thumbnails_of=self._thumbnails_of,
            rollout=self.rollout, rollout_of=self._rollout_of, rollout_mode=self.rollout_mode, models=(self._engine, self._compare_engine),
        )

    def _apply(self, computed: AttentionResult, request_id: int, layer: int | None = None, heads: list[int] | None = None) -> None:
        """Show a run. Everything is computed first (widget_state.run_state) and the widget then
        moves to it in one step: a failure or an interrupt on the way leaves the previous run shown, whole."""
        self._show(run_state(computed, self._settings(), request_id, layer, heads))

    def _show(self, state: RunState, atomic: bool = True) -> None:
        """Move the widget to a computed run: its runs and every trait, in one message (the view
        never sees tokens of one run with another's attention). Nothing here computes."""
        before = self._snapshot() if atomic else None
        try:
            self._drawn_run, self._per_token_run, self._computed_run = state.drawn, state.per_token, state.computed
            self._thumbnails_of, self._rollout_of = state.thumbnails_of, state.rollout_of
            self._opened_query = state.opened_query
            traits = state.traits
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
        self._show(RunState(changed, kept["_drawn_run"], kept["_per_token_run"], kept["_computed_run"],
                            kept["_thumbnails_of"], kept["_rollout_of"], kept["_opened_query"]), atomic=False)

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

    @traitlets.observe("view", "include_layers", "include_heads", "analysis", "rollout_mode")
    def _on_view(self, change: dict) -> None:
        if self._applying or "_drawn_run" not in self.__dict__ and not self._closed:
            return
        with self._or_put_back(change):
            self._live()
            (thumbnails, thumbnails_of), (rollout, rollout_of) = view_payloads(self._drawn_run, self._per_token_run, self.view,
                                                                               self._settings())
            self._thumbnails_of, self._rollout_of = thumbnails_of, rollout_of
            self._quietly(thumbnails=thumbnails, rollout=rollout)

    @traitlets.observe("attention_part", "word_level", "show_change", "compare_shown", "weigh_by")
    def _on_display_mode(self, change: dict) -> None:
        """What the views show of the same run changed: re-shown from the kept run, no rerun."""
        if self._applying or "_computed_run" not in self.__dict__ and not self._closed:
            return
        with self._or_put_back(change):
            self._live()
            self._apply(self._computed_run, self.result_id)

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
                # A new run, a new id: the page files the layers it holds under it (widget_state.source)
                # and would otherwise keep the unmasked ones.
                self._apply(self._run(self._drawn_run.text, self._drawn_run.text_b), self.result_id + 1)
            except BaseException:
                self._masks = previous
                raise

    def show_analysis(self, data: Any, measure: str | None = None) -> AttentionWidget:
        """Show an analysis result in the layout its module declares (analyses/tables.py
        `analysis_view`): per-head heatmaps, the heads' MDS scatter, the head finder's scatter and
        table, or a layout of its own, as `analysis_choice` says (a heatmap's measure, the finder's
        plot). Clicking a head opens it in the head view. The choice keeps what the new one still takes."""
        analysis = pl.analysis_payload(data, self.n_layers, self.n_heads, measure)
        choice = {}
        for part, value in self.analysis_choice.items():
            with contextlib.suppress(InputError):
                if part != "measure" or measure is None:  # a measure given here is shown, whatever was chosen
                    choice[part] = check_choice({part: value}, analysis)[part]
        with self.hold_sync():  # one message: the page never draws the new finder with the old choice
            self.analysis = analysis
            self.analysis_choice = choice
        self.view = "analysis"
        return self

    def _on_rendered(self, _content: dict) -> None:
        self._rendered = True

    def _on_stop(self, _content: dict) -> None:
        """The page's Stop: only a generating widget (generation_widget.py) has a run to stop."""

    def _on_painted(self, _content: dict) -> None:
        """The view's first drawing is on screen: only a generation's first step waits for it."""

    def _answer_neuron(self, request: dict, _buffers: list) -> tuple[dict, list]:
        """A "neuron" request: what the view computes any head's and query's numbers of one layer
        from (export.neuron_store, as a saved page holds it), so another query or head is drawn in
        the page with no round trip. The answer names the run, the part and the number of queries,
        so the view never files one run's numbers under another's key."""
        result = self.token_result
        if isinstance(result, LongAttentionResult):
            raise InputError(short_only("neuron", result))
        layer = checks.integer("layer", request.get("layer"), minimum=0)
        if layer >= result.n_layers:
            raise InputError(f"layer={layer} is out of range 0..{result.n_layers - 1}.")
        store = neuron_store(self, result, [layer])
        if store is None:
            raise InputError(f"Queries and keys were not captured for {result.model_name}: no neuron view.")
        json_part, buffers = split_buffers(store)
        return {"store": json_part, "paths": [path for path, _ in buffers], "layer": layer, "result_id": self.result_id,
                "part": store["part"], "shown": self.compare_shown if self.compared_model else "",
                "n_queries": store["n_queries"]}, [data for _, data in buffers]

    def _long_answers(self, type_: str = "attention_rows") -> LongAnswers:
        """The shown long run's answers to the views' requests (long_answers.LongAnswers)."""
        result = self.token_result
        if not isinstance(result, LongAttentionResult):
            raise InputError("This run's thumbnails come whole, in the thumbnails trait." if type_ == "thumbnails"
                             else long_only("text"))
        return LongAnswers.of(self)

    def _answer_long(self, type_: str):
        """The channel's handler for one kind of long-run request."""
        return lambda request, _buffers: self._long_answers(type_).handler(type_)(request)

    @traitlets.observe("focus_token")
    def _on_focus_token(self, _change: dict) -> None:
        if not self._applying:
            self._focus_chosen = True

    @traitlets.observe("layer")
    def _on_layer(self, change: dict) -> None:
        if self._applying or self.long_context:
            return
        with self._or_put_back(change):
            self._quietly(attention=pl.layer_payload(self.result, change["new"], source(self.result_id, self)))

    _answer_knockout = answer_knockout  # the head view's "knockout" request (a generation's: its own)

    def _answer_growing_lists(self) -> dict:
        return {**{name: getattr(self, name) for name in GROWING}, "result_id": self.result_id}

    def _answer_layer(self, request: dict, _buffers: list) -> tuple[dict, list]:
        return answer_layer(self, request)  # another layer, or the open one weighed otherwise

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
            opening = request.get("open")
            if opening is None:
                self._apply(result, request["id"])
            else:
                self._open_example(result, request["id"], **opening)
        except Exception as exc:
            message = str(exc) if isinstance(exc, AttnscopeError) else f"{type(exc).__name__}: {exc}"
            self._quietly(error=message, result_id=request["id"])
        finally:
            # The page's text is kept as the run's, not here: a text the run refused (a lone
            # surrogate) would make every later send of the whole state fail.
            self._quietly(request={})

    def _open_example(self, result: Any, request_id: int, layer: int, head: int, query: int) -> None:
        """Show a head finder's example: its document's run with that head alone, the head view on
        a short run, the text view on its query on a long one. Checked against the run first."""
        for name, value, count in (("layer", layer, result.n_layers), ("head", head, result.n_heads),
                                   ("query", query, len(result.tokens))):
            if value >= count:
                raise InputError(f"The example's {name} {value} is out of range: this run has {count} of them.")
        long = isinstance(result, LongAttentionResult)
        with self.hold_sync():  # the page moves to the example in one step
            self._apply(result, request_id, layer=layer, heads=None if long else [head])
            # The query marked in the head view too (and the neuron view opens on it).
            opened = ({"focus_head": head, "focus_token": query, "view": "text"} if long
                      else {"neuron_head": head, "neuron_query": query, "focus_token": query, "view": "head"})
            for name, value in opened.items():
                setattr(self, name, value)

    @traitlets.observe("text", "text_b")
    def _on_text(self, change: dict) -> None:
        """Setting `widget.text = ...` from Python recomputes; bad input raises and changes nothing."""
        if self._applying:
            return
        with self._or_put_back(change):
            self.update(self.text, self.text_b)

    def update(self, text: str, text_b: str | None = None) -> None:
        """Show another text (pair) with the same model, keeping layer and heads."""
        self._apply(self._run(text, text_b), self.result_id + 1)  # a new run, a new id (as in _on_masks)

    def __repr__(self) -> str:
        if "_drawn_run" not in self.__dict__:
            return "AttentionWidget(closed)"
        # The Rollout tab's contribution mode is what it draws: said where the text stands in for it.
        contribution = CONTRIBUTION_MODES.get(self.rollout_mode) if self.view == "rollout" else None
        mode = f" ({contribution[1]})" if contribution else ""
        return f"AttentionWidget({self.model_name}, {len(self.tokens)} tokens, {self.view} view{mode})"


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
    if view is not None and not checks.one_of(view, VIEW_NAMES):
        raise InputError(f"Unknown view {checks.short_repr(view)}; available: {', '.join(VIEW_NAMES)}.")
    return shown(AttentionWidget(text, text_b, model, view=view, **kwargs))
