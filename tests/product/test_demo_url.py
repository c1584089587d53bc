"""`make demo` prints its URL again once JupyterLab answers (issue 30 item 10): the waiter
(scripts/print_when_serving.py) against a fake server, and the recipe with a fake JupyterLab that
logs 40 lines first."""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WAITER = ROOT / "scripts" / "print_when_serving.py"
TOKEN = "abc123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def url_for(port: int, token: str = TOKEN) -> str:
    return f"http://127.0.0.1:{port}/lab/tree/notebooks/quickstart.ipynb?token={token}"


def serve_status(port: int, token: str) -> http.server.ThreadingHTTPServer:
    """A Jupyter server's /api/status: 200 with the token, 403 without it."""

    class Status(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.path == "/api/status" and self.headers.get("Authorization") == f"token {token}"
            self.send_response(200 if ok else 403)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def waiter(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WAITER), *args], stdout=subprocess.PIPE, text=True)


def test_prints_the_url_once_the_server_answers_and_not_before():
    port = free_port()
    process = waiter(url_for(port), "--timeout", "30")
    time.sleep(0.8)  # a start-up and at least one poll (every 0.5 s) with nothing listening
    assert process.poll() is None  # nothing listens yet: still waiting, nothing printed
    server = serve_status(port, TOKEN)
    try:
        out, _ = process.communicate(timeout=20)
    finally:
        server.shutdown()
    assert process.returncode == 0 and f"JupyterLab is ready at {url_for(port)}" in out


def test_a_server_that_refuses_the_token_is_not_taken_for_ours():
    port = free_port()
    server = serve_status(port, "another-token")
    try:
        process = waiter(url_for(port), "--timeout", "1")
        out, _ = process.communicate(timeout=20)
    finally:
        server.shutdown()
    assert process.returncode == 1 and out == ""


def test_stops_without_printing_when_the_server_process_ends():
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    process = waiter(url_for(free_port()), "--watch", str(server.pid), "--timeout", "60")
    server.wait()
    started = time.monotonic()
    out, _ = process.communicate(timeout=20)
    assert process.returncode == 1 and out == "" and time.monotonic() - started < 5


FAKE_JUPYTER = """\
#!{python}
# A stand-in for `jupyter lab`: 40 lines of start-up log, then /api/status, then it stops.
import sys, time, http.server, threading
args = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
open({args_file!r}, "w").write("\\n".join(sys.argv[1:]))
port, token = int(args["--port"]), args["--IdentityProvider.token"]
for i in range(40):
    print(f"[I ServerApp] start-up log line {{i}}", file=sys.stderr, flush=True)
    time.sleep(0.01)
answered = threading.Event()
class Status(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.headers.get("Authorization") == f"token {{token}}"
        self.send_response(200 if ok else 403); self.end_headers()
        answered.set()
    def log_message(self, *a):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Status)
threading.Thread(target=server.serve_forever, daemon=True).start()
answered.wait(30)
time.sleep(1)
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_prints_the_url_again_after_the_servers_log(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    jupyter = venv / "bin" / "jupyter"
    jupyter.write_text(textwrap.dedent(FAKE_JUPYTER.format(python=sys.executable, args_file=str(tmp_path / "jupyter_args"))))
    jupyter.chmod(0o755)
    port = free_port()
    # -o install: the recipe alone, with the fake JupyterLab (the real venv is not touched).
    demo_dir = tmp_path / "demo"
    done = subprocess.run(["make", "--no-print-directory", "-o", "install", "demo", f"VENV={venv}", f"PORT={port}", f"TOKEN={TOKEN}",
                           f"DEMO_DIR={demo_dir}"],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                          env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    last_log = max(i for i, line in enumerate(lines) if "start-up log line" in line)
    shown = [i for i, line in enumerate(lines) if url_for(port) in line]
    assert shown and shown[0] < last_log < shown[-1], done.stdout  # before the log, and again after it
    assert f"JupyterLab is ready at {url_for(port)}" in lines[shown[-1]]
    # JupyterLab serves the copies (issue 45 §12): the URL's notebooks/quickstart.ipynb is demo_dir's.
    assert f"--ServerApp.root_dir={demo_dir}" in (tmp_path / "jupyter_args").read_text().split("\n")
    assert (demo_dir / "notebooks" / "quickstart.ipynb").read_bytes() == (ROOT / "notebooks" / "quickstart.ipynb").read_bytes()


@pytest.mark.slow  # a real JupyterLab: make test, not test-fast
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demos_jupyterlab_asks_nothing_about_news(tmp_path, chromium_browser):
    """The recipe's own JupyterLab (issue 45 §12): no "Would you like to get notified about official
    Jupyter news?" over the first outputs. The user's Jupyter settings are left out (a folder of
    the test's), so the recipe's flags alone decide."""
    port = free_port()
    env = {**os.environ, "MAKEFLAGS": "", "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    demo = subprocess.Popen(["make", "--no-print-directory", "-o", "install", "demo", f"PORT={port}", f"TOKEN={TOKEN}",
                             f"DEMO_DIR={tmp_path / 'demo'}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    page = chromium_browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        deadline = time.monotonic() + 120
        while True:  # the server's start-up
            try:
                page.goto(f"http://127.0.0.1:{port}/lab?token={TOKEN}")
                break
            except Exception:
                assert time.monotonic() < deadline and demo.poll() is None, "make demo's JupyterLab did not start"
                time.sleep(1)
        page.wait_for_selector(".jp-LauncherCard", timeout=90_000)
        page.wait_for_timeout(5000)  # the question comes a few seconds after the launcher
        assert "official Jupyter news" not in page.inner_text("body")
    finally:
        page.close()
        os.killpg(demo.pid, 15)
        demo.wait(timeout=30)
