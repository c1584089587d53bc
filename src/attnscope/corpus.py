"""Corpus runners: an analysis over many documents as partial aggregates, in this process or as a
Ray Data pipeline across a cluster.

A partial aggregate (bertology.HeadPartial) holds per-head sums and counts, and for
head_distances the summed Jensen–Shannon divergences: the partials of any split of a corpus,
merged, are the whole corpus's. So `backend="ray"` runs the same analysis as
`ray.data.from_items(...).map_batches(<a model actor>)`, one actor per GPU (or per CPU when the
cluster has none), and merges the partials on the driver. Ray retries what dies (an actor is
restarted and its batch run again); a text that fails stops the run, named by its corpus index.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from .errors import InputError

BACKENDS = ("local", "ray")
# A worker process that dies mid-batch (killed, out of memory) is restarted and its batch rerun.
RAY_RETRIES = 3


def check_backend(backend: Any) -> str:
    if backend not in BACKENDS:
        raise InputError(f"backend={backend!r}: use 'local' (this process) or 'ray' (a Ray Data pipeline).")
    return backend


def run_head_partial(kind: str, model: Any, docs: Any, *, max_length: int | None, batch_size: int, progress: bool,
                     backend: str = "local"):
    """head_stats' or head_distances' partial aggregate of the whole corpus, run where `backend` says."""
    from .bertology import corpus_settings, head_partial

    backend = check_backend(backend)
    # Settings are checked and resolved once, here, before any batch runs anywhere.
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size)
    if backend == "local":
        return head_partial(kind, model, docs, max_length=max_length, batch_size=batch_size, progress=progress)
    return _ray_head_partial(kind, model, docs, max_length=max_length, batch_size=batch_size, progress=progress)


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise InputError('backend="ray" needs Ray Data: pip install "attnscope[ray]".') from None
    return ray


class _HeadPartialWorker:
    """A Ray Data actor: the model loaded once on its device, then each batch of documents turned
    into its partial aggregate (pickled into a one-row column)."""

    def __init__(self, model_box: list, kind: str, max_length: int, batch_size: int):
        import ray
        import torch

        from .engine import load

        model_class, config, weights, dtype, tokenizer = ray.get(model_box[0])
        model = model_class(config)  # the user's model, rebuilt from its class, config and weights
        model.load_state_dict(weights)
        device = "cuda" if ray.get_gpu_ids() and torch.cuda.is_available() else "cpu"
        self.engine = load(model.to(dtype), tokenizer, device=device)
        self.kind, self.max_length, self.batch_size = kind, max_length, batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from .bertology import Documents, head_partial

        docs = Documents((str(a), str(b) if pair else None) for a, b, pair in zip(batch["text"], batch["text_b"], batch["pair"]))
        docs.positions = [int(p) for p in batch["position"]]
        try:
            partial = head_partial(self.kind, self.engine, docs, max_length=self.max_length, batch_size=self.batch_size,
                                   progress=False)
        except InputError as exc:  # a text that fails: data for the driver, not a task to retry
            return {"partial": np.array([b""], dtype=object), "error": np.array([str(exc)]), "first": np.array([docs.positions[0]])}
        return {"partial": np.array([pickle.dumps(partial)], dtype=object), "error": np.array([""]), "first": np.array([docs.positions[0]])}


def _ray_head_partial(kind: str, model: Any, docs: Any, *, max_length: int, batch_size: int, progress: bool):
    ray = _import_ray()
    if not ray.is_initialized():
        # The cluster RAY_ADDRESS names, or a local one on this machine.
        ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    workers = gpus or max(1, int(resources.get("CPU", 1)))
    positions = getattr(docs, "positions", None) or list(range(len(docs)))
    # No None in a column: Arrow would turn a column of them into nulls, and NumPy into NaN.
    rows = [{"position": p, "text": a, "text_b": b or "", "pair": b is not None} for p, (a, b) in zip(positions, docs)]
    # Blocks of a few model batches each: enough of them that every actor has work.
    per_block = max(batch_size, -(-len(rows) // (4 * workers)))
    dataset = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // per_block)))
    model_box = [ray.put(_shippable(model))]
    partials = dataset.map_batches(
        _HeadPartialWorker,
        fn_constructor_kwargs={"model_box": model_box, "kind": kind, "max_length": max_length, "batch_size": batch_size},
        batch_size=per_block,
        batch_format="numpy",
        concurrency=workers,
        num_gpus=1 if gpus else 0,
        num_cpus=0 if gpus else 1,
        max_restarts=RAY_RETRIES,
        max_task_retries=RAY_RETRIES,
    )
    merged = None
    rows_out = partials.iter_rows()
    if progress:
        from tqdm.auto import tqdm

        rows_out = tqdm(rows_out, total=-(-len(rows) // per_block), desc=f"head {kind} (ray)", unit="block")
    failures = []  # (first corpus index of the block, message)
    for row in rows_out:
        if row["error"]:
            failures.append((int(row["first"]), str(row["error"])))
            continue
        part = pickle.loads(row["partial"])
        merged = part if merged is None else merged.merge(part)
    if failures:  # the first text that fails, by corpus index, as a single-process run names it
        first, message = min(failures)
        more = f" ({len(failures) - 1} more block(s) of the corpus failed too.)" if len(failures) > 1 else ""
        raise InputError(message + more)
    if merged is None or merged.documents != len(docs):  # nothing is silently dropped
        counted = 0 if merged is None else merged.documents
        raise RuntimeError(f"The Ray run returned {counted} of {len(docs)} documents.")
    return merged


def _shippable(model: Any) -> tuple:
    """The model as its class, config, weights and dtype (with the tokenizer): a live module may
    hold what does not pickle (transformers' output-capturing hooks hold context variables), and
    the user's model is never touched to make it."""
    import torch

    weights = {name: tensor.detach().cpu() for name, tensor in model.model.state_dict().items()}
    dtype = next((p.dtype for p in model.model.parameters() if p.is_floating_point()), torch.float32)
    return type(model.model), model.model.config, weights, dtype, model.tokenizer
