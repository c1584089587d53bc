"""The texts a run reads: one at a time (a batch of one at most), cut into pieces at whitespace to
be counted, and grouped into words where a tokenizer has no word ids."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .. import checks
from ..errors import InputError
from .formulas import word_groups

# A longer text is counted and read a piece of about this many characters at a time (text_pieces).
PIECE_CHARACTERS = 100_000


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
        if value and all(isinstance(item, str) for item in value):
            raise InputError(
                f"attnscope shows one input at a time, but {what} is a batch of {len(value)} texts. "
                "Run the texts one by one (e.g. in a loop)."
            )
        # Not texts: say what it holds (a tuple of tensors was once "a batch of 2").
        container = type(value).__name__
        if not value:
            raise InputError(f"{what} must be one str, not an empty {container}.")
        held = ", ".join(sorted({checks.kind_of(item) for item in value[:20]}))
        items = "item" if len(value) == 1 else "items"
        raise InputError(f"{what} must be one str, not {checks.kind_of(value)} of {len(value)} {items} ({held}).")
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


def count_in_pieces(tokenizer: Any, text: str, enough: int, count_all: bool = True) -> tuple[int, str]:
    """The tokens of `text` (no special tokens), counted a piece at a time, so the tokenizer
    holds one piece (about 150 bytes a character), never the whole text; and the text's start,
    in whole pieces, that holds at least `enough` tokens: the tokens a truncated run keeps
    come from it alone. count_all False: stop there (the count is then of that start)."""
    count, prefix_end = 0, None
    for start, end in text_pieces(text, PIECE_CHARACTERS):
        count += len(tokenizer(text[start:end], add_special_tokens=False, truncation=False, verbose=False)["input_ids"])
        if prefix_end is None and count >= enough:
            prefix_end = end
            if not count_all:
                break
    return count, text[: prefix_end or len(text)]


def sentence_b_start(encoded: Any, text_b: str | None) -> int | None:
    """Index of sentence B's first token in a tokenizer's encoding of a pair, or None."""
    if text_b is None:
        return None
    try:
        sequence_ids = encoded.sequence_ids(0)
    except (AttributeError, ValueError):  # slow (Python) tokenizers have no sequence ids
        sequence_ids = None
    if sequence_ids is not None and 1 in sequence_ids:
        return sequence_ids.index(1)
    token_types = encoded.get("token_type_ids")
    if token_types is not None and bool((token_types[0] == 1).any()):
        return int((token_types[0] == 1).nonzero()[0, 0])
    return None


def special_tokens(tokenizer: Any, pair: bool) -> int:
    """How many special tokens the tokenizer adds to one text (or a pair); 0 where it cannot say."""
    try:
        return int(tokenizer.num_special_tokens_to_add(pair=pair))
    except (AttributeError, TypeError, ValueError):
        return 0


def check_token_ids(model: Any, tokenizer: Any, model_name: str, ids: Any) -> None:
    """Token ids past the embedding table mean the tokenizer belongs to another model; the
    model would fail with an index error deep in its embedding (or a CUDA assert)."""
    try:
        embeddings = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):  # a model without a token embedding to check
        embeddings = None
    rows = getattr(embeddings, "num_embeddings", None)
    if rows is None or ids.numel() == 0:
        return
    largest = int(ids.max())
    if largest >= rows or int(ids.min()) < 0:
        raise InputError(
            f"The tokenizer gave token id {largest}, but {model_name}'s embedding table has {rows} rows "
            f"(ids 0..{rows - 1}): the tokenizer (vocabulary of {len(tokenizer)}) does not belong to "
            "this model. Pass the model's own tokenizer."
        )


def check_known_words(tokenizer: Any, ids: Any) -> None:
    """Every word an unknown token means the tokenizer does not fit (e.g. a model directory
    without tokenizer files gives transformers an empty vocabulary): a view of [UNK]s is refused."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return
    special = set(getattr(tokenizer, "all_special_ids", ())) - {unk}
    words = [i for i in ids.tolist() if i not in special]
    if words and all(i == unk for i in words):
        raise InputError(
            f"Every token of the text is the unknown token {tokenizer.unk_token}: the tokenizer "
            f"(vocabulary of {len(tokenizer)}) does not know any of its words. Is it the model's own "
            "tokenizer? (A model directory without its tokenizer files gives an empty vocabulary.)"
        )
