"""Exceptions that attnscope raises for bad input, so callers can catch them by kind."""


class AttnscopeError(Exception):
    """Base class of every error attnscope raises on purpose."""


class InputError(AttnscopeError, ValueError):
    """The text (or batch) given to a run cannot be shown: empty, a batch of several, ..."""


class ModelNotFoundError(AttnscopeError, OSError):
    """A model name is neither a local path nor cached, and could not be downloaded."""


class NoAttentionError(AttnscopeError):
    """The model returns no attention weights (or has no attention layers attnscope can read)."""
