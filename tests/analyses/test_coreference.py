"""Clark et al. 2019's coreference heads (Table 2; issue 34): CoNLL-2012 read with nested mentions,
head words and mention kinds; the scoring and baselines on a document worked by hand; the whole
table on the shipped sample (ours, hand-annotated) with the embedded model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import attnscope
from attnscope.analyses import coreference
from attnscope.analyses.coreference import baseline_guesses, mention_head, read_conll2012
from attnscope.analyses.syntax import SentenceAttention
from attnscope.errors import InputError

SAMPLE = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "coref_sample.conll"


def conll(*sentences: list[tuple[str, str]], name: str = "doc") -> str:
    lines = [f"#begin document ({name}); part 000"]
    for sentence in sentences:
        lines += ["\t".join([name, "0", str(i), w, "-", "*", "-", "-", "-", "-", "*", c]) for i, (w, c) in enumerate(sentence)]
        lines.append("")
    return "\n".join(lines + ["#end document", ""])


# [Anna]_1 met [[her]_1 brother]_2 . || [He]_2 thanked [Anna]_1 .
DOC = conll([("Anna", "(1)"), ("met", "-"), ("her", "(2|(1)"), ("brother", "2)"), (".", "-")],
            [("He", "(2)"), ("thanked", "-"), ("Anna", "(1)"), (".", "-")])


def test_conll_2012_is_read_with_nested_mentions_heads_and_kinds():
    [doc] = read_conll2012(DOC)
    assert doc.words == ["Anna", "met", "her", "brother", ".", "He", "thanked", "Anna", "."]
    spans = [(m.start, m.end, m.cluster, doc.words[m.head], m.kind) for m in doc.mentions]
    assert spans == [(0, 0, "1", "Anna", "proper"), (2, 3, "2", "brother", "nominal"), (2, 2, "1", "her", "pronoun"),
                     (5, 5, "2", "He", "pronoun"), (7, 7, "1", "Anna", "proper")]
    words = "the bakery on the corner , which".split()
    assert mention_head(words, 0, 4) == 1 and mention_head(words, 0, 1) == 1 and mention_head(words, 3, 4) == 4


def test_the_baselines_pick_the_nearest_mention_and_the_nearest_with_the_same_head_word():
    [doc] = read_conll2012(DOC)
    he, anna_again = doc.mentions[3], doc.mentions[4]
    guesses = baseline_guesses(doc, he)
    assert doc.words[guesses["Nearest mention"].head] in ("her", "brother")  # the nearest earlier mention
    guesses = baseline_guesses(doc, anna_again)
    assert guesses["Nearest mention"].head == 5  # "He": wrong cluster
    assert guesses["Head-word match"].head == 0  # the first "Anna": right


def test_a_head_is_right_when_the_mentions_head_word_attends_most_to_an_antecedents(monkeypatch, default_model):
    """Attention made by hand: head 0 of layer 0 looks from each word to the head of its nearest
    antecedent (else the previous word); head 1 always to the previous word."""
    [doc] = read_conll2012(DOC)
    n = len(doc.words)
    attention = torch.zeros(1, 2, n, n)
    for i in range(n):
        attention[0, 1, i, max(i - 1, 0) if i else 1] = 1.0
        attention[0, 0, i, max(i - 1, 0) if i else 1] = 1.0
    for mention in doc.mentions:
        before = coreference.antecedents(doc, mention)
        if before:
            attention[0, 0, mention.head] = 0
            attention[0, 0, mention.head, before[-1].head] = 1.0

    def fake(model, docs, **kwargs):
        for index, item in enumerate(docs):
            yield SentenceAttention(item, attention, list(range(n)), index)

    monkeypatch.setattr(coreference, "iter_sentence_attention", fake)
    result = attnscope.coref_heads(default_model, [doc], progress=False)
    wide = result.accuracy.pivot_table(index="label", columns="measure", values="value")
    # Scored: "her" (→ Anna), "He" (→ brother), the second "Anna" (→ Anna, or her).
    assert result.accuracy.groupby("measure")["count"].first().to_dict() == {"all": 3, "pronoun": 2, "proper": 1}
    assert wide.loc["0-0"].to_dict() == {"all": 1.0, "pronoun": 1.0, "proper": 1.0}
    # The previous word: "her" → "met" (no), "He" → "." (no), "Anna" → "thanked" (no).
    assert wide.loc["0-1"].to_dict() == {"all": 0.0, "pronoun": 0.0, "proper": 0.0}


@pytest.fixture(scope="module")
def sample_result(default_model):
    return attnscope.coref_heads(default_model, SAMPLE, progress=False)


def test_table_2_on_the_shipped_sample(sample_result):
    text = SAMPLE.read_text(encoding="utf-8")
    assert "annotated by hand for attnscope (not OntoNotes)" in text
    assert len(read_conll2012(SAMPLE)) >= 40
    table = sample_result.table()
    assert table.system.tolist()[:2] == ["Nearest mention", "Head-word match"] and table.system[2].startswith("Best head (")
    assert list(table.columns) == ["system", "all", "pronoun", "proper", "nominal"]
    counts = table.attrs["counts"]
    assert counts["all"] == counts["pronoun"] + counts["proper"] + counts["nominal"] > 100
    by = table.set_index("system")["all"]
    # As in the paper: the best head beats the nearest mention; head-word match beats it too.
    assert by.iloc[2] > by["Nearest mention"] and by["Head-word match"] > by["Nearest mention"]
    assert len(sample_result.accuracy) == 4 * 6 * 12


def test_the_coreference_heads_are_shown_in_the_analysis_view(sample_result):
    widget = attnscope.AttentionWidget("Anna met her brother.")
    widget.show_analysis(sample_result, measure="pronoun")
    assert [m["key"] for m in widget.analysis["measures"]] == ["all", "pronoun", "proper", "nominal"]
    assert "coreference" in widget.analysis["note"]


@pytest.mark.parametrize(("text", "message"), [
    (conll([("Anna", "(1")]), "never closed"),
    (conll([("Anna", "1)")]), "never opened"),
    ("A\tB\n", "outside a"),
    ("#begin document (x); part 000\nx 0 0 Anna\n#end document\n", "not at least 12"),
    ("no_such_file.conll", "No such CoNLL-2012 file"),
    ("#begin document (x); part 000\n", "no '#end document'"),
])
def test_malformed_conll_2012_is_named(text, message):
    with pytest.raises(InputError, match=message):
        read_conll2012(text)
