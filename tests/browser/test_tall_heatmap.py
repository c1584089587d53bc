"""A tall layer × head heatmap on screen (the newcomer's walk of kovaleva.ipynb): a 30-layer decoder's
"Loss change when disabled" map ran 984 px in a view of 808, its last layers and its colour key out
of sight below; and its key ran 0.00–0.75, the layers that lower the loss drawn as those that raise
it a little. Now the cells shrink until the map and its key fit the widget's screen, and a signed
measure is drawn about 0 (blue below, orange above), its key from −max to max."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

import attnscope

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")

MAP = """() => {
  const canvas = document.querySelector('canvas.attnscope-headmap');
  const body = canvas.closest('.attnscope-body');
  const legend = document.querySelector('.attnscope-headmap-view .attnscope-legend');
  const box = (node) => { const b = node.getBoundingClientRect(); return {top: b.top, bottom: b.bottom, height: b.height}; };
  return {body: box(body), canvas: box(canvas), legend: box(legend), scrolls: body.scrollHeight > body.clientHeight + 1,
          ticks: [...legend.querySelectorAll('.attnscope-colorbar-tick')].map((t) => t.textContent)};
}"""


def _decoder(tokenizer, layers):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=37, max_position_embeddings=64)
    return attnscope.load(transformers.LlamaForCausalLM(config).eval(), tokenizer, device="cpu")


@pytest.mark.parametrize("layers", [30, 6])
def test_a_tall_maps_rows_and_key_fit_the_screen_and_a_signed_measure_is_drawn_about_zero(watched_page, tmp_path, bert_tokenizer, layers):
    engine = _decoder(bert_tokenizer, layers)
    deltas = attnscope.knockout_heads(engine, "The cat sat on the mat because", progress=False)
    values = deltas[deltas.measure == "delta"].value
    assert (values < 0).any() and (values > 0).any()  # a signed measure: some heads lower log p, some raise it
    widget = attnscope.AttentionWidget("The cat sat on the mat because", model=engine)
    widget.show_analysis(deltas)
    widget.view = "analysis"
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(widget.save_html(tmp_path / "map.html").as_uri())
    page.wait_for_selector("canvas.attnscope-headmap")
    page.wait_for_timeout(300)  # the refit after the first layout
    m = page.evaluate(MAP)
    # The whole map and its key within the view: nothing to scroll to.
    assert not m["scrolls"] and m["legend"]["bottom"] <= m["body"]["bottom"] + 1, m
    cell = m["canvas"]["height"] / layers
    assert (14 <= cell < 28) if layers == 30 else cell == 28, m
    # About 0: the key runs from −max to max through 0.
    top = max(abs(values))
    assert m["ticks"][1] == "0" and float(m["ticks"][0]) == pytest.approx(-top, abs=0.01), m
    assert float(m["ticks"][2]) == pytest.approx(top, abs=0.01), m
    # A head is still found under the pointer at the smaller pitch: the last layer's first head.
    box = page.eval_on_selector("canvas.attnscope-headmap", "c => { const b = c.getBoundingClientRect(); return [b.left, b.top]; }")
    page.mouse.move(box[0] + cell / 2, box[1] + (layers - 0.5) * cell)
    card = page.text_content(".attnscope-headmap-view .attnscope-tooltip")
    assert card.startswith(f"{layers - 1}-0 · "), card
    assert not page.problems, page.problems
