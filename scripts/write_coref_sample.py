"""Writes notebooks/data/coref_sample.conll (CoNLL-2012 columns) from the hand-annotated
scripts/coref_sample.txt: `python scripts/write_coref_sample.py`. Only the columns the
coreference analysis reads are filled (document, part, word number, word, coreference); the
others are "-" (and the parse bit "*"), as CoNLL-2012 writes unknown values."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "scripts" / "coref_sample.txt"
TARGET = ROOT / "notebooks" / "data" / "coref_sample.conll"
CLOSE = re.compile(r"^\]_(\d+)$")


def document(line: str) -> list[list[tuple[str, str]]]:
    """Sentences of (word, coreference cell) from one annotated line."""
    sentences = []
    for sentence in line.split(" || "):
        words, cells, open_ = [], [], []
        for piece in sentence.split():
            if piece == "[":
                raise ValueError(f"a lone '[' in {sentence!r}")
            while piece.startswith("["):
                open_.append(len(words))
                piece = piece[1:]
            closes = []
            while True:
                match = re.search(r"\]_(\d+)$", piece)
                if not match:
                    break
                closes.append(match.group(1))
                piece = piece[: match.start()]
            words.append(piece)
            cells.append([])
            for cluster in reversed(closes):  # the innermost closes first
                start = open_.pop()
                if start == len(words) - 1:
                    cells[start].append(f"({cluster})")
                else:
                    cells[start].append(f"({cluster}")
                    cells[-1].append(f"{cluster})")
        if open_:
            raise ValueError(f"an unclosed mention in {sentence!r}")
        sentences.append([(w, "|".join(c) if c else "-") for w, c in zip(words, cells)])
    return sentences


def main() -> None:
    lines = [line for line in SOURCE.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]
    out = ["# attnscope's coreference sample: written and annotated by hand for attnscope (not OntoNotes);",
           "# its source and conventions: scripts/coref_sample.txt"]
    for number, line in enumerate(lines):
        name = f"attnscope/sample_{number:02d}"
        out.append(f"#begin document ({name}); part 000")
        for sentence in document(line):
            for index, (word, cell) in enumerate(sentence):
                out.append("\t".join([name, "0", str(index), word, "-", "*", "-", "-", "-", "-", "*", cell]))
            out.append("")
        out.append("#end document")
    TARGET.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"{len(lines)} documents → {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
