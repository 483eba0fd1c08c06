"""The one default for EPLB replicas: the fewest that let EP divide the routed experts."""

from kvplan.cards.loader import load_model
from kvplan.plans.deployment import fewest_redundant_experts


def test_fewest_redundant_experts_by_hand():
    v3 = load_model("deepseek-v3")  # 256 routed experts
    assert fewest_redundant_experts(v3, 8) == 0        # 256 / 8 = 32
    assert fewest_redundant_experts(v3, 144) == 32     # DeepSeek's decode unit: (256 + 32) / 144 = 2
    assert fewest_redundant_experts(v3, 72) == 32      # 288 / 72 = 4
    assert fewest_redundant_experts(v3, 96) == 32      # 288 / 96 = 3
    assert fewest_redundant_experts(load_model("llama-3.1-8b"), 8) == 0   # dense: no experts
