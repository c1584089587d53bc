"""Attention knockout measured on the output (Geva et al. 2023, "Dissecting Recall of Factual
Associations"; Kovaleva et al.'s and Michel et al.'s disabled heads): block edges query → key in
chosen layers and heads, or disable whole heads, and read the change of log p of the token the
model predicts at a position: a causal LM's next token, or an encoder's masked token through its
masked-LM head. The edges are blocked inside the model's own attention kernel (engine/knockout.py),
so that with nothing blocked the run is its plain forward. The sweep and the per-head frame show in
the widget's analysis view (their conversions at the end).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import checks
from ..engine import knockout as engine_knockout
from ..engine.attention_model import AttentionModel, model_of
from ..engine.knockout import EdgeBlock
from ..errors import InputError
from ..progress import progress as progress_bar
from .tables import Grid, analysis_view, heads_frame, model_shape, widget_action

MODES = ("zero", "uniform")


def _encoded(model: AttentionModel, text: Any) -> tuple[Any, list[str]]:
    """A text through the tokenizer, or token ids as they are (what a generation read: no special
    tokens added, nothing re-tokenized); the encoding and its tokens."""
    if isinstance(text, str):
        if not text.strip():
            raise InputError(f"text must be a non-empty str or a list of token ids, not {checks.kind_of(text)}.")
        encoded = model.tokenizer(text, return_tensors="pt")
        return encoded, model.tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
    ids = _token_ids(model, text)
    encoded = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    return encoded, model.tokenizer.convert_ids_to_tokens(ids)


def _token_ids(model: AttentionModel, text: Any) -> list[int]:
    """`text` given as token ids (a list or tuple of whole numbers, or a 1-D tensor or array),
    each checked against the model's vocabulary."""
    if isinstance(text, torch.Tensor) or type(text).__name__ == "ndarray":
        if text.ndim != 1:
            raise InputError(f"text as token ids must be one sequence (1-D), not of shape {tuple(text.shape)}.")
        text = text.tolist()
    if not isinstance(text, (list, tuple)) or not text:
        raise InputError(f"text must be a non-empty str or a list of token ids, not {checks.short_repr(text)}.")
    embeddings = getattr(model.model, "get_input_embeddings", lambda: None)()
    size = getattr(embeddings, "num_embeddings", None) or len(model.tokenizer)
    return [checks.integer(f"text's token id at {i}", token, minimum=0, maximum=size - 1)
            for i, token in enumerate(text)]


@widget_action("knockout.output_kind")
def output_kind(model: AttentionModel) -> str:
    """What token the model's LM head reads: "next token" (a causal LM), "masked token" (an
    encoder with a masked-LM head) or "output token" (an encoder-decoder's next output token);
    InputError saying why there is none."""
    hf = model.model
    head = getattr(hf, "get_output_embeddings", lambda: None)()
    if getattr(hf.config, "is_encoder_decoder", False):
        if head is None:
            raise InputError(f"{model.name} is an encoder-decoder with no LM head to read an output token's log p from: "
                             "load it with its head (AutoModelForSeq2SeqLM).")
        return "output token"
    if head is not None:
        return "next token" if model.causal else "masked token"
    if model.causal:
        raise InputError(f"{model.name} has no next-token head to read a token's log p from: load it as a causal LM "
                         "(AutoModelForCausalLM, or attnscope.load('smollm2')).")
    raise InputError(f"{model.name} is an encoder with no masked-LM head to read a masked token's log p from "
                     "(the embedded MiniLM has none): load one with its head (AutoModelForMaskedLM, e.g. "
                     "BertForMaskedLM) and put its mask token in the text.")


def _position(model: AttentionModel, kind: str, position: Any, tokens: list[str]) -> int:
    """The position whose distribution is read: a causal LM's or an encoder-decoder's decoder's
    (default the last token), or a masked LM's mask token (default the text's only one)."""
    n = len(tokens)
    mask = getattr(model.tokenizer, "mask_token", None)
    if kind in ("next token", "output token") or position is not None:
        at = checks.integer("position", -1 if position is None else position, minimum=-n, maximum=n - 1) % n
        if kind == "masked token" and tokens[at] != mask:
            raise InputError(f"position={position} holds {tokens[at]!r}, not the mask token {mask!r}: a masked LM "
                             "predicts a masked token (put it in the text).")
        return at
    masks = [i for i, token in enumerate(tokens) if token == mask]
    if len(masks) != 1:
        raise InputError(f"The text has {len(masks)} mask tokens {mask!r}: put one in it, or name the one to read "
                         "with position=.")
    return masks[0]


def _target(model: AttentionModel, target: Any) -> int | None:
    """The token whose log p is read: a token id, or a text of one token; None for the model's own
    prediction (known once the plain forward ran). Checked before any run."""
    if target is None:
        return None
    if isinstance(target, str):
        ids = model.tokenizer(target, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise InputError(f"target={target!r} is {len(ids)} tokens for this tokenizer: give one token (or its id).")
        return ids[0]
    head = model.model.get_output_embeddings()
    size = getattr(head, "out_features", None) or getattr(model.model.config, "vocab_size", None) or len(model.tokenizer)
    return checks.integer("target", target, minimum=0, maximum=size - 1)


def _positions(name: str, value: Any, n: int) -> list[int]:
    values = [value] if isinstance(value, int) or hasattr(value, "__index__") else value
    return sorted(checks.indices(name, values, n, "positions", allow_none=False, from_end=True))


def _decoder_ids(model: AttentionModel, decoder: Any) -> list[int]:
    """What an encoder-decoder's decoder has read before the output token knockout reads: its
    start token alone (None), its start token then a text's tokens (a str, no end token), or
    token ids as given (a generation's `start_ids + output ids`)."""
    from ..engine.encoder_decoder_run import decoder_start_id

    if decoder is None or isinstance(decoder, str):
        text = [] if decoder is None else model.tokenizer(text_target=decoder, add_special_tokens=False)["input_ids"]
        return [decoder_start_id(model), *text]
    try:
        return _token_ids(model, decoder)
    except InputError as error:  # said of decoder=, not of the text
        raise InputError(str(error).replace("text", "decoder", 1)) from None


def part_edge_blocks(model: AttentionModel, lengths: dict[str, int], edges: Iterable[Sequence]) -> dict[tuple[str, int], tuple[EdgeBlock, ...]]:
    """An encoder-decoder's edges, (part, layer, head or None, queries, keys) with part "encoder",
    "decoder" (its self-attention) or "cross" (decoder queries → source keys), as each part's
    layers' edge blocks, checked; lengths: each part's query and key counts, part → (queries, keys)."""
    blocked: dict[tuple[str, int], list[EdgeBlock]] = {}
    if not isinstance(edges, (list, tuple)):
        raise InputError(f"edges must be a list of (part, layer, head or None, queries, keys), not {checks.short_repr(edges)}.")
    for edge in edges:
        if not isinstance(edge, (tuple, list)) or len(edge) != 5 or edge[0] not in engine_knockout.PARTS:
            raise InputError(f"edges: an encoder-decoder's edge is (part, layer, head or None, queries, keys), part one of "
                             f"{engine_knockout.PARTS}, not {checks.short_repr(edge)}.")
        part, *rest = edge
        layer, block = _edge_block(model, len(model.groups[part]), *lengths[part], *rest)
        blocked.setdefault((part, layer), []).append(block)
    return {key: tuple(blocks) for key, blocks in blocked.items()}


def _edge_block(model: AttentionModel, n_layers: int, n_queries: int, n_keys: int, layer: Any, head: Any, queries: Any,
                keys: Any) -> tuple[int, EdgeBlock]:
    """One edge's (layer, head or None, queries, keys), checked against `n_layers` layers and the
    part's query and key counts: (its layer, its EdgeBlock)."""
    layer = checks.integer("an edge's layer", layer, minimum=0, maximum=n_layers - 1)
    heads = None if head is None else (checks.integer("an edge's head", head, minimum=0, maximum=model.n_heads - 1),)
    rows, cols = _positions("an edge's queries", queries, n_queries), _positions("an edge's keys", keys, n_keys)
    return layer, EdgeBlock(heads, tuple(rows), tuple(cols))


def edge_blocks(model: AttentionModel, n: int, edges: Iterable[Sequence]) -> dict[int, tuple[EdgeBlock, ...]]:
    """(layer, head or None, queries, keys) tuples (each of queries and keys one position or
    several; head None: every head) as each layer's edge blocks, checked: what a run holds (no
    T × T grid; engine/knockout.py)."""
    blocked: dict[int, list[EdgeBlock]] = {}
    if not isinstance(edges, (list, tuple)):
        raise InputError(f"edges must be a list of (layer, head or None, queries, keys), not {checks.short_repr(edges)}.")
    for edge in edges:
        if not isinstance(edge, (tuple, list)) or len(edge) != 4:
            raise InputError(f"edges: an edge is (layer, head or None, queries, keys), not {checks.short_repr(edge)}.")
        layer, block = _edge_block(model, model.n_layers, n, n, *edge)
        blocked.setdefault(layer, []).append(block)
    return {layer: tuple(blocks) for layer, blocks in blocked.items()}


def blocked_edges(model: AttentionModel, n: int, edges: Iterable[Sequence]) -> dict[int, torch.Tensor]:
    """The edges as edge_blocks reads them, each layer's as one heads × n × n grid of booleans
    (True: blocked): to look at or to check against; a knockout holds the blocks, not these."""
    return {layer: engine_knockout.dense(blocks, model.n_heads, n)
            for layer, blocks in edge_blocks(model, n, edges).items()}


def _head_grids(model: AttentionModel, heads: Iterable[Sequence], mode: str):
    if not checks.one_of(mode, MODES):
        raise InputError(f"mode must be one of {MODES}, not {checks.short_repr(mode)}.")
    if model.is_encoder_decoder:
        return _part_head_grids(model, heads, mode)
    chosen = checks.head_pairs("heads", heads)
    if not chosen:
        return None, None
    grid = torch.zeros(model.n_layers, model.n_heads, dtype=torch.bool)
    for layer, head in chosen:
        if not (0 <= layer < model.n_layers and 0 <= head < model.n_heads):
            raise InputError(f"head {(layer, head)} is not one of {model.name}'s {model.n_layers} layers × {model.n_heads} heads.")
        grid[layer, head] = True
    return ((~grid).float(), None) if mode == "zero" else (None, grid)


def _part_head_grids(model: AttentionModel, heads: Iterable[Sequence], mode: str):
    """An encoder-decoder's heads, (part, layer, head), as each part's grid (engine/knockout.py)."""
    if not isinstance(heads, (list, tuple)):
        raise InputError(f"heads must be a list of (part, layer, head), not {checks.short_repr(heads)}.")
    grids: dict[str, torch.Tensor] = {}
    for chosen in heads:
        if not isinstance(chosen, (tuple, list)) or len(chosen) != 3 or chosen[0] not in engine_knockout.PARTS:
            raise InputError(f"heads: an encoder-decoder's head is (part, layer, head), part one of {engine_knockout.PARTS}, "
                             f"not {checks.short_repr(chosen)}.")
        part, layer, head = chosen
        n_layers = len(model.groups[part])
        layer = checks.integer("a head's layer", layer, minimum=0, maximum=n_layers - 1)
        head = checks.integer("a head's head", head, minimum=0, maximum=model.n_heads - 1)
        grids.setdefault(part, torch.zeros(n_layers, model.n_heads, dtype=torch.bool))[layer, head] = True
    if not grids:
        return None, None
    if mode == "zero":
        return {part: (~grid).float() for part, grid in grids.items()}, None
    return None, grids


@dataclass
class _Reading:
    """What every knockout reads before it blocks anything: the text, where and which token. The
    model runs on first need (`runs`), so that a knockout's own arguments are checked before."""

    model: AttentionModel
    text: str | list[int]  # or the token ids read as given
    encoded: Any  # what the model reads (an encoder-decoder's: its decoder's ids too)
    at: int  # the position read
    tokens: list[str]  # the positions read (an encoder-decoder's decoder's)
    kind: str  # "next token", "masked token" or "output token"
    target: int | None  # the token whose log p is read; None: the model's own prediction
    decoder: list[int] | None = None  # an encoder-decoder's decoder ids, read before the output token
    source_length: int = 0

    @functools.cached_property
    def runs(self) -> engine_knockout.KnockoutRuns:  # the plain forward, and the knocked runs over this text
        return engine_knockout.KnockoutRuns(self.model, self.encoded, self.at)

    @functools.cached_property
    def wanted(self) -> int:
        return int(self.plain.argmax()) if self.target is None else self.target

    @property
    def plain(self) -> torch.Tensor:  # log p over the vocabulary, nothing blocked
        return self.runs.plain

    def knocked(self, blocked=None, head_mask=None, uniform=None) -> float:
        """log p of the wanted token knocked: the plain log p plus Δ, Δ taken against the
        unblocked run along the same path (engine/knockout.py: 0 where nothing changed)."""
        knocked, unblocked = self.runs.knocked(blocked, head_mask, uniform)
        if knocked is unblocked:
            return self.log_p
        return self.log_p + (float(knocked[self.wanted]) - float(unblocked[self.wanted]))

    @property
    def log_p(self) -> float:
        return float(self.plain[self.wanted])

    def tag(self, frame, kind: str, **extra):
        if self.decoder is not None:
            extra = {"decoder": self.decoder, **extra}
        frame.attrs.update({"attnscope": kind, "model": self.model.name, **model_shape(self.model), "text": self.text, "output": self.kind,
                            "position": self.at, "target": self.model.tokenizer.convert_ids_to_tokens(self.wanted),
                            "log_p": self.log_p, **extra})
        return frame


@widget_action("knockout.predicted_position")
def predicted_position(model: Any, text: str | Sequence[int], position: Any = None) -> tuple[int, int]:
    """Where knockout reads the prediction in `text` (as its `position` says) and how many tokens
    the model reads it as; nothing runs."""
    model = model_of(model, "knockout")
    _, tokens = _encoded(model, text)
    return _position(model, output_kind(model), position, tokens), len(tokens)


def reading(model: Any, text: str | Sequence[int], position: Any, target: Any, what: str, decoder: Any = None) -> _Reading:
    """The model's log p at `position` (a causal LM's next token, a masked LM's [MASK], an
    encoder-decoder's next output token after `decoder`) of `target` (its own prediction by
    default), nothing blocked. `tokens`: the positions read (an encoder-decoder's decoder's)."""
    model = model_of(model, what)
    if decoder is not None and not model.is_encoder_decoder:
        raise InputError(f"decoder={checks.short_repr(decoder)}: decoder= is what an encoder-decoder's decoder has read, "
                         f"and {model.name} is no encoder-decoder: leave it out.")
    kind = output_kind(model)
    encoded, tokens = _encoded(model, text)
    read = text if isinstance(text, str) else encoded["input_ids"][0].tolist()
    source_length, decoder_ids = len(tokens), None
    if kind == "output token":
        decoder_ids = _decoder_ids(model, decoder)
        encoded = {**encoded, "decoder_input_ids": torch.tensor([decoder_ids])}
        tokens = model.tokenizer.convert_ids_to_tokens(decoder_ids)
    return _Reading(model, read, encoded, _position(model, kind, position, tokens), tokens, kind, _target(model, target),
                    decoder_ids, source_length)


def _part_of(model: Any, what: str, part: Any, parts: tuple[str, ...]) -> str | None:
    """The part of an encoder-decoder `what` sweeps ("cross" unless one of `parts` is named);
    None for a decoder or an encoder, which has one (part= then refused). Checked before any run."""
    engine = model_of(model, what)
    if not engine.is_encoder_decoder:
        if part is not None:
            raise InputError(f"part={checks.short_repr(part)}: part= names an encoder-decoder's attention, and {engine.name} "
                             "has one kind: leave it out.")
        return None
    if part is None:
        return "cross"
    if not checks.one_of(part, parts):
        raise InputError(f"part must be one of {parts} for {what}, not {checks.short_repr(part)}.")
    return part


def _in_part(part: str | None, *item: Any) -> tuple:
    """An edge or a head as knockout takes it: with its part first in an encoder-decoder."""
    return item if part is None else (part, *item)


def _edges(read: _Reading, edges: Any) -> dict:
    """`edges` as the run's edge blocks: by layer, or by (part, layer) in an encoder-decoder."""
    if read.decoder is None:
        return edge_blocks(read.model, len(read.tokens), edges)
    n, source = len(read.tokens), read.source_length
    return part_edge_blocks(read.model, {"encoder": (source, source), "decoder": (n, n), "cross": (n, source)}, edges)


@widget_action("knockout")
def knockout(model: Any, text: str | Sequence[int], *, edges: Iterable[Sequence] = (), heads: Iterable[Sequence] = (),
             mode: str = "zero", position: Any = None, target: Any = None, decoder: Any = None):
    """Δ log p of the token the model predicts at `position` (a causal LM: the next token after
    it, by default after the last; an encoder with a masked-LM head: the mask token's, by default
    the text's one [MASK]) when `edges` are blocked ((layer, head or None, queries, keys): their
    scores −inf before the softmax) and `heads` ((layer, head)) are disabled (mode "zero": their
    output zeroed, Michel et al.; "uniform": even attention, Kovaleva et al.). target: the model's
    own prediction (None), a token id or a one-token text. text: a str (through the tokenizer), or
    the token ids the model reads, as given (no special tokens added): e.g. a generation's ids
    before a step with target= the token it chose, `run.ids[:t]`, `target=run.ids[t]`; knockout_sweep
    and knockout_heads take them alike. An encoder-decoder (BART, T5) reads its next output token:
    `text` is the source, `decoder` what its decoder has read (None: its start token alone; a str:
    the start token, then the text's tokens; token ids as given, e.g. a generation's
    `start_ids + output ids[:t]`), `position` a decoder position (default the last); each edge names
    its part first, (part, layer, head or None, queries, keys) with part "encoder", "decoder" or
    "cross" (decoder queries → source keys), and each head (part, layer, head). A one-row
    DataFrame: position, target, log_p, log_p_knocked, delta."""
    import pandas as pd

    read = reading(model, text, position, target, "knockout", decoder)
    head_mask, uniform = _head_grids(read.model, heads, mode)
    knocked = read.knocked(_edges(read, edges), head_mask, uniform)
    frame = pd.DataFrame([{"position": read.at, "target": read.model.tokenizer.convert_ids_to_tokens(read.wanted),
                           "log_p": read.log_p, "log_p_knocked": knocked, "delta": knocked - read.log_p}])
    return read.tag(frame, "knockout")


def knockout_sweep(model: Any, text: str | Sequence[int], keys: Any, *, window: int = 9, position: Any = None, target: Any = None,
                   progress: bool = True, decoder: Any = None, part: str | None = None):
    """Geva et al.'s figure: the edges from the token at `position` (as knockout's) to `keys` (a
    position or several, e.g. the subject's span) blocked in every head of a window of `window`
    layers, for each window in turn; Δ log p of the predicted token. An encoder-decoder (text:
    its source, decoder: as knockout's) sweeps one part's layers: `part` "cross" (the default:
    keys are source positions) or "decoder" (keys are decoder positions). A DataFrame:
    first_layer, last_layer, log_p, log_p_knocked, delta; widget.show_analysis shows it per window."""
    checks.flag("progress", progress)  # before the model runs
    import pandas as pd

    part = _part_of(model, "knockout_sweep", part, ("cross", "decoder"))
    read = reading(model, text, position, target, "knockout_sweep", decoder)
    n_layers = read.model.n_layers if part is None else len(read.model.groups[part])
    window = checks.integer("window", window, minimum=1, maximum=n_layers)
    n = len(read.tokens)
    spans = _positions("keys", keys, read.source_length if part == "cross" else n)
    rows = []
    starts = range(n_layers - window + 1)
    for first in progress_bar(starts, len(starts), "knockout windows", progress, unit="window"):
        edges = [_in_part(part, layer, None, read.at, spans) for layer in range(first, first + window)]
        knocked = read.knocked(_edges(read, edges))
        rows.append({"first_layer": first, "last_layer": first + window - 1, "log_p": read.log_p,
                     "log_p_knocked": knocked, "delta": knocked - read.log_p})
    extra = {} if part is None else {"part": part}
    return read.tag(pd.DataFrame(rows), "knockout_sweep", keys=spans, window=window, n_layers=n_layers, **extra)


def knockout_heads(model: Any, text: str | Sequence[int], *, mode: str = "zero", position: Any = None, target: Any = None,
                   progress: bool = True, decoder: Any = None, part: str | None = None):
    """Each head disabled in turn (mode "zero": its output zeroed, Michel et al.; "uniform": even
    attention, Kovaleva et al.), Δ log p of the token predicted at `position` (as knockout's):
    one forward per head. An encoder-decoder (text: its source, decoder: as knockout's) takes one
    part's heads: `part` "cross" (the default), "decoder" or "encoder". A tidy DataFrame: layer,
    head, label, measure ("delta"), value; widget.show_analysis shows it as a layer × head heatmap."""
    checks.flag("progress", progress)  # before the model runs
    part = _part_of(model, "knockout_heads", part, engine_knockout.PARTS)
    read = reading(model, text, position, target, "knockout_heads", decoder)
    _head_grids(read.model, [], mode)  # the mode checked before the runs
    n_layers, n_heads = (read.model.n_layers if part is None else len(read.model.groups[part])), read.model.n_heads
    delta = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    pairs = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    for layer, head in progress_bar(pairs, len(pairs), "knockout heads", progress, unit="head"):
        head_mask, uniform = _head_grids(read.model, [_in_part(part, layer, head)], mode)
        delta[layer, head] = read.knocked(None, head_mask, uniform) - read.log_p
    extra = {} if part is None else {"part": part}
    return read.tag(heads_frame({"delta": delta}), "knockout_heads", mode=mode, **extra)


def _drop_note(data: Any, what: str) -> str:
    attrs = data.attrs
    where = {"next token": "the next token", "output token": "the next output token"}.get(attrs.get("output"), "the masked token")
    part = {"cross": " (cross-attention)", "decoder": " (the decoder's self-attention)", "encoder": " (the encoder)"}.get(
        attrs.get("part"), "")
    return (f"{what}{part}: the drop in log p of {attrs.get('target', '?')!r}, {where} at position "
            f"{attrs.get('position', '?')} (log p {attrs.get('log_p', float('nan')):.3f} with nothing knocked out), "
            "−Δ log p: the larger, the more knocking out hurts the prediction; a rise (Δ > 0) is below 0.")


@analysis_view("knockout_heads")
def knockout_heads_view(data: Any, grid: Grid) -> dict:
    """Layer × head: each head's drop in log p when it alone is disabled."""
    drop = data.assign(drop=-data["value"])
    mode = "zeroed output (Michel et al.)" if data.attrs.get("mode") == "zero" else "uniform attention (Kovaleva et al.)"
    return {"measures": [{"key": "drop", "label": "Drop in log p (−Δ)", "values": grid(drop, "drop")}],
            "note": _drop_note(data, f"Each head disabled alone, {mode}")}


@analysis_view("knockout_sweep")
def knockout_sweep_view(data: Any, _grid: Grid) -> dict:
    """Layers × one column: each window's drop in log p, on the row of its first layer (Geva et
    al.'s figure); the rows past the last window are empty."""
    n_layers = int(data.attrs.get("n_layers", int(data["last_layer"].max()) + 1 if len(data) else 0))
    values = [float("nan")] * n_layers
    for first, delta in zip(data["first_layer"], data["delta"]):
        values[int(first)] = -float(delta)
    window = data.attrs.get("window", "?")
    what = (f"Edges from position {data.attrs.get('position', '?')} to keys {data.attrs.get('keys', '?')} blocked in "
            f"every head of a window of {window} layers; each row is the window starting at that layer")
    return {"measures": [{"key": "drop", "label": "Drop in log p (−Δ)", "values": values}],
            "note": _drop_note(data, what), "n_layers": n_layers,
            "columns": [{"label": "−Δ", "name": f"window of {window} layers from here"}]}
