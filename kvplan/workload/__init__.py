"""Workloads: real request traces (Azure, Mooncake, generic CSV), their summaries and prefix reuse,
and flag-defined workloads (rate, ISL/OSL distributions, multi-turn sessions) with closed-form
moments and seeded sampling.

Modules: ``traces`` (readers → ``Trace``), ``summary`` (rate, burstiness, percentiles),
``reuse`` (LRU hit rate vs capacity from stack distances), ``synthetic`` (``Workload`` and length
distributions), ``sampling`` (draw a ``Trace`` from a ``Workload``).
"""

from kvplan.workload.reuse import ReuseProfile, reuse_profile, simulate_lru, unlimited_hit_rates
from kvplan.workload.sampling import sample_workload
from kvplan.workload.summary import summarise
from kvplan.workload.synthetic import Empirical, Fixed, LogNormal, Workload, parse_length, workload_from_flags
from kvplan.workload.traces import Trace, make_trace, read_trace

__all__ = [
    "Empirical", "Fixed", "LogNormal", "ReuseProfile", "Trace", "Workload", "make_trace", "parse_length",
    "read_trace", "reuse_profile", "sample_workload", "simulate_lru", "summarise", "unlimited_hit_rates",
    "workload_from_flags",
]
