"""Comparisons on number facets: "orders over 10000", "amount above 5k", "menos de 500", "between 100
and 200".

A source declares a ``number`` facet (an amount, story points); a
comparison phrase becomes a condition on it, as SQL next to the scope like
every other condition (``answers.predicates``: ``gt``, ``lt``, ``ge``,
``le``, ``range``). Which number facet is meant is decided per type
(``targets``): the one whose cue word is next to the phrase, else the type's
only number facet, else nothing is applied and the answer says so.

Sums and averages of a number facet ("total amount of approved orders") are
not computed here: they are the aggregate path's (guarded SQL with a model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_AMOUNT = r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s*([km]\b)?"
# lead words -> op; "between X and Y" / "entre X y Y" are ranges (inclusive)
_LEADS = {
    "gt": (
        "over",
        "above",
        "more than",
        "greater than",
        "higher than",
        "larger than",
        "bigger than",
        "exceeding",
        "mas de",
        "más de",
        "mas que",
        "más que",
        "mayor de",
        "mayor que",
        "mayores de",
        "mayores que",
        "superior a",
        "superiores a",
        "por encima de",
    ),
    "lt": (
        "under",
        "below",
        "less than",
        "fewer than",
        "lower than",
        "smaller than",
        "menos de",
        "menos que",
        "menor de",
        "menor que",
        "menores de",
        "menores que",
        "inferior a",
        "inferiores a",
        "por debajo de",
    ),
    "ge": ("at least", "no less than", "al menos", "como minimo", "como mínimo", "minimo", "mínimo"),
    "le": ("at most", "no more than", "up to", "como maximo", "como máximo", "maximo", "máximo"),
}
_LEAD_OF = {fold_key: op for op, items in _LEADS.items() for fold_key in items}
COMPARISON = re.compile(
    r"\b(" + "|".join(sorted((re.escape(k) for k in _LEAD_OF), key=len, reverse=True)) + r")\s+" + _AMOUNT,
    re.IGNORECASE,
)
# The first amount's suffix is read with its own spaces: "\s*([km]\b)?\s+" split a run of spaces n ways.
BETWEEN = re.compile(
    r"\b(between|entre)\s+"
    + _AMOUNT.replace(r"\s*([km]\b)?", r"(?:\s*([km]\b))?")
    + r"\s+(?:and|y|e)\s+"
    + _AMOUNT,
    re.IGNORECASE,
)
# Words asking for a sum or an average of a number facet (the aggregate path's, never a filter's).
AGGREGATE_WORDS = frozenset(("total", "sum", "suma", "average", "avg", "mean", "promedio", "media", "totals"))


@dataclass(frozen=True)
class Comparison:
    start: int
    end: int
    op: str  # gt | lt | ge | le | range
    values: tuple[float, ...]
    text: str


def _number(digits: str, suffix: str | None) -> float:
    value = float(digits.replace(",", ""))
    if suffix:
        value *= 1_000 if suffix.lower() == "k" else 1_000_000
    return value


def comparisons(text: str) -> list[Comparison]:
    """Every comparison phrase of ``text`` with the number(s) it names, in order."""
    found: list[Comparison] = []
    for m in BETWEEN.finditer(text):
        low, high = sorted((_number(m.group(2), m.group(3)), _number(m.group(4), m.group(5))))
        found.append(Comparison(m.start(), m.end(), "range", (low, high), m.group(0)))
    for m in COMPARISON.finditer(text):
        if any(m.start() < c.end and m.end() > c.start for c in found):
            continue
        op = _LEAD_OF.get(m.group(1).lower(), _LEAD_OF.get(" ".join(m.group(1).lower().split()), "gt"))
        found.append(Comparison(m.start(), m.end(), op, (_number(m.group(2), m.group(3)),), m.group(0)))
    found.sort(key=lambda c: c.start)
    return found
