"""The contract between the kernel and the views: one list of traits, documented once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import traitlets

import attnscope
from attnscope.widget.contract import (
    PAGE_BEHAVIOURS,
    WRITERS,
    contract_js,
    contract_markdown,
    contract_traits,
    layout_modules_js,
    page_traits,
    view_modules_js,
)

ROOT = Path(__file__).resolve().parents[2]


def js_traits() -> list[str]:
    text = (ROOT / "js" / "transport" / "contract.js").read_text(encoding="utf-8")
    body = re.search(r"export const TRAITS = \[(.*?)\];", text, re.S).group(1)
    return json.loads(f"[{body.strip().rstrip(',')}]")


def test_the_js_contract_is_generated_from_the_python_one():
    python = sorted(contract_traits(attnscope.AttentionWidget))
    assert sorted(js_traits()) == python, (set(js_traits()) ^ set(python))
    generated = contract_js(attnscope.AttentionWidget)
    assert (ROOT / "js" / "transport" / "contract.js").read_text(encoding="utf-8") == generated, (
        "js/transport/contract.js is out of date: run `make contract`"
    )
    assert (ROOT / "js" / "views" / "view_modules.js").read_text(encoding="utf-8") == view_modules_js(), (
        "js/views/view_modules.js is out of date: run `make contract`"
    )
    assert (ROOT / "js" / "views" / "layout_modules.js").read_text(encoding="utf-8") == layout_modules_js(), (
        "js/views/layout_modules.js is out of date: run `make contract`"
    )


def test_the_typedef_gives_each_trait_its_type():
    text = contract_js(attnscope.AttentionWidget)
    from attnscope.widget.views import VIEW_NAMES

    assert f"@property {{{' | '.join(map(json.dumps, VIEW_NAMES))}}} view [both]" in text  # head | model | ... | map
    assert "@property {(Array<number> | null)} include_layers [kernel]" in text
    assert "@property {Array<Array<number>>} masked_heads [both]" in text
    assert "@property {(number | null)} sentence_b_start [kernel]" in text


def test_every_synced_trait_of_ours_is_in_the_contract_and_documented():
    ours = {
        name for name, trait in attnscope.AttentionWidget.class_traits(sync=True).items()
        if name not in anywidget_traits()
    }
    contract = contract_traits(attnscope.AttentionWidget)
    assert ours == set(contract), ours ^ set(contract)
    for name, trait in contract.items():
        assert len(trait.help or "") > 15, f"{name} has no documentation"
        assert trait.metadata["writer"] in WRITERS and trait.metadata["page"] in PAGE_BEHAVIOURS
    table = contract_markdown(attnscope.AttentionWidget)
    assert all(f"| `{name}` |" in table for name in contract)


def anywidget_traits() -> set[str]:
    import anywidget

    return set(anywidget.AnyWidget.class_traits(sync=True)) | {"_esm", "_css", "_anywidget_id"}


def test_a_saved_page_knows_what_to_do_with_every_trait_the_view_writes():
    behaviours = page_traits(attnscope.AttentionWidget)
    written = {n for n, t in contract_traits(attnscope.AttentionWidget).items() if t.metadata["writer"] != "kernel"}
    assert set(behaviours) == written
    assert behaviours["layer"]["page"] == "layer" and behaviours["request"]["page"] == "edit"
    assert behaviours["word_level"] == {"page": "fixed", "label": "the Words setting"}


def test_synced_refuses_an_unknown_writer():
    from attnscope.widget.contract import synced

    with pytest.raises(ValueError, match="writer"):
        synced(traitlets.Int(0), "doc", writer="nobody")


def test_architecture_md_shows_the_js_layers_that_dependency_cruiser_checks():
    """The front end's layers `npm run lint` enforces (.dependency-cruiser.cjs LAYERS, highest
    first, under the entry points js/*.js) are the ones ARCHITECTURE.md draws, in the same order,
    and they are js/'s folders, all of them."""
    config = (ROOT / ".dependency-cruiser.cjs").read_text(encoding="utf-8")
    layers = json.loads(re.search(r"^const LAYERS = (\[.*?\]);$", config, re.M).group(1))
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    drawn = text[text.index("<!-- layers js:begin -->"): text.index("<!-- layers js:end -->")]
    listed = re.findall(r"^\d+\. `([^`]+)`", drawn, re.M)
    assert listed == ["js/*.js", *(f"js/{name}/" for name in layers)]
    assert {path.name for path in (ROOT / "js").iterdir() if path.is_dir()} == set(layers)


def test_the_views_send_only_declared_messages():
    from attnscope.widget.messages import MESSAGES

    sent = set()
    for path in (ROOT / "js").rglob("*.js"):
        if path.name.endswith(".test.js"):
            continue
        text = path.read_text(encoding="utf-8")
        sent |= {(m, "request") for m in re.findall(r"\.request\(\s*\"(\w+)\"", text)}
        sent |= {(m, "event") for m in re.findall(r"\.notify\(\s*\"(\w+)\"", text)}
    assert sent, "no channel.request/notify calls found in js/"
    for type_, kind in sent:
        assert type_ in MESSAGES and MESSAGES[type_].kind == kind and MESSAGES[type_].sender == "view", type_


def test_a_channel_refuses_undeclared_messages():
    from attnscope.widget.messages import Channel

    class Fake:
        def on_msg(self, _callback):
            pass

    with pytest.raises(ValueError, match="not messages the view sends"):
        Channel(Fake(), {"image": lambda *_: {}})
    channel = Channel(Fake(), {"neuron": lambda *_: {}}, {"rendered": lambda _: None})
    with pytest.raises(ValueError, match="not a request the kernel sends"):
        channel.request("neuron", {}, lambda *_: None)


def test_architecture_md_ends_with_the_current_contract_table():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert text.rstrip().endswith(contract_markdown(attnscope.AttentionWidget)), "ARCHITECTURE.md is out of date: run `make contract`"


def test_architecture_md_shows_the_layers_that_lint_imports_checks():
    """The layers `make lint` enforces (pyproject's import-linter contracts: the package's folders,
    then the modules inside each) are the ones ARCHITECTURE.md draws, in the same order; every
    module of the package and of each folder is on one of them."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    text = (root / "ARCHITECTURE.md").read_text()
    package = root / "src" / "attnscope"
    folders = sorted(path.name for path in package.iterdir() if (path / "__init__.py").is_file())
    checked = set()
    for contract in contracts:
        if contract["type"] != "layers":
            continue  # the widget's ban on importing a specific analysis draws no layers
        container = (contract.get("containers") or ["attnscope"])[0]
        names = [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]
        if container == "attnscope" and names[0][0].startswith("attnscope.analyses."):
            container = "attnscope.analyses"  # its layers name whole modules: the analyses' own order
        prefix = container + "."
        layers = [[name.removeprefix(prefix) for name in layer] for layer in names]
        folder = container.removeprefix("attnscope").lstrip(".")
        marker = f"layers {folder}" if folder else "layers"
        drawn = text[text.index(f"<!-- {marker}:begin -->"): text.index(f"<!-- {marker}:end -->")]
        listed = [re.findall(r"^\d+\. (.*)$", line)[0] for line in drawn.splitlines() if re.match(r"\d+\. ", line)]
        listed = [re.findall(r"`([a-z_]+)`", line.split(":")[0].split(" (")[0]) for line in listed]
        assert listed == layers, marker
        directory = package / folder if folder else package
        modules = {path.stem for path in directory.glob("*.py") if path.stem != "__init__"}
        if not folder:
            modules |= set(folders)
        assert modules == {name for layer in layers for name in layer}, f"{marker}: a module on no layer, or a layer of no module"
        checked.add(folder)
    assert checked == {"", *folders}, "a folder without a contract of its own"


def test_each_view_draws_a_synced_payload_or_a_served_store_and_asks_by_a_declared_message():
    """views.py's table is what the saved page and the picture read for the open view: what it
    names must be a trait of the contract or a message of the channel."""
    from attnscope.widget.messages import MESSAGES
    from attnscope.widget.views import VIEWS

    traits = contract_traits(attnscope.AttentionWidget)
    for view in VIEWS:
        assert view.draws in ("", "neuron") or view.draws in traits, view
        assert view.draws != "neuron" or "neuron" in MESSAGES
        assert view.asks == "" or view.asks in MESSAGES, view
        assert ("long" in view.modes) == (view.asks != "" or view.name == "analysis"), view
        assert all(set(step) <= {"lineBudget", "maxTokens", "maxLines", "lines", "maxPoints"} for step in view.thinning), view
        assert set(view.controls) <= {"layer", "filter", "part", "words", "masks", "mask mode", "weigh"}, view


def test_strings_traits_take_what_list_of_unicode_takes_and_refuse_what_it_refuses():
    """widget_traits.Strings checks a list of str in one pass; anything else goes through
    List(Unicode())'s own checks, with its errors."""
    import traitlets

    from attnscope.widget.widget_traits import Strings

    class Fast(traitlets.HasTraits):
        value = Strings()

    class Plain(traitlets.HasTraits):
        value = traitlets.List(traitlets.Unicode())

    given = ["a", " café", "日本", "🙂"]
    for values in (given, ("x", "y"), [], "abc", [b"x"]):  # (List(Unicode()) takes a str and bytes too)
        fast, plain = Fast(value=values), Plain(value=values)
        assert fast.value == plain.value and type(fast.value) is list
    assert Fast(value=given).value is not given  # a copy: the caller's list stays theirs
    for bad in (["a", 1], ["a", None], [["x"]], 5, None):
        with pytest.raises(traitlets.TraitError) as fast_error:
            Fast(value=bad)
        with pytest.raises(traitlets.TraitError) as plain_error:
            Plain(value=bad)
        # The same words, the trait's own class named (Strings, not List).
        assert str(fast_error.value).replace("Fast", "X").replace("Strings", "List") == str(plain_error.value).replace("Plain", "X")
