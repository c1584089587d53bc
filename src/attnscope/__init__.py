"""attnscope: see what a transformer looks at, live in Jupyter."""
# ruff: noqa: F401  (the TYPE_CHECKING imports are the declaration that __all__ is read from)

import ast
import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

# The public names, declared once as the imports below, which only type checkers and the API
# docs (griffe) run. At run time each name is imported on first use (PEP 562, __getattr__), not
# with the package: `attnscope --help` and the CLI's argument checks need no torch (2 s to import).
if TYPE_CHECKING:
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


def _declared() -> dict[str, str]:
    """name → the module that holds it, read from the TYPE_CHECKING imports above."""
    tree = ast.parse(__spec__.loader.get_source(__name__))  # this file, from a folder or a zip
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.name: "." + (node.module or alias.name) for node in guarded.body if isinstance(node, ast.ImportFrom) for alias in node.names}


_WHERE = _declared()


def __getattr__(name: str) -> Any:
    """A public name (or a subpackage) on first use, then kept as the module's own attribute."""
    where = _WHERE.get(name)
    if where == f".{name}":  # a module of its own (neuron_view: a callable module)
        value = importlib.import_module(where, __name__)
    elif where is not None:
        value = getattr(importlib.import_module(where, __name__), name)
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

__all__ = list(_WHERE)
