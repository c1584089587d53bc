"""The page is untrusted input (issue 31): what a view sends, a buggy or hostile page included, is
checked against the kernel's own run; a change that fails or is interrupted is put back whole; a
closed widget stays closed. Writes go through ipywidgets' own `set_state` (what `_handle_msg` calls
for a view's update) and requests through the widget's Channel, as in a notebook."""

from __future__ import annotations

import gc
import json
import math
import time
import warnings

import pytest
import torch
import transformers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnscope
from attnscope import InputError
from attnscope.engine.results import LongAttentionResult
from attnscope.widget import payloads as pl
from attnscope.widget.attention_widget import AttentionWidget
from attnscope.widget.contract import contract_traits, page_writable
from attnscope.widget.messages import MESSAGES
from attnscope.widget.views import LONG_VIEWS, SHORT_VIEWS

SMALL = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
KERNEL_WRITTEN = sorted(name for name in contract_traits(AttentionWidget) if name not in page_writable(AttentionWidget))


def page_writes(widget: AttentionWidget, **state) -> None:
    """An update as a view sends it, through ipywidgets' own message handler."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def ask(widget: AttentionWidget, content: dict) -> list[dict]:
    """A custom message as a view sends it; → the replies the kernel sent."""
    sent = []
    widget.send = lambda reply, buffers=None: sent.append(reply)
    widget._channel._receive(widget, content, [])
    return sent


def assert_consistent(widget: AttentionWidget) -> None:
    """What the views are given agrees with itself and with the kernel's own run."""
    result, token_result = widget.result, widget.token_result
    assert (widget.n_layers, widget.n_heads) == (result.n_layers, result.n_heads)
    assert 0 <= widget.layer < widget.n_layers
    assert len(set(widget.heads)) == len(widget.heads) and all(0 <= h < widget.n_heads for h in widget.heads)
    assert widget.text == result.text and widget.text_b == result.text_b
    assert len(widget.tokens) == len(pl.shown_tokens(result, True))
    assert 0 <= widget.neuron_head < token_result.n_heads and 0 <= widget.neuron_query < len(token_result.tokens)
    # A short run may mark no token (-1); a long run always has one selected.
    assert (0 if widget.long_context else -1) <= widget.focus_token < len(widget.tokens) and -1 <= widget.focus_head < widget.n_heads
    assert widget.masked_heads == widget._masks
    if isinstance(result, LongAttentionResult):
        assert widget.long_context and widget.view in LONG_VIEWS
    else:
        assert not widget.long_context and widget.view in SHORT_VIEWS
        assert widget.attention["layer"] == widget.layer
        assert widget.attention["shape"] == [widget.n_heads, len(widget.tokens), len(widget.key_tokens or widget.tokens)]
        if widget.view == "rollout":
            assert widget.rollout, "the rollout view would say loading… for good"
    if widget.view == "model":
        assert widget.thumbnails, "the model view would say loading… for good"


@pytest.fixture
def widget(default_model):
    w = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    yield w
    w.close()


# 1. What only the kernel writes

def test_the_page_cannot_write_what_only_the_kernel_writes(widget):
    page_writes(widget, n_layers=99, layer=50)
    assert (widget.n_layers, widget.layer) == (6, 0)
    assert "n_layers" in widget.error and "only the kernel" in widget.error
    assert_consistent(widget)


@pytest.mark.parametrize("name", KERNEL_WRITTEN)
def test_every_kernel_written_trait_is_refused_to_the_page(widget, name):
    before = getattr(widget, name)
    sent = []
    widget.send_state = lambda key=None: sent.append(key)
    page_writes(widget, **{name: "not what the kernel wrote"})
    assert getattr(widget, name) == before or name == "error"
    assert name in widget.error and "not what the kernel wrote" not in widget.error
    assert name in sent[0], "the page's copy is set back to the kernel's"


def test_a_page_value_is_checked_against_the_kernels_run_and_put_back(widget):
    payload = widget.attention
    page_writes(widget, layer=50, heads=[0, 1])
    assert "layer=50" in widget.error
    assert widget.layer == 0 and widget.heads == list(range(12)), "the whole write is put back"
    assert widget.attention is payload
    page_writes(widget, layer=3)  # the next write works
    assert widget.layer == 3 and widget.attention["layer"] == 3
    assert_consistent(widget)


@pytest.mark.parametrize("write", [{"layer": False}, {"layer": True}, {"heads": [False, True]}, {"neuron_head": True}],
                         ids=["layer false", "layer true", "heads as booleans", "neuron_head true"])
def test_true_and_false_are_not_numbers(widget, write):
    """traitlets' Int takes a bool, and keeps one equal to the old value (layer 0, false) unchecked:
    an edit in the same write then ran with layer=False and left its run half shown (the fuzz)."""
    page_writes(widget, request={"id": 1, "text": "A dog barked.", "text_b": None}, **write)
    assert "true or false" in widget.error and widget.text == "A dog barked."
    assert all(type(getattr(widget, name)) is not bool for name in write)
    assert_consistent(widget)


def test_unknown_names_and_a_write_that_is_not_a_dict_do_nothing(widget):
    page_writes(widget, no_such_trait=1, _esm="alert(1)")
    assert "no_such_trait" in widget.error
    widget.set_state(["not", "a", "dict"])
    assert_consistent(widget)


def test_a_huge_head_list_is_refused_by_its_size(widget):
    start = time.process_time()
    page_writes(widget, heads=list(range(1_000_000)))
    assert time.process_time() - start < 0.5
    assert "heads" in widget.error and widget.heads == list(range(12))
    page_writes(widget, masked_heads=[list(range(1_000_000))])
    assert "masked_heads" in widget.error and widget.masked_heads == []


# 3. A change that fails is put back

@pytest.fixture
def long_widget(default_model):
    w = attnscope.AttentionWidget("The cat sat on the mat. " * 4, model=default_model, attention="on_demand")
    yield w
    w.close()


def test_words_on_a_long_run_is_refused_and_put_back(long_widget):
    assert long_widget.long_context
    with pytest.raises(InputError, match="Words"):
        long_widget.word_level = True
    assert long_widget.word_level is False
    page_writes(long_widget, word_level=True)
    assert long_widget.word_level is False and "Words" in long_widget.error
    long_widget.update("Another text, still on demand.")  # later updates work
    assert long_widget.text == "Another text, still on demand." and long_widget.error == ""
    assert_consistent(long_widget)


def test_a_rejected_mask_is_put_back_with_the_masks(widget):
    widget.masked_heads = [[1, 2]]
    with pytest.raises(InputError, match="99"):
        widget.masked_heads = [[0, 99]]
    assert widget.masked_heads == [[1, 2]] == widget._masks
    page_writes(widget, masked_heads=[[0, 99]])
    assert widget.masked_heads == [[1, 2]] == widget._masks and "99" in widget.error
    assert_consistent(widget)


def test_masks_on_a_long_run_are_refused(long_widget):
    page_writes(long_widget, masked_heads=[[0, 0]])
    assert long_widget.masked_heads == [] and "Masking heads" in long_widget.error
    assert_consistent(long_widget)


# 4. An interrupt leaves nothing half set

STAGES = [
    # (what is interrupted, module attribute patched, the action that runs it)
    ("a layer switch", "layer_payload", lambda w: setattr(w, "layer", 2)),
    ("the model view's thumbnails", "thumbnails_payload", lambda w: setattr(w, "view", "model")),
    ("the rollout", "rollout_payload", lambda w: setattr(w, "view", "rollout")),
    ("the words", "displayed", lambda w: setattr(w, "word_level", True)),
    ("an edit's run", "engine_run", lambda w: w.update("A dog barked.")),
    ("an edit's payloads", "layer_payload", lambda w: w.update("A dog barked.")),
    ("an edit's notices", "result_notice", lambda w: w.update("A dog barked.")),
    ("a mask's rerun", "mask_summary", lambda w: setattr(w, "masked_heads", [[0, 1]])),
]


def interrupt_once(monkeypatch, target, name: str) -> None:
    original = getattr(target, name)
    calls = []

    def interrupted(*args, **kwargs):
        if not calls:
            calls.append(1)
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, interrupted)


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
@pytest.mark.parametrize("stage, name, action", STAGES, ids=[s[0] for s in STAGES])
def test_an_interrupt_in_any_stage_leaves_the_widget_whole_and_the_next_call_works(
        default_model, monkeypatch, stage, name, action):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    if widget.view != "model" and stage != "the model view's thumbnails":
        widget.view = "model"  # thumbnails are remade with every run: an interrupt must not leave them "loading…"
    before = {name: getattr(widget, name) for name in ("text", "layer", "view", "word_level", "masked_heads", "result_id")}
    if name == "engine_run":
        interrupt_once(monkeypatch, type(default_model), "run")
    else:
        interrupt_once(monkeypatch, pl, name)
    with pytest.raises(KeyboardInterrupt):
        action(widget)
    assert {name: getattr(widget, name) for name in before} == before
    assert_consistent(widget)
    action(widget)  # the same call again works
    assert_consistent(widget)
    widget.close()


LONG_STAGES = [
    ("the model view's thumbnails", "long_thumbnails_payload", lambda w: setattr(w, "view", "model")),
    ("an edit's notice", "long_notice", lambda w: w.update("The dog sat on the mat. " * 4)),
    ("an edit's sink table", "analysis_payload", lambda w: w.update("The dog sat on the mat. " * 4)),
]


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
@pytest.mark.parametrize("stage, name, action", LONG_STAGES, ids=[s[0] for s in LONG_STAGES])
def test_an_interrupt_in_a_long_runs_stage_leaves_it_whole(long_widget, monkeypatch, stage, name, action):
    before = {name: getattr(long_widget, name) for name in ("text", "view", "result_id", "analysis", "tokens")}
    interrupt_once(monkeypatch, pl, name)
    with pytest.raises(KeyboardInterrupt):
        action(long_widget)
    assert {name: getattr(long_widget, name) for name in before} == before
    assert_consistent(long_widget)
    action(long_widget)
    assert_consistent(long_widget)


@pytest.mark.parametrize("type_, name, params", [
    ("attention_rows", "long_rows_payload", {"layer": 0, "head": -1, "token": 3, "direction": "from"}),
    ("attention_tile", "long_tile_payload", {"layer": 0, "head": 0, "rows": [0, 8], "cols": [0, 8], "bins": 8}),
    ("attention_window", "long_window_payload", {"layer": 0, "token": 3}),
])
def test_an_interrupted_long_request_is_answered_and_the_next_works(long_widget, monkeypatch, type_, name, params):
    interrupt_once(monkeypatch, pl, name)
    assert ask(long_widget, {"kind": "request", "type": type_, "id": 1, **params})[0]["error"] == "interrupted"
    assert "error" not in ask(long_widget, {"kind": "request", "type": type_, "id": 2, **params})[0]


def test_an_interrupted_page_write_is_put_back_and_said(widget, monkeypatch):
    interrupt_once(monkeypatch, pl, "thumbnails_payload")
    page_writes(widget, view="model")
    assert widget.view == "head" and "Interrupted" in widget.error
    page_writes(widget, view="model")
    assert widget.view == "model" and widget.thumbnails and widget.error == "", "said until a write works"
    assert_consistent(widget)


def test_an_edits_error_stays_while_the_view_changes(widget):
    page_writes(widget, request={"id": 1, "text": "", "text_b": None})
    error = widget.error
    assert error
    page_writes(widget, layer=2)
    assert widget.error == error


def test_a_write_that_fails_halfway_puts_back_what_its_first_part_did(widget, monkeypatch):
    """Words go on (a new word-level run is shown), then the model view's thumbnails fail: the
    whole write is put back, the run shown before included, not only the traits written."""
    interrupt_once(monkeypatch, pl, "thumbnails_payload")
    tokens, attention = widget.tokens, widget.attention
    page_writes(widget, word_level=True, view="model")
    assert (widget.word_level, widget.view) == (False, "head") and "Interrupted" in widget.error
    assert widget.tokens == tokens and widget.attention is attention
    assert_consistent(widget)


def test_an_interrupted_request_is_answered(default_model, monkeypatch):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    interrupt_once(monkeypatch, pl, "neuron_store")
    replies = ask(widget, {"kind": "request", "type": "neuron", "id": 3, "layer": 0, "head": 0, "query": 1})
    assert replies == [{"kind": "reply", "type": "neuron", "id": 3, "error": "interrupted"}]
    replies = ask(widget, {"kind": "request", "type": "neuron", "id": 4, "layer": 0, "head": 0, "query": 1})
    assert "error" not in replies[0]
    widget.close()


def test_a_write_and_a_request_are_interruptible_where_the_kernel_left_sigint_ignored(default_model, monkeypatch):
    """ipykernel 7.4 handles a comm message that comes while another is being handled with SIGINT
    still ignored (seen in JupyterLab: the page's layer request just before a click on Model left
    that click's slow step deaf to the interrupt). The widget's work turns it on while it runs."""
    import os
    import signal
    import threading

    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    seen = []

    def slow_and_interrupted(*args, **kwargs):
        seen.append(signal.getsignal(signal.SIGINT))
        os.kill(os.getpid(), signal.SIGINT)  # the kernel's interrupt, delivered while the step runs
        time.sleep(5)
        raise AssertionError("the interrupt did not reach the step")

    # As ipykernel leaves it between messages: set back from the saved value, the plain number 1.
    previous = signal.signal(signal.SIGINT, int(signal.SIG_IGN))
    try:
        monkeypatch.setattr(pl, "thumbnails_payload", slow_and_interrupted)
        page_writes(widget, view="model")
        assert widget.view == "head" and widget.error.startswith("Interrupted")
        monkeypatch.setattr(pl, "neuron_store", slow_and_interrupted)
        replies = ask(widget, {"kind": "request", "type": "neuron", "id": 3, "layer": 0, "head": 0, "query": 1})
        assert replies == [{"kind": "reply", "type": "neuron", "id": 3, "error": "interrupted"}]
        assert seen == [signal.default_int_handler] * 2
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # set back after the work
        # Outside the main thread nothing is touched (a signal handler can only be set there).
        from attnscope.widget.messages import interruptible

        inside = []
        thread = threading.Thread(target=lambda: inside.append(interruptible().__enter__() or signal.getsignal(signal.SIGINT)))
        thread.start()
        thread.join()
        assert inside == [signal.SIG_IGN]
    finally:
        signal.signal(signal.SIGINT, previous)
        widget.close()


# 5. Closed is final

def test_a_closed_widget_does_not_come_back(default_model):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    widget.close()
    with pytest.raises(InputError, match="closed"):
        widget.update("Again.")
    with pytest.raises(InputError, match="closed"):
        widget.text = "Again."
    with pytest.raises(InputError, match="closed"):
        widget.layer = 2
    with pytest.raises(InputError, match="closed"):
        widget.view = "model"
    page_writes(widget, request={"id": 5, "text": "Again.", "text_b": None}, layer=3)
    replies = ask(widget, {"kind": "request", "type": "neuron", "id": 3, "layer": 0, "head": 0, "query": 1})
    assert "closed" in replies[0]["error"]
    assert not {"_drawn_run", "_per_token_run", "_computed_run"} & set(widget.__dict__), "the freed tensors stay freed"
    assert widget.thumbnails == {} and widget.attention == {}


# 6. and 7. Edits: malformed, stale

@pytest.mark.parametrize("bad_id", ["abc", None, -1, 0, 1.5, True, 2**53, [1]])
def test_a_malformed_edit_id_is_refused_and_the_next_edit_answers(widget, bad_id):
    page_writes(widget, request={"id": 1, "text": "A dog barked.", "text_b": None})
    assert widget.result_id == 1
    page_writes(widget, request={"id": bad_id, "text": "Ignored.", "text_b": None})
    assert widget.result_id == 1 and widget.text == "A dog barked."
    assert "id" in widget.error
    page_writes(widget, request={"id": 2, "text": "A bird sang.", "text_b": None})
    assert widget.result_id == 2 and widget.text == "A bird sang." and widget.error == ""


@pytest.mark.parametrize("request_", [{"id": 3, "text": 5}, {"id": 3, "text": "x", "text_b": 7}, {"id": 3, "text": "x", "rm": 1}],
                         ids=["text a number", "text_b a number", "an unknown key"])
def test_a_malformed_edit_is_refused_before_any_work(widget, request_, monkeypatch):
    monkeypatch.setattr(type(widget.engine), "run", lambda *a, **k: pytest.fail("a malformed edit ran the model"))
    page_writes(widget, request=request_)
    assert widget.error and widget.result_id == 0


def test_an_edits_text_is_not_kept_in_the_request_after_it_is_answered(widget):
    """A refused text (a lone surrogate) kept in `request` would make each later send of the
    whole state (a second view, a reopened page) fail to encode."""
    page_writes(widget, request={"id": 1, "text": "a\ud800b", "text_b": None})
    assert "surrogate" in widget.error and widget.result_id == 1
    assert widget.request == {}
    json.dumps(widget.get_state(), default=str).encode("utf-8")


def test_save_html_refuses_a_notebook_path_before_building_the_page(widget, tmp_path, monkeypatch):
    import attnscope.widget.export

    notebook = tmp_path / "analysis.ipynb"
    notebook.write_text("{}")
    monkeypatch.setattr(attnscope.widget.export, "widget_html", lambda *a, **k: pytest.fail("the page was built"))
    with pytest.raises(InputError, match="analysis.ipynb"):
        widget.save_html(notebook)
    assert notebook.read_text() == "{}"


def test_an_edit_older_than_the_answered_one_is_not_run(widget, monkeypatch):
    page_writes(widget, request={"id": 5, "text": "A dog barked.", "text_b": None})
    monkeypatch.setattr(type(widget.engine), "run", lambda *a, **k: pytest.fail("a stale edit ran the model"))
    page_writes(widget, request={"id": 4, "text": "Stale.", "text_b": None})
    assert widget.result_id == 5 and widget.text == "A dog barked."


# The fuzz test: thousands of generated writes and messages

@pytest.fixture(scope="module")
def small_engine(bert_tokenizer):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.BertModel(transformers.BertConfig(vocab_size=30522, **SMALL))
    return attnscope.load(model, bert_tokenizer, device="cpu")


NAMES = sorted(contract_traits(AttentionWidget)) + ["no_such_trait", "_esm", "comm", "keys"]
odd_numbers = st.sampled_from([math.nan, math.inf, -math.inf, 2**63, -(2**63), 2**53, 1e308, -0.0, 0.5])
odd_text = st.sampled_from(["", "\ud800", "a\udfffb", "\x00", "東京 🙂 café", "<img src=x onerror=alert(1)>", "x" * 100_000])
huge = st.sampled_from([100_000, 1_000_000]).map(lambda n: list(range(n)))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 20), st.integers(), odd_numbers, st.floats(), st.text(max_size=20), odd_text)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
                      max_leaves=8)
values = st.one_of(values, huge, st.lists(st.lists(st.integers(-2, 8), min_size=2, max_size=2), max_size=5))
writes = st.dictionaries(st.sampled_from(NAMES), values, min_size=1, max_size=3)
# ("next", k): the answered id + k, resolved when sent, so that many edits are new and run.
edit_ids = st.one_of(st.integers(1, 3).map(lambda k: ("next", k)), st.integers(-2, 10**6), values)
edit_texts = st.one_of(st.sampled_from(["A dog barked.", "Café naïve — 東京は晴れ 🙂."]), st.text(min_size=1, max_size=40),
                       odd_text, values)
edits = st.fixed_dictionaries({"id": edit_ids, "text": edit_texts},
                              optional={"text_b": st.one_of(st.none(), st.text(max_size=10), values)})
requests = st.fixed_dictionaries(
    {"kind": st.sampled_from(["request", "event", "reply", "bogus"]),
     "type": st.one_of(st.sampled_from(sorted(MESSAGES)), st.text(max_size=5)), "id": st.one_of(st.integers(), values)},
    optional={name: values for name in ("layer", "head", "query", "token", "direction", "rows", "cols", "bins", "reduce", "format")},
)
inputs = st.one_of(
    writes.map(lambda w: ("write", w)),
    edits.map(lambda e: ("write", {"request": e})),
    st.tuples(edits, values).map(lambda ev: ("write", {"request": ev[0], "layer": ev[1]})),
    requests.map(lambda r: ("message", r)),
)

FUZZ: dict = {"inputs": 0}
# Every request a view may send is answered once (messages.MESSAGES declares them).
VIEW_REQUESTS = {t for t, m in MESSAGES.items() if m.kind == "request" and m.sender == "view"}


@pytest.fixture(scope="module", autouse=True)
def report_fuzz():
    yield
    if FUZZ["inputs"]:
        print(f"\nfuzz: {FUZZ}")  # the counts for the closing note (pytest -s)  # the counts for the closing note (pytest -s)


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(steps=st.lists(inputs, min_size=8, max_size=15))
def test_fuzz_the_page_never_breaks_the_kernel(small_engine, steps):
    """About 2,500 generated writes and messages, in sequences of 8 to 15 to one new widget each.
    Nothing escapes a handler, every request is answered once, each answer takes under 50 ms of
    CPU (a model run: the run's time, under 1 s), and the state is consistent after each step."""
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=small_engine)
    runs = []
    run = widget.engine.run
    widget.engine.run = lambda *args, **kwargs: runs.append(True) or run(*args, **kwargs)
    try:
        for kind, content in steps:
            fuzz_step(widget, kind, content, runs)
    finally:
        del widget.engine.run  # the module's engine: its own method again
        widget.close()


def fuzz_step(widget: AttentionWidget, kind: str, content: dict, runs: list) -> None:
    edit = content.get("request") if kind == "write" else None
    if isinstance(edit, dict) and isinstance(edit.get("id"), tuple):
        content = {**content, "request": {**edit, "id": widget.result_id + edit["id"][1]}}
    replies: list = []
    widget.send = lambda reply, buffers=None: replies.append(reply)
    runs_before = len(runs)
    # CPU time, so a loaded machine does not make the kernel look slower, and without collecting
    # the garbage that generating millions of test values leaves (not the kernel's).
    gc.disable()
    start = time.process_time()
    try:
        if kind == "write":
            widget.set_state(content)  # what ipywidgets' handler calls: nothing may escape it
        else:
            widget._channel._receive(widget, content, [])
    finally:
        spent = time.process_time() - start
        gc.enable()
    if kind == "message":
        answered = content["kind"] == "request" and content["type"] in VIEW_REQUESTS
        assert len(replies) == (1 if answered else 0)
    # A new edit or mask runs the model (tokenizing a long paste included): its time is the
    # run's, bounded by the text limits; everything else is answered at once.
    ran = len(runs) > runs_before
    FUZZ["inputs"] += 1
    FUZZ["model runs" if ran else "answers"] = FUZZ.get("model runs" if ran else "answers", 0) + 1
    key = "slowest run" if ran else "slowest answer"
    FUZZ[key] = max(FUZZ.get(key, 0.0), spent)
    assert spent < (1.0 if ran else 0.05), f"{spent * 1000:.0f} ms for {kind} {str(content)[:200]}"
    assert_consistent(widget)
    # What goes back to the page can be sent: strict JSON, UTF-8 (no lone surrogate, no NaN).
    json.dumps([replies, widget.error, widget.notice, widget.text, widget.tokens], allow_nan=False).encode("utf-8")
    widget.error.encode("utf-8")
    if widget.result_id > 0 and not widget.error:
        assert widget.text == widget.result.text


def test_the_pages_messages_stay_on_the_kernels_main_shell():
    """ipykernel 7.4 routes a comm's next messages to the subshell its last answer went to
    (JupyterLab 4.6 tags widget messages with one); the channel keeps them on the main shell,
    where the kernel's interrupt reaches and cells do not run beside them."""
    from ipykernel.comm.comm import BaseComm

    from attnscope.widget.messages import on_the_main_shell

    comm = BaseComm(target_name="attnscope-test", primary=False)
    comm._reply_subshell_id = "widgets-subshell"  # as publish_msg records it while answering a tagged message
    comm._reply_subshell_ids["7"] = "widgets-subshell"
    assert comm._reply_subshell_for({"content": {"id": "7"}}, None) == "widgets-subshell"
    comm._reply_subshell_ids["7"] = "widgets-subshell"
    on_the_main_shell(comm)
    comm.publish_msg("comm_msg", data={"content": {"id": "7"}})  # no kernel here: sends nothing, routes as after a send
    assert comm._reply_subshell_for({"content": {"id": "7"}}, None) is None
    assert comm._reply_subshell_for({}, None) is None
    on_the_main_shell(object())  # a comm without ipykernel's routing: left as it is
