"""`make bench`: kernel-side cost of attnscope against a bare forward pass, and bytes per layer sent.

Writes benchmarks/results.json and the table in benchmarks/README.md (between the markers).
Models: the embedded all-MiniLM-L6-v2, and a bert-base-shaped BertModel (BertConfig defaults,
random weights, 12 layers × 12 heads). Times are medians of repeated runs on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

import attnscope
from attnscope.engine.borrowing import borrowed
from attnscope.serialize import quantize_uint8

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # browser_bench beside this file
REPEATS = int(os.environ.get("BENCH_REPEATS", "9"))
FLOW_LONG_TOKENS = (8192, 32768)  # issue 47: the norms' cost at the long bench's shape
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def text_of_length(tokenizer, n_tokens: int) -> str:
    """A text that tokenizes to exactly n_tokens with [CLS] and [SEP]."""
    words = ("the quick brown fox jumps over the lazy dog while a cat watches " * 200).split()
    ids = tokenizer(" ".join(words), add_special_tokens=False, verbose=False)["input_ids"][: n_tokens - 2]
    return tokenizer.decode(ids)


def median_seconds(*fns) -> list[float]:
    """Median time of each function, run alternately so that machine noise hits all alike."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(REPEATS):
        for fn, bucket in zip(fns, times):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) for bucket in times]


def bench_model(label: str, engine: attnscope.AttentionModel, n_tokens: int) -> dict:
    text = text_of_length(engine.tokenizer, n_tokens)
    inputs = engine.tokenizer(text, return_tensors="pt").to(engine.device)
    assert inputs["input_ids"].shape[1] == n_tokens, inputs["input_ids"].shape

    def bare():
        # The model as loaded (sdpa for these): it computes no attention weights to return.
        with torch.inference_mode():
            engine.model(**inputs, output_attentions=True)

    def bare_with_weights():
        # The model's own forward returning every layer's weights (eager attention, as a user
        # of output_attentions=True gets them): the forward attnscope runs.
        with torch.inference_mode(), borrowed(engine.model):
            outputs = engine.model(**inputs, output_attentions=True)
        assert len(outputs.attentions) == engine.n_layers

    def ours():
        engine.run(text)

    bare_s, weights_s, ours_s = median_seconds(bare, bare_with_weights, ours)
    result = engine.run(text)
    first_layer_bytes = len(quantize_uint8(result.attention[0])["data"])
    all_layers_float32 = result.attention.numel() * 4
    return {
        "model": label,
        "tokens": n_tokens,
        "layers": result.n_layers,
        "heads": result.n_heads,
        "bare_forward_s": round(bare_s, 4),
        "attnscope_run_s": round(ours_s, 4),
        "run_over_bare": round(ours_s / bare_s, 3),
        "forward_with_weights_s": round(weights_s, 4),
        "run_over_forward_with_weights": round(ours_s / weights_s, 3),
        "first_layer_bytes": first_layer_bytes,
        "all_layers_float32_bytes": all_layers_float32,
    }


def run_bertviz() -> dict | None:
    """BertViz 1.4.1's numbers (benchmarks/bertviz_bench.py, in a child process: it needs ~9 GB)."""
    try:
        import bertviz  # noqa: F401
    except ImportError:
        print("bertviz is not installed (make bench installs it): using the last bertviz_results.json", flush=True)
    else:
        subprocess.run([sys.executable, str(HERE / "bertviz_bench.py")], check=False)
    path = HERE / "bertviz_results.json"
    return json.loads(path.read_text()) if path.is_file() else None


def run_circuitsvis(skip: bool) -> None:
    """CircuitsVis on long inputs (benchmarks/circuitsvis_bench.py, a child per length)."""
    try:
        import circuitsvis  # noqa: F401
    except ImportError:
        print("circuitsvis is not installed (make bench installs it): using the last circuitsvis_results.json", flush=True)
        return
    if not skip:
        subprocess.run([sys.executable, str(HERE / "circuitsvis_bench.py")], check=False, cwd=HERE)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-bertviz", action="store_true", help="reuse the last bertviz_results.json")
    parser.add_argument("--skip-circuitsvis", action="store_true", help="reuse the last circuitsvis_results.json")
    parser.add_argument("--only-analysis", action="store_true", help="rerun the corpus analyses, keep the rest")
    parser.add_argument("--only-memory", action="store_true", help="rerun the kernel memory bench, keep the rest")
    parser.add_argument("--only-long", action="store_true", help="rerun the long-input bench, keep the rest")
    parser.add_argument("--only-ray", action="store_true", help="rerun the Ray corpus bench, keep the rest")
    parser.add_argument("--only-jupyterlab", action="store_true", help="rerun the real-JupyterLab bench, keep the rest")
    parser.add_argument("--only-flow", action="store_true", help="rerun the value-norm and knockout bench, keep the rest")
    parser.add_argument("--only-first-clicks", action="store_true",
                        help="rerun the first clicks in real JupyterLab (first_clicks_bench.py), keep the rest")
    parser.add_argument("--only-generation", action="store_true",
                        help="rerun the generation bench (SmolLM2, with capture vs model.generate), keep the rest")
    parser.add_argument("--only-generation-page", action="store_true",
                        help="rerun a generation in real JupyterLab (generation_page_bench.py), keep the rest")
    args = parser.parse_args()
    from flow_bench import bench_flow
    from flow_bench import write as write_flow
    from generation_bench import bench_generation
    from generation_bench import write as write_generation

    if args.only_flow:
        write_flow(bench_flow(FLOW_LONG_TOKENS))
        return
    if args.only_generation:
        write_generation(bench_generation())
        return
    from generation_page_bench import run as bench_generation_page
    from generation_page_bench import write as write_generation_page

    if args.only_generation_page:
        write_generation_page(bench_generation_page())
        return
    from analysis_bench import bench_analyses, bench_reading_list
    from browser_bench import bench_front_end
    from jupyterlab_bench import bench_jupyterlab
    from long_bench import bench_long
    from memory_bench import bench_memory
    from ray_bench import bench_ray

    if args.only_first_clicks:
        from first_clicks_bench import run as bench_first_clicks

        results = json.loads((HERE / "results.json").read_text())
        results.setdefault("jupyterlab", {})["first_clicks"] = bench_first_clicks()
        (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        write_tables(results["engine"], results["front_end"], (results.get("bertviz") or {}).get("rows", []),
                     results["analysis"], results["memory"], results["long"], results.get("ray", []), results["jupyterlab"])
        return
    if args.only_jupyterlab:
        results = json.loads((HERE / "results.json").read_text())
        results["jupyterlab"] = bench_jupyterlab()
        (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        write_tables(results["engine"], results["front_end"], (results.get("bertviz") or {}).get("rows", []),
                     results["analysis"], results["memory"], results["long"], results.get("ray", []), results["jupyterlab"])
        return
    if args.only_ray:
        results = json.loads((HERE / "results.json").read_text())
        results["ray"] = bench_ray()
        (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        write_tables(results["engine"], results["front_end"], (results.get("bertviz") or {}).get("rows", []),
                     results["analysis"], results["memory"], results["long"], results["ray"], results.get("jupyterlab"))
        return
    if args.only_long:
        results = json.loads((HERE / "results.json").read_text())
        results["long"] = bench_long()
        run_circuitsvis(args.skip_circuitsvis)
        (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        write_tables(results["engine"], results["front_end"], (results.get("bertviz") or {}).get("rows", []),
                     results["analysis"], results["memory"], results["long"], results.get("ray", []), results.get("jupyterlab"))
        return

    memory_row = bench_memory()  # first, in its own process: nothing else has run yet
    print(json.dumps(memory_row), flush=True)
    if args.only_memory:
        results = json.loads((HERE / "results.json").read_text())
        results["memory"] = memory_row
        (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        write_tables(results["engine"], results["front_end"], (results.get("bertviz") or {}).get("rows", []),
                     results["analysis"], memory_row, results.get("long", []), results.get("ray", []), results.get("jupyterlab"))
        return

    torch.manual_seed(0)
    minilm = attnscope.load(device="cpu")
    bert_base = attnscope.load(transformers.BertModel(transformers.BertConfig()).eval(), minilm.tokenizer, device="cpu")
    models = (("bert-base shape (random)", bert_base), ("all-MiniLM-L6-v2 (embedded)", minilm))
    analysis_rows = [row for label, engine in models for row in bench_analyses(label, engine)] + bench_reading_list(minilm)
    if args.only_analysis:
        results = json.loads((HERE / "results.json").read_text())
        results["analysis"] = analysis_rows
        results["memory"] = memory_row
        (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        write_tables(results["engine"], results["front_end"], (results.get("bertviz") or {}).get("rows", []),
                     analysis_rows, memory_row, results.get("long", []), results.get("ray", []), results.get("jupyterlab"))
        return
    engine_rows, front_rows = [], []
    for label, engine in models:
        for n_tokens in (128, 512):
            row = bench_model(label, engine, n_tokens)
            print(json.dumps(row), flush=True)
            engine_rows.append(row)
            front = {"model": label, "tokens": n_tokens, **bench_front_end(engine, text_of_length(engine.tokenizer, n_tokens))}
            print(json.dumps(front), flush=True)
            front_rows.append(front)
    long_rows = bench_long()
    flow = bench_flow(FLOW_LONG_TOKENS)
    generation = bench_generation()
    jupyterlab = bench_jupyterlab()
    generation_page = bench_generation_page()
    ray_rows = bench_ray()  # last: its cluster shares these CPUs
    if torch.cuda.is_available():  # the GPU's own tables (gpu_results.json, README's GPU section)
        subprocess.run([sys.executable, str(HERE / "gpu_bench.py")], check=False, cwd=HERE)
    run_circuitsvis(args.skip_circuitsvis)
    bertviz = None if args.skip_bertviz else run_bertviz()
    if bertviz is None and (HERE / "bertviz_results.json").is_file():
        bertviz = json.loads((HERE / "bertviz_results.json").read_text())
    results = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform()},
        "repeats": REPEATS,
        "engine": engine_rows,
        "front_end": front_rows,
        "bertviz": bertviz,
        "analysis": analysis_rows,
        "memory": memory_row,
        "long": long_rows,
        "ray": ray_rows,
        "jupyterlab": jupyterlab,
        "flow": flow,
        "generation": generation,
    }
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_tables(engine_rows, front_rows, (bertviz or {}).get("rows", []), analysis_rows, memory_row, long_rows, ray_rows,
                 jupyterlab)
    write_flow(flow)  # its own section of README.md
    write_generation(generation)  # likewise
    write_generation_page(generation_page)


def _find(rows: list[dict], **match) -> dict:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), {})


def _mb(n) -> str:
    return "–" if n is None else f"{n / 1e6:,.1f} MB"


def _ms(seconds=None, ms=None) -> str:
    if ms is not None:
        return f"{ms:,.0f} ms"
    return "never (see note)" if seconds is None else f"{seconds * 1000:,.0f} ms"


def write_tables(
    engine_rows: list[dict], front_rows: list[dict], bertviz_rows: list[dict], analysis_rows: list[dict], memory_row: dict | None,
    long_rows: list[dict] = (), ray_rows: list[dict] = (), jupyterlab: dict | None = None,
) -> None:
    from analysis_bench import table as analysis_table
    from circuitsvis_bench import table as peers_table
    from long_bench import table as long_table
    from memory_bench import table as memory_table
    from ray_bench import table as ray_table

    base = "bert-base shape (random)"
    ours = _find(front_rows, model=base, tokens=512)
    kernel = _find(engine_rows, model=base, tokens=512)
    real = _find(front_rows, model="all-MiniLM-L6-v2 (embedded)", tokens=512)
    bv_head = _find(bertviz_rows, view="head", tokens=512)
    bv_model = _find(bertviz_rows, view="model", tokens=512)
    bv_head_128 = _find(bertviz_rows, view="head", tokens=128)

    def check(value, limit) -> str:
        return "✅" if value is not None and value <= limit else "❌"

    lines = [
        BEGIN,
        "### Targets at 512 tokens, bert-base shape (12 layers × 12 heads), this 2-core CPU machine",
        "",
        "| measure | target | attnscope | met | BertViz 1.4.1 |",
        "|---|---|---|---|---|",
        f"| first paint, head view | ≤ 1.5 s | {_ms(ms=ours.get('head_first_paint_ms'))} | {check(ours.get('head_first_paint_ms'), 1500)} | {_ms(bv_head.get('first_paint_s'))} |",
        f"| first paint, model view | ≤ 1.5 s | {_ms(ms=ours.get('model_first_paint_ms'))} | {check(ours.get('model_first_paint_ms'), 1500)} | {_ms(bv_model.get('first_paint_s'))} |",
        f"| layer switch (head view) | ≤ 100 ms | {_ms(ms=ours.get('layer_switch_ms'))} | {check(ours.get('layer_switch_ms'), 100)} | at 128 tokens: {_ms(bv_head_128.get('layer_switch_s'))} |",
        f"| layer switch (head view), real MiniLM (its peaked heads draw ~14k lines) | ≤ 100 ms | {_ms(ms=real.get('layer_switch_ms'))} | {check(real.get('layer_switch_ms'), 100)} | – |",
        f"| neuron view, another token | ≤ 100 ms | {_ms(ms=ours.get('neuron_switch_ms'))} | {check(ours.get('neuron_switch_ms'), 100)} | – |",
        f"| sent before first paint, head view | ≤ 10 MB | {_mb(ours.get('bytes_before_head_paint'))} | {check(ours.get('bytes_before_head_paint'), 10e6)} | {_mb(bv_head.get('html_bytes'))} |",
        f"| sent before first paint, model view | ≤ 10 MB | {_mb(ours.get('bytes_before_model_paint'))} | {check(ours.get('bytes_before_model_paint'), 10e6)} | {_mb(bv_model.get('html_bytes'))} |",
        f"| kernel compute / bare forward (the model as loaded: sdpa, no weights) | ≤ 1.15 | {kernel.get('run_over_bare', '–')} | {check(kernel.get('run_over_bare'), 1.15)} | build {bv_head.get('python_build_s', '–')} s vs forward {bv_head.get('forward_s', '–')} s |",
        f"| kernel compute / the model's forward returning its weights (eager) | ≤ 1.15 | {kernel.get('run_over_forward_with_weights', '–')} | {check(kernel.get('run_over_forward_with_weights'), 1.15)} | – |",
        f"| JS heap after first paint (head view) | – | {_mb(ours.get('js_heap_bytes_head'))} | | {_mb(bv_head.get('js_heap_bytes'))} |",
        "",
        "### attnscope front end, every case",
        "",
        "| model | tokens | bytes before head paint | bytes before model paint | head first paint | model first paint | layer switch | neuron switch | JS heap (head) | JS heap (after neuron) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in front_rows:
        lines.append(
            f"| {r['model']} | {r['tokens']} | {_mb(r['bytes_before_head_paint'])} | {_mb(r['bytes_before_model_paint'])} "
            f"| {_ms(ms=r['head_first_paint_ms'])} | {_ms(ms=r['model_first_paint_ms'])} | {_ms(ms=r['layer_switch_ms'])} "
            f"| {_ms(ms=r['neuron_switch_ms'])} | {_mb(r['js_heap_bytes_head'])} | {_mb(r['js_heap_bytes_after_neuron'])} |"
        )
    if jupyterlab:
        from jupyterlab_bench import table as jupyterlab_table

        lines += ["", *jupyterlab_table(jupyterlab, front_rows)]
    lines += [
        "",
        "### Kernel side: attnscope's run against a bare forward pass",
        "",
        "A bare forward is the model as loaded (sdpa for these): with `output_attentions=True` it returns no",
        "weights. The forward that returns them runs eager attention. attnscope runs eager's own numbers a few",
        "heads at a time, the softmax written straight into the weights it keeps (engine/eager_blocks.py, for",
        "the BERT and Llama eager code most families share), sends a layer as its nonzero bytes, and keeps each",
        "layer's map, queries and keys apart until something reads every layer (results.LayerMaps).",
        "",
        "| model | tokens | bare forward (s) | forward returning weights (s) | attnscope run (s) | run / bare | run / forward returning weights | first layer sent (bytes) | all layers as float32 (bytes) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in engine_rows:
        lines.append(
            f"| {r['model']} | {r['tokens']} | {r['bare_forward_s']} | {r.get('forward_with_weights_s', '–')} | {r['attnscope_run_s']} "
            f"| {r['run_over_bare']} | {r.get('run_over_forward_with_weights', '–')} "
            f"| {r['first_layer_bytes']:,} | {r['all_layers_float32_bytes']:,} |"
        )
    if bertviz_rows:
        lines += [
            "",
            "### BertViz 1.4.1 (benchmarks/bertviz_bench.py; CDN scripts served from local npm copies)",
            "",
            "| view | tokens | forward (s) | build HTML (s) | HTML size | first paint | JS heap | layer switch | note |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in bertviz_rows:
            note = (r.get("note") or "").replace("|", "/").replace("\n", " ")[:160]
            lines.append(
                f"| {r['view']} | {r['tokens']} | {r.get('forward_s')} | {r.get('python_build_s')} | {_mb(r.get('html_bytes'))} "
                f"| {_ms(r.get('first_paint_s'))} | {_mb(r.get('js_heap_bytes'))} "
                f"| {'–' if r.get('layer_switch_s') is None else _ms(r['layer_switch_s'])} | {note} |"
            )
    if analysis_rows:
        lines += ["", *analysis_table(analysis_rows)]
    if ray_rows:
        lines += ["", *ray_table(ray_rows)]
    if memory_row:
        lines += ["", *memory_table(memory_row)]
    if long_rows:
        lines += ["", *long_table(long_rows)]
        peers = HERE / "circuitsvis_results.json"
        if peers.is_file():
            at_8k = _find(long_rows, case="qwen2-4layer", tokens=8192)
            lines += ["", *peers_table(json.loads(peers.read_text())["rows"], bertviz_rows, at_8k)]
    lines.append(END)
    readme = HERE / "README.md"
    text = readme.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    readme.write_text(text[:start] + "\n".join(lines) + text[end:])


if __name__ == "__main__":
    main()
