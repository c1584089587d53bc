"""A long forward pass counts its layers aloud: at 8,192 tokens SmolLM2 runs for minutes on a
CPU, and a cell that shows nothing all that time looks hung. What would be cut is said first, in
the bar's own line, not after the run."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from .. import progress

# From this length a forward takes seconds on a CPU (SmolLM2: about 4 s at 2,048 tokens).
LONG_RUN_TOKENS = 2048


def describe_run(model_name: str, n_tokens: int, truncated_from: int | None, reason: str) -> str:
    cut = f" (input truncated from {truncated_from:,} tokens: {reason})" if truncated_from is not None else ""
    return f"{model_name} over {n_tokens:,} tokens{cut}"


@contextmanager
def layer_progress(layers: Sequence[torch.nn.Module], n_tokens: int, description: str) -> Iterator[None]:
    """A bar of the run's layers, each counted as its attention module returns, for a run of
    LONG_RUN_TOKENS or more; nothing for a shorter one. The hooks go when the run ends, however
    it ends: the model leaves as it came. None inside an analysis's bar, which counts its documents."""
    if n_tokens < LONG_RUN_TOKENS or not layers:
        yield
        return
    bar = progress.counter(len(layers), description, unit="layer")
    if bar is None:
        yield
        return
    def count(*_) -> None:  # a hook that returns something replaces the module's output
        bar.update(1)

    handles = [layer.register_forward_hook(count) for layer in layers]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        bar.close()
