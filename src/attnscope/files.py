"""Atomic file writes: a file at the path is either the old one, whole, or the new one, whole."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: bytes | str, *, encoding: str = "utf-8") -> Path:
    """Write `data` (text is encoded with `encoding`) to `path` atomically; returns the path.

    The data goes to a temporary file in the same folder, which then replaces `path` with
    os.replace. If anything fails (encoding, a full disk, an interrupt), the temporary file is
    removed and a file already at `path` is left as it was. A new file gets the permissions any new
    file gets (0o666 less the umask); a replaced file keeps its permissions. A symbolic link at
    `path` stays a link: the file it points to is replaced.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode(encoding)  # before any file exists: text that cannot be encoded writes nothing
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"Cannot write {path}: the folder {folder} does not exist.")
    if target.is_dir():
        raise IsADirectoryError(f"Cannot write {path}: it is a folder.")
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
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
    return path
