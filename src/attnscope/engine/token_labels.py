"""What each token shows: the span of the text it covers, the one place labels are made.

`convert_ids_to_tokens` gives the tokenizer's own strings: byte-level BPE (GPT-2, RoBERTa,
Llama 3, Qwen) writes "café" as "cafÃ©", byte-fallback vocabularies (Llama 2, Mistral) as
"<0xC3>"... The labels come from the text instead:

- a token shows the characters of the text it covers (its offsets), with its leading space;
- a character split over several tokens (CJK and emoji in byte-level vocabularies) shows once,
  on the first token that holds its bytes; the others show CONTINUATION in token lists (their
  note names the bytes they hold and the character they belong to) and nothing in running text;
- special tokens keep their names ([CLS], <s>, <|im_start|>); WordPiece continuations keep "##";
- without offsets (slow tokenizers, precomputed attention) byte-level and byte-fallback pieces
  are decoded to UTF-8 where their bytes are complete, and space markers become spaces.

Every view, export and word merge reads these labels; the front end has no second copy.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

CONTINUATION = "↑"  # "the character above": the previous token shows it (rotated, it points back)
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_SPACE_MARKERS = ("Ġ", "▁")
# Whitespace a label would hide: shown as escapes (a newline would break a row of tokens).
_VISIBLE = {"\n": "\\n", "\r": "\\r"}


@dataclass(frozen=True)
class TokenLabels:
    labels: list[str]
    # Per token, "" or what its label does not show: the bytes it holds of a split character.
    notes: list[str]
    # Token positions of each word of the text (from the same offsets), or None without offsets.
    words: list[list[int]] | None = None
    # Per token, what it adds when the text is read as running text: the text since the previous
    # token (its spaces included, no "##"; "" for the other tokens of a split character, whose
    # character reads on the first), or None without offsets. The long text view's flow.
    reading: list[str] | None = None
    # Per token, whether it stands for characters of the text (not [CLS], [SEP], a decoder's start
    # token or a piece of only spaces; [UNK] does), or None when not known.
    covers_text: list[bool] | None = None


def _is_word_char(char: str) -> bool:
    # Letters, digits and combining marks (é written as e + U+0301 is one word).
    return char.isalnum() or char == "_" or unicodedata.category(char).startswith("M")


def text_words(text: str) -> list[int]:
    """Per character, the index of its word: runs of letters, digits and marks are words, every
    other visible character is a word of its own, and spaces belong to none (-1)."""
    index, word, previous_is_word = [], -1, False
    for char in text:
        if char.isspace():
            index.append(-1)
            previous_is_word = False
            continue
        joins = _is_word_char(char) and previous_is_word
        if not joins:
            word += 1
        index.append(word)
        previous_is_word = _is_word_char(char)
    return index


def word_groups_from_offsets(offsets, sequence_ids, special, texts) -> list[list[int]]:
    """Token positions of each word of the texts: a token belongs to the word of the first
    character it covers; a piece of only spaces to the next token's word; special tokens and
    anything uncovered are words of their own."""
    char_words = [text_words(t) for t in texts]
    keys: list[tuple | None] = []
    for i, (start, end) in enumerate(offsets):
        seq = sequence_ids[i]
        key = None
        if not special[i] and seq is not None and seq < len(texts):
            words = char_words[seq]
            covered = [words[c] for c in range(start, min(end, len(words))) if words[c] >= 0]
            key = (seq, covered[0]) if covered else ("space", seq)
        keys.append(key)
    # Spaces join the word after them (SentencePiece's lone "▁", byte-level "Ġ").
    for i in range(len(keys) - 2, -1, -1):
        if keys[i] is not None and keys[i][0] == "space" and keys[i + 1] is not None and keys[i + 1][0] == keys[i][1]:
            keys[i] = keys[i + 1]
    groups: list[list[int]] = []
    for i, key in enumerate(keys):
        if key is not None and key[0] != "space" and i and keys[i - 1] == key:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet (each byte as a printable character), reversed."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes)}


def is_byte_level(tokenizer: Any) -> bool:
    """Whether the tokenizer writes tokens in GPT-2's byte-level alphabet."""
    if getattr(tokenizer, "byte_decoder", None):  # slow GPT2Tokenizer and its kin
        return True
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    # Asked once per backend: its spec is the whole vocabulary as JSON (3 ms an edit on MiniLM).
    try:
        return _BYTE_LEVEL[backend]
    except (KeyError, TypeError):
        pass
    try:
        found = '"ByteLevel"' in backend.to_str()
    except Exception:  # an exotic backend: no byte-level decoding then
        return False
    with contextlib.suppress(TypeError):  # a backend that cannot be weakly referenced is asked each time
        _BYTE_LEVEL[backend] = found
    return found


_BYTE_LEVEL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def piece_bytes(token: str, byte_level: bool) -> bytes | None:
    """The bytes a token holds when its string is a byte encoding of them, else None."""
    match = _BYTE_PIECE.match(token)
    if match:
        return bytes([int(match.group(1), 16)])
    if byte_level:
        decoder = _byte_decoder()
        if token and all(c in decoder for c in token):
            return bytes(decoder[c] for c in token)
    return None


def _hex(data: bytes) -> str:
    return " ".join(f"{b:02X}" for b in data)


def visible(label: str) -> str:
    for raw, shown in _VISIBLE.items():
        label = label.replace(raw, shown)
    return label


LINE_BREAK = "↵"
_LINE_END = re.compile(r"\r\n|\n")


def readable(text: str) -> str:
    """A reading's text (running text, the text view's flow): a line break shows as ↵ and breaks
    the line there, as the text does (escaped as "\\n", a list or a poem read as one line)."""
    return _LINE_END.sub(LINE_BREAK + "\n", text).replace("\r", _VISIBLE["\r"])


def marker_label(token: str) -> str:
    """Today's fallback for a piece with no bytes and no offsets: space markers as spaces."""
    return visible(token.replace("Ġ", " ").replace("▁", " ").replace("Ċ", "\n"))


def _starts_with_space(token: str, data: bytes | None) -> bool:
    return token[:1] in _SPACE_MARKERS or (data is not None and data[:1] in (b" ", b"\n", b"\t"))


def _is_whitespace_piece(token: str, data: bytes | None) -> bool:
    if data is not None:
        try:
            return data.decode("utf-8").isspace()
        except UnicodeDecodeError:
            return False
    return marker_label(token).strip() == "" and token != ""


def label_tokens(
    tokens: Sequence[str],
    *,
    special: Sequence[bool],
    byte_level: bool = False,
    offsets: Sequence[tuple[int, int]] | None = None,
    sequence_ids: Sequence[int | None] | None = None,
    texts: Sequence[str] = (),
    continuation_prefix: str | None = None,
) -> TokenLabels:
    """Labels for `tokens` (as convert_ids_to_tokens gives them).

    special: per token, whether it is a special token (keeps its name).
    offsets, sequence_ids, texts: a fast tokenizer's character offsets, which text each token
    comes from (None for special tokens) and the texts; without them the pieces are decoded.
    continuation_prefix: WordPiece's "##", kept on the continuations it marks.
    """
    if offsets is None or sequence_ids is None:
        return _label_pieces(tokens, special, byte_level)
    offsets = _split_shared_spans(tokens, offsets, sequence_ids, special, texts, byte_level)
    labels: list[str] = []
    notes: list[str] = []
    reading: list[str] = []
    covers_text = [
        seq is not None and seq < len(texts) and texts[seq][start:end].strip() != ""
        for seq, (start, end) in zip(sequence_ids, offsets)
    ]
    shown_until: dict[int, int] = {}  # per text, the end of what labels already show
    read_until: dict[int, int] = {}  # per text, the end of what the readings hold (spaces' pieces too)
    for i, token in enumerate(tokens):
        seq = sequence_ids[i]
        data = piece_bytes(token, byte_level)
        if special[i] or seq is None or seq >= len(texts):
            labels.append(token)
            start, end = offsets[i]
            covered = texts[seq][start:end] if seq is not None and seq < len(texts) else ""
            # [UNK] keeps its name (it is what the model read) and names the text it stands for.
            notes.append(stands_for(covered) if covered.strip() and covered != token else "")
            if covered:  # [UNK] reads as the word it stands for
                reading.append(readable(texts[seq][min(read_until.get(seq, 0), start):end]))
                read_until[seq] = end
            else:
                reading.append(token)
            continue
        text = texts[seq]
        start, end = offsets[i]
        if _is_whitespace_piece(token, data) or end <= start:
            # A piece of only spaces (SentencePiece's lone "▁", byte-level "Ġ"): its own label.
            labels.append(visible(data.decode("utf-8", "replace")) if data is not None else marker_label(token))
            notes.append("")
            reading.append(readable(data.decode("utf-8", "replace")) if data is not None else labels[-1])
            read_until[seq] = max(read_until.get(seq, 0), end)
            continue
        first_new = max(start, shown_until.get(seq, 0))
        if first_new >= end:  # every character it covers is shown by an earlier token
            labels.append(CONTINUATION)
            held = f"bytes {_hex(data)}" if data is not None else "a part"
            notes.append(f"{held} of “{text[start:end]}”, shown on an earlier token")
            # Running text reads the character once, on the token holding its first byte: "près",
            # not "prè↑s". The text view still lets this token be selected (through that one).
            reading.append("")
            continue
        # Read as running text: whatever lies between the previous token and this one (spaces,
        # characters no token covers), then its own characters.
        reading.append(readable(text[min(read_until.get(seq, 0), first_new):end]))
        read_until[seq] = end
        label = text[first_new:end]
        note = ""
        if first_new > start:
            held = f"bytes {_hex(data)}" if data is not None else "pieces"
            note = f"{held}: the end of “{text[start:first_new]}” (shown on an earlier token) and “{label}”"
        if first_new == start and _starts_with_space(token, data) and not label[:1].isspace():
            label = " " + label
        if continuation_prefix and token.startswith(continuation_prefix):
            label = continuation_prefix + label
        shown_until[seq] = end
        labels.append(visible(label))
        notes.append(note)
    return TokenLabels(labels, notes, word_groups_from_offsets(offsets, sequence_ids, special, texts), reading,
                       covers_text)


_STANDS_FOR = "stands for “{}” in the text"


def stands_for(text: str) -> str:
    """The note of a token that keeps its name over the text it replaced ([UNK] for an emoji)."""
    return _STANDS_FOR.format(visible(text))


def word_notes(groups: Sequence[Sequence[int]], notes: Sequence[str]) -> list[str]:
    """Each word's note: what its tokens' names stand for ([UNK]); a split character's notes go,
    as the word's label shows the character whole."""
    prefix = _STANDS_FOR.split("{}")[0]
    return ["; ".join(notes[p] for p in group if notes[p].startswith(prefix)) for group in groups]


def _split_shared_spans(tokens, offsets, sequence_ids, special, texts, byte_level) -> list[tuple[int, int]]:
    """Offsets with each byte token's own characters where a run of byte tokens shares one span.

    A unigram vocabulary with byte fallback gives every byte of an unknown run (“שלום”, 8 bytes)
    the whole run's span; each token then covers the characters its bytes belong to, so every
    character shows once, on the token holding its first byte."""
    offsets = [tuple(o) for o in offsets]
    i = 0
    while i < len(tokens):
        j = i
        while (j < len(tokens) and not special[j] and offsets[j] == offsets[i]
               and sequence_ids[j] == sequence_ids[i] and piece_bytes(tokens[j], byte_level) is not None):
            j += 1
        if j - i > 1 and sequence_ids[i] is not None and sequence_ids[i] < len(texts):
            start, end = offsets[i]
            span = texts[sequence_ids[i]][start:end]
            pieces = [piece_bytes(tokens[k], byte_level) for k in range(i, j)]
            if b"".join(pieces) == span.encode("utf-8"):
                # The character index of every byte of the run, then each token's first and last.
                char_of_byte = [c for c, char in enumerate(span) for _ in char.encode("utf-8")]
                position = 0
                for k, data in zip(range(i, j), pieces):
                    first, last = char_of_byte[position], char_of_byte[position + len(data) - 1]
                    offsets[k] = (start + first, start + last + 1)
                    position += len(data)
        i = max(j, i + 1)
    return offsets


def _label_pieces(tokens: Sequence[str], special: Sequence[bool], byte_level: bool) -> TokenLabels:
    """Labels without offsets: byte pieces decoded to UTF-8, each character on the token holding
    its first byte; other pieces with their space markers as spaces."""
    labels: list[str] = []
    notes: list[str] = []
    run: list[tuple[int, bytes]] = []  # consecutive byte pieces

    def flush() -> None:
        if not run:
            return
        # Which token holds the first byte of each character of the run's bytes.
        stream = b"".join(data for _, data in run)
        owner = [i for i, data in run for _ in data]
        shown = {i: "" for i, _ in run}
        leftover = {i: "" for i, _ in run}
        position = 0
        while position < len(stream):
            width = _utf8_width(stream[position])
            chunk = stream[position : position + width]
            try:
                char = chunk.decode("utf-8")
            except UnicodeDecodeError:  # an incomplete or invalid sequence: show its bytes
                char, width = f"\\x{stream[position]:02X}", 1
            shown[owner[position]] += char
            for p in range(position + 1, position + width):
                if owner[p] != owner[position]:
                    leftover[owner[p]] = char
            position += width
        for i, data in run:
            if shown[i]:
                labels[i] = visible(shown[i])
                if leftover[i]:
                    notes[i] = f"bytes {_hex(data)}: also the end of “{leftover[i]}” (shown on an earlier token)"
            else:
                labels[i] = CONTINUATION
                notes[i] = f"bytes {_hex(data)} of “{leftover[i]}”, shown on an earlier token"
        run.clear()

    for i, token in enumerate(tokens):
        labels.append(token)
        notes.append("")
        data = None if special[i] else piece_bytes(token, byte_level)
        if data is None:
            flush()
            if not special[i]:
                labels[i] = marker_label(token)
        else:
            run.append((i, data))
    flush()
    # Without offsets: every piece but the special tokens and pieces of only spaces.
    covers_text = [not special[i] and labels[i].strip() != "" for i in range(len(tokens))]
    return TokenLabels(labels, notes, covers_text=covers_text)


def _utf8_width(first: int) -> int:
    if first < 0x80:
        return 1
    if first >> 5 == 0b110:
        return 2
    if first >> 4 == 0b1110:
        return 3
    if first >> 3 == 0b11110:
        return 4
    return 1


def join_labels(labels: Sequence[str], continuation_prefix: str | None = "##") -> str:
    """One word's label from its tokens' labels: continuation marks dropped, WordPiece's "##"
    dropped after the first piece. For labels taken from the text this is the word as written."""
    text = ""
    for k, label in enumerate(labels):
        if label == CONTINUATION:
            continue
        if k and continuation_prefix and label.startswith(continuation_prefix):
            label = label[len(continuation_prefix) :]
        text += label
    return text


def labels_for_tokenizer(
    tokenizer: Any,
    tokens: Sequence[str],
    *,
    ids: Sequence[int] | None = None,
    offsets: Sequence[Sequence[int]] | None = None,
    sequence_ids: Sequence[int | None] | None = None,
    texts: Sequence[str] = (),
) -> TokenLabels:
    """Labels for a tokenizer's tokens: from a fast tokenizer's offsets when given
    (return_offsets_mapping, with the encoding's sequence ids and the texts), decoded pieces
    otherwise."""
    special_ids = set(getattr(tokenizer, "all_special_ids", ()) or ())
    special_names = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    n = len(tokens)
    if ids is not None:
        special = [ids[i] in special_ids for i in range(n)]
    else:
        special = [t in special_names for t in tokens]
    if offsets is not None and sequence_ids is not None:
        offsets = [(int(a), int(b)) for a, b in list(offsets)[:n]]
        sequence_ids = list(sequence_ids)[:n]
    else:
        offsets = sequence_ids = None
    return label_tokens(tokens, special=special, byte_level=is_byte_level(tokenizer), offsets=offsets,
                        sequence_ids=sequence_ids, texts=texts, continuation_prefix=_continuation_prefix(tokenizer))


def _continuation_prefix(tokenizer: Any) -> str | None:
    """WordPiece's continuation prefix ("##"), or None for other models."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    model = getattr(backend, "model", None)
    prefix = getattr(model, "continuing_subword_prefix", None)
    if prefix and type(model).__name__ == "WordPiece":
        return prefix
    wordpiece = getattr(tokenizer, "wordpiece_tokenizer", None)  # slow BertTokenizer
    return "##" if wordpiece is not None else None


def normalised(text: str) -> str:
    """NFC, for comparing labels with a text a tokenizer may have normalised."""
    return unicodedata.normalize("NFC", text)
