"""The runner's parts and merge (runner.py) without Ray: backend="ray" splits the corpus into chunks
(chunk_rows), turns each into a pickled partial on a worker (run_chunk) and merges them in whatever
order the workers finish (merge_chunks). Here the chunks run in this process, in reverse, so every
analysis is seen to give the single-process numbers from parts merged out of order; the same
analyses on a real Ray cluster are in test_corpus_ray.py."""

from __future__ import annotations

import copy
import functools
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

import attnscope
from attnscope.analyses import runner
from attnscope.analyses.corpus import documents
from attnscope.analyses.head_stats import head_partial
from attnscope.errors import InputError

# Eight texts in batches of two: four chunks, none a batch of one (MiniLM's in-batch contrastive
# loss cannot rank a batch of one), and small, as a unit test is.
TEXTS = [f"The keeper fed lion number {i} before the storm." for i in range(5)] + [
    "Dogs bark at the mailman every morning.", "Paris is the capital of France.", "She read the book twice."]
PAIRS = [(f"The cat {i} sat on the mat.", "It was happy.") for i in range(8)]


@pytest.fixture
def parts_in_reverse(monkeypatch):
    """backend="ray" run as its chunks in reverse order, in this process; records how many chunks."""
    seen = []

    def in_reverse(partial, model, items, *, progress, options):
        rows = runner.chunk_rows(items, options.get("batch_size", 1), workers=2)
        seen.append(len(rows))
        partial = pickle.loads(pickle.dumps(partial))  # a worker gets it pickled
        return runner.merge_chunks((runner.run_chunk(partial, model, row["chunk"], options) for row in reversed(rows)), len(items))

    monkeypatch.setattr(runner, "_ray_partial", in_reverse)
    return seen


def frames_of(result) -> list[pd.DataFrame]:
    """The tables an analysis returns (a DataFrame, or a result object holding them)."""
    if isinstance(result, pd.DataFrame):
        return [result]
    if hasattr(result, "tidy"):
        return [result.tidy()]
    return [getattr(result, name) for name in ("table", "weights", "accuracy") if isinstance(getattr(result, name, None), pd.DataFrame)]


def same_tables(local, merged):
    assert len(frames_of(local)) == len(frames_of(merged)) > 0
    for a, b in zip(frames_of(local), frames_of(merged)):
        assert list(a.columns) == list(b.columns)
        for column in a.columns:
            x, y = a[column].to_numpy(), b[column].to_numpy()
            if np.issubdtype(x.dtype, np.number):
                x, y = x.astype(float), y.astype(float)
                assert (np.isnan(x) == np.isnan(y)).all(), column
                np.testing.assert_allclose(y[~np.isnan(y)], x[~np.isnan(x)], rtol=1e-6, atol=1e-6, err_msg=column)
            else:
                assert (x == y).all(), column


def words_of(sentences):
    return {w: torch.randn(6, generator=torch.Generator().manual_seed(len(w))) for s in sentences for w in s.split()}


def tuned_copy(model):
    """Kovaleva et al.'s comparison: a second model, layer 4's queries changed."""
    tuned = copy.deepcopy(model.model)
    with torch.no_grad():
        tuned.encoder.layer[4].attention.self.query.weight.mul_(1.5)
    return attnscope.load(tuned, model.tokenizer, device="cpu")


SENTENCES = [line for line in open("notebooks/data/sentences.txt", encoding="utf-8").read().splitlines() if line.strip()][:8]
PROBE_SENTENCES = [f"The keeper fed lion number {i} before the storm came." for i in range(8)]

ANALYSES = {
    "head_stats texts": lambda m, **kw: attnscope.head_stats(m, TEXTS, batch_size=2, progress=False, **kw),
    "head_stats pairs": lambda m, **kw: attnscope.head_stats(m, PAIRS, batch_size=2, progress=False, **kw),
    "head_roles": lambda m, **kw: attnscope.head_roles(m, TEXTS, batch_size=2, progress=False, **kw),
    "head_ablation": lambda m, **kw: attnscope.head_ablation(m, TEXTS, unit="layer", batch_size=2, progress=False, **kw),
    "attention_patterns": lambda m, **kw: attnscope.attention_patterns(m, PAIRS, batch_size=2, progress=False, **kw),
    "attention_probes": lambda m, **kw: attnscope.attention_probes(
        m, PROBE_SENTENCES, vectors=words_of(PROBE_SENTENCES), probes=["right-branching", "attn", "attn + vectors"],
        epochs=2, batch_size=2, progress=False, **kw),
    "coref_heads": lambda m, **kw: attnscope.coref_heads(m, "notebooks/data/coref_sample.conll", batch_size=2, progress=False, **kw),
    "head_finder": lambda m, **kw: attnscope.head_finder(m, TEXTS, batch_size=2, progress=False, **kw),
    "head_distances": lambda m, **kw: attnscope.head_distances(m, TEXTS, batch_size=2, progress=False, **kw),
    "head_importance": lambda m, **kw: attnscope.head_importance(m, TEXTS, batch_size=2, progress=False, **kw),
    "attention_gradients": lambda m, **kw: attnscope.attention_gradients(m, TEXTS, batch_size=2, progress=False, **kw),
    "value_flow": lambda m, **kw: attnscope.value_flow(m, TEXTS, progress=False, **kw),
    "attention_similarity": lambda m, **kw: attnscope.attention_similarity(m, tuned_copy(m), PAIRS, batch_size=2, progress=False, **kw),
    "syntax_heads": lambda m, **kw: attnscope.syntax_heads(m, SENTENCES, batch_size=2, progress=False, **kw),
}


@pytest.mark.parametrize("name", list(ANALYSES))
def test_each_analysis_merged_from_its_parts_in_reverse_gives_the_single_process_numbers(default_model, parts_in_reverse, name):
    if name == "syntax_heads":
        pytest.importorskip("spacy")
    local = ANALYSES[name](default_model)
    merged = ANALYSES[name](default_model, backend="ray")
    assert parts_in_reverse and min(parts_in_reverse) >= 2, "the corpus was not split: nothing was merged"
    same_tables(local, merged)


def test_the_pruning_curve_merged_in_reverse_removes_heads_in_the_same_order(default_model, parts_in_reverse):
    local = attnscope.pruning_curve(default_model, TEXTS, steps=4, batch_size=2, progress=False)
    merged = attnscope.pruning_curve(default_model, TEXTS, steps=4, batch_size=2, progress=False, backend="ray")
    assert parts_in_reverse and min(parts_in_reverse) >= 2
    assert merged.attrs["order"] == local.attrs["order"] and merged.removed.tolist() == local.removed.tolist()
    np.testing.assert_allclose(merged.loss, local.loss, rtol=1e-6, atol=1e-9)


def test_the_first_failing_text_is_named_whichever_part_comes_back_first():
    answers = [{"partial": b"", "error": "Text 7 of the corpus gives NaN.", "first": 6},
               {"partial": b"", "error": "Text 3 of the corpus gives NaN.", "first": 2}]
    with pytest.raises(InputError, match=r"^Text 3 of the corpus gives NaN\. \(1 more part"):
        runner.merge_chunks(answers, 8)


def test_a_merge_that_lost_documents_is_refused(default_model):
    rows = runner.chunk_rows(documents(TEXTS), 2, workers=2)

    partial = functools.partial(head_partial, "head_stats")
    answers = [runner.run_chunk(partial, default_model, row["chunk"], {"max_length": 64, "batch_size": 2}) for row in rows[1:]]
    with pytest.raises(RuntimeError, match=r"returned 6 of 8 documents"):
        runner.merge_chunks(answers, len(TEXTS))
