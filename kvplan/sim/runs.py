"""A run of j decode steps in closed form: the replay advances its decoders run by run, not step by step.

Step i of a run (i = 0 … j − 1) of b decoders holding T tokens at its start reads T + b·i tokens:

    s_i = max(d + γ (T + b i), E)

d the step without attention, γ the attention time per held token, E the host dispatch of an eager decode step
(``--enforce-eager``: kernel launches are asynchronous, so the step is the longer of the GPU work and the host's
dispatch; E = 0 with CUDA graphs). The first m steps, m = min(j, ⌈(E − d − γT) / (γ b)⌉) where d + γT < E, take
E each; the rest grow linearly:

    run(j) = m E + (j − m)(d + γ (T + b m)) + γ b (j − m)(j − m − 1) / 2
"""

from __future__ import annotations

import math


def host_bound_steps(d: float, gamma: float, b: int, tokens: float, j: int, eager_s: float) -> int:
    """m: how many of a run's first ``j`` steps wait on the host (GPU step below ``eager_s``)."""
    if eager_s <= 0:
        return 0
    first = d + gamma * tokens
    if first >= eager_s:
        return 0
    rise = gamma * b
    if rise <= 0 or (eager_s - first) >= rise * j:
        return j
    return min(j, max(0, math.ceil((eager_s - first) / rise)))


def run_length_s(d: float, gamma: float, b: int, tokens: float, j: int, eager_s: float = 0.0) -> float:
    """Σ_{i<j} max(d + γ (T + b i), E): the time of a run of ``j`` decode steps (module docstring)."""
    m = host_bound_steps(d, gamma, b, tokens, j, eager_s)
    t, k = tokens + b * m, j - m
    return m * eager_s + k * (d + gamma * t) + gamma * b * k * (k - 1) / 2


def steps_begun(d: float, gamma: float, b: int, tokens: float, planned: int, elapsed_s: float,
                eager_s: float = 0.0) -> int:
    """How many steps of a planned run have begun ``elapsed_s`` after its start (the one under way included),
    at most ``planned``: the inverse of :func:`run_length_s`."""
    m = host_bound_steps(d, gamma, b, tokens, planned, eager_s)
    if elapsed_s < m * eager_s:
        j = elapsed_s / eager_s
    else:
        x, t = elapsed_s - m * eager_s, tokens + b * m
        a2, a1 = gamma * b / 2, d + gamma * t - gamma * b / 2
        j = m + (x / a1 if a2 <= 0 else 2 * x / (a1 + math.sqrt(a1 * a1 + 4 * a2 * x)))   # the root, stably
    return min(int(math.floor(j + 1e-12)) + 1, planned)


__all__ = ["host_bound_steps", "run_length_s", "steps_begun"]
