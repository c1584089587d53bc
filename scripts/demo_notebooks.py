"""`make demo`'s notebooks: the project's notebooks/ copied into a folder of the user's, which
JupyterLab serves, so that running them never changes the tracked files (JupyterLab autosaves
outputs into the notebook it runs, and a new notebook from its launcher lands beside them).

    python scripts/demo_notebooks.py SOURCE TARGET

Each file of SOURCE (hidden folders, __pycache__ and marimo's session cache left out) is copied to
TARGET/<its name> where no copy is there yet. A copy already there is the user's, and is never
written over. It says so when the project's file has changed since that copy was made (the file
names of the last copies are kept in TARGET/.copied.json, with their hashes): delete it to get the new one.
Standard library only: it runs before the demo's JupyterLab.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

RECORD = ".copied.json"
_SKIPPED = {"__pycache__", "__marimo__"}


def _files(source: Path) -> list[Path]:
    return sorted(path for path in source.rglob("*") if path.is_file()
                  and not any(part.startswith(".") or part in _SKIPPED for part in path.relative_to(source).parts))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def copy_notebooks(source: Path, target: Path) -> tuple[list[str], list[str]]:
    """Copy what TARGET lacks of SOURCE. Returns (copied, kept while the project's changed), as
    names relative to TARGET."""
    record_path = target / RECORD
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        record = record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        record = {}
    copied, stale = [], []
    for path in _files(source):
        name = path.relative_to(source).as_posix()
        copy, digest = target / name, _digest(path)
        if copy.exists():
            if name in record and record[name] != digest:
                stale.append(name)
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
        record[name] = digest
        copied.append(name)
    target.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return copied, stale


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    source, target = Path(argv[0]), Path(argv[1])
    if not source.is_dir():
        print(f"demo_notebooks: {source} is not a folder", file=sys.stderr)
        return 2
    copied, stale = copy_notebooks(source, target)
    where = target.as_posix()
    print(f"attnscope demo: the notebooks run from {where}/ (copies: {source.as_posix()}/ stays as it is)"
          + (f"; {len(copied)} copied now" if copied else ""))
    for name in stale:
        print(f"attnscope demo: {where}/{name} is kept as you left it, though {source.as_posix()}/{name} "
              "has changed since; delete yours to get the new one")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
