"""Each layer group's GEMMs per GPU (kvplan.calc.shapes): shapes worked by hand from the cards' config.json figures."""

from __future__ import annotations

from kvplan.calc.cost import model_cost
from kvplan.calc.shapes import model_shapes
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile


def shapes_of(name):
    card = load_model(name)
    return model_shapes(card, model_cost(card, get_profile("vllm")))


def nk(gemms):
    return {label: (n, k) for label, n, k, _ in gemms}


def test_qwen3_235b_tp8_replicates_its_four_kv_heads():
    """64 query heads, 4 KV heads of 128, hidden 4096. TP8: 64/8 = 8 query heads (1024) and max(4/8, 1) = 1 KV head
    replicated per GPU for K and V (2 × 128): QKV n = 1024 + 256 = 1280, k = 4096; O n = 4096, k = 64 × 128 / 8 = 1024.
    TP1: QKV n = 64 × 128 + 4 × 256 = 9216. Its MLPs are routed experts only: the always-read remainder (routers,
    94 × 128 × 4096) keeps one representative shape."""
    s = shapes_of("qwen3-235b-a22b")
    assert nk(s.gemm_list("attention", 8)) == {"QKV": (1280.0, 4096.0), "O": (4096.0, 1024.0)}
    assert nk(s.gemm_list("attention", 1))["QKV"] == (9216.0, 4096.0)
    assert [g[0] for g in s.gemm_list("mlp", 8)] == ["representative"]


def test_llama_3_1_8b_tp1_gate_up_and_weights():
    """hidden 4096, intermediate 14336, 32 layers: gate_up n = 2 × 14336 = 28672, k = 4096; down 4096 × 14336.
    Weights = layers × n × k: gate_up 32 × 28672 × 4096 = 3,758,096,384 (twice down's), i.e. the parameters."""
    s = shapes_of("llama-3.1-8b")
    mlp = {g[0]: g for g in s.gemm_list("mlp", 1)}
    assert mlp["gate_up"][1:] == (28672.0, 4096.0, 3_758_096_384.0)
    assert mlp["down"][1:] == (4096.0, 14336.0, 1_879_048_192.0)
    assert nk(s.gemm_list("mlp", 8)) == {"gate_up": (3584.0, 4096.0), "down": (4096.0, 1792.0)}
    assert nk(s.gemm_list("attention", 1)) == {"QKV": (6144.0, 4096.0), "O": (4096.0, 4096.0)}
    # the group's weights add up to its parameters (no KV replication at TP1)
    assert sum(g[3] for g in s.gemm_list("attention", 1)) == s.attention_params


def test_non_gated_mlps_read_their_single_up_projection():
    """OPT-13B (fc1 / fc2, no gate: the card's parameter count gives 2 × 5120 × 20480 per layer): up n = 20480."""
    s = shapes_of("opt-13b")
    assert nk(s.gemm_list("mlp", 1)) == {"up": (20480.0, 5120.0), "down": (5120.0, 20480.0)}
    assert nk(shapes_of("falcon-7b").gemm_list("attention", 1))["QKV"] == ((71 + 2) * 64.0, 4544.0)   # MQA


def test_mla_attention_keeps_one_shape_and_its_mlps_are_split():
    """DeepSeek-V3: MLA projections are not split here (one representative shape); 3 dense layers at 18432
    (gate_up n = 36864 at TP1) and one shared expert of 2048 per MoE layer (shared gate_up n = 4096)."""
    s = shapes_of("deepseek-v3")
    assert [g[0] for g in s.gemm_list("attention", 8)] == ["representative"]
    mlp = nk(s.gemm_list("mlp", 1))
    assert mlp["gate_up"] == (36864.0, 7168.0) and mlp["shared gate_up"] == (4096.0, 7168.0)
    assert mlp["shared down"] == (7168.0, 2048.0)


def test_moe_routers_are_replicated_at_n_num_experts():
    """The router (gate) of every MoE layer is replicated on each TP rank (SGLang qwen3_moe.py ReplicatedLinear,
    vLLM gpt_oss.py torch.nn.Linear; kvplan.calc.shapes.ROUTER_SOURCE): Qwen3-235B-A22B, 128 experts, hidden 4096,
    94 MoE layers, so n = 128, k = 4096 at TP 1 and TP 8 alike (not 128 / 8 = 16), 94 × 128 × 4096 = 49,283,072
    parameters. DeepSeek-V3: 256 experts, hidden 7168, 58 MoE layers, 58 × 256 × 7168 = 106,430,464, inside its MLP
    group (MLA's attention takes the remainder after the dense MLPs, shared experts and routers). A dense model has
    none."""
    s = shapes_of("qwen3-235b-a22b")
    for tp in (1, 8):
        assert s.gemm_list("router", tp) == (("router", 128.0, 4096.0, 49_283_072.0),)
    assert s.replicated_params == 49_283_072
    d = shapes_of("deepseek-v3")
    assert nk(d.gemm_list("router", 8)) == {"router": (256.0, 7168.0)}
    assert d.replicated_params == 106_430_464
    dense_and_shared = 3 * 3 * 7168 * 18432 + 58 * 44_040_192
    assert d.mlp_params == dense_and_shared + 106_430_464
    assert shapes_of("llama-3.1-8b").gemm_list("router", 8) == ()
