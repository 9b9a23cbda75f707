"""The guarded executor end to end as a READ ONLY user (Oracle only).

The read-only user reaches the views through private synonyms (created by the test setup as
local/readonly_synonyms.sql does), SET TRANSACTION READ ONLY is tolerated when the user's
READ ONLY status refuses it (ORA-28194), a call timeout stays the error the caller sees and
does not poison the pool, and scope still comes from the views (CLIENT_IDENTIFIER).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from oracle_helpers import OracleTarget, readonly_system

from oracle_rag.answering.aggregate.executors import guarded_executor
from oracle_rag.answering.aggregate.guard import CheckedQuery
from oracle_rag.answering.aggregate.service import AggregateService
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import GuardrailError


@pytest.fixture
def guarded(oracle_system, oracle_target: OracleTarget, tmp_path: Path):  # type: ignore[no-untyped-def]
    system = readonly_system(oracle_system, oracle_target, tmp_path / "guarded")
    yield oracle_system, AggregateService(system.engine, system.settings)
    system.close()


def _visible_tasks(system, caller: Caller) -> int:  # type: ignore[no-untyped-def]
    with system.engine.connect() as conn:
        if caller.sees_all:
            return int(conn.execute(sa.text("SELECT COUNT(*) FROM TASK")).scalar_one())
        return int(
            conn.execute(
                sa.text("SELECT COUNT(*) FROM TASK WHERE ASSIGNEE_ID = :e"), {"e": caller.employee_id}
            ).scalar_one()
        )


def test_guarded_query_runs_as_the_read_only_user_through_synonyms(guarded) -> None:  # type: ignore[no-untyped-def]
    system, service = guarded
    manager = Caller(employee_id=3, role="manager")
    result = service.run_sql("SELECT COUNT(*) AS N FROM RAG_V_TASK", manager)
    assert int(result.rows[0][0]) == _visible_tasks(system, manager)
    with system.engine.connect() as conn:
        developer_id = int(
            conn.execute(
                sa.text("SELECT MIN(EMPLOYEE_ID) FROM EMPLOYEE WHERE ROLE = 'developer'")
            ).scalar_one()
        )
    developer = Caller(employee_id=developer_id, role="developer")
    mine = service.run_sql("SELECT COUNT(*) AS N FROM RAG_V_TASK", developer)
    assert int(mine.rows[0][0]) <= _visible_tasks(system, manager)
    # the session was reset: the next caller on the same pooled connection is not the developer
    again = service.run_sql("SELECT COUNT(*) AS N FROM RAG_V_TASK", manager)
    assert again.rows == result.rows


def test_a_timeout_is_reported_and_the_pool_still_works(guarded) -> None:  # type: ignore[no-untyped-def]
    _system, service = guarded
    executor = guarded_executor(service.engine, ("RAG_V_TASK",), timeout_s=0.3, row_cap=10)
    slow = CheckedQuery(
        "SELECT COUNT(*) AS N FROM RAG_V_TASK a, RAG_V_TASK b, RAG_V_TASK c, RAG_V_TASK d, "
        "RAG_V_TASK e, RAG_V_TASK f",
        ("RAG_V_TASK",),
    )
    manager = Caller(employee_id=3, role="manager")
    with pytest.raises(GuardrailError) as err:
        executor.run(slow, manager.scope())
    assert err.value.message == "query stopped at the 0.3 s timeout"
    for _ in range(3):  # a broken session was discarded, not handed out again
        ok = executor.run(
            CheckedQuery("SELECT COUNT(*) AS N FROM RAG_V_TASK", ("RAG_V_TASK",)), manager.scope()
        )
        assert ok.rows and int(ok.rows[0][0]) >= 0
    executor.sa_engine.dispose()


def test_the_read_only_user_still_cannot_write_through_a_synonym(
    guarded, oracle_target: OracleTarget
) -> None:  # type: ignore[no-untyped-def]
    _system, service = guarded
    executor = service.executor
    raw = executor.sa_engine.raw_connection()
    try:
        cur = raw.driver_connection.cursor()
        with pytest.raises(Exception) as err:
            cur.execute("DELETE FROM RAG_V_TASK")
        assert re.search(r"ORA-(28194|01031|42399|01752)", str(err.value)), str(err.value)
    finally:
        raw.driver_connection.rollback()
        raw.close()
