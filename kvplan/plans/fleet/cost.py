"""GPU prices and what a fleet costs: ``--gpu-cost h100-sxm=2.4,h20=1.0`` (any currency per GPU-hour).

    fleet cost per hour          = GPUs × price per GPU-hour
    output tokens per hour       = λ × E[OSL] × 3600        (every generated token, the first included)
    cost per million output tok. = fleet cost per hour / output tokens per hour × 10⁶

Prices are the user's (cloud list prices, amortised capex, …); kvplan ships none. Between fleets
on different hardware the verdict compares cost when both prices are given, GPUs otherwise.
"""

from __future__ import annotations

import math

from kvplan.errors import InputError


def parse_gpu_cost(text: str | None, cards: tuple = ()) -> dict[str, float]:
    """``'h100-sxm=2.4,h20=1.0'`` → {card name: price per GPU-hour}; names resolve like HARDWARE (aliases too)."""
    if text is None or not str(text).strip():
        return {}
    from kvplan.cards.loader import load_hardware
    from kvplan.units import split_items

    hint = "write --gpu-cost as HARDWARE=PRICE pairs per GPU-hour, e.g. --gpu-cost h100-sxm=2.4,h20=1.0"
    out: dict[str, float] = {}
    for item in split_items(text, what="--gpu-cost"):
        name, sep, price = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--gpu-cost: cannot read '{item.strip()}'", hint)
        try:
            value = float(price)
        except ValueError:
            raise InputError(f"--gpu-cost: '{price.strip()}' is not a number (in '{item.strip()}')", hint) from None
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"--gpu-cost: the price must be > 0 (got '{item.strip()}')", hint)
        out[load_hardware(name.strip(), cards).name] = value
    return out


def cost_fields(total_gpus: int | None, hardware: str, rate_per_s: float, mean_osl: float,
                gpu_cost: dict[str, float]) -> dict:
    """``gpu_cost_per_gpu_hour``, ``fleet_cost_per_hour``, ``cost_per_million_output_tokens`` (None without a price)."""
    price = gpu_cost.get(hardware)
    if price is None or total_gpus is None:
        return {"gpu_cost_per_gpu_hour": price, "fleet_cost_per_hour": None, "cost_per_million_output_tokens": None}
    per_hour = total_gpus * price
    tokens_per_hour = rate_per_s * mean_osl * 3600.0
    return {"gpu_cost_per_gpu_hour": price, "fleet_cost_per_hour": per_hour,
            "cost_per_million_output_tokens": per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else None}
