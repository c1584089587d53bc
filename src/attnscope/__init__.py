"""attnscope: see what a transformer looks at, live in Jupyter."""

import importlib
import importlib.metadata
from typing import Any

# Each public name and the module that holds it. They are imported on first use (PEP 562), not
# with the package: `attnscope --help` and the CLI's argument checks need no torch (2 s to import),
# and a name's first use costs what its own import costs.
_WHERE = {
    **dict.fromkeys(
        (
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
            "knockout",
            "knockout_heads",
            "knockout_sweep",
            "patterns_by_layer",
            "pruning_curve",
            "read_conll2012",
            "read_conllu",
            "roles",
            "rollout",
            "similarity_by_layer",
            "syntax_heads",
            "value_flow",
        ),
        "analyses",
    ),
    **dict.fromkeys(("head_view", "model_view"), "edges.bertviz_compat"),
    **dict.fromkeys(("render_html",), "edges.render"),
    **dict.fromkeys(("AttentionModel", "AttentionResult", "load"), "engine.attention_model"),
    **dict.fromkeys(("CrossAttentionResult", "EncoderDecoderResult", "LongAttentionResult", "word_attention"), "engine.results"),
    **dict.fromkeys(("AttnscopeError", "InputError", "ModelNotFoundError", "NoAttentionError"), "errors"),
    **dict.fromkeys(("AttentionWidget", "show"), "widget.attention_widget"),
    **dict.fromkeys(("GenerationWidget", "generate"), "widget.generation_widget"),
    **dict.fromkeys(("SettingError",), "widget.widget_checks"),
}


def __getattr__(name: str) -> Any:
    """A public name (or a subpackage) on first use, then kept as the module's own attribute."""
    if name == "neuron_view":  # a callable module: attnscope.neuron_view(...) and .show
        value = importlib.import_module(".neuron_view", __name__)
    elif name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":  # a module it imports is missing: say that
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


try:  # declared once, in pyproject.toml
    __version__ = importlib.metadata.version("attnscope")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [*_WHERE, "neuron_view"]
