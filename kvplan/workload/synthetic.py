"""Workloads from flags: arrival rate, ISL/OSL distributions, multi-turn sessions.

Lengths are token counts drawn from one of:

- ``Fixed(value)``: always ``value``; mean ``v``, second moment ``v²``, SCV 0.
- ``LogNormal(mu, sigma)``: ``ln X ~ N(mu, sigma²)``; mean ``exp(mu + sigma²/2)``,
  second moment ``exp(2 mu + 2 sigma²)``, SCV = Var / mean² = ``exp(sigma²) − 1``,
  quantile ``q`` = ``exp(mu + sigma · Φ⁻¹(q))``. Built from a mean and a p99 (``from_mean_p99``)
  or from two or more percentiles (``from_percentiles``, least squares in ``ln`` space).
- ``Empirical(values)``: resample observed lengths (e.g. a trace's ISLs) with replacement.

Samples are whole tokens: ``max(1, round(x))``; the closed-form moments are those of the
continuous distribution (rounding moves them by well under one token).

Arrivals: requests arrive at ``rate_per_s``. Sessions of ``turns`` requests start as a renewal
process at ``rate_per_s / turns`` with gamma gaps of coefficient of variation ``arrival_cv``
(1 = Poisson); turn ``k + 1`` arrives an exponential ``think_time_s`` (mean) after turn ``k``
arrives (the gap includes the response time: the workload has no latency model). ``sample``
returns a stationary window of that process (``kvplan.workload.sampling``).

Prompts of a session grow: with ``S`` shared system-prompt tokens, ``N_k`` new user tokens and
``O_k`` output tokens of turn ``k``::

    prompt_k = S + N_1 + … + N_k + O_1 + … + O_{k−1}

so, over the ``T`` turns (all equally frequent), ``E[prompt] = S + μN (T+1)/2 + μO (T−1)/2`` and
``E[prompt²] = (1/T) Σ_k (k σN² + (k−1) σO² + E[prompt_k]²)``. For a single turn the prompt is the
ISL distribution itself (plus ``S``).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from kvplan.errors import InputError
from kvplan.units import parse_tokens, split_items
from kvplan.workload.sampling import sample_workload

Z = NormalDist()


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fixed(_Frozen):
    """Every request has ``value`` tokens."""

    kind: Literal["fixed"] = "fixed"
    value: float = Field(gt=0)

    @property
    def mean(self) -> float:
        return self.value

    @property
    def second_moment(self) -> float:
        return self.value**2

    def quantile(self, q: float) -> float:
        return self.value

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return _tokens(np.full(n, self.value))


class LogNormal(_Frozen):
    """``ln X ~ N(mu, sigma²)``."""

    kind: Literal["lognormal"] = "lognormal"
    mu: float
    sigma: float = Field(ge=0)

    @property
    def mean(self) -> float:
        return math.exp(self.mu + self.sigma**2 / 2)

    @property
    def second_moment(self) -> float:
        return math.exp(2 * self.mu + 2 * self.sigma**2)

    def quantile(self, q: float) -> float:
        return math.exp(self.mu + self.sigma * Z.inv_cdf(q))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return _tokens(rng.lognormal(self.mu, self.sigma, n))

    @classmethod
    def from_mean_p99(cls, mean: float, p99: float) -> LogNormal:
        """Solve ``ln(p99 / mean) = z σ − σ²/2`` (z = Φ⁻¹(0.99) ≈ 2.326) for the smaller root σ.

        ``σ = z − sqrt(z² − 2 ln(p99 / mean))``, ``mu = ln(mean) − σ²/2``; a solution exists only for
        ``mean <= p99 <= mean · exp(z²/2)`` (≈ 14.97 × mean).
        """
        if mean <= 0 or p99 <= 0:
            raise InputError(f"lognormal needs mean > 0 and p99 > 0 (got mean={mean:g}, p99={p99:g})")
        z = Z.inv_cdf(0.99)
        ratio = math.log(p99 / mean)
        if ratio < 0 or z * z < 2 * ratio:
            raise InputError(
                f"no lognormal has mean {mean:,.0f} and p99 {p99:,.0f}: p99 / mean = {p99 / mean:.2f} "
                f"must lie in [1, {math.exp(z * z / 2):.2f}]",
                "give percentiles instead (p50=…,p99=…), or a p99 closer to the mean")
        sigma = z - math.sqrt(z * z - 2 * ratio)
        return cls(mu=math.log(mean) - sigma**2 / 2, sigma=sigma)

    @classmethod
    def from_percentiles(cls, percentiles: dict[float, float]) -> LogNormal:
        """Fit ``ln x_p = mu + σ Φ⁻¹(p/100)`` through the given percentiles (exact for two, least squares beyond)."""
        if len(percentiles) < 2:
            raise InputError("a lognormal needs at least two percentiles", "write e.g. p50=1k,p99=8k")
        items = sorted(percentiles.items())
        if any(not 0 < p < 100 for p, _ in items) or any(v <= 0 for _, v in items):
            raise InputError(f"percentiles must be in (0, 100) with values > 0 (got {dict(items)})")
        z = np.array([Z.inv_cdf(p / 100) for p, _ in items])
        y = np.log([v for _, v in items])
        sigma, mu = np.polyfit(z, y, 1)
        if sigma < 0 or any(b < a for (_, a), (_, b) in zip(items, items[1:])):
            raise InputError(f"percentile values must grow with the percentile (got {dict(items)})")
        return cls(mu=float(mu), sigma=float(sigma))


class Empirical(_Frozen):
    """Resample observed token counts with replacement (moments are the sample's)."""

    kind: Literal["empirical"] = "empirical"
    values: tuple[int, ...] = Field(min_length=1)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def second_moment(self) -> float:
        return float(np.mean(np.square(np.asarray(self.values, dtype=np.float64))))

    def quantile(self, q: float) -> float:
        return float(np.percentile(self.values, q * 100))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return _tokens(rng.choice(np.asarray(self.values), n))


Length = Annotated[Union[Fixed, LogNormal, Empirical], Field(discriminator="kind")]


def scv(dist) -> float:
    """Squared coefficient of variation ``Var / mean² = E[X²] / mean² − 1``."""
    return max(dist.second_moment / dist.mean**2 - 1.0, 0.0)


def _tokens(x: np.ndarray) -> np.ndarray:
    return np.maximum(1, np.rint(x)).astype(np.int64)


def parse_length(text: str) -> Fixed | LogNormal:
    """The one length grammar every command reads (flags, plan files):

    ``'2k'`` → Fixed; ``'1k:8k'`` (``MEAN:P99``) and ``'mean=1k,p99=8k'`` → LogNormal.from_mean_p99;
    ``'p50=1k,p90=3k,p99=8k'`` → from_percentiles. Token counts as in :func:`kvplan.units.parse_tokens`.
    """
    text = str(text).strip()
    if ":" in text and "=" not in text:
        mean, _, p99 = text.partition(":")
        text = f"mean={mean.strip()},p99={p99.strip()}"
    if "=" not in text:
        return Fixed(value=parse_tokens(text))
    fields: dict[str, int] = {}
    for item in split_items(text, what="length distribution"):
        key, _, value = item.partition("=")
        fields[key.strip().lower()] = parse_tokens(value.strip())
    if set(fields) == {"mean", "p99"}:
        return LogNormal.from_mean_p99(fields["mean"], fields["p99"])
    percentiles = {}
    for key, value in fields.items():
        try:
            percentiles[float(key.removeprefix("p"))] = value
        except ValueError:
            percentiles = {}
            break
    if not percentiles or not all(k.startswith("p") for k in fields):
        raise InputError(f"cannot read length distribution '{text}'",
                         "write a fixed count (2k), mean:p99 (1k:8k), mean=2k,p99=16k, or percentiles "
                         "p50=1k,p90=4k,p99=8k")
    return LogNormal.from_percentiles(percentiles)


class Workload(_Frozen):
    """Requests arriving at ``rate_per_s`` with ISL/OSL distributions, optionally in multi-turn sessions.

    ``isl`` is the whole prompt of a single-turn request, or the user tokens each turn adds.
    """

    rate_per_s: float = Field(gt=0)
    isl: Length
    osl: Length
    arrival_cv: float = Field(default=1.0, gt=0)
    turns: int = Field(default=1, ge=1)
    think_time_s: float = Field(default=0.0, ge=0)
    shared_prefix_tokens: int = Field(default=0, ge=0)
    block_tokens: int = Field(default=512, gt=0)

    @property
    def session_rate_per_s(self) -> float:
        return self.rate_per_s / self.turns

    def interarrival_scv(self, sample_requests: int = 100_000, seed: int = 0) -> float:
        """SCV of request inter-arrival gaps (c_a² for G/G/c): ``arrival_cv²`` for single-turn requests.

        Multi-turn streams are a superposition of session starts and their delayed turns, with no
        closed form (bursty starts stay bursty unless think times are long), so the SCV is measured
        on ``sample_requests`` sampled requests (deterministic for a given ``seed``).
        """
        if self.turns == 1:
            return self.arrival_cv**2
        from kvplan.workload.summary import arrival_scv

        return arrival_scv(self.sample(sample_requests, seed).arrival_s)

    def prompt_moments(self) -> tuple[float, float]:
        """(E[prompt], E[prompt²]) per request, averaged over turns 1..T (formula in the module docstring)."""
        mean_n, mean_o = self.isl.mean, self.osl.mean
        var_n, var_o = self.isl.second_moment - mean_n**2, self.osl.second_moment - mean_o**2
        k = np.arange(1, self.turns + 1, dtype=np.float64)
        mean_k = self.shared_prefix_tokens + k * mean_n + (k - 1) * mean_o
        second_k = k * var_n + (k - 1) * var_o + mean_k**2
        return float(mean_k.mean()), float(second_k.mean())

    def prompt_scv(self) -> float:
        mean, second = self.prompt_moments()
        return max(second / mean**2 - 1.0, 0.0)

    def reusable_prefix_tokens_mean(self) -> float:
        """Mean prompt tokens a perfect prefix cache could serve: ``S + (T−1)/2 · (μN + μO)``."""
        return self.shared_prefix_tokens + (self.turns - 1) / 2 * (self.isl.mean + self.osl.mean)

    def idle_sessions_mean(self) -> float:
        """Little's law: sessions between turns = session rate × (T − 1) gaps × think time."""
        return self.session_rate_per_s * (self.turns - 1) * self.think_time_s

    def session_cache_tokens_mean(self) -> float:
        """Tokens of private context held for idle sessions: idle sessions × ``T/2 · (μN + μO)``.

        After turn ``k`` a session's private context is ``k (μN + μO)``; idle gaps follow turns
        ``1..T−1`` equally often, averaging ``T/2 · (μN + μO)``. The shared prefix adds ``S`` once.
        """
        if self.turns == 1:
            return 0.0
        return self.idle_sessions_mean() * self.turns / 2 * (self.isl.mean + self.osl.mean)

    def sample(self, n_requests: int, rng: np.random.Generator | int | None = 0):
        """Draw ``n_requests`` requests as a ``Trace`` (arrival order) with prompt ``hash_ids``; see ``sample``."""
        return sample_workload(self, n_requests, rng)


def workload_from_flags(*, rate_per_s: float, isl: str, osl: str, arrival_cv: float = 1.0, turns: int = 1,
                        think_time: str | float = "0s", shared_prefix: str | int = "0") -> Workload:
    """The one builder of a flag workload: a ``Workload`` from the command line's raw values; errors name the flag.

    Every command with workload flags (workload, plan, tier, route) passes them here as written:
    lengths in :func:`parse_length`'s grammar (``2k``, ``1k:8k``, ``mean=…,p99=…``), ``think_time``
    a duration (``30s``; a number is seconds), ``shared_prefix`` a token count (``2k``).
    """
    from pydantic import ValidationError

    from kvplan.units import parse_seconds, parse_tokens

    think_time_s, shared_prefix_tokens = parse_seconds(think_time), parse_tokens(shared_prefix, allow_zero=True)
    flags = {"rate_per_s": "--rate", "arrival_cv": "--arrival-cv", "turns": "--turns",
             "think_time_s": "--think-time", "shared_prefix_tokens": "--shared-prefix"}
    try:
        return Workload(rate_per_s=rate_per_s, isl=parse_length(isl), osl=parse_length(osl), arrival_cv=arrival_cv,
                        turns=turns, think_time_s=think_time_s, shared_prefix_tokens=shared_prefix_tokens)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else ""
        raise InputError(f"{flags.get(field, field)}: {error['msg'].lower()} (got {error.get('input')!r})",
                         "see 'kvplan workload --help'") from None
