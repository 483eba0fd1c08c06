"""Reading card inputs: JSON files (Hugging Face ``config.json``) and pydantic errors as one clear line."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from kvplan.errors import InputError


def describe_validation_error(path: str, error: ValidationError) -> tuple[str, str]:
    """First problem of a pydantic error as 'file: field: message (got value)', and a hint."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(card)"
    message = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    suffix = "" if first["type"] in ("missing", "value_error") or isinstance(got, dict) else f" (got {got!r})"
    more = len(error.errors()) - 1
    hint = f"{more} more problem(s) in this card; run 'kvplan cards validate {path}'" if more else (
        "see 'kvplan cards show' of a shipped card for the expected fields")
    return f"{path}: {where}: {message}{suffix}", hint


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no file at '{path}'", "check the path to config.json") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}", "check the file") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            "pass a Hugging Face config.json, or a card name",
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a config.json must hold a JSON object", "pass a Hugging Face config.json")
    return data
