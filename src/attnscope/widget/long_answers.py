"""A long run's answers to the views' requests: rows, tiles, windows and thumbnail passes.

One object answers them for the live widget (its channel, for each request the page sends) and
for the saved page (the answers it holds to the requests its open layer makes). Each request is
untrusted input, checked against the run before any work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import checks
from ..engine.results import LongAttentionResult
from . import payloads as pl
from .messages import WINDOW_TOKENS

Answer = tuple[dict, list]


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

    TYPES = ("attention_rows", "attention_tile", "attention_window", "thumbnails")

    @classmethod
    def of(cls, widget: Any) -> LongAnswers:
        """The answers for what a widget shows (its long run, run id and model-view settings)."""
        return cls(widget.result, widget.result_id, widget.include_layers, widget.include_heads,
                   widget._thumbnail_size, widget.weigh_by)

    def handler(self, type_: str) -> Callable[[dict], Answer]:
        return {"attention_rows": self.rows, "attention_tile": self.tile, "attention_window": self.window,
                "thumbnails": self.thumbnails}[type_]

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
