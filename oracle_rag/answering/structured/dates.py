"""Dates in questions: ISO bounds ("before 2026-04-01") and windows ("this week", "last month").

Which date facet a phrase is about is not decided here: the parser looks for
a cue word of a date facet next to it ("opened before ...", "due this
week"), else uses the type's declared due date (``sources/meanings.py``).
"""

from __future__ import annotations

import datetime as dt
import re

DATE_BOUND = re.compile(
    r"\b(before|until|till|by|no\s+later\s+than|antes\s+del?|hasta\s+el|hasta|after|since|"
    r"from|starting|despu[e\u00e9]s\s+del?|desde\s+el|desde|a\s+partir\s+del?)\s+"
    r"(\d{4}-\d{2}-\d{2})\b",
    re.IGNORECASE,
)
# What each lead word means for its day (the first folded word of the lead):
#   before/antes: earlier than the day (exclusive); until/by/hasta: up to and including it;
#   after/despues: later than the day (exclusive); since/from/desde/a partir de: from it on (inclusive).
BOUND_OPS = {
    "before": "lt",
    "antes": "lt",
    "until": "le",
    "till": "le",
    "by": "le",
    "no": "le",
    "hasta": "le",
    "after": "gt",
    "despues": "gt",
    "since": "ge",
    "from": "ge",
    "starting": "ge",
    "desde": "ge",
    "a": "ge",
}
OPEN_START = "0001-01-01"
OPEN_END = "9999-12-31"


def bound(op: str, day: str) -> tuple[str, str, str]:
    """(condition op, first, last) of a bound: ``lt`` stays exclusive, the others are an inclusive range."""
    when = dt.date.fromisoformat(day)
    if op == "le":
        return "range", OPEN_START, day
    if op == "gt":
        return "range", (when + dt.timedelta(days=1)).isoformat(), OPEN_END
    if op == "ge":
        return "range", day, OPEN_END
    return "lt", day, day


def window(name: str, today: dt.date) -> tuple[dt.date, dt.date]:
    """The inclusive first and last day of a named window around ``today``."""
    monday = today - dt.timedelta(days=today.weekday())
    first = today.replace(day=1)
    if name == "today":
        return today, today
    if name == "tomorrow":
        return today + dt.timedelta(days=1), today + dt.timedelta(days=1)
    if name == "yesterday":
        return today - dt.timedelta(days=1), today - dt.timedelta(days=1)
    if name == "this_week":
        return monday, monday + dt.timedelta(days=6)
    if name == "next_week":
        return monday + dt.timedelta(days=7), monday + dt.timedelta(days=13)
    if name == "last_week":
        return monday - dt.timedelta(days=7), monday - dt.timedelta(days=1)
    if name == "last_month":
        last = first - dt.timedelta(days=1)
        return last.replace(day=1), last
    if name == "this_year":
        return today.replace(month=1, day=1), today.replace(month=12, day=31)
    nxt = (first + dt.timedelta(days=32)).replace(day=1)
    return first, nxt - dt.timedelta(days=1)
