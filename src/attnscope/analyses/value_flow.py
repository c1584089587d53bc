"""Kobayashi et al. 2020's comparison ("Attention is Not Only a Weight", §4): per layer and kind of
token ([CLS] or the first token, [SEP], punctuation, the others), how much attention the tokens
receive (α), how large a vector they pass (‖f(x)‖), and what they pass once weighed (‖α f(x)‖).
Their finding: [CLS], [SEP] and punctuation receive much attention but pass small vectors.

Each document is one run (`model.run`, any length: a long one keeps its value norms, never T × T)
and gives, per layer, the mean over heads and over the tokens of a kind of: the attention the token
receives (the mean over the queries that see it of α_hij), its norm ‖f_h(x_j)‖, and the mean over
those queries of α_hij ‖f_h(x_j)‖. The corpus's value is the mean over the documents that have a
token of that kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..engine.attention_model import AttentionModel, model_of
from ..engine.results import LongAttentionResult
from ..errors import InputError
from ..progress import progress as progress_bar
from .corpus import Documents, document_position, documents, token_kinds_for
from .runner import run_partial
from .tables import Grid, HeadSums, SumsPartial, analysis_view

KINDS = ("[CLS] / first token", "[SEP]", "punctuation", "other")
# The analysis view's column labels (a 28-pixel column each); the note and hover give KINDS.
KIND_LABELS = ("1st", "SEP", "punc", "rest")
MEASURES = {"alpha": "α received", "norm": "‖f(x)‖", "weighted": "‖α f(x)‖ received"}


def _received(result: Any, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head and key (H × T): Σ_i α_hij over the queries, and how many queries see the key
    (a decoder's key j is seen by the T − j queries from it on)."""
    if isinstance(result, LongAttentionResult):
        total = None
        for _, _, block in result.row_blocks(layer):  # heads × rows × T, never T × T at once
            part = block.double().sum(-2)
            total = part if total is None else total + part
    else:
        total = result.attention[layer].double().sum(-2)
    n = total.shape[-1]
    seen = torch.arange(n, 0, -1, dtype=torch.float64, device=total.device) if result.causal else torch.full(
        (n,), float(n), dtype=torch.float64, device=total.device)
    return total, seen


def document_flow(model: AttentionModel, result: Any) -> dict[str, torch.Tensor]:
    """One run's measures: {"alpha", "norm", "weighted"} → layers × len(KINDS) (NaN for a kind the
    document lacks)."""
    if result.value_norms is None:
        raise InputError(f"{model.name}'s runs keep no value norms (its output projection was not found): "
                         "value_flow needs them.")
    n = len(result.tokens)
    kinds = token_kinds_for(model, result.tokens)
    first = torch.zeros(n, dtype=torch.bool)
    first[0] = True
    cls = kinds.cls.cpu() | first
    masks = [cls, kinds.sep.cpu() & ~cls, kinds.punct.cpu() & ~cls & ~kinds.sep.cpu()]
    masks.append(~(masks[0] | masks[1] | masks[2]))
    out = {name: torch.full((result.n_layers, len(KINDS)), float("nan"), dtype=torch.float64) for name in MEASURES}
    for layer in range(result.n_layers):
        total, seen = _received(result, layer)
        norms = result.value_norms[layer].double().to(total.device)  # H × T
        alpha = (total / seen).mean(0).cpu()  # T: mean over heads of the mean over queries
        weighted = (total * norms / seen).mean(0).cpu()
        norm = norms.mean(0).cpu()
        for k, mask in enumerate(masks):
            if mask.any():
                out["alpha"][layer, k] = alpha[mask].mean()
                out["norm"][layer, k] = norm[mask].mean()
                out["weighted"][layer, k] = weighted[mask].mean()
    return out


def flow_partial(model: AttentionModel, docs: Documents, *, max_length: int | None, attention: str,
                 progress: bool) -> SumsPartial:
    sums = HeadSums()
    for k, (text, text_b) in enumerate(progress_bar(docs, len(docs), "value flow", progress, unit="text")):
        measures = document_flow(model, model.run(text, text_b, max_length=max_length, attention=attention))
        if not all(bool(torch.isfinite(v[~v.isnan()]).all()) for v in measures.values()):
            raise InputError(f"Text {document_position(docs, k)} of the corpus gives infinite attention or norms, so the "
                             "analysis stops rather than average it in. Run the model in float32 (model.float()).")
        sums.add(measures)
    return SumsPartial(sums, len(docs))


def value_flow(model: Any, corpus: Any, *, column: str | Sequence[str] | None = None, max_length: int | None = None,
               attention: str = "auto", progress: bool = True, backend: str = "local"):
    """Kobayashi et al. 2020's comparison over a corpus (module docstring): a tidy DataFrame of
    layer, kind, measure ("alpha": attention received; "norm": ‖f(x)‖; "weighted": ‖α f(x)‖
    received) and value. backend: "local" or "ray", as in `head_stats`."""
    import pandas as pd

    model = model_of(model, "value_flow")
    docs = documents(corpus, column)
    partial = run_partial(flow_partial, model, docs, progress=progress, backend=backend, max_length=max_length,
                          attention=attention)
    values = partial.sums.result()
    rows = [(layer, kind, name, float(values[name][layer, k]))
            for name in MEASURES for layer in range(values[name].shape[0]) for k, kind in enumerate(KINDS)]
    frame = pd.DataFrame(rows, columns=["layer", "kind", "measure", "value"])
    frame.attrs.update({"attnscope": "value_flow", "model": model.name, "documents": len(docs)})
    return frame


@analysis_view("value_flow")
def value_flow_view(data: Any, _grid: Grid) -> dict:
    """Layer × kind of token heatmaps, one per measure: a layout of its own (`columns`), not
    layer × head."""
    n_layers = int(data["layer"].max()) + 1 if len(data) else 0
    measures = []
    for key, label in MEASURES.items():
        rows = data[data["measure"] == key]
        values = [float("nan")] * (n_layers * len(KINDS))
        for layer, kind, value in zip(rows["layer"], rows["kind"], rows["value"]):
            values[int(layer) * len(KINDS) + KINDS.index(kind)] = float(value)
        measures.append({"key": key, "label": f"Mean {label}", "values": values})
    note = ("Kobayashi et al. 2020 (§4): per layer, the mean attention a kind of token receives (α), the size of "
            "what it passes (‖f(x)‖) and the two together (‖α f(x)‖). They found that [CLS], [SEP] and punctuation "
            "receive much attention and pass small vectors. Columns: 1st = [CLS] or the first token (a decoder's "
            f"BOS, its attention sink), SEP = [SEP], punc = punctuation, rest = the other tokens; "
            f"{data.attrs.get('documents', 0)} documents.")
    return {"measures": measures, "note": note, "n_layers": n_layers,
            "columns": [{"label": short, "name": name} for short, name in zip(KIND_LABELS, KINDS)]}
