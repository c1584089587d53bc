"""What the widget shows of a run: one pure function from a run and the widget's settings to every
trait the views read (and the runs behind them), which the widget then takes in one step.

Nothing here touches a widget: `Settings` is what the state depends on besides the run (the
open view, layer and heads, how tokens are shown, what a view already made), and `run_state`
computes everything first. A failure on the way raises before anything is shown.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..analyses.tables import long_run_analysis
from ..engine.contributions import run_contributions
from ..engine.exact_attention import describe_bytes, full_attention_bytes
from ..engine.results import AttentionResult, LongAttentionResult, key_notes_of, key_tokens_of, notes_of, opening_query, parts_of
from ..engine.weighing import no_value_norms, weighed
from ..errors import InputError
from . import payloads as pl
from .knockout_answers import knockout_control
from .views import LONG_VIEWS, SHORT_VIEWS, VIEW, spoken

# The Rollout tab's contribution modes (rollout_mode): the method each runs
# (analyses/contributions.py), and its name in what the tab says.
CONTRIBUTION_MODES = {"contributions": ("alti", "ALTI contributions"),
                      "norm_contributions": ("norm", "Norm contributions")}
NEEDS_A_MODEL = (
    "{what} needs a model, and this view was made from precomputed attention. "
    "Use attnscope.show(text, model=...) to run a model live."
)


def long_only(view: str) -> str:
    """Why a view that asks for rows and tiles cannot show a run that keeps its full attention."""
    return (f"The {view} view is for long inputs, whose attention comes on request; this run keeps its full "
            f"attention: use the {spoken(SHORT_VIEWS)} view, or attention='on_demand'.")


def short_only(view: str, result: LongAttentionResult) -> str:
    """Why a view that draws the full attention cannot show a long run."""
    full = full_attention_bytes(result.n_layers, result.n_heads, result.n_tokens, result.n_tokens)
    return (
        f"The {view} view draws the full attention, which this text of {result.n_tokens:,} tokens does not keep "
        f"({result.n_layers} layers × {result.n_heads} heads × {result.n_tokens:,}² would take {describe_bytes(full)}): "
        "use the text, map, head (a window of it), model or analysis view, or a shorter text."
    )


@dataclass(frozen=True)
class Settings:
    """What the widget's state depends on besides the run: its traits now, and what it keeps."""

    view: str
    layer: int
    heads: list[int]
    n_heads: int
    attention_part: str
    word_level: bool
    show_change: bool
    compare_shown: str
    weigh_by: str
    sentence_filter: str
    neuron_head: int
    neuron_query: int
    focus_token: int
    focus_head: int
    analysis: dict
    include_layers: list[int] | None
    include_heads: list[int] | None
    thumbnail_size: int
    prettify: bool
    has_model: bool
    focus_chosen: bool  # a token was chosen: a causal long run no longer opens on its last
    opened_query: tuple | None  # (part, query) the neuron view last opened on
    # What the views made already, and from what: reused while that holds (view_payloads).
    thumbnails: dict = dataclasses.field(default_factory=dict)
    thumbnails_of: tuple | None = None
    rollout: dict = dataclasses.field(default_factory=dict)
    rollout_of: tuple | None = None
    # The Rollout tab's mode, and what ALTI contributions rerun: (the model, the compared model;
    # None where there is none) and the run's max_length.
    rollout_mode: str = "rollout"
    models: tuple = (None, None)
    max_length: int | None = None


@dataclass(frozen=True)
class RunState:
    """A run as the widget shows it: every trait, the three runs it keeps (computed: as the
    engine made it; per token: the part shown; drawn: words merged or the change shown), what
    the thumbnails and rollout were made from, and where the neuron view opened."""

    traits: dict
    drawn: Any
    per_token: Any
    computed: Any
    thumbnails_of: tuple | None
    rollout_of: tuple | None
    opened_query: tuple | None


def source(result_id: int, settings: Any) -> str:
    """What a short run's layer payloads are made from: the run and how it is shown (part,
    words, change; read from Settings or the widget itself, which has the same names). The page
    files the layers it holds under it (the "layer" request)."""
    return (f"{result_id}:{settings.attention_part}:{int(settings.word_level)}:{int(settings.show_change)}"
            f":{settings.compare_shown}:{settings.weigh_by}")


def run_state(computed: AttentionResult | LongAttentionResult, settings: Settings, request_id: int,
              layer: int | None = None, heads: list[int] | None = None,
              long_analysis: Callable[[Any], Any] = long_run_analysis) -> RunState:
    """Everything the widget shows of `computed`, answering edit `request_id` (0: the first run).
    layer, heads: asked for (the constructor's); None keeps the widget's where the run has them.
    long_analysis: what a long run's Analysis tab opens on, of the run (a generation's steps pass
    tables.growing_run_analysis()'s)."""
    if isinstance(computed, LongAttentionResult):
        return _long_run_state(computed, settings, request_id, layer, long_analysis)
    per_token, drawn, one_scale = drawn_run(computed, settings)
    parts = parts_of(computed)
    first, second = parts.get(settings.attention_part, computed), compared_part(computed, settings)
    n_layers, n_heads = drawn.n_layers, drawn.n_heads
    # Encoder and decoder may differ in depth: a part switch keeps the layer where it can.
    layer = _layer_in(settings, n_layers, layer)
    if heads is None:
        kept = [h for h in settings.heads if h < n_heads]
        heads = kept if settings.n_heads == n_heads and settings.heads else list(range(n_heads))
    bad = [h for h in heads if not 0 <= h < n_heads]
    if bad:
        raise InputError(f"heads {bad} are out of range: the model has heads 0..{n_heads - 1}.")
    attention = pl.layer_payload(drawn, layer, source(request_id, settings))
    view = "head" if settings.view in LONG_VIEWS and settings.view not in SHORT_VIEWS else settings.view
    (thumbnails, thumbnails_of), (rollout, rollout_of) = view_payloads(drawn, per_token, view, settings)
    neuron_query, opened_query = _neuron_query(per_token, settings)
    prettify = settings.prettify
    traits = dict(
        text=drawn.text, text_b=drawn.text_b,
        tokens=pl.shown_tokens(drawn, prettify), key_tokens=pl.shown_key_tokens(drawn, prettify),
        token_notes=notes_of(drawn) if prettify else [],
        key_token_notes=key_notes_of(drawn) if prettify else [],
        token_reading=[], parts=list(parts), sentence_b_start=drawn.sentence_b_start,
        n_layers=n_layers, n_heads=n_heads, model_name=_shown_name(drawn, first, second, settings), heads=list(heads),
        sentence_filter=settings.sentence_filter if drawn.sentence_b_start is not None else "all",
        layer=layer, attention=attention,
        neuron_head=min(settings.neuron_head, n_heads - 1), neuron_query=neuron_query,
        neuron_unavailable=_neuron_unavailable(per_token, drawn, settings),
        causal=bool(drawn.causal), causal_from=0, thumbnails=thumbnails, rollout=rollout,
        mask_summary=pl.mask_summary(per_token), notice=pl.result_notice(computed, per_token),
        compared_model="" if second is None else second.model_name, compare_shown=settings.compare_shown,
        one_scale=one_scale, weigh_by=settings.weigh_by, weigh_unavailable=no_value_norms(per_token),
        knockout_control=knockout_control(settings.models[0], per_token, settings.word_level, False),
        long_context=False, n_key_heads=n_heads, view=view, error="", result_id=request_id,
        focus_token=-1,  # a new short run marks no token (indices of another text would mark a wrong one)
    )
    return RunState(traits, drawn, per_token, computed, thumbnails_of, rollout_of, opened_query)


def drawn_run(computed: AttentionResult, settings: Settings) -> tuple[AttentionResult, AttentionResult, dict]:
    """A short run as its views draw it under `settings`: (per token: the part and model shown;
    drawn: weighed, words merged, a masking's change or two models' difference; its one_scale)."""
    parts = parts_of(computed)
    if parts and settings.attention_part not in parts:
        raise InputError(f"attention_part must be one of {list(parts)}.")
    first = parts.get(settings.attention_part, computed)
    second = compared_part(computed, settings)
    per_token = second if settings.compare_shown == "second" else first
    drawn, one_scale = pl.displayed(per_token, settings.word_level, settings.show_change,
                                    against=second if settings.compare_shown == "difference" else None,
                                    weigh_by=settings.weigh_by)
    return per_token, drawn, one_scale


def compared_part(computed: AttentionResult, settings: Settings) -> AttentionResult | None:
    """The second model's run of the shown part, when the widget compares two models; a Compare
    setting other than "first" without one is refused."""
    second = computed.compared
    if second is None:
        if settings.compare_shown != "first":
            raise InputError(f"compare_shown={settings.compare_shown!r} needs a second model: "
                             "attnscope.show(text, model=first, compare=second).")
        return None
    return parts_of(second).get(settings.attention_part, second)


def _long_run_state(result: LongAttentionResult, settings: Settings, request_id: int, layer: int | None,
                    long_analysis: Callable[[Any], Any] = long_run_analysis) -> RunState:
    """A long run: tokens, the sink table and what the views need to ask for rows and tiles."""
    if settings.word_level:
        raise InputError(f"Words (word_level) merges the full attention, and this text of {result.n_tokens:,} tokens keeps it on "
                         "demand: switch Words off, or give a shorter text.")
    layer = _layer_in(settings, result.n_layers, layer)
    opening = pl.analysis_payload(long_analysis(result), result.n_layers, result.n_heads)  # the sinks
    view = "text" if settings.view in SHORT_VIEWS and settings.view not in LONG_VIEWS else settings.view
    analysis = opening if not settings.analysis or settings.analysis.get("kind") == opening["kind"] else settings.analysis
    drawn = weighed(result, settings.weigh_by)  # rows, tiles and thumbnails read α or α·‖f‖
    (thumbnails, thumbnails_of), _ = view_payloads(drawn, result, view, dataclasses.replace(settings, analysis=analysis))
    last = result.n_tokens - 1
    prettify = settings.prettify
    traits = dict(
        text=result.text, text_b=result.text_b, tokens=pl.shown_tokens(result, prettify),
        key_tokens=[], key_token_notes=[], parts=[],
        token_notes=notes_of(result) if prettify else [],
        token_reading=list(result.token_reading or []) if prettify else [],
        sentence_b_start=result.sentence_b_start,
        n_layers=result.n_layers, n_heads=result.n_heads, n_key_heads=result.n_key_heads,
        model_name=result.model_name, heads=list(range(result.n_heads)), sentence_filter="all",
        layer=layer, attention={}, long_context=True,
        focus_token=last if result.causal and not settings.focus_chosen else min(max(settings.focus_token, 0), last),
        focus_head=settings.focus_head if settings.focus_head < result.n_heads else -1,
        neuron_head=min(settings.neuron_head, result.n_heads - 1), neuron_query=min(settings.neuron_query, last),
        neuron_unavailable=short_only("neuron", result), causal=bool(result.causal), causal_from=result.causal_from,
        analysis=analysis, view=view, thumbnails=thumbnails, rollout={},
        mask_summary="", notice=pl.long_notice(result), error="", result_id=request_id,
        compared_model="", compare_shown="first", one_scale={},
        weigh_by=settings.weigh_by, weigh_unavailable=no_value_norms(result),
        knockout_control=knockout_control(settings.models[0], result, False, True),
    )
    return RunState(traits, drawn, result, result, thumbnails_of, None, settings.opened_query)


def _layer_in(settings: Settings, n_layers: int, layer: int | None) -> int:
    """The layer asked for, or the widget's where the run has it (else its last)."""
    return layer_in_range(min(settings.layer, n_layers - 1) if layer is None else layer, n_layers)


def layer_in_range(layer: int, n_layers: int) -> int:
    """`layer`, or an InputError saying the model's range (every check of a layer says it so)."""
    if not 0 <= layer < n_layers:
        raise InputError(f"layer={layer} is out of range: the model has layers 0..{n_layers - 1}.")
    return layer


def _neuron_query(per_token: AttentionResult, settings: Settings) -> tuple[int, tuple]:
    """The neuron view's query for a run, and (part, query) it opened on: where it opens
    (results.opening_query: a token of the text, not [CLS] or a decoder's start token) until the
    user picks another, which is kept while the queries are the same part's tokens."""
    opening = opening_query(per_token)
    opened = settings.opened_query
    now_opened = (settings.attention_part, opening)
    if opened is None or opened[0] != settings.attention_part or settings.neuron_query == opened[1]:
        return opening, now_opened
    return min(settings.neuron_query, len(per_token.tokens) - 1), now_opened


COMPARED_ONE_MODEL = ("The {view} view follows one model's {what}: choose the first or the second model in Show "
                      "(|second − first| is drawn by the head and model views).")


def _neuron_unavailable(per_token: AttentionResult, drawn: AttentionResult, settings: Settings) -> str:
    if settings.compare_shown == "difference":
        return COMPARED_ONE_MODEL.format(view="neuron", what="queries and keys")
    return "" if per_token.queries is not None else _no_queries_keys(drawn.model_name, settings)


def _shown_name(drawn: AttentionResult, first: AttentionResult, second: AttentionResult | None,
                settings: Settings) -> str:
    """The title: the model drawn, and which of the two when a model is compared with a copy of
    the same name."""
    if second is None or settings.compare_shown == "difference" or first.model_name != second.model_name:
        return drawn.model_name
    # Which model first: a title cut for room keeps what tells the two apart (issue 45: "… (embedde…").
    return f"{settings.compare_shown.capitalize()} model: {drawn.model_name}"


def _no_queries_keys(model_name: str, settings: Settings) -> str:
    """Why a run has no queries and keys: precomputed attention has no model to capture them from."""
    if not settings.has_model:
        return NEEDS_A_MODEL.format(what="The neuron view")
    return f"The neuron view needs the queries and keys, and those of {model_name} could not be captured."


# Thumbnails and rollout cost a pass over every layer: made only while a view needs them, and
# remade only when what they were made from changed. What they were made from is recorded with
# them, after they are made: an interrupted build leaves nothing that claims to be done.
def view_payloads(result: Any, token_result: Any, view: str,
                  settings: Settings) -> tuple[tuple[dict, tuple | None], tuple[dict, tuple | None]]:
    """((thumbnails, made from), (rollout, made from)) for `view` showing `result`."""
    layers = None if settings.include_layers is None else tuple(settings.include_layers)
    heads = None if settings.include_heads is None else tuple(settings.include_heads)
    made_from = (id(result), layers, heads)  # the shown result is alive while this is compared
    if made_from == settings.thumbnails_of:
        thumbnails = (settings.thumbnails, made_from)
    elif not pl.needs_thumbnails(view, settings.analysis):
        thumbnails = ({}, None)
    elif isinstance(result, LongAttentionResult):
        # Too large to make at once (seconds): the view asks for them in passes ("thumbnails").
        if pl.thumbnail_passes(result, settings.include_layers, settings.thumbnail_size) > 1:
            thumbnails = ({}, None)
        else:
            thumbnails = (pl.long_thumbnails_payload(result, settings.include_layers, settings.include_heads,
                                                     settings.thumbnail_size, settings.weigh_by), made_from)
    else:
        thumbnails = (pl.thumbnails_payload(result, settings.include_layers, settings.include_heads,
                                            settings.thumbnail_size), made_from)
    made_from = (id(result), settings.word_level, settings.rollout_mode)
    if made_from == settings.rollout_of:
        rollout = (settings.rollout, made_from)
    elif VIEW[view].draws != "rollout" or isinstance(result, LongAttentionResult):
        rollout = ({}, None)
    else:
        rollout = (rollout_for(token_result, settings), made_from)
    return thumbnails, rollout


def rollout_for(token_result: AttentionResult, settings: Settings) -> dict:
    """The Rollout tab's payload of a short run (payloads.rollout_payload) in the mode the settings
    choose, or {error} saying why not: the live widget's and a saved page's (export.py)."""
    if settings.compare_shown == "difference":  # rollout multiplies one model's layers
        return {"error": COMPARED_ONE_MODEL.format(view="rollout", what="attention through its layers")}
    if settings.rollout_mode == "rollout" or key_tokens_of(token_result) is not None:
        return pl.rollout_payload(token_result, settings.word_level)
    model = settings.models[1 if settings.compare_shown == "second" else 0]
    method, name = CONTRIBUTION_MODES[settings.rollout_mode]
    if model is None:
        return {"error": NEEDS_A_MODEL.format(what=f"The {name} mode (it reruns the model with hooks on its attention blocks)")}
    if token_result.masked_heads:
        return {"error": f"{name} follow the whole model: unmask the heads to see them (or choose Rollout, "
                         "which follows the masked run)."}
    try:
        with warnings.catch_warnings():  # truncation and NaN heads: the widget's notice says them already
            warnings.simplefilter("ignore", UserWarning)
            run, mixing = run_contributions(model, token_result.text, token_result.text_b,
                                            max_length=settings.max_length, attention="full", method=method)
    except InputError as exc:  # a family the contributions do not follow: the tab says so
        return {"error": str(exc)}
    if list(run.tokens) != list(token_result.tokens):
        return {"error": f"{name} rerun the model, and that run read the text into other tokens than the one shown."}
    return pl.rollout_payload(token_result, settings.word_level, mixing, settings.rollout_mode)
