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
from pathlib import Path
from typing import Any

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
<div id="attnscope"></div>
<script type="application/json" id="attnscope-data">{data}</script>
<script>{js}</script>
<script>
attnscopeStandalone.mount(document.getElementById("attnscope"),
  JSON.parse(document.getElementById("attnscope-data").textContent));
</script>
</body>
</html>
"""


def script_safe_json(value: Any) -> str:
    """JSON that cannot end or open markup inside a <script> element."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace(
        "\u2028", "\\u2028"
    ).replace("\u2029", "\\u2029")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def page_data(widget: Any, layers: list[int] | None = None) -> dict:
    """Everything the static page needs: the widget's view state, the chosen layers, q and k."""
    result = widget.result
    layers = list(range(result.n_layers)) if layers is None else list(layers)
    bad = [layer for layer in layers if not 0 <= layer < result.n_layers]
    if not layers or bad:
        raise ValueError(f"layers must name some of 0..{result.n_layers - 1}; got {layers}.")
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
        title=html.escape(title or f"attnscope: {tokens_title}"),
        css=css,
        js=js,
        data=script_safe_json(page_data(widget, layers)),
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
        Path(path).write_text(page, encoding="utf-8")
    return page
