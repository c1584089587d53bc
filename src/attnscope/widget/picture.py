"""The picture a widget leaves in the notebook: the view it shows, as SVG, in an output of its own.

A saved notebook reopened without its kernel, GitHub, nbviewer, nbconvert without widget state and
jupyterlab-rise's slideshow show no live widget: there JupyterLab's widget renderer owns the
widget's own output and writes only its text form. So the widget displays a second output beside
its own, the picture, which the live view hides while it is on screen (widget.js) and which the
kernel redraws after a cell that changed what the widget shows.

The picture is drawn by the views' own scene code (js/picture.js) from the state a saved page
holds (export.page_state), run in QuickJS: the same drawing as the widget and its exports, with
no browser. At most PICTURE_BYTES a picture: what does not fit is left out, and the picture says
so (the head and model views keep their strongest lines, the text view fewer lines of text, the
neuron and rollout views and a long head view their first tokens). The open view's data alone
crosses into the engine, its bytes as text (_as_text): a 500-token view is pictured in about a
second on this 2-core machine.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import html
import json
import os
import threading
import time
import warnings
import weakref
from typing import Any

from ..engine.results import LongAttentionResult
from ..files import STATIC
from . import payloads as pl
from .contract import contract_traits
from .export import page_state, split_buffers, strict_json
from .messages import OVERVIEW_BINS
from .views import VIEW

# An output holds the SVG twice: base64 in an <img> of its text/html (JupyterLab, nbconvert,
# jupyterlab-rise) and as image/svg+xml (GitHub, nbviewer). 80 kB of SVG keeps it under 200 kB.
PICTURE_BYTES = 80_000
PICTURE_CLASS = "attnscope-picture"
PICTURE_STYLE = "max-width:100%;height:auto"

_LOCK = threading.Lock()  # QuickJS is thread-hostile: one call at a time


@functools.lru_cache(maxsize=1)
def _draw_function() -> Any:
    import quickjs

    context = quickjs.Context()
    context.eval((STATIC / "picture.js").read_text(encoding="utf-8"))
    return context.eval("(page, options, ...binaries) => JSON.stringify(attnscopePicture.picture(page, JSON.parse(options), binaries))")


def _page_of(widget: Any) -> tuple[dict, list[str]]:
    """The saved page's state that the open view's picture needs, as page_data gives it but with
    each binary part as the index of a string of bytes (_as_text) in the list beside."""

    draws = VIEW[widget.view].draws  # the model view's thumbnails: every layer; the others: the open one
    page = page_state(widget, None if draws == "thumbnails" else [widget.layer], only_open_view=True)
    # Only what the open view draws crosses into the engine: its binary parts are decoded there.
    for name in ("attention", "thumbnails", "rollout"):
        if name != draws:
            page["state"][name] = {}
    # The input box's text, which no picture draws (32,768 tokens: 0.4 MB to read), but a
    # generation's caption quotes what the model wrote from its end (output_tokens.generationSays):
    # that end only, at most as long as the output's readings (a line break reads as two characters).
    start, reading = getattr(widget, "output_start", -1), widget.token_reading
    tail = sum(map(len, reading[start:])) if 0 <= start <= len(reading) == len(widget.tokens) else 0
    page["state"]["text"] = widget.text[-tail:] if tail else ""
    page["served"] = {key: value for key, value in page["served"].items()
                      if (key == "neuron" and draws == "neuron") or key == "answers"
                      or (key == "steps" and draws == "thumbnails")}  # a generation's selected token's row
    json_part, buffers = split_buffers(page)
    parts = [{"path": path, "data": i} for i, (path, _) in enumerate(buffers)]
    return {"json": json_part, "buffers": parts}, [_as_text(data) for _, data in buffers]


def _as_text(data: bytes) -> str:
    """Bytes as a string of one character a byte, byte b as code point b + 1: the engine's strings
    end at a NUL, so no character may be 0."""
    import numpy as np

    return (np.frombuffer(bytes(data), dtype=np.uint8).astype("<u2") + 1).tobytes().decode("utf-16-le")


def picture_svg(widget: Any) -> tuple[str | None, str]:
    """(SVG of the widget's open view, "") or (None, why there is none)."""
    return _drawn(_read_page(widget))


def _read_page(widget: Any) -> tuple[dict, list[str]] | str:
    """What the drawing needs from the widget (read where the widget lives: the kernel's main
    thread), or why it cannot be drawn."""
    if not (STATIC / "picture.js").is_file():
        return "no picture: the JavaScript bundle is missing (npm run build)"
    try:
        _draw_function()
    except ImportError:
        return "no picture: the quickjs package is not installed"
    try:
        with _held(widget):
            return _refined_only(widget) or _page_of(widget)
    except Exception as exc:  # a failing picture must not fail the cell that shows the widget
        return _failed(exc)


def _held(widget: Any) -> Any:
    """A widget that another thread writes too (generation_widget.py) is read under its lock: one
    step's state whole."""
    return getattr(widget, "_state_lock", None) or contextlib.nullcontext()


def _refined_only(widget: Any) -> str:
    """Why a long run's open view has no picture where its numbers take more than one pass to make
    (the map's overview, the model view's thumbnails at tens of thousands of tokens: tens of
    seconds): the live view refines them pass by pass, and the kernel must not stop for them."""
    result, view = widget.token_result, widget.view
    if not isinstance(result, LongAttentionResult):
        return ""
    n, asks = result.n_tokens, VIEW[view].asks
    if asks == "thumbnails":
        passes = pl.thumbnail_passes(result, widget.include_layers, widget._thumbnail_size)
    elif asks == "attention_tile":
        passes = pl.tile_passes(result, widget.focus_head, [0, n], [0, n], min(OVERVIEW_BINS, n))
    else:
        return ""
    if passes == 1:
        return ""
    return (f"no picture: the {view} view of {n:,} tokens is refined in the live view in {passes} passes, too long to "
            "draw here; the text and head views' pictures are drawn (widget.view = 'text').")


def _drawn(page: tuple[dict, list[str]] | str) -> tuple[str | None, str]:
    """The SVG drawn from what _read_page read; any thread (QuickJS lets go of the GIL)."""
    if isinstance(page, str):
        return None, page
    state, binaries = page
    try:
        with _LOCK:
            answer = json.loads(_draw_function()(strict_json(state, ensure_ascii=True), json.dumps({"maxBytes": PICTURE_BYTES}), *binaries))
    except Exception as exc:
        return None, _failed(exc)
    if answer.get("error"):
        return None, f"no picture: {answer['error']}"
    return answer["svg"], ""


def _failed(exc: Exception) -> str:
    return f"no picture: drawing it failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def _hide_missing_widget_style(picture_id: str) -> str:
    """CSS that hides this picture's widget output when it says "Error displaying widget: model
    not found", as JupyterLab and Notebook 7 write into a widget output reopened without its
    kernel: the picture, right after it, stands in for the widget.

    JupyterLab keeps the <style> of a trusted output (a notebook the user saved and reopens); an
    untrusted notebook's widget output shows its text/plain instead, no error, and the sanitizer
    drops the style. The error node is the output itself, classed `jupyter-widgets`, with only
    text in it: a live view (elements inside) or "Loading widget..." (no class) never matches."""
    # (:has() may not nest, so the output is hidden, not the row around it.) The classic notebook
    # (nbclassic, classic RISE) writes its own sentence into an output_subarea of the same shape.
    picture = f".{PICTURE_CLASS}-{picture_id}"
    lab = f".jp-OutputArea-child:has(+ .jp-OutputArea-child {picture}) > .jp-OutputArea-output.jupyter-widgets:not(:has(*))"
    classic = f".output_area:has(+ .output_area {picture}) > .jupyter-widgets-view:not(:has(*))"
    return f"<style>{lab}, {classic} {{ display: none; }}</style>"


def picture_bundle(widget: Any, picture_id: str) -> dict[str, str]:
    """The picture output's mime bundle: the SVG as an image in HTML (tagged for the live view to
    hide) and as image/svg+xml, or a line saying why there is no picture; text/plain names the
    widget."""
    return _bundle(*picture_svg(widget), f"{widget!r}", picture_id)


def _bundle(svg: str | None, why: str, name: str, picture_id: str) -> dict[str, str]:
    if svg is not None:
        # An <img>, not inline SVG: JupyterLab's sanitizer (a reopened, untrusted notebook) strips
        # <svg> but keeps an image's data: source; the class names tell the live view which to hide.
        # No wider than the output, whatever its width: scaled down (the SVG has a viewBox), never cut.
        source = base64.b64encode(svg.encode("utf-8")).decode("ascii")
        body = f'<img src="data:image/svg+xml;base64,{source}" alt="{html.escape(name)}" style="{PICTURE_STYLE}">'
    else:
        body = f'<p style="color:#666">{html.escape(why)}</p>'
    bundle = {
        "text/plain": name + ("" if svg is not None else f" ({why})"),
        "text/html": f'{_hide_missing_widget_style(picture_id)}'
                     f'<div class="{PICTURE_CLASS} {PICTURE_CLASS}-{picture_id}">{body}</div>',
    }
    if svg is not None:
        bundle["image/svg+xml"] = svg
    return bundle


class PictureOutputs:
    """A widget's picture outputs, and when they are redrawn.

    - At display, and after a cell that changed what the widget shows (IPython's post_run_cell):
      - in a cell run from a notebook page (JupyterLab, Notebook 7: `page_loop`), drawn at once
        in a thread, last in line for the CPU, and published when done (about a second). Drawn in
        the cell, it held the kernel busy ~0.5–0.8 s after the widget was painted, and the user's
        first click waited for it (issue 45: 844 ms for a first layer switch);
      - elsewhere (nbconvert, papermill, a console: no page will show the widget), in the cell,
        so that the run's last cell and a save right after hold the picture of what was last seen.
    - After the page's own writes (a layer chosen in the view): once the widget has been quiet for
      QUIET_S, drawn in a thread. comm runs post_execute after every message a view sends, and a
      512-token head picture takes ~2 s on 2 cores: drawn there, it held the kernel busy, and
      ipywidgets sends a view's next change only once the kernel is idle (a layer switch in real
      JupyterLab waited 1–2 s for the last one's picture).
    - While `held` (a generation that is still writing), never in a cell a page sent: the run is
      new every step, and a drawing and its publication crossed the kernel's path to the page
      when each token must be drawn within 100 ms (at 8,160 tokens the first token's message took
      112 ms to reach the page). The run's end unholds it and asks for redraw_later.
    Holds its widget weakly: the shell's hook must not keep a closed widget alive."""

    QUIET_S = 1.5

    def __init__(self, widget: Any) -> None:
        self._widget = weakref.ref(widget)
        self.display_ids: list[str] = []
        self._key: str | None = None
        self._changed_at = 0.0
        self._timer: Any = None  # the event loop's handle of the next quiet check
        self._drawing = False
        self._published = 0  # publications so far: a thread's picture older than the last is dropped
        self._shell: Any = None
        self.held = False  # a run still being written: drawn once it is not (then redraw_later)

    def display(self, shell: Any) -> None:
        from IPython.display import display

        widget = self._widget()
        display_id = f"attnscope-picture-{widget.picture_id}-{len(self.display_ids)}"
        loop = page_loop()
        if loop is None:
            self._key = picture_key(widget)
            self._published += 1
            display(picture_bundle(widget, widget.picture_id), raw=True, display_id=display_id)
        else:  # (not a publication: a drawing under way still updates every output, this one too)
            note = DRAWN_AT_END if self.held else DRAWN_NEXT
            display(_bundle(None, note, f"{widget!r}", widget.picture_id), raw=True, display_id=display_id)
        if not self.display_ids and shell is not None:
            self._shell = shell
            shell.events.register("post_run_cell", self._after_cell)
        self.display_ids.append(display_id)
        if loop is not None:
            self._key = None  # drawn next: whatever the widget shows differs from the sentence shown
            self._draw_in_background(loop)

    def _after_cell(self, *_result: Any) -> None:
        widget = self._widget()
        if widget is None or widget._closed:
            self._shell.events.unregister("post_run_cell", self._after_cell)
            return
        self._cancel()
        try:
            key = picture_key(widget)
            if key == self._key:
                return
            loop = page_loop()
            if loop is None:
                self._publish(key, picture_bundle(widget, widget.picture_id))
            else:
                self._say_redrawing()
                if not self._drawing:  # else the drawing under way redraws when it ends (`drawn`)
                    self._draw_in_background(loop)
        except Exception as exc:  # a picture must never break the user's next cell
            warnings.warn(f"attnscope: the widget's picture was not redrawn: {exc}", stacklevel=1)

    def redraw_later(self) -> None:
        """After a page's write: redraw once the widget has been quiet for QUIET_S (outside a
        running event loop, as in plain Python, the next cell redraws it)."""
        if not self.display_ids:
            return
        self._changed_at = time.monotonic()
        self._say_redrawing()
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._timer = loop.call_later(self.QUIET_S, self._when_quiet, loop)

    def _say_redrawing(self) -> None:
        """The picture of what the view showed before a change, replaced at once by a line saying
        it is being redrawn: a notebook saved in the second or two before the new one is published
        showed the old tab or layer as if it were the saved view. (The live view hides the line.)"""
        widget = self._widget()
        if self._key is None or self.held or widget is None:  # a line is shown already, or the run's end redraws
            return
        self._publish(None, _bundle(None, REDRAWING, f"{widget!r}", widget.picture_id))

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _when_quiet(self, loop: Any) -> None:
        self._timer = None
        widget = self._widget()
        if widget is None or widget._closed:
            return
        wait = self._changed_at + self.QUIET_S - time.monotonic()
        if wait > 0 or self._drawing:
            self._timer = loop.call_later(max(wait, self.QUIET_S / 4), self._when_quiet, loop)
            return
        self._draw_in_background(loop)

    def _draw_in_background(self, loop: Any) -> None:
        """Draws what the widget shows now in a thread, last in line for the CPU, and publishes it
        on the kernel's loop; when the widget has changed meanwhile, draws again once it is quiet."""
        if self.held:
            return
        widget = self._widget()
        key = picture_key(widget)
        if key == self._key or self._drawing:  # (a drawing under way draws again when it ends if the key moved on)
            return
        # Read on this (the kernel's) thread, drawn on another: the widget is never read mid-change.
        page, name, published = _read_page(widget), f"{widget!r}", self._published
        self._drawing = True

        def draw() -> None:
            # Last in line for the CPU: a user's next click, the kernel's answer and the browser first.
            behind_the_page(threading.get_native_id(), idle=True)
            try:
                bundle = _bundle(*_drawn(page), name, widget.picture_id)
            except Exception as exc:
                bundle = _bundle(None, _failed(exc), name, widget.picture_id)
            loop.call_soon_threadsafe(drawn, bundle)

        def drawn(bundle: dict) -> None:
            self._drawing = False
            if published == self._published and not widget._closed:  # else a cell's redraw came first
                self._publish(key, bundle)
            if picture_key(widget) != self._key:
                self.redraw_later()

        threading.Thread(target=draw, name="attnscope-picture", daemon=True).start()

    def _publish(self, key: str | None, bundle: dict) -> None:
        from IPython.display import update_display

        self._key = key
        self._published += 1
        for display_id in self.display_ids:
            update_display(bundle, raw=True, display_id=display_id)


# What a picture output says until its drawing, started at display, is published (about a second
# later). The live view hides it: only a notebook saved within that second shows it, reopened.
DRAWN_NEXT = "no picture yet: the notebook was saved while it was being drawn; run the cell again to keep one"
DRAWN_AT_END = "no picture yet: the notebook was saved while the model was writing; it is drawn when the run ends"
REDRAWING = ("no picture yet: the notebook was saved while the picture of the view's last change was being drawn "
             "(a second or two); save again to keep it")


def page_loop() -> Any:
    """The kernel's running event loop when the cell being run was sent by a notebook page that
    shows widgets itself (JupyterLab and Notebook 7 send the cell's id with it; nbconvert,
    papermill and consoles do not), else None."""
    try:
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
        request = kernel.get_parent("shell") if kernel is not None else None
        if not (isinstance(request, dict) and (request.get("metadata") or {}).get("cellId")):
            return None
        return asyncio.get_running_loop()
    except (ImportError, RuntimeError, TypeError, AttributeError):
        return None


def behind_the_page(thread_id: int, *, idle: bool) -> None:
    """Puts a kernel thread's work behind the page's: the browser, the Jupyter server and the
    kernel's own answers to the page come first on a 2-core machine. idle: Linux's idle scheduling
    class (the thread runs only on a core nothing else wants; at nice 19 it still gets slices
    beside torch's threads, which wait for each other at every op); else nice 5 (it keeps a fair
    share under load: a generation must go on while others compute). Threads it starts (torch's
    OpenMP workers are made per thread that starts a parallel region) inherit it. Nothing
    elsewhere than Linux (and macOS's niceness)."""
    if idle:
        try:
            os.sched_setscheduler(thread_id, os.SCHED_IDLE, os.sched_param(0))
            return
        except (AttributeError, OSError):
            pass
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, thread_id, 19 if idle else max(5, os.getpriority(os.PRIO_PROCESS, thread_id)))


def picture_key(widget: Any) -> str:
    """What a widget's picture depends on: every synced trait but the binary payloads (the run's
    id stands for those)."""
    skip = {"attention", "thumbnails", "rollout", "request", "error", "picture_id"}
    with _held(widget):
        state = {name: getattr(widget, name) for name in contract_traits(type(widget)) if name not in skip}
    return json.dumps(state, sort_keys=True, default=str)


def display_with_picture(widget: Any, **kwargs: Any) -> None:
    """A widget's display (its _ipython_display_): the widget, and its picture beside it, for
    what a saved notebook shows where no widget renders. The BertViz-style functions display their
    widget at once (BertViz's do, even mid-cell) and return it; when such a call is the cell's
    last line, its echo must not draw it twice (`shown`)."""
    from IPython import get_ipython
    from IPython.display import display

    shell = get_ipython()
    if shell is not None and getattr(widget, "_displayed_in_cell", None) == shell.execution_count:
        widget._displayed_in_cell = None
        return
    bundle = widget._repr_mimebundle_(**kwargs)
    data, metadata = bundle if isinstance(bundle, tuple) else (bundle, None)  # anywidget adds metadata
    display(data, metadata=metadata, raw=True)
    widget._pictures.display(shell)


def shown(widget: Any) -> Any:
    """Display the widget now, wherever the call is (mid-cell, assigned, in a loop), and return it;
    when the call is also the cell's last line, the echo of the returned widget is not drawn a
    second time (`_ipython_display_`). Outside IPython there is nothing to display it in."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return widget
    shell = get_ipython()
    if shell is None:
        return widget
    display(widget)
    widget._displayed_in_cell = shell.execution_count
    return widget
