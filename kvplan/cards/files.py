"""Reading card inputs: JSON files (Hugging Face ``config.json``) and pydantic errors as one clear line."""

from __future__ import annotations

import reprlib
from pathlib import Path

from pydantic import ValidationError

from kvplan.errors import InputError


def describe_validation_error(path: str, error: ValidationError) -> tuple[str, str]:
    """First problem of a pydantic error as 'file: field: message (got value)', and a hint."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(card)"
    message = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    if isinstance(got, bool) and first["type"] in ("int_type", "float_type"):
        message = f"{str(got).lower()} is a boolean, not a number"  # YAML true/false where a count belongs
    suffix = "" if first["type"] in ("missing", "value_error") or isinstance(got, dict) else f" (got {reprlib.repr(got)})"
    more = len(error.errors()) - 1
    hint = f"{more} more problem(s) in this card; run 'kvplan cards validate {path}'" if more else (
        "see 'kvplan cards show' of a shipped card for the expected fields")
    return f"{path}: {where}: {message}{suffix}", hint


def read_json(path: Path) -> dict:
    """A config.json: a regular UTF-8 file of bounded size, finite numbers only (kvplan.inputs)."""
    from kvplan.inputs import CONFIG_MAX_BYTES, load_json, read_text

    data = load_json(read_text(path, "config.json", CONFIG_MAX_BYTES, missing="no file at '{path}'"), path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a config.json must hold a JSON object", "pass a Hugging Face config.json")
    return data
