"""A long run's answers to the views' requests: rows, tiles, windows and thumbnail passes.

One object answers them for the live widget (its channel, for each request the page sends) and
for the saved page (the answers it holds to the requests its open layer makes, and a generation's
kept steps, from which js/saved.js answers a click on any output token). Each request is
untrusted input, checked against the run before any work.

A generation's steps as a saved page keeps them (issue 48 item 6): each output token's row, for
every layer, head and the mean of the layer's heads, sparse, its largest weights with their keys,
as the head finder keeps its examples' keys (analyses/head_finder.py TOP_KEYS). The budget keeps a
256-step page of SmolLM2 (30 layers × 9 heads) near 4 MB (a key is 2 bytes, its weight a float16):
the mean, which the text view opens on, keeps more keys than a head, whose row is mostly on a few.
The page says the budget, what it drops and the share of the rows' weight it keeps (step_note).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import checks
from ..engine.results import LongAttentionResult
from ..serialize import encode_float16, encode_float32
from . import payloads as pl
from .messages import WINDOW_TOKENS

Answer = tuple[dict, list]

STEP_HEAD_KEYS = 8  # per head's row of a step
STEP_MEAN_KEYS = 32  # per row of the mean of the layer's heads
KEPT_STEPS = 256  # the first steps kept; a later one says it needs the live widget


@dataclass(frozen=True)
class LongAnswers:
    """Answers for `result` (shown as run `result_id`: the drawn run, weighed as the widget's
    weigh_by says) with the widget's model-view settings."""

    result: LongAttentionResult
    result_id: int
    include_layers: Sequence[int] | None
    include_heads: Sequence[int] | None
    thumbnail_size: int
    # What the numbers are (the widget's weigh_by): an answer says it, so that the page files it
    # apart from the same request's answer in the other weighing.
    weigh_by: str = "attention"

    TYPES = ("attention_rows", "attention_tile", "attention_window", "thumbnails", "token_rows")

    @classmethod
    def of(cls, widget: Any) -> LongAnswers:
        """The answers for what a widget shows (its long run, run id and model-view settings)."""
        return cls(widget.result, widget.result_id, widget.include_layers, widget.include_heads,
                   widget._thumbnail_size, widget.weigh_by)

    def handler(self, type_: str) -> Callable[[dict], Answer]:
        return {"attention_rows": self.rows, "attention_tile": self.tile, "attention_window": self.window,
                "thumbnails": self.thumbnails, "token_rows": self.token_rows}[type_]

    def _layer_head(self, request: dict) -> tuple[int, int]:
        result = self.result
        layer = checks.integer("layer", request.get("layer"), minimum=0, maximum=result.n_layers - 1)
        head = checks.integer("head", request.get("head"), minimum=-1, maximum=result.n_heads - 1)
        return layer, head

    def _named(self, answer: Answer) -> Answer:
        content, buffers = answer
        return {**content, "result_id": self.result_id, "weigh_by": self.weigh_by}, buffers

    def rows(self, request: dict) -> Answer:
        """The text view's shading, from or to one token."""
        layer, head = self._layer_head(request)
        token = checks.integer("token", request.get("token"), minimum=0, maximum=self.result.n_tokens - 1)
        return self._named(pl.long_rows_payload(self.result, layer, head, token, request.get("direction")))

    def tile(self, request: dict) -> Answer:
        """A region of one head's map (or the mean, head -1), pooled to the view's pixels; one
        pass of it when the request names one."""
        layer, head = self._layer_head(request)
        spans = [request.get(name) for name in ("rows", "cols")]
        bins = checks.integer("bins", request.get("bins"), minimum=1, maximum=1024)
        pass_index = None if request.get("pass") is None else checks.integer("pass", request.get("pass"), minimum=0)
        return self._named(pl.long_tile_payload(self.result, layer, head, *spans, bins, request.get("reduce", "max"),
                                                pass_index))

    def window(self, request: dict) -> Answer:
        """The head view's lines among the WINDOW_TOKENS tokens around one."""
        layer, _ = self._layer_head({"head": -1, **request})
        token = checks.integer("token", request.get("token"), minimum=0, maximum=self.result.n_tokens - 1)
        return self._named(pl.long_window_payload(self.result, layer, token, WINDOW_TOKENS))

    def thumbnails(self, request: dict) -> Answer:
        """One pass over the model view's thumbnails."""
        pass_index = checks.integer("pass", request.get("pass"), minimum=0)
        return self._named(pl.long_thumbnails_pass(self.result, self.include_layers, self.include_heads,
                                                   self.thumbnail_size, pass_index, self.weigh_by))

    def token_rows(self, request: dict) -> Answer:
        """The model view's cells for one selected token: its row in every included layer × head."""
        token = checks.integer("token", request.get("token"), minimum=0, maximum=self.result.n_tokens - 1)
        return self._named(token_rows_payload(self.result, self.include_layers, self.include_heads, token))

    def steps(self, first: int, layers: Sequence[int]) -> dict:
        """A generation's kept steps for a saved page, within the budget above: rows first, first +
        1, ... (the output tokens), of `layers`, sparse (step_rows)."""
        return step_rows(self.result, first, layers, STEP_HEAD_KEYS, STEP_MEAN_KEYS, KEPT_STEPS)


def token_rows_payload(result: LongAttentionResult, include_layers: Sequence[int] | None,
                       include_heads: Sequence[int] | None, token: int) -> Answer:
    """Token `token`'s exact row (its attention to every token, weighed as the run is) in every
    included layer × head: float32 [layers, heads, 1, T], the model view's thumbnail shape with
    one query row, from the on-demand rows (heads × 1 × T a layer, never T × T)."""
    layers, heads = pl.included_heads(result, include_layers, include_heads)
    n = result.n_tokens
    rows = torch.stack([result.attention_block(layer, (token, token + 1), (0, n))[heads] for layer in layers])
    encoded = encode_float32(rows)
    content = {"token": token, "layers": layers, "heads": heads, "n_tokens": n, "shape": encoded["shape"], "dtype": "float32"}
    return content, [encoded["data"]]


def _top(rows: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's k largest weights (largest first), their keys, and the share of the row's weight
    they hold (a row that passes nothing keeps all of its nothing: 1)."""
    weights, keys = rows.topk(k, dim=-1)
    total = rows.sum(-1)
    share = torch.where(total > 0, weights.sum(-1) / total.clamp_min(torch.finfo(torch.float32).tiny), 1.0)
    return keys, weights, share


def step_rows(result: LongAttentionResult, first: int, layers: Sequence[int], head_keys: int = STEP_HEAD_KEYS,
              mean_keys: int = STEP_MEAN_KEYS, kept_steps: int = KEPT_STEPS) -> dict:
    """The rows of tokens first .. first + kept − 1 (kept: at most kept_steps), for every head and
    for the mean of the heads of each of `layers`: {first, steps (all output tokens), kept, layers,
    n_tokens, n_heads, head_keys, mean_keys, heads: {keys, weights, share}, mean: {...},
    window_starts, window_tokens, summary, note}. keys and weights: layers × heads (heads only) ×
    kept × keys, largest first (keys uint16, or uint32 past 65,536 tokens; weights float16);
    share: per row, the share of its weight kept; window_starts: where the head view's window
    around each kept token starts (payloads.window_around). Computed a layer at a time (heads ×
    kept × T float32), from the drawn run (weighed as the widget weighs)."""
    n = result.n_tokens
    first = checks.integer("first", first, minimum=0, maximum=n)
    kept = min(n - first, checks.integer("kept_steps", kept_steps, minimum=0))
    head_keys, mean_keys = min(head_keys, n), min(mean_keys, n)
    found: dict[str, list] = {"heads": [], "mean": []}
    for layer in layers:
        block = result.attention_block(layer, (first, first + kept), (0, n)) if kept else torch.zeros(result.n_heads, 0, n)
        found["heads"].append(_top(block, head_keys))
        found["mean"].append(_top(block.mean(0), mean_keys))
    store: dict[str, Any] = {"first": first, "steps": n - first, "kept": kept, "layers": list(layers), "n_tokens": n,
                             "n_heads": result.n_heads, "head_keys": head_keys, "mean_keys": mean_keys}
    summary = {}
    key_type = np.uint16 if n <= 2**16 else np.uint32
    for name, per_layer in found.items():
        keys, weights, share = (torch.stack(part) for part in zip(*per_layer))
        # α·‖f‖ (Weigh by value norm) is not bounded by 1: past float16's range it is kept as float32.
        encode = encode_float16 if weights.numel() == 0 or float(weights.abs().max()) < 6e4 else encode_float32
        store[name] = {"keys": {"data": keys.numpy().astype(key_type).tobytes(), "dtype": np.dtype(key_type).name,
                                "shape": list(keys.shape)},
                       "weights": encode(weights), "share": encode_float16(share)}
        summary[name] = {"mean": float(share.mean()) if share.numel() else 1.0,
                         "least": float(share.min()) if share.numel() else 1.0}
    store["summary"] = summary
    store["window_starts"] = [pl.window_around(token, n, WINDOW_TOKENS)[0] for token in range(first, first + kept)]
    store["window_tokens"] = WINDOW_TOKENS
    store["note"] = step_note(store)
    return store


def _percent(share: float) -> str:
    """A share as the page says it: 97%, 99.6%, 100%, never rounded up to 100% (js/saved.js percent)."""
    return f"{100 * share:.0f}%" if share < 0.995 else f"{100 * share:.1f}%" if share < 0.9995 else "100%"


def step_note(store: dict) -> str:
    """What a saved page keeps of a generation's steps, and what it drops, in a line."""
    steps, kept, summary = store["steps"], store["kept"], store["summary"]
    if not steps:
        return "This saved page keeps no output tokens' rows: the model wrote none."
    which = f"step 1 (token {store['first']})" if kept == 1 else f"steps 1–{kept} (tokens {store['first']}–{store['first'] + kept - 1})"
    heads, mean = summary["heads"], summary["mean"]
    text = (f"This saved page replays {which}: each head's row keeps its {store['head_keys']} largest weights "
            f"({_percent(heads['mean'])} of a row's weight on average on this page, at least {_percent(heads['least'])}), "
            f"the mean of the heads its {store['mean_keys']} largest ({_percent(mean['mean'])}, at least "
            f"{_percent(mean['least'])}), each to 3 digits; the other weights show as 0.")
    later = f" Steps after {kept} are not kept." if kept < steps else ""
    return (f"{text}{later} The prompt's own rows need the live widget, as does the attention to a token other "
            "than the one the page opens on.")
