"""Reading the files users hand kvplan, with bounds: size, kind, encoding, YAML aliases, JSON numbers.

Every input file (cards, plan files, grids, tier lists, config.json, calibration CSV, traces)
is read through here, so each bound is enforced once:

- the path must be a regular file (not ``/dev/zero``, a FIFO or a directory: reading those
  can block or never end), reachable (a symlink loop is refused) and at most ``limit`` bytes;
- text must be UTF-8 (a UTF-16 or binary file is refused with a hint, not a traceback);
- YAML is composed first and its node graph measured before anything is built: at most
  ``YAML_MAX_NODES`` nodes *after* alias expansion (a "billion laughs" document of 9 nested
  aliases × 9 levels expands to 9^9 nodes from a few hundred bytes; it is refused without
  ever being expanded) and at most ``YAML_MAX_DEPTH`` levels of nesting;
- JSON refuses ``NaN``/``Infinity``, numbers that overflow a float (``1e999``) and integers
  longer than ``JSON_MAX_INT_DIGITS`` digits.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

import yaml

from kvplan.errors import InputError
from kvplan.textsafe import one_line

CARD_MAX_BYTES = 1 << 20          # a card, plan file, grid or tier list: 1 MiB (shipped cards are < 20 KiB)
CONFIG_MAX_BYTES = 16 << 20       # a Hugging Face config.json
TABLE_MAX_BYTES = 256 << 20       # a calibration CSV
TRACE_MAX_BYTES = 4 << 30         # a request trace (the public Azure and Mooncake traces are < 100 MB)
YAML_MAX_NODES = 200_000
YAML_MAX_DEPTH = 64
JSON_MAX_INT_DIGITS = 30
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_file(path: str | Path, what: str, limit: int, missing: str | None = None) -> int:
    """Refuse anything but a regular file of at most ``limit`` bytes; returns its size.

    ``missing``: the message for a path that does not exist ('{path}' is filled in).
    """
    shown = one_line(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError((missing or f"no {what} at '{{path}}'").format(path=shown), "check the path") from None
    except OSError as exc:  # a symlink loop, a name too long, a permission problem
        raise InputError(f"cannot read {what} '{shown}': {exc.strerror}", "check the path") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} '{shown}' is a directory", f"pass the {what} file itself")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} '{shown}' is not a regular file (a device, FIFO or socket)",
                         f"save the {what} to a file and pass that")
    if st.st_size > limit:
        raise InputError(f"{what} '{shown}' is {st.st_size:,} bytes, more than the {limit:,} kvplan reads",
                         f"a {what} this large is not what kvplan expects; check the file")
    return st.st_size


def read_bytes(path: str | Path, what: str, limit: int, missing: str | None = None) -> bytes:
    check_file(path, what, limit, missing)
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read {what} '{one_line(path)}': {exc.strerror}", "check the path") from None
    if len(data) > limit:
        raise InputError(f"{what} '{one_line(path)}' is larger than the {limit:,} bytes kvplan reads", "check the file")
    return data


def decode(data: bytes, path: str | Path, what: str) -> str:
    """UTF-8 text (a leading BOM dropped); UTF-16 or binary content is refused."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{what} '{one_line(path)}' is UTF-16 text", "save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} '{one_line(path)}' is not UTF-8 text (byte {exc.start})",
                         f"pass a UTF-8 {what}; this looks like a binary file") from None
    if "\x00" in text:
        raise InputError(f"{what} '{one_line(path)}' holds NUL bytes (binary or UTF-16 content)", "save it as UTF-8 text")
    return text


def read_text(path: str | Path, what: str, limit: int = CARD_MAX_BYTES, missing: str | None = None) -> str:
    """A bounded UTF-8 text file."""
    return decode(read_bytes(path, what, limit, missing), path, what)


# --------------------------------------------------------------------------- YAML


def load_yaml(text: str, source: str | Path, what: str = "YAML file", *, with_node: bool = False):
    """Parse YAML safely: aliases expanded within ``YAML_MAX_NODES``, nesting within ``YAML_MAX_DEPTH``.

    Raises ``yaml.YAMLError`` for bad syntax (callers word that message), ``InputError`` for a
    document over the bounds.
    """
    _check_depth(text, source, what)
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise InputError(f"{one_line(source)}: YAML nested too deeply", _depth_hint()) from None
        if node is None:
            return (None, None) if with_node else None
        _measure(node, source, what)
        data = loader.construct_document(node)
        return (data, node) if with_node else data
    finally:
        loader.dispose()


def _check_depth(text: str, source, what: str) -> None:
    """Nesting depth from the parser's event stream (iterative), before the recursive composer runs."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > YAML_MAX_DEPTH:
                raise InputError(f"{one_line(source)}: {what} nested more than {YAML_MAX_DEPTH} levels deep",
                                 _depth_hint())
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _depth_hint() -> str:
    return f"a {YAML_MAX_DEPTH}-level nesting is far beyond what any kvplan file needs; flatten it"


def _measure(root, source, what: str) -> None:
    """Expanded node count (aliases counted each time they are used) and depth, without recursion."""
    expanded: dict[int, int] = {}
    depth_of: dict[int, int] = {}
    stack: list[tuple[object, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if depth > YAML_MAX_DEPTH:
            raise InputError(f"{one_line(source)}: {what} nested more than {YAML_MAX_DEPTH} levels deep", _depth_hint())
        children = _children(node)
        if done:
            total = 1 + sum(expanded[id(c)] for c in children)
            if total > YAML_MAX_NODES:
                raise InputError(
                    f"{one_line(source)}: {what} expands to more than {YAML_MAX_NODES:,} values "
                    "(YAML anchors and aliases)",
                    "write the values out, or use fewer aliases; kvplan refuses 'billion laughs' documents")
            expanded[key] = total
            continue
        if key in expanded:
            continue
        if depth_of.get(key, 0) == -1:  # on the current path: a recursive alias
            raise InputError(f"{one_line(source)}: {what} refers to itself (a recursive YAML alias)",
                             "remove the alias cycle")
        depth_of[key] = -1
        stack.append((node, depth, True))
        for child in children:
            if id(child) not in expanded:
                stack.append((child, depth + 1, False))
    # depth_of marks are only used for cycle detection above


def _children(node) -> list:
    value = node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(value)
    return []


def read_yaml(path: str | Path, what: str, limit: int = CARD_MAX_BYTES, *, with_node: bool = False):
    """A bounded YAML file → its data (and its node tree, for line numbers); syntax errors name the line."""
    text = read_text(path, what, limit)
    try:
        return load_yaml(text, path, what, with_node=with_node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None)
        raise InputError(f"{one_line(path)}:{where} is not valid YAML" + (f" ({one_line(problem, 120)})" if problem else ""),
                         f"fix the syntax; a {what} is a YAML mapping") from None


# --------------------------------------------------------------------------- JSON


def _json_constant(name: str):
    raise ValueError(f"{name} is not a number kvplan accepts")


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} overflows a float")
    return value


def _json_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > JSON_MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits")
    return int(text)


def load_json(text: str, source: str | Path):
    """JSON without NaN/Infinity, float overflow or giant integers; errors name the line."""
    import json  # only for a config.json (the YAML cards' start-up does without it)

    try:
        return json.loads(text, parse_constant=_json_constant, parse_float=_json_float, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise InputError(f"{one_line(source)}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                         "pass a Hugging Face config.json, or a card name") from None
    except ValueError as exc:
        raise InputError(f"{one_line(source)}: {one_line(exc, 200)}",
                         "config.json values must be finite numbers (no NaN, Infinity or 1e999)") from None
    except RecursionError:
        raise InputError(f"{one_line(source)}: JSON nested too deeply", "a config.json is a flat object") from None
