"""The wheel carries the built front end, so `pip install .` gives a working widget."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not (ROOT / "src/attnscope/static/widget.js").is_file(), reason="JS bundle not built")
def test_wheel_ships_the_bundle_and_no_cdn(tmp_path):
    pytest.importorskip("hatch_jupyter_builder")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
    )
    (wheel,) = tmp_path.glob("attnscope-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert {"attnscope/static/widget.js", "attnscope/static/widget.css", "attnscope/widget.py"} <= names
        bundle = zf.read("attnscope/static/widget.js").decode()
    # d3 is bundled: no module is fetched at run time.
    for host in ("cdn.", "unpkg.com", "esm.sh", "cdnjs", "jsdelivr"):
        assert host not in bundle, host
