"""The model a call names, as a loaded AttentionModel: the embedded MiniLM when none is named (loaded
once), a hub name loaded once per process (the last two kept; or the model attnscope.load gave
for that name, while its user holds it), a local folder or a model object loaded each time.
Loading by name or folder says what loads while it does (attention_model.load).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from .. import checks
from ..errors import InputError
from .attention_model import AttentionModel, load, loaded_by_name
from .models import default_device, parse_device


@functools.lru_cache(maxsize=4)
def _default_engine(device: str | None) -> AttentionModel:
    # Loading takes seconds; every show() without a model reuses the embedded one.
    return load(None, device=device)


@functools.lru_cache(maxsize=2)
def _named_engine(name: str, device: str | None) -> AttentionModel:
    # A second widget of the same hub name ("smollm2", "bert-base-uncased") reuses the first's model,
    # and so does a call naming one the user loaded (attnscope.load("smollm2")): loading one took
    # 36-48 s in a newcomer's trial, each call, and held a second copy.
    held = loaded_by_name.get((name, _device_of(device)))
    return held if held is not None else load(name, None, device)  # which says what loads while it does


def _device_of(device: str | None) -> str:
    """The device load(name, device=device) puts a model on, named as it names it (its key in
    loaded_by_name); "" for what is not a device (load says why)."""
    try:
        return str(default_device() if device is None else parse_device(device))
    except InputError:
        return ""


def resolve_engine(model: Any = None, tokenizer: Any = None, device: str | None = None) -> AttentionModel:
    checks.device_kind(device)  # before a cache keyed by it (a list is unhashable)
    if isinstance(model, AttentionModel):
        return model
    if model is None and tokenizer is None:
        return _default_engine(device)
    if isinstance(model, str) and tokenizer is None and not Path(model).expanduser().exists():
        return _named_engine(model, device)  # a local folder is read again: its files may have changed
    return load(model, tokenizer, device)
