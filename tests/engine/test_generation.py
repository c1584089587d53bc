"""Watch the model write (issue 48, the engine): generation token by token whose every row, in
every layer and head, is one eager forward's over prompt + output, in each family the engine
recomputes (grouped-query attention, sliding windows whose caches drop keys, soft-capping, sink
logits); stopped between steps; its settings recorded; its memory the cache's plus O(T)."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from small_models import families, model_state, scaled_up
from test_token_labels import byte_level_bpe

import attnscope
from attnscope import InputError
from attnscope.engine import fast_capture
from attnscope.engine.generation import from_generate, generate, generation_steps
from attnscope.engine.results import AttentionResult, LongAttentionResult

PROMPT = "The café is naïve, and the lake near Zürich is cold."
WINDOW = 4  # shorter than the prompt: the sliding layers' caches drop keys while it generates
STEPS = 6


@pytest.fixture(scope="module")
def tokenizer():
    return byte_level_bpe()


def causal_lm(name: str, dtype=torch.float32):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scaled_up(families(window=WINDOW, lm_head=True)[name]()).to(dtype)
    if dtype == torch.float64:
        model.config._experts_implementation = "eager"  # gpt-oss's grouped experts take no float64
    return model


def eager_attention(model, ids: list[int]) -> list[torch.Tensor]:
    """One eager forward over the whole sequence: per layer heads × T × T."""
    implementation = model.config._attn_implementation
    model.config._attn_implementation = "eager"
    try:
        with torch.no_grad():
            found = model(torch.tensor([ids]), output_attentions=True, use_cache=False).attentions
    finally:
        model.config._attn_implementation = implementation
    return [a[0].double() for a in found]


GENERATING = [name for name in families() if not name.startswith("gpt2")]


@pytest.mark.parametrize("dtype, bound", [(torch.float32, 1e-4), (torch.float64, 1e-6)], ids=["float32", "float64"])
@pytest.mark.parametrize("name", GENERATING)
def test_every_steps_rows_equal_one_eager_forward_over_prompt_and_output(name, dtype, bound, tokenizer):
    model = causal_lm(name, dtype)
    engine = attnscope.load(model, tokenizer, device="cpu")
    seen = []  # after each step: its last row of every layer (heads × T), as the run shows it then
    run = generate(engine, PROMPT, STEPS, chat=False,
                   on_step=lambda r: seen.append([r.attention.mean_attention_rows(0, [r.attention.n_tokens - 1])]
                                                 + [torch.stack([r.attention.attention_rows(layer, h, [r.attention.n_tokens - 1])[0]
                                                                 for h in range(r.attention.n_heads)])
                                                    for layer in range(r.attention.n_layers)]))
    long = run.attention
    assert isinstance(long, LongAttentionResult) and run.finish == "max_new_tokens" and run.steps == STEPS
    assert long.n_tokens == len(run.prompt_ids) + STEPS > 2 * WINDOW
    full = eager_attention(model, run.ids)
    worst = 0.0
    for layer in range(long.n_layers):
        for head in range(long.n_heads):
            rows = long.attention_rows(layer, head, range(long.n_tokens)).double()
            worst = max(worst, float((rows - full[layer][head]).abs().max()))
    assert worst <= bound, (name, worst)
    # Each step's row, read while it ran, is the full forward's (the prompt's pass yields first).
    assert len(seen) == STEPS + 1
    for step, rows in enumerate(seen):
        t = len(run.prompt_ids) + step - 1
        assert torch.allclose(rows[0][0].double(), full[0][:, t, : t + 1].mean(0), atol=bound)
        for layer, layer_rows in enumerate(rows[1:]):
            assert torch.allclose(layer_rows.double(), full[layer][:, t, : t + 1], atol=bound), (name, step, layer)
    # Greedy writes what model.generate writes.
    with torch.no_grad():
        expected = model.generate(torch.tensor([run.prompt_ids]), max_new_tokens=STEPS, do_sample=False, pad_token_id=0)
    assert expected[0, len(run.prompt_ids):].tolist() == run.new_ids


@pytest.mark.parametrize("name", GENERATING)
def test_each_steps_value_norms_are_one_pass_over_prompt_and_output(name, tokenizer):
    """‖f_h(x_j)‖ of every token, those a step made (all its layers at once) as those of one
    captured pass over the whole sequence."""
    engine = attnscope.load(causal_lm(name), tokenizer, device="cpu")
    run = generate(engine, PROMPT, STEPS, chat=False)
    _, layers = engine.captured_forward({"input_ids": torch.tensor([run.ids]), "use_cache": False})
    whole = torch.stack([layer.value_norms for layer in layers])
    kept = run.attention.value_norms
    assert kept.shape == whole.shape and torch.allclose(kept, whole, rtol=1e-4, atol=1e-6), (name, float((kept - whole).abs().max()))


def test_a_step_whose_kernel_attends_otherwise_is_refused_not_shown_wrongly(tokenizer, monkeypatch):
    """A model whose one-token steps attend otherwise than its prompt's pass (its kernel's output
    scaled here) is refused at its first step, fused kernel or not."""
    engine = attnscope.load(causal_lm("llama (GQA)"), tokenizer, device="cpu")
    real_kernel = fast_capture._own_kernel

    def kernel(name):
        own = real_kernel(name)

        def attend(module, query, *args, **kwargs):
            output, weights = own(module, query, *args, **kwargs)
            return (output * 1.01 if query.shape[2] == 1 else output), weights
        return attend

    monkeypatch.setattr(fast_capture, "_own_kernel", kernel)
    with pytest.raises(attnscope.NoAttentionError, match="attends in a way attnscope does not recompute"):
        generate(engine, PROMPT, 2, chat=False)


def test_a_stopped_run_keeps_its_text_and_leaves_nothing_running(tokenizer):
    model = causal_lm("llama (GQA)")
    engine = attnscope.load(model, tokenizer, device="cpu")
    threads = threading.active_count()
    stop = threading.Event()
    run = generate(engine, PROMPT, 20, chat=False, stop=stop, on_step=lambda r: r.steps == 3 and stop.set())
    assert (run.steps, run.stopped, run.finish) == (3, True, "stopped")
    assert run.text == tokenizer.decode(run.new_ids, skip_special_tokens=True) and run.attention.n_tokens == len(run.ids)
    assert getattr(fast_capture._local, "capture", None) is None and threading.active_count() == threads
    # A callable stops it too, and an abandoned iteration holds nothing: the model runs as it did.
    calls = iter(range(100))
    assert generate(engine, PROMPT, 20, chat=False, stop=lambda: next(calls) >= 2).steps == 2
    steps = generation_steps(engine, PROMPT, 20, chat=False)
    next(steps), next(steps)
    del steps
    with torch.no_grad():
        logits = model(torch.tensor([run.prompt_ids])).logits
    assert torch.isfinite(logits).all() and getattr(fast_capture._local, "capture", None) is None


def assert_cut_back_as_a_shorter_run(run, shorter, keep: int) -> None:
    """A stopped run cut back to `keep` new tokens (Generation.keep_first) is the run that wrote
    only those: its ids, text, tokens and every layer's rows (each query's, head 0 and the last)."""
    assert (run.steps, run.finish, run.new_ids, run.text) == (keep, "stopped", shorter.new_ids, shorter.text)
    cut, whole = run.attention, shorter.attention
    assert (cut.n_tokens, list(cut.tokens), list(cut.labels), cut.token_reading) == \
        (whole.n_tokens, list(whole.tokens), list(whole.labels), whole.token_reading)
    queries = list(range(cut.n_tokens))
    for layer in range(cut.n_layers):
        for head in (0, cut.n_heads - 1):
            assert torch.equal(cut.attention_rows(layer, head, queries), whole.attention_rows(layer, head, queries))


def test_a_reading_cut_back_is_the_reading_of_the_shorter_run_wherever_the_cut_falls(tokenizer):
    """Generation.keep_first's reading: cut at every token, inside a character split over byte
    tokens (emoji, CJK, accents) too, it equals the reading of those tokens alone."""
    from attnscope.engine.generation_run import Reading

    ids = tokenizer(" Zürich 東京 🙂🙂 naïve ok", add_special_tokens=False)["input_ids"]
    assert len(ids) > len(" Zürich 東京 🙂🙂 naïve ok".split()) + 6  # characters split over tokens

    def read(part: list[int]) -> Reading:
        reading = Reading(tokenizer, 5)
        for n in range(1, len(part) + 1):
            reading.add(part[:n])
        return reading

    for n in range(len(ids)):
        whole = read(ids)
        whole.cut_to(ids[:n])
        alone = read(ids[:n])
        assert (whole.spans, whole.raw, whole._pending) == (alone.spans, alone.raw, alone._pending), n


@pytest.mark.parametrize("name", ["llama (GQA)", "qwen2 (GQA, sliding window)"])
def test_a_stopped_run_cut_back_to_what_a_page_showed_is_the_shorter_run(name, tokenizer):
    """Issue 48: Stop keeps what the reader saw. The page's Stop says how many new tokens it showed;
    the steps made while the click travelled are dropped, rows and all."""
    engine = attnscope.load(causal_lm(name), tokenizer, device="cpu")
    stop = threading.Event()
    run = generate(engine, PROMPT, 20, chat=False, stop=stop, on_step=lambda r: r.steps == 5 and stop.set())
    assert run.steps == 5 and run.attention.n_tokens == len(run.prompt_ids) + 5  # read before the cut
    for ignored in (5, 6, -1):  # not below what it has: nothing to drop
        run.keep_first(ignored)
        assert run.steps == 5
    run.keep_first(2)
    assert_cut_back_as_a_shorter_run(run, generate(engine, PROMPT, 2, chat=False), 2)
    run.keep_first(0)  # the prompt alone
    assert run.steps == 0 and run.text == "" and run.attention.n_tokens == len(run.prompt_ids)
    finished = generate(engine, PROMPT, 3, chat=False)
    finished.keep_first(1)  # only a stopped run: one that ended keeps all it wrote
    assert finished.steps == 3


def test_settings_are_recorded_and_the_seed_reproduces_the_run(tokenizer):
    engine = attnscope.load(causal_lm("qwen2 (GQA, sliding window)"), tokenizer, device="cpu")
    run = generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, top_p=0.95, seed=7, chat=False)
    settings = run.settings
    assert (settings.max_new_tokens, settings.do_sample, settings.temperature, settings.top_p, settings.seed,
            settings.chat) == (8, True, 1.5, 0.95, 7, False)
    assert generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, top_p=0.95, seed=7, chat=False).new_ids == run.new_ids
    others = {tuple(generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, seed=seed, chat=False).new_ids)
              for seed in range(4)}
    assert len(others) > 1  # sampled, not greedy
    unseeded = generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, chat=False)
    assert unseeded.settings.seed is not None
    again = generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, seed=unseeded.settings.seed, chat=False)
    assert again.new_ids == unseeded.new_ids
    # A nucleus this small holds the likeliest token alone: greedy.
    assert generate(engine, PROMPT, 8, do_sample=True, top_p=1e-9, seed=3, chat=False).new_ids == \
        generate(engine, PROMPT, 8, chat=False).new_ids


def test_a_long_prompts_pass_counts_its_layers_aloud_and_the_steps_add_no_bar(tokenizer, monkeypatch):
    """A newcomer's 7,123-token prompt showed nothing for 30 s: the pass that reads it, before
    the widget can show anything, says how far it is, as a long run's does (run_progress)."""
    from test_progress import RecordedBar

    from attnscope import progress
    from attnscope.engine import run_progress

    bars = []
    monkeypatch.setattr(progress, "counter", lambda total, desc, unit: bars.append(RecordedBar(total, desc, unit)) or bars[-1])
    engine = attnscope.load(causal_lm("llama (GQA)"), tokenizer, device="cpu")
    n_prompt = len(tokenizer(PROMPT)["input_ids"])
    monkeypatch.setattr(run_progress, "LONG_RUN_TOKENS", n_prompt)
    hooks_before = [dict(m._forward_hooks) for m in engine.model.modules()]
    run = generate(engine, PROMPT, 3, chat=False)
    [bar] = bars  # the prompt's pass; a step reads one token
    assert bar.desc == f"reading the prompt's {n_prompt:,} tokens"  # short: a notebook's bar wraps a long one
    assert (bar.total, bar.unit, bar.n, bar.closed) == (engine.n_layers, "layer", engine.n_layers, True)
    assert run.steps == 3 and [dict(m._forward_hooks) for m in engine.model.modules()] == hooks_before
    monkeypatch.setattr(run_progress, "LONG_RUN_TOKENS", n_prompt + 1)
    bars.clear()
    generate(engine, PROMPT, 2, chat=False)
    assert bars == []  # a shorter prompt: no bar


def test_a_model_leaves_a_run_exactly_as_it_came(tokenizer):
    model = causal_lm("gemma2 (soft-capping)")
    model.train()
    model.model.layers[0].eval()  # a user froze one block's dropout
    calls = []
    model.register_forward_hook(lambda *args: calls.append(1))

    with torch.inference_mode():  # transformers installs its own output hooks on a first call
        model(input_ids=torch.tensor([[1, 2, 3]]))
    before = model_state(model)
    generate(attnscope.load(model, tokenizer, device="cpu"), PROMPT, 3, chat=False)
    assert model_state(model) == before and calls


def test_a_run_keeps_the_caches_size_plus_a_constant_per_step_never_t_squared(tokenizer):
    model = causal_lm("llama (GQA)")
    engine = attnscope.load(model, tokenizer, device="cpu")
    sizes, pointers = [], set()

    def measure(run):
        result = run.attention
        sizes.append(result.nbytes)
        pointers.add(tuple(q.data_ptr() for q in result.queries))

    run = generate(engine, PROMPT, 12, chat=False, on_step=measure)
    config = model.config
    d = config.hidden_size // config.num_attention_heads
    per_token = config.num_hidden_layers * ((config.num_attention_heads + config.num_key_value_heads) * d * 4
                                            + config.num_attention_heads * 4)
    assert sizes[0] == len(run.prompt_ids) * per_token
    assert [b - a for a, b in zip(sizes, sizes[1:])] == [per_token] * 12  # linear in T
    assert len(pointers) == 1  # the same buffers all along: no step copies what came before


def test_bad_input_is_refused_naming_the_parameter(tokenizer, default_model):
    engine = attnscope.load(causal_lm("llama (GQA)"), tokenizer, device="cpu")
    for kwargs, match in [
        (dict(max_new_tokens=0), "max_new_tokens=0 is too small"),
        (dict(do_sample=True, temperature=0), "temperature=0 with do_sample=True"),
        (dict(do_sample=True, temperature=-1.0), "temperature=-1.0"),
        (dict(top_p=0), r"top_p=0 is outside \(0, 1\]"),
        (dict(top_p=1.5), r"top_p=1.5 is outside \(0, 1\]"),
        (dict(chat=True), "chat=True, but .* no chat template"),
        (dict(max_new_tokens=600), "max_new_tokens=600 after a prompt of .* 512 positions"),
    ]:
        with pytest.raises(InputError, match=match):
            generate(engine, PROMPT, **{"chat": False, **kwargs})
    for prompt in ("", "   "):
        with pytest.raises(InputError, match="prompt=.* is empty"):
            generate(engine, prompt, chat=False)
    with pytest.raises(InputError, match="model=.*BertModel.* cannot generate"):
        generate(default_model, PROMPT)


@pytest.mark.parametrize("name", ["llama (GQA)", "gemma2 (soft-capping)"])
def test_model_generates_own_attentions_become_the_same_kind_of_run(name, tokenizer):
    """From model.generate(output_attentions=True): the rows given (a sliding layer's over its
    window only, placed at its keys), checked, over the tokens the model read."""
    model = causal_lm(name)
    engine = attnscope.load(model, tokenizer, device="cpu")
    ids = tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        output = model.generate(ids, max_new_tokens=STEPS, do_sample=False, pad_token_id=0, output_attentions=True,
                                return_dict_in_generate=True)
    run = from_generate(output, engine)
    assert isinstance(run.attention, AttentionResult) and run.new_ids == output.sequences[0, ids.shape[1]:].tolist()
    assert run.prompt_ids == ids[0].tolist() and run.settings is None and run.steps == STEPS
    read = run.ids[:-1]  # model.generate never reads its last token back
    full = eager_attention(model, read)
    assert len(run.attention.tokens) == len(read)
    assert torch.allclose(run.attention.attention.double(), torch.stack(full), atol=1e-5)
    ours = generate(engine, PROMPT, STEPS, chat=False)
    assert ours.new_ids == run.new_ids
    n = len(read)
    assert torch.allclose(ours.attention.attention_rows(1, 2, range(n))[:, :n], run.attention.attention[1, 2], atol=1e-4)
    # What is not a generate output's attentions is refused, naming what.
    with pytest.raises(InputError, match="has no attentions"):
        from_generate(model.generate(ids, max_new_tokens=2, return_dict_in_generate=True, pad_token_id=0), engine)
    with pytest.raises(InputError, match="source= is an encoder-decoder's source"):  # not ignored: the prompt is in the output
        from_generate(output, engine, source=ids)
    broken = list(output.attentions)
    broken[2] = tuple(a * 3 for a in broken[2])
    output.attentions = tuple(broken)
    with pytest.raises(InputError, match=r"output.attentions\[2\]\[0\] is not attention probabilities"):
        from_generate(output, engine)
    broken[2] = broken[2][:1]
    output.attentions = tuple(broken)
    with pytest.raises(InputError, match=r"output.attentions\[2\] does not hold one attention per layer"):
        from_generate(output, engine)


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
def test_smollm2_instruct_writes_through_its_chat_template_exactly():
    """The trained model: the chat template by default, greedy as model.generate, and rows within
    1e-4 of one eager forward in float32 (the cached and the full forward round differently, ~1e-5)."""
    from attnscope.engine.models import PACKAGED_MODELS, packaged_model_file

    try:
        packaged_model_file(PACKAGED_MODELS["smollm2"])
    except attnscope.ModelNotFoundError as exc:
        pytest.skip(f"{exc} (the Makefile's install does)")
    engine = attnscope.load("smollm2", device="cpu")
    run = generate(engine, "What is the capital of France?", 4)
    assert run.settings.chat and run.prompt_text.startswith("<|im_start|>") and run.prompt_text.endswith("assistant\n")
    assert run.steps == 4 and run.text.startswith("The capital of France")
    with torch.no_grad():
        expected = engine.model.generate(torch.tensor([run.prompt_ids]), max_new_tokens=4, do_sample=False)
    assert expected[0, len(run.prompt_ids):].tolist() == run.new_ids
    full = eager_attention(engine.model, run.ids)
    long, n = run.attention, len(run.ids)
    for layer in (0, 14, 29):
        rows = torch.stack([long.attention_rows(layer, h, range(n)) for h in range(long.n_heads)]).double()
        assert float((rows - full[layer]).abs().max()) <= 1e-4, layer
    assert long.labels[-4:] == [engine.tokenizer.decode([i]) for i in run.new_ids]
