"""The picture a widget leaves in the notebook: the view it shows, as SVG, in an output of its own.

A saved notebook reopened without its kernel, GitHub, nbviewer, nbconvert without widget state and
jupyterlab-rise's slideshow show no live widget: there JupyterLab's widget renderer owns the
widget's own output and writes only its text form. So the widget displays a second output beside
its own, the picture, which the live view hides while it is on screen (widget.js) and which the
kernel redraws after a cell that changed what the widget shows.

The picture is drawn by the views' own scene code (js/picture.js) from the state a saved page
holds (export.page_state), run in QuickJS: the same drawing as the widget and its exports, with
no browser. At most PICTURE_BYTES a picture: a head view with many lines keeps its strongest and
says so in the picture.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import threading
from pathlib import Path
from typing import Any

STATIC = Path(__file__).parent / "static"
# An output holds the SVG twice: base64 in an <img> of its text/html (JupyterLab, nbconvert,
# jupyterlab-rise) and as image/svg+xml (GitHub, nbviewer). 80 kB of SVG keeps it under 200 kB.
PICTURE_BYTES = 80_000
PICTURE_CLASS = "attnscope-picture"

_LOCK = threading.Lock()  # QuickJS is thread-hostile: one call at a time


@functools.lru_cache(maxsize=1)
def _draw_function() -> Any:
    import quickjs

    context = quickjs.Context()
    context.eval((STATIC / "picture.js").read_text(encoding="utf-8"))
    return context.eval("(page, options) => JSON.stringify(attnscopePicture.picture(page, JSON.parse(options)))")


def _page_of(widget: Any) -> dict:
    """The saved page's state that the picture needs: the open layer's attention (the model view
    and the analyses' hover: every included layer's thumbnails), as page_data gives it."""
    import base64

    from .export import page_state, split_buffers

    every_layer = widget.view in ("model", "analysis") and not widget.long_context
    page = page_state(widget, None if every_layer else [widget.layer])
    attention = page["served"].get("attention")
    if attention:
        page["served"]["attention"] = {key: value for key, value in attention.items() if key == str(widget.layer)}
    json_part, buffers = split_buffers(page)
    return {"json": json_part, "buffers": [{"path": path, "data": base64.b64encode(data).decode("ascii")} for path, data in buffers]}


def picture_svg(widget: Any) -> tuple[str | None, str]:
    """(SVG of the widget's open view, "") or (None, why there is none)."""
    if not (STATIC / "picture.js").is_file():
        return None, "no picture: the JavaScript bundle is missing (npm run build)"
    try:
        draw = _draw_function()
    except ImportError:
        return None, "no picture: the quickjs package is not installed"
    page = json.dumps(_page_of(widget))
    with _LOCK:
        answer = json.loads(draw(page, json.dumps({"maxBytes": PICTURE_BYTES})))
    if answer.get("error"):
        return None, f"no picture: {answer['error']}"
    return answer["svg"], ""


def picture_bundle(widget: Any, picture_id: str) -> dict[str, str]:
    """The picture output's mime bundle: the SVG as an image in HTML (tagged for the live view to
    hide) and as image/svg+xml, or a line saying why there is no picture; text/plain names the
    widget."""
    svg, why = picture_svg(widget)
    name = f"{widget!r}"
    if svg is not None:
        # An <img>, not inline SVG: JupyterLab's sanitizer (a reopened, untrusted notebook) strips
        # <svg> but keeps an image's data: source; the class names tell the live view which to hide.
        source = base64.b64encode(svg.encode("utf-8")).decode("ascii")
        body = f'<img src="data:image/svg+xml;base64,{source}" alt="{html.escape(name)}" style="max-width:none">'
    else:
        body = f'<p style="color:#666">{html.escape(why)}</p>'
    bundle = {
        "text/plain": name + ("" if svg is not None else f" ({why})"),
        "text/html": f'<div class="{PICTURE_CLASS} {PICTURE_CLASS}-{picture_id}" style="overflow-x:auto">{body}</div>',
    }
    if svg is not None:
        bundle["image/svg+xml"] = svg
    return bundle
