"""What the analyses share: per-head sums over documents (a partial aggregate that merges) and
the tidy DataFrame of layer × head values, tagged with what made it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import (
    AttentionModel,
)
from ..errors import InputError
from ..labels import head_label


def heads_frame(values: dict[str, torch.Tensor]):
    """measure → L × H tensors as a tidy DataFrame: layer, head, label, measure, value."""
    import pandas as pd

    rows = []
    for measure, tensor in values.items():
        grid = tensor.detach().cpu().double()
        for layer in range(grid.shape[0]):
            for head in range(grid.shape[1]):
                rows.append((layer, head, head_label(layer, head), measure, float(grid[layer, head])))
    return pd.DataFrame(rows, columns=["layer", "head", "label", "measure", "value"])


def tagged(frame, kind: str, engine: AttentionModel, n_documents: int, **extra):
    frame.attrs.update({"attnscope": kind, "model": engine.name, "documents": n_documents, **model_shape(engine), **extra})
    return frame


def model_shape(engine: Any) -> dict:
    """{"shape": [layers, heads]} of the model an analysis read, kept in its result's attrs so that a
    widget of another model refuses it (analysis_shape); {} for an encoder-decoder, whose parts'
    shapes may differ from one another."""
    shape = [getattr(engine, "n_layers", None), getattr(engine, "n_heads", None)]
    if getattr(engine, "is_encoder_decoder", False) or None in shape:  # (or a stand-in that does not say)
        return {}
    return {"shape": [int(n) for n in shape]}


def analysis_shape(data: Any) -> list[int] | None:
    """[layers, heads] of the model an analysis's result was made on, where it says."""
    shape = getattr(data, "model_shape", None)
    if shape is None and hasattr(data, "attrs"):
        shape = data.attrs.get("shape")
    return None if shape is None else [int(n) for n in shape]


class HeadSums:
    """Per measure, the sums and counts of L × H values over documents, NaN left out (a document
    with no [SEP] says nothing of attention to [SEP]). A partial aggregate: the sums of any split
    of a corpus, merged, are the whole corpus's (corpus.py runs the parts on a Ray cluster)."""

    def __init__(self):
        self.total: dict[str, torch.Tensor] = {}
        self.count: dict[str, torch.Tensor] = {}

    def add(self, values: dict[str, torch.Tensor], weight: float = 1.0) -> None:
        """One document's values; `weight`: how many it averages (its tokens), for a mean over
        tokens rather than over documents."""
        for key, value in values.items():
            value = value.detach().double().cpu()
            valid = ~torch.isnan(value)
            if key not in self.total:
                self.total[key] = torch.zeros_like(value)
                self.count[key] = torch.zeros_like(value)
            self.total[key] += torch.where(valid, value * weight, torch.zeros_like(value))
            self.count[key] += valid.double() * weight

    def merge(self, other: HeadSums) -> HeadSums:
        merged = HeadSums()
        for part in (self, other):
            for key in part.total:
                merged.total[key] = merged.total.get(key, 0) + part.total[key]
                merged.count[key] = merged.count.get(key, 0) + part.count[key]
        return merged

    def result(self) -> dict[str, torch.Tensor]:
        return {k: self.total[k] / self.count[k] for k in self.total}  # 0/0 → NaN: never seen


@dataclass
class SumsPartial:
    """What a part of a corpus adds to an analysis of per-head sums (head_importance, attention_gradients,
    head_roles, attention_patterns): the sums and counts, and the documents."""

    sums: HeadSums
    documents: int

    def merge(self, other: SumsPartial) -> SumsPartial:
        return SumsPartial(self.sums.merge(other.sums), self.documents + other.documents)


# A per-head grid of an analysis's column: grid(rows, column) → layers × heads values, as the
# analysis view reads them (payloads.analysis_payload makes it, checking the model's shape).
Grid = Callable[[Any, str], list]
# What a layout may need beside the analysis's payload, made while it is shown (payloads.needs_thumbnails).
NEEDS = ("thumbnails",)


@dataclass(frozen=True)
class AnalysisView:
    """How the widget's analysis view shows one kind of analysis, declared by its module
    (`@analysis_view`). The widget and the page read these, never the analysis by name.

    convert: (data, grid) → {"measures": [{key, label, values}], "note": ..., and what its layout
    reads besides (a scatter's "points" and "behaviours", the finder's "finder", a layout of its
    own's own keys)}. A measure may say what its values are: "categories" (their names, values
    index them), "integer": True (counts, steps: no decimals) and "min" (where its scale starts, when
    not at 0: steps count from 1).
    layout: the JS module that draws it, js/views/<layout>_layout.js (`make contract` lists the layouts
    in js/views/layout_modules.js).
    needs: what it needs beside its payload (NEEDS: "thumbnails", every head's, shown on hover).
    check_choice: (choice, analysis payload) → choice, refusing (InputError) what the reader's
    choice in it (the widget's analysis_choice) cannot be; None: its layout's check (LAYOUT_CHOICES).
    of_a_long_run: result → its data: a long run's Analysis tab opens on this analysis of the run.
    of_a_growing_run: () → a function result → its data, for a run that grows by query rows (a
    generation's steps), which may keep what it read of the earlier rows: the same data as
    of_a_long_run's of each step's run. None: of_a_long_run reads each step whole.
    """

    kind: str
    convert: Callable[[Any, Grid], dict]
    layout: str = "heatmap"
    needs: tuple[str, ...] = ()
    check_choice: Callable[[dict, dict], dict] | None = None
    of_a_long_run: Callable[[Any], Any] | None = None
    of_a_growing_run: Callable[[], Callable[[Any], Any]] | None = None


# kind → its declaration, in the order the modules register them.
ANALYSIS_VIEWS: dict[str, AnalysisView] = {}


def analysis_view(kind: str, *, layout: str = "heatmap", needs: tuple[str, ...] = (),
                  check_choice: Callable[[dict, dict], dict] | None = None,
                  of_a_long_run: Callable[[Any], Any] | None = None,
                  of_a_growing_run: Callable[[], Callable[[Any], Any]] | None = None):
    """Registers a module's conversion of its result (`frame.attrs["attnscope"] == kind`) for the
    widget's analysis view, with its layout and what it needs (AnalysisView): a new analysis is
    shown once its module is imported (analyses/__init__)."""
    if not set(needs) <= set(NEEDS):
        raise ValueError(f"An analysis needs some of {NEEDS}, not {needs}.")
    if of_a_long_run is not None and any(v.of_a_long_run for v in ANALYSIS_VIEWS.values() if v.kind != kind):
        raise ValueError("One analysis opens a long run's Analysis tab.")

    def register(convert: Callable[[Any, Grid], dict]) -> Callable[[Any, Grid], dict]:
        ANALYSIS_VIEWS[kind] = AnalysisView(kind, convert, layout, tuple(needs), check_choice, of_a_long_run,
                                            of_a_growing_run)
        return convert
    return register


def layouts() -> list[str]:
    """The layouts the registered analyses declare, the heatmap first: js/views/layout_modules.js's."""
    return list(dict.fromkeys(["heatmap", *(view.layout for view in ANALYSIS_VIEWS.values())]))


def needs(analysis: dict, what: str) -> bool:
    """Whether the shown analysis (the widget's analysis payload, {} for none) needs `what` (NEEDS)."""
    view = ANALYSIS_VIEWS.get(analysis.get("kind") or "")
    return view is not None and what in view.needs


def _one_part_choice(part: str, holds: str, allowed: Callable[[dict], tuple[list[str], str]]) -> Callable[[dict, dict], dict]:
    """A layout's check of a choice of one part (`part`, said as `holds`): {} or {part: one of
    `allowed(analysis)`'s values, which its text says}."""
    def check(choice: dict, analysis: dict) -> dict:
        unknown = [key for key in choice if key != part]
        if unknown:
            raise InputError(f"analysis_choice holds {holds}, not {checks.short_repr(unknown)}.")
        values, said = allowed(analysis)
        if part in choice and not checks.one_of(choice[part], values):
            raise InputError(f"analysis_choice's {part} must be one of {said}, not {checks.short_repr(choice[part])}.")
        return choice
    return check


def _measures(analysis: dict) -> tuple[list[str], str]:
    keys = [m["key"] for m in analysis.get("measures", [])]
    return keys, f"this analysis's measures ({', '.join(keys)})"


SCATTER_COLOURS = ("behaviour", "layer")
# A heatmap's choice: {measure: one of the shown analysis's measures}; the MDS scatter's: {color}.
measure_choice = _one_part_choice("measure", "a heatmap's measure", _measures)
scatter_choice = _one_part_choice("color", "the scatter's color",
                                  lambda _analysis: (list(SCATTER_COLOURS), ", ".join(SCATTER_COLOURS)))


def no_choice(choice: dict, analysis: dict) -> dict:
    """A layout that takes no choice of the reader's: only {} holds."""
    raise InputError(f"analysis_choice: the {analysis.get('layout')} layout takes no choice, only {{}}, "
                     f"not {checks.short_repr(choice)}.")


# A layout's choice check where its analysis declares none (`check_choice=`).
LAYOUT_CHOICES: dict[str, Callable[[dict, dict], dict]] = {"heatmap": measure_choice, "scatter": scatter_choice}


def check_choice(choice: dict, analysis: dict) -> dict:
    """The reader's choice in the shown analysis (`analysis`, the widget's payload), checked by the
    check its module declared, else its layout's (LAYOUT_CHOICES); {} always holds. With no analysis
    shown, any other choice is refused, saying what it sets."""
    if not choice:
        return choice
    own = ANALYSIS_VIEWS.get(analysis.get("kind") or "")
    if own is None:
        raise InputError("analysis_choice holds the reader's choice in the Analysis tab, and no analysis is shown: "
                         "it must be {} until one is, widget.show_analysis(attnscope.head_stats(model, texts)).")
    return (own.check_choice or LAYOUT_CHOICES.get(own.layout, no_choice))(choice, analysis)


def long_run_analysis(result: Any) -> Any:
    """The analysis a long run's Analysis tab opens on (the one declared `of_a_long_run`), of `result`."""
    (view,) = [v for v in ANALYSIS_VIEWS.values() if v.of_a_long_run]
    return view.of_a_long_run(result)


def growing_run_analysis() -> Callable[[Any], Any]:
    """long_run_analysis for a run that grows by query rows, one step after another (a
    generation): the declared analysis's own incremental form where it has one."""
    (view,) = [v for v in ANALYSIS_VIEWS.values() if v.of_a_long_run]
    return view.of_a_growing_run() if view.of_a_growing_run else view.of_a_long_run


def analysis_kind(data: Any) -> str | None:
    """The kind of an analysis's result: what its tag says (tagged)."""
    return getattr(data, "analysis_kind", None) or (data.attrs.get("attnscope") if hasattr(data, "attrs") else None)



FRAME_COLUMNS = ("head", "label", "layer", "measure", "value")


def analysis_frame(frame: Any, reader: str, made_by: str) -> Any:
    """`frame` when it is a tidy frame as the analyses return (layer, head, label, measure, value);
    else InputError naming `reader` (the function that reads it), what it got and what makes one."""
    import pandas as pd

    if isinstance(frame, pd.DataFrame) and set(FRAME_COLUMNS) <= set(frame.columns):
        return frame
    got = checks.kind_of(frame)
    if isinstance(frame, pd.DataFrame):
        got = f"a DataFrame of {', '.join(map(str, frame.columns[:8]))}" if len(frame.columns) else "a DataFrame of no columns"
    raise InputError(f"{reader} reads what {made_by} returns (a DataFrame of {', '.join(FRAME_COLUMNS)}), not {got}.")


# What a widget's control runs of an analysis (the head view's "knock out this head"), by name: the
# widget asks here, as it asks for layouts and checks, and imports no analysis. Registered by the
# analysis's module (`@widget_action(name)`), present once attnscope.analyses is imported.
WIDGET_ACTIONS: dict[str, Callable[..., Any]] = {}


def widget_action(name: str):
    """Registers `function` as the widget's action `name` (analyses' modules, at import)."""
    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        WIDGET_ACTIONS[name] = function
        return function
    return register


def action(name: str) -> Callable[..., Any]:
    """The analysis function registered as the widget's action `name`."""
    if name not in WIDGET_ACTIONS:
        raise LookupError(f"no analysis registers the widget's action {name!r} (analyses/__init__ imports them all)")
    return WIDGET_ACTIONS[name]
