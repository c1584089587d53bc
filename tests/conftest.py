import os
from pathlib import Path

import pytest

# No test may download weights: make any hub access fail fast and locally.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Several heavy libraries import torch; keep the 2-core machine responsive. Under pytest-xdist
# (`make test` runs two workers) each worker, and what it starts (notebook kernels, Ray actors, the
# command line), gets one thread, whatever the controller set: an OpenMP region of two threads whose
# second core is busy with the other worker waits at every barrier (a notebook took 5 times as long).
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
else:
    os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(scope="session")
def default_model():
    import attnscope

    return attnscope.load(device="cpu")


@pytest.fixture(scope="session")
def bert_tokenizer(default_model):
    """The embedded model's WordPiece tokenizer, reused for small random models of every family."""
    return default_model.tokenizer


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium_browser():
    """Debian's headless chromium through playwright (which never downloads a browser here)."""
    import shutil

    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian chromium is not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # Lets fixtures see whether the test failed (browser tests save a screenshot then).
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


ARTIFACTS = Path(__file__).resolve().parent / "browser" / "artifacts"


def console_problem(msg) -> str:
    """A console error as a problem, with where it came from: "Failed to load resource" names no
    resource in its text, only in its location."""
    where = (msg.location or {}).get("url") or ""
    return f"console: {msg.text}" + (f" (at {where})" if where else "")


@pytest.fixture
def watched_page(chromium_browser, request):
    """make(**context_options) → a fresh page whose `problems` lists page errors and console errors.

    Every page made is screenshotted into tests/browser/artifacts/ when the test fails.
    """
    made = []

    def make(**context_options):
        context = chromium_browser.new_context(**context_options)
        page = context.new_page()
        page.problems = []
        page.on("pageerror", lambda exc: page.problems.append(f"pageerror: {exc} {exc.stack}"))
        page.on("console", lambda msg: page.problems.append(console_problem(msg)) if msg.type == "error" else None)
        made.append((context, page))
        return page

    yield make
    report = getattr(request.node, "rep_call", None)
    for i, (context, page) in enumerate(made):
        if report is not None and report.failed:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{i}.png"), full_page=True)
        context.close()


# The tiers: `make test-fast` runs what is left after "-m 'not slow'" (unit tests, in about a
# minute); `make test` runs everything. Slow: a browser, a Jupyter server, an executed notebook, a
# built wheel, or a CLI in a fresh interpreter (each pays the import of torch and transformers).
# test_corpus_ray.py starts a Ray cluster (worker processes, seconds a test); test_demo_url.py runs
# `make demo`'s recipe against fake servers (1.5 s a test).
SLOW_FILES = {"test_jupyterlab.py", "test_rise.py", "test_marimo.py", "test_notebooks.py", "test_packaging.py", "test_docs.py",
              "test_corpus_ray.py", "test_demo_url.py"}


# The longest files (a Ray cluster's pipelines, the executed notebooks, the Jupyter servers: 2 to 6
# minutes each), started first: `make test`'s two pytest-xdist workers take whole files in
# collection order (--dist loadfile --no-loadscope-reorder), and a long file taken last ends alone.
LONGEST_FIRST = ("test_corpus_ray.py", "test_notebooks.py", "test_jupyterlab.py", "test_rise.py", "test_packaging.py")


def pytest_ignore_collect(collection_path, config):
    """Under "-m 'not slow'" (`make test-fast`) a slow file is not even imported: every one of its
    tests would be deselected, and its imports cost each worker seconds (nbformat's schema checks
    build a grammar at import, 4.4 s; playwright)."""
    if config.option.markexpr.replace(" ", "") != "notslow":
        return None
    if collection_path.name in SLOW_FILES or collection_path.name == "browser":
        return True
    return None


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))  # stable: each file's order kept
    for item in items:
        path = Path(str(item.fspath))
        fixtures = getattr(item, "fixturenames", ())
        # A fresh interpreter (the command line) or a notebook run by nbclient (the `executed` fixture).
        in_subprocess = ("run_cli" in fixtures or "executed" in fixtures or item.name.startswith("test_cli_")
                         or "command_line" in item.name)
        if "browser" in path.parts or path.name in SLOW_FILES or in_subprocess:
            item.add_marker(pytest.mark.slow)
