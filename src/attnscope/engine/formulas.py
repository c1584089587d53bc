"""The papers' attention formulas as pure tensor functions (no model, no widget): Clark et al.'s
statistics and behaviours, entropy, JS divergence and MDS, rollout, word merging, syntax scoring.

Notation follows Clark et al. 2019: A[l, h, i, j] is the attention from query token i to key token
j; every row sums to 1. Functions take one document's attention, L × H × n × n (or any leading
shape), and return tensors on the same device. The corpus loops live in the `analyses` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import checks

# Clark et al. smooth before taking logs, so that zeros do not dominate.
ENTROPY_SMOOTHING = 0.0001  # A' = 0.9999·A + 0.0001/n (General_Analysis.ipynb)
JS_SMOOTHING = 0.001  # P = 0.999·A + 0.001/n (head_distances.py)

PUNCTUATION = frozenset({".", ","})

# The measures of `head_statistics`, with the names the papers' figures use.
MEASURE_LABELS: dict[str, str] = {
    "cls": "Attention to [CLS]",
    "sep": "Attention to [SEP]",
    "punct": 'Attention to "." and ","',
    "sep_sep": "[SEP] → [SEP]",
    "other_sep": "Other tokens → [SEP]",
    "prev": "Attention to the previous token",
    "current": "Attention to the current token",
    "next": "Attention to the next token",
    "entropy": "Entropy (nats)",
    "entropy_cls": "Entropy of [CLS] (nats)",
}

# Thresholds of Clark et al.'s clustering figure (section 6), in the order they are tested.
BEHAVIOUR_RULES: tuple[tuple[str, str, float], ...] = (
    ("entropy", "broad", 3.8),
    ("prev", "previous token", 0.5),
    ("next", "next token", 0.5),
    ("cls", "[CLS]", 0.6),
    ("sep", "[SEP]", 0.6),
    ("punct", "punctuation", 0.6),
)
BEHAVIOURS = tuple(name for _, name, _ in BEHAVIOUR_RULES) + ("other",)


@dataclass(frozen=True)
class TokenKinds:
    """Boolean masks over one document's n tokens."""

    cls: torch.Tensor
    sep: torch.Tensor
    punct: torch.Tensor

    @property
    def other(self) -> torch.Tensor:
        return ~(self.cls | self.sep | self.punct)


def _bare(token: str) -> str:
    # BPE and SentencePiece mark a leading space on the token itself (GPT-2 "Ġ,", T5 "▁.").
    return token.lstrip("Ġ▁")


def token_kinds(
    tokens: Sequence[str],
    cls_tokens: Sequence[str] = ("[CLS]", "<s>"),
    sep_tokens: Sequence[str] = ("[SEP]", "</s>"),
    device: torch.device | str | None = None,
) -> TokenKinds:
    """Which tokens are [CLS], [SEP] (every one) and "." or ","."""
    cls = torch.tensor([t in cls_tokens for t in tokens], dtype=torch.bool, device=device)
    sep = torch.tensor([t in sep_tokens for t in tokens], dtype=torch.bool, device=device)
    punct = torch.tensor([_bare(t) in PUNCTUATION for t in tokens], dtype=torch.bool, device=device)
    return TokenKinds(cls=cls, sep=sep, punct=punct)


def smoothed(attention: torch.Tensor, amount: float) -> torch.Tensor:
    """(1 − amount)·A + amount/n: the papers' smoothing before logarithms."""
    n = attention.shape[-1]
    return (1.0 - amount) * attention + amount / n


def entropy(attention: torch.Tensor, smoothing: float = ENTROPY_SMOOTHING) -> torch.Tensor:
    """Per-row entropy in nats of the smoothed attention: ... × n."""
    p = smoothed(attention, smoothing)
    return -(p * torch.log(p)).sum(-1)


def _mean_over_rows(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Mean over the selected query rows of ... × n values; NaN when no row is selected."""
    if not bool(rows.any()):
        return torch.full(values.shape[:-1], float("nan"), device=values.device)
    return values[..., rows].mean(-1)


def _diagonal_mean(attention: torch.Tensor, offset: int) -> torch.Tensor:
    """(1/n) Σ_i A[i, i + offset]: Clark divides by n whatever the offset."""
    n = attention.shape[-1]
    return torch.diagonal(attention, offset=offset, dim1=-2, dim2=-1).sum(-1) / n


def head_statistics(attention: torch.Tensor, kinds: TokenKinds) -> dict[str, torch.Tensor]:
    """Clark et al. section 3 for one document: measure → L × H (any leading shape).

    cls / sep / punct: mean over queries of the attention summed over those keys (both [SEP]s count).
    sep_sep: mean over [SEP] queries of attention to [SEP] (Clark's Σ/2 with two [SEP]s).
    other_sep: mean over the other queries of attention to [SEP] (Clark's Σ/(n − 2)).
    prev / current / next: (1/n) Σ_i A[i, i−1], A[i, i], A[i, i+1].
    entropy: mean over queries of the smoothed row entropy; entropy_cls: row 0 only.

    With one [SEP] (a single sentence) these are means over the actual queries, where Clark's
    fixed denominators (written for pairs) give sep_sep/2 and other_sep·(n−1)/(n−2). For pairs
    both agree. Measured with the embedded MiniLM on the notebook's 40 sentences one by one
    (12–19 tokens): sep_sep averages 0.055 over heads here against 0.028 by Clark's formula;
    other_sep 0.034 against 0.036 (at most 8 % apart per head).
    """
    a = attention.float()
    to_cls = a[..., kinds.cls].sum(-1)  # ... × n (per query)
    to_sep = a[..., kinds.sep].sum(-1)
    to_punct = a[..., kinds.punct].sum(-1)
    row_entropy = entropy(a)
    return {
        "cls": to_cls.mean(-1),
        "sep": to_sep.mean(-1),
        "punct": to_punct.mean(-1),
        "sep_sep": _mean_over_rows(to_sep, kinds.sep),
        "other_sep": _mean_over_rows(to_sep, ~kinds.sep),
        "prev": _diagonal_mean(a, -1),
        "current": _diagonal_mean(a, 0),
        "next": _diagonal_mean(a, 1),
        "entropy": row_entropy.mean(-1),
        "entropy_cls": row_entropy[..., 0],
    }


def behaviour_of(stats: dict[str, float]) -> str:
    """Clark et al.'s behaviour label of one head from its averaged statistics."""
    for measure, name, threshold in BEHAVIOUR_RULES:
        value = stats.get(measure)
        if value is not None and value == value and value > threshold:
            return name
    return "other"


# ---------------------------------------------------------------------------------------------
# Word-level attention (section 4.1)


def word_groups(word_ids: Sequence[int | None], sequence_ids: Sequence[int | None] | None = None) -> list[list[int]]:
    """Token positions of each word, in order. Special tokens (word id None) are words of their own.

    word_ids and sequence_ids are what a fast tokenizer's encoding returns; a word continues while
    (sequence, word id) stays the same, so sentence B's word 0 is not merged into sentence A's.
    """
    groups: list[list[int]] = []
    previous: tuple | None = None
    for position, word in enumerate(word_ids):
        sequence = sequence_ids[position] if sequence_ids is not None else 0
        key = None if word is None else (sequence, word)
        if key is not None and key == previous:
            groups[-1].append(position)
        else:
            groups.append([position])
        previous = key
    return groups


def membership(groups: Sequence[Sequence[int]], n_tokens: int, device=None) -> torch.Tensor:
    """n_tokens × n_words one-hot matrix: S[t, w] = 1 when token t belongs to word w."""
    s = torch.zeros(n_tokens, len(groups), device=device)
    for w, positions in enumerate(groups):
        s[list(positions), w] = 1.0
    if not bool((s.sum(1) == 1).all()):
        raise ValueError("word groups must cover every token exactly once")
    return s


def merge_words(
    attention: torch.Tensor, groups: Sequence[Sequence[int]], key_groups: Sequence[Sequence[int]] | None = None
) -> torch.Tensor:
    """Word-level attention, ... × W × W: sum over a word's pieces as keys, mean as queries.

    key_groups: the keys' words when they are other tokens (cross-attention); default `groups`.
    Rows still sum to 1. (Clark's code defaults to the first piece's row; the paper says mean.)
    """
    rows = membership(groups, attention.shape[-2], device=attention.device)
    cols = rows if key_groups is None else membership(key_groups, attention.shape[-1], device=attention.device)
    mean_rows = rows / rows.sum(0, keepdim=True)
    return mean_rows.transpose(0, 1) @ attention.float() @ cols


def merge_tokens(tokens: Sequence[str], groups: Sequence[Sequence[int]]) -> list[str]:
    """Word strings from wordpieces: "##" continuations and BPE/SentencePiece markers joined."""
    words = []
    for positions in groups:
        pieces = [tokens[p] for p in positions]
        if len(pieces) == 1:
            words.append(pieces[0])
            continue
        text = pieces[0]
        for piece in pieces[1:]:
            text += piece[2:] if piece.startswith("##") else piece
        words.append(text)
    return words


# ---------------------------------------------------------------------------------------------
# Head distances and MDS (section 6)


def js_divergence(attention: torch.Tensor, smoothing: float = JS_SMOOTHING, chunk: int = 4) -> torch.Tensor:
    """Jensen–Shannon divergence between every pair of heads of one document, summed over queries.

    attention: K × n × n (all heads flattened). Returns K × K, symmetric, zero diagonal.
    JS(P, Q) = ½ Σ_j [P ln(P/M) + Q ln(Q/M)], M = (P + Q)/2, computed as
    ½(Σ P ln P + Σ Q ln Q) − Σ M ln M so only the M term needs each pair.
    """
    p = smoothed(attention.float(), smoothing)
    k = p.shape[0]
    self_terms = torch.special.xlogy(p, p).sum((-1, -2))  # K
    out = torch.zeros(k, k, device=p.device)
    for start in range(0, k, chunk):
        block = p[start : start + chunk]  # c × n × n
        others = p[start:]  # symmetric: only pairs (h, g) with g ≥ the block's first head
        m = block[:, None] + others[None]  # c × (K − start) × n × n, reused in place below
        m.mul_(0.5)
        cross = torch.special.xlogy(m, m, out=m).sum((-1, -2))
        rows = 0.5 * (self_terms[start : start + chunk, None] + self_terms[None, start:]) - cross
        out[start : start + chunk, start:] = rows
        out[start:, start : start + chunk] = rows.transpose(0, 1)
    out.fill_diagonal_(0.0)
    return out.clamp_min_(0.0)


def classical_mds(distances: torch.Tensor, n_components: int = 2) -> torch.Tensor:
    """Torgerson's classical MDS: exact for Euclidean distances (up to rotation and reflection)."""
    d2 = distances.double() ** 2
    k = d2.shape[0]
    centre = torch.eye(k, dtype=d2.dtype, device=d2.device) - 1.0 / k
    b = -0.5 * centre @ d2 @ centre
    values, vectors = torch.linalg.eigh(b)
    order = torch.argsort(values, descending=True)[:n_components]
    return (vectors[:, order] * values[order].clamp_min(0).sqrt()).float()


def stress(distances: torch.Tensor, points: torch.Tensor) -> float:
    """Raw stress Σ_{i<j} (d_ij − ‖x_i − x_j‖)²."""
    fitted = torch.cdist(points.double(), points.double())
    return float(((distances.double() - fitted) ** 2).triu(1).sum())


MAX_N_INIT = 1000  # MDS starts: each is up to 300 SMACOF iterations (Clark et al. ran 5)


def check_n_init(n_init: int, seed: int = 0) -> int:
    """n_init, the number of MDS starts: a whole number in 1..MAX_N_INIT (10**30 would run for
    ever); and the seed of their random starts, one torch takes."""
    checks.integer("seed", seed, minimum=0, maximum=2**63 - 1)
    return checks.integer("n_init", n_init, minimum=1, maximum=MAX_N_INIT)


def _smacof(d: torch.Tensor, x: torch.Tensor, max_iter: int, eps: float) -> tuple[torch.Tensor, float]:
    """Guttman-transform iterations from the start x until the relative stress gain is ≤ eps."""
    k = d.shape[0]
    previous = stress(d, x)
    for _ in range(max_iter):
        fitted = torch.cdist(x, x)
        ratio = torch.where(fitted > 0, d / fitted.clamp_min(1e-300), torch.zeros_like(d))
        b = -ratio
        b.fill_diagonal_(0.0)
        b -= torch.diag(b.sum(1))
        x = b @ x / k  # Guttman transform
        current = stress(d, x)
        if previous - current <= eps * max(previous, 1e-300):
            return x, current
        previous = current
    return x, previous


def mds(
    distances: torch.Tensor, n_components: int = 2, max_iter: int = 300, eps: float = 1e-10, n_init: int = 1, seed: int = 0
) -> torch.Tensor:
    """Metric MDS by SMACOF, as sklearn's MDS that Clark et al. used.

    n_init = 1 (the default): one run started from classical MDS, usually already near the best
    layout. n_init > 1 adds n_init − 1 runs from uniform random starts (sklearn's init; Clark ran
    n_init=5), drawn from a generator seeded with `seed`, and keeps the layout of lowest stress.
    Deterministic either way: the same distances and arguments always give the same layout.
    """
    check_n_init(n_init, seed)
    d = distances.double()
    d = 0.5 * (d + d.transpose(0, 1))
    k = d.shape[0]
    best, best_stress = _smacof(d, classical_mds(d, n_components).double(), max_iter, eps)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(n_init - 1):
        start = torch.rand(k, n_components, generator=generator, dtype=torch.float64).to(d.device)
        layout, layout_stress = _smacof(d, start, max_iter, eps)
        if layout_stress < best_stress:
            best, best_stress = layout, layout_stress
    return best.float()


# ---------------------------------------------------------------------------------------------
# Rollout (Abnar & Zuidema 2020)


def rollout(attention: torch.Tensor, residual: float = 0.5) -> torch.Tensor:
    """Attention rollout: L × H × n × n → L × n × n, where entry l is rolled out up to layer l.

    Â_l = residual·I + (1 − residual)·mean_h A_l, rows renormalised; R_0 = Â_0, R_l = Â_l · R_{l−1}.
    """
    mixed = attention.float().mean(1)
    n = mixed.shape[-1]
    eye = torch.eye(n, device=mixed.device)
    augmented = residual * eye + (1.0 - residual) * mixed
    augmented = augmented / augmented.sum(-1, keepdim=True)
    return rolled_out(augmented)


def rolled_out(mixing: torch.Tensor) -> torch.Tensor:
    """Per-layer mixing matrices (L × n × n, row i: what layer l's output i takes from each of its
    inputs) rolled out through the layers: R_0 = M_0, R_l = M_l · R_{l−1} (L × n × n), entry l
    what output i of layer l takes from each input token. Rollout's and ALTI's last step."""
    rolled = [mixing[0]]
    for layer in range(1, mixing.shape[0]):
        rolled.append(mixing[layer] @ rolled[-1])
    return torch.stack(rolled)


# ---------------------------------------------------------------------------------------------
# Syntax heads (section 4.2)
#
# Two scorings. "clark" is the recipe of Clark et al.'s Syntax_Analysis.ipynb, which printed
# Table 1: every word counts, the baseline may predict ROOT, and "poss" has a special rule.
# "uas" is the dependency-parsing convention: root and punctuation words are not scored.

SCORINGS = ("clark", "uas")
BASELINE_OFFSETS = (-3, -2, -1, 1, 2, 3)  # "uas": clipped into the sentence, never the word itself
CLARK_BASELINE_OFFSETS = (-3, -2, -1, 0, 1, 2)  # the notebook's range(-3, 3)
POSSESSIVE_MARKERS = ("'s", "s'")


def predict_heads(
    word_attention: torch.Tensor, direction: str = "dependent_to_head", self_score: float = float("-inf")
) -> torch.Tensor:
    """For each word, the word a head attends to most: ... × W × W → ... × W (0-based word index).

    dependent_to_head: the word each word attends to; head_to_dependent: the word that attends most
    to it (the transpose). The input holds only the sentence's words (no [CLS]/[SEP]), as Clark's
    notebook crops them; a head therefore never predicts ROOT.
    self_score: what the diagonal is set to before the argmax. −inf: a word never predicts itself.
    0.0: Clark's notebook, which zeroes it, so a word predicts itself only when it gives every
    other word exactly 0 (ties go to the first word, as with numpy's argmax).
    """
    a = word_attention.float()
    if direction == "head_to_dependent":
        a = a.transpose(-1, -2)
    elif direction != "dependent_to_head":
        raise ValueError(f"direction must be 'dependent_to_head' or 'head_to_dependent', not {direction!r}")
    w = a.shape[-1]
    a = a.masked_fill(torch.eye(w, dtype=torch.bool, device=a.device), self_score)
    return a.argmax(-1)


def offset_predictions(n_words: int, offset: int, clip_to_root: bool = False) -> torch.Tensor:
    """The fixed-offset baseline: word i's head is word i + offset, clipped into the sentence.

    clip_to_root: clip below at −1 (ROOT) rather than at word 0, as Clark's baseline does (its
    max(0, min(i + offset + 1, n)) in 1-based numbering with 0 for ROOT).
    """
    return (torch.arange(n_words) + offset).clamp(-1 if clip_to_root else 0, n_words - 1)


def apply_possessive_rule(predicted: torch.Tensor, words: Sequence[str], relations: Sequence[str]) -> torch.Tensor:
    """Clark's special case for "poss" (section 4.2): a head that links "'s", rather than the
    possessor, to the possessed noun counts as right, so a possessor followed by "'s" or "s'" is
    scored by the marker's prediction. As in the notebook, only when the possessor's own prediction
    is not the last word (its `p < len(words)` on 1-based p); a last word has no marker after it.

    predicted: ... × W, 0-based (−1 for ROOT). Returns a new tensor.
    """
    out = predicted.clone()
    n = len(words)
    for i, relation in enumerate(relations):
        if relation == "poss" and i + 1 < n and words[i + 1] in POSSESSIVE_MARKERS:
            own = predicted[..., i]
            out[..., i] = torch.where(own < n - 1, predicted[..., i + 1], own)
    return out


def accuracy_by_relation(
    predicted: torch.Tensor, gold_heads: Sequence[int], relations: Sequence[str], include_roots: bool = False
) -> dict[str, tuple[torch.Tensor, int]]:
    """relation → (correct, total) for one sentence, "All" included.

    predicted: ... × W word indices (−1 for ROOT); gold_heads: 0-based head of each word, −1 for
    the root. include_roots: count root words too (Clark's notebook counts every word; a head,
    which never predicts ROOT, then always misses them). Otherwise they are skipped.
    """
    counts: dict[str, tuple[torch.Tensor, int]] = {}
    gold = torch.tensor(list(gold_heads), device=predicted.device)
    scored = [include_roots or g >= 0 for g in gold_heads]
    for relation in sorted(set(relations)) + ["All"]:
        rows = torch.tensor(
            [keep and (relation == "All" or r == relation) for r, keep in zip(relations, scored)],
            dtype=torch.bool,
            device=predicted.device,
        )
        if not bool(rows.any()):
            continue
        counts[relation] = ((predicted[..., rows] == gold[rows]).sum(-1), int(rows.sum()))
    return counts


# ---------------------------------------------------------------------------------------------
# Gradients and importance (Clark section 3.2; Michel et al. 2019)


def gradient_by_key_type(gradient: torch.Tensor, kinds: TokenKinds) -> dict[str, torch.Tensor]:
    """Mean |∂L/∂A_ij| over all queries and the keys of each type, per layer: key type → L.

    gradient: L × H × n × n. Types as in Clark's Fig. 3: [SEP], "." and ",", and other (not
    [CLS], [SEP] or punctuation).
    """
    g = gradient.abs().float()
    out = {}
    for name, keys in (("sep", kinds.sep), ("punct", kinds.punct & ~kinds.sep), ("other", kinds.other)):
        if bool(keys.any()):
            out[name] = g[..., keys].mean((1, 2, 3))
        else:
            out[name] = torch.full((g.shape[0],), float("nan"), device=g.device)
    return out


def normalize_importance(importance: torch.Tensor, exponent: float = 2.0) -> torch.Tensor:
    """Michel et al.: divide each layer's head importances by their ℓ2 norm (L × H)."""
    norm = importance.abs().pow(exponent).sum(-1, keepdim=True).pow(1.0 / exponent)
    return importance / norm.clamp_min(1e-20)


def sink_measures(first: torch.Tensor, n_first: int, epsilon: float) -> dict[str, torch.Tensor]:
    """Attention-sink measures of heads from their attention on the first keys (... × T × n).

    alpha_first: Gu et al. 2024's importance of the first token, (1/T) Σ_i A[i, 0] (every query
    sees it); sink: alpha_first > epsilon (their ε = 0.3); first_n_mass: the mean over queries of
    the attention on the first n_first tokens (StreamingLLM keeps 4 such sink tokens)."""
    alpha = first[..., 0].mean(-1)
    mass = first[..., :n_first].sum(-1).mean(-1)
    return {"alpha_first": alpha, "first_n_mass": mass, "sink": (alpha > epsilon).float()}
