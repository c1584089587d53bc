"""The shipped notebooks run top to bottom in a real kernel and display the widget."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def run_notebook(name: str, cwd) -> list:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # Saved and reopened without its kernel, a widget output reads "Error displaying widget": each
    # must be one of ours, with its picture right after it (progress bars end as text).
    for cell in notebook.cells:
        for i, output in enumerate(getattr(cell, "outputs", [])):
            if WIDGET_MIME in output.get("data", {}):
                after = cell.outputs[i + 1].get("data", {}).get("text/html", "") if i + 1 < len(cell.outputs) else ""
                assert 'class="attnscope-picture ' in after, f"a widget output without its picture in {name}: {cell.source[:80]!r}"
    return outputs


def test_slides_notebook_runs_and_shows_standalone_frames(tmp_path):
    outputs = run_notebook("slides.ipynb", tmp_path)
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    frames = [h for h in html if '<iframe class="attnscope-slide" srcdoc="' in h]
    pictures = [h for h in html if 'class="attnscope-picture ' in h]
    assert len(frames) == 2 and len(pictures) == 1 and len(html) == 3  # the plain widget's picture beside it
    assert not any(o.output_type == "stream" and o.name == "stderr" and "Warning" in o.text for o in outputs)


def test_quickstart_runs_and_displays_a_widget(tmp_path):
    outputs = run_notebook("quickstart.ipynb", tmp_path)
    assert any(WIDGET_MIME in o.get("data", {}) for o in outputs)
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "attention: (6, 12," in printed


def test_what_does_bert_look_at_reproduces_each_analysis():
    # Run where Jupyter runs it (the notebook's folder), so it finds data/sentences.txt.
    outputs = run_notebook("what_does_bert_look_at.ipynb", NOTEBOOKS)
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) >= 6
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "machine parses by spaCy" in text  # the syntax table says what its parses are
    assert "Masked " in text and "attention changes from layer" in text
    assert "torch.Size([6, 10, 10])" in text  # rollout: layers × tokens × tokens


def test_bertviz_tutorial_runs_with_only_the_import_changed(tmp_path):
    notebook = nbformat.read(NOTEBOOKS / "bertviz_tutorial.ipynb", as_version=4)
    imports = [line for cell in notebook.cells if cell.cell_type == "code" for line in cell.source.splitlines()
               if "attnscope" in line and not line.lstrip().startswith("#")]
    # The BertViz part imports from attnscope in exactly two lines; only the last cell (beyond BertViz) uses more.
    assert imports[:2] == ["from attnscope import head_view, model_view", "from attnscope.neuron_view import show"]
    outputs = run_notebook("bertviz_tutorial.ipynb", tmp_path)
    widgets = [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    assert len(widgets) >= 8  # 3 BERT + 3 GPT-2 + 2 BART views + the cross-attention neuron view
    assert (tmp_path / "head_view_gpt2.html").is_file()


def test_long_context_notebook_runs_offline_on_8k_tokens():
    outputs = run_notebook("long_context.ipynb", NOTEBOOKS)
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) == 2
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "8,192 tokens, 4 layers × 8 heads (2 key heads)" in text
    assert "a row: (1, 8192) sums to 1.0" in text
    assert "sink rate:" in text and "alpha_first" in text and "retrieval" in text
