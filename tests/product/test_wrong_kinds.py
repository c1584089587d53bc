"""Wrong kinds of objects: a contract, not a list (issue 46 §3).

Every public entry point is called with every parameter given, one at a time, each wrong kind of
object in CATALOGUE, the other arguments valid. The entry points are read, not listed (see
wrong_kinds_catalogue.py, which also holds the catalogue and how to extend it): `attnscope.__all__`,
the BertViz-compatible functions, the functions and methods the documentation calls, the widgets'
settings from Python, and the command line. A new entry point joins by being exported or
documented; a parameter whose name is new needs a valid value in VALID (the test says so).

Each call must end in a result, or in an error of attnscope's (errors.py) whose message names
the parameter and says what it got (its kind, its value, or what is wrong with it: said_of in the
catalogue), but where any value is refused (REFUSED_WHATEVER_GIVEN: two arguments that exclude each
other). It never ends in a raw AttributeError, IndexError, KeyError or TypeError, a third-party
error, an attnscope error that does not say which argument was wrong or what it was, or a change
to what it was given (the wrong value, the valid arguments, the model's mode, hooks and config).
WRONG_KINDS_LOG=file keeps every leak, WRONG_KINDS_MESSAGES=file every refusal's message.

Every pair (parameter, wrong kind) is over 10,000 calls: more than `make test` has time for. So
`make test` tries a fixed quarter of the catalogue on each parameter, a different quarter for each
(SAMPLE_STRIDE: every wrong kind is tried on about a quarter of the parameters, each parameter
with about a quarter of the kinds); ATTNSCOPE_WRONG_KINDS=all (`make test-kinds`) tries every pair.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import os
import signal
import time
import traceback
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from small_models import model_state
from wrong_kinds_catalogue import (
    BASES,
    CATALOGUE,
    CHEAP,
    CLI_CATALOGUE,
    CLI_WRONG_ARGV,
    INSTANCES,
    SKIPPED,
    TEXT,
    VALID,
    VALID_BUT_SLOW,
    VALID_FOR,
    Kit,
    entry_points,
    instance_for,
    keyword_settings,
    says_what_it_got,
    says_what_it_wants,
    settable_traits,
    short,
    widget_classes,
    with_bases,
)

import attnscope
from attnscope.edges import cli
from attnscope.errors import AttnscopeError

# Thousands of calls, hundreds of which run the model or build a widget: minutes on a CPU.
pytestmark = pytest.mark.slow

# Known leaks, (entry point, parameter, wrong kind) → why it is left. Strict: a leak fixed must leave the list.
XFAIL: dict[tuple[str, str, str], str] = {}
# Refusals that owe no word on the value given, as any value is refused there (each phrase is the
# message's own): a generation's text is the model's, set by no one; two arguments that exclude each
# other, or one that needs another; a corpus setting given with a run made already; an
# encoder-decoder's source given with a decoder's output; Words on a text kept on demand.
REFUSED_WHATEVER_GIVEN = ("not set by hand", "not both", "needs decoder_tokens", "needs the texts", "reads a run made already",
                          "for a corpus pass the model", "is an encoder-decoder's source", "switch Words off")


@pytest.fixture(scope="module")
def kit(default_model, tmp_path_factory):
    made = Kit(default_model, tmp_path_factory.mktemp("wrong-kinds"))
    # A path that is a wrong kind's text ("nonsense", "-1": valid file names) is written in the
    # test's folder, never the checkout (render_html(path="nonsense") writes nonsense.html).
    checkout = os.getcwd()
    os.chdir(made.tmp)
    try:
        yield made
    finally:
        os.chdir(checkout)
        if "widget" in made._made:
            made._made["widget"].close()


ENTRY_POINTS = with_bases(entry_points())
CALLS = {"count": 0, "seconds": 0.0, "slowest": []}
SLOW_CALL = 2.0  # seconds: a call slower than this is listed in the summary (what makes the sweep long)


def valid_arguments(entry: str, function, kit) -> tuple[list, dict, list[str]]:
    """The positional and keyword arguments of a valid call (of its base, BASES), and the
    parameters to vary."""
    signature = inspect.signature(function)
    base = ENTRY_POINTS[entry][1]
    based = BASES.get(short(entry), {}).get(base, {})
    args, kwargs, varied = [], {}, []
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        name = parameter.name
        make = (based.get(name) or VALID_FOR.get((short(entry), name))
                or (VALID.get(name) if parameter.default is parameter.empty else None))
        if make is not None:
            value = make(kit)
        elif parameter.default is parameter.empty:
            pytest.fail(f"{entry}({name}=...) has no valid value: add one to VALID or VALID_FOR")
        elif name in CHEAP:
            value = CHEAP[name](kit) if callable(CHEAP[name]) else CHEAP[name]
        else:
            value = parameter.default
        if parameter.kind == parameter.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[name] = value
        varied.append(name)
    if any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):  # a widget's settings, as keywords
        varied += [name for name in keyword_settings(ENTRY_POINTS[entry][0]) if name not in signature.parameters]
    return args, kwargs, varied


def _same(a, b) -> bool:
    try:
        return a is b or (type(a) is type(b) and isinstance(a, (str, int, float, type(None))) and a == b)
    except Exception:
        return False


# What the user handed in, copied before a call to see that the call left it as it was: plain
# containers, arrays, tensors and frames (models are checked by model_state, below).
def snapshot(value):
    if isinstance(value, (list, tuple, dict, set, np.ndarray, torch.Tensor)):
        try:
            return copy.deepcopy(value)
        except Exception:
            return None
    if type(value).__name__ == "DataFrame":
        return value.copy(deep=True), dict(value.attrs)
    return None


def unchanged(before, value) -> bool:
    if type(value).__name__ == "DataFrame":
        frame, attrs = before
        return frame.equals(value) and list(frame.columns) == list(value.columns) and attrs.keys() == value.attrs.keys()
    if type(before) is not type(value):
        return False
    if isinstance(value, (list, tuple)):
        return len(before) == len(value) and all(unchanged(a, b) for a, b in zip(before, value))
    if isinstance(value, dict):
        return before.keys() == value.keys() and all(unchanged(before[k], value[k]) for k in value)
    if isinstance(value, np.ndarray):
        return before.shape == value.shape and before.dtype == value.dtype and np.array_equal(before, value, equal_nan=True)
    if isinstance(value, torch.Tensor):
        return before.shape == value.shape and before.dtype == value.dtype and bool(
            ((before == value) | (before.isnan() & value.isnan())).all())
    if isinstance(value, (str, bytes, int, float, complex, Path, type(None), set, frozenset)):
        return before == value or before != before and value != value  # NaN is NaN
    return True  # another object (a cache, a model): compared by its own checks, if any


def given(call_args: list, call_kwargs: dict) -> list[tuple[str, object, object]]:
    """(name, value, its snapshot) of each argument of a call that a snapshot can hold."""
    named = [(f"argument {i}", v) for i, v in enumerate(call_args)] + list(call_kwargs.items())
    return [(name, value, before) for name, value in named if (before := snapshot(value)) is not None]


# How a message may name a parameter other than by its own name (the file kind a reader reads).
SAID_AS = {"text_or_path": ("CoNLL",), "conllu_or_texts": ("corpus", "CoNLL", "sentences"), "conll": ("CoNLL",)}


def names(message: str, parameter: str, entry: str | None = None) -> bool:
    """Whether an error's message names `parameter` ("text_b", "text b", any case, or as SAID_AS
    says), or, for an entry point's first parameter (its subject: "rollout reads one run, ..."),
    the entry point."""
    said = message.lower()
    ways = (parameter, parameter.replace("_", " "), entry, *SAID_AS.get(parameter, ()))
    return any(name.lower() in said for name in ways if name)


def _finish(out) -> None:
    """A widget a call made: a generation waited for, then closed (its thread joined)."""
    if isinstance(out, attnscope.AttentionWidget):
        if isinstance(out, attnscope.GenerationWidget):
            out.wait(CALL_SECONDS)
        out.close()


_NOT_GIVEN = object()


def verdict(call, parameter: str, subject: str | None = None, arguments=(), models=(), label: str = "",
            refused: str | None = None, wrong=_NOT_GIVEN) -> str | None:
    """None when the call returned or refused naming `parameter` (or `subject`) and saying what
    it got (`wrong`: says_what_it_got), leaving its `arguments` ((name, value, snapshot)) and
    `models` as they came; else what leaked. `refused`: why this value cannot be taken (a result
    is then a leak: the wrong value taken silently)."""
    states = [(model, model_state(model)) for model in models]
    start = time.perf_counter()
    signal.signal(signal.SIGALRM, _too_slow)
    signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    try:
        _finish(call())
        why = None if refused is None else f"taken silently: {refused}"
    except AttnscopeError as error:
        message = str(error)
        why = None if names(message, parameter, subject) else f"{type(error).__name__} not naming {parameter}: {message[:200]}"
        if os.environ.get("WRONG_KINDS_MESSAGES"):  # every refusal, for whoever reads them all
            with open(os.environ["WRONG_KINDS_MESSAGES"], "a") as log:
                log.write(f"{label}\t{' '.join(message.split())}\n")
        if why is None and wrong is not _NOT_GIVEN and not says_what_it_got(message, wrong) \
                and not any(reason in message for reason in REFUSED_WHATEVER_GIVEN):
            why = f"{type(error).__name__} not saying what it got: {message[:200]}"
        if why is None and not says_what_it_wants(message):
            why = f"{type(error).__name__} not saying what it wants: {message[:200]}"
    except TooSlow:
        why = f"still running after {CALL_SECONDS} s (a wrong value taken as work to do?)"
    except Exception as error:
        frames = traceback.extract_tb(error.__traceback__)
        where = frames[-1].filename if frames else "?"
        place = "attnscope" if "/attnscope/" in where else Path(where).name
        why = f"{type(error).__name__} raised in {place}: {str(error)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        seconds = time.perf_counter() - start
        CALLS["count"] += 1
        CALLS["seconds"] += seconds
        if seconds > SLOW_CALL:
            CALLS["slowest"].append((seconds, label))
    changed = [name for name, value, before in arguments if not unchanged(before, value)]
    changed += [f"the model {type(model).__name__}" for model, state in states if model_state(model) != state]
    if changed and why is None:
        why = f"changed what it was given: {', '.join(changed)}"
    return why


TRIED: set[tuple[str, str, str]] = set()  # (entry, parameter, wrong kind) pairs tried in this run
CALL_SECONDS = 60  # a call still running then took a wrong value as work to do (n_init=10**30)


class TooSlow(BaseException):  # not an Exception: no `except Exception` inside attnscope swallows it
    pass


def _too_slow(*_args):
    raise TooSlow


EVERY_PAIR = os.environ.get("ATTNSCOPE_WRONG_KINDS") == "all"
SAMPLE_STRIDE = 4


def tried(entry: str, parameter: str, index: int) -> bool:
    """Whether wrong kind number `index` is tried on `parameter` of `entry`: all of them with
    ATTNSCOPE_WRONG_KINDS=all, else one in SAMPLE_STRIDE, from an offset that differs by parameter
    (crc32: the same on every run and machine)."""
    offset = zlib.crc32(f"{entry}.{parameter}".encode())
    return EVERY_PAIR or (offset + index) % SAMPLE_STRIDE == 0


def _check(leaks: dict[tuple[str, str, str], str], entry: str) -> None:
    if os.environ.get("WRONG_KINDS_LOG"):  # every leak found, for whoever mends them
        with open(os.environ["WRONG_KINDS_LOG"], "a") as log:
            log.writelines(f"{key}: {' '.join(why.split())}\n" for key, why in leaks.items())
    expected = {key for key in XFAIL if key[0] == entry and key in TRIED}
    unexpected = {key: why for key, why in leaks.items() if key not in XFAIL}
    mended = expected - set(leaks)
    lines = [f"{p}={w}: {why}" for (_, p, w), why in sorted(unexpected.items())]
    lines += [f"{p}={w}: fixed, take it off XFAIL" for (_, p, w) in sorted(mended)]
    assert not lines, f"{entry}: {len(lines)} wrong kinds leaked\n" + "\n".join(lines)


def must_refuse(parameter: inspect.Parameter | None, wrong) -> str | None:
    """Why `wrong` cannot be a value of `parameter`, from its signature, or None when it may be:
    - a default of True or False makes it a yes-or-no setting (checks.flag): anything but a bool
      (or 0 or 1) is a mistake, as progress="no" or importance=[...] is true, not a choice;
    - a default that is a number (epsilon=0.3, bins=256) makes it a number: anything but a finite
      one (or None) is a mistake."""
    default = None if parameter is None else parameter.default
    if isinstance(default, bool):
        if not (isinstance(wrong, bool) or type(wrong) is int and wrong in (0, 1)):
            return f"{parameter.name} is a yes-or-no setting (default {default}), and this is no bool"
    elif isinstance(default, (int, float)):
        finite = isinstance(wrong, numbers.Real) and not isinstance(wrong, bool) and math.isfinite(wrong)
        if not (finite or wrong is None):
            return f"{parameter.name} is a number (default {default}), and this is no finite number"
    return None


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_parameter_refuses_the_wrong_kinds_by_name(entry, kit):
    instance = instance_for(entry, kit)
    function = ENTRY_POINTS[entry][0] if instance is None else getattr(instance, short(entry))
    leaks = {}
    args, kwargs, varied = valid_arguments(entry, function, kit)
    parameters = inspect.signature(function).parameters
    for parameter in varied:
        for index, (wrong_name, make) in enumerate(CATALOGUE):
            if not tried(entry, parameter, index):
                continue
            wrong = make(kit)
            if _same(wrong, kwargs.get(parameter)) or (short(entry), parameter, wrong_name) in VALID_BUT_SLOW:
                continue
            TRIED.add((entry, parameter, wrong_name))
            call_kwargs = {**kwargs, parameter: wrong}
            subject = short(entry) if parameter == varied[0] else None
            why = verdict(lambda call_kwargs=call_kwargs: function(*args, **call_kwargs), parameter, subject,
                          given(args, call_kwargs), kit.models(), f"{entry}({parameter}={wrong_name})",
                          must_refuse(parameters.get(parameter), wrong), wrong)
            if why is not None:
                leaks[(entry, parameter, wrong_name)] = why
    _finish(instance)
    _check(leaks, entry)


SETTINGS = [(cls.__name__, trait) for cls in widget_classes() for trait in settable_traits(cls)]


@pytest.mark.parametrize(("widget_class", "trait"), SETTINGS)
def test_every_setting_refuses_the_wrong_kinds_by_name(widget_class, trait, kit):
    widget = INSTANCES[widget_class](kit)
    leaks, entry = {}, f"{widget_class}.{trait}"
    for index, (wrong_name, make) in enumerate(CATALOGUE):
        if not tried(widget_class, trait, index):
            continue
        wrong = make(kit)
        TRIED.add((entry, trait, wrong_name))

        def assign(wrong=wrong):
            setattr(widget, trait, wrong)

        why = verdict(assign, trait, None, given([wrong], {}), kit.models(), f"{entry} = {wrong_name}", wrong=wrong)
        if why is not None:
            leaks[(entry, trait, wrong_name)] = why
    _finish(widget)
    _check(leaks, entry)


# The command line: each option (and the text) given each of these, the rest valid (CLI_CATALOGUE).


def _cli_options():
    parser = cli.build_parser()
    render = next(a for a in parser._actions if a.dest == "command").choices["render"]
    return [a.option_strings[-1] if a.option_strings else a.dest for a in render._actions if a.dest != "help"]


def _run_cli(argv, capsys) -> str | None:
    """None when the command line wrote its page or said one line of error; else what leaked."""
    start = time.perf_counter()
    try:
        code = cli.main(argv)
    except SystemExit as exit:
        code = exit.code
    except Exception as error:
        return f"{type(error).__name__} escaped: {str(error)[:200]}"
    finally:
        CALLS["count"] += 1
        CALLS["seconds"] += time.perf_counter() - start
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("attnscope: error:")]
    if "Traceback" in err:
        return "a traceback: " + err[-300:]
    if code not in (0, None):
        if len(errors) != 1:
            return f"exit {code} without one error line: {err[-300:]!r}"
        if any(f"error: {kind}" in errors[0] for kind in ("AttributeError", "IndexError", "KeyError", "TypeError", "Exception:")) \
                or "Error: " in errors[0].removeprefix("attnscope: error: "):
            return "an error that is not attnscope's: " + errors[0]
        if not says_what_it_wants(errors[0]):
            return "an error not saying what it wants: " + errors[0]
    return None


def test_the_command_line_refuses_the_wrong_kinds_in_one_line(kit, capsys, monkeypatch):
    monkeypatch.chdir(kit.tmp)  # an --output of "nan" or "-1" is a valid file name (as in `kit`)
    out = str(kit.tmp / "page.html")
    base = {"text": TEXT, "--output": out}
    leaks = {}
    for option in _cli_options():
        for wrong_name, make in CLI_CATALOGUE:
            options = {**base, option: make(kit)}
            argv = ["render", options.pop("text")]
            for flag, value in options.items():
                argv += [flag, value]
            why = _run_cli(argv, capsys)
            if why is not None:
                leaks[("cli", option, wrong_name)] = why
    for wrong_name, argv in CLI_WRONG_ARGV:
        why = _run_cli([a.replace("{out}", out) for a in argv], capsys)
        if why is not None:
            leaks[("cli", "argv", wrong_name)] = why
    _check(leaks, "cli")


def test_the_calls_generated(record_property, request):
    """Last in the file: how many calls the tests above made (issue 46 §3 asks for the number);
    shown with -rA or -s, and as the test's `calls` property (--junitxml)."""
    record_property("calls", CALLS["count"])
    line = (f"wrong kinds: {CALLS['count']:,} calls generated in {CALLS['seconds']:.0f} s over {len(ENTRY_POINTS)} "
            f"entry points, {len(SETTINGS)} widget settings and the command line; {len(XFAIL)} known leaks "
            f"(XFAIL), {len(SKIPPED)} entry points skipped with their reasons")
    print(line)
    for seconds, call in sorted(CALLS["slowest"], reverse=True)[:15]:
        print(f"  {seconds:5.1f} s  {call}")
    generators = [item for item in request.session.items if item.module is request.module and item.name != request.node.name]
    if len(generators) == len(ENTRY_POINTS) + len(SETTINGS) + 1:  # the whole file ran, not a -k selection
        assert CALLS["count"] >= (5000 if EVERY_PAIR else 5000 // SAMPLE_STRIDE), line
