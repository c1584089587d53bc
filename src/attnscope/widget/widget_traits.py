"""The widget's synced traits, declared once with `synced(trait, doc, writer=, page=)` (the trait
contract: contract.py reads them, js/transport/contract.js is generated from them), and its bundle. The
widget (attention_widget.py) adds what the traits do: runs, checks and answers."""

from __future__ import annotations

import anywidget
from traitlets import Bool, Dict, Enum, Int, List, Unicode

from ..files import STATIC
from .contract import synced
from .views import LONG_VIEWS, SHORT_VIEWS, VIEW_NAMES, spoken

# Shown instead of a blank cell when the package was installed without its built front end.
_MISSING_BUNDLE_ESM = """
export default { render({ el }) {
  const p = document.createElement("pre");
  p.textContent = "attnscope: the JavaScript bundle is missing (src/attnscope/static/widget.js). " +
    "Build it with `npm install && npm run build`, or reinstall attnscope.";
  p.style.color = "#b00020";
  el.appendChild(p);
} };
"""


def _static(name: str, fallback: str) -> str:
    """The bundle's text. Never a Path: anywidget turns a path into a watched FileContents whose
    change signal keeps a reference to every widget ever made, so closed widgets were never freed.
    The trailing newline keeps anywidget from reading a one-line bundle as a file name."""
    path = STATIC / name
    return path.read_text(encoding="utf-8").rstrip("\n") + "\n" if path.is_file() else fallback


class Strings(List):
    """A list of strings (a run's tokens, their notes and readings), checked in one pass: traitlets'
    List(Unicode()) validates each element through the trait machinery, 48 ms a generation step at
    8,192 tokens for the three token lists (the step's largest cost in the kernel). Anything but a
    list of str takes List(Unicode())'s own checks and errors."""

    def __init__(self, **kwargs):
        super().__init__(Unicode(), **kwargs)

    def validate_elements(self, obj, value):
        if type(value) is list and all(type(item) is str for item in value):
            return list(value)  # a copy, as List's own: the caller's list stays theirs
        return super().validate_elements(obj, value)


class WidgetTraits(anywidget.AnyWidget):
    """Every synced trait of AttentionWidget, and its bundle."""

    _esm = _static("widget.js", _MISSING_BUNDLE_ESM)
    _css = _static("widget.css", "")

    # What is shown
    view = synced(Enum(VIEW_NAMES, default_value="head"), f"The open view: {spoken(SHORT_VIEWS)}; for long inputs "
                  f"{spoken(LONG_VIEWS)} (head: a window around focus_token).", writer="both", page="view")
    picture_id = synced(Unicode(""), "Names this widget's picture output (picture.py), which the live view hides.")
    text = synced(Unicode(""), "Sentence A as run (an edit arrives as `request`; setting it from Python reruns).")
    text_b = synced(Unicode(None, allow_none=True), "Sentence B (or an encoder-decoder model's decoder text), or None.")
    request = synced(Dict(), "An edit from the browser, {id, text, text_b}, with open: {layer, head, query} when it opens "
                     "a head finder's example; the kernel reruns and answers with result_id = id, so the view ignores "
                     "answers older than what is typed.",
                     writer="view", page="edit", label="the sentence")
    result_id = synced(Int(0), "The id of the edit the current run answers (0 for the first run).")
    error = synced(Unicode(""), "A visible message when an edit or setting failed; the previous view stays.")
    notice = synced(Unicode(""), "Visible notes on the run, a line each: truncation, heads with NaN attention.")
    generating = synced(Bool(False), "attnscope.generate: the kernel is writing new tokens into this run (the page "
                        "shows Stop, which sends a \"stop\" event); False once it ended, stopped or not.")
    output_start = synced(Int(-1), "attnscope.generate: the first token the model wrote (those before it are the prompt "
                          "as the model read it); each output token is a step the text view names. -1: not a generation.")
    grown = synced(Dict(), "attnscope.generate, while it writes: what the step changed of the lists it grows (GROWING: "
                   "tokens, token_reading, token_notes, text), {name: [start, tail, before]}: the list the page holds at "
                   "length `before` is, from `start` on, `tail` (text: lengths in UTF-16 code units, as the page's "
                   "strings are). Those traits are not sent again until the run ends, so a step's message stays small at "
                   "8k tokens; a page holding another length asks for them (\"growing_lists\"). {} otherwise.")
    editable = synced(Bool(True), "False for precomputed attention: no model to rerun, no sentence editor.")

    # The run
    tokens = synced(Strings(), "The query tokens (words when word_level), as shown.")
    key_tokens = synced(Strings(), "Cross-attention: the keys' (encoder's) tokens; otherwise empty.")
    token_notes = synced(Strings(), "Per query token, \"\" or what its label leaves out (the bytes of a character "
                                          "split over tokens), shown on hover.")
    key_token_notes = synced(Strings(), "Cross-attention: the same per key token; otherwise empty.")
    token_reading = synced(Strings(), "A long run: per token, what it adds to the text read as running text "
                                            "(its spaces, no ##), the text view's flow; otherwise empty.")
    sentence_b_start = synced(Int(None, allow_none=True), "Index of sentence B's first token, or None.")
    n_layers = synced(Int(0), "Layers of the shown attention.")
    n_heads = synced(Int(0), "Heads per layer of the shown attention.")
    model_name = synced(Unicode(""), "The model's name, as titles show it.")
    causal = synced(Bool(False), "The shown attention is causal: later tokens are masked.")
    causal_from = synced(Int(0), "The first token whose row is causal (an encoder-decoder's generation: the decoder's "
                                 "start token; the source's rows before it are the encoder's, which read the whole "
                                 "source); 0: every row.")
    neuron_unavailable = synced(Unicode(""), "Why the neuron view cannot show this run (it needs the queries and keys), "
                                "shown in its tab; \"\" when it can.")
    parts = synced(Strings(), 'Encoder-decoder models: ["encoder", "decoder", "cross"]; otherwise empty.')
    attention_part = synced(Enum(("encoder", "decoder", "cross"), default_value="encoder"),
                            "The part of an encoder-decoder model the views show.",
                            writer="both", page="fixed", label="the attention part")

    # The head view
    layer = synced(Int(0), "The selected layer, 0-based; `attention` carries it.", writer="both", page="layer")
    attention = synced(Dict(), "The selected layer: {layer, data: uint8 bytes, dtype, shape: [heads, Tq, Tk], scale[, encoding]}; "
                       "encoding \"nonzero\": data is a bitmap of the nonzero bytes (bit i % 8 of byte i // 8), then those bytes.")
    heads = synced(List(Int()), "The visible heads, 0-based.", writer="both", page="view")
    sentence_filter = synced(Enum(("all", "aa", "bb", "ab", "ba"), default_value="all"),
                             "Which sentence's tokens attend to which: all, aa, bb, ab or ba.", writer="both", page="view")
    theme = synced(Enum(("auto", "light", "dark"), default_value="auto"),
                   "auto follows JupyterLab's theme.", writer="both", page="view")
    word_level = synced(Bool(False), "Wordpieces merged into words (Clark et al. 4.1): summed as keys, averaged as queries.",
                        writer="both", page="fixed", label="the Words setting")

    # The model view
    thumbnails = synced(Dict(), "Max-pooled S × S maps of the included layers × heads, made while a view needs them: "
                        "{layers, heads, n_tokens, n_key_tokens, data: uint8 bytes, dtype, shape: [L, H, S, S], scale[, encoding] (as attention's)"
                        "[, one_scale]}; a long run's weighed by value norm are on one scale for the layers and heads shown, "
                        "one_scale {of, measure, over, largest, layer, head} (as the trait one_scale's), the maps value ÷ largest; "
                        "empty for a long run's too large to make at once (the view asks for them in passes).")
    include_layers = synced(List(Int(), default_value=None, allow_none=True), "The model view's layers, or None for all.")
    include_heads = synced(List(Int(), default_value=None, allow_none=True), "The model view's heads, or None for all.")
    masked_heads = synced(List(List(Int()), default_value=[]),
                          "[[layer, head], ...] switched off (Michel et al.'s ξ_h = 0); the kernel reruns.",
                          writer="both", page="fixed", label="masked heads")
    show_change = synced(Bool(False), "With masked heads, the head and model views draw |A_masked − A|.",
                         writer="both", page="fixed", label="Show change")
    mask_summary = synced(Unicode(""), "One line on what masking changed.")
    compared_model = synced(Unicode(""), "The second model's name when the widget compares two (compare=), else \"\".")
    compare_shown = synced(Enum(("first", "second", "difference"), default_value="first"),
                           "With a second model (compare=): what the views draw, the first model's attention, the "
                           "second's, or |A_second − A_first| on one scale for every layer and head (one_scale).",
                           writer="both", page="fixed", label="the Compare setting")
    weigh_by = synced(Enum(("attention", "value_norm"), default_value="attention"),
                      "What the head, model, text and map views draw each weight as: the attention α, or "
                      "Kobayashi et al. 2020's ‖αf(x)‖ = α·‖f(x)‖, the share of what the key's value vector passes "
                      "through the head (engine/weighing.py), on one scale for the run (one_scale).",
                      writer="both", page="fixed", label="Weigh by")
    knockout_control = synced(Dict(), "The head view's knockout control (widget/knockout_answers.py): {position, output} "
                              "where the kernel can score the run (the token whose prediction a \"knockout\" request "
                              "reads: a causal LM's next token after it, or a masked LM's [MASK]); on a generation "
                              "{output: \"chosen token\"}: the selected output token, as the model chose it; else "
                              "{unavailable: why}.")
    weigh_unavailable = synced(Unicode(""), "Why this run cannot be weighed by value norm (precomputed attention, "
                               "a model whose attention cannot be hooked), shown on the control; \"\" when it can.")
    one_scale = synced(Dict(), "While the views draw something other than attention itself, on one scale for every "
                       "layer and head (a difference: |second − first|, Show change's |A_masked − A|; or weights "
                       "weighed by value norm): {of, measure, largest, layer, head}, the largest value in the run "
                       "and where; the attention and thumbnails hold value ÷ largest. {} while they draw attention "
                       "or a long run (whose views scale what they show; its weighed thumbnails carry their own).")

    # The neuron, rollout and analysis views
    neuron_head = synced(Int(0), "The neuron view's head; its numbers come by a \"neuron\" request (messages.py).",
                         writer="both", page="view")
    neuron_query = synced(Int(0), "The neuron view's query token.", writer="both", page="view")
    rollout = synced(Dict(), "The Rollout tab's matrices through every layer, made while it is open, in rollout_mode: "
                     "{mode, n_tokens, special, data: uint8 bytes, dtype, shape: [L, T, T], scale[, encoding] (as attention's)}, "
                     "or {error}.")
    rollout_choice = synced(Dict(), "The Rollout tab as the reader chose it, as saved and pictured: {layer: the layer "
                            "rolled out through (the last by default), leave_out_special: true or false (true by "
                            "default: [CLS] / [SEP] or <s> / </s> left out), rows_to_1: true or false (each row "
                            "rescaled to sum to 1; false by default)}, each optional.", writer="both", page="view")
    rollout_mode = synced(Enum(("rollout", "contributions", "norm_contributions"), default_value="rollout"),
                          "What the Rollout tab rolls out through the layers: Abnar & Zuidema's attention rollout (the "
                          "mean attention, the residual a fixed half), ALTI contributions (Ferrando et al. 2022: each "
                          "token's share of a layer's output through attention, residual and LayerNorm), or norm "
                          "contributions (Kobayashi et al. 2021: the same share measured by length); for either the "
                          "kernel reruns the model with hooks (analyses/contributions.py).",
                          writer="both", page="fixed", label="the Rollout tab's mode")
    analysis = synced(Dict(), "A per-head table from show_analysis() as plain lists (payloads.analysis_payload).")
    analysis_choice = synced(Dict(), "The reader's choice in the Analysis tab, as saved and pictured, checked by the "
                             "shown analysis's layout: a heatmap's {measure: one of its measures' keys}; the MDS "
                             "scatter's {color: \"behaviour\" or \"layer\"}; the head "
                             "finder's plot {x, y, color: metrics of the shown finder, filter: a condition as text (at "
                             "most 2,000 characters), head: a head's label, \"2-5\", or null}. A part left out, or {}, "
                             "is the default: a heatmap's measure as show_analysis() gave it; the scatter by behaviour; the finder's entropy "
                             "across, sink_rate up, prev_token as colour, every head, none chosen.",
                             writer="both", page="view")

    # Long inputs: attention on request ("attention_rows" and "attention_tile" messages)
    long_context = synced(Bool(False), "The run kept q, k and row log-sum-exps (a long input): the text and map views "
                          "ask for exact rows and tiles; head, neuron and rollout are off.")
    n_key_heads = synced(Int(0), "Key heads per layer: query head h reads key head h // (n_heads / n_key_heads) "
                         "(grouped-query attention); n_heads otherwise.")
    focus_token = synced(Int(0), "The selected token: the text view's on a long run, which opens on its last token when "
                         "causal (token 0 attends only to itself) until a token is chosen; on a short run the one the "
                         "head view marks (a head finder's example opens on its query), -1 for none, as a new run has.",
                         writer="both", page="view")
    focus_head = synced(Int(-1), "The text and map views' head; -1 for the mean of the layer's heads.",
                        writer="both", page="view")
    direction = synced(Enum(("from", "to"), default_value="from"),
                       "The text view shades the attention from the selected token (its row) or to it (its column).",
                       writer="both", page="view")
    sink_aside = synced(Int(0), "The first n tokens set aside from the colour scales (attention sinks), 0 for none.",
                        writer="both", page="view")
    map_reduce = synced(Enum(("max", "mean"), default_value="max"), "How the map pools blocks of token pairs.",
                        writer="both", page="view")
