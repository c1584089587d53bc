"""The shipped notebooks run top to bottom in a real kernel and display the widget."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def run_notebook(name: str, tmp_path) -> list:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs


def test_slides_notebook_runs_and_shows_standalone_frames(tmp_path):
    outputs = run_notebook("slides.ipynb", tmp_path)
    frames = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(frames) == 2 and all('<iframe class="attnscope-slide" srcdoc="' in f for f in frames)
    assert not any(o.output_type == "stream" and o.name == "stderr" and "Warning" in o.text for o in outputs)


def test_quickstart_runs_and_displays_a_widget(tmp_path):
    outputs = run_notebook("quickstart.ipynb", tmp_path)
    assert any(WIDGET_MIME in o.get("data", {}) for o in outputs)
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "attention: (6, 12," in printed
