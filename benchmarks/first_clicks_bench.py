"""The first clicks, as a user makes them: real JupyterLab 4 at 1400 × 1000, through the kernel.

jupyterlab_bench.py waits for an idle kernel before each interaction and reports medians: a user
does not wait. Here a notebook as users write it (outputs above: a table and printed lines; then
30 sentences of the shipped data, about 500 tokens, in a widget on the embedded MiniLM) is run
with Run All, and each kind of interaction is first made right after the widget's lines are
painted (a user's reaction time, REACTION_MS), then again at a user's pace, never waiting for the
kernel. Each kind's first time is reported beside its median (issue 45 item 7: a median once hid
a first click of 0.8 s).

Run alone: `python benchmarks/first_clicks_bench.py` prints the rows; `make bench` adds them to
results.json and benchmarks/README.md.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "product"))  # test_jupyterlab

from chromium import CHROMIUM_ARGS  # noqa: E402
from jupyterlab_bench import (  # noqa: E402
    KERNEL_STAMPS,
    TIMING_HELPERS,
    kernel_value,
    open_notebook,
    put_notebook,
    timed,
)
from test_jupyterlab import jupyter_server  # noqa: E402

REPEATS = 6
REACTION_MS = 300  # from seeing the widget (or the last answer) to the next action
SENTENCES = 30
TARGET_MS = 100

USER_NOTEBOOK = [
    # What sits above a widget in a user's notebook: a table and some printed output.
    "import time, attnscope\nimport pandas as pd\n"
    "_cell_ends = []  # when each cell's code ended, on this machine's clock (ms)\n"
    "get_ipython().events.register('post_run_cell', lambda result: _cell_ends.append(time.time() * 1000))\n"
    f"sentences = open({str(ROOT / 'notebooks' / 'data' / 'sentences.txt')!r}, encoding='utf-8').read().splitlines()\n"
    "print(len(sentences), 'sentences')\n"
    "pd.DataFrame({'sentence': sentences, 'words': [len(s.split()) for s in sentences]}).head(12)",
    f"text = ' '.join(sentences[:{SENTENCES}])\n"
    "widget = attnscope.AttentionWidget(text)\n"
    "widget",
    KERNEL_STAMPS,
]


def user_pace(page) -> None:
    page.wait_for_timeout(REACTION_MS)


def first_and_median(rows: list[float]) -> dict:
    return {"first_ms": round(rows[0], 1), "median_ms": round(statistics.median(rows), 1),
            "each_ms": [round(r, 1) for r in rows]}


def bench_first_clicks(browser, base: str, repeats: int = REPEATS) -> dict:
    name = "first_clicks.ipynb"
    put_notebook(base, name, USER_NOTEBOOK)
    page = open_notebook(browser, base, name)
    widget = page.locator(".jp-OutputArea-output .attnscope-root").first
    widget.wait_for(timeout=180_000)
    lines = widget.locator(".attnscope-lines").first
    page.wait_for_function("c => Number(c.dataset.lineCount) > 0", arg=lines.element_handle(), timeout=180_000)
    painted = time.time() * 1000
    page.evaluate(TIMING_HELPERS)
    rows: dict[str, list[float]] = {}

    def act(kind: str, arg) -> None:
        user_pace(page)
        result = timed(page, widget, kind, arg)
        if result["ms"] is None:
            raise TimeoutError(f"{kind} ({arg}): nothing changed on screen within 60 s")
        rows.setdefault(kind, []).append(result["ms"])

    # The first click right after the paint: the cell may still be running.
    n_layers = 6
    for i in range(repeats):
        act("layer switch", 1 + (2 * i + 1) % (n_layers - 1))
    for i in range(repeats):
        act("head toggle", 1 + i % 6)
    for i in range(repeats):
        token = 5 + 11 * i
        page.evaluate("b => b.scrollIntoView()", widget.locator(f".attnscope-left .attnscope-token[data-index='{token}']").element_handle())
        act("hover on a token", token)
        page.evaluate("([b, t]) => b.querySelector(`.attnscope-left .attnscope-token[data-index='${t}']`)"
                      ".dispatchEvent(new MouseEvent('mouseleave'))", [widget.element_handle(), token])
    page.evaluate("b => b.scrollIntoView()", widget.locator(".attnscope-tabs").element_handle())
    for i in range(repeats):  # α → ‖αf‖ and back, at a reader's pace: comparing the two
        act("weigh by switch", "value_norm" if i % 2 == 0 else "attention")
    user_pace(page)
    page.evaluate("b => b.querySelector(\".attnscope-tab[data-view='neuron']\").click()", widget.element_handle())
    page.wait_for_function("b => b.querySelector('.attnscope-neuron-view')?.dataset.query !== undefined",
                           arg=widget.element_handle(), timeout=60_000)
    for i in range(repeats):
        act("neuron view, another token", 7 + 13 * i)
    n_tokens = kernel_value(page, "len(widget.tokens)")
    widget_cell_done = kernel_value(page, "_cell_ends")[1]
    page.close()
    return {"n_tokens": n_tokens, "widget_cell_done_after_paint_ms": round(widget_cell_done - painted, 1),
            "interactions": {k: first_and_median(v) for k, v in rows.items()}}


def table(results: dict) -> list[str]:
    inter = results.get("interactions") or {}
    lines = [
        f"### The first clicks in real JupyterLab 4 (issue 45 item 7): a user's notebook, {results.get('n_tokens')} tokens",
        "",
        f"Run All on a notebook with a table and printed output above the widget, then {SENTENCES} sentences of the "
        f"shipped data in the embedded MiniLM's widget; each interaction {REACTION_MS} ms after the last answer (the first "
        "right after the lines are painted, the cell possibly still running), never waiting for the kernel "
        "(`benchmarks/first_clicks_bench.py`).",
        "",
        "| interaction | target | first | median | met (both) | each |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in inter.items():
        met = "✅" if row["first_ms"] <= TARGET_MS and row["median_ms"] <= TARGET_MS else "❌"
        each = ", ".join(f"{v:.0f}" for v in row["each_ms"])
        lines.append(f"| {name} | ≤ {TARGET_MS} ms | {row['first_ms']:.0f} ms | {row['median_ms']:.0f} ms | {met} | {each} |")
    return lines


def run(repeats: int = REPEATS) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, jupyter_server("lab", Path(tmp), extra_env={"OMP_NUM_THREADS": "2"},
                                                              extra_args=("--LabApp.expose_app_in_browser=True",)) as base:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=CHROMIUM_ARGS)
            try:
                return bench_first_clicks(browser, base, repeats)
            finally:
                browser.close()


if __name__ == "__main__":
    started = time.perf_counter()
    result = run()
    print(json.dumps(result, indent=1))
    print("\n".join(table(result)))
    print(f"({time.perf_counter() - started:.0f} s)")
