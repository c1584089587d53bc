"""Watch the model write (issue 48, the widget): attnscope.generate opens the long-run views on a
prompt and generates into them from a background thread, each step shown whole; Stop ends it
between steps keeping the text so far; the settings are said in the notice; bad arguments raise
before anything is displayed; the model leaves as it came."""

from __future__ import annotations

import os
import threading
import warnings

import pytest
import torch
from small_models import families, model_state, scaled_up
from test_long_widget import ask, values
from test_token_labels import byte_level_bpe

import attnscope
from attnscope import InputError
from attnscope.engine.generation import generate as engine_generate
from attnscope.widget import payloads as pl
from attnscope.widget.contract import GROWING
from attnscope.widget.generation_widget import growth

PROMPT = "The café is naïve, and the lake near Zürich is cold."
STEPS = 6


@pytest.fixture(scope="module")
def engine():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scaled_up(families(window=4, lm_head=True)["llama (GQA)"]())
    # No end-of-text token: every run here ends at max_new_tokens or a stop, whatever the weights.
    model.generation_config.eos_token_id = []
    return attnscope.load(model, byte_level_bpe(), device="cpu")


def test_generate_shows_prompt_and_output_with_the_runs_exact_rows(engine, monkeypatch):
    seen = []  # every value `tokens` took once the generation started
    niceness = []  # of the thread that set it: the generation's, behind the page (picture.behind_the_page)
    original = attnscope.GenerationWidget.start

    def observed(change):
        seen.append(list(change["new"]))
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    def start(widget):
        widget.observe(observed, names="tokens")
        return original(widget)

    monkeypatch.setattr(attnscope.GenerationWidget, "start", start)
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=STEPS, chat=False)
    try:
        run = widget.wait(timeout=120)
        assert not widget.generating and run.finish == "max_new_tokens" and run.steps == STEPS
        expected = engine_generate(engine, PROMPT, STEPS, chat=False)
        assert run.new_ids == expected.new_ids
        long = run.attention
        assert widget.long_context and widget.view == "text"
        assert widget.tokens == long.labels and len(widget.tokens) == len(run.prompt_ids) + STEPS
        # Each step was pushed: the tokens grew one at a time.
        assert [len(tokens) for tokens in seen] == list(range(len(run.prompt_ids) + 1, len(run.ids) + 1))
        if hasattr(os, "getpriority"):
            assert min(niceness) >= max(5, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        # The newest token is selected; its row (and another's) is the run's exact row.
        assert widget.focus_token == len(run.ids) - 1
        for token in (len(run.ids) - 1, 3):
            content, buffers = ask(widget, "attention_rows", layer=1, head=2, token=token, direction="from")
            assert "error" not in content and content["result_id"] == widget.result_id
            assert torch.allclose(values(content, buffers), long.attention_rows(1, 2, [token])[0], atol=1e-6)
        assert widget.notice.splitlines()[0] == f"Generated greedily: {STEPS} new tokens, as many as max_new_tokens={STEPS} allows."
        # The Analysis tab's sinks, read a step at a time, are those of the whole run.
        whole = pl.analysis_payload(attnscope.attention_sinks(long, progress=False), long.n_layers, long.n_heads)
        assert [m["key"] for m in widget.analysis["measures"]] == [m["key"] for m in whole["measures"]]
        for shown, expected in zip(widget.analysis["measures"], whole["measures"], strict=True):
            assert torch.allclose(torch.tensor(shown["values"], dtype=torch.float64),
                                  torch.tensor(expected["values"], dtype=torch.float64), atol=1e-6), shown["key"]
        assert repr(widget).endswith(f"text view, {STEPS} new tokens, max_new_tokens)")
        # What a notebook keeps of the display for a reader without the widget: what the run is, not
        # how far it was when shown (a saved notebook said "0 new tokens, generating").
        data = widget._repr_mimebundle_()
        data = data[0] if isinstance(data, tuple) else data
        assert "application/vnd.jupyter.widget-view+json" in data
        assert data["text/plain"] == (f"GenerationWidget({run.model_name}, a prompt of {len(run.prompt_ids)} tokens, at most "
                                      f"{STEPS} new): the live view of attnscope.generate; its picture shows the run as it ended")
    finally:
        widget.close()
    assert not widget._thread.is_alive()


def test_stop_keeps_the_text_so_far_and_leaves_nothing_running(engine):
    threads = threading.active_count()
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=200, chat=False)
    try:
        while widget.generation.steps < 2:
            assert widget.generating
            widget._done.wait(0.01)
        at = widget.generation.steps
        run = widget.stop(timeout=60)
        assert run.finish == "stopped" and run.stopped and 2 <= run.steps < 200
        # Within one step of the stop: the step under way when it came (and one that ended while
        # `at` was read) is kept, no other.
        assert run.steps <= at + 2, (at, run.steps)
        assert not widget.generating and not widget._thread.is_alive() and threading.active_count() == threads
        assert widget.tokens == run.attention.labels and len(widget.tokens) == len(run.ids)
        assert widget.notice.splitlines()[0] == f"Generated greedily: {run.steps} new tokens of at most 200, stopped."
        assert widget.wait() is run
    finally:
        widget.close()


def test_shown_by_a_notebook_page_the_first_step_waits_for_the_pages_first_drawing(engine, monkeypatch):
    """At 8,160 tokens the first new token, made while the page was still drawing the prompt,
    waited behind that drawing (105-128 ms against ~30): a page's widget starts writing once the
    page says its first drawing is on screen ("painted"), or after PAINT_WAIT_S without it."""
    from attnscope.widget import generation_widget

    monkeypatch.setattr(generation_widget, "page_loop", lambda: object())  # a cell a notebook page sent
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=3, chat=False)
    try:
        assert not widget._done.wait(0.3) and widget.generation.steps == 0 and widget.generating
        widget._channel._receive(widget, {"kind": "event", "type": "painted"}, [])
        assert widget.wait(timeout=60).steps == 3
    finally:
        widget.close()
    def writes_all_three(timeout: float) -> None:
        widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=3, chat=False)
        try:
            assert widget.wait(timeout=timeout).steps == 3
        finally:
            widget.close()

    # No "painted" (a page that never draws, hidden): it starts PAINT_WAIT_S later all the same.
    monkeypatch.setattr(generation_widget, "PAINT_WAIT_S", 0.2)
    writes_all_three(60)
    # A cell no page sent (nbconvert, a console) does not wait: no page will say it drew.
    monkeypatch.setattr(generation_widget, "page_loop", lambda: None)
    monkeypatch.setattr(generation_widget, "PAINT_WAIT_S", 60)
    writes_all_three(30)


def test_the_pages_stop_event_stops_it_and_closing_a_widget_stops_its_generation(engine):
    first = attnscope.generate(PROMPT, model=engine, max_new_tokens=200, chat=False)
    second = attnscope.generate(PROMPT, model=engine, max_new_tokens=200, do_sample=True, temperature=0.7,
                                top_p=0.9, seed=4, chat=False)
    try:
        first._channel._receive(first, {"kind": "event", "type": "stop"}, [])
        run = first.wait(timeout=60)
        assert run.finish == "stopped" and not first.generating
        second.close()  # the other generation, alongside, ends with its widget
        assert not second._thread.is_alive() and second.generation.finish in ("stopped", None)
        assert second.generation.settings.seed == 4
    finally:
        first.close()
        second.close()


def test_the_pages_stop_keeps_the_tokens_it_showed_and_a_wrong_count_keeps_all(engine):
    """The page's Stop says how many new tokens it showed: the steps made while the click
    travelled are dropped, rows and all, so the text stays as the reader saw it. A count that is
    not one of the run's (text, a bool, a fraction, below 0, beyond what was made) keeps every token."""
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=200, chat=False)
    try:
        while widget.generation.steps < 4:
            widget._done.wait(0.01)
        widget._channel._receive(widget, {"kind": "event", "type": "stop", "shown": 2}, [])
        run = widget.wait(timeout=60)
        assert (run.finish, run.steps) == ("stopped", 2) and not widget.generating
        assert len(widget.tokens) == len(run.prompt_ids) + 2 == len(run.ids)
        assert widget.notice.splitlines()[0] == "Generated greedily: 2 new tokens of at most 200, stopped."
        shorter = engine_generate(engine, PROMPT, 2, chat=False)
        assert run.new_ids == shorter.new_ids and widget.tokens == shorter.attention.labels
        assert widget.focus_token == len(run.ids) - 1
        content, buffers = ask(widget, "attention_rows", layer=1, head=2, token=len(run.ids) - 1, direction="from")
        assert torch.allclose(values(content, buffers), shorter.attention.attention_rows(1, 2, [len(run.ids) - 1])[0], atol=1e-6)
    finally:
        widget.close()
    for shown in ("2", True, 2.5, -1, 10**9, None):
        widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=200, chat=False)
        try:
            while widget.generation.steps < 3:
                widget._done.wait(0.01)
            widget._channel._receive(widget, {"kind": "event", "type": "stop", "shown": shown}, [])
            assert widget.wait(timeout=60).steps >= 3, shown
        finally:
            widget.close()


def test_the_notice_names_the_sampling_settings(engine):
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=3, do_sample=True, temperature=0.7, top_p=0.9,
                                seed=4, chat=False)
    try:
        run = widget.wait(timeout=60)
        assert run.finish == "max_new_tokens"
        assert widget.notice.splitlines()[0] == ("Generated by sampling (temperature 0.7, top-p 0.9, seed 4): 3 new tokens, "
                                                   "as many as max_new_tokens=3 allows.")
        assert run.new_ids == engine_generate(engine, PROMPT, 3, do_sample=True, temperature=0.7, top_p=0.9, seed=4,
                                              chat=False).new_ids
    finally:
        widget.close()


def test_bad_arguments_raise_naming_the_parameter_before_anything_is_shown(engine, monkeypatch):
    shown = []
    monkeypatch.setattr("attnscope.widget.generation_widget.shown", lambda widget: shown.append(widget) or widget)
    threads = threading.active_count()
    for kwargs, match in [
        (dict(max_new_tokens=0), "max_new_tokens=0 is too small"),
        (dict(do_sample=True, temperature=0), "temperature=0 with do_sample=True"),
        (dict(top_p=1.5), r"top_p=1.5 is outside \(0, 1\]"),
        (dict(seed=-1), "seed=-1"),
        (dict(chat=True), "chat=True, but .* no chat template"),
        (dict(model=None), "model=None: generate needs a causal language model or an encoder-decoder"),
        (dict(view="nope"), "Unknown view 'nope'"),
        # A short run's view: named as not a generation's, with those it has (it was listed as
        # available, then refused as "would take 1.0 MB ... a shorter text").
        (dict(view="neuron"), r"A generation has no view 'neuron'; available: head, model, text, map, analysis\.$"),
    ]:
        with pytest.raises(InputError, match=match):
            attnscope.generate(PROMPT, **{"model": engine, "chat": False, **kwargs})
    with pytest.raises(InputError, match="prompt=.* is empty"):
        attnscope.generate("  ", model=engine, chat=False)
    with pytest.raises(InputError, match=r"^prompt=None: give the text the model continues, as a str\.$"):  # not "is empty"
        attnscope.generate(None, model=engine, chat=False)
    assert shown == [] and threading.active_count() == threads


def test_the_settings_are_refused_before_a_model_loads_and_a_negative_temperature_even_when_greedy(monkeypatch):
    """A newcomer's trial: max_new_tokens=0 waited 16 s for the model to load before its refusal,
    and temperature=-1 with greedy decoding was taken silently."""
    loads = []
    monkeypatch.setattr("attnscope.widget.generation_widget.resolve_engine", lambda *a: loads.append(a))
    for kwargs, match in [(dict(max_new_tokens=0), "max_new_tokens=0 is too small"),
                          (dict(temperature=-1), "temperature=-1 is below 0"),
                          (dict(top_p=2), r"top_p=2 is outside \(0, 1\]")]:
        with pytest.raises(InputError, match=match):
            attnscope.generate(PROMPT, model="smollm2", **kwargs)
    assert loads == []


def test_the_model_leaves_as_it_came(engine):
    model = engine.model
    model.train()

    with torch.inference_mode():  # transformers installs its own output hooks on a first call
        model(input_ids=torch.tensor([[1, 2, 3]]))
    before = model_state(model)
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=3, chat=False)
    widget.wait(timeout=60)
    widget.close()
    assert model_state(model) == before
    model.eval()


def test_a_token_or_view_the_reader_chose_mid_way_is_kept_while_it_writes(engine):
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=200, chat=False)
    try:
        while widget.generation.steps < 1:
            widget._done.wait(0.01)
        widget.focus_token, widget.view = 2, "map"  # from Python, as the page's writes are taken too
        steps = widget.generation.steps
        while widget.generation.steps < steps + 2:
            widget._done.wait(0.01)
        run = widget.stop(timeout=60)
        assert (widget.focus_token, widget.view) == (2, "map") and len(widget.tokens) == len(run.ids)
    finally:
        widget.close()


def grown_by(lists: dict, grown: dict) -> dict:
    """The page's side of a step (js/transport/growing.js), on its own: each list held at the
    step's `before` length is, from `start` on, its tail; text counted in UTF-16 code units."""
    lists = dict(lists)
    for name, (start, tail, before) in grown.items():
        value = lists[name]
        if isinstance(value, str):
            units = value.encode("utf-16-le", "surrogatepass")
            assert len(units) // 2 == before, name
            lists[name] = (units[:2 * start] + tail.encode("utf-16-le", "surrogatepass")).decode("utf-16-le", "surrogatepass")
        else:
            assert len(value) == before, name
            lists[name] = value[:start] + tail
    return lists


def test_each_step_sends_what_it_changed_of_the_lists_and_the_end_sends_them_whole(engine, monkeypatch):
    sent = []  # (the message's state, the kernel's lists when it was sent)
    held = {}  # the lists as the page had them when the generation started
    original_start, original_send = attnscope.GenerationWidget.start, attnscope.GenerationWidget._send

    def start(widget):
        held.update({name: getattr(widget, name) for name in GROWING})
        return original_start(widget)

    def send(widget, msg, buffers=None):
        if msg.get("method") == "update":
            sent.append((msg["state"], {name: getattr(widget, name) for name in GROWING}))
        return original_send(widget, msg, buffers)

    monkeypatch.setattr(attnscope.GenerationWidget, "start", start)
    monkeypatch.setattr(attnscope.GenerationWidget, "_send", send)
    widget = attnscope.generate(PROMPT + " 東京 🙂", model=engine, max_new_tokens=STEPS, chat=False)
    try:
        widget.wait(timeout=120)
        steps = [(state, lists) for state, lists in sent if state.get("grown")]
        assert len(steps) == STEPS
        lists = dict(held)
        for state, kernel_lists in steps:
            # A step's message carries none of the lists: at 8k tokens they were ~190 kB of it.
            assert not set(GROWING) & set(state)
            lists = grown_by(lists, state["grown"])
            assert lists == kernel_lists
        assert lists == {name: getattr(widget, name) for name in GROWING}
        # The run's end: `grown` emptied, then the lists whole (what a page opened now reads), and
        # the Analysis tab's table, which steps leave behind while that tab is closed.
        assert sent[-2][0].get("grown") == {} and not widget.generating
        assert sent[-1][0] == {**{name: getattr(widget, name) for name in GROWING}, "analysis": widget.analysis}
        # A view that missed steps asks for the lists: the kernel's, with their run's id.
        content, _ = ask(widget, "growing_lists")
        assert content == {**lists, "result_id": widget.result_id, "kind": "reply", "type": "growing_lists", "id": 7}
    finally:
        widget.close()


def test_steps_send_the_analysis_tabs_table_only_while_that_tab_is_open(engine, monkeypatch):
    """The sinks table grows each step, and was most of a step's message (14.6 kB of 8,160
    tokens'): sent by a step only while the Analysis tab is open, else when it opens or at the end."""
    sent = []

    def send(widget, msg, buffers=None):
        if msg.get("method") == "update":
            sent.append((msg["state"], widget.analysis, widget.generation.steps))
        return original_send(widget, msg, buffers)

    original_send = attnscope.GenerationWidget._send
    monkeypatch.setattr(attnscope.GenerationWidget, "_send", send)
    for view in ("text", "analysis"):
        sent.clear()
        widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=STEPS, chat=False, view=view)
        try:
            widget.wait(timeout=120)
            steps = [(state, table) for state, table, _ in sent if state.get("grown")]
            assert len(steps) == STEPS and widget.analysis["kind"] == "attention_sinks"
            if view == "analysis":  # open: each step's table, as the kernel has it
                assert all(state["analysis"] == table for state, table in steps)
                assert "analysis" not in sent[-1][0]  # nothing behind at the end
            else:
                assert not any("analysis" in state for state, _ in steps)
                assert sent[-1][0]["analysis"] == widget.analysis  # the end catches the page up
        finally:
            widget.close()
    # Opened mid-run (the run held after its second step): the table as it is then, at once.
    sent.clear()
    at_two, go_on = threading.Event(), threading.Event()
    original_start = attnscope.GenerationWidget.start

    def start(widget):
        steps = widget._steps

        def held():
            for run in steps:
                if run.steps == 3:  # the second step shown: hold the third
                    at_two.set()
                    go_on.wait(60)
                yield run
        widget._steps = held()
        return original_start(widget)

    monkeypatch.setattr(attnscope.GenerationWidget, "start", start)
    widget = attnscope.generate(PROMPT, model=engine, max_new_tokens=STEPS, chat=False)
    try:
        assert at_two.wait(60) and widget.generating
        widget.view = "analysis"
        opened = [(state, table) for state, table, _ in sent if set(state) == {"analysis"}]
        assert len(opened) == 1 and opened[0][0]["analysis"] == opened[0][1] and widget.generating
        go_on.set()
        widget.wait(timeout=120)
    finally:
        go_on.set()
        widget.close()


def test_a_steps_growth_counts_text_in_utf16_code_units_and_finds_a_changed_entry():
    assert growth("a🙂", "a🙂b") == [3, "b", 3]  # the emoji is two units on the page
    assert growth("naï", "naïve") == [3, "ve", 3]
    assert growth(["a", ""], ["a", "🙂", ""]) == [1, ["🙂", ""], 2]  # a split character completed
    assert growth(["a", "b"], ["a", "b", "c"]) == [2, ["c"], 2]
    assert grown_by({"text": "x🙂y"}, {"text": growth("x🙂y", "x🙂yz")}) == {"text": "x🙂yz"}
