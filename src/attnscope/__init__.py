"""attnscope: see what a transformer looks at, live in Jupyter."""

from .engine import AttentionModel, AttentionResult, load
from .export import render_html
from .errors import AttnscopeError, InputError, ModelNotFoundError, NoAttentionError
from .widget import AttentionWidget, show

__version__ = "0.1.0"

__all__ = [
    "AttentionModel",
    "AttentionResult",
    "AttentionWidget",
    "AttnscopeError",
    "InputError",
    "ModelNotFoundError",
    "NoAttentionError",
    "load",
    "render_html",
    "show",
]
