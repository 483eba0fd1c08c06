"""Listing, showing, validating and importing cards (the library side of ``kvplan cards``).

It lives above ``cards`` (which imports no math) because a model's row shows its KV bytes per
token, computed by :func:`kvplan.calc.kv.kv_layout` under the ``ideal`` profile (one copy, no paging).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kvplan.calc.kv import kv_layout
from kvplan.cards.hf_import import card_from_config_file
from kvplan.cards.loader import KINDS, card_files, load_hardware, load_model, load_system, parse_card
from kvplan.cards.schema import HardwareCard, ModelCard
from kvplan.engines import get_profile
from kvplan.errors import CardError, InputError
from kvplan.result import Result


def model_row(card: ModelCard) -> dict:
    layout = kv_layout(card, get_profile("ideal"), "auto")
    return {
        "name": card.name, "family": card.family, "attention": card.attention_kinds,
        "layers": card.num_layers, "params_total": card.params_total, "params_active": card.active_params,
        "kv_bytes_per_token": int(layout.bytes_per_token), "max_context": card.max_context,
        "dtype": card.dtype, "aliases": ", ".join(card.aliases),
    }


def hardware_row(card: HardwareCard) -> dict:
    return {
        "name": card.name, "vendor": card.vendor, "hbm_capacity_bytes": card.hbm_capacity_bytes,
        "capacity_basis": card.hbm_capacity_basis, "hbm_bandwidth_bytes_per_s": card.hbm_bandwidth_bytes_per_s,
        "peak_bf16_flops_per_s": card.peak_flops_per_s.get("bf16"),
        "peak_fp8_flops_per_s": card.peak_flops_per_s.get("fp8"),
    }


def list_cards(kind: str = "model", extra: tuple[Path, ...] = ()) -> Result:
    """Every card of ``kind`` with its headline figures."""
    if kind not in KINDS:
        raise InputError(f"unknown card kind '{kind}'", f"choose one of: {', '.join(KINDS)}")
    schema = KINDS[kind][1]
    cards = [parse_card(path, schema) for path in card_files(kind, extra)]
    if kind == "model":
        rows = [model_row(c) for c in cards]
        columns = ["name", "attention", "layers", "params_total", "params_active", "kv_bytes_per_token",
                   "max_context"]
    elif kind == "hardware":
        rows = [hardware_row(c) for c in cards]
        columns = ["name", "vendor", "hbm_capacity_bytes", "capacity_basis", "hbm_bandwidth_bytes_per_s",
                   "peak_bf16_flops_per_s", "peak_fp8_flops_per_s"]
    else:
        rows = [{"name": c.name, "accelerator": c.accelerator, "accelerators": c.accelerators,
                 "scale_up_domain": c.scale_up_domain, "tiers": ", ".join(t.name for t in c.tiers)} for c in cards]
        columns = ["name", "accelerator", "accelerators", "scale_up_domain", "tiers"]
    return Result(title=f"{kind} cards", rows=rows, columns=columns)


def show_card(name: str, extra: tuple[Path, ...] = ()) -> tuple[str, dict]:
    """The card named ``name`` (model, hardware or system, in that order) as a plain dict."""
    errors = []
    for loader, kind in ((load_model, "model"), (load_hardware, "hardware"), (load_system, "system")):
        try:
            card = loader(name, extra)
        except CardError as exc:
            errors.append(exc)
            continue
        return kind, card.model_dump(mode="json", exclude_defaults=True)
    raise errors[0]


def validate_paths(paths: list[Path], extra: tuple[Path, ...] = ()) -> Result:
    """Validate card files (default: every card kvplan can see); one row per file."""
    targets: list[tuple[str, Path]] = []
    if paths:
        for p in paths:
            files = sorted(p.glob("**/*.yaml")) if p.is_dir() else [p]
            for f in files:
                kind = next((k for k, (folder, _) in KINDS.items() if folder in f.parts), "model")
                targets.append((kind, f))
    else:
        targets = [(kind, f) for kind in KINDS for f in card_files(kind, extra)]
    rows = []
    for kind, f in targets:
        try:
            is_file = f.is_file()
        except OSError:
            is_file = False
        if not is_file:
            rows.append({"file": str(f), "kind": kind, "valid": False, "problem": "no such file"})
            continue
        if f.suffix == ".json":
            try:
                card_from_config_file(f)
                rows.append({"file": str(f), "kind": "model", "valid": True, "problem": ""})
            except (CardError, InputError) as exc:
                rows.append({"file": str(f), "kind": "model", "valid": False, "problem": exc.message})
            continue
        try:
            parse_card(f, KINDS[kind][1])
            rows.append({"file": str(f), "kind": kind, "valid": True, "problem": ""})
        except CardError as exc:
            rows.append({"file": str(f), "kind": kind, "valid": False, "problem": exc.message})
    from kvplan.textsafe import one_line

    rows = [{**r, "file": one_line(r["file"], 300), "problem": one_line(r["problem"], 300)} for r in rows]
    bad = [r for r in rows if not r["valid"]]
    return Result(title="card validation", rows=rows, columns=["file", "kind", "valid", "problem"],
                  verdict=f"{len(bad)} of {len(rows)} cards invalid" if bad else None, failed=bool(bad))


def import_config(path: Path, name: str | None = None) -> str:
    """A Hugging Face config.json as the YAML text of a model card."""
    card = card_from_config_file(path, name)
    data = card.model_dump(mode="json", exclude_defaults=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
