"""BertViz's `bertviz.neuron_view.show`, for `from attnscope.neuron_view import show`.

The module itself is also callable, so `attnscope.neuron_view(model, model_type, tokenizer, ...)`
works as BertViz users expect from the other two views.
"""

import sys
import types

from .edges.bertviz_compat import neuron_view as show

__all__ = ["show"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return show(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
