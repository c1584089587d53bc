"""Build hook: every wheel and sdist carries a front-end bundle built from the JS sources it ships.

The bundle (src/attnscope/static/, not in git) is rebuilt with `npm run build` when it is missing
or was built from other sources than these: a digest of the sources (js/, package.json,
package-lock.json) is kept beside it in SOURCES.sha256. An sdist carries the bundle and its digest,
so a wheel builds from it offline and without Node.js; a checkout builds it once. Without npm, a
missing or stale bundle fails the build, saying why: a wheel never ships a stale front end.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

STATIC = Path("src/attnscope/static")
# What scripts/build.mjs writes; the package reads each of them.
TARGETS = ("widget.js", "widget.css", "standalone.js", "standalone.css", "picture.js", "THIRD_PARTY_LICENSES.txt")
DIGEST = "SOURCES.sha256"


def sources_digest(root: Path) -> str:
    """sha256 over the bundle's sources, each as its path, a NUL, its bytes and a NUL (tests left out)."""
    files = sorted(
        p for p in (root / "js").rglob("*")
        if p.is_file() and p.suffix in {".js", ".mjs", ".css"} and not p.name.endswith(".test.js")
    )
    files += [root / "scripts" / "build.mjs", root / "package.json", root / "package-lock.json"]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def bundle_problem(root: Path) -> str | None:
    """Why the bundle cannot be shipped as it is, or None."""
    static = root / STATIC
    missing = [name for name in TARGETS if not (static / name).is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    stamp = static / DIGEST
    if not stamp.is_file() or stamp.read_text().strip() != sources_digest(root):
        return "built from other sources than js/, scripts/build.mjs, package.json and package-lock.json"
    return None


class BundleHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        problem = bundle_problem(root)
        if problem is None:
            return
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(
                f"attnscope's front-end bundle ({STATIC}) is {problem}, and npm is not on PATH to rebuild it. "
                "Install Node.js, or build from a release sdist (it carries the bundle)."
            )
        if not (root / "node_modules" / ".package-lock.json").is_file():
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=root, check=True)
        subprocess.run([npm, "run", "build"], cwd=root, check=True)
        missing = [name for name in TARGETS if not (root / STATIC / name).is_file()]
        if missing:
            raise RuntimeError(f"npm run build did not write {', '.join(missing)} in {STATIC}")
        (root / STATIC / DIGEST).write_text(sources_digest(root) + "\n")
