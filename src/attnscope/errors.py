"""Exceptions that attnscope raises for bad input, so callers can catch them by kind.

In IPython (Jupyter, the IPython shell) these are shown from the call the user made: the user's
own lines and the message, not the frames inside attnscope that found the problem. Their
messages name the problem and what is allowed, so those frames say nothing more; Python outside
IPython prints the whole traceback, as usual.
"""

from __future__ import annotations

import sysconfig
import types
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


class AttnscopeError(Exception):
    """Base class of every error attnscope raises on purpose."""

    def _render_traceback_(self) -> list[str]:
        """IPython's hook for an exception's own traceback (InteractiveShell.showtraceback):
        IPython's formatting of this error with only the user's frames, from the cell down to
        the call into attnscope."""
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:  # called outside a shell: the standard text
            import traceback

            return traceback.format_exception(type(self), self, self.__traceback__)
        return shell.InteractiveTB.structured_traceback(type(self), self, _user_frames(self.__traceback__))


class InputError(AttnscopeError, ValueError):
    """The text (or batch) given to a run cannot be shown: empty, a batch of several, ..."""


class ModelNotFoundError(AttnscopeError, OSError):
    """A model name is neither a local path nor cached, and could not be downloaded."""


class MissingFolderError(AttnscopeError, FileNotFoundError):
    """A file to write is in a folder that does not exist (caught as FileNotFoundError too)."""


class FolderNotFileError(AttnscopeError, IsADirectoryError):
    """A file to write names a folder (caught as IsADirectoryError too)."""


class NoAttentionError(AttnscopeError):
    """The model returns no attention weights (or has no attention layers attnscope can read)."""


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    return tuple(str(Path(root).resolve()) for root in roots)


def _is_user_frame(frame: types.FrameType, libraries: tuple[str, ...]) -> bool:
    """Code the user wrote: a notebook cell, a script, their own modules; not attnscope's or an
    installed library's (IPython's, traitlets')."""
    name = frame.f_code.co_filename
    if name.startswith("<") and not name.startswith("<ipython-input"):
        return False  # frozen modules, exec'd strings of libraries
    try:
        path = Path(name).resolve()
    except (OSError, ValueError):
        return True
    text = str(path)
    if path.is_relative_to(_PACKAGE) or "site-packages" in path.parts or "dist-packages" in path.parts:
        return False
    return not any(text.startswith(root) for root in libraries)


def _user_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback cut to the user's frames: the shell's own frames before the cell left out,
    and everything from the first frame that is not the user's on (the call into attnscope is
    the last line shown). The whole traceback when no frame is the user's."""
    libraries = _library_roots()
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = next((i for i, e in enumerate(entries) if _is_user_frame(e.tb_frame, libraries)), None)
    if start is None:
        return entries[0] if entries else None
    end = start
    while end < len(entries) and _is_user_frame(entries[end].tb_frame, libraries):
        end += 1
    kept = None
    for entry in reversed(entries[start:end]):
        kept = types.TracebackType(kept, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return kept
