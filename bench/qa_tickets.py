"""The second domain of bench/qa.py: support tickets, declared only in configuration.

The bench creates a ``BENCH_TICKET`` table in the demo database with
deterministic rows (owners are the demo's EMPLOYEE ids, some unassigned),
and declares it as a SQL-query source named ``tickets`` with the meaning
options of docs/sql-sources.md: nothing in the product knows about tickets.
Truth statements read ``VISIBLE_TICKET``: every ticket for managers and
admins; for a developer, theirs and the unassigned ones (a row without an
owner is visible to every caller of a SQL source).
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import sqlalchemy as sa

TICKETS = 600
FIRST_NO = 1000
SEVERITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW")
REGIONS = ("AMER", "EMEA", "APAC")
STATES = ("NEW", "OPEN", "PENDING", "SOLVED")
PRODUCTS = (
    "checkout",
    "login page",
    "mobile app",
    "invoice export",
    "search",
    "reporting dashboard",
    "password reset",
    "webhooks",
    "single sign-on",
    "data import",
)
PROBLEMS = (
    "is slow",
    "returns an error 500",
    "times out",
    "shows the wrong currency",
    "crashes on start",
    "loses the session",
    "sends duplicate e-mails",
    "rejects valid input",
)

SOURCE = {
    "query": "SELECT TICKET_NO AS id, SUBJECT AS title, BODY AS content, SEVERITY AS severity, REGION AS region, "
    "STATE AS state, OPENED AS opened, DUE AS due, OWNER_ID AS owner_id FROM BENCH_TICKET",
    "owner_column": "owner_id",
    "facet_columns": {"severity": "enum", "region": "enum", "state": "enum", "opened": "date", "due": "date"},
    "words": ["case", "cases", "caso", "casos"],
    "lifecycle": "state",
    "done_values": ["SOLVED"],
    "due_facet": "due",
    "facet_cues": {
        "severity": ["severidad", "sev"],
        "region": ["región", "regiones", "zona"],
        "state": ["estado", "estados", "status"],
        "opened": ["opened", "created", "creado", "creados", "creadas", "apertura"],
        "due": ["vence", "vencen", "vencimiento"],
    },
    "display": ["severity", "region", "state", "opened", "due", "owner_id"],
    "max_rows": 200_000,
}

VISIBLE = """WITH VISIBLE_TICKET AS (
  SELECT t.* FROM BENCH_TICKET t
  WHERE EXISTS (SELECT 1 FROM EMPLOYEE e WHERE e.EMPLOYEE_ID = :me
                AND (e.ROLE IN ('manager', 'admin') OR t.OWNER_ID = e.EMPLOYEE_ID OR t.OWNER_ID IS NULL))
)
"""

CREATE = (
    "CREATE TABLE IF NOT EXISTS BENCH_TICKET (TICKET_NO INTEGER PRIMARY KEY, SUBJECT TEXT NOT NULL, "
    "BODY TEXT NOT NULL, SEVERITY TEXT NOT NULL, REGION TEXT NOT NULL, STATE TEXT NOT NULL, OPENED TEXT NOT NULL, "
    "DUE TEXT, OWNER_ID INTEGER)"
)
INSERT = (
    "INSERT INTO BENCH_TICKET (TICKET_NO, SUBJECT, BODY, SEVERITY, REGION, STATE, OPENED, DUE, OWNER_ID) "
    "VALUES (:no, :subject, :body, :severity, :region, :state, :opened, :due, :owner)"
)


def rows(count: int, employees: list[int], today: dt.date, seed: int = 22) -> list[dict[str, Any]]:
    """``count`` deterministic tickets opened in the 120 days before ``today``."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        product, problem = rnd.choice(PRODUCTS), rnd.choice(PROBLEMS)
        opened = today - dt.timedelta(days=rnd.randrange(0, 120))
        due = None if rnd.random() < 0.2 else opened + dt.timedelta(days=rnd.randrange(2, 40))
        state = rnd.choices(STATES, weights=(2, 4, 2, 5))[0]
        out.append(
            {
                "no": FIRST_NO + i,
                "subject": f"The {product} {problem}",
                "body": f"A customer reports that the {product} {problem} since {opened.isoformat()}. "
                f"Steps to reproduce and logs are attached.",
                "severity": rnd.choices(SEVERITIES, weights=(1, 2, 4, 3))[0],
                "region": rnd.choice(REGIONS),
                "state": state,
                "opened": opened.isoformat(),
                "due": due.isoformat() if due else None,
                "owner": None if rnd.random() < 0.1 else rnd.choice(employees),
            }
        )
    return out


def create(conn: sa.Connection, count: int, today: dt.date) -> bool:
    """Create and fill BENCH_TICKET unless it holds ``count`` rows already; True when (re)filled."""
    conn.execute(sa.text(CREATE))
    have = conn.execute(sa.text("SELECT COUNT(*) FROM BENCH_TICKET")).scalar_one()
    if have == count:
        return False
    conn.execute(sa.text("DELETE FROM BENCH_TICKET"))
    employees = [
        int(r[0]) for r in conn.execute(sa.text("SELECT EMPLOYEE_ID FROM EMPLOYEE ORDER BY EMPLOYEE_ID"))
    ]
    conn.execute(sa.text(INSERT), rows(count, employees, today))
    return True
