"""A write from the page, as untrusted input: the page may set only the traits the contract lets
a view write, sizes are checked before traitlets checks items, each value is checked against the
kernel's own run, and a write that fails or is interrupted is put back whole, on both sides, with
the reason in `error`. Nothing escapes to the comm."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traitlets import Bool, Dict

from .. import checks
from ..errors import AttnscopeError
from .contract import page_writable
from .messages import interruptible


def take_page_write(widget: Any, sync_data: dict, set_traits: Callable[[dict], None]) -> None:
    """A write from the page to `widget` (ipywidgets calls its set_state for each update a view
    sends); `set_traits` sets what passes the checks, as traitlets would."""
    if widget._closed or not isinstance(sync_data, dict):
        return
    writable = page_writable(type(widget))
    refused = sorted(name for name in sync_data if name not in writable)
    messages = [f"The page may not set {checks.page_names(refused)}: only the kernel does; ignored."] if refused else []
    # Sizes first: the longest list a view writes is one of every head (masked_heads), so a
    # write of millions is refused before traitlets checks its items one by one.
    budget = 4 * widget._shown_count("n_layers") * widget._shown_count("n_heads") + 64
    too_big = sorted(name for name in sync_data if name in writable and checks.values_in(sync_data[name], budget) > budget)
    if too_big:
        messages.append(f"The page sent more values in {checks.page_names(too_big)} than this model has heads; ignored.")
        refused += too_big
    # true is not 1 here: traitlets' Int takes a bool, and stores one equal to the old value
    # (layer 0, false) without checking it at all. (A dict's own check names its fields: an edit,
    # {} between edits, and the finder's choice, whose parts are never numbers, are always checked.)
    booleans = sorted(name for name in sync_data if name in writable and name not in too_big
                      and not isinstance(widget.traits()[name], (Bool, Dict)) and checks.holds_a_bool(sync_data[name]))
    if booleans:
        messages.append(f"The page sent true or false for {checks.page_names(booleans)}, which takes numbers; ignored.")
        refused += booleans
    state = {name: value for name, value in sync_data.items() if name in writable and name not in refused}
    # A value Python takes as equal to the kernel's ({"layer": true} for {"layer": 1}) is stored
    # unchecked, as above, for any trait: it changes nothing, so it is not taken, and the page's
    # copy is set back to the kernel's own.
    unchanged = [name for name, value in state.items() if value == getattr(widget, name)]
    other_kinds = sorted(name for name in unchanged if not _same_kinds(state.pop(name), getattr(widget, name)))
    if other_kinds:
        messages.append(f"The page sent true or false for a number in {checks.page_names(other_kinds)}; ignored.")
        refused += other_kinds
    snapshot = widget._snapshot()
    try:
        with interruptible():  # the kernel's interrupt stops a slow step, whenever the write came
            set_traits(state)
    except BaseException as exc:
        widget._restore(snapshot)  # the whole widget: one trait's work may have moved others
        messages.append("Interrupted: the view was put back as it was." if isinstance(exc, KeyboardInterrupt) else
                        str(exc) if isinstance(exc, AttnscopeError) else f"{type(exc).__name__}: {exc}")
        refused += list(state)
        if not isinstance(exc, (Exception, KeyboardInterrupt)):
            raise  # SystemExit and the like are not the page's doing
    # The page's copy of what was refused or put back is the kernel's again.
    resend = [name for name in refused if name in widget.keys]
    if resend:
        widget.send_state(resend)
    # A page's refused write is said until the next write that works (an edit's error stays:
    # the editor keeps the failed text while it shows).
    said = " ".join(messages)
    if said or widget.error == widget.__dict__.get("_write_error"):
        widget._quietly(error=said)
    widget._write_error = said
    widget._pictures.redraw_later()


def _same_kinds(a: Any, b: Any) -> bool:
    """Whether equal values `a` and `b` are also of the same kinds throughout (true is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return all(_same_kinds(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)):
        return all(_same_kinds(x, y) for x, y in zip(a, b, strict=True))
    return True
