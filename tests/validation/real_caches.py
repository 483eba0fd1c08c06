"""What a Hugging Face transformers cache really holds, against kvplan's ``hf`` profile.

For each architecture a released ``config.json`` (``tests/data/hf_configs``) is shrunk (fewer
layers, narrower widths, a small vocabulary) while its attention layout is kept: the KV-head
ratio, MQA, sliding windows and their patterns, MLA ranks, linear-attention layers. A model of
random bf16 weights is built from it locally (nothing is downloaded), one forward pass over N
random tokens runs with ``use_cache=True``, and the cache object it returns is measured:

    measured bytes = Σ .nbytes of every key, value and state tensor in ``cache.layers``

(a sliding layer's ``keys`` is a view; ``.nbytes`` counts the tokens it exposes). The same
config, written to a temporary ``config.json``, goes through ``card_from_config_file`` and

    predicted bytes = kv_layout(card, get_profile("hf"), "auto").sequence_bytes(N) × batch

Two importer inputs are checked: the shrunk release file ("hub") and the file transformers
itself writes for the model it built ("saved", ``config.save_pretrained``).

Scalar bookkeeping tensors (``DynamicSlidingWindowLayer._sliding_window_tensor``, 8 B) are
reported apart, and so is the storage behind the views (``untyped_storage().nbytes()``,
counted once per storage), which is what the allocator really keeps.

torch and transformers are imported inside functions: importing this module needs neither.
"""

from __future__ import annotations

import copy
import inspect
import json
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kvplan.calc.kv import kv_layout
from kvplan.cards.hf_import import card_from_config_file
from kvplan.engines import get_profile

HF_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
THREADS = 2
SEED = 0
KV_ATTRIBUTES = ("keys", "values")
STATE_ATTRIBUTES = ("conv_states", "recurrent_states")


@dataclass(frozen=True)
class Architecture:
    """One attention layout to check: a released config, shrunk, and the lengths to run."""

    key: str
    layout: str                     # what the layout exercises
    base: str | None                # tests/data/hf_configs/<base>.json; None: written here in full
    changes: dict = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    seq_lens: tuple[int, ...] = (1, 16, 33)
    source: str = ""


_TOKENS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "vocab_size": 256,
           "torch_dtype": "bfloat16"}

ARCHITECTURES: dict[str, Architecture] = {a.key: a for a in (
    Architecture(
        "llama-3.1-8b", "GQA 4:1 (32 query : 8 KV heads kept as 8 : 2)", "llama-3.1-8b",
        {"hidden_size": 128, "intermediate_size": 128, "num_attention_heads": 8, "num_key_value_heads": 2,
         "num_hidden_layers": 2, **_TOKENS},
        source="https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
    ),
    Architecture(
        "qwen3-32b", "GQA with head_dim 128 ≠ hidden/heads 80 (kept as 16 ≠ 64/8)", "qwen3-32b",
        {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 8, "num_key_value_heads": 2,
         "head_dim": 16, "num_hidden_layers": 2, "max_window_layers": 2, **_TOKENS},
        source="https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json",
    ),
    Architecture(
        "falcon-7b", "MQA: multi_query, one KV head, no new_decoder_architecture", "falcon-7b",
        # transformers 5.x no longer maps the legacy n_head / n_layer keys: the in-library names
        # (as in tiiuae/falcon-7b's current config.json) are used, with the same values' roles.
        {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
         "new_decoder_architecture": False, **_TOKENS},
        drop=("n_head", "n_layer", "_name_or_path"),
        source="https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json",
    ),
    Architecture(
        "falcon-40b", "GQA through new_decoder_architecture and num_kv_heads", "falcon-40b",
        {"hidden_size": 128, "num_attention_heads": 8, "num_kv_heads": 2, "num_hidden_layers": 2, **_TOKENS},
        drop=("auto_map",),
        source="https://huggingface.co/tiiuae/falcon-40b/blob/main/config.json",
    ),
    Architecture(
        "mistral-7b-v0.1", "sliding window on every layer (W 4096 kept as 8)", "mistral-7b-v0.1",
        {"hidden_size": 128, "intermediate_size": 128, "num_attention_heads": 8, "num_key_value_heads": 2,
         "num_hidden_layers": 2, "sliding_window": 8, **_TOKENS},
        drop=("auto_map",), seq_lens=(5, 7, 8, 9, 24),
        source="https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
    ),
    Architecture(
        "gemma-2-9b", "alternating local/global, even layers slide (W 4096 kept as 8), head_dim ≠ hidden/heads",
        "gemma-2-9b",
        {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 32, "query_pre_attn_scalar": 32, "num_hidden_layers": 4, "sliding_window": 8,
         "sliding_window_size": 8, **_TOKENS},
        seq_lens=(5, 7, 8, 9, 24),
        source="https://huggingface.co/google/gemma-2-9b/blob/main/config.json (torch_dtype float32 there; bf16 here)",
    ),
    Architecture(
        "gemma-3", "5 local : 1 global (sliding_window_pattern 6; W 1024 kept as 8), 7 layers", None,
        {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 64,
         "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
         "query_pre_attn_scalar": 32, "num_hidden_layers": 7, "sliding_window": 8, "sliding_window_pattern": 6,
         "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0, "max_position_embeddings": 131_072,
         "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, **_TOKENS},
        seq_lens=(5, 7, 8, 9, 24),
        source="text_config of https://huggingface.co/google/gemma-3-27b-it/blob/main/config.json "
               "(sliding_window_pattern 6, sliding_window 1024) and transformers Gemma3TextConfig",
    ),
    Architecture(
        "deepseek-v3", "MLA (kv_lora_rank 512 + rope 64 kept as 32 + 8), 128 heads kept as 4", "deepseek-v3",
        {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
         "num_key_value_heads": 4, "num_hidden_layers": 3, "first_k_dense_replace": 1, "n_routed_experts": 8,
         "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "kv_lora_rank": 32, "q_lora_rank": 48,
         "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 12, **_TOKENS},
        drop=("auto_map", "quantization_config"),
        source="https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
    ),
    Architecture(
        "gpt-oss-20b", "sliding/full alternate from layer 0, W 128 kept, attention sinks", "gpt-oss-20b",
        {"hidden_size": 64, "intermediate_size": 64, "head_dim": 16, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
         "experts_per_token": 2, **_TOKENS},
        drop=("quantization_config",), seq_lens=(100, 127, 128, 129, 160),
        source="https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json (layer_types cut to 4)",
    ),
    Architecture(
        "qwen3-next-80b-a3b", "Gated DeltaNet (conv + recurrent state) with full attention every 4th layer",
        "qwen3-next-80b-a3b",
        {"hidden_size": 64, "intermediate_size": 128, "head_dim": 16, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
         "linear_num_key_heads": 2, "linear_num_value_heads": 4, "num_experts": 4, "num_experts_per_tok": 2,
         "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, **_TOKENS},
        seq_lens=(1, 16, 33),
        source="https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json",
    ),
)}


# Why the measured cache differs from kvplan's hf profile where it does (transformers 5.24.0 line numbers).
KNOWN_CAUSES: dict[str, str] = {
    "falcon-7b": (
        "saved config only: FalconConfig.__post_init__ (configuration_falcon.py:94) writes num_kv_heads = "
        "num_attention_heads next to multi_query: true, while FalconAttention (modeling_falcon.py:241) keeps "
        "1 KV head unless new_decoder_architecture or not multi_query; kvplan's importer reads num_kv_heads "
        "before applying the multi_query rule"),
    "falcon-40b": (
        "new_decoder_architecture: FalconAttention._split_heads broadcasts K/V to every query head "
        "(modeling_falcon.py:260) and forward reshapes them to num_heads (:313) before layer_past.update "
        "(:328), so the cache holds num_attention_heads heads; kvplan counts num_kv_heads"),
    "deepseek-v3": (
        "transformers 5.x caches the MLA latent: DeepseekV3Attention.forward calls cache.update(kv_nope, k_rot) "
        "(modeling_deepseek_v3.py:460) with K [B, 1, S, kv_lora_rank] and V [B, 1, S, qk_rope_head_dim] and "
        "expands them after the read (expand_kv, :407); kvplan's hf profile predicts the decompressed "
        "heads × (nope + rope + v) of transformers 4.x"),
    "qwen3-next-80b-a3b": (
        "LinearAttentionLayer keeps a conv state of the whole linear_conv_kernel_dim (cache_utils.py:1223-1226; "
        "update_conv_state at modeling_qwen3_next.py:697), not kernel − 1, and the recurrent state in fp32 "
        "(torch_chunk_gated_delta_rule casts to fp32 at :414, stored at :758 / cache_utils.py:1238); kvplan's hf "
        "profile counts (kernel − 1) × conv_dim and a model-dtype recurrent state"),
}


def shrunk_config(key: str) -> dict:
    """The architecture's config.json with its sizes reduced and its attention layout kept."""
    arch = ARCHITECTURES[key]
    cfg = json.loads((HF_CONFIGS / f"{arch.base}.json").read_text()) if arch.base else {}
    cfg = {k: v for k, v in cfg.items() if k not in arch.drop}
    cfg.update(copy.deepcopy(arch.changes))
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = cfg["layer_types"][: cfg["num_hidden_layers"]]
    return cfg


@dataclass(frozen=True)
class TensorRecord:
    layer: int
    cache_class: str
    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class Measurement:
    """Bytes a returned cache holds: KV + state tensors, bookkeeping scalars, and backing storage."""

    cache_class: str
    kv_state_bytes: int
    bookkeeping_bytes: int
    storage_bytes: int
    tensors: tuple[TensorRecord, ...]

    def layer_summary(self) -> str:
        """``3×DynamicSlidingWindowLayer K/V [1, 2, 7, 16] bf16`` style, one entry per distinct layer."""
        seen: dict[str, int] = {}
        for t in self.tensors:
            if t.name.startswith(("keys", "conv_states")):
                peers = [u for u in self.tensors if u.layer == t.layer and u is not t]
                text = f"{t.cache_class} {t.name.split('[')[0]} {list(t.shape)} {t.dtype}"
                text += "".join(f" + {u.name.split('[')[0]} {list(u.shape)} {u.dtype}" for u in peers)
                seen[text] = seen.get(text, 0) + 1
        return "; ".join(f"{n}× {text}" for text, n in seen.items())


def _torch():
    import torch

    torch.set_num_threads(THREADS)
    return torch


def _dtype_name(dtype) -> str:
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}.get(str(dtype), str(dtype))


@lru_cache(maxsize=None)
def build_model(key: str):
    """Random-weight bf16 model of the shrunk config (``torch.manual_seed``), in eval mode."""
    torch = _torch()
    from transformers import AutoConfig, AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(shrunk_config(key)))
        config = AutoConfig.from_pretrained(tmp)
    torch.manual_seed(SEED)
    return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()


def _returned_cache(output):
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def run_prefill(key: str, seq_len: int, batch: int = 1):
    """One forward pass over ``batch × seq_len`` random tokens; the cache it returns."""
    torch = _torch()
    model = build_model(key)
    generator = torch.Generator().manual_seed(SEED + seq_len)
    ids = torch.randint(3, model.config.vocab_size, (batch, seq_len), generator=generator)
    with torch.no_grad():
        return _returned_cache(model(input_ids=ids, use_cache=True)), model


def run_decode_step(key: str, cache, model, batch: int = 1):
    """One more token through ``cache`` (the first decode step); the cache afterwards."""
    torch = _torch()
    ids = torch.full((batch, 1), 3, dtype=torch.long)
    # transformers 5.x renamed the argument (past_key_values → cache); older releases only know the first
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        return _returned_cache(model(input_ids=ids, use_cache=True, **{name: cache}))


def measure_cache(cache) -> Measurement:
    """Walk ``cache.layers`` and sum what every tensor attribute holds (dict-held states included)."""
    torch = _torch()
    records, bookkeeping, storages = [], 0, {}
    for index, layer in enumerate(cache.layers):
        for name, value in vars(layer).items():
            items = value.items() if isinstance(value, dict) else [(None, value)]
            for sub, tensor in items:
                if not isinstance(tensor, torch.Tensor):
                    continue
                label = name if sub is None else f"{name}[{sub}]"
                if name in KV_ATTRIBUTES or name in STATE_ATTRIBUTES:
                    records.append(TensorRecord(index, type(layer).__name__, label, tuple(tensor.shape),
                                                _dtype_name(tensor.dtype), tensor.nbytes))
                    storage = tensor.untyped_storage()
                    storages[storage.data_ptr()] = storage.nbytes()
                else:
                    bookkeeping += tensor.nbytes
    return Measurement(type(cache).__name__, sum(r.nbytes for r in records), bookkeeping,
                       sum(storages.values()), tuple(records))


@lru_cache(maxsize=None)
def measure(key: str, seq_len: int, batch: int = 1) -> Measurement:
    """Bytes the cache holds after a prefill of ``seq_len`` tokens."""
    cache, _ = run_prefill(key, seq_len, batch)
    return measure_cache(cache)


@lru_cache(maxsize=None)
def imported_card(key: str, variant: str = "hub"):
    """The kvplan card of the shrunk config: the file as released ("hub") or as transformers saves it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{key}.json"
        if variant == "hub":
            path.write_text(json.dumps(shrunk_config(key)))
        elif variant == "saved":
            build_model(key).config.save_pretrained(tmp)
            path = Path(tmp) / "config.json"
        else:
            raise ValueError(f"variant must be 'hub' or 'saved' (got {variant!r})")
        return card_from_config_file(path, name=key)


def predict(key: str, seq_len: int, batch: int = 1, variant: str = "hub") -> int:
    """kvplan's bytes for one ``hf`` sequence of ``seq_len`` tokens, times ``batch``."""
    layout = kv_layout(imported_card(key, variant), get_profile("hf"), "auto")
    return int(layout.sequence_bytes(seq_len)) * batch


@dataclass(frozen=True)
class CrossCheck:
    key: str
    layout: str
    seq_len: int
    batch: int
    measured_bytes: int
    predicted_hub_bytes: int
    predicted_saved_bytes: int
    cache_summary: str

    @property
    def matches(self) -> bool:
        return self.measured_bytes == self.predicted_hub_bytes == self.predicted_saved_bytes


def cross_checks(keys: tuple[str, ...] | None = None) -> list[CrossCheck]:
    """Measured vs predicted for every architecture, every length at batch 1, the longest at batch 2."""
    rows = []
    for key in keys or tuple(ARCHITECTURES):
        arch = ARCHITECTURES[key]
        cases = [(n, 1) for n in arch.seq_lens] + [(max(arch.seq_lens), 2)]
        for seq_len, batch in cases:
            m = measure(key, seq_len, batch)
            rows.append(CrossCheck(key, arch.layout, seq_len, batch, m.kv_state_bytes,
                                   predict(key, seq_len, batch, "hub"), predict(key, seq_len, batch, "saved"),
                                   m.layer_summary()))
    return rows


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}
