"""Shipped model cards are built without re-running the validators: the very cards validation gives.

The loader's fast path (kvplan.cards.loader._shipped_model) trusts the shipped YAML; this test is
what makes that trust safe: every shipped model card is validated here and compared field by field,
and a user's card of the same name still goes through the validators.
"""

from __future__ import annotations

import json
import shutil

import pytest

from kvplan.cards.loader import _shipped_model, load_model, parse_card, shipped_dir
from kvplan.cards.schema import LayerGroup, ModelCard, MoE
from kvplan.errors import CardError

SHIPPED = sorted(shipped_dir("model").glob("*.yaml"))


def assert_same_card(fast, validated):
    """The fast card is the validated one: equal, the same fields set, the same values and Python types
    (an int stays an int, a float a float, a list a list)."""
    assert fast is not None and fast == validated
    assert fast.model_fields_set == validated.model_fields_set
    assert json.dumps(fast.model_dump(), sort_keys=True) == json.dumps(validated.model_dump(), sort_keys=True)


def test_there_are_shipped_model_cards():
    assert len(SHIPPED) >= 20


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_fast_card_is_the_validated_card(path):
    fast, validated = _shipped_model(path), parse_card(path, ModelCard)
    assert_same_card(fast, validated)
    assert all(isinstance(g, LayerGroup) for g in fast.layer_groups)
    assert (fast.moe is None) == (validated.moe is None) and (fast.moe is None or isinstance(fast.moe, MoE))
    assert fast.num_layers == validated.num_layers and fast.attention_kinds == validated.attention_kinds


def test_load_by_name_gives_the_validated_card():
    path = shipped_dir("model") / "llama-3.1-70b.yaml"
    assert load_model("llama-3.1-70b") == parse_card(path, ModelCard)
    assert load_model("meta-llama/Llama-3.1-70B-Instruct") == parse_card(path, ModelCard)  # by alias


def test_a_users_card_of_the_same_name_is_validated(tmp_path):
    user = tmp_path / "cards"
    user.mkdir()
    text = (shipped_dir("model") / "llama-3.1-8b.yaml").read_text()
    (user / "llama-3.1-8b.yaml").write_text(text.replace("hidden_size: 4096", "hidden_size: -4096"))
    assert "hidden_size: -4096" in (user / "llama-3.1-8b.yaml").read_text()
    with pytest.raises(CardError) as err:
        load_model("llama-3.1-8b", (user,))
    assert "hidden_size" in err.value.message


def test_an_odd_shipped_shape_is_left_to_the_validators(tmp_path):
    odd = tmp_path / "odd.yaml"
    shutil.copy(shipped_dir("model") / "llama-3.1-8b.yaml", odd)
    odd.write_text(odd.read_text() + "\nmoe: 3\n")
    assert _shipped_model(odd) is None
    with pytest.raises(CardError):
        parse_card(odd, ModelCard)


HARDWARE = sorted(shipped_dir("hardware").glob("*.yaml"))


def test_there_are_shipped_hardware_cards():
    assert len(HARDWARE) >= 10


@pytest.mark.parametrize("path", HARDWARE, ids=lambda p: p.stem)
def test_fast_hardware_card_is_the_validated_card(path):
    from kvplan.cards.loader import _shipped_hardware
    from kvplan.cards.schema import Efficiency, HardwareCard, Link, Tier

    fast, validated = _shipped_hardware(path), parse_card(path, HardwareCard)
    assert_same_card(fast, validated)
    assert isinstance(fast.efficiency, Efficiency) and all(isinstance(t, Tier) for t in fast.tiers)
    for key in ("scale_up", "nic", "host_link"):
        assert (getattr(fast, key) is None) == (getattr(validated, key) is None)
        assert getattr(fast, key) is None or isinstance(getattr(fast, key), Link)
        if getattr(fast, key) is not None:
            assert getattr(fast, key).model_fields_set == getattr(validated, key).model_fields_set
    assert fast.efficiency.model_fields_set == validated.efficiency.model_fields_set


def test_hardware_by_name_is_the_validated_card_and_a_users_card_is_validated(tmp_path):
    from kvplan.cards.loader import load_hardware
    from kvplan.cards.schema import HardwareCard

    path = shipped_dir("hardware") / "h100-sxm.yaml"
    assert load_hardware("h100-sxm") == parse_card(path, HardwareCard)
    user = tmp_path / "cards"
    user.mkdir()
    (user / "h100-sxm.yaml").write_text(path.read_text().replace("hbm_capacity_bytes: 85520809984",
                                                                  "hbm_capacity_bytes: -1"))
    assert "hbm_capacity_bytes: -1" in (user / "h100-sxm.yaml").read_text()
    with pytest.raises(CardError) as err:
        load_hardware("h100-sxm", (user,))
    assert "hbm_capacity_bytes" in err.value.message


def test_an_odd_shipped_hardware_shape_is_left_to_the_validators(tmp_path):
    from kvplan.cards.loader import _shipped_hardware
    from kvplan.cards.schema import HardwareCard

    odd = tmp_path / "odd.yaml"
    shutil.copy(shipped_dir("hardware") / "h100-sxm.yaml", odd)
    odd.write_text(odd.read_text() + "\nnic: 3\n")
    assert _shipped_hardware(odd) is None
    with pytest.raises(CardError):
        parse_card(odd, HardwareCard)
