"""What a head finder's example shows as text: the query in its context, and its strongest key's
when that lies outside, read as the text reads ("hikers", not "hike ##rs"), with the query
[[marked]] and the key <<marked>>."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..engine.token_labels import LINE_BREAK, TokenLabels

EXAMPLE_CONTEXT = 20  # tokens shown either side of an example's query (and 3 either side of its strongest key)


def example_spans(n: int, query: int, strongest: int | None) -> list[tuple[int, int]]:
    """The parts of an n-token document an example shows, as (start, end) positions in order: its
    query with EXAMPLE_CONTEXT tokens either side, and its strongest key with 3 either side when
    that lies outside (a long document's key may be thousands of tokens away)."""
    spans = [(max(0, query - EXAMPLE_CONTEXT), min(n, query + EXAMPLE_CONTEXT + 1))]
    if strongest is not None and not spans[0][0] <= strongest < spans[0][1]:
        spans.append((max(0, strongest - 3), min(n, strongest + 4)))
    spans.sort()
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def running_pieces(labels: TokenLabels, n_tokens: int) -> list[str] | None:
    """Per token, what it adds to the document read as running text (its spaces before it, no
    "##"); a token that stands for no text ([CLS], [SEP]) set apart by spaces. None without a fast
    tokenizer's offsets, or for labels of another tokenization than the n tokens measured."""
    if labels.reading is None or len(labels.reading) != n_tokens:
        return None
    covers = labels.covers_text or [True] * n_tokens
    # An example is a line: its text's line breaks read as ↵ in it.
    pieces = [piece.replace(LINE_BREAK + "\n", LINE_BREAK + " ") for piece in labels.reading]
    return [piece if covers[i] or piece == "" else f" {piece} " for i, piece in enumerate(pieces)]


def example_text(tokens: Sequence[str], running: Sequence[str] | None, query: int, strongest: int | None) -> str:
    """The example's text: its spans (example_spans) joined by "…", the query's token [[marked]]
    and the strongest key's <<marked>> (the query's mark wins when it is its own strongest key).
    `running` (running_pieces) reads as the text; without it, the tokens are joined by spaces."""
    mark = {strongest: "<<{}>>", query: "[[{}]]"}
    spans = example_spans(len(tokens), query, strongest)
    parts = ["…"] if spans[0][0] > 0 else []
    for k, (start, end) in enumerate(spans):
        if k:
            parts.append(" … " if running is not None else "…")
        for i in range(start, end):
            if running is None:
                parts.append(mark.get(i, "{}").format(tokens[i]))
                continue
            piece = running[i]
            core = piece.strip()
            # The mark goes round the token's own characters, its spaces outside: " [[hike]]rs".
            parts.append(piece.replace(core, mark.get(i, "{}").format(core), 1) if core else piece)
    if spans[-1][1] < len(tokens):
        parts.append("…")
    if running is None:
        return " ".join(parts)
    return re.sub(r"\s+", " ", "".join(parts)).strip()
