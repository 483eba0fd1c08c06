"""The assertion language of plan files: a small, safe subset of Python expressions.

Allowed: metric names, numbers (with an optional unit suffix: ``20GiB``, ``80GB``, ``2s``,
``50ms``, ``128k`` tokens with k = 1024), ``true``/``false``, ``+ - * /``, unary ``-``,
parentheses, comparisons (``< <= > >= == !=``, chained ones too) and ``and``/``or``/``not``.
Everything else (calls, attributes, subscripts, strings, lambdas, ``**`` …) is rejected
before anything is evaluated: the text is parsed with :mod:`ast` and walked against a
whitelist; nothing is ever passed to ``eval``.

A YAML mapping ``{kv_fits: true}`` is the assertion ``kv_fits == true``.
"""

from __future__ import annotations

import ast
import reprlib
import math
import operator
import re
from dataclasses import dataclass

from kvplan.errors import InputError, UnitError
from kvplan.units import parse_bytes, parse_seconds, parse_tokens

_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_COMPARE_FN = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
               "==": operator.eq, "!=": operator.ne}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_LITERALS = {"true": True, "false": False, "True": True, "False": False}
# a number glued to letters ("20GiB", "2s", "128k") is a quantity with a unit, never Python syntax
_QUANTITY = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)([A-Za-zµ]+)\b")
_BYTE_UNITS = {"b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib"}
_TIME_UNITS = {"s", "ms", "us", "µs", "ns", "min"}
_TOKEN_UNITS = {"k", "m"}


def _quantity(match: re.Match) -> str:
    number, unit = match.group(1), match.group(2)
    text, key = number + unit, unit.lower()
    if key in _BYTE_UNITS:
        return repr(float(parse_bytes(text)))
    if key in _TIME_UNITS:
        return repr(parse_seconds(text))
    if key in _TOKEN_UNITS:
        return repr(float(parse_tokens(text)))
    raise UnitError(f"unknown unit '{unit}' in '{text}'",
                    "use bytes (GB, GiB), seconds (s, ms, us) or tokens (k = 1024)")


@dataclass(frozen=True)
class Assertion:
    """One parsed assertion: its text, the metric names it reads, and its syntax tree."""

    text: str
    tree: ast.Expression
    names: tuple[str, ...]
    line: int | None = None  # 1-based line in the plan file, for CI annotations

    @property
    def sides(self) -> tuple[ast.AST, str | None, ast.AST | None]:
        """(value side, operator, limit side) of a top-level comparison; (expr, None, None) otherwise."""
        body = self.tree.body
        if isinstance(body, ast.Compare) and len(body.ops) == 1:
            return body.left, _COMPARE[type(body.ops[0])], body.comparators[0]
        return body, None, None


MAX_ASSERTION_CHARS = 500


def parse_assertion(item, line: int | None = None) -> Assertion:
    """Parse a string, or a one-key mapping ``{metric: literal}``, into an Assertion."""
    if isinstance(item, dict):
        if len(item) != 1:
            raise InputError(f"assertion {reprlib.repr(item)}: a mapping assertion has exactly one key",
                             "write 'metric: value' or a string such as 'metric >= 16'")
        (name, value), = item.items()
        if isinstance(value, bool):
            text = f"{name} == {'true' if value else 'false'}"
        elif isinstance(value, (int, float)):
            text = f"{name} == {value!r}"
        else:
            raise InputError(f"assertion '{name}: {value}': the value must be a number or true/false",
                             f"write a comparison as a string, e.g. '{name} >= 16'")
    elif isinstance(item, str):
        text = item.strip()
    else:
        raise InputError(f"assertion {reprlib.repr(item)} is not a string", "write e.g. 'max_concurrency_at_max_len >= 16'")
    if len(text) > MAX_ASSERTION_CHARS:
        raise InputError(f"assertion '{text[:60]}…' is {len(text):,} characters long",
                         f"an assertion is one comparison of at most {MAX_ASSERTION_CHARS} characters; split it")
    if "\n" in text or "\r" in text:
        raise InputError(f"assertion '{text}' spans several lines", "write each assertion on one line")
    try:
        source = _QUANTITY.sub(_quantity, text)
        tree = ast.parse(source, mode="eval")
    except (RecursionError, MemoryError):
        raise InputError(f"assertion '{text[:60]}…' is nested too deeply", "simplify the assertion") from None
    except SyntaxError:
        raise InputError(f"assertion '{text}' is not a valid expression",
                         "write e.g. 'max_concurrency_at_max_len >= 16' or 'ttft_s <= 2s'") from None
    names: list[str] = []
    _check(tree.body, text, names)
    return Assertion(text=text, tree=tree, names=tuple(dict.fromkeys(names)), line=line)


def _check(node: ast.AST, text: str, names: list[str]) -> None:
    """Walk the tree; anything outside the whitelist is an error naming the construct."""
    if isinstance(node, ast.Name):
        if node.id not in _LITERALS:
            names.append(node.id)
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise _refuse(text, f"the literal {reprlib.repr(node.value)}")
        if isinstance(node.value, int) and abs(node.value) > 2**63:
            raise InputError(f"assertion '{text[:80]}': the number {str(node.value)[:20]}… is too large",
                             "compare against a figure below 2^63 (use units: 20GiB, 2s, 128k)")
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise InputError(f"assertion '{text[:80]}': a number overflows to infinity",
                             "compare against a finite figure (use units: 20GiB, 2s, 128k)")
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, text, names)
        _check(node.right, text, names)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        _check(node.operand, text, names)
        return
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        for part in (node.left, *node.comparators):
            _check(part, text, names)
        return
    if isinstance(node, ast.BoolOp):
        for part in node.values:
            _check(part, text, names)
        return
    raise _refuse(text, type(node).__name__.lower())


def _refuse(text: str, what: str) -> InputError:
    return InputError(
        f"assertion '{text}': {what} is not allowed",
        "assertions use metric names, numbers, + - * /, comparisons, and/or/not, true/false",
    )


def evaluate(node: ast.AST, values: dict[str, float | bool]):
    """Value of an expression tree over ``values`` (names already checked to be present)."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body, values)
    if isinstance(node, ast.Name):
        return _LITERALS[node.id] if node.id in _LITERALS else values[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        left, right = evaluate(node.left, values), evaluate(node.right, values)
        if isinstance(node.op, ast.Div) and right == 0:
            return math.inf if left > 0 else (-math.inf if left < 0 else math.nan)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        operand = evaluate(node.operand, values)
        if isinstance(node.op, ast.Not):
            return not operand
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, values)
        for op, right_node in zip(node.ops, node.comparators):
            right = evaluate(right_node, values)
            if not _COMPARE_FN[_COMPARE[type(op)]](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        parts = (evaluate(v, values) for v in node.values)
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    raise AssertionError(f"unchecked node {type(node).__name__}")  # _check rejects these first


def source_of(node: ast.AST) -> str:
    """The text of a sub-expression, as ast writes it back (true/false kept lower-case)."""
    text = ast.unparse(node)
    return {"True": "true", "False": "false"}.get(text, text)
