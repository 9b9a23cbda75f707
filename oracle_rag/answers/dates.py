"""Dates in questions: ISO bounds ("before 2026-04-01") and windows ("this week", "last month").

Which date facet a phrase is about is not decided here: the parser looks for
a cue word of a date facet next to it ("opened before ...", "due this
week"), else uses the type's declared due date (``sources/meanings.py``).
"""

from __future__ import annotations

import datetime as dt
import re

DATE_BOUND = re.compile(r"\b(before|until|by|antes\s+del?|hasta\s+el|hasta|after|since|despu[e\u00e9]s\s+del?|"
                        r"desde\s+el|desde)\s+(\d{4}-\d{2}-\d{2})\b", re.IGNORECASE)
BEFORE_LEADS = ("before", "until", "by", "antes", "hasta")
OPEN_END = "9999-12-31"


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
