"""The guarded SQL path against the attack lists (tests/attack_lists.py).

Every attack is run through exactly the path model-written SQL takes
(``AggregateService.run_sql``: guard, then the engine's guarded executor) on
a real embedded database with demo data, and must be refused or contained.
Oracle-dialect attacks are checked at the guard here (the Oracle executor's
database-level defences are exercised by the Oracle integration suite).
"""

from __future__ import annotations

import json

import pytest
from attack_lists import (
    BYPASS_ATTACKS,
    ORACLE_ATTACKS,
    ORACLE_BYPASS_ATTACKS,
    SQLITE_ATTACKS,
    TEXT_ONLY_ATTACKS,
)

from oracle_rag.answering.aggregate import REFERENCE_CATALOG, AggregateService, check_sql
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import GuardrailError

VIEWS = REFERENCE_CATALOG.names
DEV = Caller(20, "developer")
ADMIN = Caller(1, "admin")


@pytest.fixture
def service(demo_rag):
    demo_rag.migrate(demo=True)  # adds the aggregate views to the template DB
    return AggregateService(demo_rag.engine, demo_rag.settings.with_overrides(aggregate_timeout_s=1.0))


@pytest.fixture
def relaxed(demo_rag):
    """For queries that must succeed: the timeout is only a hang guard, so no load on the machine races it."""
    demo_rag.migrate(demo=True)
    return AggregateService(demo_rag.engine, demo_rag.settings.with_overrides(aggregate_timeout_s=60.0))


ALL_SQLITE = SQLITE_ATTACKS + BYPASS_ATTACKS
TEXT_CHECK = [pytest.param(True, id="text-check"), pytest.param(False, id="database-alone")]


@pytest.fixture(params=TEXT_CHECK)
def text_check(request, monkeypatch):
    """Run a test with the text check on, and again with it off (the database decides alone)."""
    monkeypatch.setattr(AggregateService, "text_check", request.param)
    return request.param


def _snapshot(demo_rag):
    import sqlalchemy as sa

    with demo_rag.engine.connect() as conn:
        tables = [
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT name FROM sqlite_schema WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            )
        ]
        counts = {t: conn.execute(sa.text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one() for t in tables}
        schema = conn.execute(sa.text("SELECT group_concat(sql, ';') FROM sqlite_schema")).scalar_one()
    return counts, schema, demo_rag.settings.sqlite_path.stat().st_size


@pytest.mark.parametrize(("name", "sql"), ALL_SQLITE, ids=[a[0] for a in ALL_SQLITE])
def test_sqlite_attack_is_refused(service, text_check, name, sql):
    with pytest.raises(GuardrailError) as refused:
        service.run_sql(sql, DEV)
    assert refused.value.message.strip()  # every refusal says why


@pytest.mark.parametrize(("name", "sql", "same_as"), TEXT_ONLY_ATTACKS, ids=[a[0] for a in TEXT_ONLY_ATTACKS])
def test_depth_attack_is_refused_by_the_text_check_and_contained_without(
    service, text_check, name, sql, same_as
):
    if text_check:
        with pytest.raises(GuardrailError, match="depth"):
            service.run_sql(sql, DEV)
        return
    assert service.run_sql(sql, DEV).rows == service.run_sql(same_as, DEV).rows


def test_attacks_leave_the_database_unchanged(service, demo_rag, text_check, tmp_path):
    before = _snapshot(demo_rag)
    contained = 0
    for _, sql in ALL_SQLITE:
        with pytest.raises(GuardrailError):
            service.run_sql(sql, DEV)
        contained += 1
    assert _snapshot(demo_rag) == before
    assert not __import__("pathlib").Path("/tmp/oracle-rag-copy.db").exists()
    print(
        json.dumps({"text_check": text_check, "sqlite_attacks_contained": contained, "of": len(ALL_SQLITE)})
    )


def test_without_the_text_check_a_refusal_comes_from_the_database(service, monkeypatch):
    """The switch really removes the text check: the reason is the database's."""
    monkeypatch.setattr(AggregateService, "text_check", False)
    with pytest.raises(GuardrailError, match="database refused the query: reading TASK"):
        service.run_sql("WITH RAG_V_TASK AS (SELECT * FROM TASK) SELECT * FROM RAG_V_TASK", DEV)
    monkeypatch.setattr(AggregateService, "text_check", True)
    with pytest.raises(GuardrailError) as by_text:
        service.run_sql("WITH RAG_V_TASK AS (SELECT * FROM TASK) SELECT * FROM RAG_V_TASK", DEV)
    assert "database refused" not in by_text.value.message


ALL_ORACLE = ORACLE_ATTACKS + ORACLE_BYPASS_ATTACKS


@pytest.mark.parametrize(("name", "sql"), ALL_ORACLE, ids=[a[0] for a in ALL_ORACLE])
def test_oracle_attack_is_refused_by_the_guard(name, sql):
    with pytest.raises(GuardrailError):
        check_sql(sql, VIEWS, "oracle")


def test_attack_counts_are_reported(capsys):
    """Prints the attack counts quoted in the closing note (all must be contained)."""
    contained_oracle = 0
    for _, sql in ALL_ORACLE:
        try:
            check_sql(sql, VIEWS, "oracle")
        except GuardrailError:
            contained_oracle += 1
    assert contained_oracle == len(ALL_ORACLE)
    print(json.dumps({"sqlite_attacks": len(ALL_SQLITE), "oracle_guard_attacks": len(ALL_ORACLE)}))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM RAG_V_TASK WHERE STATUS = 'BLOCKED' AND SPRINT_ID = 14;",
        "sElEcT ASSIGNEE_ID, AVG(STORY_POINTS) FROM rag_v_task GROUP BY ASSIGNEE_ID",
        "/*+ hint */ SELECT COUNT(*) FROM RAG_V_TASK -- trailing comment",
        "WITH b AS (SELECT * FROM RAG_V_TASK WHERE STATUS = 'BLOCKED') SELECT COUNT(*) FROM b",
        "SELECT s.NAME, COUNT(t.TASK_ID) FROM RAG_V_SPRINT s LEFT JOIN RAG_V_TASK t ON t.SPRINT_ID = s.SPRINT_ID "
        "GROUP BY s.NAME ORDER BY 2 DESC",
        "SELECT 'a;b' AS x, COUNT(*) FROM RAG_V_TASK",
        "SELECT '/* not a comment */' AS x, '-- nor this' AS y, COUNT(*) FROM RAG_V_TASK",
        "SELECT COUNT(*) FROM RAG_V_TASK t WHERE EXISTS (SELECT 1 FROM RAG_V_EMPLOYEE e WHERE e.EMPLOYEE_ID = t.ASSIGNEE_ID)",
        "SELECT COUNT(*) FROM RAG_V_TASK WHERE SPRINT_ID IN (SELECT SPRINT_ID FROM RAG_V_SPRINT WHERE STATUS = 'ACTIVE')",
        "SELECT COUNT(*) FROM RAG_V_TASK WHERE NOT EXISTS (SELECT 1 FROM RAG_V_SPRINT s WHERE s.SPRINT_ID = RAG_V_TASK.SPRINT_ID)",
        "SELECT TASK_ID, ROW_NUMBER() OVER (PARTITION BY STATUS ORDER BY TASK_ID) AS RN FROM RAG_V_TASK",
        "SELECT STATUS, RANK() OVER (ORDER BY COUNT(*) DESC) FROM RAG_V_TASK GROUP BY STATUS",
        "SELECT CASE WHEN STORY_POINTS > 3 THEN 'big' ELSE 'small' END AS SIZE, COUNT(*) FROM RAG_V_TASK GROUP BY 1",
        "SELECT e.FIRST_NAME, p.NAME, COUNT(*) FROM RAG_V_TASK t JOIN RAG_V_EMPLOYEE e ON e.EMPLOYEE_ID = t.ASSIGNEE_ID "
        "JOIN RAG_V_PROJECT p ON p.PROJECT_ID = t.PROJECT_ID GROUP BY 1, 2",
        "SELECT (SELECT COUNT(*) FROM RAG_V_TASK) AS TASKS, (SELECT COUNT(*) FROM RAG_V_SPRINT) AS SPRINTS",
        "SELECT COUNT(*) FROM RAG_V_TASK WHERE TITLE LIKE '%invoice%'",
        "WITH a AS (SELECT * FROM RAG_V_TASK), b AS (SELECT * FROM a WHERE STATUS = 'DONE') SELECT COUNT(*) FROM b",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT COUNT(*) FROM n",
        'SELECT "t"."STATUS", COUNT(*) FROM "RAG_V_TASK" AS "t" GROUP BY 1',
        "SELECT COUNT(*) FROM RAG_V_EMPLOYEE",
        "SELECT 1 FROM RAG_V_PROJECT LIMIT 1",
    ],
)
def test_legitimate_queries_run(relaxed, text_check, sql):
    result = relaxed.run_sql(sql, ADMIN)
    assert result.columns and result.rows is not None


def test_scope_is_applied_inside_the_database(relaxed, demo_rag):
    import sqlalchemy as sa

    sql = "SELECT COUNT(*) FROM RAG_V_TASK"
    with demo_rag.engine.connect() as conn:
        total = conn.execute(sa.text("SELECT COUNT(*) FROM TASK")).scalar_one()
        own = conn.execute(sa.text("SELECT COUNT(*) FROM TASK WHERE ASSIGNEE_ID = 20")).scalar_one()
    assert relaxed.run_sql(sql, ADMIN).rows == [[total]]
    assert relaxed.run_sql(sql, DEV).rows == [[own]]
    # Reading another caller's rows through an aggregate finds nothing.
    other = relaxed.run_sql("SELECT COUNT(*) FROM RAG_V_TASK WHERE ASSIGNEE_ID = 21", DEV)
    assert other.rows == [[0]]


def test_oversized_result_is_capped_and_reported(demo_rag):
    demo_rag.migrate(demo=True)
    svc = AggregateService(demo_rag.engine, demo_rag.settings.with_overrides(aggregate_row_cap=10))
    result = svc.run_sql("SELECT TASK_ID FROM RAG_V_TASK", ADMIN)
    assert len(result.rows) == 10 and result.truncated and result.row_cap == 10
    assert "row cap of 10 reached" in result.answer


def test_runaway_query_stops_at_the_timeout(service):
    with pytest.raises(GuardrailError, match="timeout"):
        service.run_sql(
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r", ADMIN
        )


def test_no_caller_is_refused(service):
    from oracle_rag.errors import AccessError

    with pytest.raises(AccessError):
        service.run_sql("SELECT COUNT(*) FROM RAG_V_TASK", None)  # type: ignore[arg-type]


PATHOLOGICAL = {
    "and chain": "SELECT COUNT(*) FROM RAG_V_TASK WHERE " + " AND ".join(["1=1"] * 1200),
    "not chain": "SELECT COUNT(*) FROM RAG_V_TASK WHERE " + "NOT " * 2400 + "1",
    "minus chain": "SELECT " + "- " * 4900 + "1 FROM RAG_V_TASK",
    "tilde chain": "SELECT " + "~" * 9000 + "1 FROM RAG_V_TASK",
    "union chain": " UNION ALL ".join(["SELECT 1 FROM RAG_V_TASK"] * 350),
    "cte chain": "WITH "
    + ", ".join(f"c{i} AS (SELECT * FROM {'c' + str(i - 1) if i else 'RAG_V_TASK'})" for i in range(200))
    + " SELECT COUNT(*) FROM c199",
    "parentheses": "SELECT " + "(" * 3000 + "1" + ")" * 3000,
    "case": "SELECT " + "CASE WHEN 1 THEN " * 500 + "1" + " END" * 500,
    "too long": "SELECT 1 FROM RAG_V_TASK WHERE 1 = 1" + " " * 10_000,
}


@pytest.mark.parametrize("dialect", ["sqlite", "oracle"])
@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_sql_is_a_guardrail_refusal_or_accepted_never_a_crash(dialect, name):
    try:
        check_sql(PATHOLOGICAL[name], VIEWS, dialect)
    except GuardrailError as exc:
        assert exc.message
    if name in ("parentheses", "case", "not chain", "too long"):
        with pytest.raises(GuardrailError, match="depth|size"):
            check_sql(PATHOLOGICAL[name], VIEWS, dialect)


@pytest.mark.parametrize("sql", list(PATHOLOGICAL.values()), ids=list(PATHOLOGICAL))
def test_pathological_sql_through_the_database_alone_is_refused_or_scoped(service, monkeypatch, sql):
    monkeypatch.setattr(AggregateService, "text_check", False)
    try:
        result = service.run_sql(sql, DEV)
    except GuardrailError as exc:
        assert exc.message
        return
    assert len(result.rows) <= result.row_cap


@pytest.mark.parametrize(
    ("sql", "ok"),
    [
        ("WITH a AS (SELECT * FROM RAG_V_TASK) SELECT * FROM a", True),
        ("WITH a AS (SELECT * FROM RAG_V_TASK), b AS (SELECT * FROM a) SELECT * FROM b", True),
        (
            "WITH a AS (SELECT * FROM b), b AS (SELECT * FROM RAG_V_TASK) SELECT * FROM a",
            False,
        ),  # not yet visible
        ("SELECT * FROM (WITH a AS (SELECT * FROM RAG_V_TASK) SELECT * FROM a) x, a", False),  # out of scope
        ("WITH a AS (SELECT * FROM RAG_V_TASK) SELECT * FROM (SELECT * FROM a) x", True),  # inherited
        ("WITH TASK AS (SELECT * FROM TASK) SELECT * FROM TASK", False),  # not recursive
        ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r", True),
        (
            "WITH RECURSIVE r(n) AS (SELECT * FROM r UNION ALL SELECT 1) SELECT * FROM r",
            False,
        ),  # anchor names itself
        (
            "WITH r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
            False,
        ),  # no RECURSIVE
        ('WITH "a" AS (SELECT * FROM RAG_V_TASK) SELECT * FROM A', True),  # SQLite: case-insensitive
    ],
)
def test_cte_names_are_resolved_by_scope_sqlite(sql, ok):
    if ok:
        check_sql(sql, VIEWS, "sqlite")
    else:
        with pytest.raises(GuardrailError, match="not in the allow-list"):
            check_sql(sql, VIEWS, "sqlite")


@pytest.mark.parametrize(
    ("sql", "ok"),
    [
        ('WITH "a" AS (SELECT * FROM RAG_V_TASK) SELECT * FROM "a"', True),
        ('WITH "a" AS (SELECT * FROM RAG_V_TASK) SELECT * FROM a', False),  # Oracle: unquoted a is A
        (
            "WITH r (n) AS (SELECT 1 FROM dual UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
            True,
        ),
        (
            "WITH r AS (SELECT 1 AS n FROM dual UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
            False,
        ),  # no column list
        ("SELECT COUNT(*) FROM RAG_V_TASK t JOIN RAG_V_SPRINT s ON s.SPRINT_ID = t.SPRINT_ID", True),
    ],
)
def test_cte_names_are_resolved_by_scope_oracle(sql, ok):
    if ok:
        check_sql(sql, VIEWS, "oracle")
    else:
        with pytest.raises(GuardrailError, match="not in the allow-list"):
            check_sql(sql, VIEWS, "oracle")


def test_large_values_stop_at_the_byte_cap_and_say_so(demo_rag):
    demo_rag.migrate(demo=True)
    svc = AggregateService(demo_rag.engine, demo_rag.settings.with_overrides(aggregate_byte_cap=2_000))
    result = svc.run_sql("SELECT TITLE FROM RAG_V_TASK", ADMIN)
    fetched = sum(len(r[0].encode()) for r in result.rows)
    assert result.truncated and result.cap == "bytes" and result.byte_cap == 2_000
    assert fetched <= 2_000 and len(result.rows) < 300
    assert "byte cap of 2,000 bytes reached" in result.answer


def test_a_value_over_the_length_limit_fails_fast_with_the_reason(service):
    with pytest.raises(GuardrailError, match="size limit: a value or row exceeded 1,000,000 bytes"):
        service.run_sql(
            "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM r) SELECT max(length(s)) FROM r",
            ADMIN,
        )


def test_concurrent_runaway_queries_each_stop_at_the_timeout(demo_rag):
    """Four hostile queries at once: every one is stopped (by the progress handler or the watchdog)."""
    from concurrent.futures import ThreadPoolExecutor

    demo_rag.migrate(demo=True)
    svc = AggregateService(demo_rag.engine, demo_rag.settings.with_overrides(aggregate_timeout_s=0.5))
    hostile = [
        "SELECT COUNT(*) FROM RAG_V_TASK a, RAG_V_TASK b, RAG_V_TASK c, RAG_V_TASK d, RAG_V_TASK e, "
        "RAG_V_TASK f",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r",
    ]

    def run(sql):
        try:
            svc.run_sql(sql, ADMIN)
        except GuardrailError as exc:
            return exc.message
        return "completed"

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(run, hostile * 2))
    assert all("timeout" in o for o in outcomes), outcomes


@pytest.mark.parametrize(
    "sql",
    [
        "WITH EMPLOYEE AS (SELECT 20 AS EMPLOYEE_ID, 'admin' AS ROLE) SELECT COUNT(*) FROM RAG_V_TASK",
        "WITH TASK AS (SELECT 990001 AS TASK_ID, 'x' AS TITLE, 'TODO' AS STATUS, 'LOW' AS PRIORITY, NULL AS SPRINT_ID, "
        "1 AS PROJECT_ID, 20 AS ASSIGNEE_ID, 1 AS STORY_POINTS, 1 AS ESTIMATED_HOURS, NULL AS DUE_DATE) "
        "SELECT COUNT(*) FROM RAG_V_TASK",
    ],
)
def test_a_cte_named_like_a_table_a_view_reads_does_not_change_the_view(relaxed, text_check, sql):
    """Views resolve their own tables: a WITH name cannot stand in for EMPLOYEE and make a developer admin."""
    assert relaxed.run_sql(sql, DEV).rows == relaxed.run_sql("SELECT COUNT(*) FROM RAG_V_TASK", DEV).rows
