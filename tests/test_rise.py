"""RISE: notebooks/slides.ipynb as a jupyterlab-rise slideshow shows the views on their slides.

Widgets do not render inside jupyterlab-rise (anywidget#926), so the slides use
`widget.slide()`: the standalone page in an iframe. The notebook is executed by nbclient, signed
as trusted (as a notebook you ran yourself is), and opened at /rise/slides.ipynb.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.sign import NotebookNotary
from test_jupyterlab import BUNDLE, TOKEN, jupyter_server

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")


@pytest.fixture(scope="module")
def rise_server(tmp_path_factory):
    pytest.importorskip("jupyterlab_rise")
    root = tmp_path_factory.mktemp("rise")
    data_dir = root / ".jupyter-data"
    data_dir.mkdir()
    notebook = nbformat.read(ROOT / "notebooks" / "slides.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(root)}}).execute()
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
