"""mkdocs hook: the notebooks (and the data they read) go into the site as downloadable files,
under notebooks/, so docs/notebooks.md links them and the built site holds them offline; and each
notebook is a page of its own, executed, with its results and pictures (executed_notebooks.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from executed_notebooks import as_html, executed  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
LISTING = ROOT / "docs" / "notebooks.md"


def notebook_files(folder: Path = NOTEBOOKS, listing: Path = LISTING) -> list[Path]:
    """What a reader downloads and what the site executes: the notebooks (and the marimo one) that
    docs/notebooks.md links, and the text they read (data/). Not every notebook in the folder: the
    demo's launcher makes a user's own there, which the docs must neither run nor publish."""
    linked = set(re.findall(r"\(notebooks/([\w.-]+\.(?:ipynb|py))\)", listing.read_text(encoding="utf-8")))
    shipped = [folder / name for name in linked] + list(folder.glob("data/*"))
    return sorted(path for path in shipped if path.is_file())


def notebook_page(path: Path) -> str:
    """A notebook's page: executed when a current run exists (or may be made), else its cells alone."""
    notebook = executed(path.name)
    if notebook is None:
        import nbformat

        notebook = nbformat.read(path, as_version=4)
        note = ("!!! note\n    This build did not execute the notebook (`make docs` does): its cells are shown "
                "without outputs.\n\n")
    else:
        note = "*Executed when this site was built, offline; each widget is shown as its picture.*\n\n"
    return (f"# {path.stem}\n\n[Download {path.name}]({path.name}){{: download }}\n\n{note}"
            f'<div class="attnscope-notebook">\n{as_html(notebook)}\n</div>\n')


def on_files(files: Files, config) -> Files:
    for path in notebook_files():
        files.append(File.generated(config, f"notebooks/{path.relative_to(NOTEBOOKS).as_posix()}", abs_src_path=str(path)))
        if path.suffix == ".ipynb":
            files.append(File.generated(config, f"notebooks/{path.stem}.md", content=notebook_page(path)))
    return files
