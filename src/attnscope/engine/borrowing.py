"""A model borrowed for a run and given back as it came: eval mode (dropout off) and the attention
implementation the run needs (eager, the only one of transformers' that returns the weights,
attnscope's blocks of it, or the capture for long inputs), each module's own mode and each
config's implementation put back on exit.

A module of its own, apart from loading (models.py): it is what every run does to a model it
was handed, whoever loaded it, and it reads nothing but the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def use_attention(model: Any, implementation: str = "eager", fallback: str | None = None) -> None:
    """Switch a model's attention implementation: eager, the only one of transformers' that
    returns the weights, attnscope's blocks of it (eager_blocks.py; `fallback` "eager" for a
    model that refuses it) or its capture for long inputs (fast_capture.py)."""
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        try:
            setter(implementation)
            return
        except (ValueError, AttributeError, KeyError):
            if fallback is not None:
                use_attention(model, fallback)
                return
            # older models: fall back to the config attribute below
    config = getattr(model, "config", None)
    if config is not None:
        config._attn_implementation = implementation


def attention_implementation(model: Any) -> str | None:
    """The model's own attention implementation ("sdpa", "eager", "flash_attention_2", ...)."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None)


def _attention_configs(modules: list[Any]) -> list[Any]:
    """Every config object of a model's modules and their sub-configs (each once), where the
    attention implementation is recorded. (A module's config is a plain attribute: read from its
    __dict__, not through Module.__getattr__, which raises for each module without one.)"""
    found: dict[int, Any] = {}
    pending = [vars(m).get("config") for m in modules]
    while pending:
        config = pending.pop()
        if config is None or id(config) in found or not hasattr(config, "to_dict"):
            continue
        found[id(config)] = config
        pending.extend(getattr(config, key, None) for key in (getattr(config, "sub_configs", None) or {}))
    return list(found.values())


_UNSET = object()


@contextmanager
def borrowed(model: Any, implementation: str = "eager", fallback: str | None = None) -> Iterator[None]:
    """Run-time settings for a run (eval mode: dropout off; eager attention: the weights come
    back, or another `implementation`), undone on exit so the model leaves exactly as it came: each module's own train/eval
    mode (a user may have frozen some) and each config's attention implementation."""
    modules = list(model.modules())
    modes = [(module, module.training) for module in modules]
    configs = [
        (config, config.__dict__.get("_attn_implementation_internal", _UNSET)) for config in _attention_configs(modules)
    ]
    try:
        if any(training for _, training in modes):  # eval() walks every module: a generation step's 1 ms
            model.eval()
        use_attention(model, implementation, fallback)
        yield
    finally:
        for module, training in modes:
            if module.training != training:  # setting it goes through Module.__setattr__: only where it changed
                module.training = training
        for config, implementation in configs:
            if implementation is _UNSET:
                config.__dict__.pop("_attn_implementation_internal", None)
            else:
                config.__dict__["_attn_implementation_internal"] = implementation
