"""YAML input files (plan files, sweep grids): reading them bounded, and pydantic's errors as one message.

Light on purpose (yaml, pydantic and the unit parsers only): ``kvplan sweep`` reads its grid
with these without importing the plan-file machinery (metrics, workloads, SLOs).
"""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from kvplan.errors import InputError, KvplanError
from kvplan.units import parse_tokens


def _unit(parse):
    def convert(value):
        if value is None or isinstance(value, bool):
            return value
        try:
            return parse(value)
        except KvplanError as exc:  # pydantic reports ValueError with the field's location
            raise ValueError(exc.message) from None
    return BeforeValidator(convert)


Tokens = Annotated[int, _unit(parse_tokens), Field(gt=0, description="tokens; '128k' = 131072 (k = 1024)")]


def read_yaml(path: Path, what: str = "plan") -> tuple[dict, yaml.Node | None]:
    """The YAML mapping in ``path`` and its node tree (for line numbers)."""
    from kvplan.inputs import read_yaml as read_bounded

    data, node = read_bounded(path, f"{what} file", with_node=True)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a {what} file must be a YAML mapping", f"see 'kvplan schema' for the {what} keys")
    return data, node


def describe_errors(path: Path, error: ValidationError, root: type[BaseModel]) -> InputError:
    """Unknown keys all named at once (with the valid ones); otherwise the first problem."""
    unknown = [e for e in error.errors() if e["type"] == "extra_forbidden"]
    if unknown:
        keys = [".".join(str(p) for p in e["loc"]) for e in unknown]
        parents = {tuple(e["loc"][:-1]) for e in unknown}
        valid = "; ".join(f"{'.'.join(map(str, p)) or 'top level'}: {', '.join(_fields_at(root, p))}"
                          for p in sorted(parents))
        return InputError(f"{path}: unknown key{'s' if len(keys) > 1 else ''} {', '.join(keys)}",
                          f"valid keys — {valid}")
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(file)"
    message = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    suffix = "" if first["type"] in ("missing", "value_error") or isinstance(got, (dict, list)) else f" (got {reprlib.repr(got)})"
    return InputError(f"{path}: {where}: {message}{suffix}", "see 'kvplan schema' for the expected keys and values")


def _fields_at(root: type[BaseModel], loc: tuple) -> list[str]:
    model = root
    for part in loc:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[str(part)].annotation
        inner = [a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type)
                 and issubclass(a, BaseModel)]
        if not inner:
            return []
        model = inner[0]
    return list(model.model_fields)
