"""How layers and heads are named, in DataFrames, messages and (through js/drawing/labels.js) the views.

Layers and heads are counted from 0 everywhere, as in the Python API, Hugging Face's
`attentions[i]`, BertViz and TransformerLens: layer 7, head 9 is "7-9". (The papers count from 1:
Clark et al.'s head 8-10 is 7-9 here.) js/drawing/labels.js names them the same way; js/transport/contract.js
carries `HEAD_LABEL_EXAMPLES` from here and js/drawing/labels.test.js checks the two agree.
"""

from __future__ import annotations

COUNTING = "Layers and heads are counted from 0, as in the Python API and Hugging Face's attentions[i]."


def head_label(layer: int, head: int) -> str:
    """A head's short name, "layer-head": layer 7, head 9 is "7-9" (the DataFrames' `label`)."""
    return f"{layer}-{head}"


def head_name(layer: int, head: int) -> str:
    """A head's name in a sentence: "layer 7, head 9"."""
    return f"layer {layer}, head {head}"


# (layer, head) pairs whose names js/transport/contract.js carries for the JS side's test.
EXAMPLES = ((0, 0), (2, 0), (7, 9), (11, 11), (31, 13))


def label_examples() -> list[list]:
    """[[layer, head, head_label, head_name], ...] for EXAMPLES (js/transport/contract.js)."""
    return [[layer, head, head_label(layer, head), head_name(layer, head)] for layer, head in EXAMPLES]
