"""Kovaleva et al. 2019's attention patterns (issue 34): the rule on synthetic maps of each class,
and the shares per head and per layer over a corpus."""

from __future__ import annotations

import pytest
import torch

import attnscope
from attnscope.analyses.patterns import PATTERNS, classify, pattern_shares, segments_of

N = 12
PAIR = torch.tensor([0] * 6 + [1] * 6)  # [CLS] a a a a [SEP] b b b b b [SEP]


def rows(weights: torch.Tensor) -> torch.Tensor:
    return weights / weights.sum(-1, keepdim=True)


def synthetic(kind: str, noise: float, seed: int) -> torch.Tensor:
    """An n × n map of one class, with `noise` of each row's weight spread at random."""
    g = torch.Generator().manual_seed(seed)
    base = torch.zeros(N, N)
    index = torch.arange(N)
    if kind in ("vertical", "vertical + diagonal"):
        base[:, 0] += 1.0  # [CLS]
        base[:, 5] += 1.0  # [SEP]
    if kind in ("diagonal", "vertical + diagonal"):
        for offset in (-1, 0, 1):
            j = (index + offset).clamp(0, N - 1)
            base[index, j] += 1.5 if kind == "diagonal" else 0.9
    if kind == "block":
        same = PAIR[:, None] == PAIR[None, :]
        base += same.float()
        base[:, [0, 5]] = 0.05
        base[index, index] = 0.05
    if kind == "heterogeneous":
        base = torch.rand(N, N, generator=g)
    return rows((1 - noise) * rows(base) + noise * rows(torch.rand(N, N, generator=g)))


def test_the_rule_classes_noisy_synthetic_maps_of_each_pattern():
    wrong = []
    for kind in PATTERNS:
        for seed in range(20):
            noise = 0.1 + 0.01 * seed  # 10 % to 29 % of each row spread at random
            got = PATTERNS[int(classify(pattern_shares(synthetic(kind, noise, seed)[None, None], PAIR)))]
            if got != kind:
                wrong.append((kind, seed, got))
    assert wrong == [], wrong


def test_a_single_sentence_has_no_block_and_a_pair_is_found_by_its_seps():
    sep = torch.zeros(N, dtype=torch.bool)
    sep[[5, 11]] = True
    assert segments_of(sep).tolist() == PAIR.tolist()
    single = torch.zeros(N, dtype=torch.bool)
    single[11] = True
    assert segments_of(single).tolist() == [0] * N
    block_map = synthetic("block", 0.1, 0)[None, None]
    assert float(pattern_shares(block_map, segments_of(single))["block"]) == 0.0


def test_shares_per_head_and_per_layer_over_a_corpus(default_model):
    pairs = [("The cat sat on the mat.", "It was tired."), ("Rain fell all day.", "Nobody went out."),
             ("She read the letter again.", "Then she smiled.")]
    frame = attnscope.attention_patterns(default_model, pairs, progress=False)
    assert set(frame.measure) == set(PATTERNS) and frame.attrs["documents"] == 3
    per_head = frame.pivot_table(index=["layer", "head"], columns="measure", values="value")
    assert torch.allclose(torch.tensor(per_head.sum(axis=1).to_numpy()), torch.ones(72, dtype=torch.float64))
    # Against the rule applied to each run's own maps.
    counts = torch.zeros(6, 12, len(PATTERNS))
    for text, text_b in pairs:
        result = default_model.run(text, text_b)
        sep = torch.tensor([t == "[SEP]" for t in result.tokens])
        classes = classify(pattern_shares(result.attention, segments_of(sep)))
        counts += torch.nn.functional.one_hot(classes, len(PATTERNS)).float()
    for i, name in enumerate(PATTERNS):
        assert torch.allclose(torch.tensor(per_head[name].to_numpy()).float().view(6, 12), counts[..., i] / 3, atol=1e-6), name
    by_layer = attnscope.patterns_by_layer(frame)
    assert list(by_layer.columns) == list(PATTERNS) and len(by_layer) == 6
    widget = attnscope.AttentionWidget(*pairs[0], model=default_model).show_analysis(frame)
    pattern = widget.analysis["measures"][0]
    assert pattern["categories"][0] == "heterogeneous" and set(pattern["categories"]) == set(PATTERNS)


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
def test_the_rule_against_maps_labelled_by_hand(default_model):
    """60 maps of the embedded model labelled by eye (tests/data/pattern_labels.json, before the
    rule's classes were looked at). The thresholds were chosen on the first 30; on the other 30
    the rule is right on 18. Per class, over all 60: vertical 20/26, heterogeneous 11/15,
    vertical + diagonal 6/15, diagonal 0/2, block 0/2 (Kovaleva et al.'s CNN: F1 0.86)."""
    import json
    from pathlib import Path

    labelled = json.loads((Path(__file__).parents[1] / "data" / "pattern_labels.json").read_text(encoding="utf-8"))["maps"]
    sentences = [s for s in (Path(__file__).parents[2] / "notebooks/data/sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    right = {}
    for index, item in enumerate(labelled):
        result = default_model.run(sentences[2 * item["pair"]], sentences[2 * item["pair"] + 1])
        sep = torch.tensor([t == "[SEP]" for t in result.tokens])
        shares = pattern_shares(result.attention[item["layer"], item["head"]][None, None], segments_of(sep))
        got = PATTERNS[int(classify(shares))]
        right.setdefault(item["label"], []).append((index, got == item["label"]))
    held_out = sum(ok for marks in right.values() for index, ok in marks if index >= 30)
    per_class = {label: f"{sum(ok for _, ok in marks)}/{len(marks)}" for label, marks in right.items()}
    assert held_out >= 18, per_class
    assert per_class["vertical"] == "20/26" and per_class["heterogeneous"] == "11/15", per_class


def test_the_shares_are_their_definition_as_masked_sums():
    """pattern_shares reads column means and three diagonals; by definition each share is the mean
    over rows of the weight under a mask (vertical columns; the band |i − j| ≤ 1 off them; the row's
    own segment), whatever the segments' layout. In float64: the two sides sum in other orders, and
    the test is of the algebra, not of float32's rounding (whose lanes differ from CPU to CPU)."""
    torch.manual_seed(0)
    for n in (1, 2, 5, 40):
        maps = torch.softmax(torch.randn(3, 4, n, n, dtype=torch.float64) * 3, -1)
        for segment in (torch.zeros(n, dtype=torch.long), (torch.arange(n) >= n // 2).long(), torch.arange(n) % 2):
            top = maps.mean(-2).topk(min(2, n), dim=-1).indices
            vertical = torch.zeros(3, 4, n, dtype=torch.bool).scatter_(-1, top, True)[..., None, :]
            index = torch.arange(n)
            band = (index[:, None] - index[None, :]).abs() <= 1
            pair = bool((segment != segment[0]).any())
            expected = {"vertical": (maps * vertical).sum(-1).mean(-1), "diagonal": (maps * (band & ~vertical)).sum(-1).mean(-1),
                        "block": (maps * (segment[:, None] == segment[None, :])).sum(-1).mean(-1) if pair else torch.zeros(3, 4, dtype=torch.float64)}
            shares = pattern_shares(maps, segment)
            for name, value in expected.items():
                torch.testing.assert_close(shares[name].double(), value, rtol=0, atol=1e-12, msg=f"{name}, n={n}")
