"""attnscope: see what a transformer looks at, live in Jupyter."""

import importlib.metadata

from . import neuron_view  # a callable module: attnscope.neuron_view(...) and attnscope.neuron_view.show
from .analyses import (
    attention_gradients,
    attention_patterns,
    attention_probes,
    attention_similarity,
    attention_sinks,
    behaviours,
    contributions,
    coref_heads,
    head_ablation,
    head_distances,
    head_finder,
    head_importance,
    head_roles,
    head_stats,
    knockout,
    knockout_heads,
    knockout_sweep,
    patterns_by_layer,
    pruning_curve,
    read_conll2012,
    read_conllu,
    roles,
    rollout,
    similarity_by_layer,
    syntax_heads,
    value_flow,
)
from .edges.bertviz_compat import head_view, model_view
from .edges.render import render_html
from .engine.attention_model import AttentionModel, AttentionResult, load
from .engine.results import CrossAttentionResult, EncoderDecoderResult, LongAttentionResult, word_attention
from .errors import AttnscopeError, InputError, ModelNotFoundError, NoAttentionError
from .widget.attention_widget import AttentionWidget, show
from .widget.generation_widget import GenerationWidget, generate
from .widget.widget_checks import SettingError

try:  # declared once, in pyproject.toml
    __version__ = importlib.metadata.version("attnscope")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "AttentionModel",
    "AttentionResult",
    "AttentionWidget",
    "AttnscopeError",
    "CrossAttentionResult",
    "EncoderDecoderResult",
    "GenerationWidget",
    "InputError",
    "LongAttentionResult",
    "ModelNotFoundError",
    "NoAttentionError",
    "SettingError",
    "attention_gradients",
    "attention_patterns",
    "attention_probes",
    "attention_similarity",
    "attention_sinks",
    "behaviours",
    "contributions",
    "coref_heads",
    "head_ablation",
    "head_distances",
    "head_finder",
    "head_importance",
    "head_roles",
    "head_stats",
    "head_view",
    "knockout",
    "knockout_heads",
    "knockout_sweep",
    "load",
    "model_view",
    "patterns_by_layer",
    "pruning_curve",
    "neuron_view",
    "read_conll2012",
    "read_conllu",
    "roles",
    "rollout",
    "similarity_by_layer",
    "syntax_heads",
    "value_flow",
    "word_attention",
    "render_html",
    "show",
    "generate",
]
