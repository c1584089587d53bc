"""attnscope.files.write_atomic, and the writers that use it (save_html, save_image's answer, render_html)."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys

import pytest
import torch

import attnscope
from attnscope import files
from attnscope.files import write_atomic

OLD = b"the old file, which must survive\n"


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "out.html"
    path.write_bytes(OLD)
    return path


@pytest.fixture
def umask():
    def set_to(mask):
        os.umask(mask)

    previous = os.umask(0o022)
    yield set_to
    os.umask(previous)


def test_writes_text_and_bytes_and_leaves_only_the_file(tmp_path):
    assert write_atomic(tmp_path / "a.html", "héllo ✓") == tmp_path / "a.html"
    assert (tmp_path / "a.html").read_bytes() == "héllo ✓".encode()
    assert write_atomic(str(tmp_path / "b.png"), b"\x89PNG\r\n") == tmp_path / "b.png"
    assert (tmp_path / "b.png").read_bytes() == b"\x89PNG\r\n"
    write_atomic(tmp_path / "a.html", bytearray(b"new"))  # replaces
    assert (tmp_path / "a.html").read_bytes() == b"new"
    assert listing(tmp_path) == ["a.html", "b.png"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_new_files_respect_the_umask_and_replaced_files_keep_their_mode(tmp_path, umask):
    umask(0o022)
    write_atomic(tmp_path / "a.svg", "x")
    assert stat.S_IMODE((tmp_path / "a.svg").stat().st_mode) == 0o644  # not mkstemp's 0o600
    umask(0o007)
    write_atomic(tmp_path / "b.svg", "x")
    assert stat.S_IMODE((tmp_path / "b.svg").stat().st_mode) == 0o660
    (tmp_path / "a.svg").chmod(0o640)
    write_atomic(tmp_path / "a.svg", "y")
    assert stat.S_IMODE((tmp_path / "a.svg").stat().st_mode) == 0o640
    assert (tmp_path / "a.svg").read_text() == "y"


REAL_FDOPEN = os.fdopen


class HalfWriter:
    """os.fdopen's file that writes half the data to disk, then fails (a full disk, an I/O error)."""

    written: list[int] = []

    def __init__(self, fd, mode):
        self.file = REAL_FDOPEN(fd, mode)

    def write(self, data):
        half = bytes(data[: len(data) // 2])
        self.file.write(half)
        self.file.flush()
        HalfWriter.written.append(len(half))
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def fail_in_mid_write(monkeypatch):
    HalfWriter.written = []
    monkeypatch.setattr(files.os, "fdopen", HalfWriter)


def test_a_failure_in_mid_write_leaves_the_old_file_and_no_temp_file(old_file, monkeypatch):
    fail_in_mid_write(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(old_file, "<html>" + "x" * 10_000)
    assert HalfWriter.written == [5003]  # a half-written temp file existed...
    assert old_file.read_bytes() == OLD  # ...and never replaced the old file
    assert listing(old_file.parent) == ["out.html"]


def test_an_interrupt_before_the_replace_cleans_up(old_file, monkeypatch):
    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(old_file, b"new")
    assert old_file.read_bytes() == OLD
    assert listing(old_file.parent) == ["out.html"]


def test_text_that_cannot_be_encoded_writes_nothing(old_file, tmp_path):
    with pytest.raises(UnicodeEncodeError):
        write_atomic(old_file, "token \ud800")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(tmp_path / "new.html", "é", encoding="ascii")
    assert old_file.read_bytes() == OLD
    assert listing(tmp_path) == ["out.html"]


def test_a_missing_folder_is_a_clear_error_naming_the_path(tmp_path):
    path = tmp_path / "no-such-folder" / "view.html"
    with pytest.raises(FileNotFoundError, match="no-such-folder") as info:
        write_atomic(path, "x")
    assert str(path) in str(info.value) and "does not exist" in str(info.value)
    assert listing(tmp_path) == []
    with pytest.raises(IsADirectoryError, match="folder"):
        write_atomic(tmp_path, "x")


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links")
def test_a_symbolic_link_stays_a_link(tmp_path):
    real = tmp_path / "real.html"
    real.write_bytes(OLD)
    link = tmp_path / "link.html"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert listing(tmp_path) == ["link.html", "real.html"]


# The writers that use it.


@pytest.fixture(scope="module")
def precomputed():
    attention = tuple(torch.full((1, 2, 3, 3), 1 / 3) for _ in range(2))
    return attnscope.head_view(attention, ["[CLS]", "hi", "[SEP]"])


def test_save_html_is_atomic(precomputed, old_file, monkeypatch):
    assert precomputed.save_html(old_file) == old_file
    page = old_file.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    fail_in_mid_write(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        precomputed.save_html(old_file)
    assert old_file.read_text(encoding="utf-8") == page
    assert listing(old_file.parent) == ["out.html"]
    with pytest.raises(FileNotFoundError, match="nowhere"):
        precomputed.save_html(old_file.parent / "nowhere" / "x.html")


def test_save_image_answer_is_written_atomically(precomputed, tmp_path, monkeypatch):
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    old = tmp_path / "view.png"
    old.write_bytes(OLD)
    precomputed._handle_custom_msg({"kind": "event", "type": "rendered"}, [])
    precomputed.send = lambda content, buffers=None: None
    first, second, third = (precomputed.save_image(p) for p in (old, old, tmp_path / "gone" / "v.png"))

    def answer(request, data):  # the view's reply, as the comm delivers it
        precomputed._handle_custom_msg({"kind": "reply", "type": "image", "id": request.id}, [data])

    answer(first, memoryview(png))
    assert first.done and old.read_bytes() == png
    fail_in_mid_write(monkeypatch)
    answer(second, png)  # a comm callback: the request carries the error
    assert not second.done and second.error == f"cannot write {old}: No space left on device"
    assert old.read_bytes() == png and listing(tmp_path) == ["view.png"]
    monkeypatch.undo()
    answer(third, png)
    assert not third.done and str(tmp_path / "gone" / "v.png") in third.error and "does not exist" in third.error


def test_render_html_writes_atomically(default_model, tmp_path, monkeypatch):
    path = tmp_path / "page.html"
    written = attnscope.render_html("Dogs bark.", model=default_model, layers=[0], path=path)
    # The path, not the page: a notebook cell would show (and save) the page's whole source.
    assert written == path
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html") and "Dogs" in page
    fail_in_mid_write(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        attnscope.render_html("Cats purr.", model=default_model, layers=[0], path=path)
    assert path.read_text(encoding="utf-8") == page and listing(tmp_path) == ["page.html"]
    monkeypatch.undo()
    with pytest.raises(FileNotFoundError, match="missing"):
        attnscope.render_html("Dogs bark.", model=default_model, layers=[0], path=tmp_path / "missing" / "p.html")


# Whose file is it: a path named for another format is refused, a replaced file is said.

NOTEBOOK = b'{"cells": [], "nbformat": 4, "nbformat_minor": 5}\n'
PNG = b"\x89PNG\r\n\x1a\n" + bytes(20)


@pytest.mark.parametrize("data, name, message", [
    ("<!doctype html><html></html>", "analysis.ipynb",
     r"Not writing HTML to '.*analysis\.ipynb': an HTML file's name ends in \.html or \.htm, and \.ipynb names another "
     r"kind of file, which this would replace\. Name it e\.g\. '.*analysis\.html'\."),
    ("<!DOCTYPE html>\n<html>", "notes.md", r"Not writing HTML to '.*notes\.md'"),
    (PNG, "view.html", r"Not writing PNG to '.*view\.html': a PNG file's name ends in \.png"),
    ('<svg xmlns="http://www.w3.org/2000/svg"></svg>', "view.png", r"Not writing SVG to '.*view\.png': an SVG file's name ends in \.svg"),
    ("<!doctype html>", "page.v2", r"Not writing HTML to '.*page\.v2'.*Name it e\.g\. '.*page\.html'"),
], ids=["html to a notebook", "html to markdown", "png to html", "svg to png", "an unknown suffix"])
def test_a_path_named_for_another_format_is_refused_and_left_alone(tmp_path, data, name, message):
    path = tmp_path / name
    path.write_bytes(NOTEBOOK)
    with pytest.raises(attnscope.InputError, match=message):
        write_atomic(path, data)
    assert path.read_bytes() == NOTEBOOK and listing(tmp_path) == [name]


def test_each_format_keeps_its_own_suffixes_in_any_case(tmp_path, capsys):
    for name, data in (("a.html", "<!doctype html>"), ("b.HTM", "<html>"), ("c.PNG", PNG), ("d.svg", "<svg></svg>"),
                       ("e.txt", "not a format attnscope writes: any name")):
        assert write_atomic(tmp_path / name, data) == tmp_path / name
    assert capsys.readouterr().out == ""  # new files: nothing to say


def test_replacing_a_file_is_said_and_a_missing_suffix_is_added(tmp_path, capsys):
    path = tmp_path / "out.html"
    path.write_bytes(b"x" * 12_000)
    write_atomic(path, "<!doctype html>" + "y" * 1_234_000)
    assert capsys.readouterr().out == f"attnscope: replaced {path} (was 12.0 kB, now 1.2 MB)\n"
    assert write_atomic(tmp_path / "analysis", "<!doctype html>") == tmp_path / "analysis.html"
    assert capsys.readouterr().out == f"attnscope: wrote {tmp_path / 'analysis.html'} (.html added)\n"
    told = []
    write_atomic(path, "<!doctype html>", say=told.append)
    assert told == [f"replaced {path} (was 1.2 MB, now 15 bytes)"] and capsys.readouterr().out == ""


def test_save_html_and_render_html_refuse_a_notebook_path(precomputed, default_model, tmp_path, monkeypatch, capsys):
    notebook = tmp_path / "analysis.ipynb"
    notebook.write_bytes(NOTEBOOK)
    with pytest.raises(attnscope.InputError, match=r"Not writing HTML to '.*analysis\.ipynb'"):
        precomputed.save_html(notebook)
    assert notebook.read_bytes() == NOTEBOOK

    # render_html refuses before the model runs.
    def no_run(*args, **kwargs):
        raise AssertionError("the model ran for a page that cannot be written")

    monkeypatch.setattr(attnscope.widget.attention_widget.AttentionWidget, "__init__", no_run)
    with pytest.raises(attnscope.InputError, match=r"Not writing HTML to '.*analysis\.ipynb'"):
        attnscope.render_html("Dogs bark.", model=default_model, path=notebook)
    assert notebook.read_bytes() == NOTEBOOK and listing(tmp_path) == ["analysis.ipynb"]
    monkeypatch.undo()

    assert precomputed.save_html(tmp_path / "analysis") == tmp_path / "analysis.html"
    assert (tmp_path / "analysis.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    precomputed.save_html(tmp_path / "analysis.html")
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"attnscope: replaced {tmp_path / 'analysis.html'} (was ")


def test_save_image_refuses_a_path_named_for_another_format(precomputed, tmp_path):
    notebook = tmp_path / "analysis.ipynb"
    notebook.write_bytes(NOTEBOOK)
    with pytest.raises(attnscope.InputError, match=r"analysis\.ipynb"):
        precomputed.save_image(notebook)
    assert notebook.read_bytes() == NOTEBOOK


def test_the_command_line_refuses_a_notebook_and_says_it_replaced_a_page(tmp_path):
    notebook = tmp_path / "analysis.ipynb"
    notebook.write_bytes(NOTEBOOK)
    out = subprocess.run([sys.executable, "-m", "attnscope.edges.cli", "render", "Hi.", "-o", str(notebook)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"attnscope: error: -o: Not writing HTML to '{notebook}': an HTML file's name ends in .html or .htm, and .ipynb "
        f"names another kind of file, which this would replace. Name it e.g. '{tmp_path / 'analysis.html'}'."]
    assert notebook.read_bytes() == NOTEBOOK
    page = tmp_path / "page"
    for said in ("wrote", "replaced"):
        out = subprocess.run([sys.executable, "-m", "attnscope.edges.cli", "render", "Hi.", "-o", str(page)],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith(f"attnscope: {said} {tmp_path / 'page.html'} ("), last
    assert listing(tmp_path) == ["analysis.ipynb", "page.html"]


def test_a_name_longer_than_the_file_system_takes_is_refused_before_any_work(tmp_path):
    """A 300-character file name ended in the OS's "[Errno 36] File name too long" once the page
    was made (the command line loaded the model first): now refused at once, saying what to do."""
    with pytest.raises(attnscope.InputError, match=r"path: cannot write a file at .*a name of 305 characters, where file "
                                                    r"systems take 255 at most\)\. Give a shorter name\.") as info:
        files.writable_path("path", tmp_path / ("x" * 300), "html")
    assert "Errno" not in str(info.value)
    out = subprocess.run([sys.executable, "-m", "attnscope.edges.cli", "render", "Hi.", "-o", str(tmp_path / ("x" * 300))],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith("attnscope: error: -o: cannot write a file")
    assert list(tmp_path.iterdir()) == []
