"""The reader's choice in the head finder's plot (the widget's analysis_choice), checked against
the finder shown: the check its module declares (`@analysis_view(..., check_choice=finder_choice)`),
which the widget asks the registry for (tables.check_choice)."""

from __future__ import annotations

import re

from .. import checks
from ..errors import InputError
from ..labels import head_label

FILTER_CHARACTERS = 2000  # the longest filter taken (HeadFinder.find, and the widget's analysis_choice)
FINDER_PARTS = ("x", "y", "color", "filter", "head")
_HEAD_LABEL = re.compile(r"([0-9]{1,6})-([0-9]{1,6})")


def finder_choice(choice: dict, analysis: dict) -> dict:
    """`choice` when it holds only the head finder's plot parts (FINDER_PARTS, each optional) and
    each names what the shown finder (`analysis`, the widget's analysis payload) has: x, y and
    color one of its metrics, filter a string of at most FILTER_CHARACTERS, head a head of its
    model as its label ("2-5") or None. {} (the defaults) always holds. InputError saying what does
    not hold."""
    if not choice:
        return choice
    unknown = [key for key in choice if key not in FINDER_PARTS]
    if unknown:
        raise InputError(f"analysis_choice holds the head finder's {', '.join(FINDER_PARTS)}, not {checks.short_repr(unknown)}.")
    metrics = [m["key"] for m in analysis["measures"]]
    for part in ("x", "y", "color"):
        if part in choice and (not isinstance(choice[part], str) or choice[part] not in metrics):
            raise InputError(f"analysis_choice's {part} must name one of the finder's metrics ({', '.join(metrics)}), "
                             f"not {checks.short_repr(choice[part])}.")
    text = choice.get("filter", "")
    if not isinstance(text, str) or len(text) > FILTER_CHARACTERS:
        raise InputError(f"analysis_choice's filter is a condition as text of at most {FILTER_CHARACTERS:,} characters, "
                         f"e.g. \"layer >= 6 and sink_rate > 0.5\", not {checks.short_repr(text, 40)}"
                         f"{f' ({len(text):,} characters)' if isinstance(text, str) else ''}.")
    checks.text_of_characters("analysis_choice's filter", text)
    head = choice.get("head")
    if head is not None:
        n_layers, n_heads = analysis["n_layers"], analysis["n_heads"]
        found = _HEAD_LABEL.fullmatch(head) if isinstance(head, str) else None
        layer, number = (int(found[1]), int(found[2])) if found else (-1, -1)
        if not (0 <= layer < n_layers and 0 <= number < n_heads and head == head_label(layer, number)):
            raise InputError(f"analysis_choice's head must be a head of the finder's model as \"layer-head\" (0-0 to "
                             f"{n_layers - 1}-{n_heads - 1}), or None, not {checks.short_repr(head)}.")
    return choice
