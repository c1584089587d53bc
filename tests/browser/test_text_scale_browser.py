"""The long text view's colour scale in chromium (issue 45 item 4): on a decoder whose first token is
an attention sink, the text on screen was left white, the sink (or the selected token's weight on
itself) topping the scale. The scale is now the largest weight of the lines in view, the tokens set
aside and the selected token's own weight left out; it follows a scroll, and the bar says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import transformers
from test_head_view_browser import BUNDLE
from test_long_views_browser import answer_next, requests_sent

import attnscope
from attnscope.serialize import decode

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from small_models import TEXT  # noqa: E402
from test_token_labels import byte_level_bpe  # noqa: E402

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")


@pytest.fixture(scope="module")
def sink_engine():
    """A small GPT-2 whose first token takes about half of every row's attention: its position
    embedding large along u, and one key dimension of each head reading u against a query bias."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=320, n_embd=64, n_layer=2, n_head=4, n_positions=8192, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2Model(config).eval()
    with torch.no_grad():
        u = torch.randn(64)
        u = (u - u.mean()) / (u - u.mean()).norm()  # a direction layer norm keeps
        model.wpe.weight[0] = 50 * u
        for block in model.h:
            weight, bias = block.attn.c_attn.weight, block.attn.c_attn.bias  # x @ weight + bias: queries, keys, values
            for head in range(4):
                weight[:, 64 + 16 * head] = 3 * u
                bias[16 * head] = 1.0
    return attnscope.load(model, byte_level_bpe(), device="cpu")


# Each span in the flow's box: its index, its blue's opacity, whether it is wholly or partly in view.
IN_VIEW = """() => {
  const flow = document.querySelector('.attnscope-text-flow');
  const box = flow.getBoundingClientRect();
  const alpha = (c) => { const m = /rgba?\\(33,\\s*113,\\s*181(?:,\\s*([\\d.]+))?\\)/.exec(c); return m ? Number(m[1] ?? 1) : 0; };
  const out = [];
  for (const span of flow.querySelectorAll('.attnscope-text-token')) {
    if (!span.textContent) continue;
    const r = span.getBoundingClientRect();
    if (r.height === 0 || r.bottom <= box.top || r.top >= box.bottom) continue;
    out.push([Number(span.dataset.index), alpha(span.style.background), r.top >= box.top && r.bottom <= box.bottom]);
  }
  return out;
}"""


def row_of(widget, token: int) -> list[float]:
    """The row the view is shaded by, as the kernel answers it."""
    request = {"kind": "request", "type": "attention_rows", "id": 1, "result_id": widget.result_id, "layer": widget.layer,
               "head": widget.focus_head, "token": token, "direction": "from"}
    content, buffers = widget._channel._handlers["attention_rows"](request, [])
    return decode({"data": buffers[0], "dtype": content["dtype"], "shape": content["shape"]}).tolist()


def scale_of(page) -> float:
    note = page.text_content(".attnscope-text-scale")
    assert note.startswith("colour full at "), note
    return float(note.removeprefix("colour full at ").split(",")[0])


def check_in_view(page, values, selected: int, aside: int) -> float:
    """The blue's top is the largest weight of the text in view (the lines wholly in view at
    least, those partly in view at most), the selected token and those set aside left out, and
    the text in view reads: its largest at full colour, many more than white."""
    shown = [(i, a, whole) for i, a, whole in page.evaluate(IN_VIEW) if i >= aside and i != selected]
    assert len(shown) > 100, len(shown)
    alphas = sorted(a for _, a, _ in shown)
    assert alphas[-1] == 1, alphas[-10:]
    assert sum(a >= 0.2 for a in alphas) > len(alphas) / 10, alphas[len(alphas) // 2]
    top = scale_of(page)
    inside = max(values[i] for i, _, whole in shown if whole)
    touching = max(values[i] for i, _, _ in shown)
    assert inside * 0.95 <= top <= touching * 1.05, (inside, top, touching)  # written to two significant figures
    return top


def test_the_text_in_view_is_shaded_on_its_own_scale_and_rescaled_after_a_scroll(open_widget, sink_engine):
    text = TEXT * 60  # a text many times taller than its box
    widget = attnscope.AttentionWidget(text, model=sink_engine, attention="on_demand", view="text", layer=0)
    n = len(widget.tokens)
    assert n > 4000
    widget.focus_token = n - 40
    page = open_widget(widget, width=1100, height=900)
    answer_next(page, widget, 0)
    page.wait_for_function("document.querySelector('.attnscope-text-flow').dataset.shading !== undefined")
    # The user selects a token in view: its row, mostly on the sink far above.
    chosen = n - 200
    sent = requests_sent(page)
    page.click(f".attnscope-text-flow .attnscope-text-token[data-index='{chosen}']")
    answer_next(page, widget, sent)
    page.wait_for_function(f"document.querySelector('.attnscope-text-caption').textContent.includes('(token {chosen})')")
    values = row_of(widget, chosen)
    assert values[0] > 10 * max(values[1:chosen] + values[chosen + 1:])  # the sink this is about
    first = check_in_view(page, values, chosen, 0)
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "text_scale_selected.png"))
    note = page.text_content(".attnscope-text-scale")
    assert "largest anywhere" in note and note.endswith(", token 0)"), note

    def scroll_to(y: int) -> None:
        before = page.evaluate("document.querySelector('.attnscope-text-flow').dataset.scaledBy")
        page.evaluate(f"document.querySelector('.attnscope-text-flow').scrollTop = {y}")
        page.wait_for_function(f"document.querySelector('.attnscope-text-flow').dataset.scaledBy !== '{before}'")

    # Scrolled to the middle: rescaled to the text now in view.
    height = page.evaluate("document.querySelector('.attnscope-text-flow').scrollHeight")
    scroll_to(height // 3)
    check_in_view(page, values, chosen, 0)
    # To the top: the sink is in view and, not set aside, tops the scale; set aside, it does not.
    scroll_to(0)
    assert scale_of(page) == pytest.approx(values[0], rel=0.05) and values[0] > 5 * first
    page.select_option(".attnscope-sink-aside", "1")
    page.wait_for_function("document.querySelector('.attnscope-text-scale').textContent.includes('the set-aside first token left out')")
    check_in_view(page, values, chosen, 1)
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "text_scale_top_aside.png"))
    # A shorter window: fewer lines in view, scaled again as after a scroll.
    before = page.evaluate("document.querySelector('.attnscope-text-flow').dataset.scaledBy")
    page.set_viewport_size({"width": 1100, "height": 500})
    page.wait_for_function(f"document.querySelector('.attnscope-text-flow').dataset.scaledBy !== '{before}'")
    check_in_view(page, values, chosen, 1)
    assert not page.problems, page.problems
