"""The shipped notebooks run top to bottom in a real kernel and display the widget."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("name", ["quickstart.ipynb"])
def test_notebook_runs_and_displays_a_widget(name, tmp_path):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(WIDGET_MIME in o.get("data", {}) for o in outputs)
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "attention: (6, 12," in printed
