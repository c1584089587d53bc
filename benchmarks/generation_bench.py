"""Watch the model write (issue 48), kernel side: tokens per second of attnscope's generation (every
step's q, keys, row log-sum-exps and value norms kept: engine/generation.py) against the model's
own `model.generate` (sdpa, greedy, no attention returned), on SmolLM2-135M-Instruct.

- Each case runs the two alternately, `repeats` times, in one process, in the order ABBA...: the
  machine's load drifts by 1.5 × and more between runs (a decode step took 80 to 750 ms within the
  hour), so each pair's ratio is taken, and the pairs' median and lowest; and the two take turns a
  step at a time (_interleaved_steps), the capture's cost a step with the drift taken out.
- Tokens per second over the whole call (the prompt's pass included, what a user waits for) and
  over the steps alone (after the prompt's pass: model.generate's first token comes with its
  prompt's pass; attnscope feeds every chosen token through the model at once, so that its row
  exists when it is shown, one forward more than model.generate's).
- SmolLM2 has 8,192 positions: the long case's prompt is 8,192 less its new tokens.

Run alone: python benchmarks/generation_bench.py [--cases 512:64,8160:32] [--repeats 4] (updates
results.json's "generation" and its table in README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- generation:begin -->", "<!-- generation:end -->"
# (prompt tokens, new tokens): 512 with 64 new; the longest prompt that leaves room for 32 new in
# SmolLM2's 8,192 positions. 256 new tokens after 8,192 would take 10–30 minutes a pair here.
CASES = ((512, 64), (8160, 32))
TARGET = 0.87


def _prompt(tokenizer, n_tokens: int) -> str:
    """A prompt of about n_tokens (plain text, no chat template): the project's README, repeated."""
    words = (HERE.parent / "README.md").read_text()
    ids = tokenizer(words * (1 + 4 * n_tokens // max(1, len(words))), verbose=False)["input_ids"][:n_tokens]
    return tokenizer.decode(ids)


class _Clock:
    """A streamer for model.generate that notes when each of its puts comes (the prompt, then each token)."""

    def __init__(self):
        self.times: list[float] = []

    def put(self, _value) -> None:
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def _plain(engine, encoded, new_tokens: int) -> tuple[list[int], float, float]:
    """model.generate's new ids, its whole time and its time a step after the first token."""
    clock = _Clock()
    start = time.perf_counter()
    out = engine.model.generate(**encoded, max_new_tokens=new_tokens, do_sample=False, streamer=clock)
    whole = time.perf_counter() - start
    ids = out[0, encoded["input_ids"].shape[1]:].tolist()
    return ids, whole, (clock.times[-1] - clock.times[1]) / max(1, len(ids) - 1)


def _captured(engine, prompt: str, new_tokens: int) -> tuple[list[int], float, float]:
    """attnscope's generation: its new ids, its whole time and its time a step after the prompt's pass."""
    from attnscope.engine.generation import generation_steps

    start = time.perf_counter()
    stamps, last = [], None
    for run in generation_steps(engine, prompt, new_tokens, chat=False):
        stamps.append(time.perf_counter())
        last = run
    whole = time.perf_counter() - start
    return last.new_ids, whole, (stamps[-1] - stamps[0]) / max(1, last.steps)


def _interleaved_steps(engine, prompt: str, encoded, steps: int) -> tuple[list[float], list[float]]:
    """Each step of attnscope's generation, then the model's own cached forward of the same token
    on a cache of its own (no capture): the times of each, per step. The two take turns a step at
    a time, so that a change of the machine's load hits both."""
    from transformers import DynamicCache

    from attnscope.engine.generation import generation_steps

    model = engine.model
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(**encoded, cache=cache, use_cache=True, logits_to_keep=1)
    run = generation_steps(engine, prompt, steps, chat=False)
    step = next(run)
    ours, plain = [], []
    for _ in range(steps):
        start = time.perf_counter()
        step = next(run)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        with torch.inference_mode():
            model(input_ids=torch.tensor([[step.new_ids[-1]]]), cache=cache, use_cache=True, logits_to_keep=1)
        plain.append(time.perf_counter() - start)
    run.close()
    return ours, plain


def bench_case(engine, prompt_tokens: int, new_tokens: int, repeats: int) -> dict:
    prompt = _prompt(engine.tokenizer, prompt_tokens)
    encoded = engine.tokenizer(prompt, return_tensors="pt")
    n_prompt = int(encoded["input_ids"].shape[1])
    load_before = os.getloadavg()[0]
    pairs = []
    for pair in range(repeats):
        if pair % 2 == 0:  # ABBA: a load that rises or falls through the case hits both alike
            plain_ids, plain_s, plain_step = _plain(engine, encoded, new_tokens)
            ours_ids, ours_s, ours_step = _captured(engine, prompt, new_tokens)
        else:
            ours_ids, ours_s, ours_step = _captured(engine, prompt, new_tokens)
            plain_ids, plain_s, plain_step = _plain(engine, encoded, new_tokens)
        if ours_ids[: len(plain_ids)] != plain_ids:
            raise AssertionError(f"greedy generation differs from model.generate's at {n_prompt} tokens")
        pairs.append({"plain_tps": len(plain_ids) / plain_s, "tps": len(ours_ids) / ours_s,
                      "plain_step_tps": 1 / plain_step, "step_tps": 1 / ours_step})
        print(json.dumps({"prompt_tokens": n_prompt, **{k: round(v, 3) for k, v in pairs[-1].items()},
                          "load": os.getloadavg()[0]}), flush=True)
    ours_steps, plain_steps = _interleaved_steps(engine, prompt, encoded, new_tokens)
    ratios = [p["tps"] / p["plain_tps"] for p in pairs]
    step_ratios = [p["step_tps"] / p["plain_step_tps"] for p in pairs]
    median = lambda key: round(statistics.median(p[key] for p in pairs), 3)
    return {"model": engine.name, "prompt_tokens": n_prompt, "new_tokens": new_tokens, "repeats": repeats,
            "plain_tps": median("plain_tps"), "tps": median("tps"),
            "ratio_median": round(statistics.median(ratios), 3), "ratio_min": round(min(ratios), 3),
            "plain_step_tps": median("plain_step_tps"), "step_tps": median("step_tps"),
            "step_ratio_median": round(statistics.median(step_ratios), 3), "step_ratio_min": round(min(step_ratios), 3),
            "interleaved_step_ratio_median": round(statistics.median(p / o for p, o in zip(plain_steps, ours_steps)), 3),
            "interleaved_step_ratio_all": round(sum(plain_steps) / sum(ours_steps), 3),
            "load_before": round(load_before, 1), "load_after": round(os.getloadavg()[0], 1)}


def bench_generation(cases=CASES, repeats: int = 4) -> list[dict]:
    import attnscope

    engine = attnscope.load("smollm2", device="cpu")
    rows = []
    for prompt_tokens, new_tokens in cases:
        rows.append(bench_case(engine, prompt_tokens, new_tokens, repeats if prompt_tokens <= 2048 else max(2, repeats // 2)))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict]) -> list[str]:
    def met(row) -> str:
        return "✅" if row["ratio_median"] >= TARGET else "❌"

    lines = [BEGIN, "### Generation with every step's attention kept (issue 48), SmolLM2-135M-Instruct", "",
             "Tokens per second of `attnscope.generate`'s engine (every step's q, keys, log-sum-exps and value norms "
             "kept) against `model.generate` (sdpa, greedy), run alternately; ratios per pair, median (lowest). "
             f"Target: ≥ {TARGET} × model.generate. The load is the 1-minute load average of this 2-core machine "
             "(other work shares it).", "",
             "| prompt | new tokens | pairs | model.generate (tokens/s) | with capture (tokens/s) | ratio | ≥ 0.87 "
             "| steps alone: model.generate / with capture (tokens/s) | steps' ratio | a step at a time | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['prompt_tokens']:,} | {r['new_tokens']} | {r['repeats']} | {r['plain_tps']} | {r['tps']} "
                     f"| {r['ratio_median']} ({r['ratio_min']}) | {met(r)} | {r['plain_step_tps']} / {r['step_tps']} "
                     f"| {r['step_ratio_median']} ({r['step_ratio_min']}) | {r['interleaved_step_ratio_median']} "
                     f"({r['interleaved_step_ratio_all']}) | {r['load_before']} → {r['load_after']} |")
    lines += ["", "*A step at a time*: each step of attnscope's generation and the model's own cached forward of the same "
              "token (no capture) take turns, a step each, over the case's new tokens: the median of the per-step ratios "
              "(and the ratio of their sums, the checked steps included). It is the capture's cost a step with the "
              "machine's drift taken out; the pairs of whole calls above carry that drift.",
              "", "The whole call includes the prompt's pass (with capture: the q, keys and log-sum-exps of every prompt "
              "token, from the same fused kernel). The long prompt is 8,192 positions less its new tokens: SmolLM2 "
              "has 8,192; 256 new tokens after it would take 10–30 minutes a pair on this machine.", END]
    return lines


def write(rows: list[dict]) -> None:
    results_path = HERE / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    results["generation"] = rows
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    readme = HERE / "README.md"
    text = readme.read_text()
    block = "\n".join(table(rows))
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(text)


def _cases(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(int(x) for x in case.split(":")) for case in text.split(",") if case)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=",".join(f"{p}:{n}" for p, n in CASES),
                        help="prompt tokens:new tokens, comma-separated")
    parser.add_argument("--repeats", type=int, default=4, help="pairs per case (half as many above 2,048 tokens)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    write(bench_generation(_cases(args.cases), args.repeats))
