"""Long inputs on a decoder (issue 14): the kernel side of on-demand attention.

A 4-layer Qwen2-shaped model (hidden 512, 8 query heads on 2 key-value heads, random weights)
at 4,096 and 8,192 tokens: the model's own forward against attnscope's on-demand run (its own
sdpa, q/k/lse kept), the kernel's peak resident-memory growth during the run, what is kept, and
the time of a row, a 256² tile and every head's pooled overview. Then Qwen2.5-0.5B's width
(896 hidden, 14 query heads on 2 key-value heads, bf16) at 8,192 tokens for what the q/k/lse
cache takes per layer, times its 24 layers (running all 24 layers' MLPs on 2 CPU cores would
take minutes and adds nothing to the cache).

Each case runs in a fresh child process so that resident sizes are its own. Run alone:
python benchmarks/long_bench.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from memory_bench import release_freed_heap, rss_bytes

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMALL = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, intermediate_size=1376)
QWEN_05B_WIDTH = dict(hidden_size=896, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864)
QWEN_05B_LAYERS = 24
TARGET_PEAK_GROWTH = 1.5e9  # at 8,192 tokens on the 4-layer model
TARGET_CACHE_05B = 0.5e9


class PeakWatcher:
    """The largest resident size seen while the block runs (sampled every 5 ms)."""

    def __enter__(self):
        self.peak, self._stop = rss_bytes(), False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._stop:
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def measure(case: str, n_tokens: int) -> dict:
    import torch
    import transformers

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_token_labels import byte_level_bpe

    import attnscope
    from attnscope.exact_attention import full_attention_bytes

    torch.manual_seed(0)
    tokenizer = byte_level_bpe()
    if case == "qwen2-4layer":
        config = transformers.Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=32768, **SMALL)
        dtype, layers_measured = torch.float32, SMALL["num_hidden_layers"]
    else:
        layers_measured = 4
        config = transformers.Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=32768,
                                          num_hidden_layers=layers_measured, **QWEN_05B_WIDTH)
        dtype = torch.bfloat16
    model = transformers.Qwen2Model(config).eval().to(dtype)
    engine = attnscope.load(model, tokenizer, device="cpu")
    ids = torch.randint(5, len(tokenizer), (1, 3 * n_tokens))
    text = tokenizer.decode(ids[0])  # decoded random ids are more tokens than ids: cut by max_length
    encoded = tokenizer(text, truncation=True, max_length=n_tokens, return_tensors="pt")
    assert encoded["input_ids"].shape[1] == n_tokens
    with torch.inference_mode():
        start = time.perf_counter()
        model(input_ids=encoded["input_ids"], use_cache=False)
        forward_s = time.perf_counter() - start
    release_freed_heap()
    before = rss_bytes()
    with PeakWatcher() as watcher:
        start = time.perf_counter()
        result = engine.run(text, max_length=n_tokens)
        run_s = time.perf_counter() - start
    assert type(result).__name__ == "LongAttentionResult", type(result)
    n_heads = result.n_heads
    row = {
        "case": case, "tokens": n_tokens, "dtype": str(dtype).removeprefix("torch."),
        "layers": result.n_layers, "heads": n_heads, "key_heads": result.n_key_heads,
        "forward_s": round(forward_s, 2), "on_demand_run_s": round(run_s, 2),
        "peak_growth_bytes": watcher.peak - before, "cache_bytes": result.nbytes,
        "full_attention_float32_bytes": full_attention_bytes(result.n_layers, n_heads, n_tokens, n_tokens),
    }
    if case != "qwen2-4layer":
        row["cache_bytes_24_layers"] = result.nbytes * QWEN_05B_LAYERS // layers_measured
        return row
    last = n_tokens - 1
    timings = {}
    for name, fn in (
        ("row_ms", lambda: result.attention_rows(2, 3, [last])),
        ("tile_256_ms", lambda: result.attention_tile(2, 3, (last - 255, last + 1), (0, 256))),
    ):
        fn()
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        timings[name] = round(1000 * sorted(samples)[2], 2)
    start = time.perf_counter()
    for layer in range(result.n_layers):
        result.pooled(layer, bins=256, reduce="max")
    timings["pooled_all_heads_s"] = round(time.perf_counter() - start, 2)
    return {**row, **timings}


def bench_long() -> list[dict]:
    rows = []
    for case, n_tokens in (("qwen2-4layer", 4096), ("qwen2-4layer", 8192), ("qwen2.5-0.5b-width", 8192)):
        done = subprocess.run([sys.executable, __file__, "--child", case, str(n_tokens)], capture_output=True,
                              text=True, check=True, cwd=os.path.dirname(__file__))
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _gb(n) -> str:
    return "–" if n is None else f"{n / 1e9:,.2f} GB"


def table(rows: list[dict]) -> list[str]:
    small = [r for r in rows if r["case"] == "qwen2-4layer"]
    wide = next((r for r in rows if r["case"] != "qwen2-4layer"), {})
    at_8k = next((r for r in small if r["tokens"] == 8192), {})

    def met(value, limit) -> str:
        return "✅" if value is not None and value <= limit else "❌"

    lines = [
        "### Long inputs: on-demand attention (4-layer Qwen2 shape, 8 query heads on 2 key-value heads; CPU)",
        "",
        "| tokens | model's own forward | on-demand run | peak kernel growth | kept (q, k, lse) | full attention would be | row | 256² tile | pooled overview, all 32 heads |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in small:
        lines.append(
            f"| {r['tokens']:,} | {r['forward_s']} s | {r['on_demand_run_s']} s | {_gb(r['peak_growth_bytes'])} "
            f"| {_gb(r['cache_bytes'])} | {_gb(r['full_attention_float32_bytes'])} | {r['row_ms']} ms "
            f"| {r['tile_256_ms']} ms | {r['pooled_all_heads_s']} s |"
        )
    lines += [
        "",
        "| target | value | met |",
        "|---|---|---|",
        f"| kernel peak growth at 8,192 tokens, 4-layer model | ≤ 1.5 GB: {_gb(at_8k.get('peak_growth_bytes'))} "
        f"| {met(at_8k.get('peak_growth_bytes'), TARGET_PEAK_GROWTH)} |",
        f"| q/k/lse cache, Qwen2.5-0.5B width ({wide.get('dtype', 'bf16')}) at 8,192 tokens, 24 layers "
        f"| ≤ 0.5 GB: {_gb(wide.get('cache_bytes_24_layers'))} (measured on {wide.get('layers', '–')} layers: "
        f"{_gb(wide.get('cache_bytes'))}) | {met(wide.get('cache_bytes_24_layers'), TARGET_CACHE_05B)} |",
    ]
    return lines


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
    else:
        for line in table(bench_long()):
            print(line)
