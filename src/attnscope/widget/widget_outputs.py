"""What a widget writes out of the notebook: an image of its view (drawn by the page), a
self-contained offline HTML page, and a slide (that page in an iframe) for slideshows. A mixin of
AttentionWidget: it reads the widget's channel and its page state (export.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import checks
from ..errors import InputError
from ..files import ImageRequest, writable_path, write_atomic
from .export import slide_html, widget_html


class WidgetOutputs:
    """save_image, save_html and slide (AttentionWidget's)."""

    def save_image(self, path: str | Path) -> ImageRequest:
        """Save the current view as PNG or SVG (by the file's suffix), drawn by the widget's view.

        The browser draws the image, so the widget must be displayed. The file is written when the
        view answers, which is right after the cell finishes (a kernel cannot wait for its front
        end in mid-cell); the returned request says when it is done (`.done`, `.error`).
        """
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"save_image writes to a path (a str or a pathlib.Path), not {checks.short_repr(path)}.")
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
        path = writable_path("path", path, "html")  # a path that would replace another kind of file: before any work
        return write_atomic(path, widget_html(self, layers), file_format="html")

    def slide(self, height: int = 560, layers: list[int] | None = None) -> Any:
        """This view as a self-contained iframe for slideshows (RISE), where widgets do not render
        (export.slide_html: the standalone page in `srcdoc`; the open view fits its `height`)."""
        from IPython.display import HTML

        return HTML(slide_html(self, checks.integer("height", height, minimum=100), layers))
