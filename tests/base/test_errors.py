"""A user's mistake is shown from the user's own call: their lines and the message, none of the
frames inside attnscope (or traitlets) that found it."""

from __future__ import annotations

import re

import pytest

import attnscope

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def shown_error(default_model, capsys):
    """cell → what IPython prints for the error the cell raises."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns.update(attnscope=attnscope, model=default_model)

    def run(cell: str) -> str:
        capsys.readouterr()
        result = shell.run_cell(cell)
        assert not result.success
        printed = capsys.readouterr()
        return ANSI.sub("", printed.out + printed.err)

    return run


@pytest.mark.parametrize("cell, error, message", [
    ("attnscope.show('The cat sat.', model=model, layer=9)", "InputError", "layer=9 is out of range: the model has layers 0..5."),
    ("w = attnscope.show('The cat sat.', model=model)\nw.layer = 9", "SettingError", "layer=9 is out of range"),
    ("w = attnscope.show('The cat sat.', model=model)\nw.heads = [0, 99]", "SettingError", "heads has [99] out of range"),
    ("attnscope.show('The cat sat.', model=model, view='graph')", "InputError", "Unknown view 'graph'"),
    ("attnscope.head_stats(model, [])", "InputError", "The corpus has no non-empty text (it holds nothing)"),
    ("def mine(texts):\n    return attnscope.head_stats(model, texts, batch_size=0)\nmine(['A cat.'])", "InputError", "batch_size"),
])
def test_a_mistake_is_shown_from_the_users_own_call(shown_error, cell, error, message):
    text = shown_error(cell)
    assert f"{error}: " in text and message in text
    last_line = cell.splitlines()[-1]
    assert f"----> {len(cell.splitlines())} {last_line}" in text  # the user's line, marked
    # Nothing of attnscope's own code, or of the libraries between (traitlets), is shown.
    assert "attnscope/" not in text and "traitlets" not in text and "site-packages" not in text


def test_a_mistake_is_still_the_exception_callers_catch(default_model):
    """Shown short, but the same exception: `except ValueError` and `except TraitError` still work."""
    import traitlets

    widget = attnscope.show("The cat sat.", model=default_model)
    with pytest.raises(ValueError, match="layer=9"):
        widget.layer = 9
    with pytest.raises(traitlets.TraitError, match="layer=9"):
        widget.layer = 9
    with pytest.raises(attnscope.InputError):
        attnscope.show("The cat sat.", model=default_model, layer=9)


def test_a_bug_keeps_its_whole_traceback(shown_error, monkeypatch):
    """Only attnscope's deliberate errors are cut short: anything else is shown as Python has it."""
    import attnscope.widget.payloads

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug inside attnscope")

    monkeypatch.setattr(attnscope.widget.payloads, "layer_payload", broken)
    text = shown_error("attnscope.show('The cat sat.', model=model)")
    assert "RuntimeError: a bug inside attnscope" in text
    assert "attnscope/widget/attention_widget.py" in text  # the frames inside the package that failed
