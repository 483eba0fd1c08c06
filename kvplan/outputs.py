"""Writing output files: every file of one command, whole, or none of them.

One ``OutputSet`` per command collects what it writes (``-o``, ``--junit``, ``--chart``,
``--card-out``, …), checks every target before any work is done, and on ``commit()``:

1. writes each regular file to a temporary file beside its target (its name recorded before the file
   is created, so that an interrupt at any moment leaves a name to remove), with the mode an
   ordinary ``open()`` would give (``0666 & ~umask``: 0644 under umask 022), not the 0600 of
   ``mkstemp``;
2. renames all of them into place only once every one is written; if any write fails, or the
   process is interrupted (Ctrl-C; SIGTERM, which the CLI turns into an exit), every temporary
   file is removed and no target is touched;
3. writes through to devices last.

Targets: a missing path or a regular file (replaced); a symbolic link to a regular file (the
file it points to is replaced, the link stays). ``/dev/stdout``, ``/dev/stderr`` (and
``/dev/fd/1``, ``/dev/fd/2``) are written through the already-open stream, whatever it is (a pipe,
a terminal, a file opened for appending); any other character device (``/dev/null``, a terminal)
is opened and written through, never replaced. A directory, FIFO, socket or block device is
refused: replacing it with a regular file (temporary file + rename) would destroy it, and
writing into a FIFO could block forever.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvplan.errors import InputError
from kvplan.textsafe import one_line

_STREAMS = {"/dev/stdout": "stdout", "/dev/fd/1": "stdout", "/proc/self/fd/1": "stdout",
            "/dev/stderr": "stderr", "/dev/fd/2": "stderr", "/proc/self/fd/2": "stderr"}
HINT = "choose a regular file path (kvplan writes through only to /dev/stdout, /dev/stderr and character devices)"


def umask() -> int:
    """The process umask (read by setting and restoring it)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


def file_mode() -> int:
    """The mode ``open(path, 'w')`` would create a file with: 0666 minus the umask."""
    return 0o666 & ~umask()


@dataclass(frozen=True)
class Target:
    """Where one output goes: ``kind`` is file (temporary + rename), device, stdout or stderr."""

    given: Path
    path: Path
    kind: str


def check_target(path: str | Path, what: str = "output") -> Target:
    """Refuse a target kvplan must not replace; resolve links; check the directory exists."""
    given = Path(path)
    text = str(path)
    shown = one_line(text)
    if not text or text.endswith(os.sep) and text != os.sep:
        raise InputError(f"cannot write {what} '{shown}': not a file name", HINT)
    if text in _STREAMS:
        return Target(given, given, _STREAMS[text])
    try:
        st = os.stat(text)
    except FileNotFoundError:
        if os.path.islink(text):
            raise InputError(f"cannot write {what} '{shown}': it is a dangling symbolic link", HINT) from None
        st = None
    except OSError as exc:  # a symlink loop, a name too long, a component that is not a directory
        raise InputError(f"cannot write {what} '{shown}': {exc.strerror}", HINT) from None
    real = Path(os.path.realpath(text)) if st is not None and os.path.islink(text) else given
    if st is not None:
        mode = st.st_mode
        if stat.S_ISREG(mode):
            pass
        elif stat.S_ISCHR(mode):
            return Target(given, real, "device")
        else:
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a block device" if stat.S_ISBLK(mode)
                    else "not a regular file")
            raise InputError(f"cannot write {what} '{shown}': it is {kind}", HINT)
    directory = real.parent if str(real.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"cannot write {what} '{shown}': no directory '{one_line(directory)}'",
                         "create the directory first")
    return Target(given, real, "file")


Writer = Callable[[object], None]


@dataclass
class _Item:
    target: Target
    write: Writer          # called with an open handle (text or binary), or with a path for "path" writers
    mode: str              # "text", "binary" or "path"


class OutputSet:
    """The files one command writes, checked up front and committed all together."""

    def __init__(self) -> None:
        self._items: list[_Item] = []
        self.written: list[Path] = []

    def __len__(self) -> int:
        return len(self._items)

    def add(self, path: str | Path, data: str | bytes, what: str = "output") -> Target:
        """Add a whole text or bytes payload for ``path``."""
        if isinstance(data, bytes):
            return self.add_writer(path, lambda handle: handle.write(data), binary=True, what=what)
        return self.add_writer(path, lambda handle: handle.write(data), what=what)

    def add_writer(self, path: str | Path, write: Writer, *, binary: bool = False, what: str = "output") -> Target:
        """Add a streaming writer: ``write(handle)`` fills an open text (or binary) handle."""
        return self._add(path, write, "binary" if binary else "text", what)

    def add_path_writer(self, path: str | Path, write: Callable[[str], None], what: str = "output") -> Target:
        """Add a writer that needs a file name (e.g. a Parquet writer): ``write(temporary_path)``."""
        target = self._add(path, write, "path", what)
        if target.kind != "file":
            self._items.pop()
            raise InputError(f"cannot write {what} '{one_line(path)}' to a device or stream", HINT)
        return target

    def _add(self, path, write, mode, what) -> Target:
        target = check_target(path, what)
        for item in self._items:
            if item.target.path == target.path and target.kind in ("file", "device"):
                raise InputError(f"two outputs of this command go to '{one_line(path)}'",
                                 "give each output option its own file")
        self._items.append(_Item(target, write, mode))
        return target

    def commit(self) -> list[Path]:
        """Write everything (see the module docstring); returns the paths as given."""
        staged: list[tuple[_Item, str]] = []
        try:
            for item in self._items:
                if item.target.kind == "file":
                    self._stage(item, staged)
            for item, tmp in staged:
                os.replace(tmp, item.target.path)
            staged = []
        except OSError as exc:
            raise InputError(f"cannot write '{one_line(_failed(exc, self._items))}': {exc.strerror or exc}",
                             "choose a writable path with enough free space") from None
        finally:
            for _, tmp in staged:
                _unlink(tmp)
        for item in self._items:
            if item.target.kind != "file":
                self._write_through(item)
        self.written = [item.target.given for item in self._items]
        return self.written

    def _stage(self, item: _Item, staged: list) -> None:
        """Write ``item`` to a new temporary file beside its target, recorded in ``staged`` (with the item)
        before the file exists: an interrupt at any point leaves ``commit`` the name to remove."""
        path = item.target.path
        directory = path.parent if str(path.parent) else Path(".")
        fd, tmp = _new_temporary(directory, f".{path.name[:100]}.", ".tmp", staged, item)
        try:
            os.fchmod(fd, file_mode())
            if item.mode == "path":
                os.close(fd)
                item.write(tmp)
            elif item.mode == "binary":
                with os.fdopen(fd, "wb") as handle:
                    item.write(handle)
            else:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                    item.write(handle)
        except OSError as exc:
            exc.filename = str(item.target.given)
            raise

    def _write_through(self, item: _Item) -> None:
        kind = item.target.kind
        try:
            if kind in ("stdout", "stderr"):
                stream = sys.stdout if kind == "stdout" else sys.stderr
                if item.mode == "binary":
                    stream.flush()
                    item.write(stream.buffer)
                    stream.buffer.flush()
                else:
                    item.write(stream)
                    stream.flush()
                return
            fd = os.open(item.target.path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
            if item.mode == "binary":
                with os.fdopen(fd, "wb") as handle:
                    item.write(handle)
            else:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                    item.write(handle)
        except OSError as exc:
            raise InputError(f"cannot write '{one_line(item.target.given)}': {exc.strerror or exc}", HINT) from None


def _failed(exc: OSError, items: list[_Item]) -> str:
    return exc.filename if isinstance(exc.filename, str) else (str(items[0].target.given) if items else "?")


def _new_temporary(directory: Path, prefix: str, suffix: str, staged: list, item) -> tuple[int, str]:
    """(fd, name) of a new file in ``directory``, created as ``tempfile.mkstemp`` creates one (O_EXCL, mode 0600, a
    random name, retried on a clash), with ``(item, name)`` appended to ``staged`` before the file exists: a name
    recorded and never created costs its remover nothing, while a file created and not yet recorded would be
    left behind by a Ctrl-C or SIGTERM landing between the two (mkstemp returns the name only once the file is
    made). A name that clashes with an existing file is taken off again: that file is not ours to remove."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        staged.append((item, name))
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            staged.pop()
    raise FileExistsError(f"no unused temporary name in {directory}")


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """One file, whole or not at all (an ``OutputSet`` of one)."""
    outputs = OutputSet()
    outputs.add(path, text)
    outputs.commit()
