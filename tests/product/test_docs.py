"""The documentation site as a reader sees it (issue 30 item 9), built as `make docs` builds it
(strictly): lists render as lists, every character of a code block is in view and clear of the
copy button, and every notebook is on the site as a download."""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def pages(site: Path) -> list[Path]:
    return sorted(site.rglob("index.html"))


def test_markdown_lists_render_as_lists_not_as_a_paragraph_with_dashes(site):
    # Python-Markdown needs a blank line before a list, and 4 spaces to keep a block in a list item.
    for page in pages(site):
        for tag, body in re.findall(r"<(p|li|td)>(.*?)</\1>", page.read_text(encoding="utf-8"), re.S):
            assert not re.search(r"\n\s*(?:[-*+]|\d+\.) ", body), f"{page.relative_to(site)}: a list inside <{tag}>: {body[:160]!r}"


def notebook_files() -> list[Path]:
    """The notebooks and data the project ships (tracked): a user's own beside them are not the site's."""
    tracked = subprocess.run(["git", "ls-files", "notebooks/*.ipynb", "notebooks/*.py", "notebooks/data/*"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    return sorted(ROOT / name for name in tracked)


def test_every_notebook_is_linked_from_the_site_and_downloadable_offline(site):
    listing = (site / "notebooks" / "index.html").read_text(encoding="utf-8")
    assert len(notebook_files()) >= 7
    for path in notebook_files():
        name = path.relative_to(NOTEBOOKS).as_posix()
        assert (site / "notebooks" / name).read_bytes() == path.read_bytes(), name  # in the site, not a link out
        assert f'<a download href="{name}">' in listing, name
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="notebooks/"' in home  # in the navigation


def test_the_docs_publish_and_run_the_listed_notebooks_not_a_users_own(tmp_path):
    """Issue 45 §12: the demo's launcher makes a user's notebooks in notebooks/; make docs neither
    executes nor publishes them (one had failed the build after 727 s)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import mkdocs_notebooks

    folder = tmp_path / "notebooks"
    (folder / "data").mkdir(parents=True)
    for name in ("quickstart.ipynb", "Untitled.ipynb", "mine.py", "data/sentences.txt"):
        (folder / name).write_text("{}", encoding="utf-8")
    listing = tmp_path / "notebooks.md"
    listing.write_text("- [Quickstart](notebooks/quickstart.ipynb) ([download](notebooks/quickstart.ipynb))\n", encoding="utf-8")
    shipped = mkdocs_notebooks.notebook_files(folder, listing)
    assert [p.relative_to(folder).as_posix() for p in shipped] == ["data/sentences.txt", "quickstart.ipynb"]
    # The real listing ships every tracked notebook.
    assert mkdocs_notebooks.notebook_files() == notebook_files()


def test_every_notebook_is_a_page_of_its_own(site):
    """Issue 34: each notebook reads on the site; executed when a current run was kept (make test's
    notebook tests keep theirs, make docs runs the rest), else its cells with a note saying so."""
    for path in (p for p in notebook_files() if p.suffix == ".ipynb"):
        page = (site / "notebooks" / path.stem / "index.html").read_text(encoding="utf-8")
        assert f'href="../{path.name}"' in page and "attnscope-notebook" in page, path.name
        assert ("Executed when this site was built" in page) != ("did not execute the notebook" in page), path.name


def test_an_executed_notebook_shows_its_results_and_pictures_and_fetches_nothing(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    import executed_notebooks as executed

    monkeypatch.setattr(executed, "CACHE", tmp_path)
    assert executed.executed("quickstart.ipynb", run_missing=False) is None  # nothing kept, nothing run
    notebook = executed.execute("quickstart.ipynb")
    assert executed.cached("quickstart.ipynb") is not None  # kept, keyed by what made it
    monkeypatch.setattr(executed, "source_key", lambda name: "another version of the code")
    assert executed.cached("quickstart.ipynb") is None  # stale once the code or the notebook changes
    html = executed.as_html(notebook)
    assert 'class="attnscope-picture ' in html and "attention: (6, 12, 20, 20)" in html
    assert executed.WIDGET_MIME not in html and "widget-state" not in html
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=\"https?:", html)  # nothing fetched from anywhere


def test_executing_a_notebook_for_the_docs_leaves_the_tree_as_it_was(tmp_path, monkeypatch):
    """Issue 45 §12: `make docs` ran the notebooks in notebooks/, and bertviz_tutorial.ipynb's saved
    page was left there untracked. A notebook runs in a scratch folder that still finds data/."""
    import nbformat

    sys.path.insert(0, str(ROOT / "scripts"))
    import executed_notebooks as executed

    folder = tmp_path / "notebooks"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "words.txt").write_text("read from data/", encoding="utf-8")
    source = "open('written.html', 'w').write('a page'); print(open('data/words.txt').read())"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), folder / "writes.ipynb")
    monkeypatch.setattr(executed, "NOTEBOOKS", folder)
    monkeypatch.setattr(executed, "CACHE", tmp_path / "kept")
    monkeypatch.setattr(executed, "source_key", lambda name: "this version")
    notebook = executed.execute("writes.ipynb")
    assert notebook.cells[0].outputs[0]["text"] == "read from data/\n"
    assert sorted(p.name for p in folder.iterdir()) == ["data", "writes.ipynb"]
    assert executed.cached("writes.ipynb") is not None


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def served_site(site):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


# A code block (the i-th): whether its text is scrolled out of view, and its visible characters
# (not the spaces a wrapped line leaves hanging) under its copy button.
HIDDEN_CODE = """(i) => {
  const code = document.querySelectorAll("pre > code")[i];
  const box = code.parentElement.querySelector(".md-code__nav")?.getBoundingClientRect();
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  const under = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let k = 0; k < node.length; k++) {
      if (/\\s/.test(node.data[k])) continue;
      range.setStart(node, k);
      range.setEnd(node, k + 1);
      const r = range.getBoundingClientRect();
      if (r.right > box.left && r.left < box.right && r.bottom > box.top && r.top < box.bottom) under.push(node.data[k]);
    }
  }
  return { text: code.textContent.slice(0, 60), scrolled: code.scrollWidth > code.clientWidth + 1, under: under.join(""),
    shown: box.width > 0 };
}"""


def test_code_blocks_show_every_character_clear_of_the_copy_button(served_site, site, watched_page):
    page = watched_page(viewport={"width": 1400, "height": 1000})
    checked = 0
    for path in pages(site):
        url = f"{served_site}/{path.parent.relative_to(site).as_posix()}/".replace("/./", "/")
        page.goto(url)
        codes = page.query_selector_all("pre > code")
        if codes:
            page.wait_for_selector("pre .md-code__nav", state="attached")
        for i, code in enumerate(codes):
            code.hover()  # the button shows on hover
            block = page.evaluate(HIDDEN_CODE, i)
            assert block["shown"] and not block["scrolled"] and block["under"] == "", (url, block)
            checked += 1
    assert checked > 10
