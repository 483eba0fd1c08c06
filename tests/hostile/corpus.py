"""The hostile-input corpus: files and command lines that kvplan must refuse cleanly.

``build(root)`` writes every hostile file under ``root`` (generated: card mutations, YAML bombs,
broken traces and config.json files, …) and returns the cases: ``Case(id, args, outputs,
isolate)``. ``isolate`` cases can hang or allocate without bound if a check is missing; they run
in a child process with a timeout and a memory limit (harness.run_subprocess).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MODEL = yaml.safe_load((ROOT / "model_cards" / "llama-3.1-8b.yaml").read_text(encoding="utf-8"))
HARDWARE = yaml.safe_load((ROOT / "hardware_cards" / "h100-sxm.yaml").read_text(encoding="utf-8"))
PLAN = (ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml").read_text(encoding="utf-8")
GRID = (ROOT / "examples" / "grids" / "dense.yaml").read_text(encoding="utf-8")
CALIBRATION = ROOT / "tests" / "data" / "calibration" / "llama-3.1-8b-h100-sxm-synthetic.csv"
MOONCAKE_LINE = '{"timestamp": 0, "input_length": 1000, "output_length": 100, "hash_ids": [1, 2]}'
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
ROUTE_TRACE = ROOT / "tests" / "data" / "traces" / "mooncake_conversation_head200.jsonl"


@dataclass
class Case:
    id: str
    args: list
    outputs: list = field(default_factory=list)
    isolate: bool = False


def billion_laughs(levels: int = 9, fanout: int = 9, key: str = "lol") -> str:
    lines = [f"a0: &a0 [{', '.join(['lol'] * fanout)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]")
    lines.append(f"{key}: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def _card(path: Path, card: dict) -> Path:
    return _write(path, yaml.safe_dump(card, sort_keys=False))


def _model(**changes) -> dict:
    card = json.loads(json.dumps(MODEL))
    card.pop("field_sources", None)
    for key, value in changes.items():
        if key.startswith("group_"):
            card["layer_groups"][0][key.removeprefix("group_")] = value
        elif value is _DROP:
            card.pop(key, None)
        else:
            card[key] = value
    return card


def _hardware(**changes) -> dict:
    card = json.loads(json.dumps(HARDWARE))
    card.pop("field_sources", None)
    for key, value in changes.items():
        if key.startswith("flops_"):
            card["peak_flops_per_s"][key.removeprefix("flops_")] = value
        else:
            card[key] = value
    return card


_DROP = object()
INF, NAN = float("inf"), float("nan")


def _special_yaml(text: str) -> str:
    return text.replace("'.inf'", ".inf").replace("'.nan'", ".nan").replace("'-.inf'", "-.inf")


def build(root: Path) -> list[Case]:
    cases: list[Case] = []
    add = cases.append
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ model cards
    mutations = {
        "layers-zero": dict(group_count=0), "layers-negative": dict(group_count=-1),
        "layers-10e12": dict(group_count=10**12), "layers-text": dict(group_count="many"),
        "layers-null": dict(group_count=None), "kv-heads-zero": dict(group_num_kv_heads=0),
        "kv-heads-huge": dict(group_num_kv_heads=10**9), "head-dim-huge": dict(group_head_dim=10**9),
        "head-dim-float": dict(group_head_dim=127.5), "head-dim-inf": dict(group_head_dim=".inf"),
        "kind-unknown": dict(group_kind="quantum"), "kind-null": dict(group_kind=None),
        "window-negative": dict(group_window=-4096), "params-negative": dict(params_total=-1),
        "params-inf": dict(params_total=".inf"), "params-nan": dict(params_total=".nan"),
        "params-huge": dict(params_total=10**40), "hidden-zero": dict(hidden_size=0),
        "vocab-huge": dict(vocab_size=10**15), "context-zero": dict(max_context=0),
        "context-huge": dict(max_context=2**70), "context-text": dict(max_context="128k please"),
        "dtype-unknown": dict(dtype="fp7"), "heads-zero": dict(num_attention_heads=0),
        "name-newline": dict(name="bad\n::warning::x"), "name-long": dict(name="a" * 300),
        "name-upper": dict(name="BAD NAME"), "unknown-key": dict(flux_capacitor=1),
        "no-source": dict(source=_DROP), "no-groups": dict(layer_groups=[]),
        "groups-not-list": dict(layer_groups="full"), "aliases-not-list": dict(aliases=7),
        "source-empty": dict(source=[]), "intermediate-neg": dict(intermediate_size=-5),
        "layers-bool": dict(group_count=True), "heads-bool": dict(num_attention_heads=True),
        "params-bool": dict(params_total=False), "context-bool": dict(max_context=True),
    }
    for name, change in mutations.items():
        path = root / "cards" / f"model-{name}.yaml"
        _write(path, _special_yaml(yaml.safe_dump(_model(**change), sort_keys=False)))
        add(Case(f"model-card:{name}", ["size", path, "--seq", "8k"]))
    raw_cards = {
        "empty": "", "list": "- 1\n- 2\n", "scalar": "42\n", "bad-yaml": "name: [unclosed\n",
        "tabs": "name:\tx\n\t- y\n", "billion-laughs": billion_laughs(key="notes"),
        "deep-nesting": "name: x\nnotes: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "deep-block": "".join(" " * i + "- \n" for i in range(0, 4000, 2)),
        "recursive-alias": "name: &a [*a]\n", "huge": "name: x\nnotes: '" + "x" * (2 << 20) + "'\n",
        "binary": b"\x00\x01\x02\xff\xfe\x89PNG\r\n\x1a\n" * 100, "utf16": "name: llama\n".encode("utf-16"),
        "latin1": "name: caf\xe9\n".encode("latin-1"), "nul-in-text": "name: x\x00y\n",
        "model-type-null": "model_type: null\nsliding_window: 4096\n",
    }
    for name, text in raw_cards.items():
        path = _write(root / "cards" / f"raw-{name}.yaml", text)
        add(Case(f"raw-card:{name}", ["size", path], isolate=name in ("billion-laughs", "deep-nesting", "huge")))
        add(Case(f"raw-card-validate:{name}", ["cards", "validate", path],
                 isolate=name in ("billion-laughs", "deep-nesting", "huge")))
    # hardware cards
    hw_mutations = {
        "bandwidth-inf": dict(hbm_bandwidth_bytes_per_s=".inf"), "bandwidth-nan": dict(hbm_bandwidth_bytes_per_s=".nan"),
        "bandwidth-zero": dict(hbm_bandwidth_bytes_per_s=0), "bandwidth-negative": dict(hbm_bandwidth_bytes_per_s=-1),
        "capacity-zero": dict(hbm_capacity_bytes=0), "capacity-inf": dict(hbm_capacity_bytes=".inf"),
        "capacity-text": dict(hbm_capacity_bytes="80 gigs"), "capacity-bool": dict(hbm_capacity_bytes=True),
        "bandwidth-bool": dict(hbm_bandwidth_bytes_per_s=True), "flops-inf": dict(flops_bf16=".inf"),
        "flops-nan": dict(flops_bf16=".nan"), "flops-negative": dict(flops_bf16=-1.0),
        "unknown-key": dict(warp_drive=True), "name-newline": dict(name="h\n::error::x"),
        # finite but past float range once priced (numpy overflow warnings, infinite step times, NaN percentiles)
        "bandwidth-1e-300": dict(hbm_bandwidth_bytes_per_s=1e-300), "flops-1e-300": dict(flops_bf16=1e-300),
        "bandwidth-1e300": dict(hbm_bandwidth_bytes_per_s=1e300), "efficiency-1e-300": dict(efficiency={"flops": 1e-300}),
        "overhead-1e300": dict(efficiency={"step_overhead_s": 1e300}),
        "scale-up-1e-300": dict(scale_up={"name": "x", "bandwidth_bytes_per_s": 1e-300}),
        "scale-up-latency-1e300": dict(scale_up={"name": "x", "bandwidth_bytes_per_s": 4.5e11, "latency_s": 1e300}),
    }
    for name, change in hw_mutations.items():
        path = root / "cards" / f"hw-{name}.yaml"
        _write(path, _special_yaml(yaml.safe_dump(_hardware(**change), sort_keys=False)))
        add(Case(f"hardware-card:{name}", ["fit", "llama-3.1-8b", path, "--max-model-len", "8k"]))
        add(Case(f"hardware-card-latency:{name}", ["latency", "llama-3.1-8b", path]))
    for name in ("binary", "utf16", "billion-laughs", "empty"):
        add(Case(f"hardware-raw:{name}", ["fit", "llama-3.1-8b", root / "cards" / f"raw-{name}.yaml",
                                         "--max-model-len", "8k"], isolate=name == "billion-laughs"))

    # ------------------------------------------------------------------ special paths as inputs
    loop = root / "paths" / "loop.yaml"
    loop.parent.mkdir(parents=True, exist_ok=True)
    if not loop.is_symlink():
        loop.symlink_to(loop)
    loop_csv = root / "paths" / "loop.csv"
    if not loop_csv.is_symlink():
        loop_csv.symlink_to(loop_csv)
    fifo = root / "paths" / "fifo.yaml"
    if not fifo.exists():
        os.mkfifo(fifo)
    fifo_csv = root / "paths" / "fifo.csv"
    if not fifo_csv.exists():
        os.mkfifo(fifo_csv)
    directory = root / "paths" / "dir.yaml"
    directory.mkdir(exist_ok=True)
    sparse = root / "paths" / "sparse.csv"
    if not sparse.exists():
        with open(sparse, "wb") as handle:
            handle.truncate(5 << 30)  # a 5 GiB sparse file: refused by size, never read
    for label, path in (("symlink-loop", loop), ("fifo", fifo), ("directory", directory), ("dev-zero", "/dev/zero")):
        add(Case(f"path-card:{label}", ["size", path if str(path).endswith(".yaml") else f"{path}"], isolate=True))
        add(Case(f"path-plan:{label}", ["check", path], isolate=True))
        add(Case(f"path-grid:{label}", ["sweep", path, "-o", out / f"sweep-{label}.csv"],
                 outputs=[out / f"sweep-{label}.csv"], isolate=True))
    for label, path in (("symlink-loop", loop_csv), ("fifo", fifo_csv), ("dev-zero", "/dev/zero"),
                        ("dev-urandom", "/dev/urandom"), ("sparse-5GiB", sparse), ("directory", root / "paths")):
        add(Case(f"path-trace:{label}", ["workload", path, "--trace-format", "azure"], isolate=True))
        add(Case(f"path-trace-plan:{label}", ["plan", "llama-3.1-8b", "h100-sxm", "--trace", path,
                                              "--trace-format", "azure", "--ttft", "p99<=2s"], isolate=True))
        add(Case(f"path-calibration:{label}", ["calibrate", "llama-3.1-8b", "h100-sxm", path], isolate=True))
        add(Case(f"path-config:{label}", ["size", f"{path}"], isolate=True))

    # ------------------------------------------------------------------ config.json
    base_config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
                   "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
                   "torch_dtype": "bfloat16"}
    configs = {
        "nan": json.dumps(base_config)[:-1] + ', "rope_theta": NaN}',
        "infinity": json.dumps(base_config)[:-1] + ', "rope_theta": Infinity}',
        "1e999": json.dumps(base_config)[:-1] + ', "rope_theta": 1e999}',
        "5000-digit-int": json.dumps(base_config)[:-1] + ', "vocab_size": ' + "9" * 5000 + "}",
        "layers-10e12": json.dumps({**base_config, "num_hidden_layers": 10**12}),
        "heads-zero": json.dumps({**base_config, "num_attention_heads": 0}),
        "kv-heads-zero": json.dumps({**base_config, "num_key_value_heads": 0}),
        "hidden-negative": json.dumps({**base_config, "hidden_size": -4096}),
        "layers-float": json.dumps({**base_config, "num_hidden_layers": 31.5}),
        "layers-string": json.dumps({**base_config, "num_hidden_layers": "32"}),
        "layers-bool": json.dumps({**base_config, "num_hidden_layers": True}),
        "model-type-null-sliding": json.dumps({**base_config, "model_type": None, "sliding_window": 4096}),
        "model-type-number": json.dumps({**base_config, "model_type": 7}),
        "no-layers": json.dumps({k: v for k, v in base_config.items() if k != "num_hidden_layers"}),
        "context-huge": json.dumps({**base_config, "max_position_embeddings": 2**70}),
        "deep-nesting": '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "not-object": "[1, 2, 3]", "empty": "", "truncated": json.dumps(base_config)[:40],
        "binary": b"\x89PNG\r\n\x1a\n\x00\x00",
        "utf16": json.dumps(base_config).encode("utf-16"),
        "text-config-null": json.dumps({"model_type": "gemma3", "text_config": None}),
        "layer-types-mamba": json.dumps({**base_config, "layer_types": ["mamba"] * 32}),
        "layer-types-number": json.dumps({**base_config, "layer_types": [1] * 32}),
        "sliding-negative": json.dumps({**base_config, "sliding_window": -1, "model_type": "mistral"}),
    }
    for name, text in configs.items():
        path = _write(root / "configs" / name / "config.json", text)
        add(Case(f"config-json:{name}", ["size", path], isolate=name in ("layers-10e12", "deep-nesting")))
        add(Case(f"config-import:{name}", ["cards", "import", path, "-o", out / f"import-{name}.yaml"],
                 outputs=[out / f"import-{name}.yaml"], isolate=name in ("layers-10e12", "deep-nesting")))

    # ------------------------------------------------------------------ plan files
    head = PLAN[: PLAN.index("assertions:")]
    plans = {
        "typo-model": PLAN.replace("model: meta-llama/Llama-3.1-70B-Instruct", "model: llama-3.1-70bb"),
        "typo-hardware": PLAN.replace("hardware: h100-sxm", "hardware: h100-sxmm"),
        "typo-system": PLAN.replace("hardware: h100-sxm", "system: hgx-h100-8x"),
        "billion-laughs": billion_laughs(key="description") + head.split("\n", 3)[3] + "assertions: [kv_fits == true]\n",
        "deep-nesting": "model: x\ndescription: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "chain-100k": head + "assertions:\n  - " + json.dumps("kv_fits" + " + kv_fits" * 100_000 + " > 1") + "\n",
        "chain-compare-100k": head + "assertions:\n  - " + json.dumps(" < ".join(["1"] * 100_000)) + "\n",
        "parens-10k": head + "assertions:\n  - " + json.dumps("(" * 10_000 + "kv_fits" + ")" * 10_000) + "\n",
        "int-literal-5000": head + "assertions:\n  - " + json.dumps("gpus_per_instance <= " + "9" * 5000) + "\n",
        "power": head + "assertions:\n  - " + json.dumps("gpus_per_instance <= 10 ** 10 ** 10") + "\n",
        "float-1e999": head + "assertions:\n  - " + json.dumps("gpus_per_instance <= 1e999") + "\n",
        "import": head + "assertions:\n  - " + json.dumps("__import__('os').system('true')") + "\n",
        "attribute": head + "assertions:\n  - " + json.dumps("kv_fits.__class__ == 1") + "\n",
        "lambda": head + "assertions:\n  - " + json.dumps("(lambda: 1)() == 1") + "\n",
        "newline": head + "assertions:\n  - " + json.dumps("kv_fits == true\n::warning::x") + "\n",
        "unknown-metric": head + "assertions:\n  - nope > 1\n",
        "unit-unknown": head + "assertions:\n  - ttft_s <= 2parsecs\n",
        "empty-assertion": head + "assertions:\n  - ''\n",
        "assertion-number": head + "assertions:\n  - 7\n",
        "not-mapping": "- a\n- b\n", "empty": "", "binary": b"\x00\xff" * 50, "utf16": PLAN.encode("utf-16"),
        "engine-tp-zero": PLAN.replace("tensor_parallel_size: 8", "tensor_parallel_size: 0"),
        "engine-tp-huge": PLAN.replace("tensor_parallel_size: 8", "tensor_parallel_size: 1000000000"),
        "max-model-len-neg": PLAN.replace("max_model_len: 128k", "max_model_len: -5"),
        "max-model-len-1e308": PLAN.replace("max_model_len: 128k", "max_model_len: 1e308"),
        "max-num-seqs-zero": PLAN.replace("max_num_seqs: 256", "max_num_seqs: 0"),
        "max-num-seqs-negative": PLAN.replace("max_num_seqs: 256", "max_num_seqs: -5000"),
        "mnbt-negative": PLAN.replace("max_num_batched_tokens: 8192", "max_num_batched_tokens: -100000"),
        "block-size-zero": PLAN.replace("block_size: 16", "block_size: 0"),
        "util-two": PLAN.replace("gpu_memory_utilization: 0.9", "gpu_memory_utilization: 2"),
        "util-nan": PLAN.replace("gpu_memory_utilization: 0.9", "gpu_memory_utilization: .nan"),
        "kv-dtype-empty": PLAN.replace("kv_cache_dtype: fp8", "kv_cache_dtype: ','"),
        "qps-negative": PLAN.replace("qps: 2", "qps: -2"), "qps-inf": PLAN.replace("qps: 2", "qps: .inf"),
        "isl-huge": PLAN.replace("isl: 8k", "isl: 1e300"), "osl-zero": PLAN.replace("osl: 512", "osl: 0"),
        "concurrency-huge": PLAN.replace("concurrency: 16", "concurrency: 1000000000000"),
        "slo-no-unit": PLAN.replace("tpot: p99<=50ms", "tpot: p99<=50"),
        "slo-garbage": PLAN.replace("tpot: p99<=50ms", "tpot: fast please"),
        "bytes-no-unit": PLAN.replace("kv_cache_memory_bytes >= 40GiB", "kv_cache_memory_bytes >= 40 GiBB"),
        "unknown-key": PLAN + "surprise: 1\n", "name-newline": PLAN.replace("name: llama70b-h100-tp8-fp8",
                                                                            'name: "a\\n::warning::b"'),
        "trace-missing": PLAN.replace("workload:\n", "workload:\n  trace: /no/such/trace.jsonl\n"),
        "gpu-cost-negative": PLAN + "gpu_cost: -1\n",
        "gpu-cost-nan": PLAN + "gpu_cost: {h100-sxm: .nan}\n",
        "gpu-cost-laughs": PLAN + "gpu_cost: {" + ", ".join(f"h{i}: 1" for i in range(100)) + "}\n",
        "report-unknown-section": PLAN + "report: {pdd: true}\n",
        "report-concurrency-huge": PLAN + "report: {concurrency: [1000000000000]}\n",
        "report-concurrency-list-huge": PLAN + "report: {concurrency: [" + ", ".join(map(str, range(1, 5000))) + "]}\n",
        "report-pd-one-slo": PLAN.replace("  ttft: p99<=2s\n", "") + "report: {pd: true}\n",
        "report-tiers-no-rate": PLAN.replace("  qps: 2\n", "") + "report: {tiers: true}\n",
    }
    for name, text in plans.items():
        path = _write(root / "plans" / f"{name}.yaml", text)
        iso = name in ("billion-laughs", "deep-nesting", "chain-100k", "chain-compare-100k", "parens-10k", "power",
                       "int-literal-5000", "engine-tp-huge", "concurrency-huge", "isl-huge", "max-model-len-1e308")
        junit = out / f"junit-{name}.xml"
        add(Case(f"plan-check:{name}", ["check", path, "--junit", junit], outputs=[junit], isolate=iso))
        if name in ("typo-model", "typo-hardware", "billion-laughs", "binary", "not-mapping", "chain-100k",
                    "engine-tp-zero", "max-num-seqs-zero", "slo-no-unit", "gpu-cost-negative", "gpu-cost-nan",
                    "gpu-cost-laughs", "report-unknown-section", "report-concurrency-huge",
                    "report-concurrency-list-huge", "report-pd-one-slo", "report-tiers-no-rate"):
            report = out / f"report-{name}"
            add(Case(f"plan-report:{name}", ["report", path, "--out", report], outputs=[report], isolate=iso))

    # ------------------------------------------------------------------ grids
    grid_head = "models: [llama-3.1-8b]\nhardware: [h100-sxm]\n"
    grids = {
        "billion-laughs": billion_laughs(key="seq") + "models: [llama-3.1-8b]\nhardware: [h100-sxm]\n",
        "seq-1e300": grid_head + "seq: [1e300]\nbatch: [1]\n",
        "seq-negative": grid_head + "seq: [-1]\nbatch: [1]\n",
        "seq-zero": grid_head + "seq: [0]\nbatch: [1]\n",
        "batch-huge": grid_head + "seq: [8k]\nbatch: [1000000000000]\n",
        "points-1e10": grid_head + "seq: {start: 1, stop: 100000, num: 100000}\nbatch: {start: 1, stop: 100000, num: 100000}\n",
        "points-list-1e10": grid_head + "seq: [" + ", ".join(map(str, range(1, 100_001))) + "]\nbatch: ["
                            + ", ".join(map(str, range(1, 100_001))) + "]\n",
        "range-num-1e12": grid_head + "seq: {start: 1, stop: 128k, num: 1000000000000}\nbatch: [1]\n",
        "kv-dtype-comma": grid_head + "seq: [8k]\nbatch: [1]\nkv_dtype: [',']\n",
        "tp-zero": grid_head + "seq: [8k]\nbatch: [1]\ntp: [0]\n",
        "models-empty": "models: []\nhardware: [h100-sxm]\nseq: [8k]\nbatch: [1]\n",
        "unknown-model": "models: [llama-9000]\nhardware: [h100-sxm]\nseq: [8k]\nbatch: [1]\n",
        "not-mapping": "[1, 2]\n", "binary": b"\x00\x01" * 64, "deep-nesting": "seq: " + "[" * 50_000 + "]" * 50_000,
        "unknown-key": GRID + "\nbogus: 1\n",
    }
    for name, text in grids.items():
        path = _write(root / "grids" / f"{name}.yaml", text)
        target = out / f"sweep-{name}.csv"
        add(Case(f"grid:{name}", ["sweep", path, "-o", target], outputs=[target],
                 isolate=name in ("billion-laughs", "points-1e10", "points-list-1e10", "range-num-1e12", "seq-1e300", "batch-huge",
                                  "deep-nesting")))

    # ------------------------------------------------------------------ traces
    traces = {
        "azure-span-year-1-to-9999": AZURE_HEADER + "\n0001-01-01 00:00:00.000000,100,10\n9999-12-31 23:59:59.999999,100,10\n",
        "azure-garbage-time": AZURE_HEADER + "\nyesterday,100,10\n",
        "azure-negative": AZURE_HEADER + "\n2023-11-16 18:15:46.6805900,-100,10\n",
        "azure-2e62": AZURE_HEADER + f"\n2023-11-16 18:15:46.6805900,{2**62},10\n",
        "azure-nan": AZURE_HEADER + "\n2023-11-16 18:15:46.6805900,nan,10\n",
        "azure-header-only": AZURE_HEADER + "\n", "azure-empty": "",
        "azure-binary": b"\x00\xff\xfe" * 100, "azure-utf16": (AZURE_HEADER + "\n2023-11-16 18:15:46.6,1,1\n").encode("utf-16"),
        "azure-5000-digits": AZURE_HEADER + "\n2023-11-16 18:15:46.6805900," + "9" * 5000 + ",10\n",
    }
    for name, text in traces.items():
        path = _write(root / "traces" / f"{name}.csv", text)
        add(Case(f"trace-workload:{name}", ["workload", path, "--trace-format", "azure"]))
        add(Case(f"trace-plan:{name}", ["plan", "llama-3.1-8b", "h100-sxm", "--trace", path, "--trace-format", "azure",
                                        "--ttft", "p99<=2s"]))
    mooncake = {
        "input-2e62": '{"timestamp": 0, "input_length": ' + str(2**62) + ', "output_length": 10, "hash_ids": [1]}\n',
        "negative": '{"timestamp": 0, "input_length": -5, "output_length": 10, "hash_ids": [1]}\n',
        "timestamp-nan": '{"timestamp": NaN, "input_length": 5, "output_length": 10, "hash_ids": [1]}\n',
        "timestamp-1e999": '{"timestamp": 1e999, "input_length": 5, "output_length": 10, "hash_ids": [1]}\n',
        "hash-ids-text": '{"timestamp": 0, "input_length": 5, "output_length": 10, "hash_ids": "abc"}\n',
        "not-json": "this is not json\n", "array": "[1, 2, 3]\n", "empty": "",
        "deep": '{"timestamp": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
        "int-5000": '{"timestamp": 0, "input_length": ' + "9" * 5000 + ', "output_length": 10}\n',
    }
    for name, text in mooncake.items():
        path = _write(root / "traces" / f"mooncake-{name}.jsonl", text)
        add(Case(f"trace-mooncake:{name}", ["workload", path], isolate=name == "deep"))
        add(Case(f"trace-tier:{name}", ["tier", "llama-3.1-8b", "--system", "hgx-h100-8", "--trace", path, "--no-pd"],
                 isolate=name == "deep"))
        add(Case(f"trace-route:{name}", ["route", path, "--cache-tokens", "1M"], isolate=name == "deep"))

    # ------------------------------------------------------------------ calibration CSV
    cal_header = CALIBRATION.read_text(encoding="utf-8").splitlines()[0]
    calibrations = {
        "binary": b"\x00\x01\xff" * 40, "utf16": (cal_header + "\n").encode("utf-16"), "empty": "",
        "nan": cal_header + "\n" + ",".join(["nan"] * len(cal_header.split(","))) + "\n",
        "inf": cal_header + "\n" + ",".join(["inf"] * len(cal_header.split(","))) + "\n",
        "negative": cal_header + "\n" + ",".join(["-1"] * len(cal_header.split(","))) + "\n",
        "huge": cal_header + "\n" + ",".join(["1e308"] * len(cal_header.split(","))) + "\n",
        "digits": cal_header + "\n" + ",".join(["9" * 5000] * len(cal_header.split(","))) + "\n",
        "header-only": cal_header + "\n",
    }
    for name, text in calibrations.items():
        path = _write(root / "calibration" / f"{name}.csv", text)
        card = out / f"cal-{name}.yaml"
        add(Case(f"calibration:{name}", ["calibrate", "llama-3.1-8b", "h100-sxm", path, "--card-out", card],
                 outputs=[card]))

    # ------------------------------------------------------------------ flag values
    m, hw = "llama-3.1-8b", "h100-sxm"
    flags = [
        ("size", [m], "--seq", ["0", "-1", "abc", "1e308", "nan", "inf", "12x", "", ",", "1.5", "9" * 30, "1e9999"]),
        ("size", [m], "--batch", ["0", "-3", "1e308", "x", "9" * 25]),
        ("size", [m], "--tp", ["0", "-8", "3x", "1000000000000"]),
        ("size", [m], "--pp", ["0", "-1", "99999999999"]),
        ("size", [m], "--kv-dtype", [",", "fp7", " "]),
        ("size", [m], "--engine", [",", "vllmx"]),
        ("size", [m], "--block-size", ["0", "-16", "99999999999999"]),
        ("size", [m], "--max-num-batched-tokens", ["-100000", "0"]),
        ("fit", [m, hw], "--gpu-memory", ["80", "0", "-5GiB", "abc", "infGiB", "nanGB", "1e400GB"]),
        ("fit", [m, hw], "--kv-cache-memory", ["40", "-1GiB", "0"]),
        ("fit", [m, hw], "--max-num-seqs", ["0", "-5000"]),
        ("fit", [m, hw], "--max-num-batched-tokens", ["-100000", "0"]),
        ("fit", [m, hw], "--gpu-memory-utilization", ["0", "1.5", "nan", "-0.5", "inf"]),
        ("fit", [m, hw], "--max-model-len", ["1e308", "-5", "0"]),
        ("fit", [m, hw], "--weights-memory", ["16", "-1GB"]),
        ("latency", [m, hw], "--isl", ["0", "-1", "1e308"]),
        ("latency", [m, hw], "--osl", ["-1", "1e308"]),
        ("latency", [m, hw], "--spec-k", ["0", "-1", "100000000"]),
        ("latency", [m, hw], "--step-overhead", ["300", "-1ms", "infms"]),
        ("latency", [m, hw], "--eta-mem", ["0", "2", "nan", "-1", "inf"]),
        ("latency", [m, hw], "--eta-flops", ["0", "nan", "5"]),
        ("latency", [m, hw], "--chunk-size", ["-5", "1e308"]),
        ("workload", [], "--rate", ["-1", "0", "nan", "inf"]),
        ("workload", [], "--bucket", ["0", "60", "-1s", "0s"]),
        ("workload", [], "--sample", ["0", "-1", "1000000000000"]),
        ("workload", [], "--seed", ["-1", "99999999999999999999999"]),
        ("workload", [], "--turns", ["0", "-1", "1000000000"]),
        ("workload", [], "--think-time", ["30", "-5s"]),
        ("workload", [], "--arrival-cv", ["-1", "nan", "inf"]),
        ("workload", [], "--cache-tokens", ["-1", "abc", "1e308"]),
        ("workload", [], "--isl", ["mean=-5", "p50=1k,p99=10", "garbage", "mean=1e308"]),
        ("tier", [m], "--sample", ["0", "-1", "10000000000"]),
        ("tier", [m], "--seed", ["-1"]),
        ("tier", [m], "--dram-per-node", ["1024", "-1TB"]),
        ("tier", [m], "--rag-docs", ["0", "-1", "1000000000000"]),
        ("tier", [m], "--nodes", ["0", "-1", "1000000000"]),
        ("tier", [m], "--decode-batch", ["0", "-1", "nan"]),
        ("pd", [m, hw], "--ttft", ["p99<=2", "2s", "p99<=-1s"]),
        ("pd", [m, hw], "--tpot", ["p99<=50", "p101<=50ms"]),
        ("pd", [m, hw], "--prefill-instances", ["0", "-1", "1000000000"]),
        ("pd", [m, hw], "--decode-instances", ["0", "1000000000"]),
        ("pd", [m, hw], "--link-bandwidth", ["900", "-1GB/s", "0GB/s"]),
        ("pd", [m, hw], "--qps", ["-1", "nan", "inf"]),
        ("plan", [m, hw], "--max-num-seqs", ["0", "-5"]),
        ("plan", [m, hw], "--tpot", ["p99<=50"]),
        ("plan", [m, hw], "--qps", ["-1", "0"]),
        # the options added with the per-operator model, attention DP / EP and the closed loop
        ("plan", [m, hw], "--perf-model", ["bogus", ""]), ("pd", [m, hw], "--perf-model", ["roof"]),
        ("tier", [m], "--perf-model", ["operator"]), ("latency", [m, hw], "--perf-model", ["x"]),
        ("plan", [m, hw], "--concurrency", ["8,,16", "16,", "0", "-1", "1000000000", "abc", ","]),
        ("report", [ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml"], "--concurrency", ["8,,16", "0"]),
        ("plan", [m, hw], "--max-utilization", ["0", "1.5", "nan", "1"]), ("pd", [m, hw], "--max-utilization", ["0", "2"]),
        ("plan", [m, hw], "--gpu-cost", ["h100-sxm=-1", "h100-sxm=nan", "h100-sxmm=2", "2.4", "h100-sxm=2,", "=2"]),
        ("pd", [m, hw], "--gpu-cost", ["h100-sxm=0", "h100-sxm=2,,h20=1"]),
        ("plan", [m, hw], "--tp", ["1,,2", "0", "x"]), ("plan", [m, hw], "--dp", ["2"]),
        ("pd", ["mixtral-8x7b", hw, "--enable-expert-parallel"], "--prefill-dp", ["0", "1,,2", "abc", "-1"]),
        ("pd", ["mixtral-8x7b", hw, "--enable-expert-parallel"], "--decode-dp", ["0", "3x"]),
        ("pd", ["mixtral-8x7b", hw, "--enable-expert-parallel"], "--ep-redundant-experts", ["-1", "10"]),
        ("plan", ["mixtral-8x7b", hw, "--enable-expert-parallel"], "--ep-redundant-experts", ["-1", "10"]),
        ("plan", [m, hw], "--ep-redundant-experts", ["8"]),
        ("latency", ["mixtral-8x7b", hw, "--enable-expert-parallel", "--tp", "2"], "--ep-redundant-experts",
         ["-1", "10", "x"]),
        ("latency", ["mixtral-8x7b", hw, "--enable-expert-parallel", "--tp", "2"], "--expert-imbalance",
         ["0", "0.5", "nan", "inf", "3", "1e308"]),
        ("latency", [m, hw], "--dp", ["0", "-2"]),
        ("plan", [m, hw], "--scale", ["1e308", "inf", "2,,5", "-2"]),
        ("plan", [m, hw, "--concurrency", "8"], "--instances", ["1000000000", "0"]),
        # route: a real trace excerpt, then the flag
        ("route", [ROUTE_TRACE, "--cache-tokens", "1M"], "--policy", ["bogus", "random,,round-robin", ","]),
        ("route", [ROUTE_TRACE, "--cache-tokens", "1M"], "--instances", ["0", "100000000", "2,,4", "x"]),
        ("route", [ROUTE_TRACE], "--cache-tokens", ["-1", "abc", "1M,,2M"]),
        ("route", [ROUTE_TRACE, "--cache-tokens", "1M"], "--service-time", ["5", "-1s", "infs"]),
        ("route", [ROUTE_TRACE, "--cache-tokens", "1M"], "--balance-abs-threshold", ["-1"]),
        ("route", [ROUTE_TRACE, "--cache-tokens", "1M"], "--hash-balance-factor", ["0.5", "nan"]),
        ("route", [ROUTE_TRACE, "--cache-tokens", "1M"], "--cache-threshold", ["2", "-0.1"]),
        ("route", [ROUTE_TRACE, m, hw], "--tp", ["0", "3x"]),
        ("route", [ROUTE_TRACE, "--cache-tokens", "1M"], "--chart", ["route.txt"]),
    ]
    base = {
        "workload": ["--rate", "5", "--isl", "2k", "--osl", "256", "--sample", "1000"],
        "tier": ["--system", "hgx-h100-8", "--qps", "1", "--isl", "2k", "--osl", "128", "--sample", "500", "--no-pd"],
        "pd": ["--qps", "2", "--isl", "2k", "--osl", "256", "--ttft", "p99<=2s", "--tpot", "p99<=50ms"],
        "plan": ["--qps", "2", "--isl", "2k", "--osl", "256", "--ttft", "p99<=2s", "--tpot", "p99<=50ms"],
    }
    for command, positional, flag, values in flags:
        for value in values:
            args = [command, *positional]
            rest = [a for a in base.get(command, [])]
            if flag in rest:  # replace the base value of this flag
                i = rest.index(flag)
                del rest[i:i + 2]
            target = out / f"{command}{flag}-{len(cases)}.json"
            huge = "e" in value.lower() or len(value.lstrip("-")) >= 7
            out_flag = "--out" if command == "report" else "-o"
            add(Case(f"flag:{command} {flag} {value!r}", [*args, *rest, flag, value, out_flag, target], outputs=[target],
                     isolate=huge))

    # ------------------------------------------------------------------ output paths
    fifo_out = root / "paths" / "out.fifo"
    if not fifo_out.exists():
        os.mkfifo(fifo_out)
    for label, target in (("missing-dir", out / "no" / "such" / "x.json"), ("directory", out), ("fifo", fifo_out),
                          ("symlink-loop", loop), ("empty", "")):
        add(Case(f"output-size:{label}", ["size", m, "-o", target]))
        add(Case(f"output-check-junit:{label}", ["check", ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml",
                                                  "--junit", target]))
    add(Case("output-check-junit-then-bad-o", ["check", ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml",
                                               "--junit", out / "j-ok.xml", "-o", fifo_out], outputs=[out / "j-ok.xml"]))
    add(Case("output-tier-chart-not-png", ["tier", m, *base["tier"], "--chart", out / "chart.txt"],
             outputs=[out / "chart.txt"]))
    add(Case("output-tier-chart-then-bad-o", ["tier", m, *base["tier"], "--chart", out / "c.png", "-o", fifo_out],
             outputs=[out / "c.png"]))
    add(Case("output-calibrate-card-then-bad-o", ["calibrate", m, hw, CALIBRATION, "--card-out", out / "card.yaml",
                                                  "-o", out / "nodir" / "x.json"], outputs=[out / "card.yaml"]))
    add(Case("output-sweep-bad-ext", ["sweep", ROOT / "examples" / "grids" / "dense.yaml", "-o", out / "x.xlsx"],
             outputs=[out / "x.xlsx"]))
    add(Case("output-report-exists-file", ["report", ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml",
                                           "--out", CALIBRATION]))

    # ------------------------------------------------------------------ names and usage
    for label, name in (("300-chars", "x" * 300), ("newline", "llama\n::warning::x"), ("nul-ish", "ll\x01ama"),
                        ("path-traversal", "../../etc/passwd"), ("empty", ""), ("space", " ")):
        add(Case(f"name-size:{label}", ["size", name]))
        add(Case(f"name-fit-hardware:{label}", ["fit", m, name, "--max-model-len", "8k"]))
        add(Case(f"name-tier-system:{label}", ["tier", m, "--system", name, *base["tier"][2:]]))
    for label, args in (("unknown-option", ["size", m, "--bogus"]), ("missing-arg", ["fit"]),
                        ("bad-int", ["size", m, "--pp", "two"]), ("unknown-command", ["sizee"]),
                        ("cards-show-format", ["cards", "show", m, "--format", "xml"]),
                        ("schema-kind", ["schema", "nonsense"]), ("format", ["size", m, "--format", "xml"]),
                        ("two-batch-overlap-value", ["pd", m, hw, *base["pd"], "--two-batch-overlap", "yes"]),
                        ("two-batch-overlap-equals", ["latency", m, hw, "--two-batch-overlap=2"]),
                        ("route-one-positional-too-many", ["route", ROUTE_TRACE, m]),
                        ("route-no-cache", ["route", ROUTE_TRACE]), ("route-nothing", ["route"])):
        add(Case(f"usage:{label}", args))
    return cases
