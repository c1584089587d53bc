"""Corpus analyses on a Ray cluster (issue 21): backend="ray" runs the same analysis as a Ray Data
pipeline of model actors and merges their partial aggregates; on a local cluster
(ray.init(num_cpus=1)) every number equals the single-process run's, a worker killed mid-run is
restarted and its batch rerun, and a text that fails is named by its corpus index."""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
import time

import numpy as np
import pytest
import torch
import transformers

import attnscope
from attnscope.errors import InputError

# Ray is imported by the cluster's fixture, not here: importing it (and the schema validators it
# brings) took 2 s of each pytest worker's collection, whatever tests it ran.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason='needs Ray Data: pip install "attnscope[ray]"')

TEXTS = [f"The keeper fed lion number {i} before the storm." for i in range(14)] + [
    "Dogs bark at the mailman every morning.", "Paris is the capital of France.", "She read the book twice."]
PAIRS = [(f"The cat {i} sat on the mat.", "It was happy.") for i in range(10)]


@pytest.fixture(scope="module")
def cluster():
    import ray

    # One CPU, so one model actor a run: each actor's start imports Ray, torch and transformers (about
    # 8 s of CPU), and a second one took no chunk of these small corpora before the first had done
    # them all. Parts merged in any order are tested without Ray, each in reverse: test_runner.py.
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


def same_numbers(local, distributed):
    assert list(local.columns) == list(distributed.columns)
    keys = ["layer", "head", "measure"] if "measure" in local.columns else ["layer", "head"]
    assert (local[keys].to_numpy() == distributed[keys].to_numpy()).all()
    a, b = local["value"].to_numpy(float), distributed["value"].to_numpy(float)
    assert (np.isnan(a) == np.isnan(b)).all()
    np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=0, atol=1e-6)


@pytest.mark.parametrize("corpus", [TEXTS, PAIRS], ids=["texts", "pairs"])
def test_head_stats_on_ray_equals_the_single_process_run(cluster, default_model, corpus):
    local = attnscope.head_stats(default_model, corpus, batch_size=4, progress=False)
    distributed = attnscope.head_stats(default_model, corpus, batch_size=4, progress=False, backend="ray")
    same_numbers(local, distributed)
    assert distributed.attrs["documents"] == len(corpus)


def test_head_roles_on_ray_equal_the_single_process_run(cluster, default_model):
    """Voita et al.'s measures (issue 34): token counts made once, on the driver, for every worker."""
    local = attnscope.head_roles(default_model, TEXTS, batch_size=4, progress=False)
    distributed = attnscope.head_roles(default_model, TEXTS, batch_size=4, progress=False, backend="ray")
    same_numbers(local, distributed)
    assert set(distributed.measure) == {"confidence", "previous", "next", "rare"}


def test_the_pruning_curve_on_ray_equals_the_single_process_run(cluster, default_model):
    """Issue 34: each step's loss summed over the workers' batches; the order made by importance on Ray too."""
    local = attnscope.pruning_curve(default_model, TEXTS, steps=4, batch_size=4, progress=False)
    distributed = attnscope.pruning_curve(default_model, TEXTS, steps=4, batch_size=4, progress=False, backend="ray")
    assert distributed.attrs["order"] == local.attrs["order"]
    assert distributed.removed.tolist() == local.removed.tolist()
    np.testing.assert_allclose(distributed.loss, local.loss, rtol=1e-6, atol=1e-9)


def test_head_ablation_on_ray_equals_the_single_process_run(cluster, default_model):
    """Issue 34 (Kovaleva et al.): each layer disabled in turn, its loss summed over the workers' batches."""
    local = attnscope.head_ablation(default_model, TEXTS, unit="layer", batch_size=4, progress=False)
    distributed = attnscope.head_ablation(default_model, TEXTS, unit="layer", batch_size=4, progress=False, backend="ray")
    np.testing.assert_allclose(distributed.value, local.value, rtol=1e-6, atol=1e-9)
    assert distributed.attrs["base_loss"] == pytest.approx(local.attrs["base_loss"], rel=1e-6)


def test_attention_patterns_on_ray_equal_the_single_process_run(cluster, default_model):
    local = attnscope.attention_patterns(default_model, PAIRS, batch_size=4, progress=False)
    distributed = attnscope.attention_patterns(default_model, PAIRS, batch_size=4, progress=False, backend="ray")
    same_numbers(local, distributed)


def test_attention_similarity_on_ray_equals_the_single_process_run(cluster, default_model, bert_tokenizer):
    """Two models on every worker (Kovaleva et al.'s fine-tuning comparison): each rebuilt there."""
    import copy

    tuned_model = copy.deepcopy(default_model.model)
    with torch.no_grad():
        tuned_model.encoder.layer[4].attention.self.query.weight.mul_(1.5)
    tuned = attnscope.load(tuned_model, bert_tokenizer, device="cpu")
    local = attnscope.attention_similarity(default_model, tuned, PAIRS, batch_size=4, progress=False)
    distributed = attnscope.attention_similarity(default_model, tuned, PAIRS, batch_size=4, progress=False, backend="ray")
    same_numbers(local, distributed)
    by_layer = attnscope.similarity_by_layer(distributed)
    assert by_layer[:4].tolist() == pytest.approx([1.0] * 4, abs=1e-6) and by_layer[4] < 1 - 1e-4


def test_attention_probes_on_ray_equal_the_single_process_run(cluster, default_model):
    """Clark's Table 3: the word-level maps are read on Ray's workers, the probes trained here."""
    sentences = [f"The keeper fed lion number {i} before the storm came." for i in range(12)]
    words = {w: torch.randn(6, generator=torch.Generator().manual_seed(len(w))) for s in sentences for w in s.split()}
    options = dict(vectors=words, probes=["right-branching", "attn", "attn + vectors"], epochs=2, batch_size=4,
                   progress=False)
    local = attnscope.attention_probes(default_model, sentences, **options)
    distributed = attnscope.attention_probes(default_model, sentences, backend="ray", **options)
    assert local.table.probe.tolist() == distributed.table.probe.tolist()
    np.testing.assert_allclose(local.table.uas.to_numpy(float), distributed.table.uas.to_numpy(float), rtol=0, atol=1e-6)
    same_numbers(local.weights, distributed.weights)


def test_coref_heads_on_ray_equal_the_single_process_run(cluster, default_model):
    """Clark's Table 2 over the shipped hand-annotated sample."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "coref_sample.conll"
    local = attnscope.coref_heads(default_model, sample, batch_size=4, progress=False)
    distributed = attnscope.coref_heads(default_model, sample, batch_size=4, progress=False, backend="ray")
    same_numbers(local.accuracy, distributed.accuracy)
    assert local.table().equals(distributed.table())


def test_the_head_finder_on_ray_equals_the_single_process_run(cluster, default_model):
    """Issue 35: every metric, and the top examples merged across workers, as one process finds them."""
    local = attnscope.head_finder(default_model, TEXTS, batch_size=4, progress=False)
    distributed = attnscope.head_finder(default_model, TEXTS, batch_size=4, progress=False, backend="ray")
    same_numbers(local.tidy(), distributed.tidy())
    for layer, head in [(0, 0), (3, 7), (5, 11)]:
        a, b = local.examples(layer, head), distributed.examples(layer, head)
        assert a[["doc", "query", "text"]].equals(b[["doc", "query", "text"]])
        np.testing.assert_allclose(a.score.to_numpy(float), b.score.to_numpy(float), rtol=0, atol=1e-6)


def test_head_distances_on_ray_equals_the_single_process_run(cluster, default_model):
    local = attnscope.head_distances(default_model, TEXTS, batch_size=4, progress=False)
    distributed = attnscope.head_distances(default_model, TEXTS, batch_size=4, progress=False, backend="ray")
    np.testing.assert_allclose(np.array(distributed.attrs["distances"]), np.array(local.attrs["distances"]), rtol=1e-6, atol=1e-6)
    assert (local["behaviour"] == distributed["behaviour"]).all()


def map_worker_pids() -> list[int]:
    """The processes of Ray Data's model actors (Ray titles them ray::MapWorker(...))."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read().startswith(b"ray::MapWorker"):
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def test_a_worker_killed_mid_run_is_restarted_and_the_result_is_the_same(cluster, default_model):
    corpus = TEXTS * 8
    local = attnscope.head_stats(default_model, corpus, batch_size=4, progress=False)
    outcome = {}

    def run():
        try:
            outcome["frame"] = attnscope.head_stats(default_model, corpus, batch_size=4, progress=False, backend="ray")
        except Exception as exc:  # reported below
            outcome["error"] = exc

    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.time() + 120
    while not map_worker_pids() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(4)  # the actors have loaded the model and are working through the corpus
    victims = map_worker_pids()
    assert victims and runner.is_alive(), "the run ended before a worker could be killed"
    os.kill(victims[0], signal.SIGKILL)
    runner.join(timeout=300)
    assert "error" not in outcome, outcome.get("error")
    same_numbers(local, outcome["frame"])


def test_a_text_that_fails_is_named_by_its_corpus_index(cluster, default_model):
    config = default_model.model.config
    model = transformers.BertModel(config)
    model.load_state_dict(default_model.model.state_dict())
    zebra = default_model.tokenizer.convert_tokens_to_ids("zebra")
    with torch.no_grad():
        model.embeddings.word_embeddings.weight[zebra] = float("nan")  # any text with "zebra" fails
    engine = attnscope.load(model.eval(), default_model.tokenizer, device="cpu")
    corpus = list(TEXTS)
    corpus[11] = "A zebra crossed the road."
    for backend in ("local", "ray"):
        with pytest.raises(InputError, match=r"Text 11 of the corpus gives NaN"):
            attnscope.head_stats(engine, corpus, batch_size=4, progress=False, backend=backend)


def test_a_wrong_backend_is_named():
    with pytest.raises(InputError, match=r"backend='spark'"):
        attnscope.head_stats(attnscope.load(device="cpu"), ["The cat sat."], backend="spark", progress=False)


def test_syntax_heads_on_ray_equals_the_single_process_run(cluster, default_model):
    pytest.importorskip("spacy")
    sentences = [line for line in open("notebooks/data/sentences.txt", encoding="utf-8").read().splitlines() if line.strip()][:24]
    local = attnscope.syntax_heads(default_model, sentences, batch_size=4, progress=False)
    distributed = attnscope.syntax_heads(default_model, sentences, batch_size=4, progress=False, backend="ray")
    assert distributed.sentences == local.sentences and distributed.skipped == local.skipped
    keys = ["relation", "direction", "layer", "head"]
    a, b = local.accuracy.sort_values(keys).reset_index(drop=True), distributed.accuracy.sort_values(keys).reset_index(drop=True)
    assert (a[keys + ["count"]] == b[keys + ["count"]]).all().all()
    np.testing.assert_allclose(a["accuracy"], b["accuracy"], atol=1e-6)
    assert local.table().equals(distributed.table())


@pytest.mark.parametrize("analysis", ["head_importance", "attention_gradients"])
def test_gradient_analyses_on_ray_equal_the_single_process_run(cluster, default_model, analysis):
    # 17 texts in batches of 4: the last text alone would make a batch of one, which the in-batch
    # contrastive default loss (MiniLM's) cannot rank; both runs give it the same batches.
    run = getattr(attnscope, analysis)
    local = run(default_model, TEXTS, batch_size=4, progress=False)
    distributed = run(default_model, TEXTS, batch_size=4, progress=False, backend="ray")
    keys = [c for c in local.columns if c != "value"]
    assert (local[keys].to_numpy() == distributed[keys].to_numpy()).all()
    np.testing.assert_allclose(local["value"].to_numpy(float), distributed["value"].to_numpy(float), rtol=1e-6, atol=1e-7)


def test_chunks_are_whole_batches_and_never_leave_a_text_alone():
    from attnscope.analyses.runner import chunks_of

    spans = chunks_of(17, 4, 2)
    assert spans[0][0] == 0 and spans[-1][1] == 17
    assert all(b - a >= 2 for a, b in spans)
    assert all(a % 4 == 0 for a, _ in spans)
    assert [b for _, b in spans[:-1]] == [a for a, _ in spans[1:]]


def test_a_ray_dataset_read_from_parquet_or_jsonl_is_a_corpus(cluster, default_model, tmp_path):
    import json

    import pandas as pd
    import ray.data

    texts = [t for t in TEXTS]
    (tmp_path / "texts.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    pd.DataFrame({"sentence": texts}).to_parquet(tmp_path / "texts.parquet")
    local = attnscope.head_stats(default_model, texts, batch_size=4, progress=False)
    from_jsonl = ray.data.read_json(str(tmp_path / "texts.jsonl"))
    same_numbers(local, attnscope.head_stats(default_model, from_jsonl, batch_size=4, progress=False, backend="ray"))
    from_parquet = ray.data.read_parquet(str(tmp_path / "texts.parquet"))
    same_numbers(local, attnscope.head_stats(default_model, from_parquet, batch_size=4, progress=False))
    with pytest.raises(InputError, match=r"The Ray Dataset has no column 'body'"):
        attnscope.head_stats(default_model, from_parquet, column="body", progress=False)


def test_auto_batches_are_sized_by_each_worker(cluster, default_model):
    # batch_size="auto" (the default) stays "auto" for Ray: each worker sizes its batches to its
    # own device (8 on a CPU, as here), in chunks of whole units.
    local = attnscope.head_stats(default_model, TEXTS, progress=False)
    same_numbers(local, attnscope.head_stats(default_model, TEXTS, progress=False, backend="ray"))


def test_value_flow_on_ray_equals_the_single_process_run(cluster, default_model):
    """Kobayashi et al.'s comparison (issue 47): one run a document, the same sums merged."""
    local = attnscope.value_flow(default_model, TEXTS, progress=False)
    distributed = attnscope.value_flow(default_model, TEXTS, progress=False, backend="ray")
    keys = ["layer", "kind", "measure"]
    assert (local[keys].to_numpy() == distributed[keys].to_numpy()).all()
    a, b = local["value"].to_numpy(float), distributed["value"].to_numpy(float)
    assert (np.isnan(a) == np.isnan(b)).all()
    np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=0, atol=1e-6)
    assert distributed.attrs["documents"] == len(TEXTS)


def test_the_head_finders_norm_metrics_on_ray_equal_the_single_process_run(cluster, default_model):
    """Issue 47: Kobayashi et al.'s norm metrics come from the same pass on every worker (value_norm,
    alpha_first_weighed, sink_rate_weighed) and the ratio from the merged means, as one process gives them."""
    from attnscope.analyses.head_finder import NORM_METRICS

    local = attnscope.head_finder(default_model, TEXTS, batch_size=4, progress=False)
    distributed = attnscope.head_finder(default_model, TEXTS, batch_size=4, progress=False, backend="ray")
    for name in NORM_METRICS:
        a, b = local.metrics[name].to_numpy(float), distributed.metrics[name].to_numpy(float)
        assert not np.isnan(a).any() and not np.isnan(b).any(), name
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6, err_msg=name)
    assert distributed.metrics.attrs["value_norms"] == local.metrics.attrs["value_norms"] == ""
