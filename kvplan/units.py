"""Parsing and formatting of the quantities users type and read.

Inside kvplan every quantity is in SI base units: tokens, bytes, seconds, bytes/s, FLOP/s.
Human units live at the edges only:

- token counts: ``128k`` = 131,072 (k = 1024, as in "128k context"), ``1m`` = 1,048,576;
  a plain integer is taken as written (``128000``).
- byte sizes: ``80GB`` = 80 × 10^9, ``80GiB`` = 80 × 2^30 (decimal and binary are never mixed),
  ``4096B`` = 4096 bytes. Typed text needs its unit: ``80`` is refused with "did you mean
  '80GiB'?" (``--gpu-memory 80`` was once 80 bytes); ``0`` alone is accepted. Numbers in YAML and
  JSON files (not strings) are taken as bytes.
- durations: ``2s``, ``50ms``, ``800us``. Typed text needs its unit (``p99<=50`` is refused with
  "did you mean '50ms'?"); ``0`` alone is accepted; numbers in files are seconds.
- bandwidths: ``900GB/s``, ``400Gbps`` (bits); typed text needs its unit, file numbers are bytes/s.
"""

from __future__ import annotations

import math
import re

from kvplan.errors import UnitError

_TOKEN_SUFFIX = {"": 1, "k": 1024, "m": 1024**2}
_BYTE_SUFFIX = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_TIME_SUFFIX = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}
_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)"


def _split(text: str, what: str, suffixes: dict) -> tuple[float, str]:
    match = re.fullmatch(_NUMBER + r"\s*([a-zµ/]*)", text.strip().lower().replace("_", ""))
    if not match or match.group(2) not in suffixes:
        raise UnitError(
            f"cannot read {what} '{text}'",
            _hint(what),
        )
    return float(match.group(1)), match.group(2)


def _hint(what: str) -> str:
    return {
        "a token count": "write tokens as 8192, 8k or 128k (k = 1024)",
        "a byte size": "write sizes as 80GB (10^9), 80GiB (2^30) or 4096B (bytes)",
        "a duration": "write durations as 2s, 50ms or 800us",
        "a bandwidth": "write bandwidths as 900GB/s, 50GiB/s or 400Gbps",
    }[what]


MAX_BYTES = 1 << 60  # an exbibyte
MAX_TOKENS = 1 << 32  # 4.3 billion: far beyond any context or batch, and safe in int64 products


def parse_tokens(text: str | int, *, allow_zero: bool = False, limit: int = MAX_TOKENS) -> int:
    """``'128k'`` → 131072. Token counts are whole, positive (zero only where allowed), at most ``limit``."""
    if isinstance(text, int) and not isinstance(text, bool):
        if abs(text) > limit:
            raise UnitError(f"token count {str(text)[:40]} is more than the {limit:,} kvplan accepts",
                            _hint("a token count"))
        value = float(text)
    else:
        number, suffix = _split(str(text), "a token count", _TOKEN_SUFFIX)
        value = number * _TOKEN_SUFFIX[suffix]
    if not math.isfinite(value) or value != int(value):
        raise UnitError(f"token count '{str(text)[:40]}' is not a whole number", _hint("a token count"))
    if value < 0 or (value == 0 and not allow_zero):
        raise UnitError(f"token count must be {'>= 0' if allow_zero else '> 0'} (got {text})",
                        _hint("a token count"))
    if value > limit:
        raise UnitError(f"token count {str(text)[:40]} is more than the {limit:,} kvplan accepts",
                        _hint("a token count"))
    return int(value)


def _no_unit(text: str, what: str, suggestions: list[str]) -> UnitError:
    shown = text.strip()
    return UnitError(f"{what} '{shown}' has no unit",
                     f"did you mean {' or '.join(repr(s) for s in suggestions)}? {_hint(what)}")


def parse_bytes(text: str | int | float) -> int:
    """``'80GB'`` → 80e9 bytes, ``'80GiB'`` → 80 × 2^30 bytes; ``'80'`` is refused (no unit)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        number, suffix = _split(str(text), "a byte size", _BYTE_SUFFIX)
        if suffix == "" and number != 0:
            shown = str(text).strip()
            raise _no_unit(str(text), "a byte size", [f"{shown}GiB", f"{shown}GB"] if abs(number) < 2**20
                           else [f"{shown}B"])
        value = number * _BYTE_SUFFIX[suffix]
    if not math.isfinite(value) or value < 0 or value > MAX_BYTES:
        raise UnitError(f"byte size must be >= 0 and at most 2^60 bytes (got {str(text)[:40]})", _hint("a byte size"))
    return int(round(value))


def parse_seconds(text: str | int | float) -> float:
    """``'50ms'`` → 0.05; ``'50'`` is refused (no unit)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        number, suffix = _split(str(text), "a duration", _TIME_SUFFIX)
        if suffix == "" and number != 0:
            shown = str(text).strip()
            order = ["ms", "s"] if abs(number) >= 10 else ["s", "ms"]
            raise _no_unit(str(text), "a duration", [shown + u for u in order])
        value = number * _TIME_SUFFIX[suffix]
    if not math.isfinite(value) or value < 0 or value > 1e9:
        raise UnitError(f"duration must be >= 0 and finite (got {str(text)[:40]})", _hint("a duration"))
    return value


def parse_bandwidth(text: str | int | float) -> float:
    """``'900GB/s'`` → 9e11 bytes/s; ``'400Gbps'`` → 5e10 bytes/s."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        raw = str(text).strip().lower().replace(" ", "")
        bits = raw.endswith("bps")
        body = raw[:-3] if bits else raw.removesuffix("/s")
        if bits:
            number, suffix = _split(body + "b", "a bandwidth", _BYTE_SUFFIX)
            value = number * _BYTE_SUFFIX[suffix] / 8
        else:
            number, suffix = _split(body, "a bandwidth", _BYTE_SUFFIX)
            if suffix == "" and not raw.endswith("/s"):
                raise _no_unit(str(text), "a bandwidth", [f"{str(text).strip()}GB/s"])
            value = number * _BYTE_SUFFIX[suffix]
    if not math.isfinite(value) or value <= 0:
        raise UnitError(f"bandwidth must be > 0 (got {text})", _hint("a bandwidth"))
    return value


def split_items(text: str, *, what: str = "value") -> list[str]:
    """``'4k, 32k,128k'`` → ``['4k', '32k', '128k']``: every comma-separated item, stripped.

    Every list flag reads its items here, so every one refuses the same way: an empty list, or
    an empty item (``8,,16``, a trailing ``8,``), is an error naming the flag, with the list
    without its empty items as the did-you-mean (an empty item is a typo, never "skip").
    """
    raw = str(text)
    items = [item.strip() for item in raw.split(",")]
    kept = [item for item in items if item]
    if not kept:
        raise UnitError(f"empty {what} list '{raw}'", "give one value or a comma-separated list")
    if len(kept) < len(items):
        raise UnitError(f"{what}: the list '{raw}' has an empty item",
                        f"did you mean '{','.join(kept)}'? separate the values with single commas")
    return kept


def parse_list(text: str, parse, *, what: str = "value") -> list:
    """``'4k,32k,128k'`` → [4096, 32768, 131072] using ``parse`` for each item (:func:`split_items`)."""
    return [parse(item) for item in split_items(text, what=what)]


def format_bytes(n: float, *, binary: bool = True) -> str:
    """4.29e10 → '40.00 GiB' (binary) or '42.95 GB' (decimal)."""
    units = (["B", "KiB", "MiB", "GiB", "TiB", "PiB"] if binary else ["B", "KB", "MB", "GB", "TB", "PB"])
    step = 1024.0 if binary else 1000.0
    value = float(n)
    for unit in units:
        if abs(value) < step or unit == units[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= step
    raise AssertionError("unreachable")


def format_seconds(s: float) -> str:
    """0.0123 → '12.30 ms'."""
    if s != s:  # NaN
        return "n/a"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def format_tokens(n: int) -> str:
    """131072 → '128k' when exact, else the integer with separators."""
    n = int(n)
    if n >= 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)}m"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"
