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
import re
import secrets
from pathlib import Path
from typing import Any

from . import checks
from .files import write_atomic
from .serialize import display_tokens, encode_float16, pool_thumbnails, quantize_uint8

STATIC = Path(__file__).parent / "static"

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<div id="attnscope-{uid}" class="attnscope-page"></div>
<script type="application/json" id="attnscope-data-{uid}">{data}</script>
<script>{js}</script>
<script>
attnscopeStandalone.mount(document.getElementById("attnscope-{uid}"),
  JSON.parse(document.getElementById("attnscope-data-{uid}").textContent));
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


def script_safe_json(value: Any) -> str:
    """JSON that cannot end or open markup inside a <script> element."""
    text = json.dumps(value, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace(
        "\u2028", "\\u2028"
    ).replace("\u2029", "\\u2029")
    # A lone surrogate (only JSON strings can hold one) as its \\u escape: the page stays encodable
    # as UTF-8 and JSON.parse gives the browser the same token text back.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def page_data(widget: Any, layers: list[int] | None = None) -> dict:
    """Everything the static page needs: the widget's view state, the chosen layers, q and k."""
    result = widget.result
    layers = checks.indices("layers", layers, result.n_layers, "layers") or list(range(result.n_layers))
    layer = widget.layer if widget.layer in layers else layers[0]
    state = {
        name: getattr(widget, name)
        for name in (
            "tokens", "sentence_b_start", "n_layers", "causal", "n_heads", "model_name", "heads", "sentence_filter",
            "theme", "text", "text_b", "result_id", "notice", "view", "neuron_head", "neuron_query",
        )
    }
    state.update(layer=layer, error="", request={}, has_queries_keys=result.queries is not None, thumbnails={},
                 # One part of an encoder-decoder model is saved: its key tokens, no part selector.
                 key_tokens=widget.key_tokens, parts=[], attention_part=widget.attention_part)
    if state["view"] not in ("head", "model", "neuron"):
        state["view"] = "head"  # the standalone page has the three BertViz views
    attention = [quantize_uint8(result.attention[i]) for i in layers]
    data = {
        "state": state,
        "attention": {
            "layers": layers,
            "shape": attention[0]["shape"],
            "scale": attention[0]["scale"],
            "data": [_b64(a["data"]) for a in attention],
        },
    }
    heads = list(range(result.n_heads))
    pooled = quantize_uint8(pool_thumbnails(result.attention[layers], widget._thumbnail_size))
    data["thumbnails"] = {"layers": layers, "heads": heads, "n_tokens": len(result.tokens), "dtype": "uint8",
                          "shape": pooled["shape"], "scale": pooled["scale"], "data": _b64(pooled["data"])}
    if result.queries is not None:
        queries = encode_float16(result.queries[layers])
        keys = encode_float16(result.keys[layers])
        data["neuron"] = {"layers": layers, "shape": queries["shape"], "key_shape": keys["shape"], "scaling": result.scaling,
                          "causal": result.causal, "queries": _b64(queries["data"]), "keys": _b64(keys["data"])}
        if result.score_bias is not None:  # T5's position bias, added to every score
            data["neuron"]["bias"] = _b64(encode_float16(result.score_bias[layers])["data"])
    return data


def widget_html(widget: Any, layers: list[int] | None = None, title: str | None = None) -> str:
    bundle = STATIC / "standalone.js"
    if not bundle.is_file():
        raise FileNotFoundError(f"{bundle} is missing: build the front end (npm install && npm run build).")
    js = bundle.read_text(encoding="utf-8").replace("</script", "<\\/script")
    css = (STATIC / "standalone.css").read_text(encoding="utf-8").replace("</style", "<\\/style")
    tokens_title = " ".join(display_tokens(widget.result.tokens[:12]))
    return _PAGE.format(
        title=html.escape(_no_lone_surrogates(title or f"attnscope: {tokens_title}")),
        css=css,
        js=js,
        data=script_safe_json(page_data(widget, layers)),
        uid=_page_uid(),
    )


def render_html(
    text: str,
    text_b: str | None = None,
    model: Any = None,
    *,
    layers: list[int] | None = None,
    path: str | Path | None = None,
    view: str = "head",
    **kwargs: Any,
) -> str:
    """A self-contained HTML page of the views for `text` (and `text_b`); written to `path` if given."""
    from .widget import AttentionWidget

    widget = AttentionWidget(text, text_b, model, view=view, **kwargs)
    page = widget_html(widget, layers)
    if path is not None:
        write_atomic(path, page)
    return page
