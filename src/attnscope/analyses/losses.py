"""The losses that head importance and attention gradients differentiate: masked-LM, next-token,
in-batch contrastive, or the user's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import (
    AttentionModel,
)
from ..errors import InputError
from ..progress import progress as progress_bar
from .corpus import Document, corpus_settings, device_batch_size, encode_batch, in_batches, refuse_nonfinite

Loss = Callable[[Any, Any], torch.Tensor]


class MaskedLMLoss:
    """Masked-LM loss: 15% of the non-special tokens (at least one) replaced by [MASK], a fixed
    seed so the same corpus always gets the same masks. Per-example mean cross-entropy."""

    name = "masked-LM (15% of tokens masked)"

    def __init__(self, tokenizer, fraction: float = 0.15, seed: int = 0):
        if tokenizer.mask_token_id is None:
            raise InputError("The tokenizer has no [MASK] token, so a masked-LM loss is impossible; pass loss=.")
        self.tokenizer, self.fraction = tokenizer, fraction
        self.generator = torch.Generator().manual_seed(seed)

    def prepare(self, encoded):
        ids = encoded["input_ids"].clone()
        special = torch.tensor(
            [self.tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True) for row in ids.tolist()],
            dtype=torch.bool,
        ) | (encoded["attention_mask"] == 0)
        pick = (torch.rand(ids.shape, generator=self.generator) < self.fraction) & ~special
        for row in range(ids.shape[0]):  # every document gets at least one masked token
            if not pick[row].any() and (~special[row]).any():
                pick[row, (~special[row]).nonzero()[0, 0]] = True
        labels = torch.where(pick, ids, torch.full_like(ids, -100))
        ids[pick] = self.tokenizer.mask_token_id
        encoded = dict(encoded)
        encoded["input_ids"] = ids
        encoded["labels_for_loss"] = labels
        return encoded

    def __call__(self, outputs, encoded) -> torch.Tensor:
        labels = encoded["labels_for_loss"].to(outputs.logits.device)
        losses = torch.nn.functional.cross_entropy(outputs.logits.transpose(1, 2), labels, reduction="none", ignore_index=-100)
        counts = (labels != -100).sum(1).clamp_min(1)
        return losses.sum(1) / counts


class NextTokenLoss:
    """Causal LM loss: predict each next token. Per-example mean cross-entropy."""

    name = "next-token prediction"

    def prepare(self, encoded):
        return dict(encoded)

    def __call__(self, outputs, encoded) -> torch.Tensor:
        ids = encoded["input_ids"].to(outputs.logits.device)
        mask = encoded["attention_mask"].to(outputs.logits.device)[:, 1:].float()
        losses = torch.nn.functional.cross_entropy(outputs.logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        return (losses * mask).sum(1) / mask.sum(1).clamp_min(1)


class InBatchContrastiveLoss:
    """For sentence-embedding models without an LM head (such as the embedded all-MiniLM-L6-v2):
    the in-batch ranking loss they are trained with. Mean-pooled, unit-length embeddings; each
    text must pick itself among the batch at cosine-similarity scale 20. Importance then means
    "how much a head helps keep the batch's sentences apart". Needs at least 2 texts per batch."""

    name = "in-batch contrastive (sentence embeddings, scale 20)"

    def prepare(self, encoded):
        if encoded["input_ids"].shape[0] < 2:
            raise InputError("The contrastive default loss compares texts in a batch: give at least 2 texts.")
        return dict(encoded)

    def __call__(self, outputs, encoded) -> torch.Tensor:
        hidden = outputs.last_hidden_state
        mask = encoded["attention_mask"].to(hidden.device).unsqueeze(-1).to(hidden.dtype)
        pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp_min(1), dim=-1)
        scores = 20.0 * pooled @ pooled.transpose(0, 1)
        return torch.nn.functional.cross_entropy(scores, torch.arange(len(scores), device=scores.device), reduction="none")


def default_loss(model: AttentionModel):
    """Masked LM when the model has an MLM head, next-token loss for causal LMs, else contrastive."""
    hf = model.model
    has_lm_head = hasattr(hf, "get_output_embeddings") and hf.get_output_embeddings() is not None
    if has_lm_head and model.causal:
        return NextTokenLoss()
    if has_lm_head:
        return MaskedLMLoss(model.tokenizer)
    return InBatchContrastiveLoss()


class UserLoss:
    """The caller's loss= (outputs, batch) → the loss as a float tensor, one per example or one
    for the batch; what it returns is checked at each call, named as loss=."""

    name = "given by the caller"

    def __init__(self, fn: Loss):
        if not callable(fn):
            raise InputError(f"loss must be a function (outputs, batch) → the loss as a float tensor (one per example), "
                             f"or None for the model's own loss; not {checks.short_repr(fn)}.")
        self.fn = fn

    def prepare(self, encoded):
        return dict(encoded)

    def __call__(self, outputs, encoded):
        value = self.fn(outputs, encoded)
        named = getattr(self.fn, "__name__", "the function")
        wants = "the loss as a float tensor computed from the model's outputs (one per example, or one for the batch)"
        if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
            raise InputError(f"loss={named} returned {checks.short_repr(value)}; it must return {wants}.")
        if value.is_complex() or value.dim() > 1:
            raise InputError(f"loss={named} returned a {'complex ' if value.is_complex() else ''}tensor of shape "
                             f"{list(value.shape)}; it must return {wants}.")
        tracked = any(getattr(a, "requires_grad", False) for a in (getattr(outputs, "attentions", None) or ()))
        if tracked and not value.requires_grad:
            raise InputError(f"loss={named} returned a tensor that does not depend on the model's outputs (it has no "
                             f"gradient); it must return {wants}.")
        return value


def _pairwise_batches(docs: Sequence[Document], size: int) -> list[list[Document]]:
    """Batches of at most `size` (at least 2) with no batch of one: a lone last text takes one
    from the batch before (9 texts in batches of 8 → 7 + 2; in batches of 2, 3 texts → one of 3)."""
    batches = list(in_batches(docs, size))
    if len(batches) > 1 and len(batches[-1]) == 1:
        if len(batches[-2]) > 2:
            batches[-1].insert(0, batches[-2].pop())
        else:
            batches[-2].extend(batches.pop())
    return batches


def loss_batches(model, docs, loss, batch_size, max_length, desc, progress):
    """(encoded, prepared, forward inputs) per batch; a batch whose attention is not finite stops
    the run (see `refuse_nonfinite`)."""
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, gradients=True)
    if isinstance(loss, InBatchContrastiveLoss):
        # Each text is ranked against the others in its batch: every batch needs two or more.
        if len(docs) < 2:
            raise InputError(f"The default loss of {model.name} ({loss.name}) compares texts in a batch, and the corpus "
                             f"holds {len(docs)}: give at least 2 texts, or pass loss=.")
        if getattr(model.tokenizer, "pad_token", None) is None:
            raise InputError(f"The default loss of {model.name} ({loss.name}) batches texts, but its tokenizer has no pad token: pass loss=.")
        batches = _pairwise_batches(docs, max(batch_size, 2))
    else:
        batches = list(in_batches(docs, device_batch_size(model, batch_size)))
    for batch in progress_bar(batches, len(batches), desc, progress):
        encoded = encode_batch(model, batch, max_length)
        prepared = loss.prepare(encoded)
        forward_inputs = {k: v for k, v in prepared.items() if k != "labels_for_loss"}
        yield encoded, prepared, forward_inputs


@dataclass
class LossesPartial:
    """What a part of a corpus adds to an analysis that switches heads off (the pruning curve,
    head ablation): per set of heads switched off, the summed per-example loss; the examples."""

    loss: torch.Tensor  # one sum per set, float64
    examples: int
    documents: int

    def merge(self, other: LossesPartial) -> LossesPartial:
        return LossesPartial(self.loss + other.loss, self.examples + other.examples, self.documents + other.documents)


def heads_off_partial(model: AttentionModel, docs: Sequence[Document], *, off: torch.Tensor, mode: str, loss: Loss | None,
                      max_length: int, batch_size: int, progress: bool, desc: str) -> LossesPartial:
    """Σ over `docs` of each example's loss with each set of heads in `off` (sets × layers × heads,
    True where a head is off) switched off: their output zeroed (mode "zero": Michel et al.'s
    ξ_h = 0) or their attention made uniform ("uniform": Kovaleva et al.'s disabled head). A set
    with no head off is the plain run. Each batch is prepared once (the same masked tokens, for a
    masked-LM loss) and run once per set."""
    objective = UserLoss(loss) if loss is not None else default_loss(model)
    total = torch.zeros(len(off), dtype=torch.float64)
    examples = 0
    for _, prepared, inputs in loss_batches(model, docs, objective, batch_size, max_length, desc, progress):
        for index, heads in enumerate(off):
            if not bool(heads.any()):
                outputs = model.forward(inputs)
            elif mode == "uniform":
                outputs = model.forward(inputs, uniform=heads.to(model.device))
            else:
                outputs = model.forward(inputs, head_mask=(~heads).float().to(model.device))
            refuse_nonfinite(outputs.attentions, docs, examples)
            total[index] += objective(outputs, prepared).double().sum().cpu()
        examples += inputs["input_ids"].shape[0]
    return LossesPartial(total, examples, len(docs))
