"""Progress bars leave a line of text in the notebook, not a widget (a saved notebook reopened
without its kernel shows a widget output as "Error displaying widget: model not found")."""

from __future__ import annotations

import gc

import pytest

from attnscope.progress import progress

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def notebook_outputs(monkeypatch):
    """tqdm.auto as it is in a notebook kernel; what is displayed and updated, in order."""
    import tqdm.auto
    from IPython.core.interactiveshell import InteractiveShell
    from tqdm.notebook import tqdm_notebook

    monkeypatch.setattr(tqdm.auto, "tqdm", tqdm_notebook)
    shell = InteractiveShell.instance()
    outputs = []
    monkeypatch.setattr(shell.display_pub, "publish",
                        lambda data, metadata=None, transient=None, update=False, **kw: outputs.append((data, transient, update)))
    return outputs


def final_text(outputs):
    """The bar's output as it is left: its first display, then every update of the same id."""
    data, transient, update = outputs[0]
    assert WIDGET_MIME in data and not update  # live, the bar is tqdm's widget
    display_id = transient["display_id"]
    updates = [d for d, t, u in outputs[1:] if u and t and t["display_id"] == display_id]
    assert updates, "the bar's output was never replaced"
    return updates[-1]


def test_a_finished_bar_ends_as_its_text_line(notebook_outputs):
    assert list(progress(range(12), 12, "head stats")) == list(range(12))
    last = final_text(notebook_outputs)
    assert set(last) == {"text/plain"}
    assert last["text/plain"].startswith("head stats: 100%") and "12/12" in last["text/plain"]


def test_a_loop_left_early_or_failing_still_ends_as_text_and_closes_the_widgets(notebook_outputs):
    def run():
        for i in progress(range(10), 10, "syntax heads"):
            if i == 3:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run()
    gc.collect()
    last = final_text(notebook_outputs)
    assert last["text/plain"].startswith("syntax heads:") and "3/10" in last["text/plain"]


def test_the_widgets_of_a_finished_bar_are_closed(notebook_outputs, monkeypatch):
    import ipywidgets

    closed = []
    real_close = ipywidgets.Widget.close
    monkeypatch.setattr(ipywidgets.Widget, "close", lambda self: (closed.append(type(self).__name__), real_close(self)))
    list(progress(range(2), 2, "x"))
    assert sorted(closed) == ["FloatProgress", "HTML", "HTML", "TqdmHBox"]  # the bar, its labels and their box


def test_no_bar_when_progress_is_off_and_a_text_bar_outside_a_notebook(capsys):
    assert list(progress(range(3), 3, "quiet", show=False)) == [0, 1, 2]
    assert capsys.readouterr().err == ""
    assert list(progress(range(3), 3, "plain")) == [0, 1, 2]
    assert "plain: 100%" in capsys.readouterr().err


def test_an_analysis_leaves_its_bar_as_text(notebook_outputs, default_model):
    """head_stats in a notebook: what its cell keeps is a line of text, no widget output."""
    import attnscope

    attnscope.head_stats(default_model, ["The cat sat.", "A dog ran."], batch_size=1)
    shown = {}
    for data, transient, update in notebook_outputs:  # each output as it is left
        key = transient["display_id"] if transient else id(data)
        if update or key not in shown:
            shown[key] = data
    assert shown and all(WIDGET_MIME not in data for data in shown.values())
    assert any(d["text/plain"].startswith("head stats: 100%") and "2/2" in d["text/plain"] for d in shown.values())
