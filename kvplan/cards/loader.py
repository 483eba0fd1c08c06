"""Finding and loading cards: shipped ones, user directories, files and Hugging Face configs.

Search order for a name: directories given with ``--cards``, then ``KVPLAN_CARDS_PATH``
(``os.pathsep``-separated), then the cards shipped with kvplan. A card matches by its name
or any alias, case-insensitively. A model may also be given as a path to a card file
(``.yaml``) or to a Hugging Face ``config.json``.
"""

from __future__ import annotations

import difflib
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from kvplan.cards.files import describe_validation_error
from kvplan.cards.schema import HardwareCard, ModelCard, SystemCard
from kvplan.errors import CardError, InputError, UnknownCardError
from kvplan.inputs import load_yaml, read_text, read_yaml

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


def _lookup(dirs: list[Path], key: str) -> Path | None:
    """The file ``_index`` maps ``key`` to, reading only the cards whose text can hold it.

    Same precedence as the index (earlier directories win; inside one, the last file in sorted
    order), but a card is parsed only when its lower-cased text contains ``key`` (or a backslash,
    which could escape it in a quoted string): a Hugging Face repo id costs one small read per
    card instead of a YAML parse of every card. ``None``: not found this way (the index decides).
    """
    for directory in dirs:
        for path in sorted(directory.glob("*.yaml"), reverse=True):
            if path.stem.lower() == key:
                return path
            try:
                text = read_text(path, "card")
            except InputError:
                continue
            lowered = text.lower()
            if key not in lowered and "\\" not in text:
                continue
            try:
                data = load_yaml(text, path, "card")
            except (InputError, yaml.YAMLError):
                continue
            if isinstance(data, dict):
                names = [data.get("name"), *(data.get("aliases") or [])]
                if any(isinstance(a, str) and a.lower() == key for a in names):
                    return path
    return None


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
    found = _lookup(dirs, key)
    if found is not None:
        return found
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
    found = find_card(kind, name_or_path, extra)
    fast = {"model": _shipped_model, "hardware": _shipped_hardware}.get(kind)
    if fast is not None and found.parent == shipped_dir(kind):
        card = fast(found)
        if card is not None:
            return card
    return parse_card(found, schema)


def _shipped_model(path: Path) -> ModelCard | None:
    """A model card shipped with kvplan, built from its YAML without running the validators again.

    The shipped cards are part of the code: the test suite validates every one of them and checks
    that this gives the very card validation gives (tests/unit/test_shipped_cards_fast.py). It
    saves the first card's validator build (about a twentieth of ``kvplan size``). Anything but the
    plain shape of a card (a mapping, a list of layer-group mappings, a MoE mapping) is left to
    the validators (None). User cards (``--cards``, ``KVPLAN_CARDS_PATH``, files) are always validated.
    """
    from kvplan.cards.schema import LayerGroup, MoE

    try:
        data = read_yaml(path, "card")
    except InputError:
        return None
    groups, moe = (data.get("layer_groups"), data.get("moe")) if isinstance(data, dict) else (None, None)
    if (not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups)
            or not (moe is None or isinstance(moe, dict)) or not isinstance(data.get("source"), (str, list))):
        return None
    fields = {**data, "layer_groups": [LayerGroup.model_construct(**g) for g in groups],
              "source": [data["source"]] if isinstance(data["source"], str) else data["source"]}
    if moe is not None:
        fields["moe"] = MoE.model_construct(**moe)
    return ModelCard.model_construct(**fields)


def _shipped_hardware(path: Path) -> HardwareCard | None:
    """A hardware card shipped with kvplan, built from its YAML without running the validators again.

    As :func:`_shipped_model` (tests/unit/test_shipped_cards_fast.py validates every shipped hardware
    card and checks that this gives the very card validation gives): it saves the first hardware
    card's validator build, ~8 ms of ``kvplan sweep``'s set-up, before its first point. Anything but
    the plain shape (links, efficiency and tiers as mappings) is left to the validators (None).
    """
    from kvplan.cards.schema import Efficiency, Link, Tier

    try:
        data = read_yaml(path, "card")
    except InputError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("source"), (str, list)):
        return None
    links = {key: data[key] for key in ("scale_up", "nic", "host_link") if data.get(key) is not None}
    tiers = data.get("tiers", [])
    if (not all(isinstance(v, dict) for v in links.values()) or not isinstance(data.get("efficiency", {}), dict)
            or not isinstance(tiers, list) or not all(isinstance(t, dict) for t in tiers)):
        return None
    fields = {**data, **{key: Link.model_construct(**value) for key, value in links.items()},
              "source": [data["source"]] if isinstance(data["source"], str) else data["source"]}
    if "efficiency" in data:
        fields["efficiency"] = Efficiency.model_construct(**data["efficiency"])
    if "tiers" in data:
        fields["tiers"] = [Tier.model_construct(**t) for t in tiers]
    return HardwareCard.model_construct(**fields)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def load_model(name_or_path: str, extra: tuple[Path, ...] = ()) -> ModelCard:
    """A model card by name, alias, card path, Hugging Face ``config.json`` or model directory.

    A directory (what ``vllm serve`` takes) is read through its ``config.json``. A repo id that
    is a known card's alias plus a quantisation suffix (``-FP8``, ``-AWQ``, ``-GPTQ-Int4``, …)
    resolves to that card with the weights the suffix names (see ``resolve_quantized``).
    """
    path = Path(name_or_path)
    if _is_dir(path):
        config = path / "config.json"
        if not config.is_file():
            raise InputError(f"'{name_or_path}' is a directory without a config.json",
                             "pass a Hugging Face model directory, a config.json, or a card name")
        path = config
    if path.suffix == ".json" or (_is_file(path) and path.suffix not in (".yaml", ".yml")):
        from kvplan.cards.hf_import import card_from_config_file

        return card_from_config_file(path)
    try:
        return _load("model", name_or_path, extra)
    except UnknownCardError as exc:
        resolved = resolve_quantized(name_or_path, extra)
        if resolved is None:
            raise
        if isinstance(resolved, str):
            raise UnknownCardError("model", name_or_path, exc.suggestions, hint=resolved) from None
        return resolved


# repo-id suffix (lower case, after a '-') -> the weights dtype it names
QUANT_SUFFIXES = {
    "fp8": "fp8", "fp8-dynamic": "fp8", "fp8-block": "fp8", "fp8-static": "fp8", "w8a8-fp8": "fp8",
    "awq": "int4", "awq-int4": "int4", "gptq": "int4", "gptq-int4": "int4", "int4": "int4", "w4a16": "int4",
    "4bit": "int4", "bnb-4bit": "int4", "gptq-int8": "int8", "int8": "int8", "w8a8": "int8", "w8a16": "int8",
    "8bit": "int8", "nvfp4": "fp4", "fp4": "fp4", "mxfp4": "mxfp4",
}
_DATED_RELEASE = re.compile(r"-(instruct|thinking)?-?(\d{4})$")


def resolve_quantized(name: str, extra: tuple[Path, ...] = ()) -> ModelCard | str | None:
    """The card a quantised repo id stands for, with its weights dtype and a note; else None.

    ``Org/Model-Instruct-AWQ`` → the card whose name or alias (with or without its org) is
    ``Model-Instruct``, weights int4. A dated re-release (``…-Instruct-2507``) is not resolved:
    such releases change the config (Qwen3's 2507 models raise max_position_embeddings), so the
    answer is a hint naming the base card (a string), and the user passes the release's config.json.
    """
    key = name.lower()
    base, dtype, found = key, None, []
    for _ in range(3):  # "-awq-int4", "-instruct-fp8-dynamic"
        for suffix in sorted(QUANT_SUFFIXES, key=len, reverse=True):
            if base.endswith("-" + suffix):
                base, dtype = base[: -len(suffix) - 1], dtype or QUANT_SUFFIXES[suffix]
                found.append(suffix)
                break
    index = _index("model", tuple(search_dirs("model", extra)))
    tails = {alias.rsplit("/", 1)[-1]: path for alias, path in index.items()}
    dated = _DATED_RELEASE.search(base)
    if dated:
        stem = base[: dated.start()].rsplit("/", 1)[-1]
        match = index.get(stem) or tails.get(stem) or tails.get(stem + "-instruct")
        if match is not None:
            return (f"{name} is a dated re-release of {match.stem}, whose config may differ (context length); "
                    f"pass its config.json (or model directory), or use {match.stem}")
        return None
    if dtype is None:
        return None
    path = index.get(base) or tails.get(base.rsplit("/", 1)[-1])
    if path is None:
        return None
    card = parse_card(path, ModelCard)
    card = card.model_copy(update={"weights_dtype": dtype})
    card._resolution = (f"'{name}' resolved to the {card.name} card with {dtype} weights "
                        f"(the repo id's -{'-'.join(reversed(found))} suffix)")
    return card


def load_hardware(name_or_path: str, extra: tuple[Path, ...] = ()) -> HardwareCard:
    """A hardware card by name, alias or YAML path."""
    return _load("hardware", name_or_path, extra)


def load_system(name_or_path: str, extra: tuple[Path, ...] = ()) -> SystemCard:
    """A system card by name, alias or YAML path."""
    return _load("system", name_or_path, extra)


def system_names(extra: tuple[Path, ...] = (), accelerator: str | None = None, with_nic: bool = False) -> list[str]:
    """Names of the system cards (shipped and user), optionally only those of one accelerator or with a NIC."""
    out = []
    for path in card_files("system", extra):
        try:
            data = read_yaml(path, "card")
        except InputError:
            continue
        if not isinstance(data, dict):
            continue
        if accelerator is not None and data.get("accelerator") != accelerator:
            continue
        if with_nic and not data.get("nic"):
            continue
        out.append(str(data.get("name", path.stem)))
    return out


def usual_system(hw: HardwareCard, extra: tuple[Path, ...] = ()) -> tuple[SystemCard | None, str]:
    """The system an accelerator usually ships in (``usual_system`` on its card) and a note saying what was assumed.

    Without one, the note says what is assumed instead (one scale-up domain of the card's size, the
    card's own links) and names the shipped system cards of that accelerator, or all of them.
    """
    if hw.usual_system:
        system = load_system(hw.usual_system, extra)
        if system.accelerator == hw.name:
            return system, (f"no --system: assumed {system.name}, the usual system of {hw.name} "
                            f"({system.accelerators} per node, scale-up domain {system.scale_up_domain}"
                            + (f", NIC {system.nic.name}" if system.nic else ", no NIC on the card") + ")")
    own = system_names(extra, accelerator=hw.name)
    names = own or system_names(extra)
    domain = hw.scale_up_domain or (1 if hw.scale_up is None else "unbounded")
    return None, (f"no --system and {hw.name} names no usual system: assumed one scale-up domain of {domain} "
                  f"GPU(s) and {hw.name}'s own links" + (" (no NIC)" if hw.nic is None else "")
                  + f"; shipped system cards{' of ' + hw.name if own else ''}: {', '.join(names)}")


def load_hardware_and_system(hardware: str | HardwareCard, system: str | SystemCard | None,
                             cards: tuple[Path, ...] = ()) -> tuple[HardwareCard, SystemCard | None]:
    """A hardware card and the system around it; a system card named in the hardware's place stands
    for its accelerator, and a system whose accelerator is another card is refused."""
    sys_card = system if isinstance(system, SystemCard) or system is None else load_system(system, cards)
    if isinstance(hardware, HardwareCard):
        hw = hardware
    else:
        try:
            hw = load_hardware(hardware, cards)
        except UnknownCardError as not_hardware:
            try:
                as_system = load_system(hardware, cards)
            except UnknownCardError:
                raise not_hardware from None
            sys_card = sys_card or as_system
            hw = load_hardware(as_system.accelerator, cards)
    if sys_card is not None and sys_card.accelerator != hw.name:
        raise InputError(f"system '{sys_card.name}' holds {sys_card.accelerator}, not {hw.name}",
                         f"pass --system with a system card of {hw.name}, or drop it")
    return hw, sys_card
