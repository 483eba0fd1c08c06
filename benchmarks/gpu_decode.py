"""Measure a model-shaped decode step on an NVIDIA GPU and compare it with kvplan's estimate.

    python benchmarks/gpu_decode.py --model llama-3.1-8b --batch 1 8 32 --context 1024 8192 \
        [--hardware h100-sxm] [--output results.md]
    python benchmarks/gpu_decode.py --dry-run          # tiny shapes on CPU: checks the script only

The workload has the real sizes of the model card and random values: per layer a fused QKV
GEMM, ``scaled_dot_product_attention`` of the new token over the layer's KV cache (written in
place at position ``context``, as paged engines do), the output projection and the gated MLP
(gate/up GEMM, SiLU, down GEMM) at batch B, with RMSNorms; then the LM head. Every layer has its
own weights and its own K/V tensors, so one step streams the card's weights and the batch's KV
from HBM. The step is captured in a CUDA graph (``--no-cuda-graph`` runs it eagerly) and timed
with CUDA events; the median of ``--reps`` replays is reported.

kvplan's figure is ``kvplan.plans.sizing.latency.latency(...)["decode_step_s"]`` (and its physical
``floor_decode_step_s``) for the GPU's hardware card; where that module is missing, the
roofline floor ``(weight bytes + KV bytes) / card bandwidth`` is used instead and the table says
so. Grouped-query attention runs as one SDPA call per layer with the query heads of a KV group
laid along the query-length axis (``[B, kv_heads, group, d]`` against ``[B, kv_heads, S, d]``),
which is the same arithmetic as repeating the KV heads without copying them.

Dense decoder cards only (full or sliding attention, no MoE, no MLA, no linear layers). Without
a CUDA GPU the script prints why and exits 0; CI never has one.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kvplan.calc.kv import kv_layout  # noqa: E402
from kvplan.calc.memory import weight_bytes  # noqa: E402
from kvplan.cards.loader import load_hardware, load_model  # noqa: E402
from kvplan.cards.schema import HardwareCard, ModelCard  # noqa: E402
from kvplan.engines import get_profile  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.units import format_bytes  # noqa: E402

ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
GiB = 2**30


@dataclass(frozen=True)
class Shape:
    """The tensor sizes of a dense decoder (one entry of ``windows`` per layer; None = full attention)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    windows: tuple[int | None, ...]
    dtype: str = "bf16"

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    def layer_weight_elements(self) -> int:
        qkv = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
        out = self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return qkv + out + mlp + 2 * self.hidden  # + two RMSNorm weights

    def weight_bytes(self) -> int:
        """Bytes one step reads: every layer, the final norm and the LM head (not the embedding table)."""
        elements = self.layers * self.layer_weight_elements() + self.hidden + self.hidden * self.vocab
        return elements * self.element_bytes

    def kv_tokens(self, layer: int, context: int) -> int:
        window = self.windows[layer]
        return context if window is None else min(context, window)

    def kv_bytes(self, batch: int, context: int) -> int:
        """K and V bytes of ``batch`` sequences of ``context`` tokens, over all layers."""
        per_token = 2 * self.kv_heads * self.head_dim * self.element_bytes
        return batch * per_token * sum(self.kv_tokens(i, context) for i in range(self.layers))


def shape_from_card(card: ModelCard) -> Shape:
    """The dense decoder shape of ``card``; an error for MoE, MLA and linear-attention cards."""
    if card.moe is not None:
        raise KvplanError(f"{card.name} is a mixture of experts; gpu_decode.py times dense decoders only")
    windows: list[int | None] = []
    heads = {(g.num_kv_heads, g.head_dim, g.v_dim) for g in card.layer_groups if g.kind in ("full", "sliding")}
    if any(g.kind not in ("full", "sliding") for g in card.layer_groups) or len(heads) != 1:
        raise KvplanError(f"{card.name}: only full/sliding attention with one head layout is timed here")
    kv_heads, head_dim, v_dim = heads.pop()
    if v_dim != head_dim:
        raise KvplanError(f"{card.name}: K and V head sizes differ ({head_dim} vs {v_dim})")
    # groups are listed by kind, not by position: interleave sliding layers evenly (only counts matter here)
    for g in card.layer_groups:
        windows += [g.window if g.kind == "sliding" else None] * g.count
    return Shape(card.name, len(windows), card.hidden_size, card.num_attention_heads, kv_heads, head_dim,
                 card.intermediate_size or 4 * card.hidden_size, card.vocab_size, tuple(windows), card.dtype)


def tiny_shape(shape: Shape) -> Shape:
    """A few-megabyte stand-in with the same layout (for ``--dry-run`` on CPU)."""
    group = max(1, shape.heads // shape.kv_heads)
    kv_heads = 2
    windows = tuple(None if w is None else 8 for w in shape.windows[:2])
    return replace(shape, name=f"{shape.name} (shrunk)", layers=len(windows), hidden=64, heads=kv_heads * group,
                   kv_heads=kv_heads, head_dim=16, intermediate=128, vocab=256, windows=windows, dtype="fp32")


class DecodeStep:
    """Weights of real size and one KV cache per layer; ``run()`` is one decode step of the batch."""

    def __init__(self, shape: Shape, device: str, seed: int = 0):
        import torch

        self.torch, self.shape, self.device = torch, shape, device
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[shape.dtype]
        generator = torch.Generator(device=device).manual_seed(seed)
        h, d = shape.hidden, shape.head_dim

        def weight(*size):
            return (torch.randn(*size, device=device, dtype=self.dtype, generator=generator) * 0.02).contiguous()

        self.layers = [{
            "qkv": weight(h, (shape.heads + 2 * shape.kv_heads) * d), "o": weight(shape.heads * d, h),
            "gate_up": weight(h, 2 * shape.intermediate), "down": weight(shape.intermediate, h),
            "norm1": torch.ones(h, device=device, dtype=self.dtype),
            "norm2": torch.ones(h, device=device, dtype=self.dtype),
        } for _ in range(shape.layers)]
        self.final_norm = torch.ones(h, device=device, dtype=self.dtype)
        self.lm_head = weight(h, shape.vocab)
        self.caches: list[tuple] = []
        self.x = None

    def prepare(self, batch: int, context: int) -> None:
        """Allocate the KV of ``batch`` sequences holding ``context`` tokens (+1 slot for the new token)."""
        torch, s = self.torch, self.shape
        self.caches = []
        for i in range(s.layers):
            slots = s.kv_tokens(i, context + 1)
            size = (batch, s.kv_heads, slots, s.head_dim)
            k = torch.empty(size, device=self.device, dtype=self.dtype).uniform_(-1, 1)
            v = torch.empty(size, device=self.device, dtype=self.dtype).uniform_(-1, 1)
            self.caches.append((k, v, slots - 1))  # the new token is written at the last slot
        self.x = torch.randn(batch, s.hidden, device=self.device, dtype=self.dtype)

    def release(self) -> None:
        self.caches, self.x = [], None

    def _norm(self, x, weight):
        torch = self.torch
        if hasattr(torch.nn.functional, "rms_norm"):
            return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, 1e-6)
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * weight

    def run(self):
        torch, s = self.torch, self.shape
        functional = torch.nn.functional
        batch, d, group = self.x.shape[0], s.head_dim, s.heads // s.kv_heads
        x = self.x
        for w, (k_cache, v_cache, slot) in zip(self.layers, self.caches):
            qkv = self._norm(x, w["norm1"]) @ w["qkv"]
            q, k, v = qkv.split([s.heads * d, s.kv_heads * d, s.kv_heads * d], dim=-1)
            k_cache[:, :, slot].copy_(k.view(batch, s.kv_heads, d))
            v_cache[:, :, slot].copy_(v.view(batch, s.kv_heads, d))
            # the `group` query heads sharing one KV head go along the query-length axis: one SDPA call, no KV copy
            attn = functional.scaled_dot_product_attention(q.view(batch, s.kv_heads, group, d), k_cache, v_cache)
            x = x + attn.reshape(batch, s.heads * d) @ w["o"]
            gate, up = (self._norm(x, w["norm2"]) @ w["gate_up"]).chunk(2, dim=-1)
            x = x + (functional.silu(gate) * up) @ w["down"]
        return self._norm(x, self.final_norm) @ self.lm_head


def time_step(step: DecodeStep, reps: int, warmup: int, cuda_graph: bool) -> float:
    """Median seconds of one decode step (CUDA events on a GPU, perf_counter on CPU)."""
    torch = step.torch
    if step.device == "cpu":
        import time

        with torch.no_grad():
            for _ in range(warmup):
                step.run()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                step.run()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)
    with torch.no_grad():
        run = step.run
        if cuda_graph:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    step.run()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step.run()
            run = graph.replay
        for _ in range(warmup):
            run()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


@dataclass(frozen=True)
class Estimate:
    step_s: float
    floor_s: float | None
    method: str


def kvplan_estimate(card: ModelCard, hw: HardwareCard, batch: int, context: int) -> Estimate:
    """kvplan's decode step at this batch and context; the bandwidth roofline if the latency plan is missing."""
    try:
        import kvplan.plans.sizing.latency  # noqa: F401  (the planner latency_from_names calls)
        from kvplan.plans.build import latency_from_names as latency
    except ImportError:
        latency = None
    if latency is not None:
        row = latency(card, hw, isl=context, osl=1, batch=batch, context=context, allow_long_context=True).rows[0]
        return Estimate(row["decode_step_s"], row.get("floor_decode_step_s"), "kvplan.plans.sizing.latency")
    kv = batch * float(kv_layout(card, get_profile("ideal"), "auto").sequence_bytes(context))
    embedding = card.vocab_size * card.hidden_size * ELEMENT_BYTES[card.dtype]
    floor = (weight_bytes(card) - embedding + kv) / hw.hbm_bandwidth_bytes_per_s
    return Estimate(floor, floor, "roofline (weights + KV) / bandwidth")


def environment(device: str) -> dict[str, str]:
    import torch

    import kvplan

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "kvplan": getattr(kvplan, "__version__", "unknown"), "device": device}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda (torch build)"] = str(torch.version.cuda)
        env["gpu memory"] = f"{torch.cuda.get_device_properties(0).total_memory / GiB:.1f} GiB"
        env["driver"] = _driver_version()
    else:
        env["cpu"] = platform.processor() or platform.machine()
    return env


def _driver_version() -> str:
    if shutil.which("nvidia-smi") is None:
        return "unknown (nvidia-smi not found)"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def render(env: dict[str, str], shape: Shape, hw: HardwareCard, rows: list[dict], notes: list[str]) -> str:
    lines = [f"# Decode step: {shape.name} on {env.get('gpu', env['device'])}", "",
             "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in env.items()]
    lines += [f"| hardware card | {hw.name} ({hw.hbm_bandwidth_bytes_per_s / 1e12:.2f} TB/s) |",
              f"| weights read per step | {format_bytes(shape.weight_bytes())} ({shape.dtype}) |", "",
              "| batch | context | KV (GiB) | measured (ms) | kvplan (ms) | kvplan floor (ms) | measured / kvplan | "
              "kvplan method |",
              "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['batch']} | {r['context']} | {r['kv_gib']:.2f} | — | — | — | — | {r['skipped']} |")
            continue
        floor = f"{r['floor_s'] * 1e3:.3f}" if r["floor_s"] is not None else "—"
        lines.append(f"| {r['batch']} | {r['context']} | {r['kv_gib']:.2f} | {r['measured_s'] * 1e3:.3f} | "
                     f"{r['kvplan_s'] * 1e3:.3f} | {floor} | {r['measured_s'] / r['kvplan_s']:.2f} | {r['method']} |")
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _hardware(args, device: str) -> HardwareCard:
    if args.hardware:
        return load_hardware(args.hardware)
    if device == "cuda":
        import torch

        name = torch.cuda.get_device_name(0)
        try:
            return load_hardware(name)
        except KvplanError:
            raise KvplanError(f"no hardware card matches the GPU '{name}'; pass --hardware") from None
    return load_hardware("h100-sxm")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b", help="model card (dense decoder)")
    parser.add_argument("--hardware", help="hardware card (default: the card whose name or alias is the GPU's)")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--context", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--no-cuda-graph", action="store_true", help="time the eager step instead of a CUDA graph")
    parser.add_argument("--memory-fraction", type=float, default=0.9, help="skip points needing more of free memory")
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny shapes on CPU: exercise the script, time nothing real")
    parser.add_argument("--output", type=Path, help="write the markdown table here (default: stdout)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("gpu_decode.py needs torch (pip install kvplan[validation]); nothing measured", file=sys.stderr)
        return 0
    if not args.dry_run and not torch.cuda.is_available():
        print("No CUDA GPU found: gpu_decode.py measures on an NVIDIA GPU; nothing measured "
              "(run with --dry-run to check the script on CPU).", file=sys.stderr)
        return 0
    device = "cpu" if args.dry_run else "cuda"
    try:
        card = load_model(args.model)
        hw = _hardware(args, device)
        shape = shape_from_card(card)
    except KvplanError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    notes = []
    if args.dry_run:
        shape = tiny_shape(shape)
        torch.set_num_threads(2)
        notes.append("dry run on CPU with shrunk shapes: the kvplan column is for the real card, the measured one "
                     "is not comparable")
    step = DecodeStep(shape, device)
    rows = []
    for batch in args.batch:
        for context in args.context:
            kv = shape.kv_bytes(batch, context + 1)
            row = {"batch": batch, "context": context, "kv_gib": kv / GiB}
            if device == "cuda":
                free, _ = torch.cuda.mem_get_info()
                if kv > args.memory_fraction * free:
                    rows.append({**row, "skipped": f"needs {kv / GiB:.1f} GiB of KV, {free / GiB:.1f} GiB free"})
                    continue
            step.prepare(batch, context)
            measured = time_step(step, args.reps, args.warmup, cuda_graph=not args.no_cuda_graph)
            step.release()
            if device == "cuda":
                torch.cuda.empty_cache()
            estimate = kvplan_estimate(card, hw, batch, context)
            rows.append({**row, "measured_s": measured, "kvplan_s": estimate.step_s, "floor_s": estimate.floor_s,
                         "method": estimate.method})
    text = render(environment(device), shape, hw, rows, notes)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
