"""What each view needs, built from results: pure functions, no widget and no traitlets.

The widget puts these into its traits and message replies; a saved page stores the same
payloads (see export.py). Binary parts are `{data: bytes, dtype, shape[, scale]}` (serialize.py),
never JSON lists.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import torch

from .. import checks
from ..analyses.tables import ANALYSIS_VIEWS, analysis_kind, analysis_shape, needs
from ..engine import formulas as an
from ..engine.exact_attention import describe_bytes, full_attention_bytes
from ..engine.nonfinite import nonfinite_message
from ..engine.results import (
    AttentionResult,
    EncoderDecoderResult,
    LongAttentionResult,
    key_labels_of,
    key_tokens_of,
    labels_of,
    parts_of,
    word_attention,
)
from ..engine.weighing import WEIGHT_SYMBOL, weighed
from ..errors import InputError
from ..labels import head_label, head_name
from ..serialize import encode_float16, encode_float32, pool_thumbnails, quantize_uint8
from .neuron_numbers import repeated_group
from .views import VIEW


def shown_tokens(result: AttentionResult, prettify: bool = True) -> list[str]:
    """What the query tokens show: the text each covers (token_labels.py), or the tokenizer's
    own strings when `prettify` is off."""
    return labels_of(result) if prettify else list(result.tokens)


def shown_key_tokens(result: AttentionResult, prettify: bool = True) -> list[str]:
    """The same for the keys of cross-attention; empty for self-attention."""
    keys = key_tokens_of(result)
    if keys is None:
        return []
    return key_labels_of(result) or [] if prettify else list(keys)


def displayed(token_result: AttentionResult, word_level: bool, show_change: bool,
              against: AttentionResult | None = None, weigh_by: str = "attention") -> tuple[AttentionResult, dict]:
    """What the views draw: each weight as `weigh_by` has it (the attention, or α·‖f(x)‖:
    weighing.py), word-level or not, |A_masked − A| when showing a masking's change, and
    |A_against − A| when comparing with a second model's run of the same tokens (`against`); with
    the scale it is drawn on (one_scale), {} for attention itself."""
    plain = token_result.unmasked or token_result
    shown = weighed(token_result, weigh_by)
    symbol = WEIGHT_SYMBOL[weigh_by]
    if word_level:
        shown = word_attention(shown)
    if show_change and token_result.masked_heads:
        reference = weighed(plain, weigh_by)
        reference = word_attention(reference) if word_level else reference
        return one_scale(shown, shown.attention - reference.attention, f"|{symbol}_masked − {symbol}|")
    if against is not None:
        other = weighed(against, weigh_by)
        other = word_attention(other) if word_level else other
        of = "|second − first|" if weigh_by == "attention" else f"|second − first| of {symbol}"
        names = (f"|{other.model_name} − {shown.model_name}|" if other.model_name != shown.model_name
                 else f"|second − first| ({shown.model_name})")
        return one_scale(dataclasses.replace(shown, model_name=names), other.attention - shown.attention, of)
    if weigh_by != "attention":
        # α·‖f‖ has no bound of 1: one scale for the run, so that heads that pass more show darker.
        return one_scale(shown, shown.attention, symbol, measure=symbol)
    return shown, {}


def one_scale(shown: AttentionResult, difference: torch.Tensor, what: str,
              measure: str = "change") -> tuple[AttentionResult, dict]:
    """A difference (L × H × Tq × Tk), or weights without a bound of 1 (α·‖f‖), as the views draw
    it: |difference| ÷ its largest anywhere in the run, so that every layer and head is drawn on
    one scale whose full line is that largest value (a head's own largest would make a change of
    0.03 look as busy as one of 0.6); and that scale, {of, measure, largest, layer, head}, from
    which the views say so and give the unscaled numbers."""
    # Weights (measure other than "change") are ≥ 0 already; a difference is made |difference|.
    change = difference.abs_() if measure == "change" else difference
    # A head whose attention is not finite (the notice names it) never sets the scale. Weights of a
    # run with none need no finite copy (a pass over L × H × T × T fewer); a difference may take its
    # NaN from the other run.
    scaled, scale = on_one_scale(change, what, measure, finite=measure != "change" and not shown.nonfinite_heads)
    return dataclasses.replace(shown, attention=scaled), scale


def on_one_scale(values: torch.Tensor, what: str, measure: str, layers: Sequence[int] | None = None,
                 heads: Sequence[int] | None = None, finite: bool = False) -> tuple[torch.Tensor, dict]:
    """Values ≥ 0 of layers × heads × ... ÷ their largest (in place), and the scale {of, measure,
    largest, layer, head}: the largest and the layer and head it is in (`layers[i]`, `heads[j]`
    where the values are of some layers and heads only). NaN and ±∞ never set it, unless `finite`
    says there are none."""
    checked = values if finite else values.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    where = checked.argmax()
    largest = float(checked.flatten()[where])
    i, j = (int(k) for k in torch.unravel_index(where, values.shape)[:2])
    if largest > 0:
        values.div_(largest)
    layer = layers[i] if layers is not None else i
    head = heads[j] if heads is not None else j
    return values, {"of": what, "measure": measure, "largest": largest, "layer": layer, "head": head}


def layer_payload(result: AttentionResult, layer: int, source: str | None = None) -> dict:
    """One layer's attention, heads × Tq × Tk, one byte per weight. `source` names what it was
    made from (the widget's run and how it is shown): a page holding several layers files them
    under it, and drops them when the source changes."""
    payload = {"layer": layer, **quantize_uint8(result.layer_attention(layer))}
    if source is not None:
        payload["source"] = source
    return payload


def thumbnails_payload(
    result: AttentionResult, include_layers: Sequence[int] | None, include_heads: Sequence[int] | None, size: int
) -> dict:
    """Max-pooled size × size maps of the included layers × heads (the model view's cells)."""
    # An encoder and a decoder may differ in depth: included layers the part lacks are left out.
    included = [layer for layer in (include_layers or []) if layer < result.n_layers]
    layers = included or list(range(result.n_layers))
    heads = list(include_heads) if include_heads is not None else list(range(result.n_heads))
    pooled = pool_thumbnails(result.attention[layers][:, heads], size)
    n_keys = len(key_tokens_of(result) or result.tokens)
    return {"layers": list(layers), "heads": heads, "n_tokens": len(result.tokens), "n_key_tokens": n_keys,
            **quantize_uint8(pooled)}


def rollout_payload(token_result: AttentionResult, word_level: bool, mixing: torch.Tensor | None = None,
                    mode: str = "contributions") -> dict:
    """The Rollout tab's matrices, L × T × T, each layer's rolled out through the layers before it
    (mode: which). "rollout": Abnar & Zuidema's rollout of the attention itself (even while the views
    show a masking's change). Given `mixing`, a run's per-layer C (L × T × T, engine/contributions.py:
    ALTI's for mode "contributions", the norms' for "norm_contributions"), those rolled out by
    products as analyses.contributions does. Word level:
    the attention, or each layer's C, merged into words first (summed over a word's pieces as keys,
    averaged as queries: rows still sum to 1)."""
    if key_tokens_of(token_result) is not None:
        return {"error": "Rollout follows self-attention through the layers: choose the encoder or the decoder."}
    source = word_attention(token_result) if word_level else token_result
    if mixing is None:
        mode, rolled = "rollout", an.rollout(source.attention)
    else:
        merged = an.merge_words(mixing[:, None], token_result.word_groups)[:, 0] if word_level else mixing
        rolled = an.rolled_out(merged)
    kinds = an.token_kinds(source.tokens)
    # [CLS] / [SEP] (and <s> / </s>) soak up rollout; the view can leave them out.
    special = (kinds.cls | kinds.sep).nonzero().flatten().tolist()
    return {"mode": mode, "n_tokens": len(source.tokens), "special": special, **quantize_uint8(rolled)}


def score_label(result: AttentionResult, layer: int) -> str:
    """How the neuron view's scores are made, in the column's title."""
    head_dim = result.queries.shape[-1] if result.queries is not None else 1
    scale = result.scaling[layer]
    scaled = "q·k / √d" if abs(scale * math.sqrt(head_dim) - 1) < 1e-6 else ("q·k" if scale == 1 else f"q·k × {scale:.3g}")
    return f"{scaled} + position bias" if result.score_bias is not None else scaled


def neuron_store(token_result: AttentionResult, layers: Sequence[int]) -> dict | None:
    """What a saved page answers "neuron" requests from as the kernel would (js/transport/saved.js), for
    `layers` (float16): queries (layers × heads × Tq × d), keys and values (layers × key-value heads
    × Tk × d: a head that grouped-query heads share is stored once, `key_group` query heads reading
    each), ‖f_h(x_j)‖ (layers × heads × Tk), T5's position bias (layers × heads × Tq × Tk), and how
    scores are made. Nothing of the maths' results: the page computes them as the live view does."""
    if token_result.queries is None or token_result.keys is None:
        return None
    layers = list(layers)
    keys = token_result.keys[layers]
    values = token_result.values[layers] if token_result.values is not None else None
    norms = token_result.value_norms[layers] if token_result.value_norms is not None and values is not None else None
    group = repeated_group(*(t for t in (keys, values) if t is not None))
    store = {"layers": layers, "queries": encode_float16(token_result.queries[layers]), "keys": encode_float16(keys[:, ::group]),
             "key_group": group, "causal": bool(token_result.causal), "scaling": [float(s) for s in token_result.scaling],
             "score_labels": {str(layer): score_label(token_result, layer) for layer in layers}}
    if values is not None:
        store.update(values=encode_float16(values[:, ::group]), norms=encode_float16(norms))
    if token_result.score_bias is not None:  # T5's position bias, added to every score
        store["bias"] = encode_float16(token_result.score_bias[layers])
    return store


def mask_summary(token_result: AttentionResult) -> str:
    """One line on what masking changed, in total variation (½ Σ_j |ΔA_ij|, averaged over rows)."""
    plain = token_result.unmasked
    if not token_result.masked_heads or plain is None:
        return ""
    names = ", ".join(head_label(layer, head) for layer, head in token_result.masked_heads)
    change = 0.5 * (token_result.attention - plain.attention).abs().sum(-1).mean((1, 2))  # per layer
    changed = [layer for layer in range(len(change)) if change[layer] > 1e-6]
    if not changed:
        return f"Masked {names}: no layer's attention changed (the masked heads feed only the output)."
    worst = int(change.argmax())
    largest = float((token_result.attention - plain.attention).abs().max())
    return (
        f"Masked {names}: attention changes from layer {changed[0]} on; largest mean change "
        f"{float(change[worst]):.3f} (total variation) in layer {worst}; largest single weight "
        f"change {largest:.3f} (Show change draws it as a full line)."
    )


def result_notice(result: AttentionResult, token_result: AttentionResult | None = None) -> str:
    """What the view must say about a run: truncated text (either side of an encoder-decoder
    model) and heads whose attention is not finite, a line each."""
    lines = []
    parts = parts_of(result)
    encoder = parts.get("encoder", result)
    if result.truncated_from is not None:
        lines.append(f"Input truncated: {result.truncated_from} tokens → {len(encoder.tokens)}. The rest of the text is not shown.")
    cut_from = result.decoder_truncated_from if isinstance(result, EncoderDecoderResult) else None
    if cut_from is not None:
        decoder = parts.get("decoder", result)
        lines.append(
            f"Decoder text truncated: {cut_from} tokens → {len(decoder.tokens)}. The rest of it is not shown."
        )
    shown = token_result or result
    if shown.nonfinite_heads:
        lines.append(nonfinite_message(shown.nonfinite_heads, shown.n_layers * shown.n_heads))
    return "\n".join(lines)


def long_notice(result: LongAttentionResult) -> str:
    """What the long views must say: truncation, and how the attention is kept."""
    lines = []
    if result.truncated_from is not None:
        lines.append(f"Input truncated: {result.truncated_from} tokens → {result.n_tokens}. The rest of the text is not shown.")
    full = full_attention_bytes(result.n_layers, result.n_heads, result.n_tokens, result.n_tokens)
    # The comparison is said where it is the point (the queries and keys take less than T × T): a short
    # run kept so (a generation, attention="on_demand") would read as a loss.
    kept = (f" ({describe_bytes(result.nbytes)}, not {describe_bytes(full)})" if result.nbytes < full else "")
    lines.append(
        f"{result.n_tokens:,} tokens: kept as each token's query and key and each row's softmax total{kept}, not as "
        "every weight; a row or tile is computed exactly when you look at it."
    )
    return "\n".join(lines)


def json_number(value: float) -> float | str | None:
    """A number as JSON can hold it: NaN (missing) as null, ±∞ as "inf" / "-inf", which the views
    read back (js/views/views.js analysisState). JSON has neither: `Infinity` in a saved page's data
    makes JSON.parse fail and nothing mounts."""
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def analysis_payload(data: Any, n_layers: int, n_heads: int, measure: str | None = None) -> dict:
    """A per-head analysis result as plain lists for the analysis view (layers × heads is small),
    made by its module's conversion (analyses.tables.ANALYSIS_VIEWS)."""
    kind = analysis_kind(data)
    if kind not in ANALYSIS_VIEWS:
        kinds = list(ANALYSIS_VIEWS)
        raise InputError(
            f"show_analysis takes what attnscope.{', '.join(kinds[:-1])} or {kinds[-1]} return, not {type(data).__name__}."
        )

    def grid(rows, value_column: str) -> list[float | str | None]:
        values: list[float | str | None] = [None] * (n_layers * n_heads)
        for layer, head, value in zip(rows["layer"], rows["head"], rows[value_column]):
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise InputError(f"This analysis's {value_column!r} column holds {checks.short_repr(value)} for "
                                 f"{head_name(layer, head)}, not a number.") from None
            if not (0 <= layer < n_layers and 0 <= head < n_heads):
                raise InputError(
                    f"This analysis has {head_name(layer, head)}, but the widget's model has "
                    f"{n_layers} layers × {n_heads} heads (layers 0..{n_layers - 1}, heads 0..{n_heads - 1}): "
                    "analyse the same model."
                )
            values[int(layer) * n_heads + int(head)] = json_number(value)
        return values

    shape = analysis_shape(data)
    if shape is not None and shape != [n_layers, n_heads]:  # a smaller model's heads would fit in silence
        raise InputError(f"This analysis is of a model with {shape[0]} layers × {shape[1]} heads, and the widget's "
                         f"model has {n_layers} × {n_heads}: analyse the same model.")
    shown = ANALYSIS_VIEWS[kind].convert(data, grid)
    measures = shown.pop("measures")
    if "columns" in shown:
        # A layout of its own: layers × the analysis's columns (kinds of token), not × heads.
        if (its_layers := shown.pop("n_layers")) != n_layers:
            raise InputError(f"This analysis has {its_layers} layers, and the widget's model {n_layers}: "
                             "analyse the same model.")
        n_heads = len(shown["columns"])
        for m in measures:
            m["values"] = [json_number(v) for v in m["values"]]
    payload: dict = {"kind": kind, "layout": ANALYSIS_VIEWS[kind].layout, "n_layers": n_layers, "n_heads": n_heads, "model": "", "note": "", **shown}
    for m in measures:
        finite = [v for v in m["values"] if isinstance(v, float)]
        m["max"] = max(finite) if finite else 1.0
        if m.get("integer") and not all(v.is_integer() for v in finite):  # the view would round them away
            raise ValueError(f"Measure {m['key']!r} says its values are integers, and they are not.")
    payload["measures"] = measures
    keys = [m["key"] for m in measures]
    if measure is not None and not checks.one_of(measure, keys):
        raise InputError(f"measure={checks.short_repr(measure)} is not in this analysis; choose one of {keys}.")
    payload["measure"] = measure or (keys[0] if keys else "")
    payload["model"] = data.attrs.get("model", "") if hasattr(data, "attrs") else ""
    return payload


def _mean_or_head(head: int) -> int | None:
    """-1 stands for the mean of the layer's heads in the long views' requests."""
    return None if head == -1 else head


def long_rows_payload(result: LongAttentionResult, layer: int, head: int, token: int, direction: str) -> tuple[dict, list[bytes]]:
    """The text view's numbers: the attention from `token` to every token (direction "from", its
    row) or to `token` from every token ("to", its column), of one head or the mean of the
    layer's heads (head -1). Exact, float32, T values."""
    if direction not in ("from", "to"):
        raise InputError(f"direction must be 'from' or 'to', not {checks.short_repr(direction)}.")
    if head == -1:
        pick = result.mean_attention_rows if direction == "from" else result.mean_attention_columns
        values = pick(layer, [token]).flatten()
    else:
        pick = result.attention_rows if direction == "from" else result.attention_columns
        values = pick(layer, head, [token]).flatten()
    encoded = encode_float32(values)
    content = {"layer": layer, "head": head, "token": token, "direction": direction,
               "n_tokens": result.n_tokens, "shape": encoded["shape"], "dtype": "float32"}
    return content, [encoded["data"]]


# A pass of a refined tile scores about this many query-key pairs (heads counted): ~0.15 s on
# this 2-core CPU, so a click waits at most that long behind a refining map. On a GPU,
# an H200 pools 1.5e10 pairs in 0.12 s: a pass of GPU_PASS_SCALE times as many pairs took 83 ms there
# (a map's first pass; a 32,768-token thumbnails pass, 0.13-0.15 s).
PASS_PAIRS = 150_000_000
GPU_PASS_SCALE = 64


def _passes(result: LongAttentionResult, pairs: int, rows_per_block: int) -> int:
    """The fewest passes (a power of two) whose share of `pairs` fits the run's device's pass
    (PASS_PAIRS), never more than the rows a block holds, so that every block has rows in every pass."""
    per_pass = PASS_PAIRS * (GPU_PASS_SCALE if result.queries[0].device.type == "cuda" else 1)
    passes = 1
    while pairs / passes > per_pass and passes * 2 <= rows_per_block:
        passes *= 2
    return passes


def tile_passes(result: LongAttentionResult, head: int, rows: Sequence[int], cols: Sequence[int], bins: int) -> int:
    """In how many passes a tile is refined (_passes): 1 when one pass fits PASS_PAIRS."""
    heads = result.n_heads if head == -1 else 1
    return _passes(result, (rows[1] - rows[0]) * (cols[1] - cols[0]) * heads,
                   (rows[1] - rows[0]) // min(bins, rows[1] - rows[0]))


def pass_offset(index: int, passes: int) -> int:
    """The rows (offset modulo passes) of pass `index`: bit-reversed, so that the passes done so far
    are spread evenly over every block (0, 4, 2, 6, 1, 5, 3, 7 for 8)."""
    bits = passes.bit_length() - 1
    return int(format(index, f"0{bits}b")[::-1], 2) if bits else 0


def long_tile_payload(
    result: LongAttentionResult, layer: int, head: int, rows: Sequence[int], cols: Sequence[int], bins: int,
    reduce: str = "max", pass_index: int | None = None,
) -> tuple[dict, list[bytes]]:
    """The map view's tile: rows × cols of one head (or the mean, head -1) pooled into at most
    bins × bins blocks (max or mean); `exact` when each block is one token pair.
    pass_index: one pass of a tile refined in `passes` (tile_passes, in the answer): "max" passes
    take the elementwise max, "mean" passes add up (exact_attention.pooled_sampled)."""
    rows, cols = (list(span) for span in result.spans(rows, cols))  # checked: a page sends them
    passes = 1 if pass_index is None else tile_passes(result, head, rows, cols, bins)
    if pass_index is not None and pass_index >= passes:
        raise InputError(f"pass={pass_index} is past this tile's {passes} passes.")
    sample = (passes, pass_offset(pass_index, passes)) if passes > 1 else None
    tile = result.pooled_tile(layer, _mean_or_head(head), rows, cols, (bins, bins), reduce, sample)
    encoded = encode_float32(tile)
    exact_tile = passes == 1 and list(tile.shape) == [rows[1] - rows[0], cols[1] - cols[0]]
    content = {"layer": layer, "head": head, "rows": rows, "cols": cols, "bins": bins, "reduce": reduce,
               "exact": exact_tile, "n_tokens": result.n_tokens, "shape": encoded["shape"], "dtype": "float32"}
    if pass_index is not None:
        content.update({"pass": pass_index, "passes": passes})
    return content, [encoded["data"]]


def window_around(token: int, n_tokens: int, size: int) -> tuple[int, int]:
    """The head view's window of a long text: `size` tokens [start, end) placed on a grid of half
    windows so that the token lies in its middle half; a click near the middle keeps the window
    where it is, and one near its edge moves it by half a window."""
    if n_tokens <= size:
        return 0, n_tokens
    half, quarter = size // 2, size // 4
    start = min(max(0, (token // half) * half - quarter), n_tokens - size)
    return start, start + size


def long_window_payload(result: LongAttentionResult, layer: int, token: int, size: int) -> tuple[dict, list[bytes]]:
    """The head view's lines on a long text: every head's exact attention among the `size` tokens
    around `token` (window_around), heads × W × W float32. Each row holds only its weights inside
    the window: the rest of the row, often most of it on a sink, lies outside."""
    start, end = window_around(token, result.n_tokens, size)
    encoded = encode_float32(result.attention_block(layer, (start, end), (start, end)))
    content = {"layer": layer, "token": token, "rows": [start, end], "n_tokens": result.n_tokens,
               "shape": encoded["shape"], "dtype": "float32"}
    return content, [encoded["data"]]


def included_heads(result: LongAttentionResult, include_layers: Sequence[int] | None,
                   include_heads: Sequence[int] | None) -> tuple[list[int], list[int]]:
    """The model view's layers and heads of a long run: those included (all where none are named)."""
    layers = [layer for layer in (include_layers or []) if layer < result.n_layers] or list(range(result.n_layers))
    heads = list(include_heads) if include_heads is not None else list(range(result.n_heads))
    return layers, heads


def thumbnail_passes(result: LongAttentionResult, include_layers: Sequence[int] | None, size: int) -> int:
    """In how many passes a long run's thumbnails are made (_passes): 1 when every included
    layer's heads fit PASS_PAIRS (the widget then makes them itself)."""
    layers, _ = included_heads(result, include_layers, None)
    n = result.n_tokens
    return _passes(result, len(layers) * result.n_heads * n * n, n // min(size, n))


def long_thumbnails_scale(weigh_by: str) -> dict | None:
    """What a long run's thumbnails are drawn on: None for attention (each head's own largest, as a
    short run's), else {of, measure, over}: α·‖f‖ has no bound of 1, and a head that passes little
    must look faint beside one that passes much, so every layer and head shown shares one scale,
    their largest value. The pooled maps are max-pooled, so that largest is the largest α·‖f‖ of
    each head's whole T × T, made a block of rows at a time (never T × T)."""
    if weigh_by == "attention":
        return None
    symbol = WEIGHT_SYMBOL[weigh_by]
    return {"of": symbol, "measure": symbol, "over": "every layer and head shown"}


def long_thumbnails_payload(result: LongAttentionResult, include_layers: Sequence[int] | None,
                            include_heads: Sequence[int] | None, size: int, weigh_by: str = "attention") -> dict:
    """The model view's cells for a long run: each head's T × T max-pooled to size × size from q, k
    and the row log-sum-exps, a layer at a time (the same payload as thumbnails_payload). Weighed
    (`weigh_by`, the run's weighing: weighing.weighed): on one scale (long_thumbnails_scale), the
    values ÷ the largest, which `one_scale` gives with where it is."""
    import torch

    layers, heads = included_heads(result, include_layers, include_heads)
    pooled = torch.stack([result.pooled(layer, size, "max")[heads] for layer in layers])
    payload = {"layers": layers, "heads": heads, "n_tokens": result.n_tokens, "n_key_tokens": result.n_tokens}
    scale = long_thumbnails_scale(weigh_by)
    if scale is not None:
        pooled, found = on_one_scale(pooled, scale["of"], scale["measure"], layers, heads)
        payload["one_scale"] = {**scale, **found}
    return {**payload, **quantize_uint8(pooled)}


def long_thumbnails_pass(result: LongAttentionResult, include_layers: Sequence[int] | None,
                         include_heads: Sequence[int] | None, size: int, pass_index: int,
                         weigh_by: str = "attention") -> tuple[dict, list[bytes]]:
    """One of thumbnail_passes' passes over a long run's thumbnails: every included head's map,
    max-pooled to size × size over 1 / passes of its rows (pass_offset), float32; the passes'
    elementwise max is long_thumbnails_payload's maps. The model view asks for them one by one
    where they are too large to make at once (32,768 tokens: tens of seconds). Weighed, the answer
    says the scale they share (long_thumbnails_scale, `one_scale`), whose largest the page takes
    from the passes it has."""
    import torch

    layers, heads = included_heads(result, include_layers, include_heads)
    passes = thumbnail_passes(result, include_layers, size)
    if pass_index >= passes:
        raise InputError(f"pass={pass_index} is past these thumbnails' {passes} passes.")
    sample, n = (passes, pass_offset(pass_index, passes)), result.n_tokens
    pooled = torch.stack([result.pooled(layer, size, "max", sample)[heads] for layer in layers])
    encoded = encode_float32(pooled)
    content = {"layers": layers, "heads": heads, "n_tokens": n, "n_key_tokens": n, "pass": pass_index, "passes": passes,
               "shape": encoded["shape"], "dtype": "float32"}
    scale = long_thumbnails_scale(weigh_by)
    if scale is not None:
        content["one_scale"] = scale
    return content, [encoded["data"]]


def needs_thumbnails(view: str, analysis: dict) -> bool:
    """The model view draws every head's thumbnail; an analysis that says it needs them (the MDS
    scatter shows one on hover) has them while it is open."""
    return VIEW[view].draws == "thumbnails" or (view == "analysis" and needs(analysis, "thumbnails"))


__all__ = [
    "analysis_payload", "long_notice", "long_rows_payload", "long_thumbnails_pass", "long_thumbnails_payload",
    "long_thumbnails_scale", "long_tile_payload", "long_window_payload", "pass_offset", "thumbnail_passes", "tile_passes",
    "displayed", "layer_payload", "on_one_scale", "one_scale", "mask_summary", "needs_thumbnails",
    "neuron_store", "result_notice", "rollout_payload", "score_label", "shown_key_tokens", "shown_tokens", "thumbnails_payload", "window_around",
]
