"""The audit trail (real embedded engine, real chat, real CLI; the clock injected for retention)."""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa

from oracle_rag.answering.chat.answer import Chat
from oracle_rag.callers.access import load_caller
from oracle_rag.callers.audit import ENTRY_POINT, AuditTrail, audit_for
from oracle_rag.system import RagSystem


def _rows(rag: RagSystem) -> list[tuple]:
    audit_for(rag.engine).flush()
    with rag.engine.connect() as conn:
        return conn.execute(
            sa.text(
                "SELECT CALLER_ID, ENTRY_POINT, ACTION, RECORDS, QUESTION FROM RAG_AUDIT ORDER BY AUDIT_ID"
            )
        ).fetchall()


def test_an_answer_records_caller_entry_point_and_citations_not_the_question(demo_rag: RagSystem) -> None:
    with demo_rag.engine.connect() as conn:
        caller = load_caller(conn, 12, demo_rag.engine)
    token = ENTRY_POINT.set("api")
    try:
        answer = Chat(demo_rag).answer("what are my tasks?", caller, None, None, store=False)
    finally:
        ENTRY_POINT.reset(token)
    rows = _rows(demo_rag)
    assert len(rows) == 1
    caller_id, entry, action, records, question = rows[0]
    assert (caller_id, entry, action, question) == (12, "api", "answer", None)
    assert answer.citations and json.loads(records) == [
        f"{c.source_type}#{c.source_id}" for c in answer.citations
    ]


def test_questions_are_kept_only_when_configured(demo_rag: RagSystem, make_settings) -> None:
    rag = RagSystem(make_settings(audit_questions=True))
    try:
        with rag.engine.connect() as conn:
            caller = load_caller(conn, 3, rag.engine)
        Chat(rag).answer("how many tasks are blocked?", caller, None, None, store=False)
        assert _rows(rag)[-1][4] == "how many tasks are blocked?"
        assert _rows(rag)[-1][1] == "python"
    finally:
        rag.close()


def test_a_failed_audit_write_is_counted_and_never_fails_the_answer(demo_rag: RagSystem) -> None:
    with demo_rag.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE RAG_AUDIT RENAME TO RAG_AUDIT_AWAY")
    with demo_rag.engine.connect() as conn:
        caller = load_caller(conn, 12, demo_rag.engine)
    answer = Chat(demo_rag).answer("login timeout", caller, None, None, store=False)
    assert answer.answer
    trail = audit_for(demo_rag.engine)
    trail.flush()
    assert trail.write_failures == 1 and trail.written == 0


def test_retention_prunes_old_rows(demo_rag: RagSystem) -> None:
    now = [dt.datetime(2026, 3, 1, tzinfo=dt.UTC)]
    trail = AuditTrail(demo_rag.engine, demo_rag.settings, clock=lambda: now[0])
    trail.record(5, "search", [("TASK", "1")])
    now[0] += dt.timedelta(days=29)
    trail.record(5, "search", [("TASK", "2")])
    trail.flush()
    now[0] += dt.timedelta(days=2)  # the first is 31 days old now, the second 2
    assert trail.prune() == 1
    assert [r.records for r in trail.list(caller_id=5)] == [["TASK#2"]]


def test_cli_audit_lists_what_the_cli_did(cli, demo_rag: RagSystem) -> None:
    demo_rag.close()
    assert cli("search", "login timeout", "--as", "12").exit_code == 0
    result = cli("audit", "--caller", "12")
    assert result.exit_code == 0, result.output
    line = result.output.strip().splitlines()[0].split("\t")
    assert line[1:4] == ["caller=12", "cli", "search"] and line[4].startswith(
        ("TASK#", "SPRINT#", "PROJECT#")
    )
    assert cli("audit", "--caller", "999", "--since", "1d").output.strip() == "(no audit rows)"


def test_a_closed_system_that_recorded_events_is_freed(make_settings) -> None:
    """The trail and its writer thread hold the engine weakly: a system closed after recording is
    freed (with its model session), and its events were written before it went."""
    import gc
    import weakref

    system = RagSystem(make_settings())
    system.migrate(demo=True)
    audit_for(system.engine).record(7, "search", [("task", "1")])
    audit_for(system.engine).record(7, "search", [("task", "2")])
    system.close()
    rows = RagSystem(make_settings())
    try:
        with rows.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM RAG_AUDIT")).scalar_one() == 2
    finally:
        rows.close()
    engine = weakref.ref(system.engine)
    del system
    gc.collect()
    assert engine() is None
