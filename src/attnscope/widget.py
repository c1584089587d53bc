"""The anywidget: thin glue between an AttentionModel and the JavaScript views in js/.

Trait contract with js/widget.js (all synced):
- text, text_b: the sentence(s) shown. JS never sets them; an edit in the browser sets `request`
  = {id, text, text_b}, the kernel recomputes and answers with `result_id` = that id, so the view
  can ignore stale answers when the user types faster than the model runs.
- tokens, sentence_b_start, n_layers, n_heads, model_name: the current run.
- layer: the selected layer; `attention` carries that one layer as uint8 bytes
  ({layer, data, dtype, shape: [heads, T, T], scale}), replaced when `layer` changes.
- heads (visible heads), sentence_filter, theme: view state, kept across edits.
- notice / error: visible messages; after a failed edit the previous view stays.
- view: "head", "model" or "neuron". `thumbnails` (model view) is computed only while the model
  view is shown: max-pooled S × S maps of the included layers × heads, uint8
  ({layers, heads, n_tokens, data, dtype, shape, scale}).
- editable: False when the view shows precomputed attention (no model to rerun).
- parts, attention_part, key_tokens: encoder-decoder models have "encoder", "decoder" and "cross"
  attention; the views show attention_part. For cross-attention key_tokens are the encoder's
  tokens (the right column and the neuron view's keys); otherwise it is empty.
- causal: the shown attention is causal (the head view says later tokens are masked).
- custom messages {type: "rendered"} (a view exists) and {type: "image", id, format}: save_image
  asks the view for an SVG or PNG and the view answers with its bytes.
- word_level: wordpieces merged into words (Clark et al. 4.1) in the head, model and rollout views;
  the neuron view stays per token.
- masked_heads: [[layer, head], ...] switched off (Michel et al.'s ξ_h = 0); the kernel reruns and
  `mask_summary` says what changed; with show_change the head/model views draw |A_masked − A|.
- view "rollout": `rollout` carries Abnar & Zuidema's rollout of every layer (uint8, [L, T, T]).
- view "analysis": `analysis` holds a per-head table set by `show_analysis()` (head_stats,
  head_importance, syntax_heads, head_distances) as plain lists; it is small (layers × heads).
- neuron_head, neuron_query: the neuron view's head and query token. Its numbers (q, k, q×k,
  q·k, softmax of one query) are asked for with a custom message {type: "neuron", id, layer,
  head, query} and answered with {type: "neuron", id, layer, head, query, result_id, d, n_tokens}
  plus five float16 buffers: query (d), keys (T×d), products (T×d), scores (T), softmax (T).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import warnings
from pathlib import Path
from typing import Any

import anywidget
import traitlets
from traitlets import Dict, Enum, Int, List, Unicode

from . import analysis as an
from . import checks
from .bertology import SyntaxHeads, word_attention
from .engine import AttentionModel, AttentionResult, NonFiniteAttentionWarning, head_pair, load, nonfinite_message
from .errors import AttnscopeError, InputError
from .files import write_atomic
from .neuron import neuron_slice
from .serialize import display_tokens, encode_float16, pool_thumbnails, quantize_uint8

STATIC = Path(__file__).parent / "static"
VIEWS = ("head", "model", "neuron", "rollout", "analysis")
THUMBNAIL_SIZE = 48

# Shown instead of a blank cell when the package was installed without its built front end.
_MISSING_BUNDLE_ESM = """
export default { render({ el }) {
  const p = document.createElement("pre");
  p.textContent = "attnscope: the JavaScript bundle is missing (src/attnscope/static/widget.js). " +
    "Build it with `npm install && npm run build`, or reinstall attnscope.";
  p.style.color = "#b00020";
  el.appendChild(p);
} };
"""


def _static(name: str, fallback: str) -> str:
    """The bundle's text. Never a Path: anywidget turns a path into a watched FileContents whose
    change signal keeps a reference to every widget ever made, so closed widgets were never freed.
    The trailing newline keeps anywidget from reading a one-line bundle as a file name."""
    path = STATIC / name
    return path.read_text(encoding="utf-8").rstrip("\n") + "\n" if path.is_file() else fallback


@functools.lru_cache(maxsize=4)
def _default_engine(device: str | None) -> AttentionModel:
    # Loading takes seconds; every show() without a model reuses the embedded one.
    return load(None, device=device)


def resolve_engine(model: Any = None, tokenizer: Any = None, device: str | None = None) -> AttentionModel:
    if isinstance(model, AttentionModel):
        return model
    if model is None and tokenizer is None:
        return _default_engine(device)
    return load(model, tokenizer, device)


def result_notice(result: AttentionResult, token_result: AttentionResult | None = None) -> str:
    """What the view must say about a run: truncated text (either side of an encoder-decoder
    model) and heads whose attention is not finite."""
    lines = []
    encoder = (result.parts or {}).get("encoder", result)
    if result.truncated_from is not None:
        lines.append(f"Input truncated: {result.truncated_from} tokens → {len(encoder.tokens)}. The rest of the text is not shown.")
    if result.decoder_truncated_from is not None:
        decoder = (result.parts or {}).get("decoder", result)
        lines.append(
            f"Decoder text truncated: {result.decoder_truncated_from} tokens → {len(decoder.tokens)}. The rest of it is not shown."
        )
    bad = (token_result or result).nonfinite_heads
    if bad:
        total = (token_result or result).n_layers * (token_result or result).n_heads
        lines.append(nonfinite_message(bad, total))
    return "\n".join(lines)


class AttentionWidget(anywidget.AnyWidget):
    """Live attention views of one text (or text pair) for a model.

    >>> w = AttentionWidget("The cat sat on the mat.")           # embedded MiniLM
    >>> w = AttentionWidget("A question?", "An answer.", model="bert-base-uncased", layer=5)
    """

    _esm = _static("widget.js", _MISSING_BUNDLE_ESM)
    _css = _static("widget.css", "")

    view = Enum(VIEWS, default_value="head").tag(sync=True)
    text = Unicode("").tag(sync=True)
    text_b = Unicode(None, allow_none=True).tag(sync=True)
    request = Dict().tag(sync=True)
    result_id = Int(0).tag(sync=True)

    tokens = List(Unicode()).tag(sync=True)
    sentence_b_start = Int(None, allow_none=True).tag(sync=True)
    n_layers = Int(0).tag(sync=True)
    n_heads = Int(0).tag(sync=True)
    model_name = Unicode("").tag(sync=True)

    layer = Int(0).tag(sync=True)
    attention = Dict().tag(sync=True)
    heads = List(Int()).tag(sync=True)
    sentence_filter = Enum(("all", "aa", "bb", "ab", "ba"), default_value="all").tag(sync=True)
    theme = Enum(("auto", "light", "dark"), default_value="auto").tag(sync=True)

    thumbnails = Dict().tag(sync=True)
    include_layers = List(Int(), default_value=None, allow_none=True).tag(sync=True)
    include_heads = List(Int(), default_value=None, allow_none=True).tag(sync=True)
    neuron_head = Int(0).tag(sync=True)
    neuron_query = Int(0).tag(sync=True)
    has_queries_keys = traitlets.Bool(True).tag(sync=True)

    editable = traitlets.Bool(True).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    # Encoder-decoder models: which attention is shown, and the encoder tokens for cross-attention.
    attention_part = Enum(("encoder", "decoder", "cross"), default_value="encoder").tag(sync=True)
    parts = List(Unicode()).tag(sync=True)
    key_tokens = List(Unicode()).tag(sync=True)
    word_level = traitlets.Bool(False).tag(sync=True)
    masked_heads = List(List(Int()), default_value=[]).tag(sync=True)
    show_change = traitlets.Bool(False).tag(sync=True)
    mask_summary = Unicode("").tag(sync=True)
    rollout = Dict().tag(sync=True)
    analysis = Dict().tag(sync=True)

    notice = Unicode("").tag(sync=True)
    error = Unicode("").tag(sync=True)

    def __init__(
        self,
        text: str | None = None,
        text_b: str | None = None,
        model: Any = None,
        *,
        tokenizer: Any = None,
        device: str | None = None,
        layer: int = 0,
        heads: list[int] | None = None,
        max_length: int | None = None,
        view: str = "head",
        theme: str = "auto",
        include_layers: list[int] | None = None,
        include_heads: list[int] | None = None,
        thumbnail_size: int = THUMBNAIL_SIZE,
        word_level: bool = False,
        masked_heads: list[tuple[int, int]] | None = None,
        result: AttentionResult | None = None,
        prettify_tokens: bool = True,
        **kwargs: Any,
    ):
        # With `result` (precomputed attention, e.g. from the BertViz-style functions) there is no
        # model: the views work, editing and masking say they need one.
        if result is not None and (text is not None or model is not None):
            raise InputError("Give either precomputed attention (result=) or a text to run, not both.")
        if result is None and text is None:
            raise InputError("Give the text to show, e.g. AttentionWidget(\"The cat sat on the mat.\").")
        self._thumbnail_size = checks.integer("thumbnail_size", thumbnail_size, minimum=1, maximum=4096)
        checks.integer("layer", layer, minimum=0)
        if heads is not None:
            heads = checks.indices("heads", heads, None, "heads")  # the range once the model is known
        self._engine = None if result is not None else resolve_engine(model, tokenizer, device)
        self._prettify = bool(prettify_tokens)
        self._max_length = max_length
        self._thumbnails_of: tuple | None = None
        self._rollout_of: tuple | None = None
        self._applying = False
        self._masks = [list(head_pair(pair)) for pair in (masked_heads or [])]
        self._word_level = bool(word_level)
        # Bad input raises here, before anything is displayed: a clear Python error, no blank cell.
        if result is None:
            result = self._run(text, text_b)
        elif self._masks:
            raise InputError(NEEDS_A_MODEL.format(what="Masking heads"))
        include_layers = checks.indices("include_layers", include_layers, result.n_layers, "layers")
        include_heads = checks.indices("include_heads", include_heads, result.n_heads, "heads")
        super().__init__(
            theme=theme, include_layers=include_layers, include_heads=include_heads,
            word_level=self._word_level, masked_heads=self._masks, editable=self._engine is not None, **kwargs,
        )
        self._apply(result, request_id=0, layer=layer, heads=heads)
        self.view = view  # after the first result: the model view's thumbnails need it
        self.on_msg(self._on_custom_message)

    def _ipython_display_(self, **kwargs: Any) -> None:
        # The BertViz-style functions display their widget at once (BertViz's do, even mid-cell)
        # and return it; when such a call is the cell's last line, its echo must not draw it twice.
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and getattr(self, "_displayed_in_cell", None) == shell.execution_count:
            self._displayed_in_cell = None
            return
        bundle = self._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, None)  # anywidget adds metadata
        display(data, metadata=metadata, raw=True)

    @property
    def result(self) -> AttentionResult:
        """The AttentionResult behind the current view (tensors on the model's device): word-level
        when `word_level` is on, with `masked_heads` switched off when any are."""
        return self._kept("_result")

    @property
    def token_result(self) -> AttentionResult:
        """The per-token result (what the neuron view uses), with masked heads applied."""
        return self._kept("_token_result")

    def _kept(self, name: str) -> AttentionResult:
        try:
            return self.__dict__[name]
        except KeyError:
            raise InputError("This widget was closed, and its results were freed with it.") from None

    def close(self) -> None:
        """Close the widget (its views go) and free its results: a closed widget can never be
        shown again, and its tensors (0.2 GB at 512 tokens on bert-base) must not outlive it."""
        super().close()
        for name in ("_result", "_token_result", "_full_result"):
            self.__dict__.pop(name, None)
        self._applying = True  # the payloads go too, without recomputing anything
        try:
            self.attention, self.thumbnails, self.rollout = {}, {}, {}
        finally:
            self._applying = False

    @property
    def engine(self) -> AttentionModel | None:
        """The model behind the view; None for precomputed attention."""
        return self._engine

    def _run(self, text: str, text_b: str | None) -> AttentionResult:
        """The token-level run with the current masks; the unmasked run is kept to show changes."""
        if self._engine is None:
            raise InputError(NEEDS_A_MODEL.format(what="Changing the text"))
        with warnings.catch_warnings():
            # Truncation and NaN heads are shown in the widget's notice; a warning would print the
            # same under the cell too.
            warnings.filterwarnings("ignore", message="(Input|Decoder text) truncated", category=UserWarning)
            warnings.filterwarnings("ignore", category=NonFiniteAttentionWarning)
            plain = self._engine.run(text, text_b, self._max_length)
            if not self._masks:
                return plain
            masked = self._engine.run(text, text_b, self._max_length, masked_heads=self._masks)
        masked.unmasked = plain
        return masked

    def _displayed(self, token_result: AttentionResult) -> AttentionResult:
        """What the views draw: word-level or not, and |A_masked − A| when showing the change."""
        plain = token_result.unmasked or token_result
        shown, reference = token_result, plain
        if self._word_level:
            shown, reference = word_attention(token_result), word_attention(plain)
        if self.show_change and self._masks:
            change = (shown.attention - reference.attention).abs()
            # Changes are small next to attention itself: scaled so the largest (in any layer) is a
            # full-strength line; mask_summary gives the unscaled size.
            shown = dataclasses.replace(shown, attention=change / change.max().clamp_min(1e-12))
        return shown

    def _apply(self, full_result: AttentionResult, request_id: int, layer: int | None = None, heads: list[int] | None = None) -> None:
        parts = full_result.parts or {}
        if parts and self.attention_part not in parts:
            raise InputError(f"attention_part must be one of {list(parts)}.")
        token_result = parts.get(self.attention_part, full_result)
        result = self._displayed(token_result)
        n_layers, n_heads = result.n_layers, result.n_heads
        # Encoder and decoder may differ in depth: a part switch keeps the layer where it can.
        layer = min(self.layer, n_layers - 1) if layer is None else layer
        if not 0 <= layer < n_layers:
            raise InputError(f"layer={layer} is out of range: the model has layers 0..{n_layers - 1}.")
        if heads is None:
            kept = [h for h in self.heads if h < n_heads]
            heads = kept if self.n_heads == n_heads and self.heads else list(range(n_heads))
        bad = [h for h in heads if not 0 <= h < n_heads]
        if bad:
            raise InputError(f"heads {bad} are out of range: the model has heads 0..{n_heads - 1}.")
        self._result = result
        self._token_result = token_result
        self._full_result = full_result
        self._applying = True
        try:
            with self.hold_sync():  # one message: JS never sees tokens of one run with another's attention
                self.text = result.text
                self.text_b = result.text_b
                shown = display_tokens if self._prettify else list
                self.tokens = shown(result.tokens)
                self.key_tokens = shown(result.key_tokens) if result.key_tokens is not None else []
                self.parts = list(parts)
                self.sentence_b_start = result.sentence_b_start
                self.n_layers = n_layers
                self.n_heads = n_heads
                self.model_name = result.model_name
                self.heads = list(heads)
                if result.sentence_b_start is None:
                    self.sentence_filter = "all"
                self.layer = layer
                self.attention = self._layer_payload(layer)
                self.neuron_head = min(self.neuron_head, n_heads - 1)
                self.neuron_query = min(self.neuron_query, len(token_result.tokens) - 1)
                self.has_queries_keys = token_result.queries is not None
                self.causal = bool(result.causal)
                if self._needs_thumbnails():
                    self.thumbnails = self._thumbnail_payload()
                else:
                    self.thumbnails, self._thumbnails_of = {}, None
                if self.view == "rollout":
                    self.rollout = self._rollout_payload()
                else:
                    self.rollout, self._rollout_of = {}, None
                self.mask_summary = mask_summary(token_result)
                self.notice = result_notice(full_result, token_result)
                self.error = ""
                self.result_id = request_id
        finally:
            self._applying = False

    def _layer_payload(self, layer: int) -> dict:
        return {"layer": layer, **quantize_uint8(self._result.attention[layer])}

    def _thumbnail_payload(self) -> dict:
        result = self._result
        # An encoder and a decoder may differ in depth: included layers the part lacks are left out.
        included = [l for l in (self.include_layers or []) if l < result.n_layers]
        layers = included or list(range(result.n_layers))
        heads = self.include_heads if self.include_heads is not None else list(range(result.n_heads))
        chosen = result.attention[layers][:, heads]
        pooled = pool_thumbnails(chosen, self._thumbnail_size)
        self._thumbnails_of = self._thumbnail_key()
        n_keys = len(result.key_tokens) if result.key_tokens is not None else len(result.tokens)
        return {"layers": list(layers), "heads": list(heads), "n_tokens": len(result.tokens), "n_key_tokens": n_keys,
                **quantize_uint8(pooled)}

    def _needs_thumbnails(self) -> bool:
        # The analysis scatter shows a head's map on hover; the model view draws them all.
        return self.view == "model" or (self.view == "analysis" and self.analysis.get("kind") == "head_distances")

    def _rollout_payload(self) -> dict:
        self._rollout_of = id(self._result)
        if self._result.key_tokens is not None:
            return {"error": "Rollout follows self-attention through the layers: choose the encoder or the decoder."}
        # Rollout of the attention itself, even while the views show a masking's change.
        source = word_attention(self._token_result) if self._word_level else self._token_result
        return {"n_tokens": len(self._result.tokens), **quantize_uint8(an.rollout(source.attention))}

    @traitlets.observe("view", "include_layers", "include_heads", "analysis")
    def _on_view(self, change: dict) -> None:
        # Thumbnails and rollout cost a pass over every layer: made only when their view is shown.
        if self._applying or not hasattr(self, "_result"):
            return
        if self._needs_thumbnails() and self._thumbnails_of != self._thumbnail_key():
            self.thumbnails = self._thumbnail_payload()
        if self.view == "rollout" and self._rollout_of != id(self._result):
            self.rollout = self._rollout_payload()

    @traitlets.observe("attention_part")
    def _on_part(self, change: dict) -> None:
        if not self._applying and hasattr(self, "_full_result"):
            try:
                self._apply(self._full_result, self.result_id)
            except InputError:
                self._applying = True
                try:
                    self.attention_part = change["old"]
                finally:
                    self._applying = False
                raise

    @traitlets.observe("word_level", "show_change")
    def _on_display_mode(self, change: dict) -> None:
        self._word_level = bool(self.word_level)
        if not self._applying and hasattr(self, "_result"):
            self._apply(self._full_result, self.result_id)

    @traitlets.validate("masked_heads")
    def _check_masks(self, proposal: dict) -> list:
        pairs = [list(map(int, pair)) for pair in proposal["value"]]
        if self._engine is None:
            if pairs:
                raise InputError(NEEDS_A_MODEL.format(what="Masking heads"))
            return []
        if self._engine.is_encoder_decoder and pairs:
            raise InputError("Masking heads of encoder-decoder models is not supported yet.")
        self._engine.head_mask(pairs)  # raises InputError naming the bad pair
        return [list(p) for p in sorted({tuple(p) for p in pairs})]

    @traitlets.observe("masked_heads")
    def _on_masks(self, change: dict) -> None:
        """Switching heads off reruns the model; a failure shows in the widget and keeps the view."""
        if self._applying or not hasattr(self, "_result"):
            return
        previous = self._masks
        self._masks = [list(p) for p in change["new"]]
        try:
            self._apply(self._run(self._result.text, self._result.text_b), self.result_id)
        except Exception as exc:  # noqa: BLE001 - shown in the widget
            self._masks = previous
            self.error = str(exc)

    def show_analysis(self, data: Any, measure: str | None = None) -> "AttentionWidget":
        """Show an analysis result as a layer × head view: a `head_stats`, `head_importance` or
        `syntax_heads` result as heatmaps, `head_distances` as the MDS scatter. Clicking a head
        opens it in the head view."""
        self.analysis = analysis_payload(data, self.n_layers, self.n_heads, measure)
        self.view = "analysis"
        return self

    def _thumbnail_key(self) -> tuple:
        """What the thumbnails depend on; they are remade only when it changes."""
        layers = None if self.include_layers is None else tuple(self.include_layers)
        heads = None if self.include_heads is None else tuple(self.include_heads)
        return (id(self._result), layers, heads)

    @traitlets.validate("include_layers", "include_heads")
    def _check_included(self, proposal: dict) -> list[int] | None:
        name = proposal["trait"].name
        if not hasattr(self, "_result"):
            return proposal["value"]
        count = self._result.n_layers if name == "include_layers" else self._result.n_heads
        return _as_trait_error(checks.indices, name, proposal["value"], count, name.split("_")[1])

    @traitlets.validate("heads")
    def _check_heads(self, proposal: dict) -> list[int]:
        heads = proposal["value"]
        if self.n_heads:
            # An empty list hides every head (the swatches bring them back); each must exist.
            if heads:
                _as_trait_error(checks.indices, "heads", heads, self.n_heads, "heads")
        return heads

    @traitlets.validate("neuron_head", "neuron_query")
    def _check_neuron(self, proposal: dict) -> int:
        name, value = proposal["trait"].name, proposal["value"]
        if hasattr(self, "_token_result"):
            count = self._token_result.n_heads if name == "neuron_head" else len(self._token_result.tokens)
            if not 0 <= value < count:
                what = "heads" if name == "neuron_head" else "query tokens"
                raise traitlets.TraitError(f"{name}={value} is out of range: the {what} are numbered 0..{count - 1}.")
        return value

    def _on_custom_message(self, _widget: Any, content: dict, buffers: list) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "rendered":
            self._rendered = True
            return
        if kind == "image":
            self._on_image(content, buffers)
            return
        if kind != "neuron":
            return
        # Answers name the part and the number of queries, so the view never files one part's
        # numbers under another's key.
        reply = {"type": "neuron", "id": content.get("id"), "result_id": self.result_id,
                 "part": self.attention_part if self._full_result.parts else "",
                 "n_queries": len(self._token_result.tokens)}
        try:
            layer, head, query = (int(content[k]) for k in ("layer", "head", "query"))
            piece = neuron_slice(self._token_result, layer, head, query)
        except Exception as exc:  # noqa: BLE001 - the view shows it instead of waiting forever
            self.send({**reply, "error": str(exc)})
            return
        payloads = [encode_float16(t) for t in (piece.query, piece.keys, piece.products, piece.scores, piece.softmax)]
        self.send(
            {**reply, "layer": layer, "head": head, "query": query, "d": int(piece.query.shape[0]),
             "score_label": score_label(self._token_result, layer, int(piece.query.shape[0])),
             "n_tokens": int(piece.keys.shape[0]), "shapes": [p["shape"] for p in payloads]},
            buffers=[p["data"] for p in payloads],
        )

    @traitlets.validate("layer")
    def _check_layer(self, proposal: dict) -> int:
        layer = proposal["value"]
        n_layers = self.n_layers
        if n_layers and not 0 <= layer < n_layers:
            raise traitlets.TraitError(f"layer={layer} is out of range: the model has layers 0..{n_layers - 1}.")
        return layer

    @traitlets.observe("layer")
    def _on_layer(self, change: dict) -> None:
        if not self._applying:
            self.attention = self._layer_payload(change["new"])

    @traitlets.observe("request")
    def _on_request(self, change: dict) -> None:
        """An edit from the browser: recompute, or show why not and keep the last view."""
        request = change["new"] or {}
        request_id = int(request.get("id", 0))
        try:
            result = self._run(request.get("text", ""), request.get("text_b"))
            self._apply(result, request_id)
        except Exception as exc:  # noqa: BLE001 - whatever failed must reach the user in the widget
            message = str(exc) if isinstance(exc, AttnscopeError) else f"{type(exc).__name__}: {exc}"
            with self.hold_sync():
                self.error = message
                self.result_id = request_id

    @traitlets.observe("text", "text_b")
    def _on_text(self, change: dict) -> None:
        """Setting `widget.text = ...` from Python recomputes; bad input raises and changes nothing."""
        if self._applying:
            return
        try:
            self.update(self.text, self.text_b)
        except Exception:
            self._applying = True
            try:
                self.text, self.text_b = self._result.text, self._result.text_b
            finally:
                self._applying = False
            raise

    def save_image(self, path: str | Path) -> "ImageRequest":
        """Save the current view as PNG or SVG (by the file's suffix), drawn by the widget's view.

        The browser draws the image, so the widget must be displayed. The file is written when the
        view answers, which is right after the cell finishes (a kernel cannot wait for its front
        end in mid-cell); the returned request says when it is done (`.done`, `.error`).
        """
        path = Path(path)
        image_format = path.suffix.lower().lstrip(".")
        if image_format not in ("png", "svg"):
            raise InputError(f"save_image writes .png or .svg files, not {path.name!r}.")
        if not getattr(self, "_rendered", False):
            raise InputError(
                "save_image needs the widget on screen: display it first (make it a cell's last line), "
                "then call save_image in another cell. Or use the PNG/SVG buttons in the widget."
            )
        self._image_requests = getattr(self, "_image_requests", {})
        request = ImageRequest(path, image_format)
        request_id = next(_IMAGE_REQUEST_IDS)  # unique for the kernel's life, whatever was answered
        self._image_requests[request_id] = request
        self.send({"type": "image", "id": request_id, "format": image_format})
        return request

    def _on_image(self, content: dict, buffers: list) -> None:
        request = getattr(self, "_image_requests", {}).pop(content.get("id"), None)
        if request is None:
            return
        if content.get("error") or not buffers:
            request.error = content.get("error") or "the view sent no image"
            return
        try:
            write_atomic(request.path, bytes(buffers[0]))
        except OSError as exc:  # in a comm callback nobody sees a raise: the request says why
            request.error = f"cannot write {request.path}: {exc.strerror}" if exc.strerror else str(exc)
            return
        request.done = True

    def save_html(self, path: str | Path, layers: list[int] | None = None) -> Path:
        """Write this view as one self-contained, offline HTML file (all layers unless `layers`)."""
        from .export import widget_html

        return write_atomic(path, widget_html(self, layers))

    def slide(self, height: int = 560, layers: list[int] | None = None) -> Any:
        """This view as a self-contained iframe for slideshows (RISE), where widgets do not render.

        The standalone page (see save_html) goes in `srcdoc`, escaped as an attribute value, so it
        needs no widget manager, kernel comm or network.
        """
        import html as html_escaping

        from IPython.display import HTML

        from .export import widget_html

        height = checks.integer("height", height, minimum=100)
        page = html_escaping.escape(widget_html(self, layers), quote=True)
        # Wrapped in a div: IPython warns about a bare <iframe> string.
        return HTML(
            f'<div class="attnscope-slide-frame"><iframe class="attnscope-slide" srcdoc="{page}" '
            f'title="attnscope attention view" style="width: 100%; height: {int(height)}px; border: 0;">'
            "</iframe></div>"
        )

    def update(self, text: str, text_b: str | None = None) -> None:
        """Show another text (pair) with the same model, keeping layer and heads."""
        self._apply(self._run(text, text_b), self.result_id)


_IMAGE_REQUEST_IDS = itertools.count(1)


@dataclasses.dataclass
class ImageRequest:
    """A pending `save_image`: `done` turns True once the view has sent the image and it is written."""

    path: Path
    format: str
    done: bool = False
    error: str | None = None

    def __repr__(self) -> str:
        state = "written" if self.done else (f"failed: {self.error}" if self.error else "waiting for the view")
        return f"ImageRequest({str(self.path)!r}, {state})"


def score_label(result: AttentionResult, layer: int, head_dim: int) -> str:
    """How the neuron view's scores are made, in the column's title."""
    scale = result.scaling[layer]
    scaled = "q·k / √d" if abs(scale * math.sqrt(head_dim) - 1) < 1e-6 else ("q·k" if scale == 1 else f"q·k × {scale:.3g}")
    return f"{scaled} + position bias" if result.score_bias is not None else scaled


NEEDS_A_MODEL = (
    "{what} needs a model, and this view was made from precomputed attention. "
    "Use attnscope.show(text, model=...) to run a model live."
)


def mask_summary(token_result: AttentionResult) -> str:
    """One line on what masking changed, in total variation (½ Σ_j |ΔA_ij|, averaged over rows)."""
    plain = token_result.unmasked
    if not token_result.masked_heads or plain is None:
        return ""
    names = ", ".join(an.head_label(l, h) for l, h in token_result.masked_heads)
    change = 0.5 * (token_result.attention - plain.attention).abs().sum(-1).mean((1, 2))  # per layer
    changed = [layer for layer in range(len(change)) if change[layer] > 1e-6]
    if not changed:
        return f"Masked {names}: no layer's attention changed (the masked heads feed only the output)."
    worst = int(change.argmax())
    largest = float((token_result.attention - plain.attention).abs().max())
    return (
        f"Masked {names}: attention changes from layer {changed[0] + 1} on; largest mean change "
        f"{float(change[worst]):.3f} (total variation) in layer {worst + 1}; largest single weight "
        f"change {largest:.3f} (Show change draws it as a full line)."
    )


def analysis_payload(data: Any, n_layers: int, n_heads: int, measure: str | None = None) -> dict:
    """A per-head analysis result as plain lists for the analysis view (layers × heads is small)."""
    kind = data.attrs.get("attnscope") if hasattr(data, "attrs") else None
    if isinstance(data, SyntaxHeads):
        kind = "syntax_heads"
    if kind not in ("head_stats", "head_importance", "head_distances", "syntax_heads"):
        raise InputError(
            "show_analysis takes what attnscope.head_stats, head_importance, head_distances or "
            f"syntax_heads return, not {type(data).__name__}."
        )

    def grid(rows, value_column: str) -> list[float]:
        values = [float("nan")] * (n_layers * n_heads)
        for layer, head, value in zip(rows["layer"], rows["head"], rows[value_column]):
            if not (0 <= layer < n_layers and 0 <= head < n_heads):
                raise InputError(
                    f"This analysis has head {an.head_label(layer, head)}, but the widget's model has "
                    f"{n_layers} layers × {n_heads} heads: analyse the same model."
                )
            values[int(layer) * n_heads + int(head)] = None if value != value else float(value)
        return values

    payload: dict = {"kind": kind, "n_layers": n_layers, "n_heads": n_heads, "model": "", "note": ""}
    if kind == "head_stats":
        measures = [
            {"key": key, "label": label, "values": grid(data[data.measure == key], "value")}
            for key, label in an.MEASURE_LABELS.items()
            if key in set(data.measure)
        ]
        payload["note"] = f"Clark et al. 2019 §3, averaged over {data.attrs.get('documents', '?')} documents."
    elif kind == "head_importance":
        measures = [
            {"key": "importance", "label": "Importance (ℓ2-normalised per layer)", "values": grid(data[data.measure == "importance"], "value")},
            {"key": "raw", "label": "E|∂L/∂ξ| (raw)", "values": grid(data[data.measure == "raw"], "value")},
        ]
        payload["note"] = f"Michel et al. 2019; loss: {data.attrs.get('loss', '?')}."
    elif kind == "syntax_heads":
        from .bertology import UNSCORED

        accuracy = data.accuracy
        best = accuracy.groupby(["relation", "layer", "head"], as_index=False)["accuracy"].max()
        counts = accuracy.groupby("relation")["count"].first().sort_values(ascending=False)
        # As Table 1: no root or punct map (under scoring="clark" they are scored, heads miss roots).
        order = ["All"] + [r for r in counts.index if r != "All" and r.lower() not in UNSCORED]
        measures = [
            {"key": r, "label": f"{r} ({int(counts[r])} words)", "values": grid(best[best.relation == r], "accuracy")}
            for r in order
            if r in counts.index
        ]
        payload["note"] = (
            f"Accuracy of each head's strongest attention, best direction; {data.source}; "
            f"scoring {getattr(data, 'scoring', 'clark')}."
        )
    else:
        measures = []
        frame = data.sort_values(["layer", "head"])
        payload["points"] = [v for xy in zip(frame.x, frame.y) for v in (float(xy[0]), float(xy[1]))]
        payload["behaviours"] = list(frame.behaviour)
        grid(frame, "x")  # checks the shape
        payload["note"] = "Jensen–Shannon divergence between heads, laid out by MDS (Clark et al. 2019 §6)."
    for m in measures:
        finite = [v for v in m["values"] if v is not None]
        m["max"] = max(finite) if finite else 1.0
    payload["measures"] = measures
    keys = [m["key"] for m in measures]
    if measure is not None and measure not in keys:
        raise InputError(f"measure={measure!r} is not in this analysis; choose one of {keys}.")
    payload["measure"] = measure or (keys[0] if keys else "")
    payload["model"] = data.attrs.get("model", "") if hasattr(data, "attrs") else ""
    return payload


def _as_trait_error(check: Any, *args: Any) -> Any:
    """A check from `checks` inside a trait validator: its message as a TraitError."""
    try:
        return check(*args)
    except InputError as exc:
        raise traitlets.TraitError(str(exc)) from None


def show(
    text: str,
    text_b: str | None = None,
    model: Any = None,
    view: str = "head",
    **kwargs: Any,
) -> AttentionWidget:
    """The one-liner: `attnscope.show("The cat sat on the mat.")` as a cell's last line.

    Returns the widget (it displays itself as the cell's result; keep it to read `.result`).
    """
    if view not in VIEWS:
        raise ValueError(f"Unknown view {view!r}; available: {', '.join(VIEWS)}.")
    return AttentionWidget(text, text_b, model, view=view, **kwargs)
