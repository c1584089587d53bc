"""`make demo` serves copies of notebooks/ (issue 45 §12): running the demo's notebooks autosaved
outputs into tracked files, and the launcher's new notebooks landed among them. A copy is the
user's once made: never written over, and they are told when the project's file has changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "demo_notebooks.py"


def _run(source: Path, target: Path) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), str(source), str(target)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_copies_what_its_folder_lacks_and_never_writes_over_a_copy(tmp_path):
    source, target = tmp_path / "notebooks", tmp_path / "demo" / "notebooks"
    (source / "data").mkdir(parents=True)
    (source / "__marimo__" / "session").mkdir(parents=True)
    (source / ".ipynb_checkpoints").mkdir()
    (source / "quickstart.ipynb").write_text('{"cells": []}')
    (source / "data" / "sentences.txt").write_text("The cat sat.\n")
    (source / "__marimo__" / "session" / "x.json").write_text("{}")
    (source / ".ipynb_checkpoints" / "quickstart-checkpoint.ipynb").write_text("{}")

    said = _run(source, target)
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file() and p.name != ".copied.json") \
        == ["data/sentences.txt", "quickstart.ipynb"]
    assert "2 copied now" in said and f"{target.as_posix()}/" in said

    # The user runs the notebook (outputs autosaved into the copy) and adds one of their own.
    (target / "quickstart.ipynb").write_text('{"cells": [{"outputs": ["mine"]}]}')
    (target / "Untitled.ipynb").write_text("{}")
    said = _run(source, target)
    assert (target / "quickstart.ipynb").read_text() == '{"cells": [{"outputs": ["mine"]}]}'
    assert (target / "Untitled.ipynb").exists() and "copied now" not in said and "kept" not in said

    # The project's notebook changes, and a new one comes: the copy stays, and the user is told.
    (source / "quickstart.ipynb").write_text('{"cells": [{"source": "new"}]}')
    (source / "generation.ipynb").write_text("{}")
    said = _run(source, target)
    assert (target / "quickstart.ipynb").read_text() == '{"cells": [{"outputs": ["mine"]}]}'
    assert (target / "generation.ipynb").read_text() == "{}"
    assert f"{target.as_posix()}/quickstart.ipynb is kept as you left it" in said and "delete yours" in said

    # Deleted, it is copied anew, and the notice goes.
    (target / "quickstart.ipynb").unlink()
    said = _run(source, target)
    assert (target / "quickstart.ipynb").read_text() == '{"cells": [{"source": "new"}]}' and "kept" not in said
    assert source.joinpath("quickstart.ipynb").read_text() == '{"cells": [{"source": "new"}]}'  # the project's untouched
