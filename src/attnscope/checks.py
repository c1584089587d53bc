"""Argument checks shared by every public entry point: each failure names the parameter and says
what is allowed, before any work is done (no ZeroDivisionError or OverflowError from deep inside)."""

from __future__ import annotations

import collections
import itertools
import math
import numbers
import operator
import os
import re
import reprlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import InputError


def is_integer(value: Any) -> bool:
    # bool is an int to Python, but `batch_size=True` is a mistake, not 1. NumPy and 0-d torch
    # integers are accepted (they have __index__); floats, even 2.0, are not.
    if type(value) is int:  # the common case, first: a page's list of a million heads is all ints
        return True
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
    if not is_integer(value):
        kind = f" ({type(value).__name__})" if isinstance(value, _PLAIN) else ""
        raise InputError(f"{name} must be a whole number, not {short_repr(value)}{kind}.")
    value = operator.index(value)
    if minimum is not None and value < minimum:
        raise InputError(f"{name}={value} is too small: it must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise InputError(f"{name}={value} is too large: it must be at most {maximum}.")
    return value


def flag(name: str, value: Any) -> bool:
    """A yes-or-no setting: True or False (NumPy's bools and the whole numbers 0 and 1 too); an
    array, a tensor or a string is refused by name (its truth is ambiguous, or not what was meant:
    progress="no" is true)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    if is_integer(value) and operator.index(value) in (0, 1):
        return bool(operator.index(value))
    raise InputError(f"{name} must be True or False, not {short_repr(value)}.")


def device_kind(value: Any) -> Any:
    """`value` when it can name a device (None, a str, or anything torch calls a device); what
    cannot (a list, a dict) is refused by name before it reaches a cache or torch."""
    if value is None or isinstance(value, str) or type(value).__name__ == "device":
        return value
    raise InputError(f"device must be 'cpu', 'cuda', 'cuda:1' or 'mps' (or a torch.device), not {short_repr(value)}.")


def one_of(value: Any, choices: Any) -> bool:
    """Whether `value` is one of the string `choices`: never True for another kind (a NumPy array's
    `==` is an array, whose truth raises; a dict is unhashable), so a caller's check says what it got."""
    return isinstance(value, str) and value in choices


def number(name: str, value: Any, minimum: float | None = None, maximum: float | None = None,
           allow_none: bool = False) -> float | None:
    """`value` as a finite float within [minimum, maximum] (None when allowed); InputError naming
    `name` otherwise: a str, a bool, an array, NaN and ±inf are refused by name."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        told = " (or None)" if allow_none else ""
        raise InputError(f"{name} must be a finite number{told}, not {short_repr(value)}.")
    if minimum is not None and value < minimum:
        raise InputError(f"{name}={value} is too small: it must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise InputError(f"{name}={value} is too large: it must be at most {maximum}.")
    return float(value)


def fraction(name: str, value: Any) -> float:
    """A number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
        raise InputError(f"{name} must be a number between 0 and 1, not {short_repr(value)}.")
    if not 0.0 <= float(value) <= 1.0:
        raise InputError(f"{name}={value} is outside [0, 1].")
    return float(value)


def indices(name: str, values: Any, count: int | None, what: str, allow_none: bool = True,
            from_end: bool = False) -> list[int] | None:
    """A list of distinct 0-based indices into `count` things (layers, heads), or None for all.
    count None: the range is checked later, once the model is known. from_end (with a count):
    -1 is the last, as Python counts (token positions), returned as the 0-based index.

    An empty list is refused (BertViz silently shows everything for include_layers=[]). The time
    taken is linear in the list and, when `count` is known, bounded by it: a list longer than
    `count` cannot be distinct and is refused from its size, before any element is read (a page
    may send a million heads)."""
    if values is None:
        if allow_none:
            return None
        raise InputError(f"{name} must list some {what}, not None.")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) and not hasattr(values, "__iter__"):
        raise InputError(f"{name} must be a list of {what.rstrip('s')} numbers, not {short_repr(values)}.")
    if count is not None:
        size = len(values) if hasattr(values, "__len__") else None
        # A generator is read no further than one past `count`: enough to know it is too long.
        values = list(itertools.islice(values, count + 1)) if size is None else values
        if (size if size is not None else len(values)) > count:
            _too_many(name, size, count, what)
    values = list(values)
    if not values:
        raise InputError(f"{name}=[] selects nothing; leave it out (None) to show all {what}.")
    bad_type = next((v for v in values if not is_integer(v)), _NONE)
    if bad_type is not _NONE:
        raise InputError(f"{name} must hold whole numbers; {short_repr(bad_type)} is not one.")
    values = [v if type(v) is int else operator.index(v) for v in values]
    lowest = -count if from_end and count is not None else 0
    bad = [v for v in values if v < lowest or count is not None and v >= count]
    if bad:
        numbered = f"0..{count - 1}" if count is not None else "from 0"
        back = f" (or -{count}..-1 from the end)" if lowest else ""
        raise InputError(f"{name} has {_listed(bad)} out of range: {what} are numbered {numbered}{back}.")
    if lowest:
        values = [v % count for v in values]
    repeated = sorted(v for v, n in collections.Counter(values).items() if n > 1)
    if repeated:
        raise InputError(f"{name} names {what} {_listed(repeated)} more than once.")
    return values


_NONE = object()


def _too_many(name: str, size: int | None, count: int, what: str) -> None:
    told = f"{size:,}" if size is not None else f"more than {count}"
    raise InputError(
        f"{name} lists {told} {what}, but there are only {count} ({what} 0..{count - 1}): "
        f"a list of distinct {what} is at most {count} long."
    )


def _listed(numbers: list[int], limit: int = 10) -> str:
    """[1, 2, 3], or its first `limit` and how many more."""
    if len(numbers) <= limit:
        return str(numbers)
    return f"[{', '.join(map(str, numbers[:limit]))}, … {len(numbers) - limit:,} more]"


_PLAIN = (str, bytes, bytearray, int, float, complex, list, tuple, dict, set, frozenset, type(None))


def kind_of(value: Any) -> str:
    """What `value` is, for a message: "None", "a str", "an AttentionWidget", "a DataFrame"."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def short_repr(value: Any, limit: int = 80) -> str:
    """A bad value as a message shows it: plain data (numbers, strings, lists) as its repr, cut to
    `limit` characters (a message never echoes a megabyte back); anything else (a model, a tensor,
    whose repr runs over many lines) by its kind."""
    if not isinstance(value, _PLAIN):
        return kind_of(value)
    text = repr(value) if isinstance(value, (int, float)) else reprlib.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


_SURROGATE = re.compile("[\ud800-\udfff]")


def first_surrogate(text: str) -> int | None:
    """The index of the first UTF-16 surrogate in `text` (half of a character), or None."""
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def surrogate_message(place: str, character: str) -> str:
    """Why a text with a surrogate at `place` ("text[2]", "CoNLL-U line 3, column 5") cannot be
    read, and how to mend it. The character is named by its escape: the message itself must stay
    encodable (a widget sends it to the page)."""
    return (
        f"{place} is '\\u{ord(character):04x}', a UTF-16 surrogate: half of a character, which no tokenizer reads "
        "(bytes decoded with errors='surrogateescape', or a JavaScript string cut in half?). "
        "text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace') joins split pairs and replaces the rest "
        "with U+FFFD."
    )


def text_of_characters(name: str, text: str) -> str:
    """`text` when every character of it is one (no lone surrogate); InputError naming `name` and
    the position otherwise. Linear in the text (a regex search: 1 ms a megabyte)."""
    index = first_surrogate(text)
    if index is not None:
        raise InputError(surrogate_message(f"{name}[{index}]", text[index]))
    return text


def displayable(tokens: list[str]) -> tuple[list[str], list[int]]:
    """Tokens given for display (precomputed attention): each lone surrogate replaced by U+FFFD,
    which the page can show and the comm can send; also the positions of the tokens changed."""
    changed = [i for i, token in enumerate(tokens) if first_surrogate(token) is not None]
    if not changed:
        return tokens, []
    tokens = list(tokens)
    for i in changed:
        tokens[i] = _SURROGATE.sub("\ufffd", tokens[i])
    return tokens, changed


_PACKAGE = Path(__file__).resolve().parent


def caller_stacklevel() -> int:
    """warnings.warn's stacklevel, for the function that calls this, that names the first frame
    outside attnscope: the user's line, however deep inside attnscope the warning is made."""
    frame, level = sys._getframe(1), 1
    while frame is not None and Path(frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def head_pair(pair: Any) -> tuple[int, int]:
    """(layer, head) as two whole numbers: (1.5, 2) is a mistake, not head (1, 2)."""
    if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
        raise InputError(f"Cannot mask head {short_repr(pair)}: heads to mask are (layer, head) pairs, e.g. "
                         "masked_heads=[(4, 2), (5, 11)].")
    return integer("masked head's layer", pair[0]), integer("masked head's head", pair[1])


def head_pairs(name: str, pairs: Any) -> list[tuple[int, int]]:
    """A list of (layer, head) pairs to mask (None: none); InputError naming `name` otherwise."""
    if pairs is None:
        return []
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, (Sequence, set, frozenset)) or _is_array(pairs):
        raise InputError(f"{name} must be a list of (layer, head) pairs, e.g. {name}=[(4, 2), (5, 11)], not {short_repr(pairs)}.")
    return [head_pair(pair) for pair in pairs]


def _is_array(value: Any) -> bool:
    return type(value).__module__.split(".")[0] in ("numpy", "torch")


# What a page sent (AttentionWidget.set_state): checked before traitlets sees it.


def page_names(names: list[str]) -> str:
    """Names a page sent, as a message may say them: a name that is not one (a surrogate, a
    megabyte) is quoted with escapes and cut."""
    return ", ".join(name if name.isidentifier() and len(name) <= 40 else ascii(name[:40]) for name in names)


def holds_a_bool(value: Any) -> bool:
    """Whether a (size-checked) value a page sent holds true or false anywhere."""
    if isinstance(value, bool):
        return True
    if isinstance(value, dict):
        return any(holds_a_bool(v) for v in value.values())
    return isinstance(value, (list, tuple)) and any(holds_a_bool(v) for v in value)


def values_in(value: Any, budget: int) -> int:
    """How many values `value` holds, its lists' and dicts' items counted through; the count
    stops once it passes `budget` (a page's message may hold millions)."""
    count, stack = 0, [value]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            item = [*item.keys(), *item.values()] if len(item) <= budget else range(budget + 1)
        if isinstance(item, (list, tuple, range)):
            if len(item) > budget:
                return budget + 1
            stack.extend(item)
    return count


def check_comparable(base: Any, tuned: Any, what: str = "attention_similarity") -> None:
    """Two models (AttentionModel) compared head by head, token by token (attention_similarity, the
    widget's compare=): they must read a text into the same tokens and have the same heads."""
    if (base.n_layers, base.n_heads) != (tuned.n_layers, tuned.n_heads):
        raise InputError(
            f"{what} compares a model with a copy of it: {base.name} has {base.n_layers} layers × "
            f"{base.n_heads} heads and {tuned.name} {tuned.n_layers} × {tuned.n_heads}."
        )
    if base.tokenizer.get_vocab() != tuned.tokenizer.get_vocab():
        raise InputError(
            f"{what} compares maps token by token, so both models need one tokenizer: "
            f"{base.name}'s vocabulary ({len(base.tokenizer)}) and {tuned.name}'s ({len(tuned.tokenizer)}) differ."
        )


def texts_given(text: str | None, text_b: str | None = None) -> None:
    """InputError for an empty text (or an empty text_b given): said by a run, and by the CLI
    before its model loads."""
    if text is None:
        raise InputError("The text is None: type a sentence to see its attention.")
    if not text.strip():
        raise InputError("The text is empty: type a sentence to see its attention.")
    if text_b is not None and not text_b.strip():
        raise InputError("text_b is empty: give a second sentence, or leave text_b out.")
