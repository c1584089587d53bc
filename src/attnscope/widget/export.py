"""Standalone HTML: one self-contained file with the bundled views and the data, fully offline.

No CDN, no require.js, no widget manager: the page inlines static/standalone.js (the same views
over a static model) and the data as JSON. Token text can be anything (`</script>` included), so
the JSON is escaped for its <script> context: "<", ">" and "&" become \\u escapes, which no HTML
parser reads as markup, and JSON.parse reads back as the same characters.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import secrets
from typing import Any

from .. import checks
from ..engine.results import LongAttentionResult
from ..files import STATIC
from . import payloads as pl
from .contract import contract_traits, page_traits
from .long_answers import LongAnswers, step_rows
from .messages import OVERVIEW_BINS
from .views import VIEW
from .widget_state import rollout_for

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body{body_attributes}>
<div id="attnscope-{uid}" class="attnscope-page"></div>
<script type="application/json" id="attnscope-data-{uid}">{data}</script>
<!--
{licenses}
-->
<script>{js}</script>
<script>
attnscopeStandalone.mount(document.getElementById("attnscope-{uid}"),
  JSON.parse(document.getElementById("attnscope-data-{uid}").textContent), {{fit: {fit}}});
</script>
</body>
</html>
"""
# Every page's ids end in a random suffix of its own: a notebook that shows two returned pages
# (IPython's HTML output inlines both into one document) mounts each page's own data. Random, not
# content-derived, so the same page shown twice is two mounts too. Looking the data up relative to
# document.currentScript would need no ids, but the classic notebook runs inlined scripts from
# copies appended to <head> (jQuery), where no relative lookup finds the page.


def _page_uid() -> str:
    return secrets.token_hex(8)


def _no_lone_surrogates(text: str) -> str:
    """Lone UTF-16 surrogates (which token lists can hold) as U+FFFD: UTF-8 cannot encode them."""
    return re.sub("[\ud800-\udfff]", "\ufffd", text)


def finite_json(value: Any) -> Any:
    """`value` with every NaN or infinite float as None: JSON has no such numbers (Python writes
    `NaN` and `Infinity`, which JSON.parse refuses, and then no view mounts). Payloads say what a
    non-finite number meant themselves (payloads.json_number); this is the page's last guard."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def strict_json(value: Any, ensure_ascii: bool = False) -> str:
    """JSON that JSON.parse reads: a NaN or infinite number as null (finite_json)."""
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=False)
    except ValueError:  # a non-finite number somewhere
        return json.dumps(finite_json(value), ensure_ascii=ensure_ascii, allow_nan=False)


def script_safe_json(value: Any) -> str:
    """JSON that cannot end or open markup inside a <script> element, and that JSON.parse reads."""
    text = strict_json(value)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace(
        "\u2028", "\\u2028"
    ).replace("\u2029", "\\u2029")
    # A lone surrogate (only JSON strings can hold one) as its \\u escape: the page stays encodable
    # as UTF-8 and JSON.parse gives the browser the same token text back.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)


_HOLDS_PARTS = (bytes, bytearray, memoryview, dict, list, tuple)


def split_buffers(value: Any, path: tuple = ()) -> tuple[Any, list[tuple[list, bytes]]]:
    """`value` with every bytes part replaced by None, and the parts with their paths (keys and
    indices), as ipywidgets sends state over a comm; js/standalone.js puts them back."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None, [(list(path), bytes(value))]
    if isinstance(value, dict):
        out, found = {}, []
        for key, item in value.items():
            out[key], inner = split_buffers(item, (*path, key))
            found += inner
        return out, found
    if isinstance(value, (list, tuple)):
        if not any(issubclass(kind, _HOLDS_PARTS) for kind in set(map(type, value))):
            return list(value), []  # a flat list (tokens): one look at its types, not a call an item
        out_list, found = [], []
        for index, item in enumerate(value):
            converted, inner = split_buffers(item, (*path, index))
            out_list.append(converted)
            found += inner
        return out_list, found
    return value, []


def neuron_store(widget: Any, token_result: Any, layers: list[int]) -> dict | None:
    """What the neuron view computes its numbers from for `layers` (payloads.neuron_store), with
    what the page files it under (the number of queries, the part shown): a saved page holds it for
    its layers, and the kernel answers the live view's "neuron" request with one layer's."""
    store = pl.neuron_store(token_result, [layer for layer in layers if layer < token_result.n_layers])
    if store is not None:
        store.update(n_queries=len(token_result.tokens), part=widget.attention_part if widget.parts else "")
    return store


def page_state(widget: Any, layers: list[int] | None = None, only_open_view: bool = False) -> dict:
    """The widget's own state as a saved page holds it:
    - state: every synced trait of the contract, as the widget has it now, plus what the kernel
      makes only while a tab is open (thumbnails, rollout), so every tab paints;
    - served: what the kernel would send on the changes a page can make (the saved layers'
      attention) and what answers its requests (the queries and keys of those layers);
    - traits: what the page does when the view changes a trait (contract.page_traits).
    only_open_view: what the open view draws and no more (the kernel's picture of it)."""
    result, token_result = widget.result, widget.token_result  # raise for a closed widget
    layers = checks.indices("layers", layers, result.n_layers, "layers") or list(range(result.n_layers))
    state = widget.get_state(key=list(contract_traits(type(widget))))
    state["grown"] = {}  # the lists are saved whole: no step of a generation to apply
    if isinstance(result, LongAttentionResult):
        return _long_page_state(widget, result, layers, state, only_open_view)
    # The model view shows the included layers the page holds (all of them when none is).
    # only_open_view (the kernel's picture): what that view draws, no pass over every layer else.
    view = state["view"]
    included = [layer for layer in (widget.include_layers or range(result.n_layers)) if layer in layers]
    draws = VIEW[view].draws
    if not only_open_view or draws == "thumbnails":
        state["thumbnails"] = pl.thumbnails_payload(result, included or layers, widget.include_heads, widget._thumbnail_size)
    if not state["rollout"] and (not only_open_view or draws == "rollout"):
        state["rollout"] = rollout_for(token_result, widget._settings())
    source = state["attention"].get("source")  # the saved layers are the shown run's, as the kernel's are
    if state["layer"] not in layers:
        state["layer"] = layers[0]
        state["attention"] = pl.layer_payload(result, layers[0], source)
    state.update(request={}, error="")
    served: dict = {"attention": {str(layer): pl.layer_payload(result, layer, source) for layer in layers}}
    store = neuron_store(widget, token_result, layers) if not only_open_view or draws == "neuron" else None
    if store is not None:
        served["neuron"] = store
    return {"state": state, "served": served, "traits": page_traits(type(widget))}


def _long_page_state(widget: Any, result: Any, layers: list[int], state: dict, only_open_view: bool = False) -> dict:
    """A long run's page: T × T is never saved. It holds what the open layer shows (each head's
    and the mean's overview map, the rows from or to the selected token and the head view's window
    around it) as the kernel's answers to the views' requests, the model view's thumbnails of the
    saved layers, and the sink table; a generation's output tokens' rows too, sparse, so that a
    click on any of them replays its step (long_answers.step_rows, within a budget the notice
    says); zooming in or another selection says it needs the kernel.
    only_open_view: just what the open view draws for its head (the kernel's picture of it)."""
    if state["layer"] not in layers:
        state["layer"] = layers[0]
    layer, n = state["layer"], result.n_tokens
    included = [layer for layer in (widget.include_layers or range(result.n_layers)) if layer in layers]
    asks = VIEW[state["view"]].asks
    if not only_open_view or asks == "thumbnails":  # every head's whole map pooled: seconds at 8k tokens
        state["thumbnails"] = pl.long_thumbnails_payload(result, included or layers, widget.include_heads, widget._thumbnail_size,
                                                         widget.weigh_by)
    state.update(request={}, error="")
    requests = []
    for head in [state["focus_head"]] if only_open_view else range(-1, result.n_heads):
        requests += [
            ("attention_tile", {"layer": layer, "head": head, "rows": [0, n], "cols": [0, n],
                                "bins": min(OVERVIEW_BINS, n), "reduce": state["map_reduce"]}),
            ("attention_rows", {"layer": layer, "head": head, "token": state["focus_token"], "direction": state["direction"]}),
        ]
    requests.append(("attention_window", {"layer": layer, "token": state["focus_token"]}))
    if only_open_view:
        requests = [(type_, request) for type_, request in requests if type_ == asks]
    long_answers = LongAnswers.of(widget)
    answers = []
    for type_, request in requests:
        content, buffers = long_answers.handler(type_)(request)
        answers.append({"type": type_, "request": request, "content": content, "buffer": buffers[0]})
    served: dict = {"answers": answers}
    if state["output_start"] >= 0 and not only_open_view:  # a generation: its steps replay (long_answers.step_rows)
        served["steps"] = long_answers.steps(state["output_start"], layers)
        state["notice"] = "\n".join(line for line in (state["notice"], served["steps"]["note"]) if line)
    elif state["output_start"] >= 0 and asks == "thumbnails":
        # The picture of a generation's model view: the selected token's row, kept as a page keeps a step.
        served["steps"] = step_rows(long_answers.result, state["focus_token"], layers, kept_steps=1)
    return {"state": state, "served": served, "traits": page_traits(type(widget))}


def page_data(widget: Any, layers: list[int] | None = None) -> dict:
    """page_state as JSON, its binary parts base64-encoded beside it with their paths."""
    json_part, buffers = split_buffers(page_state(widget, layers))
    return {"json": json_part, "buffers": [{"path": path, "data": base64.b64encode(data).decode("ascii")} for path, data in buffers]}


def widget_html(widget: Any, layers: list[int] | None = None, title: str | None = None, fit: bool = False) -> str:
    """The page; `fit`: it fills a box of fixed size (widget.slide's iframe), and the open view fits into it."""
    bundle = STATIC / "standalone.js"
    if not bundle.is_file():
        raise FileNotFoundError(f"{bundle} is missing: build the front end (npm install && npm run build).")
    js = bundle.read_text(encoding="utf-8").replace("</script", "<\\/script")
    css = (STATIC / "standalone.css").read_text(encoding="utf-8").replace("</style", "<\\/style")
    tokens_title = "".join(widget.tokens[:12]).strip()
    return _PAGE.format(
        title=html.escape(_no_lone_surrogates(title or f"attnscope: {tokens_title}")),
        css=css,
        js=js,
        data=script_safe_json(page_data(widget, layers)),
        licenses=bundled_licenses(),
        uid=_page_uid(),
        body_attributes=' class="attnscope-fit-page"' if fit else "",
        fit="true" if fit else "false",
    )


def slide_html(widget: Any, height: int, layers: list[int] | None = None) -> str:
    """The widget's page as a self-contained iframe for slideshows (RISE), where widgets do not
    render: the standalone page goes in `srcdoc`, escaped as an attribute value, so it needs no
    widget manager, kernel comm or network; it fills the iframe's `height` and the open view fits
    into it (the model view shrinks its cells until every row shows). Wrapped in a div: IPython
    warns about a bare <iframe> string."""
    page = html.escape(widget_html(widget, layers, fit=True), quote=True)
    return (
        f'<div class="attnscope-slide-frame"><iframe class="attnscope-slide" srcdoc="{page}" '
        f'title="attnscope attention view" style="width: 100%; height: {int(height)}px; border: 0;">'
        "</iframe></div>"
    )


def bundled_licenses() -> str:
    """The licences of the third-party code in the page's script, as an HTML comment's text."""
    notices = (STATIC / "THIRD_PARTY_LICENSES.txt").read_text(encoding="utf-8")
    text = "attnscope (MIT licence). " + notices
    return re.sub("-(?=-)", "- ", text)  # a comment's text never holds "--" (nor so its end, "-->")
