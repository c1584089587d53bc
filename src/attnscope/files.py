"""Every file attnscope writes (save_html, render_html, save_image's answer, `attnscope render -o`)
goes through write_atomic: the path's suffix must name what is written (as matplotlib's savefig
asks), a file it replaces is said, and a file at the path is either the old one, whole, or the new
one, whole."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import FolderNotFileError, InputError, MissingFolderError

# What each kind of file attnscope writes may be called; the first suffix is the one added to a
# name without any.
# The front end's bundles (js/, built by `make js`): the widget's module, a saved page's script
# and the picture's drawer.
STATIC = Path(__file__).resolve().parent / "static"

FORMATS = {"html": (".html", ".htm"), "png": (".png",), "svg": (".svg",)}
FORMAT_NAMES = {"html": "HTML", "png": "PNG", "svg": "SVG"}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def detect_format(data: bytes | bytearray | memoryview | str) -> str | None:
    """"html", "png" or "svg" when `data` is such a file (read from its first bytes), else None."""
    head = data[:512]
    if not isinstance(head, str):
        head = bytes(head)
        if head.startswith(_PNG_SIGNATURE):
            return "png"
        head = head.decode("utf-8", "ignore")
    text = head.lstrip("\ufeff \t\r\n").lower()
    if text.startswith(("<!doctype html", "<html")):
        return "html"
    if text.startswith("<svg") or (text.startswith("<?xml") and "<svg" in text):
        return "svg"
    return None


def output_path(path: str | os.PathLike, file_format: str) -> Path:
    """The path a `file_format` file ("html", "png", "svg") is written to: `path` when its suffix
    is one of the format's, with the format's suffix added when it has none ("analysis" →
    "analysis.html"). A suffix that names anything else ("analysis.ipynb") is refused, naming the
    path and the suffixes allowed: the file would replace another kind of file (a notebook) with
    this one. Callers check before any work, so a refused path costs nothing."""
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"The file to write must be a path (a str or a pathlib.Path), not {type(path).__name__}.")
    path = Path(path)
    allowed = FORMATS[file_format]
    name = FORMAT_NAMES[file_format]
    if not path.name or path.name in (".", ".."):
        raise InputError(f"Cannot write {name} to {str(path)!r}: give a file name, e.g. 'attention{allowed[0]}'.")
    if not path.suffix:
        return path.with_name(path.name + allowed[0])
    if path.suffix.lower() in allowed:
        return path
    raise InputError(
        f"Not writing {name} to {str(path)!r}: a{'n' if name[0] in 'HS' else ''} {name} file's name ends in "
        f"{' or '.join(allowed)}, and {path.suffix} names another kind of file, which this would replace. "
        f"Name it e.g. {str(path.with_suffix(allowed[0]))!r}."
    )


def writable_path(name: str, path: Any, file_format: str) -> Path:
    """output_path(path, file_format), checked before any work: a file name, in a folder that
    exists; InputError naming the parameter `name` otherwise."""
    try:
        target = output_path(path, file_format)
    except InputError as error:
        raise InputError(f"{name}: {error}") from None
    expanded = target.expanduser()
    folder = expanded.parent
    try:
        expanded.exists()  # raises where the name cannot be one (ENAMETOOLONG)
        there = folder.is_dir()
    except OSError as error:  # said now, not after the work: a name too long (ENAMETOOLONG), a folder not readable
        shown = repr(str(path)) if len(str(path)) <= 80 else f"{str(path)[:80]!r}…"
        longest = max(len(part) for part in target.parts)
        why = (f" (a name of {longest} characters, where file systems take 255 at most). Give a shorter name."
               if error.errno == errno.ENAMETOOLONG and longest > 255 else ": give a path this user can write to.")
        raise InputError(f"{name}: cannot write a file at {shown}: {error.strerror}{why}") from None
    if not there:
        raise MissingFolderError(f"{name}={str(path)!r}: cannot write the file there, the folder {folder} does not exist: "
                                 "make it first, or give a path in a folder that exists.")
    return target


def describe_size(n: int) -> str:
    """"12 bytes", "3.4 kB", "1.2 MB"."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def say_line(line: str) -> None:
    """What a writer tells: one line under the cell (stdout, not the red of stderr)."""
    print(f"attnscope: {line}", flush=True)


def write_atomic(
    path: str | os.PathLike,
    data: bytes | str,
    *,
    encoding: str = "utf-8",
    file_format: str | None = None,
    say: Callable[[str], None] | None = say_line,
) -> Path:
    """Write `data` (text is encoded with `encoding`) to `path` atomically; returns the path written.

    file_format: "html", "png" or "svg"; None reads it from `data` (detect_format; other data is
    written to any path). The path must be named for it (output_path): "analysis.ipynb" is refused
    with an InputError, "analysis" becomes "analysis.html".
    say: told one line when the file replaced one ("replaced out.html (was 12 kB, now 1.2 MB)") or
    got its suffix ("wrote analysis.html (.html added)"); printed by default, None for silence.

    The data goes to a temporary file in the same folder, which then replaces `path` with
    os.replace. If anything fails (encoding, a full disk, an interrupt), the temporary file is
    removed and a file already at `path` is left as it was. A new file gets the permissions any new
    file gets (0o666 less the umask); a replaced file keeps its permissions. A symbolic link at
    `path` stays a link: the file it points to is replaced.
    """
    file_format = file_format or detect_format(data)
    given = path
    path = output_path(path, file_format) if file_format else Path(path)
    suffix_added = path != Path(given)
    if isinstance(data, str):
        data = data.encode(encoding)  # before any file exists: text that cannot be encoded writes nothing
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    folder = target.parent
    if not folder.is_dir():
        raise MissingFolderError(f"Cannot write {path}: the folder {folder} does not exist.")
    if target.is_dir():
        raise FolderNotFileError(f"Cannot write {path}: it is a folder.")
    try:
        old = target.stat()
        mode = stat.S_IMODE(old.st_mode)
    except FileNotFoundError:
        old = mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temp = folder / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            # 0o666 here, so the umask applies as to any new file (mkstemp would make it 0o600).
            fd = os.open(temp, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if say is not None:
        if old is not None:
            say(f"replaced {path} (was {describe_size(old.st_size)}, now {describe_size(len(data))})")
        elif suffix_added:
            say(f"wrote {path} ({path.suffix} added)")
    return path


@dataclass
class ImageRequest:
    """A pending `save_image`: `done` turns True once the view has sent the image and it is written."""

    path: Path
    format: str
    done: bool = False
    error: str | None = None
    id: int = 0

    def answered(self, content: dict, buffers: list) -> None:
        """The view's reply: the image's bytes, written atomically, or why there are none."""
        if content.get("error") or not buffers:
            self.error = content.get("error") or "the view sent no image"
            return
        try:
            write_atomic(self.path, bytes(buffers[0]))
        except OSError as exc:  # in a comm callback nobody sees a raise: the request says why
            self.error = f"cannot write {self.path}: {exc.strerror}" if exc.strerror else str(exc)
            return
        self.done = True

    def __repr__(self) -> str:
        state = "written" if self.done else (f"failed: {self.error}" if self.error else "waiting for the view")
        return f"ImageRequest({str(self.path)!r}, {state})"
