"""Corpus-level analyses: batching must not change the numbers, tables are tidy, inputs are checked."""

import math
import types

import pytest
import torch
import transformers
from test_engine import SMALL, VOCAB

import attnscope
from attnscope import InputError
from attnscope.analyses import corpus, syntax
from attnscope.engine import formulas as an

TEXTS = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog, twice.",
    "Attention is all you need.",
    "She gave him the book that he wanted.",
    "Tokenization splits unbelievable words.",
]

CONLLU = """# sent_id = 1
1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = 2
1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tnot\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
4\thome\thome\tNOUN\tNN\t_\t3\tdobj\t_\t_
"""


def test_head_stats_batched_equals_one_document_at_a_time(default_model):
    stats = attnscope.head_stats(default_model, TEXTS, batch_size=3, progress=False)
    assert len(stats) == 6 * 12 * len(an.MEASURE_LABELS)
    assert set(stats.columns) == {"layer", "head", "label", "measure", "value"}
    assert stats.attrs["attnscope"] == "head_stats" and stats.attrs["documents"] == len(TEXTS)
    # The reference: unpadded single runs, statistics per document, then the plain mean.
    per_doc = []
    for text in TEXTS:
        result = default_model.run(text)
        per_doc.append(an.head_statistics(result.attention, corpus.token_kinds_for(default_model, result.tokens)))
    for measure in ("sep", "cls", "prev", "entropy", "entropy_cls"):
        expected = torch.stack([d[measure] for d in per_doc]).mean(0)
        got = stats[stats.measure == measure].sort_values(["layer", "head"])["value"].to_numpy()
        assert torch.allclose(torch.tensor(got, dtype=torch.float32), expected.flatten(), atol=1e-5), measure
    row = stats[(stats.layer == 2) & (stats["head"] == 9)].iloc[0]
    assert row["label"] == "2-9"


def test_behaviours_and_head_distances(default_model):
    distances = attnscope.head_distances(default_model, TEXTS[:3], progress=False)
    assert list(distances.columns) == ["layer", "head", "label", "x", "y", "behaviour"]
    assert len(distances) == 72 and set(distances.behaviour) <= set(an.BEHAVIOURS)
    matrix = torch.tensor(distances.attrs["distances"])
    assert matrix.shape == (72, 72) and torch.allclose(matrix, matrix.T)
    # The 2-D layout keeps the divergences' order: the closest pair in the layout is among the
    # closer half of pairs by divergence.
    points = torch.tensor(distances[["x", "y"]].to_numpy())
    layout = torch.cdist(points, points)
    layout.fill_diagonal_(float("inf"))
    i, j = divmod(int(layout.argmin()), 72)
    upper = matrix[torch.triu(torch.ones(72, 72, dtype=torch.bool), 1)]
    assert matrix[i, j] <= upper.median()
    # A head that puts everything on [SEP] is labelled as such.
    fake = attnscope.behaviours(
        __import__("pandas").DataFrame(
            [(0, 0, "0-0", "sep", 0.9), (0, 0, "0-0", "entropy", 0.2), (0, 1, "0-1", "entropy", 4.0)],
            columns=["layer", "head", "label", "measure", "value"],
        )
    )
    assert fake.behaviour.tolist() == ["[SEP]", "broad"]


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
def test_head_distances_random_starts_never_raise_the_stress(default_model):
    one = attnscope.head_distances(default_model, TEXTS[:3], progress=False)
    three = attnscope.head_distances(default_model, TEXTS[:3], progress=False, n_init=3, seed=1)
    assert one.attrs["distances"] == three.attrs["distances"]
    d = torch.tensor(one.attrs["distances"])
    layout = lambda frame: torch.tensor(frame[["x", "y"]].to_numpy())
    assert an.stress(d, layout(three)) <= an.stress(d, layout(one))
    # n_init=1: the classical start alone (to float32 rounding: BLAS paths differ across CPUs by ~1e-6)
    assert torch.allclose(layout(one), an.mds(d), atol=1e-5)
    with pytest.raises(InputError, match="n_init"):
        attnscope.head_distances(default_model, TEXTS[:3], progress=False, n_init=0)


def test_word_attention_and_rollout_of_a_result(default_model):
    result = default_model.run("Tokenization is unbelievable.", "Truly.")
    words = attnscope.word_attention(result)
    assert words.tokens[:2] == ["[CLS]", "tokenization"]
    assert words.tokens[words.sentence_b_start] == "truly"
    assert words.attention.shape[-1] == len(words.tokens) < len(result.tokens)
    assert torch.allclose(words.attention.sum(-1), torch.ones(words.attention.shape[:-1]), atol=1e-5)
    rolled = attnscope.rollout(result)
    assert rolled.shape == (6, len(result.tokens), len(result.tokens))
    assert torch.allclose(rolled.sum(-1), torch.ones(rolled.shape[:-1]), atol=1e-5)


def test_read_conllu_skips_multiword_lines_and_reports_bad_lines(tmp_path):
    sentences = syntax.read_conllu(CONLLU)
    assert [s.words for s in sentences] == [["the", "cat", "sat", "."], ["do", "not", "go", "home"]]
    assert sentences[0].heads == [1, 2, -1, 2]
    path = tmp_path / "tiny.conllu"
    path.write_text(CONLLU)
    assert len(syntax.read_conllu(path)) == 2
    with pytest.raises(InputError, match="line 2"):
        syntax.read_conllu("# x\n1\tthe\tthe\n")


def test_syntax_heads_from_conllu_match_a_direct_computation(default_model):
    syntax = attnscope.syntax_heads(default_model, CONLLU, progress=False, scoring="uas")
    assert syntax.source.startswith("gold") and syntax.sentences == 2
    assert syntax.scoring == "uas" and syntax.accuracy.attrs["scoring"] == "uas"
    acc = syntax.accuracy
    # Under "uas" root and punctuation are not scored: det, nsubj, aux, advmod, dobj = 5 dependents.
    assert acc[acc.relation == "All"]["count"].iloc[0] == 5
    assert "punct" not in set(acc.relation)
    # Baseline: the next word is the head of "the" (det) and "cat" (nsubj); offset +1 gets both.
    base = syntax.baseline
    assert base[(base.relation == "det") & (base.offset == 1)].accuracy.iloc[0] == 1.0
    # Head 3-2 (layer 3, head 2), dependent → head, recomputed by hand from word-level attention.
    hits = 0
    for words, gold in ((["the", "cat", "sat", "."], {0: 1, 1: 2}), (["do", "not", "go", "home"], {0: 2, 1: 2, 3: 2})):
        result = default_model.run(" ".join(words))
        word_level = attnscope.word_attention(result).attention[3, 2, 1:-1, 1:-1]
        predicted = an.predict_heads(word_level)
        hits += sum(int(predicted[d] == h) for d, h in gold.items())
    row = acc[(acc.relation == "All") & (acc.direction == "dependent_to_head") & (acc.layer == 3) & (acc["head"] == 2)]
    assert row.accuracy.iloc[0] == pytest.approx(hits / 5)
    table = syntax.table(min_count=1)
    assert table.relation.iloc[0] == "All" and {"head", "accuracy", "baseline", "baseline_offset"} <= set(table.columns)
    assert table.attrs["scoring"] == "uas"


def test_syntax_heads_clark_scoring_from_conllu_counts_every_word(default_model):
    syntax = attnscope.syntax_heads(default_model, CONLLU, progress=False)
    assert syntax.scoring == "clark" and syntax.accuracy.attrs["scoring"] == "clark"
    acc = syntax.accuracy
    assert acc[acc.relation == "All"]["count"].iloc[0] == 8  # every word, root and "." included
    assert {"root", "punct"} <= set(acc.relation)
    assert (acc[acc.relation == "root"].accuracy == 0).all()  # a head never predicts ROOT
    # Head 3-2, head → dependent, by the notebook's recipe: the word map with [CLS]/[SEP], its
    # transpose, the diagonal zeroed, then cropped; argmax among the words.
    hits = 0
    for words, gold in ((["the", "cat", "sat", "."], [1, 2, -1, 2]), (["do", "not", "go", "home"], [2, 2, -1, 2])):
        word_map = attnscope.word_attention(default_model.run(" ".join(words))).attention[3, 2].T.clone()
        word_map.fill_diagonal_(0.0)
        predicted = word_map[1:-1, 1:-1].argmax(-1)
        hits += sum(int(predicted[i] == g) for i, g in enumerate(gold))
    row = acc[(acc.relation == "All") & (acc.direction == "head_to_dependent") & (acc.layer == 3) & (acc["head"] == 2)]
    assert row.accuracy.iloc[0] == pytest.approx(hits / 8)
    base = syntax.baseline.set_index(["relation", "offset"]).accuracy
    assert sorted(syntax.baseline.offset.unique()) == [-3, -2, -1, 0, 1, 2]
    # offset −3 clips every word of index < 3 to ROOT: right for both roots (sat and go are word 2).
    assert base[("root", -3)] == 1.0 and base[("root", 1)] == 0.0
    assert base[("All", 0)] == 0.0  # a word is never its own head
    table = syntax.table(min_count=1)
    assert table.relation.iloc[0] == "All" and not {"root", "punct"} & set(table.relation)
    assert table.attrs["scoring"] == "clark"
    # The widget's maps follow the table: no root or punct map; the note names the scoring.
    payload = attnscope.widget.payloads.analysis_payload(syntax, 6, 12)
    keys = [m["key"] for m in payload["measures"]]
    assert keys[0] == "All" and "det" in keys and not {"root", "punct"} & set(keys)
    assert "scoring clark" in payload["note"]
    with pytest.raises(InputError, match=r"scoring.*'clark', 'uas'.*'conll'"):
        attnscope.syntax_heads(default_model, CONLLU, progress=False, scoring="conll")


class WordMapModel:
    """A stand-in model whose attention is written per word (with [CLS] and [SEP]): each piece of a
    word gets the word's row and attention to a word lands on its first piece, so syntax_heads'
    merging gives the hand-written map back."""

    name = "hand-written word maps"
    model = None  # no network behind it: the length limit comes from the tokenizer

    def __init__(self, tokenizer, word_map):
        self.tokenizer, self.word_map = tokenizer, word_map  # L × H × W × W

    def forward(self, encoded):
        groups = an.word_groups(encoded.word_ids(0), encoded.sequence_ids(0))
        first = [g[0] for g in groups]
        n = sum(len(g) for g in groups)
        maps = torch.zeros(*self.word_map.shape[:2], n, n)
        for word, positions in enumerate(groups):
            for position in positions:
                maps[:, :, position, first] = self.word_map[:, :, word]
        return types.SimpleNamespace(attentions=tuple(layer[None] for layer in maps))


def test_syntax_heads_recipe_on_a_hand_written_sentence(bert_tokenizer):
    """ "Ann 's dog ." (Ann poss→dog, 's possessive→Ann, dog ROOT, "." punct→dog), one layer of two
    heads; every number below is worked out by hand."""
    sentence = syntax.ParsedSentence(["Ann", "'s", "dog", "."], [2, 0, -1, 2], ["poss", "possessive", "ROOT", "punct"])
    #              [CLS]  Ann   's   dog    .   [SEP]
    head_0 = [
        [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],
        [0.2, 0.1, 0.4, 0.2, 0.05, 0.05],  # Ann → 's
        [0.1, 0.1, 0.1, 0.6, 0.05, 0.05],  # 's → dog
        [0.1, 0.2, 0.1, 0.1, 0.4, 0.1],  # dog → .
        [0.1, 0.1, 0.1, 0.5, 0.1, 0.1],  # . → dog
        [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],
    ]
    head_1 = [[1.0, 0, 0, 0, 0, 0]] * 6  # everything on [CLS]: among the words, all zeros
    model = WordMapModel(bert_tokenizer, torch.tensor([[head_0, head_1]]))
    clark = attnscope.syntax_heads(model, [sentence], progress=False)
    uas = attnscope.syntax_heads(model, [sentence], progress=False, scoring="uas")

    def accuracy(result, relation, head, direction):
        acc = result.accuracy
        return acc[(acc.relation == relation) & (acc["head"] == head) & (acc.direction == direction)].accuracy.item()

    # Head 0, dependent → head predicts [1, 2, 3, 2]; the poss rule turns Ann's 1 into 's's 2 (right).
    # Clark: Ann and "." right of 4 words. UAS: Ann (1) and 's (2) both wrong; root and "." not scored.
    assert accuracy(clark, "All", 0, "dependent_to_head") == 2 / 4
    assert accuracy(uas, "All", 0, "dependent_to_head") == 0 / 2
    # Head → dependent (the transpose, diagonal zeroed) predicts [2, 0, 1, 2]: the rule now replaces
    # Ann's right 2 by 's's 0, so Clark has 's and "." (2 of 4); UAS has Ann and 's (2 of 2).
    assert accuracy(clark, "All", 0, "head_to_dependent") == 2 / 4
    assert accuracy(uas, "All", 0, "head_to_dependent") == 2 / 2
    assert accuracy(clark, "poss", 0, "dependent_to_head") == 1.0 and accuracy(uas, "poss", 0, "dependent_to_head") == 0.0
    # Head 1 gives the words nothing: zeroed, every word predicts word 0 (itself for Ann): 's is
    # right (1 of 4). With −inf on the diagonal Ann predicts word 1 instead: 's right, 1 of 2.
    assert accuracy(clark, "All", 1, "dependent_to_head") == 1 / 4
    assert accuracy(uas, "All", 1, "dependent_to_head") == 1 / 2
    assert accuracy(clark, "ROOT", 0, "dependent_to_head") == 0.0 and "ROOT" not in set(uas.accuracy.relation)

    # Baselines (see test_analysis for the offsets by hand): Clark −3…2 with ROOT, UAS ±1…3.
    clark_base = clark.baseline[clark.baseline.relation == "All"].set_index("offset").accuracy.to_dict()
    assert clark_base == {-3: 1 / 4, -2: 0.0, -1: 2 / 4, 0: 0.0, 1: 1 / 4, 2: 0.0}
    uas_base = uas.baseline[uas.baseline.relation == "All"].set_index("offset").accuracy.to_dict()
    assert uas_base == {-3: 1 / 2, -2: 1 / 2, -1: 1 / 2, 1: 0.0, 2: 1 / 2, 3: 0.0}

    # Table 1. All: head 0-0 ties at 50 % in both directions; Clark's max over (accuracy, layer,
    # head, direction) takes head_to_dependent. possessive: 0-0 head → dependent and both
    # directions of 0-1 are right; Clark takes the later head 0-1, UAS the earliest, 0-0.
    # Baseline ties (UAS All: −3, −2, −1 and +2 at 50 %) go to the smallest offset under UAS.
    columns = ["relation", "count", "head", "direction", "accuracy", "baseline", "baseline_offset"]
    assert clark.table(min_count=1)[columns].values.tolist() == [
        ["All", 4, "0-0", "head_to_dependent", 50.0, 50.0, -1],
        ["poss", 1, "0-0", "dependent_to_head", 100.0, 100.0, 1],
        ["possessive", 1, "0-1", "head_to_dependent", 100.0, 100.0, -1],
    ]
    assert uas.table(min_count=1)[columns].values.tolist() == [
        ["All", 2, "0-0", "head_to_dependent", 100.0, 50.0, -3],
        ["poss", 1, "0-0", "head_to_dependent", 100.0, 100.0, 2],
        ["possessive", 1, "0-0", "head_to_dependent", 100.0, 100.0, -3],
    ]


def test_syntax_heads_clark_zeroes_the_diagonal_so_a_word_can_predict_itself(bert_tokenizer):
    sentence = syntax.ParsedSentence(["the", "dog"], [1, -1], ["det", "ROOT"])
    #        [CLS] the  dog  [SEP]
    head = [
        [1.0, 0.0, 0.0, 0.0],
        [0.5, 0.5, 0.0, 0.0],  # "the" gives "dog" nothing
        [0.5, 0.2, 0.3, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ]
    model = WordMapModel(bert_tokenizer, torch.tensor([[head]]))
    det = lambda result: result.accuracy.query("relation == 'det' and direction == 'dependent_to_head'").accuracy.item()
    # Zeroed, "the" sees [0, 0] and argmax takes the first word, itself; with −inf it takes "dog".
    assert det(attnscope.syntax_heads(model, [sentence], progress=False)) == 0.0
    assert det(attnscope.syntax_heads(model, [sentence], progress=False, scoring="uas")) == 1.0


def test_syntax_table_tie_breaks_and_skipped_rows():
    import pandas as pd

    accuracy = pd.DataFrame(
        [
            ("All", "dependent_to_head", 0, 1, "0-1", 0.5, 10),
            ("All", "head_to_dependent", 2, 0, "2-0", 0.5, 10),
            ("All", "dependent_to_head", 2, 0, "2-0", 0.5, 10),
            ("All", "dependent_to_head", 1, 3, "1-3", 0.4, 10),
            ("ROOT", "dependent_to_head", 0, 0, "0-0", 0.0, 3),
            ("Punct", "dependent_to_head", 0, 0, "0-0", 0.9, 3),
            ("det", "dependent_to_head", 0, 0, "0-0", 0.9, 3),
        ],
        columns=["relation", "direction", "layer", "head", "label", "accuracy", "count"],
    )
    baseline = pd.DataFrame(
        [("All", o, a, 10) for o, a in ((-2, 0.3), (1, 0.3), (2, 0.1))]
        + [(r, 1, 0.5, 3) for r in ("ROOT", "Punct", "det")],
        columns=["relation", "offset", "accuracy", "count"],
    )
    clark = syntax.SyntaxHeads(accuracy, baseline, "test", 1, 0, "clark").table(min_count=1)
    uas = syntax.SyntaxHeads(accuracy, baseline, "test", 1, 0, "uas").table(min_count=1)
    assert clark.relation.tolist() == uas.relation.tolist() == ["All", "det"]  # root and punct, any case, have no row
    assert clark.iloc[0][["head", "direction", "baseline_offset"]].tolist() == ["2-0", "head_to_dependent", 1]
    assert uas.iloc[0][["head", "direction", "baseline_offset"]].tolist() == ["0-1", "dependent_to_head", -2]
    assert syntax.SyntaxHeads(accuracy, baseline, "test", 1, 0, "clark").table(min_count=5).relation.tolist() == ["All"]


def test_syntax_heads_do_not_depend_on_batching(default_model):
    texts = ["The dog chased the ball.", "A very long sentence about nothing in particular goes here.", "Hi."]
    one = attnscope.syntax_heads(default_model, texts, batch_size=1, progress=False).accuracy
    many = attnscope.syntax_heads(default_model, texts, batch_size=3, progress=False).accuracy
    assert one.accuracy.tolist() == pytest.approx(many.accuracy.tolist())


def test_syntax_heads_from_plain_text_say_they_are_machine_parses(default_model):
    syntax = attnscope.syntax_heads(default_model, ["The dog chased the ball."], progress=False)
    assert "machine parses" in syntax.source and "spaCy" in syntax.source
    assert "machine parses" in syntax._repr_html_()
    assert {"det", "nsubj", "dobj"} <= set(syntax.accuracy.relation)


def _small_mlm():
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=VOCAB, **SMALL))


def test_head_importance_uses_masked_lm_and_normalises_each_layer(bert_tokenizer):
    engine = attnscope.load(_small_mlm(), bert_tokenizer, device="cpu")
    importance = attnscope.head_importance(engine, TEXTS, progress=False)
    assert importance.attrs["loss"].startswith("masked-LM")
    assert list(importance.columns) == ["layer", "head", "label", "measure", "value"]
    normalised = importance[importance.measure == "importance"]
    norms = normalised.groupby("layer")["value"].apply(lambda v: math.sqrt((v**2).sum()))
    assert norms.tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert (importance[importance.measure == "raw"].value > 0).all()


def test_head_importance_is_an_expectation_over_examples_not_batches(bert_tokenizer):
    """Each example has its own ξ: batch size must not change |∂L/∂ξ| (|Σ| ≠ Σ|·|)."""
    engine = attnscope.load(_small_mlm(), bert_tokenizer, device="cpu")
    direction = torch.randn(VOCAB)

    def loss(outputs, encoded):
        mask = encoded["attention_mask"].float()
        return ((outputs.logits @ direction) * mask).sum(1) / mask.sum(1)

    one = attnscope.head_importance(engine, TEXTS, loss=loss, batch_size=1, progress=False)
    many = attnscope.head_importance(engine, TEXTS, loss=loss, batch_size=5, progress=False)
    assert one.attrs["loss"] == "given by the caller"
    raw = lambda frame: torch.tensor(frame[frame.measure == "raw"].value.to_numpy())
    assert torch.allclose(raw(one), raw(many), rtol=1e-3)


def test_default_loss_for_the_embedding_model_and_gradients_by_key_type(default_model):
    importance = attnscope.head_importance(default_model, TEXTS, progress=False)
    assert importance.attrs["loss"].startswith("in-batch contrastive")
    assert (importance[importance.measure == "raw"].value > 0).all()
    gradients = attnscope.attention_gradients(default_model, TEXTS, progress=False)
    assert len(gradients) == 6 * 3 and set(gradients.key_type) == {"sep", "punct", "other"}
    assert (gradients.value > 0).all()
    with pytest.raises(InputError, match="at least 2 texts"):
        attnscope.head_importance(default_model, ["only one"], progress=False)


def test_corpus_inputs_dataset_columns_and_errors(default_model):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"sentence": TEXTS[:2], "label": [0, 1]})
    via_dataset = attnscope.head_stats(default_model, ds, progress=False)
    via_list = attnscope.head_stats(default_model, TEXTS[:2], progress=False)
    assert via_dataset["value"].tolist() == pytest.approx(via_list["value"].tolist(), nan_ok=True)
    pairs = corpus.documents(datasets.Dataset.from_dict({"a": ["x"], "b": ["y"]}), column=("a", "b"))
    assert pairs == [("x", "y")]
    with pytest.raises(InputError, match="no column 'text'"):
        corpus.documents(ds, column="text")
    with pytest.raises(InputError, match="item 1"):
        corpus.documents(["fine", 3])
    with pytest.raises(InputError, match="no non-empty text"):
        corpus.documents(["", "  "])
    # column= names a dataset's or frame's column: given with texts, it is refused, not ignored.
    for texts in (TEXTS[:2], TEXTS[0]):
        with pytest.raises(InputError, match="column='sentence' names a dataset's or DataFrame's text column"):
            corpus.documents(texts, column="sentence")


def test_other_families_causal_lm_loss_and_no_pad_token(bert_tokenizer):
    """GPT-2 (no pad token: one text per batch; next-token loss) and DistilBERT (no token types)."""
    import copy

    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64))
    tokenizer = copy.deepcopy(bert_tokenizer)
    tokenizer.pad_token = None  # as GPT-2's own tokenizer: texts of different lengths cannot share a batch
    engine = attnscope.load(gpt2, tokenizer, device="cpu")
    assert engine.causal
    importance = attnscope.head_importance(engine, TEXTS[:3], progress=False)
    assert importance.attrs["loss"] == "next-token prediction"
    assert (importance[importance.measure == "raw"].value > 0).all()
    stats = attnscope.head_stats(engine, TEXTS[:3], progress=False)
    # Causal attention never looks ahead: next-token attention is exactly zero.
    assert stats[stats.measure == "next"]["value"].abs().max() == 0.0

    distil = transformers.DistilBertModel(
        transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64)
    )
    stats = attnscope.head_stats(attnscope.load(distil, bert_tokenizer, device="cpu"), TEXTS[:3], progress=False)
    assert len(stats) == 2 * 4 * len(an.MEASURE_LABELS)


def test_batches_are_sized_to_the_devices_memory():
    from attnscope.analyses.corpus import CPU_BATCH, batch_for_memory, corpus_settings

    # bert-base at 128 tokens: 12 × 12 × 128² × 4 B × 2 + one layer's activations ≈ 25 MB a document.
    assert batch_for_memory(80 * 2**30, 12, 12, 128, 768) == 1024  # an 80 GB card: the cap
    assert 120 < batch_for_memory(8 * 2**30, 12, 12, 128, 768) < 200  # 8 GB free: half of it used
    assert batch_for_memory(8 * 2**30, 12, 12, 128, 768, gradients=True) < batch_for_memory(8 * 2**30, 12, 12, 128, 768) / 2
    assert batch_for_memory(10, 12, 12, 512, 768) == 1  # never none
    model = attnscope.load(device="cpu")
    assert corpus_settings(model, [("a", None)], None, "auto")[1] == CPU_BATCH
    assert corpus_settings(model, [("a", None)], None, "auto", backend="ray")[1] == "auto"
    with pytest.raises(attnscope.InputError, match="batch_size"):
        corpus_settings(model, [("a", None)], None, "big")


# --- bounds: what a corpus may hold


def test_a_long_corpus_text_is_tokenized_from_its_start_only(default_model, monkeypatch):
    from test_engine import TokenizerSpy

    from attnscope.engine.attention_model import PIECE_CHARACTERS

    long = " ".join(f"word{i % 97} and, more" for i in range(40_000))  # 613,000 characters
    expected = attnscope.head_stats(default_model, [long[:20_000], TEXTS[0]], max_length=64, batch_size=2, progress=False)
    spy = TokenizerSpy(default_model.tokenizer)
    monkeypatch.setattr(default_model.loaded, "tokenizer", spy)
    stats = attnscope.head_stats(default_model, [long, TEXTS[0]], max_length=64, batch_size=2, progress=False)
    assert max(spy.sizes) <= PIECE_CHARACTERS + len(TEXTS[0])  # the whole 613,000 characters before
    assert stats["value"].tolist() == pytest.approx(expected["value"].tolist(), abs=1e-6)  # the same 64 tokens


def test_a_corpus_text_past_the_character_limit_is_refused_naming_it():
    with pytest.raises(InputError, match=r"^corpus\[1\] has 1,000,001 characters, more than the 1,000,000 an analysis reads of a "
                       r"text, which it reads to max_length tokens: cut it, e\.g\. text\[:100_000\], or split it into texts\.$"):
        corpus.documents(["Fine.", "x" * 1_000_001])


class FakeRayDataset:
    """What documents() reads of a Ray Dataset (ray.data.Dataset): its schema and its rows, streamed;
    `served` counts the rows handed out."""

    __module__ = "ray.data.dataset"

    def __init__(self, n_rows, text="A sentence of about forty characters ok."):
        self.n_rows, self.text, self.served = n_rows, text, 0

    def schema(self):
        return types.SimpleNamespace(names=["text"], types=["string"])

    def select_columns(self, columns):
        return self

    def iter_rows(self):
        for _ in range(self.n_rows):
            self.served += 1
            yield {"text": self.text}


def test_a_dataset_is_gathered_on_the_driver_only_up_to_a_bound(monkeypatch):
    monkeypatch.setattr(corpus, "MAX_GATHERED_CHARACTERS", 4_000)  # 100 rows of 40 characters
    endless = FakeRayDataset(10**9)  # a cluster's dataset, larger than this machine
    with pytest.raises(InputError, match=r"^The Ray Dataset holds more than 4,000 characters of text \(passed at row 100\), and "
                       r"attnscope gathers a dataset's texts on this machine \(the driver\) before the analysis runs: analyse a "
                       r"sample of it, e\.g\. dataset\.limit\(n\) or dataset\.random_sample\(fraction\)"):
        corpus.documents(endless)
    assert endless.served == 101  # it stopped there
    assert len(corpus.documents(FakeRayDataset(100))) == 100
    datasets = pytest.importorskip("datasets")
    with pytest.raises(InputError, match=r"^The dataset holds more than 4,000 characters.*dataset\.select\(range\(n\)\)"):
        corpus.documents(datasets.Dataset.from_dict({"text": ["x" * 40] * 200}))


# Every analysis that runs a corpus in batches reads one stack of self-attention: an
# encoder-decoder is refused before any document runs (it ended in a raw AttributeError on
# Seq2SeqModelOutput.attentions), naming what reads its corpus instead.
BATCHED_ANALYSES = {
    "head_stats": lambda m, t: attnscope.head_stats(m, t, progress=False),
    "head_roles": lambda m, t: attnscope.head_roles(m, t, progress=False),
    "attention_patterns": lambda m, t: attnscope.attention_patterns(m, t, progress=False),
    "head_finder": lambda m, t: attnscope.head_finder(m, t, progress=False),
    "head_distances": lambda m, t: attnscope.head_distances(m, t, progress=False),
    "head_importance": lambda m, t: attnscope.head_importance(m, t, progress=False),
    "attention_gradients": lambda m, t: attnscope.attention_gradients(m, t, progress=False),
    "pruning_curve": lambda m, t: attnscope.pruning_curve(m, t, progress=False),
    "attention_similarity": lambda m, t: attnscope.attention_similarity(m, m, t, progress=False),
}


@pytest.mark.parametrize("name", sorted(BATCHED_ANALYSES))
def test_an_encoder_decoder_is_refused_before_any_batch_runs(name, bert_tokenizer, monkeypatch):
    from small_models import tiny_bart

    engine = attnscope.load(tiny_bart(lm_head=False), bert_tokenizer, device="cpu")
    monkeypatch.setattr(engine, "forward", lambda *a, **k: pytest.fail("a batch ran"))
    with pytest.raises(InputError, match=r"encoder-decoder.*attention_sinks\(model, texts\)"):
        BATCHED_ANALYSES[name](engine, ["The cat sat on the mat.", "A dog ran after it."])
