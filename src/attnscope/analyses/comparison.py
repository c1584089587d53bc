"""What fine-tuning changes in attention (Kovaleva et al. 2019, §5, Figure 4): two models that share
a tokenizer, a base and its fine-tuned copy, read the same corpus, and each head's maps are
compared. For every head, the cosine similarity of the two models' maps of a document (each map
flattened, special tokens kept, as the paper's), averaged over the corpus; per layer, the mean of
its heads. Kovaleva et al. found the last two layers of BERT-base changed most by fine-tuning on
GLUE tasks, and the early layers hardly at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..engine.attention_model import AttentionModel
from ..errors import InputError
from .corpus import Documents, document_position, iter_attention
from .runner import run_corpus
from .tables import Grid, HeadSums, SumsPartial, analysis_frame, analysis_view, heads_frame, tagged


def map_cosines(base: torch.Tensor, tuned: torch.Tensor) -> torch.Tensor:
    """Per head, the cosine similarity of two L × H × n × n attention maps, each flattened: L × H."""
    x, y = base.flatten(2).double(), tuned.flatten(2).to(base.device).double()
    return (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1)).clamp_min(1e-300)


def similarity_partial(models: tuple[AttentionModel, AttentionModel], docs: Documents, *, max_length: int,
                       batch_size: int | str, progress: bool) -> SumsPartial:
    base, tuned = models
    sums = HeadSums()
    both = zip(
        iter_attention(base, docs, max_length=max_length, batch_size=batch_size, desc="similarity", progress=progress),
        iter_attention(tuned, docs, max_length=max_length, batch_size=batch_size, progress=False),
        strict=True,
    )
    for index, (a, b) in enumerate(both):
        if a.tokens != b.tokens:  # same vocabulary, other special tokens or truncation
            raise InputError(f"Text {document_position(docs, index)} of the corpus is read into other tokens by the two "
                             f"models ({len(a.tokens)} and {len(b.tokens)}): their tokenizers differ.")
        sums.add({"cosine": map_cosines(a.attention, b.attention)})
    return SumsPartial(sums, len(docs))


def attention_similarity(
    model: AttentionModel,
    tuned: AttentionModel,
    corpus: Any,
    *,
    column: str | Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
):
    """Kovaleva et al. 2019's comparison of a model and its fine-tuned copy (both from
    attnscope.load, one tokenizer): for every head, the cosine similarity of the two models' maps
    of each document, averaged over the corpus. Returns a tidy DataFrame (layer, head, label,
    measure "cosine", value); `similarity_by_layer(frame)` gives each layer's mean, their Figure 4.
    backend: "local" or "ray", as in `head_stats` (each worker rebuilds both models)."""
    run = run_corpus("attention_similarity", similarity_partial, model, corpus, second=tuned, column=column,
                     max_length=max_length, batch_size=batch_size, progress=progress, backend=backend)
    return tagged(heads_frame(run.partial.sums.result()), "attention_similarity", run.model, run.documents,
                  compared_with=tuned.name)  # run_corpus checked it


def similarity_by_layer(frame):
    """Each layer's mean cosine similarity over its heads (a Series indexed by layer)."""
    frame = analysis_frame(frame, "similarity_by_layer", "attention_similarity")
    return frame[frame.measure == "cosine"].groupby("layer").value.mean().rename("cosine")


@analysis_view("attention_similarity")
def attention_similarity_view(data: Any, grid: Grid) -> dict:
    first, other = data.attrs.get("model", "?"), data.attrs.get("compared_with", "the other model")
    # A fine-tuned copy loaded from the same files keeps its base's name: "X and X" names nothing.
    pair = f"{first} and {other}" if first != other else f"the first and the second model (both named {first})"
    return {
        "measures": [{"key": "cosine", "label": f"Cosine similarity of the maps: {pair}",
                      "values": grid(data[data.measure == "cosine"], "value")}],
        "note": f"Per head, the cosine similarity of the two models' maps, averaged over {data.attrs.get('documents', '?')} "
                "documents (Kovaleva et al. 2019, Figure 4): low where fine-tuning changed the head.",
    }
