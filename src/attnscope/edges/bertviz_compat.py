"""BertViz 1.4.1's functions with the same arguments, drawn by attnscope.

`from bertviz import head_view, model_view` → `from attnscope import head_view, model_view`, and
`from bertviz.neuron_view import show` → `from attnscope.neuron_view import show`. They return our
widget (shown in the cell, as BertViz's are), or with html_action="return" an IPython HTML object
holding a complete standalone page (its `.data` can be written to a file).

BertViz's mistakes are not copied: `include_layers=[]` is an error, not "all layers"; a batch
of more than one is refused with its size; tokens that do not match the attention are refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from .. import checks
from ..engine.attention_model import load
from ..engine.results import AttentionResult, CrossAttentionResult, EncoderDecoderResult, fallback_labels
from ..engine.texts import groups_from_tokens
from ..errors import InputError
from ..widget.attention_widget import AttentionWidget
from ..widget.export import widget_html
from ..widget.picture import shown

HTML_ACTIONS = ("view", "return")
ENCODER_DECODER_ARGS = ("encoder_attention", "decoder_attention", "cross_attention", "encoder_tokens", "decoder_tokens")
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "<s>", "</s>", "<pad>", "<unk>", "<|endoftext|>")


def stack_attention(attention: Any, what: str = "attention") -> torch.Tensor:
    """BertViz's input (a tuple/list of per-layer tensors, batch × heads × T × T) → layers × heads × T × T."""
    if isinstance(attention, (list, tuple)) and (not attention or all(a is None for a in attention)):
        held = "is empty" if not attention else f"holds only None ({len(attention)} of them)"
        raise InputError(
            f"{what} {held}. With transformers 5, outputs[-1] can be the (empty) cross_attentions of an "
            "encoder-only model: pass outputs.attentions, from a model loaded with attn_implementation=\"eager\"."
        )
    if _is_array(attention):  # NumPy for torch: the same numbers
        attention = torch.from_numpy(attention)
    if isinstance(attention, (list, tuple)) and attention and all(_is_array(a) for a in attention):
        attention = [torch.from_numpy(a) for a in attention]
    if isinstance(attention, torch.Tensor):
        layers = list(attention) if attention.dim() == 5 else [attention]
    elif isinstance(attention, (list, tuple)) and attention and all(isinstance(a, torch.Tensor) for a in attention):
        layers = list(attention)
    else:
        inside = ""
        if isinstance(attention, (list, tuple)) and attention:
            kinds = sorted({checks.kind_of(a).split(" ", 1)[-1] for a in attention})
            inside = f" of {', '.join(kinds)}"
        raise InputError(
            f"{what} must be a tuple of per-layer tensors (batch × heads × tokens × tokens), as a Hugging "
            f"Face model returns with output_attentions=True; got {checks.kind_of(attention)}{inside}."
        )
    bad_kind = next((a for a in layers if not (a.is_floating_point() and not a.is_complex())), None)
    if bad_kind is not None:
        raise InputError(f"{what} must hold attention weights as floats, not a tensor of {bad_kind.dtype}.")
    shapes = {tuple(a.shape) for a in layers}
    if len(shapes) != 1:
        raise InputError(f"The layers of {what} have different shapes: {sorted(shapes)}.")
    (shape,) = shapes
    if len(shape) != 4:
        raise InputError(f"Each layer of {what} must be batch × heads × tokens × tokens; got shape {list(shape)}.")
    if shape[0] != 1:
        raise InputError(
            f"{what} holds a batch of {shape[0]}; attnscope (like BertViz) shows one input at a time. "
            f"Pass attention[i][j:j+1] for each layer i, or run the inputs one by one."
        )
    stacked = torch.stack([a[0] for a in layers]).detach().float()
    check_distribution(stacked, what)
    return stacked


def _is_array(value: Any) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


# How far a row's sum may pass 1 (float16 attention, rounding) before it is no distribution.
ROW_SUM_TOLERANCE = 1e-2


def check_distribution(attention: torch.Tensor, what: str) -> None:
    """Attention to draw is a probability distribution over the keys in each row: weights in
    [0, 1] that sum to at most 1 (a row may sum to less: a sink's share, a masked row). NaN, a
    negative weight or a row past 1 (scores, logits, or a sum over heads) is refused by where it
    is, as layer × head × row; a picture of them would be silently wrong."""
    def where(mask: torch.Tensor) -> str:
        layer, head, row = (int(i) for i in mask.nonzero()[0][:3])
        return f"layer {layer}, head {head}, row {row}"

    finite = torch.isfinite(attention)
    if not bool(finite.all()):
        raise InputError(f"{what} holds {'NaN' if bool(attention.isnan().any()) else 'infinite'} weights "
                         f"(first at {where(~finite.all(-1))}): attention weights are probabilities.")
    negative = attention < 0
    if bool(negative.any()):
        raise InputError(f"{what} holds negative weights (first at {where(negative.any(-1))}, "
                         f"{float(attention.min()):.3g}): attention weights are probabilities in [0, 1]. "
                         "Scores or logits? Pass their softmax.")
    sums = attention.sum(-1)
    over = sums > 1 + ROW_SUM_TOLERANCE
    if bool(over.any()):
        raise InputError(f"{what} has rows whose weights sum past 1 (first at {where(over)}, {float(sums.max()):.3g}): "
                         "each row of attention is a probability distribution over the keys. Scores, or a sum over "
                         "heads or layers? Pass the softmax of each head. (A model in training mode drops and rescales "
                         "its weights: call model.eval() before its forward.)")


def token_list(tokens: Any, name: str) -> list[str]:
    """Precomputed tokens as a list of strings: a list, tuple, array or Series of them. A string
    (BertViz would read "abc" as three tokens), token ids, a tokenizer's whole output or anything
    else is refused, saying what it got and how to make tokens."""
    convert = "tokenizer.convert_ids_to_tokens(inputs['input_ids'][0])"
    if isinstance(tokens, (str, bytes)):
        raise InputError(f"{name} must be a list of tokens, not {checks.kind_of(tokens)} (which would be read as one token per "
                         f"character): e.g. {convert}.")
    if isinstance(tokens, dict):  # a tokenizer's BatchEncoding is a dict
        raise InputError(f"{name} must be a list of tokens, not {checks.kind_of(tokens)} (the tokenizer's output?): e.g. {convert}.")
    if isinstance(tokens, torch.Tensor) or type(tokens).__module__.startswith(("numpy", "pandas")) and hasattr(tokens, "tolist"):
        if getattr(tokens, "ndim", 1) != 1:
            raise InputError(f"{name} must be one list of tokens, not {checks.kind_of(tokens)} of shape "
                             f"{list(tokens.shape)}: e.g. {convert}.")
        tokens = tokens.tolist()  # an array or Series of tokens (of ids: refused below)
    if not isinstance(tokens, (list, tuple)):
        raise InputError(f"{name} must be a list of tokens, not {checks.kind_of(tokens)}: e.g. {convert}.")
    bad = next((t for t in tokens if not isinstance(t, str)), _NO_TOKEN)
    if bad is not _NO_TOKEN:
        ids = " (token ids?)" if isinstance(bad, int) else ""
        raise InputError(f"{name} must hold strings, and holds {checks.short_repr(bad)}{ids}: e.g. {convert}.")
    return list(tokens)


_NO_TOKEN = object()


def display_tokens(tokens: Any, name: str) -> tuple[list[str], dict]:
    """Precomputed tokens as the views show them, and the label fields of their result (labels,
    notes, whether each covers text). A UTF-16 surrogate (half a character: the comm cannot send
    it, no page can show it) is shown as U+FFFD; the token's hover note says what it held and a
    warning names the tokens. Tokens are display data here, so they are mended rather than
    refused (a text to run is refused: checks.text_of_characters)."""
    tokens = token_list(tokens, name)
    shown, changed = checks.displayable(tokens)
    labels = fallback_labels(shown)
    notes = list(labels.notes)
    for i in changed:
        halves = ", ".join(f"U+{ord(c):04X}" for c in tokens[i] if checks.first_surrogate(c) is not None)
        said = f"given with {halves} (half a character), shown as U+FFFD"
        notes[i] = f"{notes[i]}; {said}" if notes[i] else said
    if changed:
        warnings.warn(
            f"{name} {checks.short_repr(changed)} held UTF-16 surrogates (half characters), which no page can show: "
            "each is shown as U+FFFD (\ufffd), and the token's hover note says so.",
            stacklevel=checks.caller_stacklevel(),
        )
    return shown, {"labels": labels.labels, "notes": notes, "covers_text": labels.covers_text}


def result_from_attention(
    attention: Any,
    tokens: Sequence[str],
    sentence_b_start: int | None = None,
    model_name: str = "precomputed attention",
    what: str = "attention",
) -> AttentionResult:
    """An AttentionResult for attention computed elsewhere (no queries or keys, no model)."""
    if tokens is None:
        raise InputError("'tokens' is required: the list of tokens the attention is over.")
    if not isinstance(what, str):  # the name the messages give the attention (its own parameter's)
        raise InputError(f"what must be the attention's name as a str (e.g. 'encoder_attention'), not {checks.short_repr(what)}.")
    stacked = stack_attention(attention, what)
    n = stacked.shape[-1]
    if stacked.shape[-2] != n:
        raise InputError(f"Self-attention must be square; got {stacked.shape[-2]} × {n}.")
    tokens_name = "tokens" if what == "attention" else what.replace("attention", "tokens")
    tokens, shown = display_tokens(tokens, tokens_name)
    if len(tokens) != n:
        raise InputError(f"The {what} has {n} positions, but {len(tokens)} tokens were given as {tokens_name}.")
    if sentence_b_start is not None:
        checks.integer("sentence_b_start", sentence_b_start)
        if not 0 < sentence_b_start < n:
            raise InputError(f"sentence_b_start={sentence_b_start} must lie inside the {n} tokens.")
    return AttentionResult(
        tokens=tokens,
        labels=shown["labels"],
        token_notes=shown["notes"],
        covers_text=shown["covers_text"],
        sentence_b_start=sentence_b_start,
        attention=stacked,
        scaling=[1.0] * stacked.shape[0],
        causal=bool(torch.all(stacked.triu(1) == 0)) and n > 1,
        model_name=model_name,
        text="",
        text_b=None,
        word_groups=groups_from_tokens(tokens, SPECIAL_TOKENS),
    )


def result_from_encoder_decoder(
    encoder_attention: Any = None,
    decoder_attention: Any = None,
    cross_attention: Any = None,
    encoder_tokens: Sequence[str] | None = None,
    decoder_tokens: Sequence[str] | None = None,
) -> tuple[AttentionResult, str]:
    """One result per given part (BertViz accepts any subset), linked as `parts`; also the first part."""
    given = {"encoder": encoder_attention, "decoder": decoder_attention, "cross": cross_attention}
    given = {part: attention for part, attention in given.items() if attention is not None}
    if not given:
        raise InputError("Give attention= (self-attention models) or encoder_attention / decoder_attention / cross_attention.")
    needs = {"encoder": ["encoder_tokens"], "decoder": ["decoder_tokens"], "cross": ["decoder_tokens", "encoder_tokens"]}
    tokens_by_name = {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}
    for part in given:
        missing = [name for name in needs[part] if tokens_by_name[name] is None]
        if missing:
            raise InputError(f"{part}_attention needs {' and '.join(missing)}.")
    parts: dict[str, AttentionResult] = {}
    for part, attention in given.items():
        if part == "cross":
            stacked = stack_attention(attention, "cross_attention")
            queries, query_shown = display_tokens(decoder_tokens, "decoder_tokens")
            keys, key_shown = display_tokens(encoder_tokens, "encoder_tokens")
            if tuple(stacked.shape[-2:]) != (len(queries), len(keys)):
                raise InputError(
                    f"cross_attention is {stacked.shape[-2]} × {stacked.shape[-1]}, but there are {len(queries)} "
                    f"decoder tokens and {len(keys)} encoder tokens."
                )
            parts[part] = CrossAttentionResult(
                tokens=queries, key_tokens=keys, attention=stacked,
                labels=query_shown["labels"], token_notes=query_shown["notes"], covers_text=query_shown["covers_text"],
                key_labels=key_shown["labels"], key_token_notes=key_shown["notes"],
                scaling=[1.0] * stacked.shape[0], causal=False, model_name="precomputed attention", text="",
                text_b=None, word_groups=groups_from_tokens(queries, SPECIAL_TOKENS),
                key_word_groups=groups_from_tokens(keys, SPECIAL_TOKENS),
            )
        else:
            tokens = encoder_tokens if part == "encoder" else decoder_tokens
            parts[part] = result_from_attention(attention, tokens, what=f"{part}_attention")
    return EncoderDecoderResult.of(parts), next(iter(parts))


def _theme(display_mode: str | None) -> str:
    """The widget's theme for BertViz's display_mode: as asked, or (None, the default here) the
    host's, as every other widget. BertViz's default of "dark" opened dark in a light JupyterLab."""
    if display_mode is None:
        return "auto"
    if not checks.one_of(display_mode, ("dark", "light")):
        raise InputError(f"display_mode must be 'dark' or 'light', not {checks.short_repr(display_mode)}.")
    return display_mode


def _check_action(html_action: str) -> None:
    if not checks.one_of(html_action, HTML_ACTIONS):
        raise InputError(f"html_action must be 'view' or 'return', not {checks.short_repr(html_action)}.")


def _result_and_part(args: dict) -> tuple[AttentionResult, str]:
    """BertViz's two ways of calling: attention= and tokens=, or the encoder-decoder arguments."""
    encoder_decoder = {name: args[name] for name in ENCODER_DECODER_ARGS}
    if args["attention"] is not None:
        given = [name for name, value in encoder_decoder.items() if value is not None]
        if given:
            raise InputError(
                f"attention= is for self-attention models; {', '.join(given)} for encoder-decoder ones: not both."
            )
        return result_from_attention(args["attention"], args["tokens"], args["sentence_b_start"]), "encoder"
    return result_from_encoder_decoder(**encoder_decoder)


def _deliver(widget: AttentionWidget, html_action: str) -> Any:
    if html_action == "return":
        from IPython.display import HTML

        return HTML(widget_html(widget))
    return shown(widget)


def _first_layer(layer: int | None, include_layers: Any) -> int:
    if layer is not None:
        return layer
    include_layers = checks.indices("include_layers", include_layers, None, "layers")  # the range once the run is known
    return include_layers[0] if include_layers else 0


def _attention_view(args: dict, view: str, **options: Any) -> Any:
    """head_view and model_view over precomputed attention: BertViz's arguments in `args`, the
    view's own settings in `options`."""
    _check_action(args["html_action"])
    result, part = _result_and_part(args)
    widget = AttentionWidget(
        result=result,
        attention_part=part,
        include_layers=args["include_layers"],
        prettify_tokens=args["prettify_tokens"],
        view=view,
        **options,
    )
    return _deliver(widget, args["html_action"])


def head_view(
    attention=None,
    tokens=None,
    sentence_b_start=None,
    prettify_tokens=True,
    layer=None,
    heads=None,
    encoder_attention=None,
    decoder_attention=None,
    cross_attention=None,
    encoder_tokens=None,
    decoder_tokens=None,
    include_layers=None,
    html_action="view",
):
    """BertViz's head_view, same arguments (layer, heads, include_layers are 0-based)."""
    return _attention_view(locals(), "head", layer=_first_layer(layer, include_layers), heads=heads)


def model_view(
    attention=None,
    tokens=None,
    sentence_b_start=None,
    prettify_tokens=True,
    display_mode=None,
    encoder_attention=None,
    decoder_attention=None,
    cross_attention=None,
    encoder_tokens=None,
    decoder_tokens=None,
    include_layers=None,
    include_heads=None,
    html_action="view",
):
    """BertViz's model_view, same arguments; display_mode "dark" or "light" sets the theme (left
    out, the host's: JupyterLab's, else the system's)."""
    theme = _theme(display_mode)
    return _attention_view(
        locals(), "model", layer=_first_layer(None, include_layers), include_heads=include_heads, theme=theme
    )


def neuron_view(
    model, model_type, tokenizer, sentence_a, sentence_b=None, display_mode=None, layer=None, head=None, html_action="view"
):
    """BertViz's neuron_view.show, same arguments. Any Hugging Face model works (BertViz needs its own
    patched copies); model_type is accepted for compatibility and not needed. display_mode as model_view's."""
    _check_action(html_action)
    if not isinstance(model_type, str):  # not needed, but what BertViz takes: a name, not taken silently as anything
        raise InputError(f"model_type must be BertViz's name of the model's type, e.g. 'bert', not {checks.short_repr(model_type)}.")
    theme = _theme(display_mode)
    for name, sentence in (("sentence_a", sentence_a), ("sentence_b", sentence_b)):
        if isinstance(sentence, str):  # named as the caller named it (the run would say "text")
            checks.text_of_characters(name, sentence)
        elif sentence is not None or name == "sentence_a":
            raise InputError(f"{name} must be the sentence to run, as a str, not {checks.short_repr(sentence)}.")
        if isinstance(sentence, str) and not sentence.strip():
            raise InputError(f"{name} is empty: give a sentence" + (", or leave sentence_b out." if name == "sentence_b" else "."))
    layer = 0 if layer is None else checks.integer("layer", layer, minimum=0)
    if head is not None:
        head = checks.integer("head", head, minimum=0)
    engine = load(model, tokenizer)
    widget = AttentionWidget(sentence_a, sentence_b, engine, layer=layer, theme=theme, view="neuron")
    if head is not None:
        if not 0 <= head < widget.n_heads:
            raise InputError(f"head={head} is out of range: the model has heads 0..{widget.n_heads - 1}.")
        widget.neuron_head = head
    return _deliver(widget, html_action)
