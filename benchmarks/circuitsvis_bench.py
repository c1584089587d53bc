"""CircuitsVis beside attnscope on long inputs (issue 14: "side by side with BertViz and
CircuitsVis where they run at all").

The same model and text as long_bench.py (the 4-layer Qwen2 shape, random weights, 8 query heads):
CircuitsVis's `attention_heads` for layer 1, built with its offline source (the bundle inlined,
as it does without internet), then opened in headless chromium with the network refused.

Per length:
* full_attention_s - the model run with full attention (what CircuitsVis needs as input)
* python_build_s   - attention_heads(...).local_src: the page as a string
* html_bytes       - its size
* peak_rss_bytes   - this process's peak memory (a child per length)
* first_paint_s    - navigation → every head's canvas and the pattern's in the page, or null
                     when that did not happen within RENDER_TIMEOUT_S

8,192 tokens is not attempted: the page grows as T² (four times per doubling), so the table
extrapolates it from the largest length measured, and says so.

Run:  .venv/bin/python benchmarks/circuitsvis_bench.py   (make bench installs circuitsvis)
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS_PATH = HERE / "circuitsvis_results.json"
TOKEN_COUNTS = (512, 1024)
RENDER_TIMEOUT_S = 120.0


def measure(n_tokens: int) -> dict:
    import circuitsvis
    import circuitsvis.attention as cv_attention
    import torch
    import transformers
    from long_bench import SMALL

    sys.path.insert(0, str(HERE.parent / "tests" / "engine"))
    from test_token_labels import byte_level_bpe

    import attnscope

    torch.manual_seed(0)
    tokenizer = byte_level_bpe()
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=32768, **SMALL)
    engine = attnscope.load(transformers.Qwen2Model(config).eval(), tokenizer, device="cpu")
    text = tokenizer.decode(torch.randint(5, len(tokenizer), (3 * n_tokens,)))
    start = time.perf_counter()
    result = engine.run(text, max_length=n_tokens, attention="full")
    full_s = time.perf_counter() - start
    start = time.perf_counter()
    html = cv_attention.attention_heads(attention=result.attention[0], tokens=list(result.labels)).local_src
    build_s = time.perf_counter() - start
    n_heads = result.n_heads
    del result
    with tempfile.TemporaryDirectory() as folder:
        page_path = Path(folder) / "circuitsvis.html"
        page_path.write_text(f"<!doctype html><html><body>{html}</body></html>", encoding="utf-8")
        html_bytes = page_path.stat().st_size
        del html
        paint_s, note = render_in_child(page_path, n_heads)
    return {
        "tool": f"circuitsvis {circuitsvis.__version__}", "tokens": n_tokens, "heads": n_heads,
        "full_attention_s": round(full_s, 2), "python_build_s": round(build_s, 2), "html_bytes": html_bytes,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "first_paint_s": None if paint_s is None else round(paint_s, 2), "note": note,
    }


def render_in_child(page_path: Path, n_heads: int) -> tuple[float | None, str]:
    """render() in a process group of its own, killed whole when it overruns: a renderer busy
    with a page this size does not close when asked."""
    child = subprocess.Popen([sys.executable, __file__, "--render", str(page_path), str(n_heads)], cwd=HERE,
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = child.communicate(timeout=RENDER_TIMEOUT_S + 30)
        seconds, note = json.loads(out.strip().splitlines()[-1])
        return seconds, note
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        return None, f"nothing drawn within {RENDER_TIMEOUT_S:.0f} s (the renderer was still busy and was killed)"


def render(page_path: Path, n_heads: int) -> tuple[float | None, str]:
    """Seconds from navigation until every head's canvas and the pattern's are in the page."""
    from chromium import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        refused = []
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                   else (refused.append(route.request.url), route.abort()))
        start = time.perf_counter()
        try:
            page.goto(page_path.as_uri(), timeout=RENDER_TIMEOUT_S * 1000, wait_until="commit")
            left = RENDER_TIMEOUT_S - (time.perf_counter() - start)
            page.wait_for_function(f"() => document.querySelectorAll('[id^=circuits-vis] canvas').length >= {n_heads + 1}",
                                   timeout=max(1, left) * 1000, polling=100)
            seconds, note = time.perf_counter() - start, "painted"
        except Exception as err:  # a timeout, or a renderer that gave up on the page
            seconds, note = None, f"nothing drawn within {RENDER_TIMEOUT_S:.0f} s ({type(err).__name__})"
        finally:
            browser.close()
    if refused:
        note += f"; refused {len(refused)} network requests"
    return seconds, note


def _size(n: float) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def table(rows: list[dict], bertviz_rows: list[dict], ours: dict) -> list[str]:
    """The long-input table beside attnscope's own 8,192-token row (long_bench's)."""
    done = [r for r in rows if "html_bytes" in r]
    lines = [
        "### Peers on the same long input (4-layer Qwen2 shape, random weights; benchmarks/circuitsvis_bench.py)",
        "",
        "| tool | tokens | page or data before the picture | built in Python | peak memory (Python) | first picture |",
        "|---|---|---|---|---|---|",
    ]
    for r in done:
        paint = f"{r['first_paint_s']} s" if r.get("first_paint_s") is not None else r.get("note", "none")
        lines.append(f"| {r['tool']}, attention_heads of one layer | {r['tokens']:,} | {_size(r['html_bytes'])} "
                     f"| {r['python_build_s']} s (+ {r['full_attention_s']} s full-attention run) "
                     f"| {_size(r['peak_rss_bytes'])} | {paint} |")
    for r in rows:
        if "error" in r:
            lines.append(f"| circuitsvis | {r['tokens']:,} | failed: {' '.join(r['error'])} | | | |")
    if done:
        last = done[-1]
        scale = (8192 / last["tokens"]) ** 2
        lines.append(f"| {last['tool']} | 8,192 | not attempted: ≈ {_size(last['html_bytes'] * scale)} by T² from "
                     f"{last['tokens']:,} tokens | | | |")
    bv = next((r for r in bertviz_rows if r.get("view") == "head" and r.get("tokens") == 512), None)
    if bv:
        paint = f"{bv['first_paint_s']} s" if bv.get("first_paint_s") is not None else "nothing drawn"
        lines.append(f"| BertViz 1.4.1 head view (bert-base shape; every layer) | 512 | {_size(bv['html_bytes'])} "
                     f"| {bv['python_build_s']} s | – | {paint} |")
        lines.append(f"| BertViz 1.4.1 | 8,192 | not attempted: ≈ {_size(bv['html_bytes'] * 256)} by T² from 512 tokens | | | |")
    if ours:
        lines.append(f"| attnscope, text view (every layer on request) | 8,192 | {_size(ours['views_bytes_before_paint'])} "
                     f"| {ours['views_widget_s']} s (the whole run) | – | {ours['first_paint_s']} s |")
    return lines


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--render":
        print(json.dumps(render(Path(sys.argv[2]), int(sys.argv[3]))), flush=True)
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(measure(int(sys.argv[2]))), flush=True)
        return
    rows = []
    for n_tokens in TOKEN_COUNTS:
        done = subprocess.run([sys.executable, __file__, "--child", str(n_tokens)], capture_output=True, text=True,
                              cwd=HERE, timeout=RENDER_TIMEOUT_S + 600)
        if done.returncode != 0:
            rows.append({"tokens": n_tokens, "error": done.stderr.strip().splitlines()[-1:]})
        else:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    RESULTS_PATH.write_text(json.dumps({"rows": rows, "cpus": os.cpu_count()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
