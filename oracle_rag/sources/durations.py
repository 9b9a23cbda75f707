"""Durations as people write them in configuration: ``30s``, ``10m``, ``1h``, ``PT30S``.

SQL-query sources take two durations (``refresh`` and ``statement_timeout``).
Both accept the same spellings so an operator never has to remember which
knob wants which unit:

* a bare number: seconds (``30``, ``2.5``);
* one or more number+unit pairs: ``500ms``, ``30s``, ``10m``, ``1h``, ``2d``,
  ``1h30m`` (units ``ms``, ``s``, ``m``, ``h``, ``d``; case ignored);
* ISO-8601 durations: ``PT30S``, ``PT1H30M``, ``P1D``, ``P1DT12H``, ``P2W``.
  Years and months are refused: their length varies.

Anything else is a CONFIGURATION error naming the key, never a guess.
"""

from __future__ import annotations

import re
from typing import Any

from oracle_rag.errors import ConfigurationError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_COMPACT = re.compile(r"^(?:(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*)+$", re.IGNORECASE)
_COMPACT_PART = re.compile(
    r"(?<![\d.])(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)", re.IGNORECASE
)  # a number from its start
_ISO = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)
SPELLINGS = "seconds as a number, 30s / 10m / 1h / 2d / 1h30m, or ISO-8601 like PT30S"


def parse_duration(value: Any, *, key: str) -> float:
    """``value`` in seconds; raises CONFIGURATION naming ``key`` when unreadable."""
    if isinstance(value, bool):
        raise ConfigurationError(f"{key}: expected a duration ({SPELLINGS}), got a boolean", key=key)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value.strip(), key)
    else:
        raise ConfigurationError(f"{key}: expected a duration ({SPELLINGS})", key=key)
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        raise ConfigurationError(f"{key}: expected a non-negative duration", key=key)
    return seconds


def _parse_text(text: str, key: str) -> float:
    if not text:
        raise ConfigurationError(f"{key}: empty duration; expected {SPELLINGS}", key=key)
    try:
        return float(text)
    except ValueError:
        pass
    if _COMPACT.match(text):
        return sum(float(n) * _UNITS[u.lower()] for n, u in _COMPACT_PART.findall(text))
    iso = _ISO.match(text)
    if iso and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        parts = {k: float(v) if v else 0.0 for k, v in iso.groupdict().items()}
        return parts["w"] * 7 * 86400 + parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]
    raise ConfigurationError(
        f"{key}: cannot read {_shown(text)} as a duration; expected {SPELLINGS}", key=key
    )


def _shown(text: str) -> str:
    """Durations are not secrets, but keep the echo short and printable."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text[:40])
    return repr(clean + ("..." if len(text) > 40 else ""))


def checked_duration(value: Any, *, key: str, lo: float, hi: float) -> float:
    """Parse and check ``lo <= seconds <= hi`` (bounds shown in the message)."""
    seconds = parse_duration(value, key=key)
    if not lo <= seconds <= hi:
        raise ConfigurationError(
            f"{key}: {format_seconds(seconds)} is out of range [{format_seconds(lo)}, {format_seconds(hi)}]",
            key=key,
        )
    return seconds


def format_seconds(seconds: float) -> str:
    """A short human form: 30s, 10m, 1h, 1h30m, 1.5s."""
    if seconds < 60 or seconds != int(seconds):
        return f"{seconds:g}s"
    out = []
    rest = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(out)
