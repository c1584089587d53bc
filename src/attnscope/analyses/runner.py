"""The corpus runner: an analysis over many documents as partial aggregates, in this process or as a
Ray Data pipeline across a cluster.

A partial aggregate (head_stats.HeadPartial) holds per-head sums and counts, and for
head_distances the summed Jensen–Shannon divergences: the partials of any split of a corpus,
merged, are the whole corpus's. So `backend="ray"` runs the same analysis as
`ray.data.from_items(...).map_batches(<a model actor>)`, one actor per GPU (or per CPU when the
cluster has none), and merges the partials on the driver. Ray retries what dies (an actor is
restarted and its batch run again); a text that fails stops the run, named by its corpus index.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import checks
from ..checks import check_comparable
from ..engine.attention_model import AttentionModel, load, model_of
from ..errors import InputError
from ..progress import progress as progress_bar
from .corpus import Documents, corpus_settings, documents
from .tables import heads_frame, tagged

BACKENDS = ("local", "ray")
AUTO_CHUNK_UNIT = 64


def check_backend(backend: Any) -> str:
    if not checks.one_of(backend, BACKENDS):
        raise InputError(f"backend={checks.short_repr(backend)}: use 'local' (this process) or 'ray' (a Ray Data pipeline).")
    return backend


def run_partial(partial: Callable[..., Any], model: Any, items: Any, *, progress: bool, backend: str = "local",
                **options):
    """An analysis's partial aggregate of the whole corpus (`items`: Documents, or parsed
    sentences, with their corpus positions), run where `backend` says: `partial(model, items,
    progress=, **options)` over the whole corpus here, or over parts of it on Ray's workers, the
    parts' results merged (`.merge`). `partial` is a module-level function (or a functools.partial
    of one), so that it pickles. `model` may be a tuple of models (an analysis comparing them):
    each worker then rebuilds every one. The settings in `options` are resolved by the caller,
    once, before any batch runs anywhere."""
    backend = check_backend(backend)
    progress = checks.flag("progress", progress)
    if backend == "local":
        return partial(model, items, progress=progress, **options)
    return _ray_partial(partial, model, items, progress=progress, options=options)


@dataclass
class CorpusRun:
    """What a corpus analysis's run gives its entry: the model, how many documents, the merged
    partial, and the max_length and batch_size it ran with."""

    model: AttentionModel
    documents: int
    partial: Any
    max_length: int
    batch_size: int | str


_ONE_MODEL = object()  # run_corpus's `second` when there is none


def run_corpus(kind: str, partial: Callable[..., Any], model: Any, corpus: Any, *, column: str | Sequence[str] | None = None,
               max_length: int | None = None, batch_size: int | str = "auto", progress: bool = True, backend: str = "local",
               gradients: bool = False, prepare: Callable[[Any, Documents, int], dict] | None = None, second: Any = _ONE_MODEL,
               **options) -> CorpusRun:
    """A corpus analysis's entry, written once: the model checked (model_of, named as `kind`), the
    corpus's documents (`column`), max_length and batch_size checked before any batch runs
    (corpus_settings; `gradients`: batches sized for a backward pass) and `partial` run over every
    document, here or on Ray (run_partial, with `options`, and those `prepare(model, documents,
    max_length)` adds before the run: what the partial needs of the whole corpus, its token counts).
    `second`: a model compared with the first head by head (attention_similarity's fine-tuned
    copy), checked as comparable; the partial reads both, (model, second)."""
    model = model_of(model, kind)
    if second is not _ONE_MODEL:  # given, so a model (None too is refused by name, not taken as "no second")
        second = model_of(second, f"{kind}'s tuned= (its second model)")
        check_comparable(model, second, kind)
    docs = documents(corpus, column)
    max_length, batch_size = corpus_settings(model, docs, max_length, batch_size, gradients=gradients, backend=backend)
    if prepare is not None:
        options = {**options, **prepare(model, docs, max_length)}
    merged = run_partial(partial, model if second is _ONE_MODEL else (model, second), docs, progress=progress, backend=backend, max_length=max_length,
                         batch_size=batch_size, **options)
    return CorpusRun(model, len(docs), merged, max_length, batch_size)


def heads_analysis(kind: str, partial: Callable[..., Any], model: Any, corpus: Any, **settings):
    """A corpus analysis of per-head means (its partial's `sums`, tables.HeadSums): run_corpus, then
    the tidy frame of its measures (heads_frame) tagged with `kind`, the model and the documents."""
    run = run_corpus(kind, partial, model, corpus, **settings)
    return tagged(heads_frame(run.partial.sums.result()), kind, run.model, run.documents)


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise InputError('backend="ray" needs Ray Data: pip install "attnscope[ray]".') from None
    return ray


class _PartialWorker:
    """A Ray Data actor: the model rebuilt once on its device, then each chunk of the corpus (whole
    batches, as a single-process run makes them) turned into its partial aggregate."""

    def __init__(self, model_box: list, partial: Callable[..., Any], options: dict):
        import ray
        import torch

        device = "cuda" if ray.get_gpu_ids() and torch.cuda.is_available() else "cpu"
        engines = []
        for shipped in ray.get(model_box[0]):
            model_class, config, weights, dtype, tokenizer = shipped
            model = model_class(config)  # the user's model, rebuilt from its class, config and weights
            model.load_state_dict(weights)
            engines.append(load(model.to(dtype), tokenizer, device=device))
        self.engine = engines[0] if len(engines) == 1 else tuple(engines)
        self.run = partial
        self.options = options

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        answers = [run_chunk(self.run, self.engine, chunk, self.options) for chunk in batch["chunk"]]
        return {"partial": np.array([a["partial"] for a in answers], dtype=object),
                "error": np.array([a["error"] for a in answers]), "first": np.array([a["first"] for a in answers])}


def run_chunk(partial: Callable[..., Any], model: Any, chunk: bytes, options: dict) -> dict[str, Any]:
    """One chunk of the corpus (pickled (positions, items), as chunk_rows makes them) turned into
    its pickled partial aggregate, or the message of the text that fails in it: data for the
    driver, not a task for Ray to retry."""
    positions, items = pickle.loads(chunk)
    part = Documents(items)
    part.positions = positions
    try:
        return {"partial": pickle.dumps(partial(model, part, progress=False, **options)), "error": "", "first": positions[0]}
    except InputError as exc:
        return {"partial": b"", "error": str(exc), "first": positions[0]}


def chunks_of(n_items: int, batch_size: int, workers: int) -> list[tuple[int, int]]:
    """[start, end) spans of the corpus, each whole batches of `batch_size` (so a worker batches as
    one process does), about four per worker; a last span of one item joins the one before (a
    loss that compares the texts of a batch never gets a batch of one it would not get anyway)."""
    per_chunk = batch_size * max(1, -(-n_items // (4 * workers * batch_size)))
    spans = [(start, min(n_items, start + per_chunk)) for start in range(0, n_items, per_chunk)]
    if len(spans) > 1 and spans[-1][1] - spans[-1][0] == 1:
        spans[-2:] = [(spans[-2][0], spans[-1][1])]
    return spans


def _ray_partial(partial: Callable[..., Any], model: Any, items: Any, *, progress: bool, options: dict):
    ray = _import_ray()
    if not ray.is_initialized():
        # The cluster RAY_ADDRESS names, or a local one on this machine.
        ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    workers = gpus or max(1, int(resources.get("CPU", 1)))
    rows = chunk_rows(items, options.get("batch_size", 1), workers)
    dataset = ray.data.from_items(rows, override_num_blocks=len(rows))
    model_box = [ray.put([_shippable(m) for m in (model if isinstance(model, tuple) else (model,))])]
    partials = dataset.map_batches(
        _PartialWorker,
        fn_constructor_kwargs={"model_box": model_box, "partial": partial, "options": options},
        batch_size=1,
        batch_format="numpy",
        concurrency=min(workers, len(rows)),
        num_gpus=1 if gpus else 0,
        num_cpus=0 if gpus else 1,
        # A worker process that dies mid-chunk (killed, out of memory) is restarted and its chunk
        # rerun: Ray Data's own default for actors (max_restarts=-1, max_task_retries=-1).
    )
    return merge_chunks(progress_bar(partials.iter_rows(), len(rows), f"{_name_of(partial)} (ray)", progress, unit="chunk"),
                        len(items))


def chunk_rows(items: Any, batch_size: int | str, workers: int) -> list[dict[str, bytes]]:
    """The corpus as rows of pickled (positions, items) chunks (chunks_of's spans), for run_chunk.
    batch_size "auto": each worker sizes its batches to its device; chunks are then whole units of 64."""
    positions = list(getattr(items, "positions", None) or range(len(items)))
    spans = chunks_of(len(items), AUTO_CHUNK_UNIT if batch_size == "auto" else int(batch_size), workers)
    return [{"chunk": pickle.dumps((positions[a:b], list(items[a:b])))} for a, b in spans]


def merge_chunks(answers: Iterable[dict[str, Any]], n_items: int) -> Any:
    """run_chunk's answers, in whatever order the workers finish, merged into the whole corpus's
    partial; the first text that fails, by corpus index, raised as a single-process run names it."""
    merged, failures = None, []  # failures: (first corpus index of the chunk, message)
    for answer in answers:
        if answer["error"]:
            failures.append((int(answer["first"]), str(answer["error"])))
            continue
        part = pickle.loads(answer["partial"])
        merged = part if merged is None else merged.merge(part)
    if failures:
        _, message = min(failures)
        more = f" ({len(failures) - 1} more part(s) of the corpus failed too.)" if len(failures) > 1 else ""
        raise InputError(message + more)
    if merged is None or merged.documents != n_items:  # nothing is silently dropped
        counted = 0 if merged is None else merged.documents
        raise RuntimeError(f"The Ray run returned {counted} of {n_items} documents.")
    return merged


def _name_of(partial: Any) -> str:
    """What the progress bar calls an analysis: its partial's name, without "_partial"."""
    function = partial.func if isinstance(partial, functools.partial) else partial
    return getattr(function, "__name__", "analysis").removesuffix("_partial")


def _shippable(model: Any) -> tuple:
    """The model as its class, config, weights and dtype (with the tokenizer): a live module may
    hold what does not pickle (transformers' output-capturing hooks hold context variables), and
    the user's model is never touched to make it."""
    import torch

    weights = {name: tensor.detach().cpu() for name, tensor in model.model.state_dict().items()}
    dtype = next((p.dtype for p in model.model.parameters() if p.is_floating_point()), torch.float32)
    return type(model.model), model.model.config, weights, dtype, model.tokenizer
