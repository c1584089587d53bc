"""Long inputs on decoder LLMs (issue 14): the model's own fast attention, q, k and each row's
log-sum-exp kept, and any row, tile or pooled block exact against the model's eager attention.

Every family is a small random config; weights are scaled up so that attention is sharp and a
wrong pairing, mask or scale would show."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import transformers
from small_models import SHAPE, TEXT, families, scaled_up
from test_token_labels import byte_level_bpe

import attnscope
from attnscope import InputError, NoAttentionError
from attnscope.engine import attention_model as engine_module
from attnscope.engine import fast_capture
from attnscope.engine.exact_attention import ScoreRule, bin_edges, full_attention_bytes, pooled_heads, row_logsumexp
from attnscope.engine.results import LongAttentionResult


@pytest.fixture(scope="module")
def tokenizer():
    return byte_level_bpe()


@pytest.fixture(scope="module", params=list(families()))
def family(request, tokenizer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scaled_up(families()[request.param]())
    return request.param, attnscope.load(model, tokenizer, device="cpu")


def test_rows_equal_the_models_own_eager_attention(family):
    name, engine = family
    implementation = engine.model.config._attn_implementation
    full = engine.run(TEXT, attention="full")
    long = engine.run(TEXT, attention="on_demand")
    assert isinstance(long, LongAttentionResult) and long.n_tokens == len(full.tokens) > 40
    assert long.labels == full.labels
    n = long.n_tokens
    for layer in range(long.n_layers):
        for head in range(long.n_heads):
            rows = long.attention_rows(layer, head, range(n))
            assert rows.dtype == torch.float32 and rows.device.type == "cpu" and rows.shape == (n, n)
            assert torch.allclose(rows, full.attention[layer, head].cpu(), atol=2e-6), (name, layer, head)
    # The model leaves as it came: its own attention implementation, eval mode as given.
    assert engine.model.config._attn_implementation == implementation


def test_tiles_and_pooled_blocks_are_the_full_matrix_cut_and_pooled(family):
    _, engine = family
    full = engine.run(TEXT, attention="full").attention.cpu()
    long = engine.run(TEXT, attention="on_demand")
    n = long.n_tokens
    tile = long.attention_tile(1, 3, (5, n - 2), (1, 30))
    assert torch.allclose(tile, full[1, 3, 5 : n - 2, 1:30], atol=2e-6)
    # Bins of unequal size (7), and of equal size (every divisor of n up to 12, and n itself: one
    # position a bin), where the max pools scores before it exponentiates them.
    for bins in (7, *[d for d in range(2, 13) if n % d == 0], n):
        rows, cols = bin_edges(n, bins), bin_edges(n, bins)
        for layer in range(long.n_layers):
            pooled_max, pooled_mean = long.pooled(layer, bins=bins, reduce="max"), long.pooled(layer, bins=bins, reduce="mean")
            # Each block's max and mean from the weights, a bin of rows then a bin of columns at a
            # time (2 × bins slices, not bins² blocks: bins = n made 130k comparisons a family).
            by_rows = [full[layer][:, rows == a] for a in range(bins)]
            row_max = torch.stack([block.amax(dim=1) for block in by_rows], dim=1)  # heads × bins × n
            row_sum = torch.stack([block.sum(dim=1) for block in by_rows], dim=1)
            block_max = torch.stack([row_max[:, :, cols == b].amax(dim=2) for b in range(bins)], dim=2)
            block_sum = torch.stack([row_sum[:, :, cols == b].sum(dim=2) for b in range(bins)], dim=2)
            sizes = torch.bincount(rows, minlength=bins)[:, None] * torch.bincount(cols, minlength=bins)[None, :]
            for pooled, expected in ((pooled_max, block_max), (pooled_mean, block_sum / sizes)):
                error = (pooled - expected).abs() - 2e-6 - 1e-5 * expected.abs()
                assert error.max() <= 0, (bins, layer, divmod(int(error.amax(dim=0).argmax()), bins))


def test_a_map_refined_in_passes_ends_as_the_pooled_map_and_each_pass_is_its_rows(family, monkeypatch):
    """Issue 32: a large map is answered in passes over 1 / passes of the rows each (bit-reversed
    offsets); the passes' max is the pooled max, their sum the pooled mean, for one head and for
    the mean of the heads, and the first pass alone is the pooled map of its rows."""
    from attnscope.widget import payloads as pl

    _, engine = family
    full = engine.run(TEXT, attention="full").attention.cpu()
    long = engine.run(TEXT, attention="on_demand")
    n = long.n_tokens
    monkeypatch.setattr(pl, "PASS_PAIRS", n * n // 5)  # a small map, refined as a large one is
    for head, reduce in ((2, "max"), (-1, "max"), (-1, "mean"), (1, "mean")):
        passes = pl.tile_passes(long, head, [0, n], [0, n], 8)
        assert passes > 1 and passes & (passes - 1) == 0
        offsets = sorted(pl.pass_offset(i, passes) for i in range(passes))
        assert offsets == list(range(passes))
        answers = []
        for index in range(passes):
            content, [data] = pl.long_tile_payload(long, 1, head, [0, n], [0, n], 8, reduce, index)
            assert (content["pass"], content["passes"], content["exact"]) == (index, passes, False)
            answers.append(torch.frombuffer(bytearray(data), dtype=torch.float32).view(content["shape"]))
        merged = torch.stack(answers).amax(0) if reduce == "max" else torch.stack(answers).sum(0)
        whole = long.pooled_tile(1, None if head == -1 else head, (0, n), (0, n), (8, 8), reduce)
        assert torch.allclose(merged, whole, atol=2e-6), (head, reduce)
        # The first pass: exactly the pooled map of its rows (offset 0, every `passes`-th row).
        maps = full[1].mean(0) if head == -1 else full[1, head]
        rows, cols = bin_edges(n, 8), bin_edges(n, 8)
        sampled = (torch.arange(n) % passes) == 0
        for a in range(8):
            for b in range(8):
                block = maps[(rows == a) & sampled][:, cols == b]
                expected = block.amax() if reduce == "max" else block.sum() / ((rows == a).sum() * (cols == b).sum())
                assert torch.allclose(answers[0][a, b], expected, atol=2e-6), (head, reduce, a, b)
    with pytest.raises(attnscope.InputError, match="past this tile"):
        pl.long_tile_payload(long, 1, 2, [0, n], [0, n], 8, "max", passes)


def test_the_first_rows_of_a_long_causal_run_are_the_rows_of_its_prefix(family):
    _, engine = family
    long = engine.run(TEXT, attention="on_demand")
    ids = long.input_ids[0]
    prefix_text = engine.tokenizer.decode(ids[:24])
    prefix = engine.run(prefix_text, attention="on_demand")
    assert prefix.input_ids[0].tolist() == ids[:24].tolist()
    rows = long.attention_rows(1, 2, range(24))
    assert torch.allclose(rows[:, :24], prefix.attention_rows(1, 2, range(24)), atol=2e-6)
    assert float(rows[:, 24:].abs().max()) == 0.0  # causal: nothing on later tokens


def test_key_heads_are_kept_at_their_own_count_and_mapped_when_used(tokenizer):
    engine = attnscope.load(scaled_up(families()["qwen2 (GQA, sliding window)"]()), tokenizer, device="cpu")
    long = engine.run(TEXT, attention="on_demand")
    assert (long.n_heads, long.n_key_heads) == (4, 2)
    assert long.keys[0].shape == (2, long.n_tokens, 16) and long.queries[0].shape == (4, long.n_tokens, 16)
    assert [long.key_head(h) for h in range(4)] == [0, 0, 1, 1]
    assert long.lse.shape == (2, 4, long.n_tokens) and long.lse.dtype == torch.float32
    assert [rule.window for rule in long.rules] == [None, 8]
    assert long.nbytes == sum(t.numel() * 4 for t in (*long.queries, *long.keys, long.lse))


def test_the_full_attention_is_refused_with_what_to_ask_for_instead(tokenizer):
    engine = attnscope.load(scaled_up(families()["llama (GQA)"]()), tokenizer, device="cpu")
    long = engine.run(TEXT, attention="on_demand")
    with pytest.raises(NoAttentionError, match=r"attention_rows\(layer, head, queries\)"):
        _ = long.attention
    with pytest.raises(InputError, match="layer=2 is too large"):
        long.attention_rows(2, 0, [0])
    with pytest.raises(InputError, match="head must be a whole number"):
        long.attention_rows(0, 1.5, [0])
    with pytest.raises(InputError, match=r"queries\[0\]=\d+ is too large"):
        long.attention_rows(0, 0, [long.n_tokens])
    with pytest.raises(InputError, match="rows must be a \\(start, end\\) pair"):
        long.attention_tile(0, 0, 3, (0, 2))
    with pytest.raises(InputError, match="reduce must be 'max' or 'mean'"):
        long.pooled(0, reduce="sum")
    with pytest.raises(InputError, match="attention must be 'auto', 'full' or 'on_demand'"):
        engine.run(TEXT, attention="fast")
    # The last row by a negative index, as Python reads it.
    assert torch.equal(long.attention_rows(0, 0, -1), long.attention_rows(0, 0, [long.n_tokens - 1]))


def test_auto_keeps_short_inputs_full_and_long_ones_on_demand(tokenizer, monkeypatch):
    engine = attnscope.load(scaled_up(families()["llama (GQA)"]()), tokenizer, device="cpu")
    assert type(engine.run(TEXT)) is attnscope.AttentionResult
    n = len(engine.run(TEXT).tokens)
    monkeypatch.setattr(engine_module, "FULL_ATTENTION_LIMIT", full_attention_bytes(2, 4, n, n) - 1)
    assert isinstance(engine.run(TEXT), LongAttentionResult)
    # The widget opens its long-input views on such a run (tests/widget/test_long_widget.py).
    widget = attnscope.AttentionWidget(TEXT, model=engine)
    assert widget.long_context and widget.view == "text"
    with pytest.raises(Exception, match=f"this text of {n} tokens does not keep"):
        widget.view = "neuron"
    widget.close()


def test_a_model_that_changes_its_scores_unseen_is_refused_not_shown_wrongly(tokenizer, monkeypatch):
    engine = attnscope.load(scaled_up(families()["llama (GQA)"]()), tokenizer, device="cpu")
    real_rule = fast_capture._rule

    def wrong_scale(*args, **kwargs):
        rule = real_rule(*args, **kwargs)
        return ScoreRule(rule.scaling * 1.5, rule.causal, rule.window, rule.softcap, rule.sinks)

    monkeypatch.setattr(fast_capture, "_rule", wrong_scale)
    with pytest.raises(NoAttentionError, match="does not recompute from its queries and keys"):
        engine.run(TEXT, attention="on_demand")
    assert engine.model.config._attn_implementation == "sdpa"  # left as it came, even on failure
    monkeypatch.setattr(fast_capture, "_rule", real_rule)
    with pytest.raises(NoAttentionError, match="position_bias"):
        fast_capture._rule(engine.model.layers[0].self_attn, torch.zeros(1, 4, 3, 16), None, None,
                           {"position_bias": torch.zeros(1)})


def test_encoder_decoder_and_masked_heads_say_they_need_the_full_attention(tokenizer):
    engine = attnscope.load(scaled_up(families()["llama (GQA)"]()), tokenizer, device="cpu")
    with pytest.raises(InputError, match="Masking heads needs the full attention"):
        engine.run(TEXT, attention="on_demand", masked_heads=[(0, 1)])
    tokenizer.pad_token = tokenizer.eos_token
    bart = transformers.BartModel(transformers.BartConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, decoder_start_token_id=tokenizer.eos_token_id)).eval()
    with pytest.raises(InputError, match="encoder-decoder models .* attention='full'"):
        attnscope.load(bart, tokenizer, device="cpu").run("A short text.", attention="on_demand")


def test_short_results_answer_rows_the_same_way(tokenizer):
    engine = attnscope.load(scaled_up(families()["llama (GQA)"]()), tokenizer, device="cpu")
    full, long = engine.run(TEXT, attention="full"), engine.run(TEXT, attention="on_demand")
    assert torch.allclose(full.attention_rows(1, 2, [0, 7, -1]), long.attention_rows(1, 2, [0, 7, -1]), atol=2e-6)
    assert torch.equal(full.attention_rows(1, 2, slice(3, 5)), full.attention[1, 2, 3:5])


def test_the_mean_of_a_layers_heads_is_their_rows_and_columns_averaged(tokenizer):
    # Grouped-query heads (two query heads a key head): every head in one pass reads its own key head.
    engine = attnscope.load(scaled_up(families()["llama (GQA)"]()), tokenizer, device="cpu")
    full, long = engine.run(TEXT, attention="full"), engine.run(TEXT, attention="on_demand")
    assert torch.allclose(long.mean_attention_rows(1, [0, 7, -1]), full.attention[1][:, [0, 7, -1]].mean(0), atol=2e-6)
    assert torch.allclose(long.mean_attention_columns(1, [0, 7]), full.attention[1][:, :, [0, 7]].mean(0), atol=2e-6)
    per_head = torch.stack([long.attention_rows(1, h, [5]) for h in range(long.n_heads)])
    assert torch.allclose(long.mean_attention_rows(1, [5]), per_head.mean(0), atol=1e-7)
    with pytest.raises(InputError, match="layer"):
        long.mean_attention_rows(long.n_layers, [0])


def test_log_sum_exp_in_blocks_equals_one_block(tokenizer):
    torch.manual_seed(1)
    q, k = torch.randn(4, 50, 8), torch.randn(2, 50, 8)
    for rule in (ScoreRule(0.3, True), ScoreRule(0.3, True, window=5, softcap=2.0),
                 ScoreRule(0.3, False, sinks=torch.tensor([0.5, -1.0, 2.0, 0.0]))):
        whole = row_logsumexp(q, k, rule)
        assert torch.allclose(row_logsumexp(q, k, rule, budget=4 * 4 * 50 * 3), whole, atol=1e-5)  # 3 rows a block
        assert torch.allclose(pooled_heads(q, k, whole, rule, 5, budget=600), pooled_heads(q, k, whole, rule, 5), atol=1e-6)


def test_a_max_pooled_from_the_scores_equals_the_max_of_the_weights(monkeypatch):
    """The GPU's way to max-pool bins of unequal size (exact_attention.scores_first: each column
    bin's largest score, gathered, then exp) gives the CPU's numbers (every weight scattered into
    its bin), for whole maps, passes over a share of the rows, spans and blocks cut mid-bin."""
    from attnscope.engine import exact_attention

    torch.manual_seed(2)
    q, k = torch.randn(4, 61, 8) * 2, torch.randn(2, 61, 8)
    for rule in (ScoreRule(0.3, True), ScoreRule(0.3, False), ScoreRule(0.3, True, window=9, softcap=2.0),
                 ScoreRule(0.3, False, sinks=torch.tensor([0.5, -1.0, 2.0, 0.0]))):
        lse = row_logsumexp(q, k, rule)

        def pooled(lse=lse, rule=rule):
            return [pooled_heads(q, k, lse, rule, 7), pooled_heads(q, k, lse, rule, 7, budget=4 * 4 * 61 * 5),
                    pooled_heads(q, k, lse, rule, (5, 9), rows=(3, 50), cols=(10, 58)),
                    *[exact_attention.pooled_sampled(q, k, lse, rule, (7, 6), "max", 4, offset, budget=4 * 4 * 61 * 3)
                      for offset in range(4)]]

        monkeypatch.setattr(exact_attention, "scores_first", lambda device: False)
        scattered = pooled()
        monkeypatch.setattr(exact_attention, "scores_first", lambda device: True)
        for gathered, expected in zip(pooled(), scattered, strict=True):
            assert torch.allclose(gathered, expected, atol=1e-6), rule
        assert float(scattered[0].amax()) > 0.1  # the maps hold weights, not only the zeros of an empty pool


def test_a_long_run_computes_scores_a_bounded_block_at_a_time(tokenizer, monkeypatch):
    # 3,000 tokens, 4 heads: one layer's scores would be 144 MB; every block stays under BLOCK_BYTES.
    from attnscope.engine import exact_attention

    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=320, use_sliding_window=True, sliding_window=2900, max_window_layers=0,
                                      layer_types=["sliding_attention", "sliding_attention"],
                                      **{**SHAPE, "max_position_embeddings": 4096})
    engine = attnscope.load(transformers.Qwen2Model(config).eval(), tokenizer, device="cpu")
    largest = []
    real_scores = exact_attention.scores

    def recording(q, k, rule, rows, cols):
        out = real_scores(q, k, rule, rows, cols)
        largest.append(out.numel() * out.element_size())
        return out

    monkeypatch.setattr(exact_attention, "scores", recording)
    text = "word " * 3000
    with pytest.warns(UserWarning, match="Input truncated from 6001 to 3000 tokens"):
        result = engine.run(text, max_length=3000, attention="on_demand")
    assert result.n_tokens == 3000
    whole_layer = 4 * result.n_heads * 3000 * 3000
    assert largest and max(largest) <= exact_attention.BLOCK_BYTES < whole_layer
    assert result.nbytes < whole_layer / 20  # q, k and lse of both layers


def test_attention_sinks_per_head_from_the_first_columns_alone(family):
    name, engine = family
    full = engine.run(TEXT, attention="full")
    long = engine.run(TEXT, attention="on_demand")
    table = attnscope.attention_sinks(long, n_first=4, epsilon=0.3)
    assert len(table) == long.n_layers * long.n_heads
    assert list(table.columns) == ["layer", "head", "label", "key_head", "alpha_first", "first_n_mass", "sink"]
    attention = full.attention.cpu()
    # Gu et al.'s α for the first token: the mean over queries of the attention on it.
    expected_alpha = attention[..., 0].mean(-1).flatten()
    expected_mass = attention[..., :4].sum(-1).mean(-1).flatten()
    assert torch.allclose(torch.tensor(table["alpha_first"].values, dtype=torch.float32), expected_alpha, atol=1e-5)
    assert torch.allclose(torch.tensor(table["first_n_mass"].values, dtype=torch.float32), expected_mass, atol=1e-5)
    assert table["sink"].tolist() == (expected_alpha > 0.3).tolist()
    assert table.attrs["sink_rate"] == pytest.approx(float((expected_alpha > 0.3).float().mean()))
    assert table["key_head"].tolist() == [long.key_head(h) for _ in range(long.n_layers) for h in range(long.n_heads)]
    # The full result gives the same table.
    same = attnscope.attention_sinks(full, n_first=4)
    assert torch.allclose(torch.tensor(same["alpha_first"].values), torch.tensor(table["alpha_first"].values), atol=1e-5)
    with pytest.raises(InputError, match="epsilon"):
        attnscope.attention_sinks(long, epsilon=3)
    # A corpus's settings given with one run are refused, not ignored: the run is made already.
    for setting in (dict(max_length=64), dict(column="text"), dict(attention="full"), dict(backend="ray")):
        with pytest.raises(InputError, match=f"{next(iter(setting))}= set how a corpus is run"):
            attnscope.attention_sinks(long, **setting)


def test_a_fused_kernel_whose_log_sum_exps_disagree_is_not_kept(tokenizer, monkeypatch):
    # A GPU's fused kernels (flash, memory-efficient) also return each row's log-sum-exp; one that
    # rounds its products or uses another log base is checked on a few rows and not kept.
    engine = attnscope.load(scaled_up(families()["llama (GQA)"]()), tokenizer, device="cpu")
    expected = engine.run(TEXT, attention="on_demand")
    real, offered = fast_capture._fused_with_lse, []

    def in_log_base_two(*args):
        found = real(*args)
        offered.append(found is not None)
        return found[0], found[1] / math.log(2)

    monkeypatch.setattr(fast_capture, "_fused_with_lse", in_log_base_two)
    result = engine.run(TEXT, attention="on_demand")
    assert offered and all(offered)
    for layer in range(result.n_layers):
        assert torch.allclose(result.lse[layer], expected.lse[layer], atol=1e-5)
    assert torch.allclose(result.attention_rows(1, 2, [0, -1]).sum(-1), torch.ones(2), atol=1e-5)


def test_a_gpu_scores_larger_blocks_within_its_free_memory_and_refines_in_fewer_passes(monkeypatch):
    from types import SimpleNamespace

    from attnscope.engine import exact_attention
    from attnscope.widget import payloads as pl

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * 2**30, 141 * 2**30))
    assert exact_attention.block_bytes(cuda) == exact_attention.GPU_BLOCK_BYTES
    assert exact_attention.block_bytes(cpu) == exact_attention.BLOCK_BYTES < exact_attention.GPU_BLOCK_BYTES
    assert exact_attention.block_rows(4, 1000, device=cuda) == exact_attention.GPU_BLOCK_BYTES // (4 * 4 * 1000)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2 * 2**30, 8 * 2**30))
    assert exact_attention.block_bytes(cuda) == 2**30 // 4  # an eighth of what is free
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (100 * 2**20, 8 * 2**30))
    assert exact_attention.block_bytes(cuda) == exact_attention.BLOCK_BYTES  # never less than the CPU's
    on = lambda device: SimpleNamespace(queries=[SimpleNamespace(device=device)])
    pairs = 14 * 32768**2  # a 32,768-token map, every head
    assert pl._passes(on(cpu), pairs, 128) == 128  # as many as its blocks' rows allow
    assert pl._passes(on(cuda), pairs, 128) == 2
