"""attnscope: see what a transformer looks at, live in Jupyter."""

from .bertology import (
    attention_gradients,
    behaviours,
    head_distances,
    head_importance,
    head_stats,
    read_conllu,
    rollout,
    syntax_heads,
    word_attention,
)
from .bertviz_compat import head_view, model_view
from .engine import AttentionModel, AttentionResult, load
from .export import render_html
from .errors import AttnscopeError, InputError, ModelNotFoundError, NoAttentionError
from .widget import AttentionWidget, show
from . import neuron_view  # noqa: E402 - a callable module: attnscope.neuron_view(...) and .show

__version__ = "0.1.0"

__all__ = [
    "AttentionModel",
    "AttentionResult",
    "AttentionWidget",
    "AttnscopeError",
    "InputError",
    "ModelNotFoundError",
    "NoAttentionError",
    "attention_gradients",
    "behaviours",
    "head_distances",
    "head_importance",
    "head_stats",
    "head_view",
    "load",
    "model_view",
    "neuron_view",
    "read_conllu",
    "rollout",
    "syntax_heads",
    "word_attention",
    "render_html",
    "show",
]
