"""Attention knockout measured on the output (Geva et al. 2023, "Dissecting Recall of Factual
Associations"; Kovaleva et al.'s and Michel et al.'s disabled heads): block edges query → key in
chosen layers and heads, or disable whole heads, and read the change of log p of the token the
model predicts after a position. The edges are blocked inside the model's own attention kernel
(engine/knockout.py), so that with nothing blocked the run is its plain forward.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from .. import checks
from ..engine import knockout as engine_knockout
from ..engine.attention_model import AttentionModel, model_of
from ..errors import InputError
from ..progress import progress as progress_bar

MODES = ("zero", "uniform")


def _encoded(model: AttentionModel, text: str) -> tuple[Any, list[str]]:
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"text must be a non-empty str, not {checks.kind_of(text)}.")
    encoded = model.tokenizer(text, return_tensors="pt")
    return encoded, model.tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())


def _position(position: Any, n: int) -> int:
    position = checks.integer("position", position, minimum=-n, maximum=n - 1)
    return position % n


def _target(model: AttentionModel, target: Any, plain: torch.Tensor) -> int:
    """The token whose log p is read: the model's own prediction (None), a token id, or a text of one token."""
    if target is None:
        return int(plain.argmax())
    if isinstance(target, str):
        ids = model.tokenizer(target, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise InputError(f"target={target!r} is {len(ids)} tokens for this tokenizer: give one token (or its id).")
        return ids[0]
    return checks.integer("target", target, minimum=0, maximum=plain.shape[0] - 1)


def _positions(name: str, value: Any, n: int) -> list[int]:
    values = [value] if isinstance(value, int) or hasattr(value, "__index__") else list(value)
    if not values:
        raise InputError(f"{name} lists no position.")
    return sorted({_position(v, n) for v in values})


def blocked_edges(model: AttentionModel, n: int, edges: Iterable[Sequence]) -> dict[int, torch.Tensor]:
    """(layer, head or None, queries, keys) tuples (each of queries and keys one position or
    several; head None: every head) as each layer's heads × n × n blocked edges."""
    blocked: dict[int, torch.Tensor] = {}
    for edge in edges:
        if not isinstance(edge, (tuple, list)) or len(edge) != 4:
            raise InputError(f"An edge is (layer, head or None, queries, keys), not {checks.short_repr(edge)}.")
        layer, head, queries, keys = edge
        layer = checks.integer("an edge's layer", layer, minimum=0, maximum=model.n_layers - 1)
        heads = range(model.n_heads) if head is None else [checks.integer("an edge's head", head, minimum=0,
                                                                           maximum=model.n_heads - 1)]
        grid = blocked.setdefault(layer, torch.zeros(model.n_heads, n, n, dtype=torch.bool))
        rows, cols = _positions("an edge's queries", queries, n), _positions("an edge's keys", keys, n)
        for h in heads:
            grid[h][torch.tensor(rows)[:, None], torch.tensor(cols)[None, :]] = True
    return blocked


def _head_grids(model: AttentionModel, heads: Iterable[Sequence], mode: str):
    if not checks.one_of(mode, MODES):
        raise InputError(f"mode must be one of {MODES}, not {checks.short_repr(mode)}.")
    chosen = [checks.head_pair(pair) for pair in heads]
    if not chosen:
        return None, None
    grid = torch.zeros(model.n_layers, model.n_heads, dtype=torch.bool)
    for layer, head in chosen:
        if not (0 <= layer < model.n_layers and 0 <= head < model.n_heads):
            raise InputError(f"head {(layer, head)} is not one of {model.name}'s {model.n_layers} layers × {model.n_heads} heads.")
        grid[layer, head] = True
    return ((~grid).float(), None) if mode == "zero" else (None, grid)


def _causal_lm(model: AttentionModel) -> None:
    hf = model.model
    if not model.causal or getattr(hf, "get_output_embeddings", lambda: None)() is None:
        raise InputError(f"{model.name} has no next-token head to read a token's log p from: knockout needs a causal "
                         "LM (AutoModelForCausalLM, or attnscope.load('smollm2')). An encoder's masked-LM target is "
                         "not supported yet.")


def knockout(model: Any, text: str, *, edges: Iterable[Sequence] = (), heads: Iterable[Sequence] = (),
             mode: str = "zero", position: int = -1, target: Any = None):
    """Δ log p of the token predicted after `position` when `edges` are blocked ((layer, head or
    None, queries, keys): their scores −inf before the softmax) and `heads` ((layer, head)) are
    disabled (mode "zero": their output zeroed, Michel et al.; "uniform": even attention,
    Kovaleva et al.). target: the model's own prediction (None), a token id or a one-token text.
    A one-row DataFrame: position, target, log_p, log_p_knocked, delta."""
    import pandas as pd

    model = model_of(model, "knockout")
    _causal_lm(model)
    encoded, tokens = _encoded(model, text)
    n = len(tokens)
    at = _position(position, n)
    plain = engine_knockout.next_token_log_probs(model, encoded, at)
    wanted = _target(model, target, plain)
    head_mask, uniform = _head_grids(model, heads, mode)
    blocked = blocked_edges(model, n, edges)
    knocked = engine_knockout.next_token_log_probs(model, encoded, at, blocked, head_mask, uniform)
    frame = pd.DataFrame([{"position": at, "target": model.tokenizer.convert_ids_to_tokens(wanted),
                           "log_p": float(plain[wanted]), "log_p_knocked": float(knocked[wanted]),
                           "delta": float(knocked[wanted] - plain[wanted])}])
    frame.attrs.update({"attnscope": "knockout", "model": model.name, "text": text})
    return frame


def knockout_sweep(model: Any, text: str, keys: Any, *, window: int = 9, position: int = -1, target: Any = None,
                   progress: bool = True):
    """Geva et al.'s figure: the edges from the token at `position` to `keys` (a position or
    several, e.g. the subject's span) blocked in every head of a window of `window` layers,
    for each window in turn; Δ log p of the predicted token. A DataFrame: first_layer,
    last_layer, log_p, log_p_knocked, delta."""
    import pandas as pd

    model = model_of(model, "knockout_sweep")
    _causal_lm(model)
    window = checks.integer("window", window, minimum=1, maximum=model.n_layers)
    encoded, tokens = _encoded(model, text)
    n = len(tokens)
    at = _position(position, n)
    spans = _positions("keys", keys, n)
    plain = engine_knockout.next_token_log_probs(model, encoded, at)
    wanted = _target(model, target, plain)
    rows = []
    starts = range(model.n_layers - window + 1)
    for first in progress_bar(starts, len(starts), "knockout windows", progress, unit="window"):
        layers = range(first, first + window)
        blocked = blocked_edges(model, n, [(layer, None, at, spans) for layer in layers])
        knocked = engine_knockout.next_token_log_probs(model, encoded, at, blocked)
        rows.append({"first_layer": first, "last_layer": first + window - 1, "log_p": float(plain[wanted]),
                     "log_p_knocked": float(knocked[wanted]), "delta": float(knocked[wanted] - plain[wanted])})
    frame = pd.DataFrame(rows)
    frame.attrs.update({"attnscope": "knockout_sweep", "model": model.name, "text": text, "position": at,
                        "keys": spans, "target": model.tokenizer.convert_ids_to_tokens(wanted), "window": window})
    return frame
