"""The head view's knockout control, the kernel's side: whether the shown run can be scored (a
causal LM's next token or a masked LM's [MASK], one short text), and the answer to a "knockout"
request, which is attnscope.knockout's on the widget's text: a head disabled (its output zeroed,
Michel et al.) or the lines from the predicted position to one token in that head blocked (their
scores −inf before the softmax, Geva et al.). Each request is untrusted input, checked against
the widget's run before the model runs.
"""

from __future__ import annotations

from typing import Any

from .. import checks
from ..analyses.tables import action
from ..errors import InputError


def knockout_control(engine: Any, result: Any, word_level: bool, long_context: bool) -> dict:
    """What the head view's knockout control offers for this run: {position: the token whose
    distribution is read, output: "next token" or "masked token"}, or {unavailable: why not}."""
    if engine is None:
        return {"unavailable": "Knockout reruns the model, and this view was made from precomputed attention."}
    if long_context:
        return {"unavailable": f"Knockout reruns the whole model once per try: this text of {result.n_tokens:,} "
                               "tokens is for attnscope.knockout(...) in a cell."}
    if result.text_b is not None:
        return {"unavailable": "Knockout reads one text: this run has a second one (sentence B)."}
    if word_level:
        return {"unavailable": "Knockout blocks a token's lines: switch off Words."}
    try:
        output = action("knockout.output_kind")(engine)
        at, n_tokens = action("knockout.predicted_position")(engine, result.text)
    except InputError as exc:
        return {"unavailable": str(exc)}
    if n_tokens != len(result.tokens):
        return {"unavailable": f"The model reads this text as {n_tokens} tokens and the run shows "
                               f"{len(result.tokens)} (cut at max_length): knockout needs the whole text."}
    return {"position": at, "output": output}


def answer_knockout(widget: Any, request: dict) -> dict:
    """A "knockout" request {layer, head, key (-1: the whole head), result_id} → attnscope.knockout's
    row for the widget's text: Δ log p of the predicted token with that head's output zeroed, or
    with the lines from the predicted position to `key` in that head blocked."""
    result = widget.token_result
    control = knockout_control(widget.engine, result, widget.word_level, widget.long_context)
    if "unavailable" in control:
        raise InputError(control["unavailable"])
    if request.get("result_id") != widget.result_id:
        raise InputError("This knockout was asked of an earlier text: try again on the one shown.")
    engine, at = widget.engine, control["position"]
    layer = checks.integer("layer", request.get("layer"), minimum=0, maximum=engine.n_layers - 1)
    head = checks.integer("head", request.get("head"), minimum=0, maximum=engine.n_heads - 1)
    key = checks.integer("key", request.get("key", -1), minimum=-1, maximum=len(result.tokens) - 1)
    edges = [] if key == -1 else [(layer, head, at, key)]
    row = action("knockout")(engine, result.text, edges=edges, heads=[(layer, head)] if key == -1 else []).iloc[0]
    return {"result_id": widget.result_id, "layer": layer, "head": head, "key": key, "position": int(row.position),
            "target": str(row.target), "log_p": float(row.log_p), "log_p_knocked": float(row.log_p_knocked),
            "delta": float(row.delta), "masked": bool(widget.masked_heads)}


# A generation (attnscope.generate): the selected output token t is scored, Δ log p of the token
# the model chose there, read after the ids the model had read before it (the prompt as the chat
# template made it, and the outputs before t), exactly those ids: never the text re-tokenized.

CHOSEN = "chosen token"


def generation_knockout_control(engine: Any, run: Any, generating: bool) -> dict:
    """What the head view's knockout control offers on a generation: {output: "chosen token"} (the
    page scores its selected output token), or {unavailable: why not}."""
    if engine is None:
        return {"unavailable": "Knockout reruns the model, and this view was made from precomputed attention."}
    if generating:
        return {"unavailable": "Knockout reruns the model, which is still writing: wait for the end, or Stop."}
    try:
        action("knockout.output_kind")(engine)
    except InputError as exc:
        return {"unavailable": str(exc)}
    if run.steps == 0:
        return {"unavailable": "The model wrote no token to score."}
    return {"output": CHOSEN}


def answer_generation_knockout(widget: Any, request: dict) -> dict:
    """A "knockout" request {layer, head, key (-1: the whole head), token, result_id} on a
    generation → attnscope.knockout's row for output token `token`: the ids before it, the token
    the model chose there as the target; the lines blocked run from the position that predicted it
    (token − 1) to `key`."""
    control = generation_knockout_control(widget.generating_model, widget.generation, widget.generating)
    if "unavailable" in control:
        raise InputError(control["unavailable"])
    if request.get("result_id") != widget.result_id:
        raise InputError("This knockout was asked of an earlier step of the run: try again on the one shown.")
    run, engine, first = widget.generation, widget.generating_model, widget.output_start
    token = checks.integer("token", request.get("token"), minimum=0, maximum=len(run.ids) - 1)
    if token < first:
        raise InputError(f"Token {token} is in the prompt: select an output token (from token {first} on) to score "
                         "the token the model chose there.")
    at = token - 1
    layer = checks.integer("layer", request.get("layer"), minimum=0, maximum=engine.n_layers - 1)
    head = checks.integer("head", request.get("head"), minimum=0, maximum=engine.n_heads - 1)
    key = checks.integer("key", request.get("key", -1), minimum=-1, maximum=at)
    said = {}
    if getattr(engine, "is_encoder_decoder", False):
        text, decoder, edges, heads, said["part"] = _encoder_decoder_knockout(run, token, layer, head, key)
    else:
        text, decoder = run.ids[:token], None
        edges, heads = ([], [(layer, head)]) if key == -1 else ([(layer, head, at, key)], [])
    row = action("knockout")(engine, text, edges=edges, heads=heads, target=run.ids[token], decoder=decoder).iloc[0]
    return {**said, "result_id": widget.result_id, "layer": layer, "head": head, "key": key, "position": at,
            # The step as the page counts it (1: the first token written), the target as it shows it
            # (widget.tokens: " cat", where the tokenizer's own form is "Ġcat").
            "token": token, "step": token - first + 1, "target": widget.tokens[token], "log_p": float(row.log_p),
            "log_p_knocked": float(row.log_p_knocked), "delta": float(row.delta), "masked": bool(widget.masked_heads)}


def _encoder_decoder_knockout(run: Any, token: int, layer: int, head: int, key: int) -> tuple:
    """An encoder-decoder's generation, whose page reads the source's tokens then the decoder's:
    (source ids, decoder ids before `token`, edges, heads) for attnscope.knockout, and what the
    answer names as knocked out. The row of the token that predicted `token` is its
    cross-attention over the source, then its self-attention over the decoder: a key before the
    source's end is a cross-attention line, a later one the decoder's; the whole head is that
    layer's head in both (what the view draws as the head)."""
    n_source = len(run.prompt_ids)
    source, decoder = run.prompt_ids, run.ids[n_source:token]
    query = token - 1 - n_source  # the decoder position that predicted it
    if key == -1:
        return source, decoder, [], [("cross", layer, head), ("decoder", layer, head)], "its cross- and self-attention"
    if key < n_source:
        return source, decoder, [("cross", layer, head, query, key)], [], "cross-attention"
    return source, decoder, [("decoder", layer, head, query, key - n_source)], [], "self-attention"
