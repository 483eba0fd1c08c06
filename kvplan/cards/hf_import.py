"""Turn a Hugging Face ``config.json`` into a model card.

Field rules follow the engines (vLLM ``model_arch_config_convertor.py``):

- head size: ``head_dim`` if present, else ``hidden_size // num_attention_heads``;
- KV heads: ``num_key_value_heads``, ``num_kv_heads``, ``n_head_kv``, ``multi_query_group_num``,
  ``num_attention_groups``, else the attention heads; an old Falcon ``multi_query`` config
  without ``new_decoder_architecture`` has one KV head;
- layer kinds: ``layer_types`` when present; Gemma-2 alternates sliding/global (even layers
  slide); Gemma-3 ``sliding_window_pattern`` N makes every N-th layer global; a
  ``sliding_window`` with no pattern slides on every layer unless ``use_sliding_window`` is
  false; ``kv_lora_rank`` means MLA; Qwen3-Next mixes Gated DeltaNet and full attention
  every ``full_attention_interval`` layers.

``params_total`` is derived by closed form from the config (embeddings, attention, MLP or
experts, norms) and marked as derived; a shipped card states a published cross-check.
"""

from __future__ import annotations

import reprlib
from pathlib import Path

from pydantic import ValidationError

from kvplan.cards.files import describe_validation_error, read_json
from kvplan.cards.schema import ModelCard
from kvplan.errors import CardError, InputError

# transformers config classes whose tie_word_embeddings defaults to True when the key is absent
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text", "falcon", "opt", "RefinedWeb", "RefinedWebModel"}
# layer_types entries of transformers' configs (configuration_utils.ALLOWED_LAYER_TYPES) that map to a
# kvplan layer kind; "attention" is the attention layer of hybrid configs (granitemoehybrid). Any other
# entry (conv, mamba, hybrid, moe, ...) is refused rather than sized as full attention.
_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "sliding",
                "linear_attention": "linear", "attention": "full"}
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


def _first(cfg: dict, *keys, default=None):
    for key in keys:
        if cfg.get(key) is not None:
            if isinstance(cfg[key], bool):  # true/false where a count or size belongs (bool is an int in Python)
                raise InputError(f"config.json: {key} is {str(cfg[key]).lower()}, not a number",
                                 f"{key} must be a whole number")
            return cfg[key]
    return default


def _layer_kinds(cfg: dict, n_layers: int) -> list[str]:
    """'full', 'sliding' or 'linear' for every layer, per the rules in the module docstring."""
    model_type = cfg.get("model_type", "")
    if isinstance(cfg.get("layer_types"), list) and len(cfg["layer_types"]) == n_layers:
        unknown = sorted({reprlib.repr(t) for t in cfg["layer_types"] if not isinstance(t, str) or t not in _LAYER_TYPES})
        if unknown:
            raise InputError(
                f"config.json: layer_types holds {', '.join(unknown[:5])}, which kvplan cannot size",
                f"known layer_types: {', '.join(_LAYER_TYPES)}; write the card by hand for other layers "
                "(an 'ssm' layer group for Mamba-style state)")
        return [_LAYER_TYPES[t] for t in cfg["layer_types"]]
    if model_type == "qwen3_next":
        interval = cfg.get("full_attention_interval", 4)
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(n_layers)]
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return ["full"] * n_layers
    if model_type.startswith("gemma2"):
        return ["sliding" if i % 2 == 0 else "full" for i in range(n_layers)]
    pattern = cfg.get("sliding_window_pattern")
    if model_type.startswith("gemma3") and pattern:
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(n_layers)]
    return ["sliding"] * n_layers


def _groups(cfg: dict, n_layers: int, heads: int, kv_heads: int, head_dim: int) -> list[dict]:
    if cfg.get("kv_lora_rank"):
        return [{
            "kind": "mla", "count": n_layers, "num_heads": heads,
            "kv_lora_rank": cfg["kv_lora_rank"], "qk_rope_head_dim": cfg["qk_rope_head_dim"],
            "qk_nope_head_dim": cfg["qk_nope_head_dim"], "v_head_dim": cfg["v_head_dim"],
        }]
    kinds = _layer_kinds(cfg, n_layers)
    groups = []
    for kind in ("sliding", "full", "linear"):
        count = kinds.count(kind)
        if not count:
            continue
        if kind == "linear":
            key_dim = cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
            value_dim = cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
            groups.append({
                "kind": "linear", "count": count,
                "conv_state_elements": (2 * key_dim + value_dim) * (cfg["linear_conv_kernel_dim"] - 1),
                "conv_kernel": cfg["linear_conv_kernel_dim"],
                "recurrent_state_elements": cfg["linear_num_value_heads"] * cfg["linear_key_head_dim"]
                * cfg["linear_value_head_dim"],
            })
            continue
        group = {"kind": kind, "count": count, "num_kv_heads": kv_heads, "head_dim": head_dim}
        if kind == "sliding":
            group["window"] = cfg["sliding_window"]
        groups.append(group)
    return groups


def _moe(cfg: dict, n_layers: int, hidden: int) -> dict | None:
    experts = _first(cfg, "n_routed_experts", "num_local_experts", "num_experts")
    if not experts or experts <= 1:
        return None
    inter = _first(cfg, "moe_intermediate_size", "intermediate_size")
    dense_first = cfg.get("first_k_dense_replace", 0) or 0
    sparse_step = cfg.get("decoder_sparse_step", 1) or 1
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    moe_layers = sum(
        1 for i in range(n_layers)
        if i >= dense_first and i not in mlp_only and (i + 1) % sparse_step == 0
    )
    shared = cfg.get("n_shared_experts") or (1 if cfg.get("shared_expert_intermediate_size") else 0)
    return {
        "num_experts": experts,
        "experts_per_token": _first(cfg, "num_experts_per_tok", "experts_per_token", "num_experts_per_token"),
        "num_moe_layers": moe_layers, "expert_params": 3 * hidden * inter, "num_shared_experts": shared,
    }


def _params(cfg: dict, card: dict) -> int:
    """Closed-form parameter count: embeddings + attention + MLP/experts + norms (derived)."""
    hidden, vocab = card["hidden_size"], card["vocab_size"]
    heads = card["num_attention_heads"]
    total = vocab * hidden * (1 if card["tie_word_embeddings"] else 2) + hidden
    gated = cfg.get("model_type") not in ("opt", "falcon", "gpt2", "gpt_neox")
    inter = card.get("intermediate_size") or 4 * hidden
    moe = card.get("moe")
    n_layers = sum(g["count"] for g in card["layer_groups"])
    for g in card["layer_groups"]:
        if g["kind"] == "mla":
            q_rank = cfg.get("q_lora_rank")
            qk = g["qk_nope_head_dim"] + g["qk_rope_head_dim"]
            q = hidden * q_rank + q_rank * heads * qk + q_rank if q_rank else hidden * heads * qk
            kv = hidden * (g["kv_lora_rank"] + g["qk_rope_head_dim"]) + g["kv_lora_rank"]
            kv += g["kv_lora_rank"] * heads * (g["qk_nope_head_dim"] + g["v_head_dim"])
            attn = q + kv + heads * g["v_head_dim"] * hidden
        elif g["kind"] == "linear":
            key_dim = cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
            value_dim = cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
            attn = hidden * (2 * key_dim + 2 * value_dim + 2 * cfg["linear_num_value_heads"])
            attn += (2 * key_dim + value_dim) * cfg["linear_conv_kernel_dim"] + value_dim * hidden
        else:
            d, kvh = g["head_dim"], g["num_kv_heads"]
            attn = hidden * d * (heads + 2 * kvh) + heads * d * hidden
        total += g["count"] * (attn + 2 * hidden)
    mlp_dense = (3 if gated else 2) * hidden * inter
    if moe:
        shared_inter = cfg.get("shared_expert_intermediate_size") or cfg.get("moe_intermediate_size") or inter
        per_moe = moe["num_experts"] * moe["expert_params"] + hidden * moe["num_experts"]
        per_moe += moe["num_shared_experts"] * 3 * hidden * shared_inter
        total += moe["num_moe_layers"] * per_moe + (n_layers - moe["num_moe_layers"]) * mlp_dense
    else:
        total += n_layers * mlp_dense
    return int(total)


def quantized_weights(cfg: dict) -> tuple[str | None, str | None]:
    """The weights dtype a ``quantization_config`` declares, and how it was read (None, None: none).

    quant_method (transformers' ``QuantizationMethod``, vLLM's quantization names):
    fp8 / fbgemm_fp8 → fp8; mxfp4 → mxfp4; awq, gptq, bitsandbytes → int``bits``
    (``bits`` or ``load_in_4bit``/``load_in_8bit``); modelopt ``quant_algo`` FP8 → fp8, NVFP4 → fp4;
    compressed-tensors: the ``weights`` of its config groups (``num_bits`` 8/4, ``type`` float/int).
    An unknown method gives (None, why) and the checkpoint's dtype is used.
    """
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None, None
    method = str(q.get("quant_method", "")).lower().replace("_", "-")
    if method in ("fp8", "fbgemm-fp8", "ptpc-fp8"):
        return "fp8", f"quantization_config quant_method {method}"
    if method == "mxfp4":
        return "mxfp4", "quantization_config quant_method mxfp4"
    if method in ("awq", "gptq", "bitsandbytes", "auto-round", "hqq"):
        bits = q.get("bits") or q.get("w_bit") or q.get("nbits")
        if q.get("load_in_4bit"):
            bits = 4
        elif q.get("load_in_8bit"):
            bits = 8
        if bits in (4, 8):
            return f"int{bits}", f"quantization_config quant_method {method}, {bits}-bit"
        return None, f"quantization_config quant_method {method} with bits {bits!r}: kvplan sizes int4 and int8"
    if method == "modelopt":
        algo = str(q.get("quant_algo") or q.get("quantization", {}).get("quant_algo", "")).upper()
        mapped = {"FP8": "fp8", "NVFP4": "fp4", "W4A8_AWQ": "int4", "W4A16_AWQ": "int4"}.get(algo)
        return mapped, f"quantization_config modelopt quant_algo {algo}" if mapped else f"modelopt {algo} unknown"
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        weights = [g.get("weights") for g in groups.values() if isinstance(g, dict) and isinstance(g.get("weights"), dict)]
        kinds = {(w.get("num_bits"), str(w.get("type", "int")).lower()) for w in weights}
        table = {(8, "float"): "fp8", (8, "int"): "int8", (4, "int"): "int4", (4, "float"): "fp4"}
        if len(kinds) == 1 and next(iter(kinds)) in table:
            bits, kind = next(iter(kinds))
            return table[(bits, kind)], f"quantization_config compressed-tensors weights {bits}-bit {kind}"
        return None, f"quantization_config compressed-tensors with weights {sorted(kinds)}: not one kvplan sizes"
    return None, f"quantization_config quant_method {method or '(none)'}: not known to kvplan"


def card_dict_from_config(cfg: dict, name: str, source: str) -> dict:
    """The card fields for one config (``text_config`` of multimodal configs is merged in)."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
    heads = _first(cfg, "num_attention_heads", "n_head", "num_heads")
    n_layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
    vocab = cfg.get("vocab_size")
    missing = [k for k, v in {"hidden_size": hidden, "num_attention_heads": heads,
                              "num_hidden_layers": n_layers, "vocab_size": vocab}.items() if not v]
    if missing:
        raise CardError(f"{source}: config has no {', '.join(missing)}",
                        "is this a Hugging Face decoder config.json?")
    kv_heads = _first(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                      "num_attention_groups")
    if cfg.get("multi_query") and not cfg.get("new_decoder_architecture"):
        # an old Falcon multi-query config has one KV head, whatever num_kv_heads says
        # (transformers' FalconConfig writes num_kv_heads = num_attention_heads beside multi_query)
        kv_heads = 1
    elif kv_heads is None:
        kv_heads = heads
    head_dim = cfg.get("head_dim") or hidden // heads
    card = {
        "name": name, "family": cfg.get("model_type", "unknown"),
        "source": [source],
        "notes": "imported from config.json by kvplan; params_total derived by closed form",
        "params_total": 1, "hidden_size": hidden, "vocab_size": vocab, "num_attention_heads": heads,
        "intermediate_size": _first(cfg, "intermediate_size", "ffn_dim", "ffn_hidden_size"),
        "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", cfg.get("model_type") in _TIED_BY_DEFAULT)),
        "max_context": _first(cfg, "max_position_embeddings", "max_sequence_length", "seq_length", default=2048),
        "dtype": _DTYPES.get(str(_first(cfg, "torch_dtype", "dtype", default="bfloat16")), "bf16"),
        "layer_groups": _groups(cfg, n_layers, heads, kv_heads, head_dim),
    }
    weights, how = quantized_weights(cfg)
    if weights is not None:
        card["weights_dtype"] = weights
    if how is not None:
        card["notes"] += f"; weights {weights or card['dtype']} from {how}"
    moe = _moe(cfg, n_layers, hidden)
    if moe:
        card["moe"] = moe
    card["params_total"] = _params(cfg, card)
    if moe:
        idle = moe["num_moe_layers"] * (moe["num_experts"] - moe["experts_per_token"]) * moe["expert_params"]
        card["params_active"] = card["params_total"] - idle
    return card


def card_from_config_file(path: Path, name: str | None = None) -> ModelCard:
    """Import ``path`` (a config.json) as a validated model card."""
    cfg = read_json(path)
    stem = path.parent.name if path.name == "config.json" else path.stem
    card_name = name or "".join(c if c.isalnum() or c in ".-" else "-" for c in stem.lower()).strip("-.") or "imported"
    try:
        data = card_dict_from_config(cfg, card_name, str(path))
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        raise CardError(f"{path}: config is missing or has a bad field {exc}",
                        "kvplan imports decoder configs of Llama, Qwen, Mistral, Mixtral, DeepSeek, "
                        "Gemma, gpt-oss, Falcon, Phi-3, OPT, GLM and Qwen3-Next") from None
    try:
        card = ModelCard.model_validate(data)
    except ValidationError as exc:
        raise CardError(*describe_validation_error(str(path), exc)) from None
    weights, how = quantized_weights(cfg)
    if how is not None:
        card._resolution = (f"{path}: weights sized as {weights} ({how})" if weights else
                            f"{path}: {how}; weights sized as the checkpoint's {card.dtype} (pass --weights-dtype)")
    return card
