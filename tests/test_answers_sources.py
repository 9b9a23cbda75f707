"""Any source answers like the reference app: a tickets table declared only in configuration.

A SQL-query source over a table in the demo database, with the meaning
options of docs/sql-sources.md (owner column as "my", ``state`` as the
lifecycle with SOLVED finished, ``opened`` and ``due`` dates with cue
words, record words ``case``/``caso``). Every number is checked against SQL
over the table and the scope rule (managers see every ticket, a developer
theirs and the unassigned ones), next to the demo's tasks.
"""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from chat_helpers import DEV_A, MANAGER
from source_answers_helpers import TODAY, ask, first_number, visible

from oracle_rag.errors import ConfigurationError
from oracle_rag.sources import SqlSource

SOURCE = {
    "query": "SELECT ticket_no AS id, subject AS title, body AS content, severity, region, state, opened, due, "
    "owner_id FROM ticket",
    "owner_column": "owner_id",
    "facet_columns": {"severity": "enum", "region": "enum", "state": "enum", "opened": "date", "due": "date"},
    "words": ["case", "cases", "caso", "casos"],
    "lifecycle": "state",
    "done_values": ["SOLVED"],
    "due_facet": "due",
    "facet_cues": {"severity": ["severidad"], "opened": ["opened", "created", "creados"]},
}
STATES = ("NEW", "OPEN", "PENDING", "SOLVED")


def _rows() -> list[dict]:
    out = []
    for i in range(60):
        opened = TODAY - dt.timedelta(days=(i * 7) % 50)
        out.append(
            {
                "no": 1000 + i,
                "subject": f"Ticket about the {['checkout', 'login', 'search'][i % 3]} page",
                "body": f"Customer report number {i}.",
                "severity": ["CRITICAL", "HIGH", "LOW"][i % 3],
                "region": ["EMEA", "APAC", "AMER"][(i // 3) % 3],
                "state": STATES[(i // 2) % 4],
                "opened": opened.isoformat(),
                "due": None if i % 5 == 0 else (opened + dt.timedelta(days=10)).isoformat(),
                "owner": None if i % 7 == 0 else [DEV_A, MANAGER, 12][i % 3],
            }
        )
    return out


@pytest.fixture
def tickets(demo_rag, make_settings):
    from oracle_rag.system import RagSystem

    rows = _rows()
    with demo_rag.engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE ticket (ticket_no INTEGER PRIMARY KEY, subject TEXT, body TEXT, "
                "severity TEXT, region TEXT, state TEXT, opened TEXT, due TEXT, owner_id INTEGER)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO ticket VALUES (:no, :subject, :body, :severity, :region, :state, :opened, "
                ":due, :owner)"
            ),
            rows,
        )
    system = RagSystem(make_settings(sources={"tickets": SOURCE}), engine=demo_rag.engine)
    system.sql_sources().sync()
    return system, rows


@pytest.mark.parametrize("employee", [MANAGER, DEV_A])
def test_my_lifecycle_and_dates_are_the_sources_own(tickets, employee):
    system, rows = tickets
    answer, caller = ask(system, "how many open tickets do I have?", employee)
    mine = [r for r in visible(rows, caller) if r["owner"] == employee and r["state"] != "SOLVED"]
    assert first_number(answer.answer) == len(mine)
    assert {c["facet"] for f in answer.structured["filters"] for c in f["conditions"]} == {
        "owner_id",
        "state",
    }

    answer, caller = ask(system, "critical tickets opened before 2026-02-20 that are still open", employee)
    want = {
        f"tickets#{r['no']}"
        for r in visible(rows, caller)
        if r["severity"] == "CRITICAL" and r["opened"] < "2026-02-20" and r["state"] != "SOLVED"
    }
    assert {c.source_id for c in answer.citations} == want

    answer, caller = ask(system, "which tickets are overdue?", employee)
    want = {
        f"tickets#{r['no']}"
        for r in visible(rows, caller)
        if r["due"] and r["due"] < TODAY.isoformat() and r["state"] != "SOLVED"
    }
    assert first_number(answer.answer) == len(want)

    answer, caller = ask(system, "¿cuántos tickets hay por severidad?", employee)
    seen = visible(rows, caller)
    assert {g["label"]: g["count"] for g in answer.structured["groups"]["rows"]} == {
        s: sum(1 for r in seen if r["severity"] == s) for s in {r["severity"] for r in seen}
    }


def test_lookups_cite_the_type_as_the_source_names_it(tickets):
    system, rows = tickets
    answer, _ = ask(system, "caso 1004", MANAGER)
    assert answer.citations[0].source_id == "tickets#1004" and answer.answer.startswith("[TICKETS #1004] ")
    assert answer.citations[0].anchor == "[TICKETS #1004]"
    hidden = next(r for r in rows if r["owner"] not in (None, DEV_A))
    answer, _ = ask(system, f"ticket {hidden['no']}", DEV_A)
    missing, _ = ask(system, "ticket 987654", DEV_A)
    assert answer.citations == [] and answer.answer == missing.answer
    # a bare id names a task and a ticket alike: both are listed
    answer, _ = ask(system, "#1001", MANAGER)
    assert {c.source_type for c in answer.citations} == {"TASK", "tickets"} or {
        c.source_type for c in answer.citations
    } == {"tickets"}


def test_several_types_are_each_counted_and_unapplied_phrases_said(tickets, make_settings):
    system, rows = tickets
    answer, caller = ask(system, "how many do I have?", DEV_A)
    assert [t["type"] for t in answer.structured["types"]] == ["TASK", "tickets"]
    n_tickets = sum(1 for r in rows if r["owner"] == DEV_A)
    assert f" and {n_tickets} tickets" in answer.answer.split("\n", 1)[0]

    answer, _ = ask(system, "who has the most open tickets?", MANAGER)
    assert "unassigned" not in answer.answer.split("\n", 1)[0]
    assert all(r["label"] != "unassigned" for r in answer.structured["groups"]["rows"])

    from oracle_rag.system import RagSystem

    plain = dict(
        SOURCE, due_facet=None, facet_columns={"severity": "enum", "state": "enum", "opened": "date"}
    )
    plain.pop("due_facet")
    other = RagSystem(make_settings(sources={"tickets": plain}), engine=system.engine)
    answer, _ = ask(other, "overdue tickets", MANAGER)
    assert "\u201coverdue\u201d does not apply to tickets" in answer.answer
    assert answer.structured["notes"]


def test_meaning_options_are_checked_with_the_key_named():
    base = {k: v for k, v in SOURCE.items() if k != "query"}
    with pytest.raises(ConfigurationError, match="sources.t.lifecycle"):
        SqlSource("t", SOURCE["query"], **dict(base, lifecycle="opened"))
    with pytest.raises(ConfigurationError, match="sources.t.done_values"):
        SqlSource("t", SOURCE["query"], **{k: v for k, v in base.items() if k != "lifecycle"})
    with pytest.raises(ConfigurationError, match="sources.t.due_facet"):
        SqlSource("t", SOURCE["query"], **dict(base, due_facet="severity"))
    with pytest.raises(ConfigurationError, match="sources.t.facet_cues"):
        SqlSource("t", SOURCE["query"], **dict(base, facet_cues={"nope": ["x"]}))
    with pytest.raises(ConfigurationError, match="sources.t.words"):
        SqlSource("t", SOURCE["query"], **dict(base, words="case"))
    source = SqlSource("tickets", SOURCE["query"], **base)
    m = source.meanings
    assert (m.mine, m.lifecycle, m.done, m.due, m.anchor) == (
        "owner_id",
        "state",
        ("SOLVED",),
        "due",
        "TICKETS",
    )
    assert m.nouns["en"] == ("ticket", "tickets") and "caso" in m.words
    assert [f.name for f in source.facets if f.person] == ["owner_id"]


def test_a_cue_of_several_words_names_its_date(tickets, make_settings):
    system, rows = tickets
    from oracle_rag.system import RagSystem

    cued = dict(
        SOURCE, facet_cues={**SOURCE["facet_cues"], "opened": ["fecha de alta"], "due": ["fecha limite"]}
    )
    other = RagSystem(make_settings(sources={"tickets": cued}), engine=system.engine)
    answer, caller = ask(other, "¿cuántos tickets con fecha de alta antes del 2026-02-20?", MANAGER)
    assert first_number(answer.answer) == sum(1 for r in rows if r["opened"] < "2026-02-20")
    answer, caller = ask(other, "¿cuántos tickets con fecha límite antes del 2026-02-20?", MANAGER)
    assert first_number(answer.answer) == sum(1 for r in rows if r["due"] and r["due"] < "2026-02-20")
