"""The texts a run reads: one at a time (a batch of one at most), cut into pieces at whitespace to
be counted, and grouped into words where a tokenizer has no word ids."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .. import checks
from ..errors import InputError
from .formulas import word_groups


def groups_from_tokens(tokens: Sequence[str], special: Sequence[str] = ()) -> list[list[int]]:
    """Word groups when the tokenizer has no word ids (slow tokenizers): "##" pieces continue a word,
    BPE/SentencePiece pieces without a leading-space marker continue one."""
    groups: list[list[int]] = []
    special = set(special)
    marks_spaces = any(t[:1] in "Ġ▁" for t in tokens)  # once, not per token: linear in the tokens
    for position, token in enumerate(tokens):
        continues = (
            groups
            and token not in special
            and tokens[position - 1] not in special
            and (token.startswith("##") or (marks_spaces and token[:1] not in "Ġ▁"))
        )
        if continues:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


def text_pieces(text: str, size: int) -> Iterator[tuple[int, int]]:
    """[start, end) spans of `text` of about `size` characters, each cut where a run of whitespace
    begins: every tokenizer attnscope meets splits words at whitespace first (BERT's WordPiece,
    byte-level BPE, SentencePiece's "▁"), so the pieces' tokens are the whole text's."""
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + size)
        if end < n:
            cut = end
            while cut > start + size // 2 and not (text[cut].isspace() and not text[cut - 1].isspace()):
                cut -= 1
            end = cut if cut > start + size // 2 else end  # one word of size // 2 characters: cut in it
        yield start, end
        start = end


def single_text(value: Any, what: str) -> str | None:
    """Accept one string (or a batch of exactly one); refuse batches with a clear message, and a
    string with a surrogate (no tokenizer reads one) naming where it is."""
    if value is None or isinstance(value, str):
        return value if value is None else checks.text_of_characters(what, value)
    if isinstance(value, (list, tuple)):
        if len(value) == 1 and isinstance(value[0], str):
            return checks.text_of_characters(f"{what}[0]", value[0])
        raise InputError(
            f"attnscope shows one input at a time, but {what} is a batch of {len(value)}. "
            "Run the texts one by one (e.g. in a loop)."
        )
    raise InputError(f"{what} must be a string, got {type(value).__name__}.")


def word_groups_of(encoded: Any, tokens: Sequence[str], tokenizer: Any, index: int = 0) -> list[list[int]]:
    """Token positions of each word of encoding `index` (fast tokenizers know their words)."""
    try:
        word_ids = encoded.word_ids(index)
        sequence_ids = encoded.sequence_ids(index)
    except (AttributeError, ValueError):
        word_ids = None
    if word_ids is None:
        return groups_from_tokens(tokens, getattr(tokenizer, "all_special_tokens", ()))
    length = len(tokens)
    return word_groups(word_ids[:length], sequence_ids[:length])
