"""What a model name can be matched against before anything is downloaded: whether the Hugging
Face hub answers from here, and the names known on this machine (attnscope's packaged models and
the hub cache) for a "did you mean".

Without this, a misspelled name offline cost 24–33 s: the hub client retries a HEAD request five
times with back-off before transformers says it could not connect.
"""

from __future__ import annotations

import difflib
import os
import socket
import threading
import time
from urllib.parse import urlsplit

PROBE_SECONDS = 3.0  # a hub that does not take a TCP connection in this time is taken as unreachable
_REMEMBERED_SECONDS = 60.0  # one probe serves the calls of the next minute (a notebook's load and its tokenizer)
_last_probe: tuple[float, str | None] | None = None
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def downloads_off() -> bool:
    """HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set."""
    return any(os.environ.get(name, "0").lower() in ("1", "true", "yes") for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached from here ("huggingface.co: Name or service not known"),
    found within PROBE_SECONDS; None when it answers, or when a proxy stands between (the hub
    client's own request then decides)."""
    global _last_probe
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return None
    now = time.monotonic()
    if _last_probe is not None and now - _last_probe[0] < _REMEMBERED_SECONDS:
        return _last_probe[1]
    _last_probe = (now, _probe())
    return _last_probe[1]


def _probe() -> str | None:
    from huggingface_hub import constants

    address = urlsplit(constants.ENDPOINT)
    host = address.hostname or ""
    port = address.port or (443 if address.scheme == "https" else 80)
    answer: list[str | None] = []

    def connect() -> None:  # name resolution too can hang: the whole probe runs under one clock
        try:
            socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
            answer.append(None)
        except OSError as error:
            answer.append(f"{host}: {error.strerror or error}")

    worker = threading.Thread(target=connect, name="attnscope-hub-probe", daemon=True)
    worker.start()
    worker.join(PROBE_SECONDS)
    return answer[0] if answer else f"{host}: no answer in {PROBE_SECONDS:g} s"


def known_names(packaged: dict[str, str]) -> list[str]:
    """attnscope's short names (`packaged`: name → label) and the models in this machine's hub cache."""
    names = list(packaged)
    try:
        from huggingface_hub import scan_cache_dir

        names += [repo.repo_id for repo in scan_cache_dir().repos if repo.repo_type == "model"]
    except Exception:  # no cache yet, or one the scanner cannot read: nothing to suggest from it
        pass
    return names


def nearest_name(name: str, packaged: dict[str, str]) -> str | None:
    """The known name closest to `name` ("smolm2" → "smollm2"), or None when none is close;
    a name of the hub's compared with and without its organisation."""
    candidates = {}
    for known in known_names(packaged):
        candidates.setdefault(known.lower(), known)
        candidates.setdefault(known.rsplit("/", 1)[-1].lower(), known)
    for asked in (name.lower(), name.rsplit("/", 1)[-1].lower()):
        close = difflib.get_close_matches(asked, list(candidates), n=1, cutoff=0.75)
        if close and candidates[close[0]] != name:
            return candidates[close[0]]
    return None


def did_you_mean(name: str, packaged: dict[str, str]) -> str:
    """" Did you mean 'smollm2' (...)?" for a name close to a known one, else ""."""
    near = nearest_name(name, packaged)
    if near is None:
        return ""
    what = f" (attnscope's packaged {packaged[near]})" if near in packaged else " (in this machine's hub cache)"
    return f" Did you mean '{near}'{what}?"
