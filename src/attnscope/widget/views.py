"""The widget's views, declared once: name, tab label, the runs each shows ("short": a run
that keeps its full attention; "long": a run that keeps q, k and row log-sum-exps, attention on
request), what it draws and how its picture thins. The widget's `view` trait and its checks, the
CLI's --view, the saved page and the picture (export.py, picture.py: what to make for the open
view) and the tabs and pictures in JS (js/transport/contract.js's VIEWS and js/views/view_modules.js, generated
by `make contract`) read this table. A new view is one line here and one JS module,
js/views/<name>_view.js, that exports its adapter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    name: str
    label: str
    modes: tuple[str, ...]
    # What it draws of a short run: a payload trait ("attention": the open layer; "thumbnails":
    # every layer's heads; "rollout") or what a saved page serves ("neuron"); "" for traits alone.
    draws: str = ""
    # What it asks the kernel for on a long run: a request type (messages.MESSAGES) or "".
    asks: str = ""
    # The header's controls it uses (js/controls/controls.js): "layer", "filter" (sentence A or B), "part"
    # (an encoder-decoder's), "words", "masks" (the masked heads' bar), "mask mode" (clicks mask
    # heads), "weigh" (Weigh by: attention or α·‖f(x)‖); the others are shown idle or hidden while it is open.
    controls: tuple[str, ...] = ()
    # The picture's thinner versions, tried in turn until one fits (js/picture.js): the options
    # its scene takes (lineBudget, maxTokens, maxLines, lines, maxPoints).
    thinning: tuple[dict, ...] = ()

    @property
    def module(self) -> str:
        """Its JS module, under js/views/: it exports the view's adapter as `adapter` (js/views/view_adapter.js
        says what one is); `make contract` lists it in js/views/view_modules.js."""
        return f"{self.name}_view.js"


# In the tabs' order.
VIEWS = (
    View("head", "Head", ("short", "long"), draws="attention", asks="attention_window",
         controls=("layer", "filter", "part", "words", "masks", "weigh"),
         # A line takes about 30 bytes of SVG: 2,500 is about all that fits in a picture.
         thinning=(*({"lineBudget": n} for n in (2500, 1000, 400)), *({"lineBudget": 400, "maxTokens": n} for n in (128, 64, 32)))),
    View("model", "Model", ("short", "long"), draws="thumbnails", asks="thumbnails",
         controls=("part", "words", "masks", "mask mode", "weigh"),
         thinning=tuple({"maxLines": n} for n in (600, 80, 30, 12, 4))),
    # {}: every token (the scenes' default), then fewer.
    View("neuron", "Neuron", ("short",), draws="neuron", controls=("layer", "part", "words"),
         thinning=({}, *({"maxTokens": n} for n in (96, 48, 24)))),
    View("rollout", "Rollout", ("short",), draws="rollout", controls=("part", "words", "masks"),
         thinning=({}, *({"maxTokens": n} for n in (160, 80, 40)))),
    View("text", "Text", ("long",), asks="attention_rows", controls=("layer", "part", "words", "weigh"),
         thinning=tuple({"lines": n} for n in (24, 12, 6, 3))),
    View("map", "Map", ("long",), asks="attention_tile", controls=("layer", "part", "words", "weigh")),
    # The head finder's scatter: a point takes about 60 bytes of SVG (a 70B model has 5,120 heads);
    # the heatmaps and the MDS scatter draw the same at any of these.
    View("analysis", "Analysis", ("short", "long"), thinning=({}, *({"maxPoints": n} for n in (1000, 400)))),
)
VIEW = {view.name: view for view in VIEWS}
SHORT_VIEWS = tuple(view.name for view in VIEWS if "short" in view.modes)
LONG_VIEWS = tuple(view.name for view in VIEWS if "long" in view.modes)
# The `view` trait's values: a short run's views, then those only a long run has.
VIEW_NAMES = SHORT_VIEWS + tuple(name for name in LONG_VIEWS if name not in SHORT_VIEWS)


def spoken(names: tuple[str, ...]) -> str:
    """Names as a sentence says them: "head, model or analysis"."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)
