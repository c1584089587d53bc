"""The shipped notebooks run top to bottom in a real kernel and display the widget."""

import re
import sys
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS.parent / "scripts"))

from executed_notebooks import store  # noqa: E402  (the docs build shows the runs kept here)
from notebook_runs import execute  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def run_notebook(name: str, cwd) -> list:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    execute(notebook, cwd)
    store(name, notebook)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # Saved and reopened without its kernel, a widget output reads "Error displaying widget": each
    # must be one of ours, with its picture right after it (progress bars end as text).
    for cell in notebook.cells:
        for i, output in enumerate(getattr(cell, "outputs", [])):
            if WIDGET_MIME in output.get("data", {}):
                after = cell.outputs[i + 1].get("data", {}).get("text/html", "") if i + 1 < len(cell.outputs) else ""
                assert 'class="attnscope-picture ' in after, f"a widget output without its picture in {name}: {cell.source[:80]!r}"
    # One widget, one cell: a widget shown again further down shows its last state in both cells
    # after Run All (voita.ipynb's role map read "Removed at step"), whatever the first cell's text says.
    cells_of: dict[str, set[int]] = {}
    for k, cell in enumerate(notebook.cells):
        for output in getattr(cell, "outputs", []):
            if WIDGET_MIME in output.get("data", {}):
                cells_of.setdefault(output["data"][WIDGET_MIME]["model_id"], set()).add(k)
    shared = {model: sorted(cells) for model, cells in cells_of.items() if len(cells) > 1}
    assert not shared, f"one widget shown in cells {list(shared.values())} of {name}: each cell should show its own"
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
    # Table 2 (§4.2): the baselines and the best head, on the shipped hand-annotated sample.
    table2 = dict(re.findall(r"^(Nearest mention|Head-word match|Best head \(\d-\d+\)): All ([\d.]+)", text, re.M))
    assert len(table2) == 3 and float(table2["Head-word match"]) > float(table2["Nearest mention"]), table2
    # Table 3 (§5): every probe, beside Clark's number; the trained attention carries the tree.
    uas = {name: float(value) for name, value in re.findall(r"^([a-z +-]+): UAS ([\d.]+) \(Clark", text, re.M)}
    assert list(uas) == ["right-branching", "distances + vectors", "random-init attn + vectors", "attn", "attn + vectors"]
    assert uas["attn + vectors"] > uas["attn"] > uas["right-branching"] and uas["attn"] > uas["random-init attn + vectors"]


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


def test_long_context_notebook_runs_offline_on_a_trained_decoder():
    """SmolLM2-135M-Instruct (the Makefile installs it): the first output is its own answer, not a
    warning; the prompt is built to fit, so nothing is cut; each long widget opens on its last
    token; the sinks and a retrieval head are real (random weights have neither)."""
    import re

    notebook = nbformat.read(NOTEBOOKS / "long_context.ipynb", as_version=4)
    execute(notebook, NOTEBOOKS)
    store("long_context.ipynb", notebook)  # the docs build showed it again after running it (37 s)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error" or o.get("name") == "stderr"], outputs
    # The load says what it loaded, then the first text is the model's own answer, not a warning.
    assert re.fullmatch(r"attnscope: loaded smollm2 in \d+\.\d s", outputs[0].data["text/plain"]), outputs[0]
    assert outputs[1].output_type == "stream" and outputs[1].text == "The capital of France is Paris.\n"
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) == 2
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    shown = re.search(r"([\d,]+) tokens, 30 layers × 9 heads \(3 key heads\)", text)
    n_tokens = int(shown.group(1).replace(",", ""))
    assert 1_900 < n_tokens <= 2_048  # whole sentences up to the notebook's 2,048
    assert f"a row: (1, {n_tokens}) sums to 1.0" in text
    assert float(re.search(r"sink rate: (\d+)% of heads", text).group(1)) > 30
    retrieval = notebook.cells[8].outputs[0]["data"]["text/plain"].splitlines()[1].split()
    assert float(retrieval[-1]) > 0.3  # the best retrieval head's mean attention on the earlier copy's next token
    states = [m["state"] for m in notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
              if "tokens" in m["state"]]
    assert sorted(len(s["tokens"]) for s in states)[-1] == n_tokens
    for state in states:
        assert "truncated" not in state["notice"] and state["focus_token"] == len(state["tokens"]) - 1


def test_voita_notebook_finds_roles_and_prunes_on_both_models():
    """Issue 34: Voita et al. 2019 offline, on the embedded encoder and the SmolLM2 decoder."""
    outputs = run_notebook("voita.ipynb", NOTEBOOKS)
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) >= 2
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "positional: layers [0] (0-2)" in text  # MiniLM's head 0-2 looks at the token before
    assert "rare words: layers [0]" in text
    assert "SmolLM2-135M-Instruct (30 layers × 9 heads)" in text
    assert "with all 72 heads the loss is" in text


def test_kovaleva_notebook_classes_patterns_and_disables_layers():
    """Issue 34: Kovaleva et al. 2019 offline, on the embedded encoder and the SmolLM2 decoder."""
    outputs = run_notebook("kovaleva.ipynb", NOTEBOOKS)
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) >= 2
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "over all layers: vertical " in text and "cls: largest in layer" in text
    assert "next-token loss with every head:" in text and "of 30 layers lower the loss" in text
    # Fine-tuning (§5): the copy learns the task, and as in the paper the first layer moves least.
    accuracy = re.search(r"held-out accuracy .*: before (\d+)%, after (\d+)%", text)
    assert accuracy and int(accuracy[2]) > int(accuracy[1]), text
    line = text.split("cosine per layer:")[1].splitlines()[0]
    cosines = [float(value) for _, value in re.findall(r"(\d): (\d\.\d+)", line)]
    assert len(cosines) == 6 and cosines[0] > 0.99 and min(cosines[4:]) < cosines[0] - 0.05, cosines


def test_head_finder_notebook_finds_heads_and_the_decoders_induction_heads():
    """Issue 35: the finder over a generated corpus on MiniLM, and SmolLM2's induction heads, whose
    top five the direct test (other random tokens) mostly finds too."""
    outputs = run_notebook("head_finder.ipynb", NOTEBOOKS)
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) >= 1
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "72 heads over 1000 documents" in text and "strongest previous-token head:" in text
    found = re.search(r"the finder's top 5 induction heads found by the direct test: (\d) of 5", text)
    assert found and int(found[1]) >= 3, text[-2000:]


def test_what_flows_reproduces_the_norm_comparison_a_knockout_and_contributions():
    """Issue 47 item 5: Kobayashi et al.'s comparison on MiniLM and SmolLM2, Geva et al.'s knockout
    sweep and ALTI beside rollout, offline; what the text says is what the run printed."""
    outputs = run_notebook("what_flows.ipynb", NOTEBOOKS)
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    # [CLS] takes much and passes little: weighed, it receives less than another token.
    weighed = float(re.search(r"\((\d+\.\d+)×\)\.", text).group(1))
    assert weighed < 1, text
    cls_alpha, cls_norm = (float(x) for x in re.search(r"\[CLS\] receives (\d+)× the attention .* vector (\d+)× smaller", text).groups())
    assert cls_alpha > 3 and cls_norm > 3, text
    # The sink of a trained decoder passes a smaller vector than the other tokens.
    assert float(re.search(r"passes a vector (\d+\.\d+)× smaller\.", text).group(1)) > 1, text
    # Knockout: the answer is Paris, and the largest drop is past the first layers (Geva et al.).
    assert "predicted: Paris" in text
    first, _last, drop = re.search(r"in layers (\d+)–(\d+) lowers log p\(Paris\) by (\d+\.\d+)", text).groups()
    assert int(first) >= 9 and float(drop) > 0.2, text
    # ALTI gives [CLS] far less of the last layer's outputs than rollout does.
    rollout_cls = float(re.search(r"rollout\s+\[CLS\] (\d\.\d+)", text).group(1))
    alti_cls = float(re.search(r"ALTI\s+\[CLS\] (\d\.\d+)", text).group(1))
    assert alti_cls < rollout_cls / 4, text
    norms_cls = float(re.search(r"norms\s+\[CLS\] (\d\.\d+)", text).group(1))
    assert alti_cls < norms_cls < rollout_cls / 2, text  # "the norms sit between"
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) == 2


def test_generation_notebook_writes_answers_copies_with_an_induction_head_and_reads_a_long_prompt():
    """Issue 48 item 7: SmolLM2 offline, a factual answer, a copy from the prompt where an induction
    head fires, a long prompt kept as queries and keys, and model.generate's own output."""
    outputs = run_notebook("generation.ipynb", NOTEBOOKS)
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "'The capital of France is Paris.'" in text
    copied, score = re.search(r"(\d+) copied tokens; the strongest induction head is \d+-\d+: (\d\.\d+)", text).groups()
    assert int(copied) >= 3 and float(score) > 0.5, text
    kept_mb, full_gb = (float(x) for x in re.search(r"kept ([\d.]+) MB .* would take ([\d.]+) GB", text).groups())
    assert kept_mb / 1000 < full_gb / 10, text
    assert sum(WIDGET_MIME in o.get("data", {}) for o in outputs) == 3
