"""What the tests of a declared (non-demo) source share: ask as an employee, the rows one may see.

Both `test_answers_sources.py` (tickets) and `test_answers_value_words.py` (purchase orders) declare
a SQL source next to the demo tasks, owned by demo employees, and check answers against the rows.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from oracle_rag.answering.chat import Chat
from oracle_rag.callers.access import load_caller

# the day the demo data is seeded on (tests/conftest.py DEMO_DAY), so "overdue" and "this week" are fixed
TODAY = dt.date(2026, 3, 11)


def visible(rows: list[dict], caller: Any) -> list[dict]:
    """The rows the legacy owner rule shows ``caller``: all for see-all, else own and unowned ones."""
    return [r for r in rows if caller.sees_all or r["owner"] in (None, caller.employee_id)]


def ask(system: Any, question: str, employee: int) -> tuple[Any, Any]:
    """The answer (no model) and the caller, for ``employee`` asking on ``TODAY``."""
    with system.engine.connect() as conn:
        caller = load_caller(conn, employee)
    return Chat(system, None, today=lambda: TODAY).answer(question, caller, store=False), caller


def first_number(text: str) -> int:
    """The first number of an answer's first line (the count a count answer starts with)."""
    match = re.match(r"\D*?(\d+)", text.split("\n", 1)[0])
    assert match is not None, text
    return int(match.group(1))
