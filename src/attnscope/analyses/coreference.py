"""Coreference heads (Clark et al. 2019, §4.2, Table 2): for each coreferent mention, does its head
word attend most to the head word of one of its antecedents? Every head's accuracy over CoNLL-2012
documents (cut to the first 128 tokens, as the paper), split into All, Pronoun, Proper and
Nominal mentions, beside two baselines: the nearest mention, and the nearest mention with the same
head word (else the nearest).

Clark's code for this is not public; what is ours, said once: a mention's head word is the last
word before the first preposition, relative word or comma after its first word ("the bakery on the
corner" → "bakery"); a mention is a Pronoun when its head word is a pronoun, Proper when its head
word is capitalised, Nominal otherwise; a head's guess is the word its head word attends to most,
among every other word of the document (its special tokens left out).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import AttentionModel, model_of
from ..errors import InputError
from ..labels import head_label
from .corpus import Documents, corpus_settings
from .runner import run_partial
from .syntax import iter_sentence_attention
from .tables import Grid, analysis_view, model_shape

KINDS = ("all", "pronoun", "proper", "nominal")
# Clark et al. 2019, Table 2 (CoNLL-2012, BERT-base; their best head 5-4 is 4-3 here, counted from 0).
CLARK_TABLE_2 = {
    "Nearest mention": {"all": 27, "pronoun": 29, "proper": 29, "nominal": 19},
    "Head-word match": {"all": 52, "pronoun": 47, "proper": 67, "nominal": 40},
    "Best head (5-4)": {"all": 65, "pronoun": 64, "proper": 73, "nominal": 58},
}
CLARK_MAX_LENGTH = 128
PRONOUNS = frozenset(
    "i me my mine myself you your yours yourself yourselves he him his himself she her hers herself it its itself we us "
    "our ours ourselves they them their theirs themselves this that these those who whom whose which".split()
)
# Words that end a mention's head phrase (after its first word).
HEAD_STOPS = frozenset("of in on at with who whom whose which that , from for near by to as than about under".split())


@dataclass
class Mention:
    start: int  # word positions in the document, inclusive
    end: int
    cluster: str
    head: int
    kind: str


@dataclass
class CorefDocument:
    name: str
    words: list[str]
    mentions: list[Mention]


def mention_head(words: Sequence[str], start: int, end: int) -> int:
    """The head word of words[start..end]: the last word before the first stop word after its first."""
    last = start
    for position in range(start + 1, end + 1):
        if words[position].lower() in HEAD_STOPS:
            break
        last = position
    return last


def mention_kind(word: str) -> str:
    if word.lower() in PRONOUNS:
        return "pronoun"
    return "proper" if word[:1].isupper() else "nominal"


def read_conll2012(text_or_path: str | os.PathLike) -> list[CorefDocument]:
    """Documents of a CoNLL-2012 file (its path or its text): the words (column 4) and the
    coreference column (the last: "(3", "3)", "(3)", "(3|(5)", "-"), each part a document."""
    if not isinstance(text_or_path, (str, os.PathLike)):
        raise InputError(f"read_conll2012 reads a CoNLL-2012 file's path or its text, not {checks.kind_of(text_or_path)}.")
    text = os.fspath(text_or_path)
    path = checks.existing_file(text)
    if path is not None and path.is_dir():
        raise InputError(f"'{text}' is a folder; read_conll2012 reads a CoNLL-2012 file (or its text): name the file in it.")
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
    elif "\n" not in text:
        raise InputError(f"No such CoNLL-2012 file: '{text}'.")
    documents, current, open_ = [], None, {}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#begin document"):
            current = CorefDocument(line[len("#begin document"):].strip(), [], [])
            open_ = {}
            continue
        if line.startswith("#end document"):
            if current is None:
                raise InputError(f"CoNLL-2012 line {number}: '#end document' without '#begin document'.")
            if any(open_.values()):
                raise InputError(f"CoNLL-2012 document {current.name}: a mention of cluster "
                                 f"{next(k for k, v in open_.items() if v)} is never closed.")
            documents.append(current)
            current = None
            continue
        if not line.strip() or line.startswith("#"):
            continue
        if current is None:
            raise InputError(f"CoNLL-2012 line {number} is outside a '#begin document' … '#end document' block.")
        fields = line.split()
        if len(fields) < 12:
            raise InputError(f"CoNLL-2012 line {number} has {len(fields)} columns, not at least 12: {line[:60]!r}")
        position = len(current.words)
        current.words.append(fields[3])
        cell = fields[-1]
        if cell == "-":
            continue
        for part in cell.split("|"):
            cluster = part.strip("()")
            if not cluster:
                raise InputError(f"CoNLL-2012 line {number}: coreference cell {cell!r} is not '(n', 'n)' or '(n)'.")
            if part.startswith("("):
                open_.setdefault(cluster, []).append(position)
            if part.endswith(")"):
                if not open_.get(cluster):
                    raise InputError(f"CoNLL-2012 line {number}: cluster {cluster} closes a mention it never opened.")
                start = open_[cluster].pop()
                head = mention_head(current.words, start, position)
                current.mentions.append(Mention(start, position, cluster, head, mention_kind(current.words[head])))
    if current is not None:
        raise InputError(f"CoNLL-2012 document {current.name} has no '#end document'.")
    if not documents:
        raise InputError("No documents found in the CoNLL-2012 input ('#begin document' … '#end document').")
    for doc in documents:
        doc.mentions.sort(key=lambda m: (m.start, -m.end))
    return documents


def antecedents(doc: CorefDocument, mention: Mention) -> list[Mention]:
    """The mentions of its cluster that start before it."""
    return [m for m in doc.mentions if m.cluster == mention.cluster and m.start < mention.start]


def baseline_guesses(doc: CorefDocument, mention: Mention) -> dict[str, Mention | None]:
    """Each baseline's antecedent: the nearest earlier mention, and the nearest earlier one with the
    same head word (else the nearest)."""
    earlier = [m for m in doc.mentions if m.start < mention.start and m.head != mention.head]
    nearest = max(earlier, key=lambda m: (m.start, m.end), default=None)
    word = doc.words[mention.head].lower()
    same = [m for m in earlier if doc.words[m.head].lower() == word]
    return {"Nearest mention": nearest, "Head-word match": max(same, key=lambda m: (m.start, m.end), default=nearest)}


@dataclass
class CorefPartial:
    hits: dict  # kind → L × H hits
    totals: dict  # kind → mentions scored
    baseline_hits: dict  # (baseline, kind) → hits
    documents: int

    def merge(self, other: CorefPartial) -> CorefPartial:
        add = lambda a, b: {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}
        return CorefPartial(add(self.hits, other.hits), add(self.totals, other.totals),
                            add(self.baseline_hits, other.baseline_hits), self.documents + other.documents)


class _Words:
    """A document as iter_sentence_attention reads a parsed sentence: its words."""

    def __init__(self, doc: CorefDocument):
        self.doc, self.words = doc, doc.words


def cut_to_tokens(doc: CorefDocument, tokenizer: Any, max_length: int) -> CorefDocument:
    """The document's first words that fit max_length tokens with the special tokens (the paper
    cuts documents at 128), and the mentions wholly inside them."""
    specials = len(tokenizer("", add_special_tokens=True)["input_ids"])
    budget, used, kept = max_length - specials, 0, 0
    for word in doc.words:
        pieces = len(tokenizer(word, add_special_tokens=False)["input_ids"]) or 1
        if used + pieces > budget:
            break
        used += pieces
        kept += 1
    return CorefDocument(doc.name, doc.words[:kept], [m for m in doc.mentions if m.end < kept])


def coref_partial(model: AttentionModel, docs: Documents, *, max_length: int, batch_size: int | str,
                  progress: bool) -> CorefPartial:
    hits: dict[str, torch.Tensor] = {}
    totals: dict[str, int] = {}
    baseline_hits: dict[tuple[str, str], int] = {}
    skipped: list[int] = []
    for item in iter_sentence_attention(model, docs, max_length=max_length, batch_size=batch_size, desc="coreference",
                                        progress=progress, skipped=skipped):
        doc: CorefDocument = item.sentence.doc
        attention = item.attention[..., item.words, :][..., item.words]  # L × H × W × W, words only
        for mention in doc.mentions:
            before = antecedents(doc, mention)
            if not before:
                continue
            targets = torch.tensor(sorted({m.head for m in before}), device=attention.device)
            row = attention[:, :, mention.head, :].clone()
            row[..., mention.head] = float("-inf")
            guess = row.argmax(-1)  # L × H
            hit = torch.isin(guess, targets).double().cpu()
            baselines = {name: antecedent is not None and antecedent.cluster == mention.cluster
                         for name, antecedent in baseline_guesses(doc, mention).items()}
            for kind in ("all", mention.kind):
                hits[kind] = hits.get(kind, 0) + hit
                totals[kind] = totals.get(kind, 0) + 1
                for name, right in baselines.items():
                    baseline_hits[(name, kind)] = baseline_hits.get((name, kind), 0) + int(right)
    if skipped:
        raise InputError(f"Document {docs.positions[skipped[0]]} did not fit max_length after its cut: a word longer "
                         "than the limit?")
    return CorefPartial(hits, totals, baseline_hits, len(docs))


@dataclass
class CorefHeads:
    """Every head's accuracy by mention kind (`accuracy`, tidy: layer, head, label, measure, value,
    count), the baselines' (`baselines`), and Table 2 (`table()`)."""

    analysis_kind = "coref_heads"

    accuracy: Any
    baselines: Any
    documents: int
    source: str

    def table(self):
        """Clark et al.'s Table 2: the baselines and the best head (by All), in %, beside the paper's."""
        import pandas as pd

        wide = self.accuracy.pivot_table(index="label", columns="measure", values="value")
        best = wide["all"].idxmax()
        rows = []
        for name in ("Nearest mention", "Head-word match"):
            b = self.baselines[self.baselines.baseline == name].set_index("measure").value
            rows.append({"system": name, **{k: round(100 * float(b.get(k, float("nan"))), 1) for k in KINDS}})
        rows.append({"system": f"Best head ({best})", **{k: round(100 * float(wide.loc[best].get(k, float("nan"))), 1)
                                                         for k in KINDS}})
        table = pd.DataFrame(rows)
        counts = self.accuracy.groupby("measure")["count"].first()
        table.attrs.update({"counts": {k: int(counts.get(k, 0)) for k in KINDS}, "source": self.source,
                            "clark": CLARK_TABLE_2})
        return table

    def _repr_html_(self) -> str:
        import html

        counts = self.table().attrs["counts"]
        heading = (f"<p><b>Coreference heads</b> (Clark et al. 2019, Table 2): {self.documents} documents, "
                   f"{html.escape(self.source)}; mentions scored {counts}</p>")
        return heading + self.table().to_html(index=False)


def coref_heads(
    model: AttentionModel,
    conll: Any,
    *,
    max_length: int = CLARK_MAX_LENGTH,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
) -> CorefHeads:
    """Clark et al. 2019's coreference heads (Table 2) over CoNLL-2012 documents: a file's path or
    text, or CorefDocument objects. Each document is cut to its first `max_length` tokens (128, as
    the paper). backend: "local" or "ray", as in `head_stats`."""
    import pandas as pd

    model = model_of(model, "coref_heads")
    if isinstance(conll, Sequence) and not isinstance(conll, str) and conll and isinstance(conll[0], CorefDocument):
        parsed, source = list(conll), "documents given by the caller"
    else:
        parsed, source = read_conll2012(conll), "a CoNLL-2012 file"
    max_length, batch_size = corpus_settings(model, [], max_length, batch_size, backend=backend)
    cut = [cut_to_tokens(doc, model.tokenizer, max_length) for doc in parsed]
    docs = Documents([_Words(doc) for doc in cut])
    docs.positions = list(range(len(cut)))
    partial = run_partial(coref_partial, model, docs, progress=progress, backend=backend, max_length=max_length,
                          batch_size=batch_size)
    if not partial.totals:
        raise InputError("No mention with an antecedent was found in these documents: nothing to score.")
    rows = []
    for kind in KINDS:
        if kind not in partial.hits:
            continue
        grid = partial.hits[kind] / partial.totals[kind]
        for layer in range(grid.shape[0]):
            for head in range(grid.shape[1]):
                rows.append((layer, head, head_label(layer, head), kind, float(grid[layer, head]), partial.totals[kind]))
    accuracy = pd.DataFrame(rows, columns=["layer", "head", "label", "measure", "value", "count"])
    accuracy.attrs.update({"attnscope": "coref_heads", "model": model.name, "documents": len(cut), **model_shape(model)})
    baselines = pd.DataFrame(
        [(name, kind, hits / partial.totals[kind], partial.totals[kind]) for (name, kind), hits in partial.baseline_hits.items()],
        columns=["baseline", "measure", "value", "count"])
    return CorefHeads(accuracy, baselines, len(cut), source)


@analysis_view("coref_heads")
def coref_heads_view(data: CorefHeads, grid: Grid) -> dict:
    accuracy = data.accuracy
    counts = accuracy.groupby("measure")["count"].first()
    measures = [{"key": kind, "label": f"Coreference accuracy: {kind} ({int(counts[kind])} mentions)",
                 "values": grid(accuracy[accuracy.measure == kind], "value")} for kind in KINDS if kind in counts.index]
    return {"measures": measures, "note": f"Clark et al. 2019's coreference heads over {data.documents} documents "
                                          f"({data.source}): how often a mention's head word attends most to an antecedent's."}
