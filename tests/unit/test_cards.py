"""Shipped cards: schema, sources, names, and agreement with the real config.json files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvplan.calc.kv import kv_layout
from kvplan.cards.hf_import import card_from_config_file
from kvplan.cards.loader import KINDS, card_files, load_model, parse_card
from kvplan.cards.schema import ModelCard
from kvplan.engines import get_profile
from kvplan.errors import CardError

from ..conftest import DATA

CONFIGS = sorted((DATA / "hf_configs").glob("*.json"))
REQUIRED_MODELS = [
    "llama-2-7b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mistral-7b-v0.1",
    "mixtral-8x7b", "mixtral-8x22b", "qwen2.5-7b", "qwen2.5-72b", "qwen3-8b", "qwen3-32b", "qwen3-235b-a22b",
    "deepseek-v2", "deepseek-v3", "kimi-k2", "gemma-2-9b", "gemma-3-27b", "falcon-7b", "falcon-40b",
    "phi-3-mini", "gpt-oss-20b", "gpt-oss-120b", "qwen3-next-80b-a3b", "glm-4.5", "opt-13b",
]
REQUIRED_HARDWARE = [
    "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "h20", "b200", "gb200", "mi300x", "mi325x",
    "mi355x", "gaudi3", "ascend-910b", "ascend-910c", "l40s",
]


@pytest.mark.parametrize(("kind", "path"), [(k, p) for k in KINDS for p in card_files(k)],
                         ids=lambda x: getattr(x, "name", x))
def test_every_shipped_card_validates_and_names_a_source(kind, path):
    card = parse_card(path, KINDS[kind][1])
    assert card.name == path.stem
    assert all(s.strip() for s in card.source)


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_required_model_cards_exist(name):
    assert load_model(name).name == name


@pytest.mark.parametrize("name", REQUIRED_HARDWARE)
def test_required_hardware_cards_exist(name):
    from kvplan.cards.loader import load_hardware

    assert load_hardware(name).name == name


def test_aliases_are_unique():
    seen: dict[str, str] = {}
    for path in card_files("model"):
        card = parse_card(path, ModelCard)
        for alias in [card.name, *card.aliases]:
            assert alias.lower() not in seen, f"{alias} in {card.name} and {seen.get(alias.lower())}"
            seen[alias.lower()] = card.name


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_import_of_the_real_config_matches_the_shipped_card(config):
    """Two independent readings of one config.json (the card author's and the importer's) agree."""
    imported = card_from_config_file(config)
    shipped = load_model(config.stem)
    ideal = get_profile("ideal")
    for seq in (1, 4096, 131072):
        assert float(kv_layout(imported, ideal).sequence_bytes(seq)) == float(
            kv_layout(shipped, ideal).sequence_bytes(seq)), seq
    hf = get_profile("hf")
    assert kv_layout(imported, hf).bytes_per_token == kv_layout(shipped, hf).bytes_per_token
    assert sorted((g.kind, g.count) for g in imported.layer_groups) == sorted(
        (g.kind, g.count) for g in shipped.layer_groups)
    assert imported.params_total == pytest.approx(shipped.params_total, rel=0.02)
    if shipped.moe:
        assert imported.moe.num_experts == shipped.moe.num_experts
        assert imported.moe.experts_per_token == shipped.moe.experts_per_token
        assert imported.moe.num_moe_layers == shipped.moe.num_moe_layers


def test_card_errors_name_file_and_field(tmp_path):
    data = yaml.safe_load((Path(card_files("hardware")[0])).read_text())
    data["hbm_bandwidth_bytes_per_s"] = -1
    bad = tmp_path / "neg.yaml"
    bad.write_text(yaml.safe_dump(data))
    from kvplan.cards.schema import HardwareCard

    with pytest.raises(CardError, match=r"neg.yaml: hbm_bandwidth_bytes_per_s: .*greater than or equal to 1000000 \(got -1\)"):
        parse_card(bad, HardwareCard)


def test_unknown_keys_are_rejected(tmp_path):
    data = yaml.safe_load((Path(card_files("model")[0])).read_text())
    data["kv_heads_typo"] = 8
    bad = tmp_path / "typo.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(CardError, match="kv_heads_typo"):
        parse_card(bad, ModelCard)


def test_field_sources_must_name_real_fields(tmp_path):
    data = yaml.safe_load((Path(card_files("model")[0])).read_text())
    data["field_sources"] = {"no_such_field": "x"}
    bad = tmp_path / "fs.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(CardError, match="no_such_field"):
        parse_card(bad, ModelCard)
