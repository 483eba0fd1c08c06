"""Plan files: one YAML file describing a deployment, validated, loaded and evaluated.

A plan names the model, the hardware (or a system card), the engine with its settings under
the engine's own names, an optional workload and SLOs, and the assertions CI checks::

    name: llama70b-h100-tp4
    model: meta-llama/Llama-3.1-70B-Instruct
    hardware: h100-sxm
    engine:
      name: vllm
      tensor_parallel_size: 4
      max_model_len: 128k
      kv_cache_dtype: fp8
      gpu_memory_utilization: 0.9
    workload: {qps: 2, isl: 8k, osl: 512}
    slo: {ttft: "p99<=2s", tpot: "p99<=50ms"}
    gpu_cost: {h100-sxm: 2.4}          # price per GPU-hour (any currency); a bare number prices the plan's hardware
    report: {pd: true, tiers: true, checklist: true, concurrency: [1, 8, 32, 128]}   # kvplan report's optional sections
    assertions:
      - max_concurrency_at_max_len >= 16
      - kv_fits: true

The schema forbids unknown keys everywhere (``kvplan schema`` prints it as JSON Schema).
Assertions are parsed by :mod:`kvplan.plans.check.expr` and their metric names checked against
the registry in :mod:`kvplan.plans.check.metrics` when the file is loaded, so a typo fails before
any number is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from kvplan.calc.dtypes import KV_DTYPE_NAMES, WEIGHT_DTYPE_NAMES
from kvplan.engines import ENGINE_NAMES
from kvplan.errors import InputError, KvplanError
from kvplan.plans.check import metrics as registry
from kvplan.plans.check.expr import Assertion, parse_assertion
from kvplan.plans.check.yamlfile import Tokens, _unit, describe_errors, read_yaml  # noqa: F401 (Tokens re-exported)
from kvplan.units import parse_bytes, parse_tokens
from kvplan.workload.slo import parse_slo as _parse_slo
from kvplan.workload.synthetic import parse_length

Bytes = Annotated[int, _unit(parse_bytes), Field(ge=0, description="bytes; '80GB' = 80e9, '80GiB' = 80 × 2^30")]


def _length(value):
    """A token count (``8k``) as int; a distribution in the one length grammar (``1k:8k``, ``mean=…,p99=…``) as text."""
    if value is None or isinstance(value, bool):
        return value
    try:
        return parse_tokens(value)
    except KvplanError:
        pass
    try:
        parse_length(str(value))
    except KvplanError as exc:
        raise ValueError(exc.message) from None
    return str(value).strip()


Length = Annotated[Union[int, str], BeforeValidator(_length), Field(
    description="tokens per request: a count ('8k'), or a distribution ('1k:8k' = mean:p99, 'mean=1k,p99=8k', "
                "'p50=1k,p90=3k,p99=8k')")]

# vLLM's own spellings of the KV dtype; kvplan's short names are accepted too.
_KV_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}
_WEIGHTS_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}

# Each engine's names for the settings kvplan reads, mapped to vLLM's (the canonical keys).
ENGINE_NATIVE_NAMES: dict[str, dict[str, str]] = {
    "sglang": {"tp_size": "tensor_parallel_size", "pp_size": "pipeline_parallel_size",
               "context_length": "max_model_len", "mem_fraction_static": "gpu_memory_utilization",
               "page_size": "block_size", "chunked_prefill_size": "max_num_batched_tokens",
               "max_running_requests": "max_num_seqs"},
    "trtllm": {"max_seq_len": "max_model_len", "free_gpu_memory_fraction": "gpu_memory_utilization",
               "tokens_per_block": "block_size", "max_num_tokens": "max_num_batched_tokens",
               "max_batch_size": "max_num_seqs"},
}


class PlanModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineSettings(PlanModel):
    """The engine and its settings, under vLLM's names (SGLang's and TensorRT-LLM's are mapped)."""

    name: Literal[ENGINE_NAMES] = Field("vllm", description="engine profile")  # type: ignore[valid-type]
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    max_model_len: Tokens | None = Field(None, description="tokens per request; default: the model's max context")
    kv_cache_dtype: str = Field("auto", description=f"one of {', '.join(KV_DTYPE_NAMES)} (or bfloat16, float16)")
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="vLLM util / SGLang mem_fraction_static / TRT-LLM free_gpu_memory_fraction")
    block_size: int | None = Field(None, ge=1, description="tokens per KV block (engine default)")
    max_num_batched_tokens: Tokens | None = Field(
        None, description="default: the engine's for the GPU (vLLM: 8192 on a GPU with >= 70 GiB other than A100, else 2048)")
    max_num_seqs: int | None = Field(None, ge=1, description="default: the engine's for the GPU (vLLM: 1,024 on a GPU with >= 70 GiB other than A100, else 256)")
    weights_dtype: str = Field("auto", description=f"one of {', '.join(WEIGHT_DTYPE_NAMES)}")
    kv_cache_memory_bytes: Bytes | None = Field(None, description="fix the KV budget per GPU (vLLM --kv-cache-memory-bytes)")
    allow_long_context: bool = Field(False, description="allow max_model_len beyond the model's max context")

    @model_validator(mode="before")
    @classmethod
    def _native_names(cls, data):
        if isinstance(data, str):
            return {"name": data}
        if not isinstance(data, dict):
            return data
        native = ENGINE_NATIVE_NAMES.get(str(data.get("name", "vllm")), {})
        out = {}
        for key, value in data.items():
            canonical = native.get(key, key)
            if canonical in out:
                raise ValueError(f"'{key}' and '{canonical}' name the same setting; keep one")
            out[canonical] = value
        return out

    @field_validator("kv_cache_dtype")
    @classmethod
    def _kv_dtype(cls, value: str) -> str:
        value = _KV_DTYPE_ALIASES.get(value, value)
        if value not in KV_DTYPE_NAMES:
            raise ValueError(f"unknown KV cache dtype '{value}' (choose one of: {', '.join(KV_DTYPE_NAMES)})")
        return value

    @field_validator("weights_dtype")
    @classmethod
    def _weights_dtype(cls, value: str) -> str:
        value = _WEIGHTS_ALIASES.get(value, value)
        if value not in WEIGHT_DTYPE_NAMES:
            raise ValueError(f"unknown weights dtype '{value}' (choose one of: {', '.join(WEIGHT_DTYPE_NAMES)})")
        return value


class Workload(PlanModel):
    """Request rate and lengths (means), or a trace file they are read from."""

    qps: float | None = Field(None, gt=0, description="arrival rate, requests per second")
    isl: Length | None = Field(None, description="input (prompt) tokens per request")
    osl: Length | None = Field(None, description="output tokens per request")
    trace: str | None = Field(None, description="trace file (Azure CSV, Mooncake JSONL), relative to the plan")
    trace_format: Literal["auto", "azure", "mooncake", "csv"] = "auto"
    concurrency: int | None = Field(None, ge=1, description="sequences held at once at max_model_len (default 1)")

    @model_validator(mode="after")
    def _lengths_or_trace(self):
        if self.trace is not None and (self.isl is not None or self.osl is not None):
            raise ValueError("give isl/osl or a trace, not both")
        if self.trace is None and (self.isl is None) != (self.osl is None):
            raise ValueError("give both isl and osl")
        return self

    @property
    def has_lengths(self) -> bool:
        return self.trace is not None or self.isl is not None


SLO_STATS = ("mean", "p50", "p90", "p95", "p99")


def parse_slo(text: str) -> tuple[str, float]:
    """``'p99<=2s'`` → ('p99', 2.0): the one SLO grammar (:func:`kvplan.workload.slo.parse_slo`), with a
    statistic the plan's metrics carry (mean, p50, p90, p95, p99)."""
    try:
        slo = _parse_slo("slo", text)
    except KvplanError as exc:
        raise ValueError(exc.message.removeprefix("--slo: ")) from None
    if slo.stat not in SLO_STATS:
        raise ValueError(f"cannot read SLO '{text}': the statistic must be one of {', '.join(SLO_STATS)}")
    return slo.stat, slo.limit_s


class SLO(PlanModel):
    """Latency targets as 'p99<=2s' strings; each becomes an assertion on the matching metric."""

    ttft: str | None = Field(None, description="time to first token, e.g. 'p99<=2s'")
    tpot: str | None = Field(None, description="time per output token, e.g. 'p99<=50ms'")

    @field_validator("ttft", "tpot")
    @classmethod
    def _readable(cls, value):
        if value is not None:
            parse_slo(value)
        return value


ONE_LINE = r"^[^\x00-\x1f\x7f]*$"  # no newline or other control character (it would reach CI logs)
AssertionItem = Union[str, dict[str, Union[bool, float]]]
MAX_CONCURRENCY = 4096      # requests in flight one closed-loop point replays (bounded time)
MAX_CONCURRENCY_LEVELS = 12
MAX_PRICES = 32

Price = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True, description="price per GPU-hour, any currency")]
CardName = Annotated[str, Field(min_length=1, max_length=200, pattern=ONE_LINE)]
Flag = Annotated[bool, Field(strict=True)]


class ReportSections(PlanModel):
    """``kvplan report``'s optional sections (the CLI's --pd, --tiers, --checklist, --concurrency do the same)."""

    pd: Flag = Field(False, description="a disaggregated (xPyD) section from kvplan pd, against this plan's fleet")
    tiers: Flag = Field(False, description="a KV tier section from kvplan tier on this plan's fleet")
    checklist: Flag = Field(False, description="the engineering checklist (where the KV lives, … what breaks first)")
    concurrency: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY, strict=True)]] = Field(
        default_factory=list, max_length=MAX_CONCURRENCY_LEVELS,
        description="closed-loop levels (requests in flight) for the latency-throughput chart, e.g. [1, 8, 32, 128]")

    @field_validator("concurrency")
    @classmethod
    def _distinct(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError("concurrency levels must be distinct")
        return sorted(value)


class Plan(PlanModel):
    """One deployment: model, hardware or system, engine settings, workload, SLOs, assertions."""

    name: str | None = Field(None, max_length=120, pattern=ONE_LINE, description="a label for reports and CI")
    description: str | None = None
    model: str = Field(max_length=1000, pattern=ONE_LINE,
                       description="model card name, Hugging Face repo id, card file or config.json")
    hardware: str | None = Field(None, max_length=1000, pattern=ONE_LINE, description="hardware card (one accelerator)")
    system: str | None = Field(None, description="system card (node / supernode); its accelerator is used")
    engine: EngineSettings = Field(default_factory=EngineSettings)
    workload: Workload | None = None
    slo: SLO | None = None
    gpu_cost: Union[Price, dict[CardName, Price], None] = Field(
        None, description="price per GPU-hour (any currency): a number for the plan's hardware, or {hardware: price} "
                          "as kvplan plan --gpu-cost; gives cost per hour and per million output tokens")
    report: ReportSections = Field(default_factory=ReportSections)
    assertions: list[AssertionItem] = Field(
        default_factory=list,
        description="expressions over metric names, e.g. 'max_concurrency_at_max_len >= 16', or {kv_fits: true}")

    @field_validator("gpu_cost")
    @classmethod
    def _prices(cls, value):
        if isinstance(value, dict) and not 0 < len(value) <= MAX_PRICES:
            raise ValueError(f"give 1 to {MAX_PRICES} prices (hardware: price per GPU-hour)")
        return value

    @model_validator(mode="after")
    def _one_target(self):
        if (self.hardware is None) == (self.system is None):
            raise ValueError("give exactly one of 'hardware' and 'system'")
        return self

    @model_validator(mode="after")
    def _sections_have_inputs(self):
        problem = sections_problem(self, self.report.pd, self.report.tiers, self.report.checklist,
                                   bool(self.report.concurrency))
        if problem:
            raise ValueError(f"report: {problem}")
        return self


def sections_problem(plan, pd: bool, tiers: bool, checklist: bool, closed_loop: bool) -> str | None:
    """Why the plan cannot give the report sections asked for (None when it can)."""
    workload = plan.workload
    lengths = workload is not None and workload.has_lengths
    if (pd or checklist) and (plan.slo is None or plan.slo.ttft is None or plan.slo.tpot is None):
        return "the PD section and the checklist need both SLOs (slo: {ttft: 'p99<=2s', tpot: 'p99<=50ms'})"
    if (pd or checklist or tiers) and (not lengths or (workload.trace is None and workload.qps is None)):
        return "the PD, tier and checklist sections need a workload with a rate (workload: {qps, isl, osl} or a trace)"
    if tiers and workload.trace is not None and workload.qps is not None:
        return "the tier section replays a trace at its own rate: drop workload.qps (or the tier section)"
    if tiers and plan.engine.pipeline_parallel_size > 1:
        return "the tier section plans tensor-parallel instances only (pipeline_parallel_size 1)"
    if closed_loop and not lengths:
        return "the closed-loop chart needs a workload's lengths (workload: {isl, osl} or a trace)"
    return None


def plan_json_schema() -> dict:
    """The plan file's JSON Schema (what ``kvplan schema`` prints)."""
    schema = Plan.model_json_schema()
    schema["title"] = "kvplan plan file"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def _assertion_lines(node: yaml.Node | None) -> list[int | None]:
    if not isinstance(node, yaml.MappingNode):
        return []
    for key, value in node.value:
        if getattr(key, "value", None) == "assertions" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


@dataclass(frozen=True)
class SloTarget:
    """``ttft: 'p99<=2s'`` as (kind ttft, statistic p99, limit 2.0 s)."""

    kind: str
    stat: str
    limit_s: float
    text: str

    @property
    def metric(self) -> str:
        return f"{self.kind}_{self.stat}_s"

    def assertion(self, metric: str | None = None) -> Assertion:
        return parse_assertion(f"{metric or self.metric} <= {self.limit_s!r}")


def slo_targets(plan: Plan) -> list[SloTarget]:
    out = []
    for kind in ("ttft", "tpot"):
        text = getattr(plan.slo, kind) if plan.slo else None
        if text is not None:
            stat, limit_s = parse_slo(text)
            out.append(SloTarget(kind, stat, limit_s, f"{kind} {text}"))
    return out


@dataclass(frozen=True)
class PlanFile:
    """A validated plan, where it came from, and its parsed assertions (SLOs included)."""

    path: Path
    plan: Plan
    assertions: tuple[Assertion, ...]
    slos: tuple[SloTarget, ...]

    @property
    def label(self) -> str:
        return self.plan.name or self.path.stem


def load_plan(path: str | Path) -> PlanFile:
    """Read, validate and parse a plan file; every metric an assertion names must be known and available."""
    path = Path(path)
    data, node = read_yaml(path)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        raise describe_errors(path, exc, Plan) from None
    lines = _assertion_lines(node)
    assertions = []
    for i, item in enumerate(plan.assertions):
        try:
            assertions.append(parse_assertion(item, lines[i] if i < len(lines) else None))
        except InputError as exc:
            raise InputError(f"{path}: {exc.message}", exc.hint) from None
    for assertion in assertions:
        for name in assertion.names:
            if name not in registry.METRICS:
                raise InputError(
                    f"{path}: assertion '{assertion.text}': unknown metric '{name}'{registry.suggest(name)}",
                    f"valid metrics: {', '.join(registry.METRICS)}",
                )
            reason = registry.unavailable(name, plan)
            if reason is None and name in registry.COST_METRICS and plan.gpu_cost is None:
                raise InputError(f"{path}: assertion '{assertion.text}': metric '{name}' needs prices",
                                 "add gpu_cost (price per GPU-hour, e.g. gpu_cost: {h100-sxm: 2.4}) to the plan")
            if reason:
                raise InputError(f"{path}: assertion '{assertion.text}': metric '{name}' {reason}",
                                 registry.hint_for(name))
    return PlanFile(path=path, plan=plan, assertions=tuple(assertions), slos=tuple(slo_targets(plan)))
