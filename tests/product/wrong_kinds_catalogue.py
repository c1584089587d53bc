"""What tests/product/test_wrong_kinds.py tries: the wrong kinds of objects (CATALOGUE), the valid
values the other arguments keep (VALID, VALID_FOR, BASES), the objects a method is called on
(INSTANCES), and the entry points, read from the package and its documentation, not listed:

- every callable in `attnscope.__all__` (functions, and classes' constructors) but the errors;
- the BertViz-compatible functions (bertviz_compat's result_from_*);
- every function of a submodule the documentation tells users to call (README.md and docs/*.md:
  `attnscope.engine.generation.from_generate(`);
- every public method of a class in `__all__` that the documentation calls (`result.pooled(`,
  `model.run(`), and every public method of a widget (the user's object);
- every setting of a widget from Python: the traits the page may write (writer "view" or "both")
  and those the widget checks or acts on when Python writes them (`widget.text = ...` reruns),
  set on a widget and given to its constructor (`AttentionWidget(text, weigh_by=...)`);
- the command line (CLI_CATALOGUE, CLI_WRONG_ARGV).

To extend: a wrong kind is a (name, factory(kit)) pair in CATALOGUE; a parameter without a default
whose name is new needs a valid value in VALID (the test says so); an entry point whose valid calls
differ in kind (a decoder's and an encoder-decoder's) lists its bases in BASES.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from pathlib import Path

import numpy as np
import torch
import traitlets
import transformers
from small_models import tiny_bart

import attnscope
from attnscope.edges import bertviz_compat
from attnscope.engine.borrowing import borrowed
from attnscope.widget.contract import contract_traits

ROOT = Path(__file__).resolve().parents[2]
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

# What a message may say of a wrong value to have said what it got, besides its kind ("a float"),
# its type's name and its short repr (checks.kind_of, checks.short_repr): words for what is wrong
# with it, by what it is.
def said_of(wrong) -> set[str]:
    """Words, any of which in a refusal (any case) says what it was given: `wrong`'s kind, type
    name and short repr, those of what a container holds (or "empty"), and what is wrong with a
    number ("nan", "inf", "finite", "negative", "large"), a path ("folder", "file", its name), a
    callable ("returned") or attention ("negative", "sum", "nan")."""
    from attnscope.checks import kind_of, short_repr

    words = {kind_of(wrong), type(wrong).__name__, short_repr(wrong, 200)[:12], str(getattr(wrong, "name", ""))}
    if wrong is None:  # None is "not given": asking for the value says it
        words |= {"none", "give", "is required", "needs", "pass "}
    if isinstance(wrong, bool):
        words |= {"bool", "true", "false"}
    elif isinstance(wrong, (int, float)):
        words |= {repr(wrong), "finite", "whole number"}
        words |= {"nan", "not a number"} if wrong != wrong else set()
        words |= {"inf"} if wrong in (math.inf, -math.inf) else set()
        words |= {"negative", "below", "at least", "from 0"} if wrong < 0 else set()
        words |= {"large", "too many", "at most", "past", "out of range", "beyond"} if abs(wrong) > 10**9 else set()
    if isinstance(wrong, (list, tuple, set, dict, str, bytes, np.ndarray)) and len(wrong) == 0:
        words |= {"empty", "nothing", "[]", "''"}
    if isinstance(wrong, (list, tuple, set, dict)):
        items = sorted(wrong) if isinstance(wrong, (set, dict)) else list(wrong)
        words |= {kind_of(item) for item in items[:3]} | {type(item).__name__ for item in items[:3]}
        words |= {repr(item) for item in items[:3] if isinstance(item, str)} | {repr(items), repr(items[-1:])}
        words |= {"0 tokens", "0 items", "no tokens"} if not items else set()
        words |= {"batch", "texts"} if items and all(isinstance(item, str) for item in items) else set()
        words |= {f"{len(items)} {what}" for what in ("sentences", "tokens", "texts")}
        words |= {short_repr(items, 200)[:12]} | {f" {item!r}:" for item in items[:3]}  # "Cannot mask head 1:"
        if any(isinstance(item, torch.Tensor) for item in wrong):
            words |= {"negative", "sum", "nan", "finite", "probabilit", "attention"}
    if isinstance(wrong, (np.ndarray, torch.Tensor)):
        words |= {"array", "tensor", "numpy", "shape", repr(float(wrong.flatten()[0]))}
    if isinstance(wrong, (str, Path)) and not isinstance(wrong, bool):
        words |= {str(wrong), Path(wrong).name, "folder", "directory", "file", "path"} - {""}
        words |= {"token", "1 sentence", "holds 1", "one text"} if isinstance(wrong, str) else set()
    if isinstance(wrong, bytes):  # read as text: its text shown
        words.add(wrong.decode("utf-8", "replace")[:12])
    if callable(wrong) and not isinstance(wrong, type) and not hasattr(wrong, "__self__"):
        words |= {"returned", "returns", "function", "callable", getattr(wrong, "__name__", "")} - {""}
    return {word.lower() for word in words if word}


def says_what_it_got(message: str, wrong) -> bool:
    said = message.lower()
    return any(word in said for word in said_of(wrong))


# Phrases, any of which in a refusal says what would be taken instead: a kind ("is not a", "a
# list of", "maps each"), a range ("outside [", "at most", "0.."), a choice ("one of", "either"),
# or what to do ("give ", "pass ", "leave it out", "generate with", "attnscope.load(").
WANTS = (
    "must", "should", "expected", "expects", "one of", "choose", "give ", "pass ", "use ", "needs", "need ", "wants",
    "takes", "reads", "runs a ", "maps ", "at least", "at most", "range", "between", "outside [", "0..", "from 0",
    "count from", "e.g.", "such as", "accepts", "is not a", "not an ", "are not", "only", "either", " or ", "instead",
    "supported", "has layers", "has heads", "a str", "an int", "list of", "whole number", "is a ", "are ", "makes one",
    "returns", "is required", "known", "set ", "asks for", "holds", "not in", "leave it out", "type a", "longer than",
    "but ", "no such", "run ", "see ", "generate with", "attnscope.load(", "make it", "is for ",
)


def says_what_it_wants(message: str) -> bool:
    said = message.lower()
    return any(phrase in said for phrase in WANTS)


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
    "layer": lambda kit: 1,
    "head": lambda kit: 2,
    "queries": lambda kit: [0, 2],
    "rows": lambda kit: (0, 2),
    "cols": lambda kit: (1, 3),
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
    ("find", "expression"): lambda kit: "layer >= 1 and entropy > 0",
    ("result_from_attention", "attention"): lambda kit: ATTENTION,
    ("result_from_attention", "tokens"): lambda kit: list(TOKENS),
    # Knockout reads a token's log p, and generate writes: a causal LM (the embedded MiniLM has no head).
    ("knockout", "model"): lambda kit: kit.decoder,
    ("knockout_heads", "model"): lambda kit: kit.decoder,
    ("knockout_sweep", "model"): lambda kit: kit.decoder,
    ("knockout_sweep", "keys"): lambda kit: [1],
    ("knockout_sweep", "window"): lambda kit: 1,
    ("generate", "model"): lambda kit: kit.decoder,
    ("from_generate", "model"): lambda kit: kit.decoder,
    ("from_generate", "output"): lambda kit: kit.decoder_output,
}
# Entry points whose valid calls differ in kind: each base (a name → its values, over VALID and
# VALID_FOR) is tried with every wrong kind, as an entry point of its own, "entry[base]".
BASES = {
    "generate": {
        "a decoder": {},
        "an encoder-decoder": {"model": lambda kit: kit.writer},
    },
    # A decoder's next token, and an encoder-decoder's output token after its decoder's ids.
    **{name: {"a decoder": {}, "an encoder-decoder": {"model": lambda kit: kit.writer}}
       for name in ("knockout", "knockout_sweep", "knockout_heads")},
    "from_generate": {
        "a decoder's output": {},
        "an encoder-decoder's output": {"model": lambda kit: kit.writer, "output": lambda kit: kit.writer_output,
                                        "source": lambda kit: kit.writer_source},
    },
}
# Defaults changed to keep every call cheap (the values are still valid).
CHEAP = {
    "progress": False,
    "epochs": 1,
    "vectors": lambda kit: {"cat": torch.ones(4), "the": torch.zeros(4)},
    "html_action": "return",
    "max_new_tokens": 2,
}

# Entry points not called here, each with its reason.
SKIPPED = {
    "AttentionModel": "made by attnscope.load(), whose arguments are called here; its constructor takes load's own record",
    "GenerationWidget": "made by attnscope.generate() (called here) from its step iterator, not by users; its methods and "
                        "settings are called here",
    "AttentionResult": "a run's record, made by the engine (and bertviz_compat.result_from_attention, called here); "
                       "its fields are not checked on construction by design (a dataclass)",
    "CrossAttentionResult": "a run's record, made by the engine, as AttentionResult",
    "EncoderDecoderResult": "a run's record, made by the engine, as AttentionResult",
    "LongAttentionResult": "a run's record, made by the engine, as AttentionResult",
    "pruning_curve": "inherently slow: one call runs the corpus once per set of heads switched off (73 runs of the "
                     "model); its loss= is the callback head_importance and attention_gradients take, checked here",
    "head_ablation": "inherently slow, as pruning_curve (a run per head); loss= as head_importance's",
    "set_state": "a widget's channel from the page, fuzzed by test_page_input.py",
    "GenerationWidget.start": "starts the generation thread, which attnscope.generate does once; takes no argument",
}

# Wrong kinds that are valid values for a parameter, and slow ones: not tried, with the reason.
VALID_BUT_SLOW = {
    ("head_distances", "n_init", "an int"): "n_init=7 is seven MDS starts: valid, and over a minute on a loaded 2-core CPU",
}

# The object a class's methods are called on (a fresh one where a call may change it).
INSTANCES = {
    "AttentionWidget": lambda kit: attnscope.AttentionWidget(TEXT, model=kit.model),
    "GenerationWidget": lambda kit: kit.generation_widget(),
    "AttentionModel": lambda kit: kit.model,
    "AttentionResult": lambda kit: kit.result,
    "LongAttentionResult": lambda kit: kit.long_result,
    "HeadFinder": lambda kit: attnscope.head_finder(kit.model, CORPUS, progress=False),
    "CorefHeads": lambda kit: attnscope.coref_heads(kit.model, CONLL, progress=False),
    "SyntaxHeads": lambda kit: attnscope.syntax_heads(kit.model, CONLLU, progress=False),
}


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

    def models(self) -> list:
        """The Hugging Face models made so far: each must leave every call as it came."""
        return [self._made[name].model for name in ("other", "decoder", "writer") if name in self._made] + [self.model.model]

    def _make_result(self):
        return self.model.run(TEXT)

    def _make_long_result(self):
        return self.model.run(TEXT, attention="on_demand")

    def _make_other(self):
        torch.manual_seed(0)
        bert = transformers.BertModel(transformers.BertConfig(vocab_size=30522, **SMALL))
        return attnscope.load(bert, self.model.tokenizer, device="cpu")

    def _make_decoder(self):
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=30522, num_key_value_heads=2, **SMALL)
        return attnscope.load(transformers.LlamaForCausalLM(config), self.model.tokenizer, device="cpu")

    def _make_writer(self):
        bart = tiny_bart(lm_head=True)
        bart.generation_config.eos_token_id = []  # every generation here ends at max_new_tokens
        return attnscope.load(bart, self.model.tokenizer, device="cpu")

    def _make_decoder_output(self):
        return self._generate_output(self.decoder, pad_token_id=0)

    def _make_writer_source(self):
        return self.model.tokenizer("The cat", return_tensors="pt")["input_ids"]

    def _make_writer_output(self):
        return self._generate_output(self.writer, forced_eos_token_id=None, min_length=0)

    def _generate_output(self, engine, **settings):
        ids = self.model.tokenizer("The cat", return_tensors="pt")["input_ids"]
        with borrowed(engine.model, "eager"), torch.no_grad():
            return engine.model.generate(ids, max_new_tokens=2, do_sample=False, output_attentions=True,
                                         return_dict_in_generate=True, **settings)

    def generation_widget(self):
        widget = attnscope.generate("The cat", model=self.decoder, max_new_tokens=2)
        widget.wait()
        return widget

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


def _public_things() -> list[tuple[str, object]]:
    """attnscope.__all__'s names and objects, the errors left out."""
    things = [(name, getattr(attnscope, name)) for name in attnscope.__all__]
    return [(name, thing) for name, thing in things if not (isinstance(thing, type) and issubclass(thing, BaseException))]


def _documentation() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])


def documented_functions() -> dict[str, object]:
    """The functions of attnscope's submodules the documentation calls by their dotted name."""
    found = {}
    for dotted in sorted(set(re.findall(r"\battnscope((?:\.[A-Za-z_]\w*){2,})\(", _documentation()))):
        thing = attnscope
        for part in dotted.strip(".").split("."):
            thing = getattr(thing, part, None)
        if inspect.isfunction(thing):
            found[dotted.strip(".")] = thing
    return found


def documented_methods() -> set[str]:
    """The names the documentation calls as a method (`result.pooled(`)."""
    return set(re.findall(r"\w\.([a-z_]\w*)\(", _documentation()))


def returned_classes() -> list[type]:
    """attnscope's classes that public functions return (their annotations) and do not export, as
    head_finder's HeadFinder: their methods are entry points too (finder.find(...))."""
    found = {}
    for _, thing in _public_things():
        if not callable(thing) or isinstance(thing, type):
            continue
        try:
            returned = typing.get_type_hints(thing).get("return")
        except (NameError, TypeError):
            continue
        for cls in (returned, *typing.get_args(returned)):
            if isinstance(cls, type) and cls.__module__.startswith("attnscope.") and cls.__name__ not in attnscope.__all__:
                found[cls.__name__] = cls
    return list(found.values())


def _classes() -> dict[str, type]:
    """The classes whose methods are entry points, by name: the exported and the returned."""
    return {**{cls.__name__: cls for cls in returned_classes()},
            **{name: thing for name, thing in _public_things() if isinstance(thing, type)}}


def widget_classes() -> list[type]:
    return [thing for _, thing in _public_things() if isinstance(thing, type) and issubclass(thing, attnscope.AttentionWidget)]


def entry_points() -> dict[str, object]:
    """Every entry point (see the module's docstring), by the name the test reports."""
    found = {}
    for name, thing in _public_things():
        if name == "neuron_view":  # a callable module: its signature is show's
            thing = attnscope.neuron_view.show
        if callable(thing):
            found[name] = thing
    for name in ("result_from_attention", "result_from_encoder_decoder"):
        found[f"bertviz_compat.{name}"] = getattr(bertviz_compat, name)
    for dotted, function in documented_functions().items():
        if not any(function is known for known in found.values()):
            found[dotted] = function
    called, widgets = documented_methods(), widget_classes()
    classes = sorted(_classes().values(), key=lambda c: len(c.__mro__))
    for cls in classes:  # a base before its subclasses: an inherited method is tried on the base
        methods = {}  # name → function, a subclass's override last (vars: no property is read)
        for klass in reversed(cls.__mro__):
            methods.update((name, member) for name, member in vars(klass).items() if inspect.isfunction(member))
        for name, method in methods.items():
            ours = method.__module__.startswith("attnscope.")
            if name.startswith("_") or not ours or not (name in called or cls in widgets):
                continue
            if not any(method is known for known in found.values()):
                found[f"{cls.__name__}.{name}"] = method
    return {name: thing for name, thing in found.items() if name not in SKIPPED and short(name) not in SKIPPED}


def with_bases(entries: dict[str, object]) -> dict[str, tuple[object, str | None]]:
    """Each entry point once, or once per base (BASES): "generate[a decoder]" → (function, base)."""
    out = {}
    for name, function in entries.items():
        for base in BASES.get(short(name), {None: None}):
            out[name if base is None else f"{name}[{base}]"] = (function, base)
    return out


def short(entry: str) -> str:
    """An entry point's own name: "from_generate" of "engine.generation.from_generate[a decoder's output]"."""
    return entry.split("[", 1)[0].rsplit(".", 1)[-1]


def instance_for(entry: str, kit):
    """The object `entry`'s method is called on, or None for a function."""
    owner = entry.split("[", 1)[0].split(".")[0]
    cls = _classes().get(owner)
    if "." not in entry.split("[", 1)[0] or not isinstance(cls, type):
        return None
    if owner not in INSTANCES:
        raise LookupError(f"{owner}'s methods are entry points: add how to make one to INSTANCES")
    return INSTANCES[owner](kit)


def settable_traits(widget_class: type) -> list[str]:
    """A widget's settings from Python: the traits the page writes (writer "view" or "both"), and
    those the widget checks (a validator) or acts on (an observer) when Python writes them."""
    traits = contract_traits(widget_class)
    handled = set()
    for klass in widget_class.__mro__:
        for member in vars(klass).values():
            if isinstance(member, (traitlets.ObserveHandler, traitlets.ValidateHandler)):
                handled.update(member.trait_names)
    return sorted(name for name, trait in traits.items() if trait.metadata["writer"] in ("view", "both") or name in handled)


def keyword_settings(thing: object) -> list[str]:
    """The settings a widget class's constructor takes as keywords (**kwargs): its settings from
    Python (settable_traits), each varied as a parameter of the constructor; none for another."""
    if isinstance(thing, type) and issubclass(thing, attnscope.AttentionWidget):
        return settable_traits(thing)
    return []


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
