"""Watch an encoder-decoder write (issue 48 item 5): BART and T5 (its relative-position bias) generate
token by token; each step's cross-attention over the source and self-attention over the output
so far, every layer and head, are one eager forward's over the source and the decoder's whole
output; the run is one long run over source + decoder tokens; stopped between steps; the model
left as it came; model.generate's own encoder-decoder output read back."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
import transformers
from small_models import VOCAB, model_state, sharpened, tiny_bart, tiny_t5
from test_generation import PROMPT, STEPS

import attnscope
from attnscope import InputError
from attnscope.engine import encoder_decoder_capture
from attnscope.engine.borrowing import borrowed
from attnscope.engine.encoder_decoder_long import EncoderDecoderLongResult
from attnscope.engine.generation import from_generate, generate, generation_steps

FAMILIES = {"bart": lambda **config: tiny_bart(lm_head=True, **config), "t5 (relative-position bias)": tiny_t5}
SHAPE = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64)
# BART's relatives (Marian starts its decoder with the padding token), and UMT5: a bias of its own in every layer.
RELATIVES = {
    "marian": lambda: sharpened(transformers.MarianMTModel(transformers.MarianConfig(
        vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0, **SHAPE))),
    "mbart": lambda: sharpened(transformers.MBartForConditionalGeneration(transformers.MBartConfig(vocab_size=VOCAB, **SHAPE))),
    "pegasus": lambda: sharpened(transformers.PegasusForConditionalGeneration(transformers.PegasusConfig(
        vocab_size=VOCAB, **SHAPE))),
    "umt5 (a relative-position bias per layer)": lambda: sharpened(transformers.UMT5ForConditionalGeneration(
        transformers.UMT5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
                                decoder_start_token_id=0, relative_attention_num_buckets=8,
                                relative_attention_max_distance=16))),
}


def writer(name: str, dtype=torch.float32, **config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = (FAMILIES[name](**config) if name in FAMILIES else RELATIVES[name]()).to(dtype)
    model.generation_config.eos_token_id = []  # every run here ends at max_new_tokens or a stop
    return model


def eager_parts(model, source_ids: list[int], decoder_ids: list[int]) -> dict[str, list[torch.Tensor]]:
    """One eager forward over the source and the decoder's whole output: per part and layer,
    heads × queries × keys (float64)."""
    with borrowed(model, "eager"), torch.no_grad():
        out = model(input_ids=torch.tensor([source_ids]), decoder_input_ids=torch.tensor([decoder_ids]),
                    output_attentions=True, use_cache=False)
    return {part: [a[0].double() for a in getattr(out, f"{part}_attentions")] for part in ("encoder", "decoder", "cross")}


@pytest.mark.parametrize("dtype, bound", [(torch.float32, 1e-4), (torch.float64, 1e-6)], ids=["float32", "float64"])
@pytest.mark.parametrize("name", [*FAMILIES, *RELATIVES])
def test_every_steps_cross_and_self_rows_equal_one_eager_forward(name, dtype, bound, bert_tokenizer):
    model = writer(name, dtype)
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    seen = []  # after each step, the newest decoder token's row of every layer and head, as the run shows it then

    def look(run):
        long = run.attention
        last = long.n_tokens - 1
        seen.append(torch.stack([torch.stack([long.attention_rows(layer, h, [last])[0] for h in range(long.n_heads)])
                                 for layer in range(long.n_layers)]))

    run = generate(engine, PROMPT, STEPS, chat=False, on_step=look)
    long = run.attention
    assert isinstance(long, EncoderDecoderLongResult) and run.finish == "max_new_tokens" and run.steps == STEPS
    n = len(run.prompt_ids)
    assert (long.n_source, long.n_tokens, long.n_layers) == (n, n + 1 + STEPS, 2) and long.encoder_shown
    assert run.decoder_ids[1:] == run.new_ids and run.ids == run.prompt_ids + run.decoder_ids
    full = eager_parts(model, run.prompt_ids, run.decoder_ids)
    worst = 0.0
    for layer in range(long.n_layers):
        for head in range(long.n_heads):
            rows = long.attention_rows(layer, head, range(long.n_tokens)).double()
            for got, expected in ((rows[:n, :n], full["encoder"][layer][head]), (rows[n:, :n], full["cross"][layer][head]),
                                  (rows[n:, n:], full["decoder"][layer][head])):
                worst = max(worst, float((got - expected).abs().max()))
            assert float(rows[:n, n:].abs().max()) == 0  # the encoder never sees the decoder's tokens
            # Cross rows sum to 1 over the source, self rows to 1 over the output so far.
            assert torch.allclose(rows[n:, :n].sum(-1), torch.ones(1 + STEPS, dtype=torch.float64), atol=bound)
            assert torch.allclose(rows[n:, n:].sum(-1), torch.ones(1 + STEPS, dtype=torch.float64), atol=bound)
    assert worst <= bound, (name, worst)
    # Each step's row, read while it ran, is the full forward's (the source's pass yields first).
    assert len(seen) == STEPS + 1
    for step, rows in enumerate(seen):
        for layer in range(long.n_layers):
            expected = torch.cat([full["cross"][layer][:, step], full["decoder"][layer][:, step, : step + 1]], dim=-1)
            assert torch.allclose(rows[layer].double(), expected, atol=bound), (name, step, layer)
    # Greedy writes what model.generate writes, from the same start token.
    with torch.no_grad():
        expected = model.generate(torch.tensor([run.prompt_ids]), max_new_tokens=STEPS, do_sample=False,
                                  forced_eos_token_id=None, min_length=0)
    assert expected[0].tolist() == run.decoder_ids


@pytest.mark.parametrize("name", list(FAMILIES))
def test_columns_tiles_and_pooled_maps_are_the_rows_put_together(name, bert_tokenizer):
    """Every long view reads the same rows: a column, a tile, a window, a block of rows, the
    first columns (the sinks) and the pooled maps (whole, or in passes) of source + output."""
    long = generate(attnscope.load(writer(name), bert_tokenizer, device="cpu"), PROMPT, 5, chat=False).attention
    n = long.n_tokens
    full = torch.stack([long.attention_rows(1, h, range(n)) for h in range(long.n_heads)])  # heads × n × n

    def same(a, b):  # one head's rows or every head's at once: the same numbers, rounded alike within float32
        return torch.allclose(a.cpu(), b, atol=1e-6, rtol=0)

    assert same(long.mean_attention_rows(1, [n - 1])[0], full[:, n - 1].mean(0))
    assert same(long.attention_columns(1, 2, [3, n - 2]), full[2][:, [3, n - 2]])
    assert same(long.mean_attention_columns(1, [3]), full[:, :, [3]].mean(0))
    assert same(long.attention_tile(1, 2, (4, n - 1), (2, n)), full[2, 4 : n - 1, 2:n])
    assert same(long.attention_block(1, (0, n), (0, n)), full)
    assert same(torch.cat([b.cpu() for _, _, b in long.row_blocks(1, budget=4 * 4 * n * 3)], dim=1), full)
    assert same(long.first_columns(1, 4), full[:, :, :4])
    bins = 5
    edges = torch.div(torch.arange(n) * bins, n, rounding_mode="floor")
    cells = [[full[:, edges == r][:, :, edges == c] for c in range(bins)] for r in range(bins)]
    expected_max = torch.tensor([[[cells[r][c][h].max() for c in range(bins)] for r in range(bins)] for h in range(4)])
    assert same(long.pooled(1, bins, "max"), expected_max)
    expected_mean = torch.tensor([[cells[r][c].mean(0).mean() for c in range(bins)] for r in range(bins)])
    assert same(long.pooled_tile(1, None, (0, n), (0, n), (bins, bins), "mean"), expected_mean)
    passes = [long.pooled(1, bins, "max", (2, offset)) for offset in (0, 1)]
    assert same(torch.maximum(*passes), expected_max)
    attnscope.attention_sinks(long)  # reads the first columns of every layer


def test_a_stopped_run_keeps_its_text_and_leaves_nothing_running(bert_tokenizer):
    model = writer("t5 (relative-position bias)")
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    threads = threading.active_count()
    stop = threading.Event()
    run = generate(engine, PROMPT, 20, chat=False, stop=stop, on_step=lambda r: r.steps == 3 and stop.set())
    assert (run.steps, run.stopped, run.finish) == (3, True, "stopped")
    assert run.text == bert_tokenizer.decode(run.new_ids, skip_special_tokens=True)
    assert run.attention.n_tokens == len(run.ids) == len(run.prompt_ids) + 4
    assert getattr(encoder_decoder_capture._local, "capture", None) is None and threading.active_count() == threads
    # An abandoned iteration holds nothing: the model runs as it did.
    steps = generation_steps(engine, PROMPT, 20, chat=False)
    next(steps), next(steps)
    del steps
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([run.prompt_ids]), decoder_input_ids=torch.tensor([run.decoder_ids])).logits
    assert torch.isfinite(logits).all() and getattr(encoder_decoder_capture._local, "capture", None) is None


def test_a_stopped_run_cut_back_to_what_a_page_showed_is_the_shorter_run(bert_tokenizer):
    """Issue 48: Stop keeps what the reader saw, an encoder-decoder's decoder positions too."""
    from test_generation import assert_cut_back_as_a_shorter_run

    engine = attnscope.load(writer("t5 (relative-position bias)"), bert_tokenizer, device="cpu")
    stop = threading.Event()
    run = generate(engine, PROMPT, 20, chat=False, stop=stop, on_step=lambda r: r.steps == 4 and stop.set())
    run.keep_first(1)
    assert_cut_back_as_a_shorter_run(run, generate(engine, PROMPT, 1, chat=False), 1)
    assert run.decoder_ids == run.start_ids + run.new_ids and run.attention.n_tokens == len(run.prompt_ids) + 2


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_model_leaves_a_run_exactly_as_it_came(name, bert_tokenizer):
    model = writer(name)
    model.train()
    model.get_encoder().eval()  # a user froze the encoder's dropout
    calls = []
    model.register_forward_hook(lambda *args: calls.append(1))
    with torch.inference_mode():  # transformers installs its own output hooks on a first call
        model(input_ids=torch.tensor([[5, 6, 7]]), decoder_input_ids=torch.tensor([[0]]))
    before = model_state(model)
    generate(attnscope.load(model, bert_tokenizer, device="cpu"), PROMPT, 3, chat=False)
    assert model_state(model) == before and calls


def test_sampling_is_recorded_and_its_seed_reproduces_the_run(bert_tokenizer):
    engine = attnscope.load(writer("bart"), bert_tokenizer, device="cpu")
    run = generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, top_p=0.95, seed=7, chat=False)
    assert (run.settings.do_sample, run.settings.temperature, run.settings.top_p, run.settings.seed) == (True, 1.5, 0.95, 7)
    assert generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, top_p=0.95, seed=7, chat=False).new_ids == run.new_ids
    others = {tuple(generate(engine, PROMPT, 8, do_sample=True, temperature=1.5, seed=seed, chat=False).new_ids)
              for seed in range(4)}
    assert len(others) > 1  # sampled, not greedy


def test_a_run_keeps_the_caches_size_plus_a_constant_per_step_never_t_squared(bert_tokenizer):
    engine = attnscope.load(writer("t5 (relative-position bias)"), bert_tokenizer, device="cpu")
    sizes, pointers = [], set()

    def measure(run):
        long = run.attention
        sizes.append(long.nbytes)
        pointers.add(tuple(q.data_ptr() for part in (long.cross, long.decoder) for q in part.queries))

    generate(engine, PROMPT, 12, chat=False, on_step=measure)
    steps = [b - a for a, b in zip(sizes, sizes[1:])]
    # Per layer and head: a cross query row and its lse, a decoder query and key, its lse and one bias entry.
    d, layers, heads = 8, 2, 4
    assert steps == [layers * heads * 4 * (d + 1 + 2 * d + 1 + 1)] * 12
    assert len(pointers) == 1  # the same buffers all along: no step copies what came before


def test_an_encoder_of_another_depth_leaves_the_sources_rows_empty_and_says_so(bert_tokenizer):
    model = writer("bart", encoder_layers=3)
    long = generate(attnscope.load(model, bert_tokenizer, device="cpu"), PROMPT, 3, chat=False).attention
    n = long.n_source
    assert not long.encoder_shown and long.n_layers == 2
    rows = long.attention_rows(1, 0, range(long.n_tokens))
    assert float(rows[:n].abs().max()) == 0 and torch.allclose(rows[n:, :n].sum(-1), torch.ones(4))


def test_bad_input_is_refused_naming_the_problem(bert_tokenizer):
    engine = attnscope.load(writer("bart"), bert_tokenizer, device="cpu")
    for prompt in ("", "   "):
        with pytest.raises(InputError, match="prompt=.* is empty"):
            generate(engine, prompt, chat=False)
    with pytest.raises(InputError, match=r"\(the source\) is .* tokens, more than .* 64 positions"):
        generate(engine, "word " * 80, chat=False)
    with pytest.raises(InputError, match="max_new_tokens=64 is more than .* at most 63 new tokens fit"):
        generate(engine, PROMPT, 64, chat=False)
    with pytest.raises(InputError, match="chat=True, but .* no chat template"):
        generate(engine, PROMPT, chat=True)
    with pytest.raises(InputError, match=r"BartModel\) cannot generate: it is an encoder-decoder without its "
                                         "language-modelling head"):
        generate(attnscope.load(tiny_bart(), bert_tokenizer, device="cpu"), PROMPT)
    # Families whose attention modules attnscope does not find, or that compute attention their own way, say so.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prophet = transformers.ProphetNetForConditionalGeneration(transformers.ProphetNetConfig(
            vocab_size=len(bert_tokenizer), hidden_size=32, encoder_ffn_dim=37, decoder_ffn_dim=37, num_encoder_layers=1,
            num_decoder_layers=1, num_encoder_attention_heads=4, num_decoder_attention_heads=4, ngram=2)).eval()
        fsmt = transformers.FSMTForConditionalGeneration(transformers.FSMTConfig(
            langs=["en", "de"], src_vocab_size=len(bert_tokenizer), tgt_vocab_size=len(bert_tokenizer), d_model=32,
            encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37,
            decoder_ffn_dim=37, max_position_embeddings=64)).eval()
    with pytest.raises(InputError, match="cannot generate with attention: attnscope does not find its encoder's"):
        generate(attnscope.load(prophet, bert_tokenizer, device="cpu"), PROMPT, 2, chat=False)
    with pytest.raises(attnscope.AttnscopeError, match="cannot generate with attention: 0 of the 3 attention calls"):
        generate(attnscope.load(fsmt, bert_tokenizer, device="cpu"), PROMPT, 2, chat=False)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_model_generates_own_encoder_decoder_attentions_become_an_encoder_decoder_run(name, bert_tokenizer):
    """From model.generate(output_attentions=True): encoder, decoder and cross-attention as the
    parts of an encoder-decoder run, over the source given and the decoder tokens the model read."""
    model = writer(name)
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    source = bert_tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    with borrowed(model, "eager"), torch.no_grad():
        output = model.generate(source, max_new_tokens=STEPS, do_sample=False, output_attentions=True,
                                return_dict_in_generate=True, forced_eos_token_id=None, min_length=0)
    run = from_generate(output, engine, source=source)
    parts = run.attention.parts
    assert isinstance(run.attention, attnscope.EncoderDecoderResult) and set(parts) == {"encoder", "decoder", "cross"}
    assert run.prompt_ids == source[0].tolist() and run.decoder_ids == output.sequences[0].tolist()
    assert run.steps == STEPS and run.settings is None and run.text == bert_tokenizer.decode(run.new_ids, skip_special_tokens=True)
    read = run.decoder_ids[:-1]  # model.generate never reads its last token back
    full = eager_parts(model, run.prompt_ids, read)
    assert len(parts["decoder"].tokens) == len(read) and parts["cross"].key_tokens == parts["encoder"].tokens
    for part in ("encoder", "decoder", "cross"):
        assert torch.allclose(parts[part].attention.double(), torch.stack(full[part]), atol=1e-5), part
    # The same rows as attnscope's own run of the same source.
    ours = generate(engine, PROMPT, STEPS, chat=False).attention
    n = ours.n_source
    rows = ours.attention_rows(1, 2, range(n, n + len(read)))
    assert torch.allclose(rows[:, :n], parts["cross"].attention[1, 2], atol=1e-4)
    assert torch.allclose(rows[:, n:-1], parts["decoder"].attention[1, 2], atol=1e-4)
    # The source text gives the same run; a missing or other source is refused, naming it.
    assert from_generate(output, engine, source=PROMPT).prompt_ids == run.prompt_ids
    with pytest.raises(InputError, match="source=None: .* holds no source tokens"):
        from_generate(output, engine)
    with pytest.raises(InputError, match=r"source has 3 tokens, and output.encoder_attentions\[0\] reads"):
        from_generate(output, engine, source=[5, 6, 7])
    broken = list(output.cross_attentions)
    broken[2] = tuple(a * 3 for a in broken[2])
    output.cross_attentions = tuple(broken)
    with pytest.raises(InputError, match=r"output.cross_attentions\[2\]\[0\] is not attention probabilities"):
        from_generate(output, engine, source=source)


# The widget: attnscope.generate on an encoder-decoder.


@pytest.fixture(scope="module")
def t5_engine(bert_tokenizer):
    return attnscope.load(writer("t5 (relative-position bias)"), bert_tokenizer, device="cpu")


def test_the_widget_shows_the_source_then_the_output_and_says_which_attention_is_where(t5_engine):
    from test_long_widget import ask, values

    from attnscope.widget.export import page_state

    widget = attnscope.generate(PROMPT, model=t5_engine, max_new_tokens=STEPS, chat=False)
    try:
        run = widget.wait(timeout=120)
        long, n = run.attention, len(run.prompt_ids)
        assert run.finish == "max_new_tokens" and not widget.generating and widget.long_context and widget.view == "text"
        assert widget.tokens == long.labels and len(widget.tokens) == n + 1 + STEPS
        assert widget.token_reading[n].startswith("\n")  # the output starts a line of its own
        assert widget.output_start == n + 1  # the marker: after the source and the decoder's start token
        # Causal from the decoder's start token: the source's rows (the encoder's) read the whole
        # source, and the head view's causal note says so (it said every row was causal).
        assert widget.causal and widget.causal_from == n
        assert widget.focus_token == len(run.ids) - 1  # the newest token selected
        notice = widget.notice.splitlines()
        assert notice[0] == f"Generated greedily: {STEPS} new tokens, as many as max_new_tokens={STEPS} allows."
        assert notice[1].startswith(f"Encoder-decoder: the source's {n} tokens, then the decoder's") and \
            "cross-attention over the source, then its self-attention over the output" in notice[1]
        # An output token's row: the source by cross-attention, the output before it by self-attention.
        content, buffers = ask(widget, "attention_rows", layer=1, head=2, token=n + 3, direction="from")
        row = values(content, buffers)
        assert "error" not in content and torch.allclose(row, long.attention_rows(1, 2, [n + 3])[0], atol=1e-6)
        assert abs(float(row[:n].sum()) - 1) < 1e-4 and abs(float(row[n:].sum()) - 1) < 1e-4 and float(row[n + 4:].sum()) == 0
        # What attends to a source token: the encoder's rows and the output's cross-attention.
        content, buffers = ask(widget, "attention_rows", layer=0, head=-1, token=2, direction="to")
        assert torch.allclose(values(content, buffers), long.mean_attention_columns(0, [2])[:, 0], atol=1e-6)
        for type_, params in (("attention_tile", dict(layer=1, head=-1, rows=[0, n + 7], cols=[0, n + 7], bins=8)),
                              ("attention_window", dict(layer=1, token=n + 2)), ("thumbnails", {"pass": 0})):
            content, _ = ask(widget, type_, **params)
            assert "error" not in content, (type_, content)
        assert widget.weigh_unavailable.startswith("Weighing by value norm is not kept for")
        with pytest.raises(InputError, match="not kept for"):
            widget.weigh_by = "value_norm"
        assert widget.weigh_by == "attention"
        saved = page_state(widget)  # the saved page's answers: the same requests, from the same run
        assert all("error" not in answer["content"] for answer in saved["served"]["answers"])
    finally:
        widget.close()


def test_stop_keeps_the_output_so_far_and_leaves_nothing_running(t5_engine):
    threads = threading.active_count()
    widget = attnscope.generate(PROMPT, model=t5_engine, max_new_tokens=60, chat=False)
    try:
        while widget.generation.steps < 2:
            assert widget.generating
            widget._done.wait(0.01)
        run = widget.stop(timeout=60)
        assert run.finish == "stopped" and 2 <= run.steps < 60 and not widget.generating
        assert not widget._thread.is_alive() and threading.active_count() == threads
        assert len(widget.tokens) == len(run.ids) and widget.notice.splitlines()[0].endswith("stopped.")
    finally:
        widget.close()


def test_the_widget_refuses_bad_input_before_anything_is_shown(t5_engine, bert_tokenizer, monkeypatch):
    shown = []
    monkeypatch.setattr("attnscope.widget.generation_widget.shown", lambda widget: shown.append(widget) or widget)
    with pytest.raises(InputError, match="prompt=.* is empty"):
        attnscope.generate(" ", model=t5_engine)
    with pytest.raises(InputError, match=r"T5Model\) cannot generate: it is an encoder-decoder without"):
        attnscope.generate(PROMPT, model=attnscope.load(tiny_t5(lm_head=False), bert_tokenizer, device="cpu"))
    assert shown == []
