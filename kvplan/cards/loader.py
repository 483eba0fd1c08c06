"""Finding and loading cards: shipped ones, user directories, files and Hugging Face configs.

Search order for a name: directories given with ``--cards``, then ``KVPLAN_CARDS_PATH``
(``os.pathsep``-separated), then the cards shipped with kvplan. A card matches by its name
or any alias, case-insensitively. A model may also be given as a path to a card file
(``.yaml``) or to a Hugging Face ``config.json``.
"""

from __future__ import annotations

import difflib
import os
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from kvplan.cards.schema import HardwareCard, ModelCard, SystemCard
from kvplan.errors import CardError, InputError, UnknownCardError
from kvplan.inputs import CONFIG_MAX_BYTES, load_json, read_text, read_yaml

CardT = TypeVar("CardT", bound=BaseModel)
KINDS = {"model": ("model_cards", ModelCard), "hardware": ("hardware_cards", HardwareCard),
         "system": ("system_cards", SystemCard)}
MAX_NAME_CHARS = 200  # longer than any card name or Hugging Face repo id (96 characters)


def shipped_dir(kind: str) -> Path:
    """The shipped card directory: inside the wheel, or at the top of a source checkout."""
    folder = KINDS[kind][0]
    package = Path(__file__).resolve().parent.parent
    inside = package / "_cards" / folder
    return inside if inside.is_dir() else package.parent / folder


def search_dirs(kind: str, extra: list[Path] | tuple[Path, ...] = ()) -> list[Path]:
    folder = KINDS[kind][0]
    dirs: list[Path] = []
    env = os.environ.get("KVPLAN_CARDS_PATH", "")
    for base in [*map(Path, extra), *(Path(p) for p in env.split(os.pathsep) if p)]:
        dirs.append(base / folder if (base / folder).is_dir() else base)
    dirs.append(shipped_dir(kind))
    return dirs


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


def parse_card(path: Path, schema: type[CardT]) -> CardT:
    """Read one YAML card; errors name the file and the field."""
    try:
        data = read_yaml(path, "card")
    except InputError as exc:
        raise CardError(exc.message, exc.hint) from None
    if not isinstance(data, dict):
        raise CardError(f"{path}: a card must be a YAML mapping", "see the shipped cards for examples")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise CardError(*describe_validation_error(str(path), exc)) from None


@lru_cache(maxsize=None)
def _index(kind: str, dirs: tuple[Path, ...]) -> dict[str, Path]:
    """name and aliases (lower-cased) -> file, earlier directories winning."""
    index: dict[str, Path] = {}
    for directory in reversed(dirs):
        for path in sorted(directory.glob("*.yaml")):
            index[path.stem.lower()] = path
            try:
                data = read_yaml(path, "card")
            except InputError:
                continue  # unreadable, binary, too large or not YAML: reported when this card itself is asked for
            if isinstance(data, dict):
                for alias in [data.get("name"), *(data.get("aliases") or [])]:
                    if isinstance(alias, str):
                        index[alias.lower()] = path
    return index


def card_files(kind: str, extra: tuple[Path, ...] = ()) -> list[Path]:
    """Every card file of a kind, one per name (user directories shadow shipped cards)."""
    seen: dict[str, Path] = {}
    for directory in search_dirs(kind, extra):
        for path in sorted(directory.glob("*.yaml")):
            seen.setdefault(path.stem, path)
    return [seen[k] for k in sorted(seen)]


def find_card(kind: str, name: str, extra: tuple[Path, ...] = ()) -> Path:
    dirs = search_dirs(kind, extra)
    key = name.lower()
    if len(key) > MAX_NAME_CHARS or "\x00" in key:
        raise UnknownCardError(kind, name[:80] + ("…" if len(name) > 80 else ""), [])
    for directory in dirs:  # fast path: the file named like the card
        candidate = directory / f"{key}.yaml"
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            pass
    index = _index(kind, tuple(dirs))
    if key in index:
        return index[key]
    names = sorted({p.stem for p in index.values()})
    suggestions = difflib.get_close_matches(key, names + list(index), n=3, cutoff=0.5)
    ordered = list(dict.fromkeys(index[s].stem if s in index else s for s in suggestions))
    raise UnknownCardError(kind, name, ordered)


def _load(kind: str, name_or_path: str, extra: tuple[Path, ...]):
    """A card of ``kind`` by name, alias or path to a YAML file."""
    schema = KINDS[kind][1]
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        if not _is_file(path):
            raise InputError(f"no card file at '{name_or_path}'", "check the path")
        return parse_card(path, schema)
    return parse_card(find_card(kind, name_or_path, extra), schema)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def load_model(name_or_path: str, extra: tuple[Path, ...] = ()) -> ModelCard:
    """A model card by name, alias, card path or Hugging Face ``config.json`` path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or (_is_file(path) and path.suffix not in (".yaml", ".yml")):
        from kvplan.cards.hf_import import card_from_config_file

        return card_from_config_file(path)
    return _load("model", name_or_path, extra)


def load_hardware(name_or_path: str, extra: tuple[Path, ...] = ()) -> HardwareCard:
    """A hardware card by name, alias or YAML path."""
    return _load("hardware", name_or_path, extra)


def load_system(name_or_path: str, extra: tuple[Path, ...] = ()) -> SystemCard:
    """A system card by name, alias or YAML path."""
    return _load("system", name_or_path, extra)


def read_json(path: Path) -> dict:
    data = load_json(read_text(path, "config.json", CONFIG_MAX_BYTES, missing="no file at '{path}'"), path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a config.json must hold a JSON object", "pass a Hugging Face config.json")
    return data
