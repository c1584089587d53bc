"""RISE: notebooks/slides.ipynb as a jupyterlab-rise slideshow shows the views on their slides.

Widgets do not render inside jupyterlab-rise (anywidget#926), so the slides use
`widget.slide()`: the standalone page in an iframe. The notebook is executed by nbclient, signed
as trusted (as a notebook you ran yourself is), and opened at /rise/slides.ipynb.
"""

from pathlib import Path

import nbformat
import pytest
from grid_checks import COLUMN_LABELS, SLIDE_GRID, assert_legible
from nbformat.sign import NotebookNotary
from notebook_runs import execute
from test_jupyterlab import (
    BUNDLE,
    TILE_PIXELS,
    TOKEN,
    jupyter_server,
    line_count,
    page_errors,
    put_contents,
    require_installed,
    run_all_cells,
)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")


@pytest.fixture(scope="module")
def rise_server(tmp_path_factory):
    pytest.importorskip("jupyterlab_rise")
    root = tmp_path_factory.mktemp("rise")
    data_dir = root / ".jupyter-data"
    data_dir.mkdir()
    notebook = nbformat.read(ROOT / "notebooks" / "slides.ipynb", as_version=4)
    execute(notebook, root)
    NotebookNotary(data_dir=str(data_dir)).sign(notebook)
    nbformat.write(notebook, root / "slides.ipynb")
    with jupyter_server("lab", root, {"JUPYTER_DATA_DIR": str(data_dir)}) as base:
        yield base


def test_slides_show_the_views_fitting_the_slide(watched_page, rise_server):
    page = watched_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{rise_server}/rise/slides.ipynb?token={TOKEN}")
    page.locator("iframe.attnscope-slide").first.wait_for(state="attached", timeout=90_000)
    # reveal.js's own controls: title → "The head view" → its sub-slide with the view.
    for control in (".navigate-right.enabled", ".navigate-down.enabled"):
        page.locator(control).first.click(timeout=60_000)
        page.wait_for_timeout(1500)  # the slide transition
    frame = page.frame_locator("iframe.attnscope-slide").first
    canvas = frame.locator(".attnscope-lines")
    canvas.wait_for(timeout=60_000)
    assert int(canvas.get_attribute("data-line-count")) > 0
    iframe = page.locator("iframe.attnscope-slide").first
    box = iframe.bounding_box()
    assert iframe.is_visible()
    assert box is not None and box["width"] > 400 and box["x"] >= 0 and box["x"] + box["width"] <= 1280
    assert 0 <= box["y"] and box["y"] + box["height"] <= 800  # on the slide, not scrolled off it
    # The slide's views are live: the model view opens inside it.
    frame.locator("button.attnscope-tab[data-view='model']").click()
    frame.locator("canvas.attnscope-thumbnails[data-cells='72']").wait_for(timeout=30_000)
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "rise_slide.png"))


@pytest.mark.parametrize("width", [1280, 520])
def test_the_model_view_slide_shows_every_row_with_legible_labels_and_a_true_note(watched_page, rise_server, width):
    """Issue 30: the model-view slide at height=520 was cut mid-row (layers 4 and 5 not seen); in
    a narrow deck (jupyterlab-rise's preview pane beside the notebook is about 470 px) its column
    labels ran together ("Head 1Head 2Head 3..."); and it said editing "needs a running kernel"
    while the deck's own kernel ran. Now the whole grid shows, labelled legibly, and the slide
    says it is a saved copy."""
    page = watched_page(viewport={"width": width, "height": 800})
    page.goto(f"{rise_server}/rise/slides.ipynb?token={TOKEN}")
    page.locator("iframe.attnscope-slide").first.wait_for(state="attached", timeout=90_000)
    # title → "The head view" ↓ its slide → "The model view" ↓ its slide.
    for control in (".navigate-right.enabled", ".navigate-down.enabled", ".navigate-right.enabled", ".navigate-down.enabled"):
        page.locator(control).first.click(timeout=60_000)
        page.wait_for_timeout(1500)  # the slide transition
    root = page.frame_locator("section.present iframe.attnscope-slide").locator(".attnscope-root")
    root.locator("canvas.attnscope-thumbnails[data-cells='72']").wait_for(timeout=60_000)
    grid = root.evaluate(SLIDE_GRID)
    assert grid["bottom"] <= grid["innerHeight"] and grid["right"] <= grid["innerWidth"] and not grid["scrolls"], grid
    assert_legible(root.evaluate(COLUMN_LABELS))
    assert "saved copy" in grid["note"] and "live widget" in grid["note"], grid["note"]
    assert "kernel" not in grid["text"].lower()
    iframe = page.locator("section.present iframe.attnscope-slide").first.bounding_box()
    assert iframe is not None and iframe["y"] + iframe["height"] <= 800  # the slide's iframe is on the slide
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / f"rise_model_slide_{width}.png"))


def test_a_plain_widget_shows_its_picture_in_the_slideshow(watched_page, rise_server):
    """jupyterlab-rise starts no widget manager in its slideshow (jupyterlab-contrib/rise #119,
    #126): the last slide's plain widget shows the picture it left beside its output."""
    page = watched_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{rise_server}/rise/slides.ipynb?token={TOKEN}")
    page.locator("iframe.attnscope-slide").first.wait_for(state="attached", timeout=90_000)
    for control in (".navigate-right.enabled", ".navigate-right.enabled", ".navigate-right.enabled", ".navigate-down.enabled"):
        page.locator(control).first.click(timeout=60_000)
        page.wait_for_timeout(1500)  # the slide transition
    picture = page.locator("section.present .attnscope-picture img").first
    picture.wait_for(timeout=60_000)
    assert picture.evaluate("img => img.complete && img.naturalWidth > 100")
    box = picture.bounding_box()
    assert box is not None and box["height"] > 100 and 0 <= box["y"] < 800
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "rise_picture.png"))


# Classic RISE 5.x: an nbextension of the classic notebook page (nbclassic beside Notebook 7), which
# turns the page itself into reveal.js slides: the page's own widget manager keeps widgets live.
CLASSIC_DECK = [
    ("slide", "# What does BERT look at?"),
    ("skip", "import attnscope"),
    ("slide", "widget = attnscope.show('The cat sat on the mat because it was tired.')\nwidget"),
    ("slide", "long_view = attnscope.show('The keeper fed the lions before the storm.', attention='on_demand')\nlong_view"),
]


@pytest.fixture(scope="module")
def classic_rise_server(tmp_path_factory):
    require_installed("rise", "nbclassic")  # rise's own module needs pkg_resources: asked by metadata
    root = tmp_path_factory.mktemp("classic-rise")
    deck_notebook(root)
    with jupyter_server("nbclassic", root) as base:
        yield base


# The console errors classic RISE's page logs of its own, never attnscope's: any other fails the test.
CLASSIC_HOST_NOISE = (
    # RISE asks for a notebook's optional rise.css and deck.css; the server's 404 page is HTML.
    "rise.css' because its MIME type ('text/html')",
    "deck.css' because its MIME type ('text/html')",
    # reveal.js's theme imports Google Fonts, offline here.
    "net::ERR_NAME_NOT_RESOLVED (at https://fonts.googleapis.com/",
    # MathJax 2 falls back to its MathJax_Blank font, src url('about:blank'), when its web fonts are
    # slow to come (a loaded machine: a fresh clone's suite failed on it); chromium refuses that.
    "Access to font at 'about:blank'",
    "net::ERR_FAILED (at about:blank)",
)


# What shows once a view has its data from the kernel.
VIEW_DRAWN = {
    "head": ".attnscope-lines canvas",
    "model": "canvas.attnscope-thumbnails[data-cells]",
    "neuron": ".attnscope-neuron-table:not([hidden])",
    "rollout": "canvas.attnscope-matrix[data-n]",
    "text": ".attnscope-text-flow",
    "map": "canvas.attnscope-map",
    "analysis": ".attnscope-headmap-view canvas, .attnscope-headmap-view svg",
}


def kernel_says(page, code: str) -> str:
    """What `code` prints in the notebook's kernel, asked through the classic page's own kernel."""
    return page.evaluate(
        """code => new Promise((resolve) => {
            let out = "";
            Jupyter.notebook.kernel.execute(code, {
                iopub: { output: (msg) => { out += msg.content.text ?? ""; } },
                shell: { reply: () => setTimeout(() => resolve(out), 200) },
            });
        })""",
        code,
    )


def overflow_past(page, slide_selector: str):
    """(slide's right edge, right-most edge of anything inside the widget, widget's own overflow)."""
    return page.evaluate(
        """sel => {
            const slide = document.querySelector(sel);
            const root = slide.querySelector('.attnscope-root');
            let right = 0;
            for (const e of [root, ...root.querySelectorAll('*')]) {
                const box = e.getBoundingClientRect();
                if (box.width > 0 && box.height > 0 && getComputedStyle(e).visibility !== 'hidden') right = Math.max(right, box.right);
            }
            return [slide.getBoundingClientRect().right, right, root.scrollWidth - root.clientWidth];
        }""",
        slide_selector,
    )


def deck_notebook(root: Path) -> None:
    """The classic-RISE deck (also read by jupyterlab-slideshow: the same slide_type metadata)."""
    deck = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    for slide_type, source in CLASSIC_DECK:
        make = nbformat.v4.new_markdown_cell if source.startswith("#") else nbformat.v4.new_code_cell
        deck.cells.append(make(source, metadata={"slideshow": {"slide_type": slide_type}}))
    nbformat.write(deck, root / "deck.ipynb")


def test_classic_rise_keeps_the_widget_live_and_every_view_fits_the_slide(watched_page, classic_rise_server):
    page = watched_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{classic_rise_server}/nbclassic/notebooks/deck.ipynb?token={TOKEN}")
    page.wait_for_function("window.Jupyter?.notebook?.kernel?.is_connected?.()", timeout=90_000)
    # The page's widget manager asks the kernel for its widgets first; outputs that arrive while it
    # does are rendered twice, one of them into a detached node (a classic notebook race).
    page.wait_for_function("Jupyter.notebook.kernel.widget_manager !== undefined", timeout=30_000)
    page.wait_for_timeout(2000)
    page.evaluate("Jupyter.notebook.execute_all_cells()")
    page.locator(".attnscope-root .attnscope-lines").first.wait_for(timeout=180_000)
    page.locator(".attnscope-root").nth(1).locator(".attnscope-text-flow").wait_for(timeout=60_000)
    page.evaluate("Jupyter.notebook.select(0)")  # the slideshow starts at the selected cell's slide
    page.keyboard.press("Escape")
    page.keyboard.press("Alt+r")
    page.wait_for_selector("body.rise-enabled", timeout=30_000)
    # reveal.js takes keys once it is ready: a key pressed before is lost (a fresh clone's suite
    # once pressed it too early and stayed on the title).
    page.wait_for_function("window.Reveal?.isReady?.() === true", timeout=30_000)
    present = ".reveal .slides section.present"
    page.keyboard.press("ArrowRight")  # the title → the head view's slide
    page.wait_for_function("Reveal.getIndices().h + Reveal.getIndices().v > 0", timeout=30_000)
    lines = page.locator(f"{present} .attnscope-root .attnscope-lines")
    lines.wait_for(timeout=30_000)
    page.wait_for_timeout(1000)  # the slide transition
    assert line_count(lines) > 0
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "classic_rise_head.png"))

    # A layer change in the slide repaints the lines and reaches the kernel.

    before = lines.evaluate(TILE_PIXELS)
    page.locator(f"{present} select.attnscope-layer").select_option(index=3)
    page.wait_for_function(f"([box, before]) => ({TILE_PIXELS})(box) !== before", arg=[lines.element_handle(), before], timeout=30_000)
    assert kernel_says(page, "print(widget.layer)").strip() == "3"

    # Every view of both widgets fits the slide's width at 1280×900.
    for slide in range(2):
        tabs = page.locator(f"{present} button.attnscope-tab:visible")
        names = [tabs.nth(i).get_attribute("data-view") for i in range(tabs.count())]
        assert len(names) >= 3, names
        for name in names:
            page.locator(f"{present} button.attnscope-tab[data-view='{name}']").click()
            page.locator(f"{present} {VIEW_DRAWN.get(name, '.attnscope-root')}").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1000)  # the rest of the kernel's answers, then a frame
            slide_right, widget_right, overflow = overflow_past(page, present)
            assert widget_right <= slide_right + 0.5 and overflow <= 0, (slide, name, slide_right, widget_right, overflow)
            page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / f"classic_rise_{slide}_{name}.png"))
        if slide == 0:
            page.keyboard.press("ArrowRight")
            page.locator(f"{present} .attnscope-root .attnscope-text-flow").wait_for(timeout=30_000)
            page.wait_for_timeout(1000)
    assert [p for p in page.problems if not any(noise in p for noise in CLASSIC_HOST_NOISE)] == [], page.problems


def test_a_notebook_saved_in_the_classic_notebook_reopens_with_its_picture_and_no_widget_error(watched_page, classic_rise_server):
    """Classic RISE decks are saved in the classic notebook: reopened without their kernel, each
    widget output shows its picture, not "A Jupyter widget could not be displayed..."."""
    import json
    import time
    import urllib.request

    base = classic_rise_server
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    notebook.cells = [nbformat.v4.new_code_cell("import attnscope\nattnscope.show('The cat sat on the mat.', layer=1)")]
    put_contents(base, "classic_saved.ipynb", {"type": "notebook", "content": json.loads(nbformat.writes(notebook))})
    page = watched_page(viewport={"width": 1280, "height": 900})
    url = f"{base}/nbclassic/notebooks/classic_saved.ipynb?token={TOKEN}"
    page.goto(url)
    page.wait_for_function("window.Jupyter?.notebook?.kernel?.widget_manager !== undefined", timeout=90_000)
    page.wait_for_timeout(2000)  # the widget manager's own start (see the deck test above)
    page.evaluate("Jupyter.notebook.execute_all_cells()")
    page.locator(".attnscope-root .attnscope-lines").first.wait_for(timeout=180_000)
    page.wait_for_timeout(1000)  # the picture's output, after the widget's
    page.evaluate("Jupyter.notebook.save_notebook()")
    saved = lambda: json.load(urllib.request.urlopen(f"{base}/api/contents/classic_saved.ipynb?token={TOKEN}", timeout=10))["content"]
    deadline = time.time() + 30
    while len(saved()["cells"][0]["outputs"]) < 2 and time.time() < deadline:
        time.sleep(0.5)
    for kernel in json.load(urllib.request.urlopen(f"{base}/api/kernels?token={TOKEN}", timeout=10)):
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/kernels/{kernel['id']}?token={TOKEN}", method="DELETE"), timeout=30)
    page.goto("about:blank")
    page.goto(url)
    picture = page.locator(".attnscope-picture img").first
    picture.wait_for(timeout=90_000)
    page.wait_for_function("window.Jupyter?.notebook?.kernel?.widget_manager !== undefined", timeout=90_000)
    page.wait_for_timeout(4000)
    assert picture.evaluate("img => img.complete && img.naturalWidth > 100")
    seen = page.evaluate("""() => [...document.querySelectorAll('.output_subarea')]
        .filter((e) => e.textContent.includes('could not be displayed') && e.getBoundingClientRect().height > 0).length""")
    assert seen == 0, "a reopened output says the widget could not be displayed"
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "classic_saved_reopened.png"))


# jupyterlab-slideshow presents the notebook in place in JupyterLab (no iframe): the Lab widget
# manager draws the widgets, live. Driven through its commands (deck:start, deck:forward, ...).
@pytest.fixture(scope="module")
def slideshow_lab(tmp_path_factory):
    require_installed("jupyterlab-slideshow")
    root = tmp_path_factory.mktemp("slideshow")
    deck_notebook(root)
    with jupyter_server("lab", root, extra_args=("--LabApp.expose_app_in_browser=True",)) as base:
        yield base


def lab_kernel_says(page, code: str) -> str:
    """What `code` prints in the open notebook's kernel, asked through JupyterLab's own session."""
    return page.evaluate(
        """async (code) => {
            const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            let out = "";
            const future = kernel.requestExecute({ code });
            future.onIOPub = (msg) => { if (msg.header.msg_type === "stream") out += msg.content.text; };
            await future.done;
            return out;
        }""",
        code,
    )


def test_jupyterlab_slideshow_keeps_the_widget_live(watched_page, slideshow_lab):
    page = watched_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{slideshow_lab}/lab/tree/deck.ipynb?token={TOKEN}")
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
    run_all_cells(page)
    page.locator(".attnscope-root .attnscope-lines canvas").first.wait_for(timeout=180_000)
    command = "name => window.jupyterapp.commands.execute(name)"
    page.evaluate(command, "deck:start")
    onscreen = ".jp-deck-mod-onscreen"
    # The deck opens on the active cell's slide (the last, after Run All): back to the head view's.
    page.evaluate(command, "deck:back")
    widget = page.locator(f"{onscreen} .attnscope-root").first
    widget.wait_for(timeout=30_000)
    assert page.locator(f"{onscreen} .attnscope-root").count() == 1  # one slide at a time
    lines = widget.locator(".attnscope-lines")
    assert line_count(lines) > 0
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "slideshow_head.png"))

    # Moving away and back keeps it painted.
    page.evaluate(command, "deck:back")
    page.get_by_role("heading", name="What does BERT look at?").wait_for(timeout=30_000)
    page.evaluate(command, "deck:forward")
    widget.wait_for(timeout=30_000)
    assert line_count(lines) > 0

    # A layer change repaints and reaches the kernel; an edited sentence recomputes.

    before = lines.evaluate(TILE_PIXELS)
    widget.locator("select.attnscope-layer").select_option(index=3)
    page.wait_for_function(f"([box, before]) => ({TILE_PIXELS})(box) !== before", arg=[lines.element_handle(), before], timeout=30_000)
    assert lab_kernel_says(page, "print(widget.layer)").strip() == "3"
    editor = widget.locator("input.attnscope-text").first
    editor.fill("Penguins swim quickly.")
    editor.press("Enter")
    widget.get_by_text("Penguins", exact=True).first.wait_for(timeout=60_000)
    # The model view opens in the slide and fits it.
    widget.get_by_role("tab", name="Model").click()
    widget.locator("canvas.attnscope-thumbnails[data-cells='72']").wait_for(timeout=60_000)
    box = widget.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1400
    assert widget.evaluate("w => w.scrollWidth - w.clientWidth") <= 0
    page.screenshot(path=str(ROOT / "tests" / "browser" / "artifacts" / "slideshow_model.png"))
    page.evaluate(command, "deck:stop")
    assert page_errors(page) == []
