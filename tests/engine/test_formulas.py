"""The BERTology formulas on small hand-made attention maps whose answers are worked out by hand."""

import math

import pytest
import torch

from attnscope import InputError
from attnscope.engine import formulas as an

TOKENS = ["[CLS]", "the", "cat", ".", "[SEP]"]


def one_hot_rows(targets, n):
    """An n × n map where query i puts all its attention on key targets[i]."""
    a = torch.zeros(n, n)
    a[torch.arange(n), torch.tensor(targets)] = 1.0
    return a


def test_token_kinds_find_cls_every_sep_and_punctuation_including_bpe_markers():
    kinds = an.token_kinds(["[CLS]", "a", ",", "[SEP]", "b", "[SEP]"])
    assert kinds.cls.tolist() == [True, False, False, False, False, False]
    assert kinds.sep.tolist() == [False, False, False, True, False, True]
    assert kinds.punct.tolist() == [False, False, True, False, False, False]
    assert an.token_kinds(["<s>", "Ġ.", "▁,", "</s>"]).punct.tolist() == [False, True, True, False]


def test_head_statistics_of_known_maps():
    n = len(TOKENS)
    kinds = an.token_kinds(TOKENS)
    to_sep = one_hot_rows([4] * n, n)  # everyone looks at [SEP]
    previous = one_hot_rows([0, 0, 1, 2, 3], n)  # each token looks back one ([CLS] at itself)
    uniform = torch.full((n, n), 1.0 / n)
    stats = an.head_statistics(torch.stack([to_sep, previous, uniform])[None], kinds)  # 1 layer × 3 heads

    assert stats["sep"][0].tolist() == pytest.approx([1.0, 0.0, 1 / 5])
    assert stats["cls"][0].tolist() == pytest.approx([0.0, 2 / 5, 1 / 5])
    assert stats["punct"][0].tolist() == pytest.approx([0.0, 1 / 5, 1 / 5])
    assert stats["sep_sep"][0].tolist() == pytest.approx([1.0, 0.0, 1 / 5])
    assert stats["other_sep"][0].tolist() == pytest.approx([1.0, 0.0, 1 / 5])
    # Clark divides by n: 4 of 5 tokens have a previous token.
    assert stats["prev"][0].tolist() == pytest.approx([0.0, 4 / 5, 4 / 25])
    assert stats["current"][0].tolist() == pytest.approx([1 / 5, 1 / 5, 1 / 5])
    assert stats["next"][0].tolist() == pytest.approx([1 / 5, 0.0, 4 / 25])
    # Uniform attention has entropy ln n; one-hot rows nearly 0 (smoothing keeps it just above).
    assert stats["entropy"][0, 2].item() == pytest.approx(math.log(n), abs=1e-6)
    p_hit, p_miss = 0.9999 + 0.0001 / n, 0.0001 / n
    one_hot_entropy = -(p_hit * math.log(p_hit) + (n - 1) * p_miss * math.log(p_miss))
    assert stats["entropy"][0, 0].item() == pytest.approx(one_hot_entropy, rel=1e-4)
    assert stats["entropy_cls"][0].tolist() == pytest.approx([one_hot_entropy, one_hot_entropy, math.log(n)], rel=1e-4)


def test_sep_to_sep_is_nan_without_a_sep_token_rather_than_silently_zero():
    kinds = an.token_kinds(["a", "b"])
    stats = an.head_statistics(torch.full((1, 1, 2, 2), 0.5), kinds)
    assert math.isnan(stats["sep_sep"].item())
    assert stats["other_sep"].item() == 0.0


def test_behaviour_labels_use_clark_thresholds_in_order():
    assert an.behaviour_of({"entropy": 3.9, "prev": 0.9}) == "broad"
    assert an.behaviour_of({"entropy": 1.0, "prev": 0.51}) == "previous token"
    assert an.behaviour_of({"entropy": 1.0, "prev": 0.5, "next": 0.7}) == "next token"
    assert an.behaviour_of({"entropy": 1.0, "sep": 0.61}) == "[SEP]"
    assert an.behaviour_of({"entropy": 1.0, "sep": 0.6, "punct": 0.59}) == "other"


def test_word_groups_merge_pieces_and_keep_specials_and_sentences_apart():
    # [CLS] un ##believ ##able [SEP] un [SEP]: sentence B's word 0 must not join sentence A's word 0.
    word_ids = [None, 0, 0, 0, None, 0, None]
    sequence_ids = [None, 0, 0, 0, None, 1, None]
    assert an.word_groups(word_ids, sequence_ids) == [[0], [1, 2, 3], [4], [5], [6]]
    assert an.merge_tokens(["[CLS]", "un", "##believ", "##able", "[SEP]"], [[0], [1, 2, 3], [4]]) == [
        "[CLS]",
        "unbelievable",
        "[SEP]",
    ]


def test_merge_words_sums_columns_averages_rows_and_keeps_rows_stochastic():
    a = torch.tensor(
        [
            [0.5, 0.25, 0.25],
            [0.0, 0.5, 0.5],
            [1.0, 0.0, 0.0],
        ]
    )
    merged = an.merge_words(a, [[0], [1, 2]])
    # To the word {1,2}: summed; from it: the mean of rows 1 and 2.
    assert torch.allclose(merged, torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    random = torch.softmax(torch.randn(2, 3, 6, 6), -1)
    groups = [[0], [1, 2], [3], [4, 5]]
    merged = an.merge_words(random, groups)
    assert merged.shape == (2, 3, 4, 4)
    assert torch.allclose(merged.sum(-1), torch.ones(2, 3, 4))
    from_word_1 = random[..., [1, 2], :].mean(-2)  # mean of its pieces' rows
    assert torch.allclose(merged[..., 1, 1], from_word_1[..., 1] + from_word_1[..., 2])
    assert torch.allclose(merged[..., 0, 3], random[..., 0, 4] + random[..., 0, 5])
    with pytest.raises(ValueError):
        an.merge_words(random, [[0], [1, 2]])  # tokens left out


def test_js_divergence_matches_the_definition_and_is_symmetric():
    torch.manual_seed(0)
    heads = torch.softmax(torch.randn(4, 5, 5) * 3, -1)
    js = an.js_divergence(heads, chunk=3)
    p = 0.999 * heads + 0.001 / 5
    m = (p[1] + p[2]) / 2
    expected = 0.5 * ((p[1] * (p[1] / m).log()).sum() + (p[2] * (p[2] / m).log()).sum())
    assert js[1, 2].item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.allclose(js, js.T, atol=1e-6)
    assert js.diagonal().tolist() == [0.0] * 4

    def brute(a, b):
        mid = (a + b) / 2
        return 0.5 * ((a * (a / mid).log()).sum() + (b * (b / mid).log()).sum())

    every_pair = torch.tensor([[brute(p[i], p[j]) for j in range(4)] for i in range(4)])
    for chunk in (1, 3, 4, 16):  # blocks that split the heads unevenly, or not at all
        assert torch.allclose(an.js_divergence(heads, chunk=chunk), every_pair, atol=1e-5)
    # Identical heads are at distance 0; disjoint one-hot heads at n·ln 2 (before smoothing).
    same = an.js_divergence(torch.stack([heads[0], heads[0]]))
    assert same[0, 1].item() == pytest.approx(0.0, abs=1e-6)
    disjoint = an.js_divergence(torch.stack([one_hot_rows([0, 0, 0], 3), one_hot_rows([1, 1, 1], 3)]), smoothing=0.0)
    assert disjoint[0, 1].item() == pytest.approx(3 * math.log(2), rel=1e-4)


def test_mds_recovers_planar_points_up_to_rotation():
    points = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [3.0, 4.0], [1.0, 1.0]])
    distances = torch.cdist(points, points)
    layout = an.mds(distances)
    assert torch.allclose(torch.cdist(layout, layout), distances, atol=1e-3)
    assert an.stress(distances, layout) < 1e-6
    # Non-Euclidean dissimilarities: SMACOF improves on its classical start and is deterministic.
    torch.manual_seed(1)
    d = torch.rand(8, 8)
    d = d + d.T
    d.fill_diagonal_(0)
    start = an.classical_mds(d)
    assert an.stress(d, an.mds(d)) <= an.stress(d, start) + 1e-9
    assert torch.equal(an.mds(d), an.mds(d))


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
def test_mds_random_starts_keep_the_lowest_stress_and_are_seeded():
    # 36 points of a Clifford torus in 4-D: SMACOF from the classical start stops in a local
    # minimum that random starts get below.
    angles = [2 * math.pi * k / 6 for k in range(6)]
    points = torch.tensor([[math.cos(a), math.sin(a), math.cos(b), math.sin(b)] for a in angles for b in angles])
    d = torch.cdist(points, points)
    classical_start = an.stress(d, an.mds(d))
    assert torch.equal(an.mds(d, n_init=1), an.mds(d))  # n_init=1 is the classical start alone
    stresses = [an.stress(d, an.mds(d, n_init=k)) for k in (2, 3, 5)]
    assert stresses[-1] < 0.99 * classical_start
    # The random starts are a seeded sequence, so more starts never end higher.
    assert stresses[0] <= classical_start and stresses[1] <= stresses[0] and stresses[2] <= stresses[1]
    assert torch.equal(an.mds(d, n_init=5, seed=3), an.mds(d, n_init=5, seed=3))
    for bad in (0, -2, 1.5, True):
        with pytest.raises(InputError, match="n_init"):
            an.mds(d, n_init=bad)


def test_rollout_of_identity_layers_is_identity_and_follows_the_recursion():
    n = 4
    eye = torch.eye(n).expand(3, 2, n, n)
    assert torch.allclose(an.rollout(eye), torch.eye(n).expand(3, n, n))
    torch.manual_seed(2)
    a = torch.softmax(torch.randn(2, 3, n, n), -1)
    rolled = an.rollout(a)
    step = [0.5 * torch.eye(n) + 0.5 * a[layer].mean(0) for layer in range(2)]
    assert torch.allclose(rolled[0], step[0])
    assert torch.allclose(rolled[1], step[1] @ step[0])
    assert torch.allclose(rolled.sum(-1), torch.ones(2, n))


def test_predict_heads_in_both_directions_never_predicts_itself():
    a = torch.tensor(
        [
            [0.9, 0.1, 0.0],  # word 0 mostly attends to itself: its best other word is 1
            [0.7, 0.2, 0.1],
            [0.0, 0.8, 0.2],
        ]
    )
    assert an.predict_heads(a).tolist() == [1, 0, 1]
    # Head → dependent: which word attends most to word j (column j, diagonal excluded).
    assert an.predict_heads(a, "head_to_dependent").tolist() == [1, 2, 1]
    with pytest.raises(ValueError):
        an.predict_heads(a, "sideways")


def test_accuracy_by_relation_and_offset_baseline():
    # "the cat sat": det(the→cat), nsubj(cat→sat), sat = root.
    gold = [1, 2, -1]
    relations = ["det", "nsubj", "ROOT"]
    predicted = torch.tensor([[1, 2, 0], [1, 0, 0]])  # two heads
    scores = an.accuracy_by_relation(predicted, gold, relations)
    assert scores["det"][0].tolist() == [1, 1] and scores["det"][1] == 1
    assert scores["nsubj"][0].tolist() == [1, 0]
    assert scores["All"][0].tolist() == [2, 1] and scores["All"][1] == 2
    assert "ROOT" not in scores  # roots have no head to find
    assert an.offset_predictions(3, 1).tolist() == [1, 2, 2]
    assert an.offset_predictions(3, -2).tolist() == [0, 0, 0]


def test_predict_heads_with_a_zeroed_diagonal_as_clark_can_predict_the_word_itself():
    a = torch.tensor(
        [
            [0.4, 0.0, 0.0],  # word 0 gives the other words nothing (the rest went to [CLS]/[SEP])
            [0.3, 0.1, 0.3],  # a tie: the first word wins, as numpy's argmax
            [0.0, 0.5, 0.2],
        ]
    )
    assert an.predict_heads(a, self_score=0.0).tolist() == [0, 0, 1]
    assert an.predict_heads(a).tolist() == [1, 0, 1]  # −inf: never itself
    # Transposed: column j with its diagonal zeroed is [0, 0.3, 0], [0, 0, 0.5], [0, 0.3, 0].
    assert an.predict_heads(a, "head_to_dependent", self_score=0.0).tolist() == [1, 2, 1]
    assert an.predict_heads(a, "head_to_dependent").tolist() == [1, 2, 1]


def test_clark_offset_baseline_reaches_root_and_the_word_itself():
    n = 4
    for offset in range(-3, 3):  # the notebook's offsets and formula, 1-based with 0 = ROOT
        notebook = [max(0, min(i + offset + 1, n)) for i in range(n)]
        assert an.offset_predictions(n, offset, clip_to_root=True).tolist() == [p - 1 for p in notebook]
    assert an.offset_predictions(n, -3, clip_to_root=True).tolist() == [-1, -1, -1, 0]
    assert an.offset_predictions(n, 0, clip_to_root=True).tolist() == [0, 1, 2, 3]
    assert an.CLARK_BASELINE_OFFSETS == (-3, -2, -1, 0, 1, 2)
    assert an.BASELINE_OFFSETS == (-3, -2, -1, 1, 2, 3)


# "Ann 's dog ." as Stanford Dependencies: Ann is dog's possessor, 's attaches to Ann, dog is the
# root, "." hangs on dog.
WORDS = ["Ann", "'s", "dog", "."]
GOLD = [2, 0, -1, 2]
RELATIONS = ["poss", "possessive", "ROOT", "punct"]


def test_possessive_rule_scores_the_markers_prediction_unless_the_possessor_points_at_the_last_word():
    predicted = torch.tensor(
        [
            [1, 2, 3, 2],  # Ann → 's, whose prediction (dog) is scored in its place
            [3, 0, 1, 2],  # Ann → the last word: the notebook's p < len(words) fails, no rule
            [-1, 0, 1, 2],  # ROOT (a baseline's) passes p < len(words): 's's prediction is used
        ]
    )
    ruled = an.apply_possessive_rule(predicted, WORDS, RELATIONS)
    assert ruled.tolist() == [[2, 2, 3, 2], [3, 0, 1, 2], [0, 0, 1, 2]]
    assert predicted[0].tolist() == [1, 2, 3, 2]  # the input is left alone
    # "s'" is a marker too; a possessor at the end of the sentence has none and is left alone.
    boys = an.apply_possessive_rule(torch.tensor([3, 0, 3, 0]), ["the", "boys", "s'", "toys"], ["det", "poss", "possessive", "ROOT"])
    assert boys.tolist() == [3, 3, 3, 0]
    assert an.apply_possessive_rule(torch.tensor([1, 0]), ["saw", "Ann"], ["ROOT", "poss"]).tolist() == [1, 0]
    assert an.apply_possessive_rule(torch.tensor([1, 0]), ["Ann", "left"], ["poss", "ROOT"]).tolist() == [1, 0]


def test_clark_scoring_counts_every_word_and_uas_skips_root_and_punctuation():
    predicted = an.apply_possessive_rule(torch.tensor([1, 2, 3, 2]), WORDS, RELATIONS)  # → [2, 2, 3, 2]
    clark = an.accuracy_by_relation(predicted, GOLD, RELATIONS, include_roots=True)
    assert {r: (int(hits), total) for r, (hits, total) in clark.items()} == {
        "All": (2, 4),  # Ann (by the rule) and "." are right; 's and the root are not
        "poss": (1, 1),
        "possessive": (0, 1),
        "ROOT": (0, 1),  # a head never predicts ROOT
        "punct": (1, 1),
    }
    # Without the rule and without roots (bertology gives punct words head −1 under "uas").
    uas_gold = [2, 0, -1, -1]
    uas = an.accuracy_by_relation(torch.tensor([1, 2, 3, 2]), uas_gold, ["poss", "possessive", "ROOT", "ROOT"])
    assert {r: (int(hits), total) for r, (hits, total) in uas.items()} == {"All": (0, 2), "poss": (0, 1), "possessive": (0, 1)}
    # Clark's baseline, offset by offset, worked out by hand (rule included):
    # −3 → [−1, −1, −1, 0]: only the root;  −2 → [−1, −1, 0, 1]: none;  −1 → [−1, 0, 1, 2]: 's and ".";
    # 0 → [0, 1, 2, 3]: none;  +1 → [1, 2, 3, 3]: Ann via 's → 2;  +2 → [2, 3, 3, 3]: none (the rule
    # replaces Ann's right guess by 's's wrong one).
    expected_all = {-3: 1, -2: 0, -1: 2, 0: 0, 1: 1, 2: 0}
    for offset in an.CLARK_BASELINE_OFFSETS:
        guess = an.apply_possessive_rule(an.offset_predictions(4, offset, clip_to_root=True), WORDS, RELATIONS)
        scores = an.accuracy_by_relation(guess, GOLD, RELATIONS, include_roots=True)
        assert int(scores["All"][0]) == expected_all[offset], offset
        assert int(scores["poss"][0]) == (offset == 1), offset
        assert int(scores["ROOT"][0]) == (offset == -3), offset


def test_gradient_by_key_type_and_importance_normalisation():
    kinds = an.token_kinds(TOKENS)  # keys: [CLS] other other punct [SEP]
    g = torch.zeros(2, 1, 5, 5)
    g[0, :, :, 4] = -2.0  # layer 0: gradient only on the [SEP] column
    g[1, :, :, 1] = 1.0  # layer 1: only on "the"
    by_type = an.gradient_by_key_type(g, kinds)
    assert by_type["sep"].tolist() == [2.0, 0.0]
    assert by_type["punct"].tolist() == [0.0, 0.0]
    assert by_type["other"].tolist() == [0.0, 0.5]  # mean over the two "other" keys
    importance = torch.tensor([[3.0, 4.0], [0.0, 2.0]])
    assert torch.allclose(an.normalize_importance(importance), torch.tensor([[0.6, 0.8], [0.0, 1.0]]))
