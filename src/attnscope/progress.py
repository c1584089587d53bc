"""Progress bars that leave a line of text, not a widget, in the notebook.

In a notebook tqdm draws its bar as an ipywidget. A saved notebook reopened without its kernel
shows such an output as "Error displaying widget: model not found", and nothing else where the
bar was a cell's only output (every corpus analysis). So the bar is displayed in an output this
module owns, and when the loop ends (done, failed or interrupted) that output is replaced by the
bar's last line as plain text, and the bar's widgets are closed. Outside a notebook: tqdm's text
bar, as tqdm.auto picks it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
_loops = 0  # loops whose bar is showing now


def progress(iterable: Iterable[T], total: int | None, desc: str, show: bool = True, unit: str = "batch") -> Iterator[T]:
    """Iterate over `iterable` with a progress bar (none when `show` is False). While it runs, the
    runs inside it add no bars of their own (`counter`), whether this one shows or not."""
    global _loops
    _loops += 1
    try:
        if not show:
            yield from iterable
            return
        bar = _bar(iterable, total=total, desc=desc, unit=unit)
        try:
            yield from bar
        finally:
            # A generator's finally runs on the loop's end, on an error inside it, and when the loop
            # that consumes it is left (break, or an error in its body, once the generator is freed).
            bar.close()
    finally:
        _loops -= 1


def counter(total: int, desc: str, unit: str) -> Any:
    """A bar advanced by hand (`.update(1)`, then `.close()`), for work that is not a loop of
    ours (a forward pass's layers, counted by hooks); None inside a loop's bar (an analysis's
    documents), which already says how far the work is."""
    return None if _loops else _bar(None, total=total, desc=desc, unit=unit)


def _bar(iterable: Iterable[Any] | None, **kwargs: Any) -> Any:
    from tqdm.auto import tqdm as chosen
    from tqdm.std import tqdm as text_bar

    try:
        from tqdm.notebook import tqdm_notebook
    except ImportError:  # no ipywidgets: tqdm.auto chose the text bar
        return chosen(iterable, **kwargs)
    if not issubclass(chosen, tqdm_notebook):
        return chosen(iterable, **kwargs)
    return _notebook_bar_class(tqdm_notebook, text_bar)(iterable, **kwargs)


def _notebook_bar_class(tqdm_notebook: type, text_bar: type) -> type:
    class NotebookBar(tqdm_notebook):  # type: ignore[misc, valid-type]
        """tqdm's notebook bar in a display of its own, which ends as the bar's text."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            from IPython.display import display

            super().__init__(*args, display=False, **kwargs)
            self._handle = None if self.disable else display(self.container, display_id=True)

        def close(self) -> None:
            handle, self._handle = getattr(self, "_handle", None), None
            super().close()
            if handle is None:
                return
            handle.update({"text/plain": _last_line(text_bar, self.format_dict)}, raw=True)
            for widget in (*self.container.children, self.container):
                widget.close()

    return NotebookBar


@contextmanager
def status(doing: str, done: str) -> Iterator[None]:
    """A line saying what the kernel is doing while the block runs (loading a model by name takes
    tens of seconds, and an empty output reads as a hang), in a notebook's kernel only (a script's
    user sees their own prints). It ends as `done` and the time taken ("attnscope: loaded smollm2
    in 12.3 s"), as a bar ends as its text: emptied, it left a blank output in the cell. A block
    that fails says so, above the error ("did not finish" read as a hang beside a misspelt name's
    refusal at once)."""
    handle = None
    try:
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and getattr(shell, "kernel", None) is not None:
            handle = display({"text/plain": doing}, raw=True, display_id=True)
    except ImportError:  # no IPython: not in a notebook
        handle = None
    start, finished = time.perf_counter(), False
    try:
        yield
        finished = True
    finally:
        if handle is not None:
            line = f"{done} in {time.perf_counter() - start:.1f} s" if finished else f"{doing.rstrip('…')} stopped on the error below"
            handle.update({"text/plain": line}, raw=True)


def _last_line(text_bar: type, meter: dict) -> str:
    """tqdm's own text line ("desc: 100%|██████████| 12/12 [00:03<00:00, 3.5batch/s]"), in 80
    columns where its counts and times fit beside the description; else whole, with a bar of 10
    (80 columns cut a long description's line to "... 30/30 [00:24<00")."""
    fitted = text_bar.format_meter(**{**meter, "ncols": 80})
    whole = text_bar.format_meter(**{**meter, "ncols": None})
    return fitted if fitted.rpartition("|")[2] == whole.rpartition("|")[2] else whole
