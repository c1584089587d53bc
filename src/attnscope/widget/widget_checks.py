"""Every write to the widget's traits, checked against the kernel's own state before it is taken
(traitlets validators): from Python (`widget.layer = 99`) or from the page, which is untrusted
(page_input.take_page_write). A refused value raises SettingError, naming the setting and the range
it takes; nothing is changed.

The checks read what the widget keeps (attention_widget.py): `_engine` and its runs, `_drawn_run` (what
the views draw), `_per_token_run` and `_computed_run`; before the first run there is nothing to
check a count against, and the constructor checks its arguments itself.
"""

from __future__ import annotations

from typing import Any

import traitlets

from .. import checks
from ..analyses.tables import check_choice
from ..checks import head_pair
from ..engine.results import LongAttentionResult
from ..errors import InputError
from .contract import contract_traits
from .views import LONG_VIEWS, SHORT_VIEWS
from .widget_state import NEEDS_A_MODEL, layer_in_range, long_only, short_only
from .widget_traits import WidgetTraits

ROLLOUT_PARTS = ("layer", "leave_out_special", "rows_to_1")  # the Rollout tab's choice (rollout_choice)


class SettingError(InputError, traitlets.TraitError):
    """A widget setting given a value it cannot take (`widget.layer = 99`): an InputError, shown from
    the user's line like every other, that traitlets handles as its own TraitError."""


class CheckedTraits(WidgetTraits):
    """The widget's traits (WidgetTraits) with their checks."""

    @traitlets.validate("masked_heads")
    def _check_masks(self, proposal: dict) -> list:
        return _as_trait_error(self._masks_of, proposal["value"])

    def _masks_of(self, value: list) -> list[list[int]]:
        full = self.__dict__.get("_computed_run")
        if full is not None and len(value) > full.n_layers * full.n_heads:  # sizes first: a page may send millions
            raise InputError(f"masked_heads lists {len(value):,} heads, and the model has {full.n_layers * full.n_heads}.")
        pairs = [list(head_pair(pair)) for pair in value]
        if self._engine is None:
            if pairs:
                raise InputError(NEEDS_A_MODEL.format(what="Masking heads"))
            return []
        result = self.__dict__.get("_drawn_run")
        if isinstance(result, LongAttentionResult) and pairs:
            raise InputError(f"Masking heads needs the full attention, and this text of {result.n_tokens:,} tokens keeps "
                             "it on demand: give a shorter text to mask heads.")
        if self._engine.is_encoder_decoder and pairs:
            raise InputError("Masking heads of encoder-decoder models is not supported yet.")
        self._engine.head_mask(pairs)  # raises InputError naming the bad pair
        return [list(p) for p in sorted({tuple(p) for p in pairs})]

    @traitlets.validate("include_layers", "include_heads")
    def _check_included(self, proposal: dict) -> list[int] | None:
        name = proposal["trait"].name
        if not hasattr(self, "_drawn_run"):
            return proposal["value"]
        count = self._drawn_run.n_layers if name == "include_layers" else self._drawn_run.n_heads
        return _as_trait_error(checks.indices, name, proposal["value"], count, name.split("_")[1])

    @traitlets.validate("heads")
    def _check_heads(self, proposal: dict) -> list[int]:
        heads = proposal["value"]
        n_heads = self._shown_count("n_heads")
        if n_heads and heads:  # an empty list hides every head (the swatches bring them back)
            if len(heads) > n_heads:  # sizes first: a page may send millions
                raise SettingError(f"heads lists {len(heads):,} heads, and the model has {n_heads}.")
            _as_trait_error(checks.indices, "heads", heads, n_heads, "heads")
        return heads

    def _shown_count(self, name: str) -> int:
        """n_layers or n_heads of the shown run, the kernel's own (0 before the first run)."""
        result = self.__dict__.get("_drawn_run")
        return getattr(result, name) if result is not None else 0

    @traitlets.validate("neuron_head", "neuron_query")
    def _check_neuron(self, proposal: dict) -> int:
        name, value = proposal["trait"].name, _whole(proposal)
        if hasattr(self, "_per_token_run"):
            count = self._per_token_run.n_heads if name == "neuron_head" else len(self._per_token_run.tokens)
            if not 0 <= value < count:
                what = "heads" if name == "neuron_head" else "query tokens"
                raise SettingError(f"{name}={value} is out of range: the {what} are numbered 0..{count - 1}.")
        return value

    @traitlets.validate("view")
    def _check_view(self, proposal: dict) -> str:
        view = proposal["value"]
        result = self.__dict__.get("_drawn_run")
        if isinstance(result, LongAttentionResult) and view not in LONG_VIEWS:
            raise SettingError(short_only(view, result))
        if result is not None and not isinstance(result, LongAttentionResult) and view not in SHORT_VIEWS:
            raise SettingError(long_only(view))
        return view

    @traitlets.validate("focus_token")
    def _check_focus_token(self, proposal: dict) -> int:
        lowest = 0 if self.long_context else -1  # a short run may mark none
        if self.tokens and not lowest <= _whole(proposal) < len(self.tokens):
            none = "" if self.long_context else ", or -1 for none"
            raise SettingError(f"focus_token={proposal['value']} is out of range: the tokens are numbered "
                               f"0..{len(self.tokens) - 1}{none}.")
        return proposal["value"]

    @traitlets.validate("focus_head")
    def _check_focus_head(self, proposal: dict) -> int:
        n_heads = self._shown_count("n_heads")
        if n_heads and not -1 <= _whole(proposal) < n_heads:
            raise SettingError(f"focus_head={proposal['value']} is out of range: the heads are numbered "
                               f"0..{n_heads - 1}, or -1 for their mean.")
        return proposal["value"]

    @traitlets.validate("sink_aside")
    def _check_sink_aside(self, proposal: dict) -> int:
        return _as_trait_error(checks.integer, "sink_aside", proposal["value"], 0, max(0, len(self.tokens) - 1))

    @traitlets.validate("layer")
    def _check_layer(self, proposal: dict) -> int:
        layer, n_layers = _whole(proposal), self._shown_count("n_layers")
        return _as_trait_error(layer_in_range, layer, n_layers) if n_layers else layer

    @traitlets.validate("rollout_choice")
    def _check_rollout_choice(self, proposal: dict) -> dict:
        """{layer, leave_out_special, rows_to_1}, each optional: a layer of the shown run, two flags."""
        choice = proposal["value"]
        unknown = [key for key in choice if key not in ROLLOUT_PARTS]
        if unknown:
            raise SettingError(f"rollout_choice holds {', '.join(ROLLOUT_PARTS)}, not {checks.short_repr(unknown)}.")
        taken = {part: _as_trait_error(checks.flag, f"rollout_choice's {part}", choice[part])
                 for part in ROLLOUT_PARTS[1:] if part in choice}
        if "layer" in choice:  # of the shown run (none before the first run: nothing to count against)
            n_layers = self._shown_count("n_layers")
            taken["layer"] = _as_trait_error(checks.integer, "rollout_choice's layer", choice["layer"], 0,
                                             n_layers - 1 if n_layers else None)
        return taken

    @traitlets.validate("analysis_choice")
    def _check_analysis_choice(self, proposal: dict) -> dict:
        return _as_trait_error(check_choice, proposal["value"], self.analysis)

    @traitlets.validate("request")
    def _check_request(self, proposal: dict) -> dict:
        """An edit is {id, text, text_b}, and {open: {layer, head, query}} when it opens a head
        finder's example (checked against the run it makes, in _on_request): ids count up from the
        page's last answered one, below 2**53 (a number JavaScript holds exactly); anything else is
        refused before any work."""
        request = proposal["value"]
        if not request:
            return request
        unknown = sorted(set(request) - {"id", "text", "text_b", "open"})
        request_id = request.get("id")
        if unknown:
            raise SettingError(f"request (an edit) holds id, text, text_b and open, not {', '.join(map(repr, unknown))}.")
        if isinstance(request_id, bool) or not isinstance(request_id, int) or not 0 < request_id < 2**53:
            raise SettingError(f"request's id (an edit's) must be a whole number from 1 to 2**53 - 1, not {request_id!r}.")
        if not isinstance(request.get("text"), str) or not isinstance(request.get("text_b"), (str, type(None))):
            raise SettingError("request's text (an edit's) must be a string, and its text_b a string or null.")
        opening = request.get("open")
        if opening is not None and (not isinstance(opening, dict) or set(opening) != {"layer", "head", "query"} or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 for v in opening.values())):
            raise SettingError("request's open (an edit's) is {layer, head, query}, each a whole number from 0 (an example to open), "
                               f"not {checks.short_repr(opening)}.")
        return request


def _whole(proposal: dict) -> int:
    """A validator's value as a whole number: traitlets' Int takes True for 1, and a page's
    `true` would index a tensor with a boolean."""
    return _as_trait_error(checks.integer, proposal["trait"].name, proposal["value"])


def _as_trait_error(check: Any, *args: Any) -> Any:
    """A check from `checks` inside a trait validator: its message as a TraitError."""
    try:
        return check(*args)
    except InputError as exc:
        raise SettingError(str(exc)) from None


def constructor_settings(widget_class: type, settings: dict[str, Any]) -> None:
    """The keyword settings a widget is made with (AttentionWidget(text, weigh_by=...)), checked before
    the model runs: a name that is no setting (a typo would be taken silently: `weight_by=`) and a
    value a setting cannot take are refused naming the setting, what it got and what it takes."""
    import difflib

    known = widget_class.class_traits()
    ours = set(contract_traits(widget_class))
    for name, value in settings.items():
        if name not in known or name.startswith("_"):
            close = difflib.get_close_matches(name, sorted(ours), n=1)
            hint = f"; did you mean {close[0]}=?" if close else f"; the settings are: {', '.join(sorted(ours))}"
            raise InputError(f"{widget_class.__name__} has no setting {name}={checks.short_repr(value)}{hint}")
        trait = known[name]
        if isinstance(trait, traitlets.Enum) and not checks.one_of(value, trait.values):
            raise InputError(f"{name} must be one of {list(trait.values)}, not {checks.short_repr(value)}.")


def _refused_as_a_setting(trait: traitlets.TraitType) -> None:
    """traitlets' own refusal of a value of the wrong kind (`widget.view = None`, `widget.theme =
    np.array(...)`) said as every other setting's: a SettingError naming the setting, what it got
    and what it takes, not traitlets' message with the value's whole repr. An Enum's value that is
    no string is refused before traitlets compares it (a NumPy array's `==` is an array)."""

    def error(obj: Any, value: Any, error: Any = None, info: Any = None) -> None:
        raise SettingError(f"{trait.name} must be {info or trait.info()}, not {checks.short_repr(value)}.")

    trait.error = error
    if isinstance(trait, traitlets.Enum):
        validate = trait.validate

        def checked(obj: Any, value: Any) -> Any:
            if not (value is None or isinstance(value, str)):
                error(obj, value)
            return validate(obj, value)

        trait.validate = checked


for _trait in contract_traits(CheckedTraits).values():
    _refused_as_a_setting(_trait)
