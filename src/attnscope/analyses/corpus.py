"""A corpus as the analyses read it: documents from lists, files, DataFrames and datasets (Hugging
Face's, Ray's), their batches and batch sizes on the model's device, and every document's attention
from batched forward passes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import checks
from ..engine import formulas as an
from ..engine.attention_model import MAX_TEXT_CHARACTERS, PIECE_CHARACTERS, AttentionModel
from ..engine.hooks import capture_values, no_capture
from ..engine.models import max_positions
from ..engine.nonfinite import describe_heads, has_nonfinite, nonfinite_heads
from ..engine.value_norms import batch_norms as norms_of_batch
from ..errors import InputError
from ..progress import progress as progress_bar

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
    corpus_given = corpus
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
    if column is not None and gathered is None and not _is_data_frame(corpus_given):  # not ignored silently
        raise InputError(f"column={checks.short_repr(column)} names a dataset's or DataFrame's text column, and the corpus "
                         f"is {checks.kind_of(corpus_given)} of texts: leave column out.")
    docs = Documents()
    docs.positions = []
    characters, index = 0, -1
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
        held = "nothing" if index < 0 else f"{index + 1:,} text{'s' if index else ''}, all empty"
        raise InputError(f"The corpus has no non-empty text (it holds {held}): give at least one sentence.")
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


def in_batches(docs: Sequence[Document], size: int) -> Iterator[list[Document]]:
    for start in range(0, len(docs), size):
        yield list(docs[start : start + size])


def refuse_encoder_decoder(engine: AttentionModel) -> None:
    """The analyses that run documents in batches read one stack of self-attention (outputs.attentions):
    an encoder-decoder's are two stacks and a cross-attention, not one set of heads. Said before
    any document runs, naming the analyses that read one."""
    if getattr(engine, "is_encoder_decoder", False):
        raise InputError(
            f"{getattr(engine, 'name', 'This model')} is an encoder-decoder: this analysis runs documents in batches and reads "
            "one stack of self-attention heads, and an encoder-decoder has two (encoder and decoder) and a cross-attention. "
            "Over its corpus, attention_sinks(model, texts) and value_flow(model, texts) read each part; one text's every "
            "part shows in attnscope.show(text, model=...).")


def encode_batch(engine: AttentionModel, batch: Sequence[Document], max_length: int) -> Any:
    refuse_encoder_decoder(engine)
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


def device_batch_size(engine: AttentionModel, wanted: int) -> int:
    # Without a pad token (GPT-2) texts of different lengths cannot share a batch.
    return wanted if getattr(engine.tokenizer, "pad_token", None) is not None else 1


CLARK_MAX_LENGTH = 128  # Clark et al.'s segments: at most 128 tokens


def corpus_settings(model: AttentionModel, docs: Sequence[Document], max_length: Any, batch_size: Any, *,
                    gradients: bool = False, backend: str = "local") -> tuple[int, int | str]:
    """max_length and batch_size of a corpus run, checked before any batch runs. max_length None
    is Clark et al.'s 128 tokens, or the model's limit when that is shorter. batch_size "auto":
    8 on a CPU; on a GPU as many documents as half its free memory holds (`batch_for_memory`).
    With backend="ray" "auto" stays "auto": each worker sizes batches to its own device."""
    refuse_encoder_decoder(model)
    if max_length is None:
        limit = max_positions(model.model, model.tokenizer)
        max_length = min(CLARK_MAX_LENGTH, limit or CLARK_MAX_LENGTH)
    else:
        pair = any(b is not None for _, b in docs)
        max_length, _ = model.resolve_max_length(max_length, pair=pair)
    if isinstance(batch_size, str) and batch_size == "auto":
        return max_length, ("auto" if checks.one_of(backend, ("ray",)) else auto_batch_size(model, max_length, gradients))
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
    # ‖f_h(x_j)‖ (engine/value_norms.py): L × H × n, where asked for (iter_attention's value_norms)
    # and the model keeps them; else None.
    value_norms: torch.Tensor | None = None


def unpadded(encoded: Any, maps: torch.Tensor, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Document `index` of a batch: its real token positions, and its ... × n × n maps (attention
    or gradients, B × L × H × T × T) with the padding rows and columns cut off."""
    keep = encoded["attention_mask"][index].nonzero().flatten()
    on_device = keep.to(maps.device)
    return keep, maps[index][..., on_device, :][..., on_device]


def tokens_at(engine: AttentionModel, encoded: Any, index: int, keep: torch.Tensor) -> list[str]:
    return engine.tokenizer.convert_ids_to_tokens(encoded["input_ids"][index][keep].tolist())


def iter_attention(
    engine: AttentionModel,
    docs: Sequence[Document],
    *,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    desc: str = "attention",
    progress: bool = True,
    value_norms: bool = False,
) -> Iterator[DocumentAttention]:
    """Every document's attention, from batched forward passes (padding cut off per document).
    A document whose attention holds NaN or ±inf stops the run with an InputError naming it.
    value_norms: each document's ‖f_h(x_j)‖ too, from the value projections the same forward
    records (None where the model keeps none: value_norms.missing says why)."""
    max_length, batch_size = corpus_settings(engine, docs, max_length, batch_size)
    size = device_batch_size(engine, batch_size)
    modules = getattr(engine, "attention_modules", None) or []
    capturing = (value_norms and getattr(engine, "layout", None) is not None
                 and not getattr(engine, "is_encoder_decoder", False))
    done = 0
    for batch in progress_bar(in_batches(docs, size), math.ceil(len(docs) / size), desc, progress):
        encoded = encode_batch(engine, batch, max_length)
        with capture_values(modules, engine.layout) if capturing else no_capture() as capture:
            outputs = engine.forward(encoded)
        refuse_nonfinite(outputs.attentions, docs, done)
        attentions = torch.stack(list(outputs.attentions), dim=1).float()  # B × L × H × T × T
        norms = None if capture is None else norms_of_batch(engine.model, modules, capture.values, attentions.shape[2])
        for index in range(len(batch)):
            keep, attention = unpadded(encoded, attentions, index)
            tokens = tokens_at(engine, encoded, index, keep)
            kept_norms = None if norms is None else norms[index][..., keep.to(norms.device)].to(attention.device)
            yield DocumentAttention(tokens, attention, token_kinds_for(engine, tokens, attention.device), kept_norms)
        done += len(batch)
