"""Print a Jupyter server's URL again once the server answers.

`make demo` prints the URL before JupyterLab starts, and the server's start-up log then pushes it
out of view; this runs beside the server and prints it again when the server is ready:

    python scripts/print_when_serving.py URL [--watch PID] [--timeout SECONDS]

It asks URL's server for /api/status with URL's token every half second. When the server answers
200 it prints the URL and exits 0. It exits 1 without printing when process PID (the server) is
gone, or after the timeout. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# A proxy from the environment must not see a local server's token.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def status_request(url: str) -> urllib.request.Request:
    """The server's /api/status, asked with the token in `url`'s query."""
    parts = urllib.parse.urlsplit(url)
    token = urllib.parse.parse_qs(parts.query).get("token", [""])[0]
    status = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/api/status", "", ""))
    return urllib.request.Request(status, headers={"Authorization": f"token {token}"})


def answers(request: urllib.request.Request, timeout: float = 2.0) -> bool:
    """The server is up and takes the token (a server without it, or another one, answers 403)."""
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_and_print(url: str, watch: int | None = None, timeout: float = 600.0, interval: float = 0.5) -> bool:
    request = status_request(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(watch):
        if answers(request):
            print(f"\nattnscope demo: JupyterLab is ready at {url}\n", flush=True)
            return True
        time.sleep(interval)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the server's URL with ?token=...")
    parser.add_argument("--watch", type=int, help="stop, printing nothing, when this process (the server) ends")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at most (default 600)")
    args = parser.parse_args(argv)
    return 0 if wait_and_print(args.url, args.watch, args.timeout) else 1


if __name__ == "__main__":
    sys.exit(main())
