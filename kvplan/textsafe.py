"""User-supplied text on its way to a terminal, a CI log or a GitHub Actions workflow command.

Three rules, each with its source:

- ``one_line``: a user string (a file name, an assertion, a card field) printed inside an
  ``Error:``/``Hint:``/``Note:`` line or a console report stays on that line: control
  characters are written as Python-style escapes (``\\n``, ``\\x1b``), and a string longer than
  ``limit`` characters is cut with ``…`` (an error message never carries a huge value).
- ``gha_data`` / ``gha_property``: the escaping GitHub documents for workflow commands
  ("Workflow commands for GitHub Actions", and ``escapeData``/``escapeProperty`` in
  ``@actions/core``): ``%`` → ``%25``, ``\\r`` → ``%0D``, ``\\n`` → ``%0A`` in the message,
  and also ``:`` → ``%3A``, ``,`` → ``%2C`` in properties (``file=``, ``title=``).
- ``neutralise_line``: under ``GITHUB_ACTIONS`` a line whose text, after leading whitespace,
  starts with ``::`` or ``##[`` is a workflow command (the runner trims leading whitespace
  before it looks, see actions/runner ``ActionCommand.TryParseV2``); such a line written by
  anything but kvplan's own annotations gets a ``\\`` in front, so it is shown, not obeyed.
"""

from __future__ import annotations

import io
import os
import stat

LIMIT = 400
_COMMAND_STARTS = ("::", "##[")


def one_line(text: object, limit: int = LIMIT) -> str:
    """``text`` on one line: control characters escaped, at most ``limit`` characters (then ``…``)."""
    raw = text if isinstance(text, str) else _safe_str(text)
    if len(raw) > 4 * limit:
        raw = raw[: 4 * limit]
    out = []
    for char in raw:
        code = ord(char)
        if char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or char in "\u2028\u2029\u202e\u2066\u2067\u2068\u2069":
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    escaped = "".join(out)
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def _safe_str(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a value whose __str__ fails or is too large to print
        return f"<{type(value).__name__}>"


def gha_data(text: object) -> str:
    """A workflow command's message: ``%``, ``\\r`` and ``\\n`` percent-encoded (GitHub's escapeData)."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def gha_property(text: object) -> str:
    """A workflow command's property value: as ``gha_data`` plus ``:`` and ``,`` (GitHub's escapeProperty)."""
    return gha_data(text).replace(":", "%3A").replace(",", "%2C")


def is_command_line(line: str) -> bool:
    """True when GitHub Actions would read ``line`` as a workflow command."""
    return line.lstrip().startswith(_COMMAND_STARTS)


def neutralise_line(line: str) -> str:
    return "\\" + line if is_command_line(line) else line


class CommandGuard(io.TextIOBase):
    """A text stream wrapper that neutralises workflow-command lines (see ``neutralise_line``).

    ``allow(text)`` writes kvplan's own annotations through unchanged.
    """

    def __init__(self, stream) -> None:
        super().__init__()
        self._stream = stream
        self._at_line_start = True
        self._pending = ""

    def write(self, text: str) -> int:
        data = self._pending + text
        self._pending = ""
        out = []
        for piece in data.splitlines(keepends=True):
            complete = piece.endswith(("\n", "\r"))
            if self._at_line_start and not complete and len(piece.lstrip()) < 3 and "".join(
                    piece.lstrip()) in ("", ":", "#", "##"):
                self._pending = piece  # too short to tell yet: wait for more text
                continue
            out.append(neutralise_line(piece) if self._at_line_start else piece)
            self._at_line_start = complete
        self._stream.write("".join(out))
        return len(text)

    def allow(self, text: str) -> None:
        """Write ``text`` (kvplan's own workflow commands) unchanged, on a line of its own."""
        self.flush()
        self._stream.write(text)
        self._at_line_start = text.endswith("\n")

    def flush(self) -> None:
        if self._pending:
            self._stream.write(neutralise_line(self._pending))
            self._at_line_start = False
            self._pending = ""
        self._stream.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def buffer(self):
        return self._stream.buffer


def guarded(stream):
    """``stream`` wrapped in a CommandGuard when GitHub Actions reads it (a pipe or terminal, not a file)."""
    if os.environ.get("GITHUB_ACTIONS") != "true" or isinstance(stream, CommandGuard):
        return stream
    try:
        if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return stream  # redirected to a file: data, not the log
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass
    return CommandGuard(stream)


def write_command(stream, text: str) -> None:
    """Write kvplan's own workflow command(s) ``text`` through a guard (or straight to a plain stream)."""
    if isinstance(stream, CommandGuard):
        stream.allow(text)
    else:
        stream.write(text)
        stream.flush()
