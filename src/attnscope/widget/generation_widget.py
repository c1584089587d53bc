"""Watch the model write (issue 48): `attnscope.generate` opens the long-run views on a prompt and
generates into them, a token a step.

The prompt's pass runs in the call, so bad arguments raise before anything is displayed; the
steps then run in a background thread, so the cell ends and the page draws while the kernel
writes (a loop in the cell would hold the comm's messages until it ended). Each step is shown as
any run is (AttentionWidget._apply: widget_state.run_state, taken in one step), with a new
result_id, so the page files its rows under the run they belong to; the text view's token
follows the newest one until the reader chooses one (widget_state._long_run_state).

Two threads touch the widget: the generating one and the kernel's (the page's writes and
requests). A lock keeps them apart: a step is shown whole between two writes of the page.
Stop (the page's "stop" event, or `stop()`) is checked between steps; the text so far stays,
`generating` turns False and the thread ends. Closing the widget stops it too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import traitlets

from .. import checks
from ..analyses.tables import growing_run_analysis
from ..engine.attention_model import AttentionModel
from ..engine.encoder_decoder_long import EncoderDecoderLongResult
from ..engine.engines import resolve_engine
from ..engine.generation import Generation, generation_steps
from ..engine.generation_run import settings_of
from ..errors import AttnscopeError, InputError
from .attention_widget import AttentionWidget
from .contract import GROWING
from .knockout_answers import answer_generation_knockout, generation_knockout_control
from .long_answers import LongAnswers
from .picture import behind_the_page, page_loop, shown
from .views import LONG_VIEWS, VIEW_NAMES
from .widget_state import run_state

PAINT_WAIT_S = 1.0  # the longest a generation's first step waits for the page's first drawing


def generation_notice(run: Generation) -> str:
    """How the run chose its tokens, and how far it got: the notice's first line."""
    settings = run.settings
    how = "greedily" if not settings.do_sample else \
        f"by sampling (temperature {settings.temperature:g}, top-p {settings.top_p:g}, seed {settings.seed})"
    chat = ", the prompt read through the chat template" if settings.chat else ""
    limit = settings.max_new_tokens
    if run.finish is None:
        return f"Generating {how}{chat}: {run.steps} of at most {limit} new tokens so far."
    ending = {"stopped": f" of at most {limit}, stopped", "eos": f" of at most {limit}, ended by the end-of-text token",
              "max_new_tokens": f", as many as max_new_tokens={limit} allows"}.get(run.finish, "")
    return f"Generated {how}{chat}: {run.steps} new tokens{ending}."


def parts_notice(result: Any) -> str:
    """Which attention an encoder-decoder's run shows where (engine/encoder_decoder_long.py): the
    notice's second line; empty for a decoder's run."""
    if not isinstance(result, EncoderDecoderLongResult):
        return ""
    source = ("a source token's row is the encoder's self-attention (its layer of the same number)" if result.encoder_shown
              else "a source token's row is empty: the encoder's layers and heads do not pair with the decoder's")
    return (f"Encoder-decoder: the source's {result.n_source:,} tokens, then the decoder's from its start token. An output "
            "token's row is its cross-attention over the source, then its self-attention over the output up to it "
            f"(each sums to 1); {source}.")


def growth(old: list[str] | str, new: list[str] | str) -> list:
    """[start, tail, before]: `new` is `old` up to `start`, then `tail`, and `before` is old's
    length (the `grown` trait's entry: a page applies it to the lists it holds at that length).
    For a str, lengths count UTF-16 code units, as the page's strings do (an emoji is two)."""
    n = min(len(old), len(new))
    # A step appends (compared in C); else the first entry that differs is looked for.
    start = n if new[:n] == old[:n] else next(i for i in range(n) if old[i] != new[i])
    if isinstance(new, str):
        return [_utf16(new[:start]), new[start:], _utf16(old)]
    return [start, new[start:], len(old)]


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class GenerationWidget(AttentionWidget):
    """The long-run views of a generation that grows: made by attnscope.generate, which starts it.

    `generation` is the run so far (its text, tokens, settings); `wait()` waits for its end,
    `stop()` ends it between two steps, keeping the text so far."""

    def __init__(self, steps: Iterator[Generation], first: Generation, stop: threading.Event,
                 model: AttentionModel | None = None, **kwargs: Any):
        """steps: generation_steps(..., stop=stop) after its first yield, `first`; model: the one
        generating (knockout reruns it once the run ended)."""
        self._generating_model = model
        self._state_lock = threading.RLock()
        self._stop_event = stop
        self._stop_shown: int | None = None  # the new tokens the page showed when its Stop was pressed
        self._done = threading.Event()
        self._painted = threading.Event()  # the page's first drawing is on screen ("painted")
        self._page_shows = False  # a notebook page shows the widget: its first step waits for "painted"
        self._failure: BaseException | None = None
        self._generation = first
        self._steps = steps
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the kernel's: the picture is redrawn there at the end
        # The Analysis tab's opening analysis (the sinks) read a step at a time: each step adds
        # its token's rows, where reading the whole run again took 0.3-1.8 s a step at 2,048 tokens
        # under load (O(layers x T) a step).
        self._growing_analysis = growing_run_analysis()
        # While a step is shown: the growing lists are set but not sent (the step's `grown` says
        # what changed); a whole list of 8,192 tokens sent at every step was most of a step's
        # message (~190 kB) and of its cost in the kernel (ipywidgets walking it for buffers).
        self._unsent: frozenset[str] = frozenset()
        # The Analysis tab's table (the sinks, grown each step) is sent by a step only while that
        # tab is open: it was most of a step's message elsewhere (14.6 kB of a step at 8,160
        # tokens). True: the page's copy is behind the kernel's, sent when the tab opens or the run ends.
        self._analysis_behind = False
        super().__init__(result=first.attention, **kwargs)
        self._pictures.held = True  # drawn once the run ends (picture.PictureOutputs)

    @property
    def generation(self) -> Generation:
        """The run so far: prompt, new tokens and text, settings, and `finish` once it ended."""
        return self._generation

    @property
    def generating_model(self) -> AttentionModel | None:
        """The model that writes the run (None: made without one)."""
        return self._generating_model

    def _knockout_control(self, generating: bool) -> dict:
        """The head view's knockout control on this run (knockout_answers.generation_knockout_control)."""
        return generation_knockout_control(self._generating_model, self._generation, generating)

    def start(self) -> GenerationWidget:
        """Generate the rest in a background thread (generate() calls it once displayed)."""
        if self._thread is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:  # plain Python: the next cell redraws the picture
                self._loop = None
            self._page_shows = page_loop() is not None
            self._quietly(generating=True, knockout_control=self._knockout_control(True))
            self._thread = threading.Thread(target=self._generate, name="attnscope-generate", daemon=True)
            self._thread.start()
        return self

    def _generate(self) -> None:
        # The page draws each token while the next is computed: the browser and the Jupyter server
        # must not wait for the CPU behind torch's threads (a token's message took 200-300 ms to
        # cross a loaded 2-core machine).
        behind_the_page(threading.get_native_id(), idle=False)
        # The first new token waits for the page to have drawn the prompt (~50 ms of script and
        # 150-250 ms of layout and paint at 8,160 tokens): made meanwhile, it waited behind that
        # drawing, and its message, trip and drawing each took 3 to 20 times as long (105-128 ms).
        if self._page_shows:
            self._painted.wait(PAINT_WAIT_S)
        try:
            for run in self._steps:
                with self._state_lock:
                    if self._closed:
                        break
                    if run.finish == "stopped" and self._stop_shown is not None:
                        run.keep_first(self._stop_shown)  # what the reader saw when pressing Stop
                    self._generation = run
                    behind = self.view != "analysis"
                    self._unsent = frozenset(GROWING) | ({"analysis"} if behind else set())
                    self._analysis_behind |= behind
                    try:
                        self._apply(run.attention, self.result_id + 1)
                    finally:
                        self._unsent = frozenset()
        except BaseException as exc:  # said in the widget, raised again by wait()
            self._failure = exc
            with self._state_lock:
                if not self._closed:
                    message = str(exc) if isinstance(exc, AttnscopeError) else f"{type(exc).__name__}: {exc}"
                    self._quietly(error=f"The generation failed: {message}")
        finally:
            self._steps.close()  # the engine holds nothing between steps: this ends it
            with self._state_lock:
                if not self._closed:
                    self._quietly(generating=False, knockout_control=self._knockout_control(False), grown={})
                    # The lists, whole again (a page saved or opened now needs no step), and the table.
                    self.send_state([*GROWING, *(["analysis"] if self._analysis_behind else [])])
                    self._analysis_behind = False
            self._done.set()
            self._pictures.held = False
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._pictures.redraw_later)  # the picture of the whole run

    def _apply(self, computed: Any, request_id: int, layer: int | None = None, heads: list[int] | None = None) -> None:
        """A run shown as AttentionWidget shows it, with the generation's settings in the notice
        and whether it still runs: one message."""
        state = run_state(computed, self._settings(), request_id, layer, heads,
                          long_analysis=self._growing_analysis)
        run = self._generation
        generating = run.finish is None and self._thread is not None and not self._done.is_set()
        lines = (generation_notice(run), parts_notice(computed), state.traits.get("notice", ""))
        # Where the output begins in the run's tokens: after the prompt (a decoder) or after the
        # source and the decoder's start token (an encoder-decoder).
        traits = {**state.traits, "generating": generating, "knockout_control": self._knockout_control(generating),
                  "output_start": len(run.prompt_ids) + len(run.start_ids),
                  "notice": "\n".join(line for line in lines if line)}
        self._show(dataclasses.replace(state, traits=traits))

    def _show(self, state: Any, atomic: bool = True) -> None:
        """AttentionWidget._show; a step's growing lists as what changed of them (`grown`), the
        lists set but not sent (_should_send_property). Any other show sends them whole, with
        `grown` emptied: an older step's growth is never applied over them."""
        if self._unsent:
            grown = {name: growth(getattr(self, name), state.traits[name]) for name in GROWING if name in state.traits}
            state = dataclasses.replace(state, traits={**state.traits, "grown": grown})
        else:
            state = dataclasses.replace(state, traits={**state.traits, "grown": {}})
        super()._show(state, atomic)

    def _should_send_property(self, key: str, value: Any) -> bool:
        return key not in self._unsent and super()._should_send_property(key, value)

    @traitlets.observe("view")
    def _on_analysis_opened(self, change: dict) -> None:
        """The Analysis tab opened while steps left the page's table behind: sent now (the page's
        write holds the step lock: one step's table)."""
        if change["new"] == "analysis" and self._analysis_behind and not self._closed:
            self.send_state(["analysis"])
            self._analysis_behind = False

    def _answer_growing_lists(self) -> dict:
        with self._state_lock:  # the lists of one step
            return super()._answer_growing_lists()

    def wait(self, timeout: float | None = None) -> Generation:
        """Wait for the generation's end (its last token, the end-of-text token or a stop) and
        return it; raises what ended it if it failed, or TimeoutError after `timeout` seconds."""
        timeout = checks.number("timeout", timeout, minimum=0, allow_none=True)
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"The generation still runs after {timeout} s ({self._generation.steps} tokens).")
        if self._failure is not None:
            raise self._failure
        return self._generation

    def stop(self, timeout: float | None = None) -> Generation:
        """End the generation between two steps, keeping the text so far; returns the run once its
        thread ended (nothing keeps running)."""
        timeout = checks.number("timeout", timeout, minimum=0, allow_none=True)
        self._stop_event.set()
        if self._thread is None:
            return self._generation
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)  # ended, not only done: its last lines (the picture's redraw) ran too
        return self._generation

    _answer_knockout = answer_generation_knockout  # the selected output token's chosen token, scored

    def update(self, text: str, text_b: str | None = None) -> None:
        """Refused: a generation's text is its prompt and what the model wrote (widget.text = ... too)."""
        raise InputError("A generation's text and text_b are its prompt and what the model wrote, not set by hand: "
                         "attnscope.generate(prompt, model=...) starts another.")

    def _on_painted(self, _content: dict) -> None:
        self._painted.set()

    def _on_stop(self, content: dict) -> None:
        """The page's Stop: the thread ends after the step it is in, and the run keeps the new
        tokens the page showed then (`shown`), not those made while the click travelled (2 to 6 at
        short prompts). A `shown` that is not a count of them keeps every token made."""
        shown = content.get("shown")
        if type(shown) is int and 0 <= shown <= self._generation.steps:
            self._stop_shown = shown
        self._stop_event.set()

    def set_state(self, sync_data: dict) -> None:
        with self._state_lock:  # a page's write sees one step whole
            super().set_state(sync_data)

    def __setattr__(self, name: str, value: Any) -> None:
        lock = self.__dict__.get("_state_lock")
        if lock is None:  # being made
            super().__setattr__(name, value)
            return
        with lock:  # a setting from Python (widget.focus_token = 2) too: set and its work between two steps
            super().__setattr__(name, value)

    def _long_answers(self, type_: str = "attention_rows") -> LongAnswers:
        with self._state_lock:  # the run and its result_id of one step
            return super()._long_answers(type_)

    def close(self) -> None:
        """Stop the generation and close the widget (AttentionWidget.close)."""
        self._stop_event.set()
        with self._state_lock:
            super().close()
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget's display: its plain text (what a notebook keeps, for a reader without the
        widget) says what the run is, not how far it was when shown ("0 new tokens, generating")."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict) and "text/plain" in data:
            run = self._generation
            data["text/plain"] = (f"GenerationWidget({run.model_name}, a prompt of {len(run.prompt_ids)} tokens, at most "
                                  f"{run.settings.max_new_tokens} new): the live view of attnscope.generate; its picture "
                                  "shows the run as it ended")
        return bundle

    def __repr__(self) -> str:
        run = self._generation
        state = "generating" if run.finish is None and not self._done.is_set() else run.finish
        return f"{super().__repr__()[:-1]}, {run.steps} new tokens, {state})"


def generate(
    prompt: str,
    model: Any = None,
    max_new_tokens: int = 32,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    chat: bool | None = None,
    view: str | None = None,
    tokenizer: Any = None,
    device: str | None = None,
    **kwargs: Any,
) -> GenerationWidget:
    """Watch a model write: `attnscope.generate("Once upon a time", model="smollm2")`.

    Displays the long-run views (the text view: a token's row shaded) on the prompt, then
    generates into them token by token while the page draws, the newest token selected until you
    choose one; Stop (or `widget.stop()`) ends it between two steps, keeping the text so far.
    Returns the widget: `widget.generation` is the run (text, tokens, settings), `widget.wait()`
    waits for its end. Every row is exact (engine/generation.py).

    model: a causal language model, or an encoder-decoder (BART, T5), whose prompt is the source
    it reads: the text view then shows the source, then the output, an output token's row its
    cross-attention over the source and its self-attention over the output before it (a loaded
    AttentionModel, a Hugging Face name or path, or a PreTrainedModel with `tokenizer`). do_sample False: greedy; True: sampled at `temperature`
    from the `top_p` nucleus with `seed` (picked and recorded when not given). chat: read the
    prompt as a user's message through the tokenizer's chat template (the default where it has
    one). view and **kwargs: as attnscope.show's (layer, theme, ...).
    """
    if model is None:
        raise InputError("model=None: generate needs a causal language model or an encoder-decoder, e.g. "
                         "attnscope.generate(prompt, model=\"smollm2\").")
    # A generation is shown as a long run (rows on demand): its views are those a long run has.
    if view is not None and not checks.one_of(view, LONG_VIEWS):
        known = checks.one_of(view, VIEW_NAMES)
        raise InputError(f"{'A generation has no' if known else 'Unknown'} view {checks.short_repr(view)}; "
                         f"available: {', '.join(LONG_VIEWS)}.")
    if isinstance(prompt, str) and not prompt.strip():  # said before a model loads (tens of seconds)
        raise InputError(f"prompt={prompt!r} is empty: give the text the model continues.")
    settings_of(max_new_tokens, do_sample, temperature, top_p, seed, None)  # before a model loads (10-40 s); chat: with it
    engine = resolve_engine(model, tokenizer, device)
    stop = threading.Event()
    steps = generation_steps(engine, prompt, max_new_tokens, do_sample=do_sample, temperature=temperature,
                             top_p=top_p, seed=seed, chat=chat, stop=stop)
    try:
        first = next(steps)  # the arguments checked and the prompt read: errors raise here
        widget = GenerationWidget(steps, first, stop, model=engine, view=view, **kwargs)
    except BaseException:
        steps.close()
        raise
    return shown(widget).start()
