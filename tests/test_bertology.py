"""Corpus-level analyses: batching must not change the numbers, tables are tidy, inputs are checked."""

import math

import pytest
import torch
import transformers

import attnscope
from attnscope import InputError
from attnscope import analysis as an
from attnscope import bertology

from test_engine import SMALL, VOCAB

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
        per_doc.append(an.head_statistics(result.attention, bertology.token_kinds_for(default_model, result.tokens)))
    for measure in ("sep", "cls", "prev", "entropy", "entropy_cls"):
        expected = torch.stack([d[measure] for d in per_doc]).mean(0)
        got = stats[stats.measure == measure].sort_values(["layer", "head"])["value"].to_numpy()
        assert torch.allclose(torch.tensor(got, dtype=torch.float32), expected.flatten(), atol=1e-5), measure
    row = stats[(stats.layer == 2) & (stats["head"] == 9)].iloc[0]
    assert row["label"] == "3-10"


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
            [(0, 0, "1-1", "sep", 0.9), (0, 0, "1-1", "entropy", 0.2), (0, 1, "1-2", "entropy", 4.0)],
            columns=["layer", "head", "label", "measure", "value"],
        )
    )
    assert fake.behaviour.tolist() == ["[SEP]", "broad"]


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
    sentences = bertology.read_conllu(CONLLU)
    assert [s.words for s in sentences] == [["the", "cat", "sat", "."], ["do", "not", "go", "home"]]
    assert sentences[0].heads == [1, 2, -1, 2]
    path = tmp_path / "tiny.conllu"
    path.write_text(CONLLU)
    assert len(bertology.read_conllu(path)) == 2
    with pytest.raises(InputError, match="line 2"):
        bertology.read_conllu("# x\n1\tthe\tthe\n")


def test_syntax_heads_from_conllu_match_a_direct_computation(default_model):
    syntax = attnscope.syntax_heads(default_model, CONLLU, progress=False)
    assert syntax.source.startswith("gold") and syntax.sentences == 2
    acc = syntax.accuracy
    # Root and punctuation are not scored: det, nsubj, aux, advmod, dobj = 5 dependents.
    assert acc[acc.relation == "All"]["count"].iloc[0] == 5
    assert "punct" not in set(acc.relation)
    # Baseline: the next word is the head of "the" (det) and "cat" (nsubj); offset +1 gets both.
    base = syntax.baseline
    assert base[(base.relation == "det") & (base.offset == 1)].accuracy.iloc[0] == 1.0
    # Head 4-3 (layer 3, head 2), dependent → head, recomputed by hand from word-level attention.
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
    raw = lambda frame: torch.tensor(frame[frame.measure == "raw"].value.to_numpy())  # noqa: E731
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
    pairs = bertology.documents(datasets.Dataset.from_dict({"a": ["x"], "b": ["y"]}), column=("a", "b"))
    assert pairs == [("x", "y")]
    with pytest.raises(InputError, match="no column 'text'"):
        bertology.documents(ds, column="text")
    with pytest.raises(InputError, match="item 1"):
        bertology.documents(["fine", 3])
    with pytest.raises(InputError, match="no non-empty text"):
        bertology.documents(["", "  "])


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
