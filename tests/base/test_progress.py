"""Progress bars leave a line of text in the notebook, not a widget (a saved notebook reopened
without its kernel shows a widget output as "Error displaying widget: model not found")."""

from __future__ import annotations

import gc
import re

import pytest
import torch
import transformers

import attnscope
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


def test_a_long_descriptions_line_keeps_its_counts_and_times_whole(notebook_outputs):
    """80 columns cut "SmolLM2-135M-Instruct reading the prompt's 7,128 tokens: …" to "… 30/30 [00:24<00"."""
    desc = "SmolLM2-135M-Instruct reading the prompt's 7,128 tokens"
    list(progress(range(30), 30, desc, unit="layer"))
    line = final_text(notebook_outputs)["text/plain"]
    assert re.fullmatch(re.escape(desc) + r": 100%\|█+\| 30/30 \[00:0\d<00:00, +[\d.]+(?:k|M)?layer/s\]", line), line


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


class RecordedBar:
    """What a run did with its bar: how it was described, and how far it went before closing."""

    def __init__(self, total, desc, unit):
        self.total, self.desc, self.unit, self.n, self.closed = total, desc, unit, 0, False

    def update(self, n):
        self.n += n
        return True  # as tqdm's does when it redraws: a hook must not hand it on as the layer's output

    def close(self):
        self.closed = True


def _small_decoder(tokenizer, layers=3):
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, intermediate_size=37,
                                      max_position_embeddings=8192)
    return attnscope.load(transformers.Qwen2Model(config).eval(), tokenizer, device="cpu")


@pytest.mark.parametrize("attention", ["on_demand", "full"])
def test_a_long_run_counts_its_layers_and_says_first_what_it_cuts(bert_tokenizer, monkeypatch, attention):
    """Issue 45: 100,000 characters ran for 221 s with nothing shown, then said it had cut the input."""
    from attnscope import progress
    from attnscope.engine import run_progress

    bars = []
    monkeypatch.setattr(progress, "counter", lambda total, desc, unit: bars.append(RecordedBar(total, desc, unit)) or bars[-1])
    model = _small_decoder(bert_tokenizer)
    monkeypatch.setattr(run_progress, "LONG_RUN_TOKENS", 1024)  # a full run that long would hold 3 × 4 × 2,048² weights
    with torch.inference_mode():  # transformers installs its own output hooks on a first call
        model.model(input_ids=torch.tensor([[101, 1996, 102]]), output_attentions=True)
    hooks_before = [dict(m._forward_hooks) for m in model.model.modules()]
    with pytest.warns(UserWarning, match="truncated from"):
        result = model.run(" ".join(["word"] * 3000), max_length=1100, attention=attention)
    assert len(result.tokens) == 1100
    [bar] = bars
    assert bar.desc.endswith("over 1,100 tokens (input truncated from 3,002 tokens: max_length=1100)")
    assert (bar.total, bar.unit, bar.n, bar.closed) == (3, "layer", 3, True)
    assert [dict(m._forward_hooks) for m in model.model.modules()] == hooks_before  # the model as it came

    bars.clear()
    model.run("A short sentence.", attention=attention)
    assert bars == []  # a short run: no bar


def test_a_run_that_fails_still_closes_its_bar_and_removes_its_hooks(bert_tokenizer, monkeypatch):
    from attnscope import progress
    from attnscope.engine import run_progress

    bars = []
    monkeypatch.setattr(progress, "counter", lambda total, desc, unit: bars.append(RecordedBar(total, desc, unit)) or bars[-1])
    monkeypatch.setattr(run_progress, "LONG_RUN_TOKENS", 8)
    model = _small_decoder(bert_tokenizer)
    hooks_before = [dict(m._forward_hooks) for m in model.model.modules()]
    broken = model.model.layers[1].mlp.register_forward_hook(lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        model.run("one two three four five six seven eight nine ten", attention="on_demand")
    broken.remove()
    [bar] = bars
    assert bar.closed and bar.n == 2  # the second layer's attention ran, its MLP was interrupted
    assert [dict(m._forward_hooks) for m in model.model.modules()] == hooks_before


def test_inside_an_analysis_the_runs_do_not_add_bars_of_their_own(bert_tokenizer, monkeypatch):
    from attnscope import progress as progress_module
    from attnscope.engine import run_progress

    made = []
    real_bar = progress_module._bar
    monkeypatch.setattr(progress_module, "_bar", lambda iterable, **kwargs: made.append(kwargs["unit"]) or real_bar(iterable, **kwargs))
    monkeypatch.setattr(run_progress, "LONG_RUN_TOKENS", 8)
    model = _small_decoder(bert_tokenizer)
    for _ in progress(range(2), 2, "documents", unit="document"):
        model.run("one two three four five six seven eight nine ten", attention="on_demand")
    for _ in progress(range(2), 2, "documents", show=False):  # progress=False is no bar at all
        model.run("one two three four five six seven eight nine ten", attention="on_demand")
    model.run("one two three four five six seven eight nine ten", attention="on_demand")
    assert made == ["document", "layer"]


@pytest.fixture
def kernel_outputs(monkeypatch):
    """A notebook kernel's shell (progress.status shows its line only there); what is displayed."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    outputs = []
    monkeypatch.setattr(shell.display_pub, "publish",
                        lambda data, metadata=None, transient=None, update=False, **kw: outputs.append((data, transient, update)))
    return outputs


def test_a_loading_line_ends_as_what_was_done_and_its_time_never_blank(kernel_outputs):
    """Issue 45 §9: emptied at the end, the line left a blank output in the cell."""
    from attnscope.progress import status

    with status("attnscope: loading smollm2…", "attnscope: loaded smollm2"):
        assert [d["text/plain"] for d, _, _ in kernel_outputs] == ["attnscope: loading smollm2…"]
    (first, transient, _), (last, again, update) = kernel_outputs
    assert update and again["display_id"] == transient["display_id"]
    assert re.fullmatch(r"attnscope: loaded smollm2 in \d+\.\d s", last["text/plain"]), last
    with pytest.raises(OSError), status("attnscope: loading x…", "attnscope: loaded x"):
        raise OSError("no such model")
    assert kernel_outputs[-1][0]["text/plain"] == "attnscope: loading x stopped on the error below"


def test_loading_a_model_by_folder_says_so_while_it_loads(kernel_outputs, tmp_path, default_model):
    """attnscope.load of a name or a folder (SmolLM2: about 15 s) shows its line, then how long it took."""
    default_model.model.save_pretrained(tmp_path / "mini")
    default_model.tokenizer.save_pretrained(tmp_path / "mini")
    engine = attnscope.load(str(tmp_path / "mini"), device="cpu")
    said = [d["text/plain"] for d, _, _ in kernel_outputs]
    assert said[0] == f"attnscope: loading {tmp_path / 'mini'}…" and engine.n_layers == 6
    assert re.fullmatch(rf"attnscope: loaded {re.escape(str(tmp_path / 'mini'))} in \d+\.\d s", said[-1]), said
