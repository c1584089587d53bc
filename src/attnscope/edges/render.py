"""render_html: a text's views as one self-contained HTML page, without showing a widget first
(the CLI's `attnscope render` and scripts use it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..files import writable_path, write_atomic
from ..widget.attention_widget import AttentionWidget
from ..widget.export import widget_html


def render_html(
    text: str,
    text_b: str | None = None,
    model: Any = None,
    *,
    layers: list[int] | None = None,
    path: str | Path | None = None,
    view: str = "head",
    **kwargs: Any,
) -> str | Path:
    """A self-contained HTML page of the views for `text` (and `text_b`); written to `path` if given
    (a .html or .htm file: another suffix is refused before the model runs, none gets .html), and
    then the path written is returned, not the page: in a notebook the page's ~300 kB of source
    would fill the cell and the saved .ipynb."""

    if path is not None:
        writable_path("path", path, "html")
    widget = AttentionWidget(text, text_b, model, view=view, **kwargs)
    page = widget_html(widget, layers)
    if path is not None:
        return write_atomic(path, page, file_format="html")
    return page

