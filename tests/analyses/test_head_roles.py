"""Voita et al. 2019's head confidence and roles (issue 34): attnscope.head_roles and roles."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import attnscope
from attnscope import InputError
from attnscope.analyses.head_roles import document_measures, roles
from attnscope.analyses.syntax import SyntaxHeads

TEXTS = ["The cat sat on the mat.", "A dog barked twice at the cat.", "Rain fell all day in Zürich, and the cat slept."]


def test_one_documents_measures_count_each_querys_largest_weight():
    # 6 tokens, [CLS] and [SEP] at the ends; three heads: one looks back, one ahead, one at token 3.
    n, weight = 6, 0.7
    attention = torch.full((1, 3, n, n), (1 - weight) / (n - 1))
    for i in range(n):
        attention[0, 0, i, max(i - 1, 0)] = weight
        attention[0, 1, i, min(i + 1, n - 1)] = weight
        attention[0, 2, i, 3] = weight
    special = torch.tensor([True, False, False, False, False, True])
    measures, queries, rare_queries = document_measures(attention, special, [0, 5, 5, 1, 5, 0])
    assert queries == rare_queries == 4
    assert torch.allclose(measures["confidence"], torch.full((1, 3), weight))
    assert measures["previous"].tolist() == [[1.0, 0.0, 0.25]]  # head 2 from token 4 looks at 3, its previous
    assert measures["next"].tolist() == [[0.0, 1.0, 0.25]]  # head 2 from token 2 looks at 3, its next
    assert measures["rare"].tolist() == [[0.25, 0.25, 1.0]]
    # A tie for the rarest: either tied token counts.
    tied, _, _ = document_measures(attention, special, [0, 1, 5, 1, 5, 0])
    assert tied["rare"].tolist() == [[0.5, 0.25, 1.0]]


def test_on_a_decoder_the_first_token_is_no_rare_candidate_and_only_queries_that_see_it_count():
    # No special tokens; token 0 is the rarest by count but a decoder's sink: token 2 is taken.
    n = 5
    attention = torch.zeros(1, 2, n, n)
    for i in range(n):
        attention[0, 0, i, 0] = 1.0  # head 0 rests on the first token (a sink)
        attention[0, 1, i, min(i, 2)] = 1.0  # head 1 looks at token 2 once it can
    special = torch.zeros(n, dtype=torch.bool)
    measures, queries, rare_queries = document_measures(attention, special, [1, 9, 2, 9, 9], causal=True)
    assert (queries, rare_queries) == (5, 3)  # queries 2, 3, 4 see token 2
    assert measures["rare"].tolist() == [[0.0, 1.0]]
    encoder, _, _ = document_measures(attention, special, [1, 9, 2, 9, 9])
    assert encoder["rare"].tolist() == [[1.0, 0.2]]  # an encoder's rarest is token 0: head 1 from query 0 alone


def direct(engine, texts):
    """The measures over `texts`, token-weighted, from each run's own attention."""
    tokenizer = engine.tokenizer
    token_lists = [tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"]) for text in texts]
    counts = {}
    for tokens in token_lists:
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
    sums, total = {}, 0
    for text, tokens in zip(texts, token_lists, strict=True):
        attention = engine.run(text).attention.double()
        queries = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
        rows = attention[:, :, queries]
        largest, at = rows.max(-1)
        fewest = min(counts[tokens[i]] for i in queries)
        rare = [i for i in queries if counts[tokens[i]] == fewest]
        values = {"confidence": largest.sum(-1),
                  "previous": (at == torch.tensor(queries) - 1).double().sum(-1),
                  "next": (at == torch.tensor(queries) + 1).double().sum(-1),
                  "rare": sum((at == i).double() for i in rare).sum(-1)}
        for key, value in values.items():
            sums[key] = sums.get(key, 0) + value
        total += len(queries)
    return {key: value / total for key, value in sums.items()}


def test_head_roles_over_a_corpus_are_its_tokens_means(default_model):
    frame = attnscope.head_roles(default_model, TEXTS, batch_size=2, progress=False)
    assert list(frame.columns) == ["layer", "head", "label", "measure", "value"]
    assert frame.attrs["attnscope"] == "head_roles" and frame.attrs["documents"] == 3
    expected = direct(default_model, TEXTS)
    assert set(frame.measure) == set(expected)
    for key, values in expected.items():
        got = torch.tensor(frame[frame.measure == key].sort_values(["layer", "head"]).value.to_numpy())
        assert torch.allclose(got, values.flatten(), atol=1e-6), key
    # Batches change nothing: the sums are token-weighted whatever the split.
    one_by_one = attnscope.head_roles(default_model, TEXTS, batch_size=1, progress=False)
    assert torch.allclose(torch.tensor(one_by_one.value.to_numpy()), torch.tensor(frame.value.to_numpy()), atol=1e-9)


def test_token_counts_may_come_from_a_larger_corpus(default_model):
    """Given counts, the rarest token is the one they say: here "mat", though every word of the
    corpus occurs once."""
    text = "The cat sat on the mat."
    tokens = default_model.tokenizer.convert_ids_to_tokens(default_model.tokenizer(text)["input_ids"])
    counts = {token: 1000 for token in tokens} | {"mat": 3}
    frame = attnscope.head_roles(default_model, [text], counts=counts, progress=False)
    attention = default_model.run(text).attention
    queries = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    expected = (attention[:, :, queries].argmax(-1) == tokens.index("mat")).double().mean(-1)
    got = torch.tensor(frame[frame.measure == "rare"].sort_values(["layer", "head"]).value.to_numpy())
    assert torch.allclose(got, expected.flatten(), atol=1e-9)
    with pytest.raises(InputError, match=r"counts maps each token to how often it occurs"):
        attnscope.head_roles(default_model, [text], counts=["mat"], progress=False)


def frame_of(rows):
    frame = pd.DataFrame([(layer, head, f"{layer}-{head}", measure, value) for layer, head, measure, value in rows],
                         columns=["layer", "head", "label", "measure", "value"])
    frame.attrs["attnscope"] = "head_roles"
    return frame


def test_roles_follow_voitas_thresholds_and_a_syntax_result():
    rows = []
    for head, (previous, nxt, rare) in enumerate([(0.95, 0.0, 0.1), (0.1, 0.89, 0.1), (0.0, 0.0, 0.6), (0.2, 0.2, 0.2)]):
        rows += [(0, head, "previous", previous), (0, head, "next", nxt), (0, head, "rare", rare), (0, head, "confidence", 0.5)]
    frame = frame_of(rows)
    named = roles(frame)
    assert list(named.role) == ["positional", "none", "rare words", "none"]
    # Syntactic: nsubj's best baseline is 0.40; head 3 reaches 0.52 (one direction), head 1 0.45.
    accuracy = pd.DataFrame([("nsubj", "head_to_dependent", 0, 3, "0-3", 0.52, 50),
                             ("nsubj", "dependent_to_head", 0, 3, "0-3", 0.30, 50),
                             ("nsubj", "head_to_dependent", 0, 1, "0-1", 0.45, 50),
                             ("det", "head_to_dependent", 0, 1, "0-1", 0.99, 50)],
                            columns=["relation", "direction", "layer", "head", "label", "accuracy", "count"])
    baseline = pd.DataFrame([("nsubj", -1, 0.40, 50), ("nsubj", 1, 0.2, 50), ("det", 1, 0.5, 50)],
                            columns=["relation", "offset", "accuracy", "count"])
    syntax = SyntaxHeads(accuracy, baseline, "test", 1, 0)
    named = roles(frame, syntax)
    assert named.roles.tolist() == [["positional"], [], ["rare words"], ["syntactic: nsubj"]]  # det is not Voita's
    assert list(roles(frame, syntax, margin=0.05).role) == ["positional", "syntactic: nsubj", "rare words", "syntactic: nsubj"]


def test_what_roles_cannot_read_is_named():
    with pytest.raises(InputError, match="roles names heads from what head_roles returns"):
        roles(pd.DataFrame({"layer": [0], "head": [0], "label": ["0-0"], "measure": ["x"], "value": [1.0]}))
    with pytest.raises(InputError, match="from what syntax_heads returns"):
        roles(frame_of([(0, 0, "previous", 1.0)]), syntax="nsubj")


def test_the_widget_shows_head_roles_as_heatmaps(default_model):
    frame = attnscope.head_roles(default_model, TEXTS[:2], progress=False)
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model).show_analysis(frame)
    assert widget.view == "analysis" and widget.analysis["kind"] == "head_roles"
    assert [m["key"] for m in widget.analysis["measures"]] == ["confidence", "previous", "next", "rare"]
    assert widget.analysis["note"].startswith("Voita et al. 2019")


def test_the_widget_shows_the_role_map(default_model):
    frame = attnscope.head_roles(default_model, TEXTS, progress=False)
    named = roles(frame, positional=0.5)
    assert named.attrs["attnscope"] == "roles" and named.attrs["documents"] == 3
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model).show_analysis(named)
    role, confidence = widget.analysis["measures"]
    assert role["key"] == "role" and role["categories"][:3] == ["none", "positional", "rare words"]
    by_head = dict(zip(zip(named["layer"], named["head"]), named["role"], strict=True))
    n_heads = widget.n_heads
    for (layer, head), name in by_head.items():
        assert role["categories"][int(role["values"][layer * n_heads + head])] == name
    assert "positional" in set(named.role)  # MiniLM's head 0-2 looks at the token before
    assert confidence["key"] == "confidence" and "Syntactic roles need a syntax_heads result" in widget.analysis["note"]
