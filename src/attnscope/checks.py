"""Argument checks shared by every public entry point: each failure names the parameter and says
what is allowed, before any work is done (no ZeroDivisionError or OverflowError from deep inside)."""

from __future__ import annotations

import numbers
import operator
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import InputError


def _is_integer(value: Any) -> bool:
    # bool is an int to Python, but `batch_size=True` is a mistake, not 1. NumPy and 0-d torch
    # integers are accepted (they have __index__); floats, even 2.0, are not.
    if isinstance(value, bool) or isinstance(value, float):
        return False
    if isinstance(value, numbers.Integral):
        return True
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def integer(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """`value` as an int within [minimum, maximum]; InputError naming `name` otherwise."""
    if not _is_integer(value):
        raise InputError(f"{name} must be a whole number, not {value!r} ({type(value).__name__}).")
    value = operator.index(value)
    if minimum is not None and value < minimum:
        raise InputError(f"{name}={value} is too small: it must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise InputError(f"{name}={value} is too large: it must be at most {maximum}.")
    return value


def fraction(name: str, value: Any) -> float:
    """A number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
        raise InputError(f"{name} must be a number between 0 and 1, not {value!r}.")
    if not 0.0 <= float(value) <= 1.0:
        raise InputError(f"{name}={value} is outside [0, 1].")
    return float(value)


def indices(name: str, values: Any, count: int | None, what: str, allow_none: bool = True) -> list[int] | None:
    """A list of distinct 0-based indices into `count` things (layers, heads), or None for all.
    count None: the range is checked later, once the model is known.

    An empty list is refused (BertViz silently shows everything for include_layers=[])."""
    if values is None:
        if allow_none:
            return None
        raise InputError(f"{name} must list some {what}, not None.")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) and not hasattr(values, "__iter__"):
        raise InputError(f"{name} must be a list of {what} numbers, not {values!r}.")
    values = list(values)
    if not values:
        raise InputError(f"{name}=[] selects nothing; leave it out (None) to show all {what}.")
    bad_type = [v for v in values if not _is_integer(v)]
    if bad_type:
        raise InputError(f"{name} must hold whole numbers; {bad_type[0]!r} is not one.")
    values = [operator.index(v) for v in values]
    bad = [v for v in values if v < 0 or count is not None and v >= count]
    if bad:
        numbered = f"0..{count - 1}" if count is not None else "from 0"
        raise InputError(f"{name} has {bad} out of range: {what} are numbered {numbered}.")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise InputError(f"{name} names {what} {repeated} more than once.")
    return values


def existing_file(value: Any) -> Path | None:
    """`value` as a Path when it names an existing file or directory, else None.

    Never raises on long text or odd characters (a sentence is not a file name: `Path.exists`
    itself raises "File name too long" for a long one)."""
    if not isinstance(value, (str, os.PathLike)):
        return None
    text = os.fspath(value)
    if not text or "\n" in text or "\0" in text:
        return None
    try:
        path = Path(text).expanduser()
        return path if path.exists() else None
    except (OSError, ValueError):
        return None


def looks_like_path(text: str, suffixes: Sequence[str] = ()) -> bool:
    """A one-line string written the way file paths are (so "no such file" is the helpful error)."""
    if "\n" in text or "\t" in text or len(text) > 4096:
        return False
    stripped = text.strip()
    if stripped.startswith(("/", "./", "../", "~", "\\")) or (len(stripped) > 2 and stripped[1] == ":" and stripped[2] in "\\/"):
        return True
    return any(stripped.lower().endswith(s) for s in suffixes) and " " not in stripped
