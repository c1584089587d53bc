"""What flows (issue 47), kernel side: what weighing by value norm costs a run, what a switch of
Weigh by costs the kernel, a weighed row at a long input, and a knockout sweep on SmolLM2.

- Short runs (the embedded MiniLM and the bert-base shape at 512 tokens): attnscope's run as it is
  (value norms captured) against the same run with the norms left out (value_norms.captured
  patched to keep none), medians of alternating runs; and the kernel's part of a switch of
  Weigh by on a widget (the state remade: α·‖f‖ for every layer, its one scale, the open layer's
  payload), the first switch and the median.
- Long runs (long_bench's 4-layer Qwen2 shape, random weights, on demand): the run with and
  without the norms (fast_capture's per-layer norms patched to none), and a weighed mean row of a
  layer (what the text view asks for on a click) against the plain one.
- Knockout: knockout_sweep over every layer window of SmolLM2-135M-Instruct for one 64-token prompt,
  3 times, each between plain forwards of the prompt (the sweep in forwards, as the load drifts).
- Contributions: ALTI (attnscope.contributions) at 512 tokens on MiniLM against its run, alternating.
- The head finder on MiniLM over the shipped sentences, with its norm metrics and without (the
  norms left out, as for the short runs), alternating.

Run alone: python benchmarks/flow_bench.py [--long 8192,32768] (updates results.json's "flow"
and its table in README.md); --only-knockout and --only-contributions rerun those and keep the
other rows, --only-long the long rows, --only-finder the head finder's norm metrics. A long run's
norms are also timed inside one run, where they are made: what weighing adds without the drift
between runs (at 32,768 tokens a run is a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- flow:begin -->", "<!-- flow:end -->"
REPEATS = int(os.environ.get("BENCH_REPEATS", "9"))


@contextmanager
def without_value_norms():
    """The run's value norms left out, as before issue 47: the baseline they are measured against."""
    from attnscope.engine import attention_model, fast_capture

    captured, per_layer = attention_model.value_norms.captured, fast_capture._value_norms
    attention_model.value_norms.captured = lambda *args, **kwargs: (None, None)
    fast_capture._value_norms = lambda *args, **kwargs: None
    try:
        yield
    finally:
        attention_model.value_norms.captured, fast_capture._value_norms = captured, per_layer


def _alternating_medians(with_norms, without, repeats: int = REPEATS, spread: list | None = None) -> tuple[float, float]:
    """Medians of runs with and without the norms, taken in turns; `spread` (a list) gets each
    side's (fastest, slowest)."""
    with_norms()
    with without_value_norms():
        without()
    a, b = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        with_norms()
        a.append(time.perf_counter() - start)
        with without_value_norms():
            start = time.perf_counter()
            without()
            b.append(time.perf_counter() - start)
    if spread is not None:
        spread += [(min(a), max(a)), (min(b), max(b))]
    return statistics.median(a), statistics.median(b)


@contextmanager
def timing_value_norms(spent: list):
    """Each layer's value norms in a run timed where they are made (fast_capture._value_norms): what
    weighing adds to the run, taken inside it, so that the machine's drift between runs is out."""
    from attnscope.engine import fast_capture

    made = fast_capture._value_norms

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return made(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    fast_capture._value_norms = timed
    try:
        yield
    finally:
        fast_capture._value_norms = made


def bench_short(label: str, engine, n_tokens: int) -> dict:
    from run import text_of_length

    import attnscope

    text = text_of_length(engine.tokenizer, n_tokens)
    run_s, plain_s = _alternating_medians(lambda: engine.run(text), lambda: engine.run(text))
    widget = attnscope.AttentionWidget(text, model=engine)
    switches = []
    for k in range(2 * 5):
        start = time.perf_counter()
        widget.weigh_by = "value_norm" if k % 2 == 0 else "attention"
        switches.append(time.perf_counter() - start)
    widget.close()
    return {"model": label, "tokens": n_tokens, "run_s": round(run_s, 3), "run_without_norms_s": round(plain_s, 3),
            "norms_overhead": round(run_s / plain_s - 1, 3),
            "switch_first_ms": round(1000 * switches[0], 1), "switch_median_ms": round(1000 * statistics.median(switches), 1)}


def bench_long_case(n_tokens: int) -> dict:
    import torch
    import transformers
    from long_bench import SMALL

    sys.path.insert(0, str(HERE.parent / "tests" / "engine"))
    from test_token_labels import byte_level_bpe

    import attnscope
    from attnscope.engine.weighing import weighed

    torch.manual_seed(0)
    tokenizer = byte_level_bpe()
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=32768, **SMALL)
    engine = attnscope.load(transformers.Qwen2Model(config).eval(), tokenizer, device="cpu")
    ids = torch.randint(5, len(tokenizer), (1, 3 * n_tokens))
    text = tokenizer.decode(ids[0])
    run = lambda: engine.run(text, max_length=n_tokens, attention="on_demand")
    spread: list = []
    run_s, plain_s = _alternating_medians(run, run, repeats=3 if n_tokens > 8192 else 5, spread=spread)
    spent: list = []
    with timing_value_norms(spent):
        start = time.perf_counter()
        result = run()
        timed_run_s = time.perf_counter() - start
    drawn = weighed(result, "value_norm")
    last = result.n_tokens - 1

    def row_ms(of) -> tuple[float, float]:
        samples = []
        for _ in range(6):
            start = time.perf_counter()
            of.mean_attention_rows(2, [last])
            samples.append(time.perf_counter() - start)
        return round(1000 * samples[0], 1), round(1000 * statistics.median(samples[1:]), 1)

    (_, plain_row), (weighed_first, weighed_row) = row_ms(result), row_ms(drawn)
    return {"case": "qwen2-4layer", "tokens": n_tokens, "run_s": round(run_s, 2), "run_without_norms_s": round(plain_s, 2),
            "norms_overhead": round(run_s / plain_s - 1, 3), "runs_range_s": [[round(x, 2) for x in r] for r in spread],
            "norms_in_run_s": round(sum(spent), 3), "norms_share": round(sum(spent) / timed_run_s, 4), "mean_row_ms": plain_row, "weighed_mean_row_ms": weighed_row,
            "weighed_mean_row_first_ms": weighed_first}


def bench_knockout(repeats: int = 3) -> dict:
    """The sweep, `repeats` times, each between two plain forwards of its prompt (the model's own,
    all logits): the sweep's time and, as the machine's load drifts, the sweep in forwards."""
    import torch

    import attnscope

    engine = attnscope.load("smollm2", device="cpu")
    words = "The Eiffel Tower is in the city of Paris, the capital of France. " * 8
    ids = engine.tokenizer(words)["input_ids"][:63]
    prompt = engine.tokenizer.decode(ids) + " The Eiffel Tower is in"
    encoded = engine.tokenizer(prompt, return_tensors="pt")
    n = int(encoded["input_ids"].shape[1])

    def forward() -> float:
        start = time.perf_counter()
        with torch.inference_mode():
            engine.model(**encoded, use_cache=False)
        return time.perf_counter() - start

    forward()
    sweeps, forwards, windows = [], [], 0
    for _ in range(repeats):
        before = forward()
        start = time.perf_counter()
        windows = len(attnscope.knockout_sweep(engine, prompt, [1, 2, 3], window=1, progress=False))
        sweeps.append(time.perf_counter() - start)
        forwards.append((before + forward()) / 2)
    in_forwards = [s / f for s, f in zip(sweeps, forwards)]
    return {"model": engine.name, "tokens": n, "windows": windows, "repeats": repeats,
            "sweep_s": round(statistics.median(sweeps), 1), "sweep_max_s": round(max(sweeps), 1),
            "forward_s": round(statistics.median(forwards), 2), "sweep_in_forwards": round(statistics.median(in_forwards), 1),
            "load": round(os.getloadavg()[0], 1)}


def bench_contributions(repeats: int = 5) -> dict:
    """Contributions (attnscope.contributions: ALTI, and the norms of method="norm") of a 512-token
    text on the embedded MiniLM against its plain run (engine.run), in turns: medians and ratios."""
    from run import text_of_length

    import attnscope

    engine = attnscope.load(device="cpu")
    text = text_of_length(engine.tokenizer, 512)
    run_s, contributions_s, norm_s = _alternating(lambda: engine.run(text), lambda: attnscope.contributions(engine, text),
                                                  lambda: attnscope.contributions(engine, text, method="norm"), repeats=repeats)
    return {"model": "all-MiniLM-L6-v2 (embedded)", "tokens": 512, "repeats": repeats, "run_s": round(run_s, 3),
            "contributions_s": round(contributions_s, 3), "ratio": round(contributions_s / run_s, 1),
            "norm_s": round(norm_s, 3), "norm_ratio": round(norm_s / run_s, 2), "load": round(os.getloadavg()[0], 1)}


@contextmanager
def finder_without_norms():
    """The head finder's corpus forward without the value projections' capture and norms (its
    iter_attention asked for none): the baseline of its norm metrics."""
    from attnscope.analyses import finder_measures

    iterate = finder_measures.iter_attention
    finder_measures.iter_attention = lambda *args, **kwargs: iterate(*args, **{**kwargs, "value_norms": False})
    try:
        yield
    finally:
        finder_measures.iter_attention = iterate


def bench_finder(repeats: int = 9) -> dict:
    """head_finder on the embedded MiniLM over notebooks/data/sentences.txt, with Kobayashi et al.'s
    norm metrics (what it gives) against the same run whose forward captures no values (their
    columns NaN), in turns: what the norm metrics add to the finder."""
    import math

    import attnscope

    engine = attnscope.load(device="cpu")
    sentences = [s for s in (HERE.parent / "notebooks" / "data" / "sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    run = lambda: attnscope.head_finder(engine, sentences, progress=False)
    with finder_without_norms():
        assert all(math.isnan(v) for v in run().metrics["value_norm"]), "the baseline still measured the norms"
    assert not any(math.isnan(v) for v in run().metrics["value_norm"])
    def run_without_norms():
        with finder_without_norms():
            run()

    with_s, without_s = _alternating(run, run_without_norms, repeats=repeats)
    return {"model": "all-MiniLM-L6-v2 (embedded)", "documents": len(sentences), "repeats": repeats,
            "finder_s": round(with_s, 3), "finder_without_norms_s": round(without_s, 3),
            "norms_overhead": round(with_s / without_s - 1, 3), "load": round(os.getloadavg()[0], 1)}


def _alternating(*calls, repeats: int) -> tuple[float, ...]:
    """Each call's median time, the calls taken in turns (after one of each to warm up)."""
    for call in calls:
        call()
    times = [[] for _ in calls]
    for _ in range(repeats):
        for call, into in zip(calls, times):
            start = time.perf_counter()
            call()
            into.append(time.perf_counter() - start)
    return tuple(statistics.median(t) for t in times)


def bench_flow(long_tokens=(8192,)) -> dict:
    import torch
    import transformers

    import attnscope

    torch.manual_seed(0)
    minilm = attnscope.load(device="cpu")
    bert_base = attnscope.load(transformers.BertModel(transformers.BertConfig()).eval(), minilm.tokenizer, device="cpu")
    short = [bench_short(label, engine, 512) for label, engine in
             (("all-MiniLM-L6-v2 (embedded)", minilm), ("bert-base shape (random)", bert_base))]
    for row in short:
        print(json.dumps(row), flush=True)
    long = [bench_long_case(n) for n in long_tokens]
    for row in long:
        print(json.dumps(row), flush=True)
    knockout = bench_knockout()
    print(json.dumps(knockout), flush=True)
    contributions = bench_contributions()
    print(json.dumps(contributions), flush=True)
    finder = bench_finder()
    print(json.dumps(finder), flush=True)
    return {"short": short, "long": long, "knockout": knockout, "contributions": contributions, "finder": finder}


def table(flow: dict) -> list[str]:
    def met(value, limit) -> str:
        return "✅" if value is not None and value <= limit else "❌"

    lines = [BEGIN, "### What flows (issue 47): weighing by value norm and knockout", "",
             "| run | tokens | run (s) | the same run without the norms (s) | added | ≤ 10 % | Weigh by switch, kernel: first / median |",
             "|---|---|---|---|---|---|---|"]
    for r in flow.get("short", []):
        lines.append(f"| {r['model']} | {r['tokens']} | {r['run_s']} | {r['run_without_norms_s']} | {100 * r['norms_overhead']:.1f} % "
                     f"| {met(r['norms_overhead'], 0.10)} | {r['switch_first_ms']} ms / {r['switch_median_ms']} ms |")
    for r in flow.get("long", []):
        if "norms_share" in r:  # the norms timed inside the run; the two runs' medians beside, with their ranges
            (a_lo, a_hi), (b_lo, b_hi) = r["runs_range_s"]
            added = (f"{100 * r['norms_share']:.2f} % ({r['norms_in_run_s']} s, timed in the run); medians "
                     f"{100 * r['norms_overhead']:+.1f} % (ranges {a_lo}–{a_hi} s and {b_lo}–{b_hi} s)")
            lines.append(f"| {r['case']} on demand | {r['tokens']:,} | {r['run_s']} | {r['run_without_norms_s']} | {added} "
                         f"| {met(r['norms_share'], 0.10)} | mean row of a layer: {r['mean_row_ms']} ms, weighed {r['weighed_mean_row_ms']} ms "
                         f"(first {r['weighed_mean_row_first_ms']} ms) |")
            continue
        lines.append(f"| {r['case']} on demand | {r['tokens']:,} | {r['run_s']} | {r['run_without_norms_s']} | {100 * r['norms_overhead']:.1f} % "
                     f"| {met(r['norms_overhead'], 0.10)} | mean row of a layer: {r['mean_row_ms']} ms, weighed {r['weighed_mean_row_ms']} ms "
                     f"(first {r['weighed_mean_row_first_ms']} ms) |")
    k = flow.get("knockout")
    if k and "forward_s" in k:
        lines += ["", f"Knockout sweep over every layer of {k['model']} ({k['windows']} one-layer windows), one {k['tokens']}-token "
                  f"prompt: {k['sweep_s']} s, median of {k['repeats']} (slowest {k['sweep_max_s']} s; target ≤ 60 s: "
                  f"{met(k['sweep_max_s'], 60)}), {k['sweep_in_forwards']} × the plain forward of its prompt taken beside "
                  f"it ({k['forward_s']} s; load {k['load']}). Each window feeds only the last token through the "
                  "prompt's cache (engine/knockout.py); before, each was a whole forward: 31 forwards' time."]
    elif k:
        lines += ["", f"Knockout sweep over every layer of {k['model']} ({k['windows']} one-layer windows), one {k['tokens']}-token "
                  f"prompt: {k['sweep_s']} s (target ≤ 60 s: {met(k['sweep_s'], 60)})."]
    f = flow.get("finder")
    if f:
        lines += ["", f"The head finder's norm metrics (value_norm, alpha_first_weighed, sink_rate_weighed, first_weighed_ratio), "
                  f"{f['model']} over the {f['documents']} shipped sentences: {f['finder_s']} s against {f['finder_without_norms_s']} s "
                  f"with the norms left out, {100 * f['norms_overhead']:+.1f} % (≤ 10 %: {met(f['norms_overhead'], 0.10)}; medians of "
                  f"{f['repeats']}, in turns; load {f['load']})."]
    c = flow.get("contributions")
    if c:
        lines += ["", f"Contributions (ALTI) of a {c['tokens']}-token text on {c['model']}: {c['contributions_s']} s against "
                  f"its run's {c['run_s']} s, {c['ratio']} × (target ≤ 2 ×: {met(c['ratio'], 2)}; medians of {c['repeats']}, "
                  f"alternating; load {c['load']}). ALTI's L1 distance does not factor: each layer makes T × T × W terms "
                  "(512 × 512 × 384), each a sum over the H heads (1.2 G multiply-adds a layer, a batched product that "
                  "runs near this CPU's peak), and reads them once more for the L1 norm, a few keys of every row at a "
                  "time (3 MiB), exactly; the run is one forward, which contributions make too."]
        if "norm_s" in c:
            lines += ["", f"Contributions by their norms (`method=\"norm\"`, Kobayashi et al. 2021, the Rollout tab's Norm "
                      f"contributions), the same text in the same turns: {c['norm_s']} s, {c['norm_ratio']} × the run "
                      f"(target ≤ 2 ×: {met(c['norm_ratio'], 2)}). The L2 norm factors through each key's H × H Gram "
                      "matrix (T × H² × W and T² × H² multiply-adds a layer, no T × T × W terms)."]
    lines += ["", "The switch is the kernel's part (the state remade from the kept run); the page's redraw comes on top.", END]
    return lines


def write(flow: dict) -> None:
    results_path = HERE / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    results["flow"] = flow
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    readme = HERE / "README.md"
    text = readme.read_text()
    block = "\n".join(table(flow))
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--long", default="8192", help="long-input token counts, comma-separated")
    parser.add_argument("--only-knockout", action="store_true", help="rerun the knockout sweep, keep the other rows")
    parser.add_argument("--only-contributions", action="store_true", help="rerun the contributions row, keep the others")
    parser.add_argument("--only-long", action="store_true", help="rerun the long rows (--long), keep the others")
    parser.add_argument("--only-finder", action="store_true", help="rerun the head finder's norm metrics row, keep the others")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.only_knockout or args.only_contributions or args.only_long or args.only_finder:
        kept = json.loads((HERE / "results.json").read_text()).get("flow", {})
        if args.only_finder:
            kept["finder"] = bench_finder()
        if args.only_long:
            kept["long"] = [bench_long_case(int(n)) for n in args.long.split(",") if n]
        if args.only_knockout:
            kept["knockout"] = bench_knockout()
        if args.only_contributions:
            kept["contributions"] = bench_contributions()
        write(kept)
    else:
        write(bench_flow(tuple(int(n) for n in args.long.split(",") if n)))
