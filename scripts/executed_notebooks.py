"""The shipped notebooks, executed, for the documentation site (issue 34: a reader of the docs sees
every result and picture without running anything).

A notebook is executed in a kernel (nbclient) in a scratch folder where it finds data/. Executed copies
are kept in build/executed_notebooks/, keyed by what their outputs depend on (the notebook, its data
and the package's code and bundle): the notebook tests store the copies they run, and the docs
build executes only what is missing or stale (with ATTNSCOPE_EXECUTE_NOTEBOOKS=1, as `make docs`
sets it). As a page, a notebook is nbconvert's basic HTML with its widget outputs left out: each is
followed by its picture (what a saved notebook shows), and the widget state would need a CDN.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CACHE = ROOT / "build" / "executed_notebooks"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
KEY = "attnscope_executed_from"
EXECUTE_ENV = "ATTNSCOPE_EXECUTE_NOTEBOOKS"


def source_key(name: str) -> str:
    """What the outputs of notebook `name` depend on: its text, and what every notebook shares."""
    return hashlib.sha256((NOTEBOOKS / name).read_bytes() + _shared_key().encode()).hexdigest()


@functools.cache
def _shared_key() -> str:
    """The notebooks' data, the package's code and its bundle: read once a process (a docs build
    keys eight notebooks)."""
    digest = hashlib.sha256()
    package = ROOT / "src" / "attnscope"
    for path in [*sorted((NOTEBOOKS / "data").glob("*")), *sorted(package.rglob("*.py")), *sorted((package / "static").glob("*.js"))]:
        if path.is_file():
            digest.update(path.relative_to(ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def store(name: str, notebook) -> None:
    """Keep an executed notebook (a test's run) for the docs build."""
    import nbformat

    kept = copy.deepcopy(notebook)
    kept.metadata[KEY] = source_key(name)
    CACHE.mkdir(parents=True, exist_ok=True)
    temp = CACHE / f".{name}.tmp"
    nbformat.write(kept, temp)
    os.replace(temp, CACHE / name)


def cached(name: str):
    """The executed copy of notebook `name` if it is current, else None."""
    import nbformat

    path = CACHE / name
    if not path.is_file():
        return None
    notebook = nbformat.read(path, as_version=4)
    return notebook if notebook.metadata.get(KEY) == source_key(name) else None


def execute(name: str, timeout: int = 600):
    """Run notebook `name` in a kernel and keep the executed copy. It runs in a scratch folder that
    sees notebooks/data/ as data/: what a notebook writes (bertviz_tutorial.ipynb saves a page) is
    not left in the tree."""
    import tempfile

    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    with tempfile.TemporaryDirectory(prefix="attnscope-docs-") as scratch:
        (Path(scratch) / "data").symlink_to(NOTEBOOKS / "data", target_is_directory=True)
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": scratch}}).execute()
    store(name, notebook)
    return notebook


def executed(name: str, run_missing: bool | None = None):
    """The executed notebook: the current cached copy, or (run_missing, default: the environment's
    ATTNSCOPE_EXECUTE_NOTEBOOKS=1) a fresh run; None when neither."""
    notebook = cached(name)
    if notebook is None and (os.environ.get(EXECUTE_ENV) == "1" if run_missing is None else run_missing):
        notebook = execute(name)
    return notebook


def as_html(notebook) -> str:
    """The notebook as nbconvert's basic HTML (no head, no scripts fetched from anywhere), widget
    outputs and widget state left out."""
    from nbconvert import HTMLExporter

    shown = copy.deepcopy(notebook)
    shown.metadata.pop("widgets", None)
    for cell in shown.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET_MIME not in o.get("data", {})]
    body, _ = HTMLExporter(template_name="basic", exclude_anchor_links=True).from_notebook_node(shown)
    return body
