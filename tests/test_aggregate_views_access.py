"""The reference aggregate views (demo V3) follow the declared policy, not the old fixed rule.

Before, RAG_V_TASK gave every task to an EMPLOYEE.ROLE of literally
``manager`` or ``admin`` and the assigned tasks to anyone else, whatever
``see_all_roles`` said, and ignored failed permission data. Now a row is
visible when the caller sees all under the deployment's ``see_all_roles`` or
when its record passes the one scope predicate. Expectations are computed
from the TASK table here, never through the product's predicate.
"""

from __future__ import annotations

import sqlalchemy as sa
from chat_helpers import ADMIN, DEV_A, MANAGER

from oracle_rag.answering.aggregate import AggregateService
from oracle_rag.callers.caller import Caller


def _count(rag, caller: Caller, view: str = "RAG_V_TASK") -> int:  # type: ignore[no-untyped-def]
    return int(
        AggregateService(rag.engine, rag.settings)
        .run_sql(f"SELECT COUNT(*) AS N FROM {view}", caller)
        .rows[0][0]
    )


def _tasks(rag, assignee: int | None = None) -> int:  # type: ignore[no-untyped-def]
    with rag.engine.connect() as conn:
        if assignee is None:
            return int(conn.execute(sa.text("SELECT COUNT(*) FROM TASK")).scalar_one())
        return int(
            conn.execute(
                sa.text("SELECT COUNT(*) FROM TASK WHERE ASSIGNEE_ID = :a"), {"a": assignee}
            ).scalar_one()
        )


def test_see_all_roles_decides_not_the_literal_manager_role(demo_rag) -> None:
    lead_only = ("lead",)
    manager = Caller(MANAGER, "manager", see_all_roles=lead_only)
    assert _count(demo_rag, manager) == _tasks(demo_rag, MANAGER) < _tasks(demo_rag)
    lead = Caller(
        DEV_A, ["developer", "lead"], see_all_roles=lead_only
    )  # a developer of EMPLOYEE, lead by declaration
    assert _count(demo_rag, lead) == _tasks(demo_rag)
    assert _count(demo_rag, Caller(ADMIN, "admin")) == _tasks(demo_rag)  # the default: manager/admin see all
    stranger = Caller(987654, [], see_all_roles=lead_only)  # a host-authenticated id with no EMPLOYEE row
    assert _count(demo_rag, stranger) == 0 and _count(demo_rag, stranger, "RAG_V_SPRINT") > 0


def test_failed_permission_data_hides_the_rows_from_callers_without_see_all(demo_rag) -> None:
    developer, admin = Caller(DEV_A, "developer"), Caller(ADMIN, "admin")
    assert _count(demo_rag, developer) == _tasks(demo_rag, DEV_A) > 0
    sprints = _count(demo_rag, developer, "RAG_V_SPRINT")
    with demo_rag.engine.begin() as conn:
        demo_rag.engine.set_access_failure(conn, "TASK", "2026-03-01T00:00:00Z", "DATABASE")
    assert _count(demo_rag, developer) == 0
    assert _count(demo_rag, developer, "RAG_V_SPRINT") == sprints  # another source: unaffected
    assert _count(demo_rag, admin) == _tasks(demo_rag)


def test_a_reassignment_rescopes_the_view_through_the_index(demo_rag) -> None:
    """The views read the records' stored access: a reassignment reaches them when it is indexed."""
    developer = Caller(DEV_A, "developer")
    before = _count(demo_rag, developer)
    with demo_rag.engine.connect() as conn:
        task = int(
            conn.execute(
                sa.text("SELECT MIN(TASK_ID) FROM TASK WHERE ASSIGNEE_ID <> :a"), {"a": DEV_A}
            ).scalar_one()
        )
    with demo_rag.engine.begin() as conn:
        conn.execute(sa.text("UPDATE TASK SET ASSIGNEE_ID = :a WHERE TASK_ID = :t"), {"a": DEV_A, "t": task})
        demo_rag.enqueue(conn, "TASK", task)
    assert (
        _count(demo_rag, developer) == before
    )  # not indexed yet: the stored access still says the old owner
    assert not demo_rag.worker().drain().failed_rows
    assert _count(demo_rag, developer) == before + 1 == _tasks(demo_rag, DEV_A)
