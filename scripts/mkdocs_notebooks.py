"""mkdocs hook: the notebooks (and the data they read) go into the site as downloadable files,
under notebooks/, so docs/notebooks.md links them and the built site holds them offline."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
# What a reader downloads: the notebooks, the marimo one and the text they read (data/).
PATTERNS = ("*.ipynb", "*.py", "data/*")


def notebook_files() -> list[Path]:
    return sorted({path for pattern in PATTERNS for path in NOTEBOOKS.glob(pattern) if path.is_file()})


def on_files(files: Files, config) -> Files:
    for path in notebook_files():
        files.append(File.generated(config, f"notebooks/{path.relative_to(NOTEBOOKS).as_posix()}", abs_src_path=str(path)))
    return files
