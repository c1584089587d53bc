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
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import anywidget
import traitlets
from traitlets import Dict, Enum, Int, List, Unicode

from .engine import AttentionModel, AttentionResult, load
from .errors import AttnscopeError
from .serialize import display_tokens, quantize_uint8

STATIC = Path(__file__).parent / "static"
VIEWS = ("head",)

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


def _static(name: str, fallback: str) -> Path | str:
    path = STATIC / name
    return path if path.is_file() else fallback


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


def truncation_notice(result: AttentionResult) -> str:
    if result.truncated_from is None:
        return ""
    return f"Input truncated: {result.truncated_from} tokens → {len(result.tokens)}. The rest of the text is not shown."


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

    notice = Unicode("").tag(sync=True)
    error = Unicode("").tag(sync=True)

    def __init__(
        self,
        text: str,
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
        **kwargs: Any,
    ):
        self._engine = resolve_engine(model, tokenizer, device)
        self._max_length = max_length
        self._applying = False
        # Bad input raises here, before anything is displayed: a clear Python error, no blank cell.
        result = self._run(text, text_b)
        super().__init__(view=view, theme=theme, **kwargs)
        self._apply(result, request_id=0, layer=layer, heads=heads)

    @property
    def result(self) -> AttentionResult:
        """The AttentionResult behind the current view (tensors on the model's device)."""
        return self._result

    @property
    def engine(self) -> AttentionModel:
        return self._engine

    def _run(self, text: str, text_b: str | None) -> AttentionResult:
        with warnings.catch_warnings():
            # Truncation is shown in the widget's notice; a warning would print under the cell too.
            warnings.filterwarnings("ignore", message="Input truncated", category=UserWarning)
            return self._engine.run(text, text_b, self._max_length)

    def _apply(self, result: AttentionResult, request_id: int, layer: int | None = None, heads: list[int] | None = None) -> None:
        n_layers, n_heads = result.n_layers, result.n_heads
        layer = self.layer if layer is None else layer
        if not 0 <= layer < n_layers:
            raise AttnscopeError(f"layer={layer} is out of range: the model has layers 0..{n_layers - 1}.")
        if heads is None:
            kept = [h for h in self.heads if h < n_heads]
            heads = kept if self.n_heads == n_heads and self.heads else list(range(n_heads))
        bad = [h for h in heads if not 0 <= h < n_heads]
        if bad:
            raise AttnscopeError(f"heads {bad} are out of range: the model has heads 0..{n_heads - 1}.")
        self._result = result
        self._applying = True
        try:
            with self.hold_sync():  # one message: JS never sees tokens of one run with another's attention
                self.text = result.text
                self.text_b = result.text_b
                self.tokens = display_tokens(result.tokens)
                self.sentence_b_start = result.sentence_b_start
                self.n_layers = n_layers
                self.n_heads = n_heads
                self.model_name = result.model_name
                self.heads = list(heads)
                if result.sentence_b_start is None:
                    self.sentence_filter = "all"
                self.layer = layer
                self.attention = self._layer_payload(layer)
                self.notice = truncation_notice(result)
                self.error = ""
                self.result_id = request_id
        finally:
            self._applying = False

    def _layer_payload(self, layer: int) -> dict:
        return {"layer": layer, **quantize_uint8(self._result.attention[layer])}

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

    def update(self, text: str, text_b: str | None = None) -> None:
        """Show another text (pair) with the same model, keeping layer and heads."""
        self._apply(self._run(text, text_b), self.result_id)


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
