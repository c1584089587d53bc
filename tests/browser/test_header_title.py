"""The header's title (issue 45 item 1): squeezed only where the controls need its line's room. It
was cut beside a half-empty second line of controls, and by the gap an empty status still took.
Squeezed, it takes a second line before it is cut ("all-MiniLM-L6-v2 (em…" hid its end)."""

from __future__ import annotations

from pathlib import Path

import pytest

import attnscope
from attnscope.edges.bertviz_compat import result_from_attention

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")

TEXT = "The cat sat on the mat."
# JupyterLab's output at 1400×1000 is 948 px wide (964 with the page's margins); narrower with a
# wider side panel, wider without one.
WIDTHS = (640, 700, 760, 820, 880, 964, 1000, 1050, 1100, 1400)

# The title, and each control of the header that takes room (an idle one keeps its room: it is
# only hidden), as boxes; an empty status takes none.
HEADER = """() => {
  const header = document.querySelector('.attnscope-header');
  const box = (node) => { const b = node.getBoundingClientRect(); return {left: b.left, right: b.right, top: b.top, bottom: b.bottom}; };
  const title = header.querySelector('.attnscope-title');
  const controls = [...header.querySelectorAll('.attnscope-tabs, .attnscope-control, .attnscope-export, .attnscope-status')]
    .filter((node) => node.getBoundingClientRect().width > 0).map(box);
  const lines = Math.round(title.getBoundingClientRect().height / parseFloat(getComputedStyle(title).lineHeight));
  const cut = title.scrollWidth > title.clientWidth + 1 || title.scrollHeight > title.clientHeight + 1;
  return {header: box(header), title: box(title), text: title.textContent, cut, lines, controls};
}"""


def widgets(model):
    compared = attnscope.AttentionWidget(TEXT, model=model, compare=model)
    analysed = attnscope.AttentionWidget(TEXT, model=model)
    analysed.show_analysis(attnscope.head_stats(model, ["The cat sat.", "Dogs bark loudly."], progress=False))
    analysed.view = "analysis"
    inputs = model.tokenizer(TEXT, return_tensors="pt")
    attention = model.model(**inputs, output_attentions=True).attentions
    tokens = model.tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    precomputed = attnscope.AttentionWidget(result=result_from_attention(attention, tokens))
    return {"compare": compared, "analysis": analysed, "precomputed": precomputed}


def one_line(boxes) -> bool:
    return max(b["top"] for b in boxes) < min(b["bottom"] for b in boxes)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_title_is_cut_only_where_its_line_has_no_room_left(watched_page, tmp_path, default_model, theme):
    checked = {}
    for name, widget in widgets(default_model).items():
        widget.theme = theme
        path = widget.save_html(tmp_path / f"{name}.html")
        page = watched_page(viewport={"width": WIDTHS[0], "height": 1000})
        page.goto(path.as_uri())
        page.wait_for_selector(".attnscope-title")
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 1000})
            page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            m = page.evaluate(HEADER)
            where = (name, width, m)
            assert m["text"], where
            # Nothing runs past the header's right edge.
            assert all(c["right"] <= m["header"]["right"] + 1 for c in [m["title"], *m["controls"]]), where
            # A squeezed title takes a second line before it is cut, and never a third.
            assert m["lines"] <= 2 and (not m["cut"] or m["lines"] == 2), where
            squeezed = m["cut"] or m["lines"] > 1
            if squeezed:
                # Squeezed only to keep the controls on the title's line, and then with no room to spare.
                assert one_line([m["title"], *m["controls"]]), where
                assert m["header"]["right"] - max(c["right"] for c in m["controls"]) <= 1, where
            checked[(name, width)] = squeezed
        assert not page.problems, page.problems
    # Both cases were met: titles whole on one line, and titles squeezed where the line is full.
    assert any(checked.values()) and not all(checked.values()), checked
    assert not any(squeezed for (_, width), squeezed in checked.items() if width == 1400), checked
