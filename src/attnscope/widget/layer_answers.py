"""The head view's "layer" requests, the kernel's side: another layer of the shown run for the page
to hold (a layer switch then draws at once), or the open layer under the other weighing, with the
scale it is drawn on (a "Weigh by" switch then draws at once: issue 47 asks for 100 ms, and the
kernel's part alone took 52-122 ms at 512 tokens before the page drew anything).

The other weighing's run is made for the answer and not kept (a second L × H × T × T copy beside
the widget's: 151 MB for bert-base at 512 tokens); the switch itself weighs the run again in the
kernel after the page has drawn. Each request is untrusted input, checked against the widget's run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import checks
from ..engine.results import LongAttentionResult
from ..errors import InputError
from . import payloads as pl
from .widget_state import drawn_run, source


def answer_layer(widget: Any, request: dict) -> tuple[dict, list]:
    """{layer[, weigh_by[, thumbnails]]} → that layer, as the `attention` trait would hold it:
    {layer, dtype, shape, scale[, encoding], source} and its bytes. With a weigh_by other than the
    widget's: the layer as that switch would draw it, with `one_scale` (the trait's value after it)
    and `of`, the source of the run shown now (the page takes it only while that run is the one
    shown); with thumbnails true (the model view is open), the model view's cells of the included
    layers and heads as well, as the `thumbnails` trait will hold them, their bytes the second buffer."""
    result = widget.result
    if isinstance(result, LongAttentionResult):
        raise InputError(f"This text of {result.n_tokens:,} tokens keeps its attention on demand: its layers "
                         "come as rows, tiles and windows, not whole.")
    layer = checks.integer("layer", request.get("layer"), minimum=0, maximum=result.n_layers - 1)
    weigh_by = request.get("weigh_by", widget.weigh_by)
    shown = source(widget.result_id, widget)
    if weigh_by == widget.weigh_by:
        payload = pl.layer_payload(result, layer, shown)
    else:
        # The weighing checks weigh_by and refuses a run without value norms by its reason.
        settings = dataclasses.replace(widget._settings(), weigh_by=weigh_by)
        _, drawn, one_scale = drawn_run(widget._computed_run, settings)
        payload = {**pl.layer_payload(drawn, layer, source(widget.result_id, settings)),
                   "weigh_by": weigh_by, "one_scale": one_scale, "of": shown}
        if checks.flag("thumbnails", request.get("thumbnails", False)):
            thumbnails = pl.thumbnails_payload(drawn, widget.include_layers, widget.include_heads, widget._thumbnail_size)
            data = payload.pop("data")
            payload["thumbnails"] = {name: value for name, value in thumbnails.items() if name != "data"}
            return payload, [data, thumbnails["data"]]
    data = payload.pop("data")
    return payload, [data]

