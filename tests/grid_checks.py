"""What the browser tests of the model view's grid and of slides measure (tests/browser/test_fit.py,
tests/product/test_rise.py): legible column labels, and a grid that a slide shows whole."""

# Each shown column label of the model view: its text's box (a Range: what is drawn, past any
# clipping), how many lines it takes, and its cell's box.
COLUMN_LABELS = """root => [...root.querySelectorAll('.attnscope-grid-heads span')].filter(s => s.textContent).map(s => {
  const range = document.createRange(); range.selectNodeContents(s);
  const text = range.getBoundingClientRect(), cell = s.getBoundingClientRect();
  return {text: s.textContent, lines: range.getClientRects().length, left: text.left, right: text.right,
          cellLeft: cell.left, cellRight: cell.right};
})"""


def assert_legible(labels):
    """One line each, inside its own cell, apart from the next: not "Head 1Head 2Head 3"."""
    assert labels, "no column labels"
    for label in labels:
        assert label["lines"] == 1, label  # "Head 10" was broken over two lines at 40 px
        assert label["cellLeft"] - 0.5 <= label["left"] and label["right"] <= label["cellRight"] + 0.5, label
    for before, after in zip(labels, labels[1:]):
        assert after["left"] - before["right"] >= 3, (before, after)


# In the slide's iframe: the model view's grid and its box, and whether the view scrolls.
SLIDE_GRID = """root => {
  const canvas = root.querySelector('canvas.attnscope-thumbnails'), body = canvas.closest('.attnscope-body');
  const grid = canvas.getBoundingClientRect();
  return {cells: canvas.dataset.cells, cell: Number(canvas.dataset.cell), bottom: grid.bottom, right: grid.right,
          innerWidth, innerHeight, scrolls: body.scrollHeight > body.clientHeight + 1 || body.scrollWidth > body.clientWidth + 1,
          note: root.querySelector('.attnscope-page-note')?.textContent ?? '', text: root.innerText};
}"""
