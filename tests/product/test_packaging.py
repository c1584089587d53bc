"""The release artifacts, as a packager and a user get them.

- The sdist rebuilds the wheel: offline, without Node.js, file for file the wheel built from the
  repository (the built bundle travels in the sdist with a digest of its sources).
- A bundle older than its sources fails the build, saying why, where npm cannot rebuild it.
- The licences of everything shipped are in the artifacts (PEP 639 metadata, the bundle's npm
  packages' texts) and in every saved page.
- One version: pyproject.toml's, read by `attnscope.__version__`; package.json agrees.
- The wheel in a venv of its own (no development tools) renders a page that paints offline.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "src" / "attnscope" / "static" / "widget.js"
DEV_TOOLS = ("pytest", "playwright", "jupyterlab", "notebook", "ruff", "marimo", "nbclient", "hatchling")

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")


def build(source: Path, out: Path, *targets: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m build` without isolation (hatchling is in the dev group): nothing is fetched."""
    flags = [f"--{t}" for t in targets]
    return subprocess.run([sys.executable, "-m", "build", "--no-isolation", *flags, "--outdir", str(out), str(source)],
                          capture_output=True, text=True, env=env)


def requirement_name(requirement: str) -> str:
    """The distribution a Requires-Dist line names, normalised ("IPython>=8" → "ipython")."""
    return re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def files_of(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The sdist and wheel built from the repository, and a wheel built from that sdist."""
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    done = build(ROOT, out / "repo", "sdist", "wheel")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = (out / "repo").glob("attnscope-*.tar.gz")
    (wheel,) = (out / "repo").glob("attnscope-*.whl")
    # The sdist unpacked in a clean folder, built with no npm or node on PATH: only this interpreter.
    clean = tmp_path_factory.mktemp("clean")
    with tarfile.open(sdist) as tar:
        tar.extractall(clean, filter="data")
    (unpacked,) = clean.iterdir()
    no_node = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    done = build(unpacked, out / "from-sdist", "wheel", env=no_node)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (rebuilt,) = (out / "from-sdist").glob("attnscope-*.whl")
    return {"sdist": sdist, "wheel": wheel, "rebuilt": rebuilt, "unpacked": unpacked, "no_node": no_node}


def test_the_sdist_rebuilds_the_same_wheel_offline_without_node(artifacts):
    with tarfile.open(artifacts["sdist"]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for needed in ("js/widget.js", "js/views/head_view.test.js", "scripts/build.mjs", "package.json", "package-lock.json",
                   "hatch_build.py", "LICENSE", "tests/product/test_packaging.py", "src/attnscope/static/widget.js",
                   "src/attnscope/static/SOURCES.sha256", "src/attnscope/static/THIRD_PARTY_LICENSES.txt"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("node_modules/", ".venv/", "tests/browser/artifacts/"))]
    # File for file the same wheel: the same names, the same bytes (the static bundle included).
    ours, rebuilt = files_of(artifacts["wheel"]), files_of(artifacts["rebuilt"])
    assert sorted(ours) == sorted(rebuilt)
    differ = [name for name in ours if ours[name] != rebuilt[name]]
    assert differ == [], differ


def test_the_wheel_holds_the_bundle_its_licences_and_no_cdn(artifacts):
    files = files_of(artifacts["wheel"])
    info = f"attnscope-{declared_version()}.dist-info"
    for name in ("attnscope/static/widget.js", "attnscope/static/widget.css", "attnscope/static/standalone.js",
                 "attnscope/static/standalone.css", "attnscope/static/picture.js", "attnscope/widget/attention_widget.py",
                 "attnscope/engine/attention_model.py", "attnscope/edges/cli.py",
                 f"{info}/licenses/LICENSE", f"{info}/licenses/src/attnscope/static/THIRD_PARTY_LICENSES.txt"):
        assert name in files, name
    metadata = files[f"{info}/METADATA"].decode()
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    notices = files["attnscope/static/THIRD_PARTY_LICENSES.txt"].decode()
    # Each bundled package with its licence text: d3's modules (ISC) and fflate (MIT).
    for package in ("d3-array", "d3-scale-chromatic", "d3-color", "d3-interpolate", "fflate"):
        assert f"\n{package} " in notices, package
    assert "Mike Bostock" in notices and "Permission to use, copy, modify" in notices
    for bundle in ("widget.js", "standalone.js", "picture.js"):
        text = files[f"attnscope/static/{bundle}"].decode()
        for host in ("cdn.", "unpkg.com", "esm.sh", "cdnjs", "jsdelivr"):
            assert host not in text, (bundle, host)
    # Development tools are no dependency of the package.
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert not [r for r in requires if requirement_name(r) in DEV_TOOLS and "extra ==" not in r]


def test_twine_accepts_the_artifacts(artifacts):
    pytest.importorskip("twine")
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(artifacts["sdist"]), str(artifacts["wheel"])],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_bundle_older_than_its_sources_fails_the_build_where_npm_cannot_rebuild_it(artifacts, tmp_path):
    stale = tmp_path / "stale"
    shutil.copytree(artifacts["unpacked"], stale)
    source = stale / "js" / "views" / "head_view.js"
    source.write_text(source.read_text() + "\n// an edit after the bundle was built\n")
    done = build(stale, tmp_path / "out", "wheel", env=artifacts["no_node"])
    assert done.returncode != 0
    assert "built from other sources" in done.stdout + done.stderr and "npm is not on PATH" in done.stdout + done.stderr
    assert not list((tmp_path / "out").glob("*.whl"))


def declared_version() -> str:
    """[project]'s version line (tomllib is 3.11+; the package supports 3.10)."""
    project = (ROOT / "pyproject.toml").read_text().split("[project]", 1)[1]
    return re.search(r'^version = "([^"]+)"', project, re.M).group(1)


def test_one_version_everywhere():
    declared = declared_version()
    import attnscope

    assert attnscope.__version__ == declared
    assert json.loads((ROOT / "package.json").read_text())["version"] == declared
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["version"] == lock["packages"][""]["version"] == declared


def test_the_wheel_alone_renders_a_page_that_paints_offline(artifacts, tmp_path, chromium_browser):
    """Installed into a venv of its own (torch first, the local CPU wheel, as the Makefile does),
    with no development tools, the CLI writes a page; chromium opens it with no network."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]  # no bytecode compiled at install: 15 s less for torch alone
    subprocess.run([*pip, f"torch=={importlib.metadata.version('torch').split('+')[0]}"], check=True)
    subprocess.run([*pip, str(artifacts["wheel"])], check=True)
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True)
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert not installed & set(DEV_TOOLS), installed & set(DEV_TOOLS)
    page = tmp_path / "page.html"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run([str(venv / "bin" / "attnscope"), "render", "The café in Zürich is naïve. 日本 🙂", "-o", str(page)], check=True, env=env)
    html = page.read_text(encoding="utf-8")
    assert "d3-array" in html and "fflate" in html  # the bundled code's licences travel with the page
    context = chromium_browser.new_context(offline=True)
    try:
        tab = context.new_page()
        errors = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.goto(page.as_uri())
        tab.wait_for_function("Number(document.querySelector('.attnscope-lines')?.dataset.lineCount) > 0", timeout=30_000)
        assert tab.get_by_text("Zürich").first.is_visible()
        assert errors == []
    finally:
        context.close()


def test_a_saved_pages_licence_comment_holds_every_notice_and_cannot_end_early():
    from attnscope.widget.export import bundled_licenses

    text = bundled_licenses()
    assert "--" not in text  # "-->" would end the comment; "--" alone is not allowed in one
    for package in ("d3-array", "fflate"):
        assert package in text


def test_everything_the_package_imports_is_declared():
    """Each third-party module imported anywhere in src/attnscope belongs to a distribution that
    attnscope requires (directly, or in an extra for the optional ones)."""
    import ast

    modules = set()
    for path in (ROOT / "src" / "attnscope").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = sorted(m for m in modules - set(sys.stdlib_module_names) if m not in ("attnscope", "__future__"))
    requirements = importlib.metadata.requires("attnscope") or []
    declared = {requirement_name(r) for r in requirements}
    owners = importlib.metadata.packages_distributions()
    undeclared = [m for m in third_party
                  if not {d.lower().replace("_", "-") for d in owners.get(m, [m])} & declared]
    assert undeclared == [], undeclared
