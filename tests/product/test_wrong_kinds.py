"""Wrong kinds of objects: a contract, not a list (issue 46 §3).

Every public entry point is called with every parameter given, one at a time, each wrong kind of
object in CATALOGUE, the other arguments valid. The entry points are read, not listed: every
callable in `attnscope.__all__` (functions and classes' constructors), the BertViz-compatible
functions, AttentionWidget's Python-settable synced traits (the contract's writer "view" or
"both"), and the command line. A new entry point joins by being exported; a parameter whose
name is new needs a valid value in VALID (the test says so).

Each call must end in a result, or in an error of attnscope's (errors.py) whose message names
the parameter. It never ends in a raw AttributeError, IndexError, KeyError or TypeError, a
third-party error, or an attnscope error that does not say which argument was wrong.

To extend: add a (name, factory) pair to CATALOGUE (factories take the Kit and return the wrong
value); a string for the command line to CLI_CATALOGUE.

Every pair (parameter, wrong kind) is about 7,800 calls, over 15 minutes on a 2-core CPU: more
than `make test` has for all of its tests. So `make test` tries a fixed quarter of the catalogue on
each parameter, a different quarter for each (SAMPLE_STRIDE: every wrong kind is tried on about a
quarter of the parameters, each parameter with about a quarter of the kinds); ATTNSCOPE_WRONG_KINDS=all
(`make test-kinds`) tries every pair.
"""

from __future__ import annotations

import inspect
import math
import os
import signal
import time
import traceback
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import attnscope
from attnscope.edges import bertviz_compat, cli
from attnscope.errors import AttnscopeError
from attnscope.widget.contract import contract_traits

# Thousands of calls, hundreds of which run the model or build a widget: minutes on a CPU.
pytestmark = pytest.mark.slow

TEXT = "The cat sat."
CORPUS = ["The cat sat.", "A dog ran."]
TOKENS = ["[CLS]", "cat", "[SEP]"]
ATTENTION = tuple(torch.full((1, 2, 3, 3), 1 / 3) for _ in range(2))  # 2 layers, 2 heads, 3 tokens
CONLLU = "1\tThe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\t_\tNOUN\t_\t_\t3\tnsubj\t_\t_\n3\tsat\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n"
CONLL = ("#begin document (doc); part 000\n"
         + "".join(f"doc\t0\t{i}\t{w}\t-\t*\t-\t-\t-\t-\t*\t{c}\n" for i, (w, c) in
                   enumerate([("Anna", "(1)"), ("met", "-"), ("her", "(1)"), ("brother", "-"), (".", "-")]))
         + "\n#end document\n")
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)


def _returns(value):
    def callback(*_args, **_kwargs):
        return value

    callback.__name__ = f"returns_{type(value).__name__}"
    return callback


def _missing_folder(kit):
    return kit.tmp / "no" / "such" / "folder"


# The wrong kinds, (name, factory(kit)). Each is fed to every parameter of every entry point.
CATALOGUE = [
    ("None", lambda kit: None),
    ("True", lambda kit: True),
    ("an int", lambda kit: 7),
    ("a negative int", lambda kit: -3),
    ("a huge int", lambda kit: 10**30),
    ("a float", lambda kit: 2.5),
    ("NaN", lambda kit: math.nan),
    ("inf", lambda kit: math.inf),
    ("-inf", lambda kit: -math.inf),
    ("a str", lambda kit: "nonsense"),
    ("an empty str", lambda kit: ""),
    ("bytes", lambda kit: b"The cat sat."),
    ("an empty list", lambda kit: []),
    ("a list of None", lambda kit: [None]),
    ("a list of str", lambda kit: ["a", "b"]),
    ("a dict", lambda kit: {"a": 1}),
    ("a set", lambda kit: {1, 2}),
    ("a numpy array", lambda kit: np.ones((1, 2, 3, 3)) / 3),
    ("numpy arrays in a tuple", lambda kit: tuple(np.ones((1, 2, 3, 3)) / 3 for _ in range(2))),
    ("a tensor", lambda kit: torch.zeros(2, 3)),
    ("attention that is negative", lambda kit: tuple(torch.full((1, 2, 3, 3), -0.5) for _ in range(2))),
    ("attention whose rows sum past 1", lambda kit: tuple(torch.full((1, 2, 3, 3), 2.0) for _ in range(2))),
    ("attention that is NaN", lambda kit: tuple(torch.full((1, 2, 3, 3), math.nan) for _ in range(2))),
    ("another model's result", lambda kit: kit.other_result),
    ("a widget", lambda kit: kit.widget),
    ("a model", lambda kit: kit.model),
    ("a callable returning None", lambda kit: _returns(None)),
    ("a callable returning a float", lambda kit: _returns(1.5)),
    ("a callable returning a str", lambda kit: _returns("loss")),
    ("a path to a directory", lambda kit: kit.tmp),
    ("a path to a missing folder", _missing_folder),
    ("a folder without a model", lambda kit: kit.empty_folder),
]

# Valid values by parameter name, for the parameters that have no default (the others keep theirs).
VALID = {
    "model": lambda kit: kit.model,
    "tuned": lambda kit: kit.model,
    "text": lambda kit: TEXT,
    "prompt": lambda kit: "The cat",
    "corpus": lambda kit: list(CORPUS),
    "conllu_or_texts": lambda kit: CONLLU,
    "conll": lambda kit: CONLL,
    "result": lambda kit: kit.result,
    "stats": lambda kit: kit.stats,
    "keys": lambda kit: 1,
    "sentence_a": lambda kit: TEXT,
    "model_type": lambda kit: "bert",
    "tokenizer": lambda kit: kit.model.tokenizer,
}
# Where a name means something else for one entry point: (entry point, parameter) → value.
VALID_FOR = {
    ("read_conllu", "text_or_path"): lambda kit: CONLLU,
    ("read_conll2012", "text_or_path"): lambda kit: CONLL,
    ("patterns_by_layer", "frame"): lambda kit: kit.patterns,
    ("similarity_by_layer", "frame"): lambda kit: kit.similarity,
    ("roles", "frame"): lambda kit: kit.roles_frame,
    ("neuron_view", "model"): lambda kit: kit.model.model,
    ("head_view", "attention"): lambda kit: ATTENTION,
    ("head_view", "tokens"): lambda kit: list(TOKENS),
    ("model_view", "attention"): lambda kit: ATTENTION,
    ("model_view", "tokens"): lambda kit: list(TOKENS),
    ("result_from_encoder_decoder", "encoder_attention"): lambda kit: ATTENTION,
    ("result_from_encoder_decoder", "encoder_tokens"): lambda kit: list(TOKENS),
    ("AttentionWidget", "text"): lambda kit: TEXT,
    ("attention_probes", "conllu_or_texts"): lambda kit: CONLLU * 4,  # a probe trains on 3 sentences or more
    ("save_html", "path"): lambda kit: kit.tmp / "page.html",
    ("save_image", "path"): lambda kit: kit.tmp / "picture.png",
    ("show_analysis", "data"): lambda kit: kit.stats,
    ("result_from_attention", "attention"): lambda kit: ATTENTION,
    ("result_from_attention", "tokens"): lambda kit: list(TOKENS),
    # Knockout reads a token's log p: a causal LM (the embedded MiniLM has no head to read it from).
    ("knockout", "model"): lambda kit: kit.decoder,
    ("knockout_heads", "model"): lambda kit: kit.decoder,
    ("knockout_sweep", "model"): lambda kit: kit.decoder,
    ("knockout_sweep", "keys"): lambda kit: [1],
    ("knockout_sweep", "window"): lambda kit: 1,
}
# Defaults changed to keep every call cheap (the values are still valid).
CHEAP = {
    "progress": False,
    "epochs": 1,
    "vectors": lambda kit: {"cat": torch.ones(4), "the": torch.zeros(4)},
    "html_action": "return",
}

# Entry points not called here, each with its reason.
SKIPPED = {
    "AttentionModel": "made by attnscope.load(), whose arguments are called here; its constructor takes load's own record",
    "GenerationWidget": "made by attnscope.generate() from its step iterator, not by users",
    "AttentionResult": "a run's record, made by the engine (and bertviz_compat.result_from_attention, called here); "
                       "its fields are not checked on construction by design (a dataclass)",
    "CrossAttentionResult": "a run's record, made by the engine, as AttentionResult",
    "EncoderDecoderResult": "a run's record, made by the engine, as AttentionResult",
    "LongAttentionResult": "a run's record, made by the engine, as AttentionResult",
    "pruning_curve": "inherently slow: one call runs the corpus once per set of heads switched off (73 runs of the "
                     "model); its loss= is the callback head_importance and attention_gradients take, checked here",
    "head_ablation": "inherently slow, as pruning_curve (a run per head); loss= as head_importance's",
    "generate": "needs a generative model and runs a thread per call; its arguments are checked in test_generation_widget.py",
}

# Wrong kinds that are valid values for a parameter, and slow ones: not tried, with the reason.
VALID_BUT_SLOW = {
    ("head_distances", "n_init", "an int"): "n_init=7 is seven MDS starts: valid, and over a minute on a loaded 2-core CPU",
}

# Known leaks, (entry point, parameter, wrong kind) → why it is left. Strict: a leak fixed must leave the list.
XFAIL: dict[tuple[str, str, str], str] = {}


class Kit:
    """What the valid and wrong values are made of, built once and lazily."""

    def __init__(self, model, tmp: Path):
        self.model, self.tmp = model, tmp
        self._made = {}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._made:
            self._made[name] = getattr(self, f"_make_{name}")()
        return self._made[name]

    def _make_result(self):
        return self.model.run(TEXT)

    def _make_other(self):
        torch.manual_seed(0)
        bert = transformers.BertModel(transformers.BertConfig(vocab_size=30522, **SMALL))
        return attnscope.load(bert, self.model.tokenizer, device="cpu")

    def _make_decoder(self):
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=30522, num_key_value_heads=2, **SMALL)
        return attnscope.load(transformers.LlamaForCausalLM(config), self.model.tokenizer, device="cpu")

    def _make_other_result(self):
        return self.other.run(TEXT)

    def _make_widget(self):
        return attnscope.AttentionWidget(TEXT, model=self.model)

    def _make_stats(self):
        return attnscope.head_stats(self.model, CORPUS, progress=False)

    def _make_patterns(self):
        return attnscope.attention_patterns(self.model, CORPUS, progress=False)

    def _make_similarity(self):
        return attnscope.attention_similarity(self.model, self.model, CORPUS, progress=False)

    def _make_roles_frame(self):
        return attnscope.head_roles(self.model, CORPUS, progress=False)

    def _make_empty_folder(self):
        path = self.tmp / "empty"
        path.mkdir(exist_ok=True)
        return path


@pytest.fixture(scope="module")
def kit(default_model, tmp_path_factory):
    return Kit(default_model, tmp_path_factory.mktemp("wrong-kinds"))


def entry_points() -> dict[str, object]:
    """Every callable in attnscope.__all__ (not the errors) and the BertViz-compatible functions."""
    found = {}
    for name in attnscope.__all__:
        thing = getattr(attnscope, name)
        if isinstance(thing, type) and issubclass(thing, BaseException):
            continue
        if name == "neuron_view":  # a callable module: its signature is show's
            thing = attnscope.neuron_view.show
        if callable(thing) and name not in SKIPPED:
            found[name] = thing
    for name in ("result_from_attention", "result_from_encoder_decoder"):
        found[f"bertviz_compat.{name}"] = getattr(bertviz_compat, name)
    # The widget's own public methods (called on a fresh widget: see `widget_method`).
    for name, method in vars(attnscope.AttentionWidget).items():
        if inspect.isfunction(method) and not name.startswith("_") and name not in WIDGET_METHODS_SKIPPED:
            found[f"AttentionWidget.{name}"] = method
    return found


WIDGET_METHODS_SKIPPED = {"set_state": "the page's channel, fuzzed by test_page_input.py", "close": "takes no argument"}


def widget_method(entry: str, function, kit):
    """A widget's method as a function of its arguments (bound to a fresh widget), or `function`."""
    if not entry.startswith("AttentionWidget."):
        return function
    widget = attnscope.AttentionWidget(TEXT, model=kit.model)
    return getattr(widget, entry.split(".", 1)[1])


ENTRY_POINTS = entry_points()
CALLS = {"count": 0, "seconds": 0.0}


def _short(entry: str) -> str:
    return entry.rsplit(".", 1)[-1]


def valid_arguments(entry: str, function, kit) -> tuple[list, dict, list[str]]:
    """The positional and keyword arguments of a valid call, and the parameters to vary."""
    signature = inspect.signature(function)
    args, kwargs, varied = [], {}, []
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        name = parameter.name
        make = VALID_FOR.get((_short(entry), name)) or (VALID.get(name) if parameter.default is parameter.empty else None)
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
    return args, kwargs, varied


def _same(a, b) -> bool:
    try:
        return a is b or (type(a) is type(b) and isinstance(a, (str, int, float, type(None))) and a == b)
    except Exception:
        return False


# How a message may name a parameter other than by its own name (the file kind a reader reads).
SAID_AS = {"text_or_path": ("CoNLL",), "conllu_or_texts": ("corpus", "CoNLL", "sentences"), "conll": ("CoNLL",)}


def names(message: str, parameter: str, entry: str | None = None) -> bool:
    """Whether an error's message names `parameter` ("text_b", "text b", any case, or as SAID_AS
    says), or, for an entry point's first parameter (its subject: "rollout reads one run, ..."),
    the entry point."""
    said = message.lower()
    ways = (parameter, parameter.replace("_", " "), entry, *SAID_AS.get(parameter, ()))
    return any(name.lower() in said for name in ways if name)


def verdict(call, parameter: str, subject: str | None = None) -> str | None:
    """None when the call returned or refused naming `parameter` (or `subject`); else what leaked."""
    start = time.perf_counter()
    signal.signal(signal.SIGALRM, _too_slow)
    signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    try:
        out = call()
        if hasattr(out, "close") and isinstance(out, attnscope.AttentionWidget):
            out.close()
        return None
    except AttnscopeError as error:
        message = str(error)
        return None if names(message, parameter, subject) else f"{type(error).__name__} not naming {parameter}: {message[:200]}"
    except TooSlow:
        return f"still running after {CALL_SECONDS} s (a wrong value taken as work to do?)"
    except Exception as error:
        frames = traceback.extract_tb(error.__traceback__)
        where = frames[-1].filename if frames else "?"
        place = "attnscope" if "/attnscope/" in where else Path(where).name
        return f"{type(error).__name__} raised in {place}: {str(error)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        CALLS["count"] += 1
        CALLS["seconds"] += time.perf_counter() - start


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


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_parameter_refuses_the_wrong_kinds_by_name(entry, kit):
    function = widget_method(entry, ENTRY_POINTS[entry], kit)
    leaks = {}
    args, kwargs, varied = valid_arguments(entry, function, kit)
    for parameter in varied:
        for index, (wrong_name, make) in enumerate(CATALOGUE):
            if not tried(entry, parameter, index):
                continue
            wrong = make(kit)
            if _same(wrong, kwargs.get(parameter)) or (entry, parameter, wrong_name) in VALID_BUT_SLOW:
                continue
            TRIED.add((entry, parameter, wrong_name))
            call_kwargs = {**kwargs, parameter: wrong}
            subject = _short(entry) if parameter == varied[0] else None
            why = verdict(lambda call_kwargs=call_kwargs: function(*args, **call_kwargs), parameter, subject)
            if why is not None:
                leaks[(entry, parameter, wrong_name)] = why
    _check(leaks, entry)


def _trait_names():
    traits = contract_traits(attnscope.AttentionWidget)
    return sorted(name for name, trait in traits.items() if trait.metadata["writer"] in ("view", "both"))


@pytest.mark.parametrize("trait", _trait_names())
def test_every_settable_trait_refuses_the_wrong_kinds_by_name(trait, kit):
    widget = attnscope.AttentionWidget(TEXT, model=kit.model)
    leaks = {}
    for index, (wrong_name, make) in enumerate(CATALOGUE):
        if not tried("AttentionWidget", trait, index):
            continue
        wrong = make(kit)
        TRIED.add(("AttentionWidget." + trait, trait, wrong_name))

        def assign(wrong=wrong):
            setattr(widget, trait, wrong)

        why = verdict(assign, trait)
        if why is not None:
            leaks[("AttentionWidget." + trait, trait, wrong_name)] = why
    widget.close()
    _check(leaks, "AttentionWidget." + trait)


# The command line: each option (and the text) given each of these, the rest valid.
CLI_CATALOGUE = [
    ("an empty value", lambda kit: ""),
    ("nan", lambda kit: "nan"),
    ("-1", lambda kit: "-1"),
    ("a word", lambda kit: "nonsense"),
    ("a long value", lambda kit: "x" * 300),
    ("a directory", lambda kit: str(kit.tmp)),
    ("a missing folder", lambda kit: str(_missing_folder(kit))),
    ("a folder without a model", lambda kit: str(kit.empty_folder)),
]
CLI_WRONG_ARGV = [
    ("no command", []),
    ("an unknown command", ["draw", TEXT]),
    ("no text", ["render", "-o", "{out}"]),
    ("no output", ["render", TEXT]),
    ("an unknown flag", ["render", TEXT, "-o", "{out}", "--nope"]),
    ("a flag without its value", ["render", TEXT, "-o", "{out}", "--layers"]),
]


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
    return None


def test_the_command_line_refuses_the_wrong_kinds_in_one_line(kit, capsys, monkeypatch):
    # An --output of "nan" or "-1" is a valid file name: written in the test's folder, not the checkout.
    monkeypatch.chdir(kit.tmp)
    out = str(kit.tmp / "page.html")
    base = {"text": TEXT, "--output": out}
    leaks = {}
    for option in _cli_options():
        for wrong_name, make in CLI_CATALOGUE:
            given = {**base, option: make(kit)}
            argv = ["render", given.pop("text")]
            for flag, value in given.items():
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
            f"entry points, {len(_trait_names())} settable traits and the command line; {len(XFAIL)} known leaks "
            f"(XFAIL), {len(SKIPPED)} entry points skipped with their reasons")
    print(line)
    generators = [item for item in request.session.items if item.module is request.module and item.name != request.node.name]
    if len(generators) == len(ENTRY_POINTS) + len(_trait_names()) + 1:  # the whole file ran, not a -k selection
        assert CALLS["count"] >= (5000 if EVERY_PAIR else 5000 // SAMPLE_STRIDE), line
