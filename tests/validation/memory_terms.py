"""vLLM's default start-up terms against public logs, the fitting set kept apart from the scoring set.

Each record is one logged term (activation peak or non-torch memory, GiB) with the inputs that
set it. ``role`` says whether the default was fitted on it (``fit``) or it only scores the
default (``score``). The defaults live in ``kvplan.calc.memory`` (``VLLM_FORWARD_FACTOR``,
``VLLM_SAMPLER_COPIES``, ``VLLM_NON_TORCH_*``).

Left out: issue #12126's 36.63 GiB (Llama-3.2-11B-Vision: the vision encoder's profiling pass,
which kvplan does not model) and issue #12095 (Whisper, an encoder-decoder).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from kvplan.calc.memory import vllm_activation_peak_bytes, vllm_non_torch_bytes
from kvplan.cards.loader import load_model

GiB = 2**30
V0_WEIGHTS_LLAMA3_8B = 14.96  # GiB, "model weights take 14.96GiB" (issue #12330, PR #10511)


@dataclass(frozen=True)
class TermLog:
    key: str
    source: str
    term: str              # "activation" or "non_torch"
    role: str              # "fit" or "score"
    inputs: str
    logged_gib: float
    model: str = "llama-3.1-8b"   # same h, i, vocab as Meta-Llama-3-8B
    tokens: int = 8192
    max_num_seqs: int = 256
    tp: int = 1
    pp: int = 1

    def kvplan_gib(self) -> float:
        if self.term == "activation":
            return vllm_activation_peak_bytes(load_model(self.model), self.tokens, self.tp, self.max_num_seqs) / GiB
        return vllm_non_torch_bytes(self.tp, self.pp) / GiB

    @property
    def error_gib(self) -> float:
        return self.kvplan_gib() - self.logged_gib


PR_10511 = "https://github.com/vllm-project/vllm/pull/10511"
ISSUE_10517 = "https://github.com/vllm-project/vllm/issues/10517"
ISSUE_12330 = "https://github.com/vllm-project/vllm/issues/12330"
ISSUE_12126 = "https://github.com/vllm-project/vllm/pull/12126"
ISSUE_14452 = "https://github.com/vllm-project/vllm/issues/14452"
ISSUE_12095 = "https://github.com/vllm-project/vllm/issues/12095"

LOGS: tuple[TermLog, ...] = (
    TermLog("pr10511-tp1-activation", PR_10511, "activation", "fit",
            "Meta-Llama-3-8B, H100, V0, max_model_len 8192 (8,192 batched tokens), 256 seqs, tp 1", 1.26),
    TermLog("pr10511-tp2-activation", PR_10511, "activation", "fit", "as above, tp 2", 1.26, tp=2),
    TermLog("issue10517-20000-activation", ISSUE_10517, "activation", "fit",
            "Llama-3.1-8B, RTX 3090, V0, 20,000 batched tokens: peak_torch 17.06 − weights 14.96 GiB",
            round(17.06 - V0_WEIGHTS_LLAMA3_8B, 2), tokens=20_000),
    TermLog("issue10517-29000-activation", ISSUE_10517, "activation", "fit",
            "as above, 29,000 batched tokens: 17.98 − 14.96 GiB", round(17.98 - V0_WEIGHTS_LLAMA3_8B, 2),
            tokens=29_000),
    TermLog("issue12330-activation", ISSUE_12330, "activation", "score",
            "Meta-Llama-3-8B, A100-40GB, V0 v0.6, max_model_len 8192, tp 1", 9.37),
    TermLog("issue10517-non-torch", ISSUE_10517, "non_torch", "fit", "RTX 3090, tp 1", 0.35),
    TermLog("issue12330-non-torch", ISSUE_12330, "non_torch", "fit", "A100-40GB, tp 1", 0.10),
    TermLog("pr12126-non-torch", ISSUE_12126, "non_torch", "fit", "H100, tp 1", 0.16),
    TermLog("pr10511-tp2-non-torch", PR_10511, "non_torch", "fit", "H100, tp 2", 3.58, tp=2),
    TermLog("pr10511-tp1-non-torch", PR_10511, "non_torch", "score", "H100, tp 1", 1.79),
    TermLog("issue14452-non-torch", ISSUE_14452, "non_torch", "score",
            "RTX 5090, two workers (two 'model weights take' lines, 10.80 and 10.30 GiB: pp 2)", 0.33, pp=2),
    TermLog("issue12095-non-torch", ISSUE_12095, "non_torch", "score", "8 GB GPU, tp 1 (Whisper)", 0.04),
)


def summary(term: str, role: str) -> dict[str, float]:
    """Median |error|, median signed error (bias) and p90 |error|, in GiB and relative to the log."""
    rows = [log for log in LOGS if log.term == term and log.role == role]
    errors = [log.error_gib for log in rows]
    relative = [log.error_gib / log.logged_gib for log in rows]
    absolute = sorted(abs(e) for e in errors)
    p90 = absolute[min(len(absolute) - 1, int(round(0.9 * (len(absolute) - 1))))]
    return {"n": len(rows), "median_abs_gib": statistics.median(absolute), "bias_gib": statistics.median(errors),
            "p90_abs_gib": p90, "median_abs_rel": statistics.median(abs(r) for r in relative),
            "bias_rel": statistics.median(relative)}
