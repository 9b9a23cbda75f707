"""The guarded SQL path against the issue's verification list.

Every attack is run through exactly the path model-written SQL takes
(``AggregateService.run_sql``: guard, then the engine's guarded executor) on
a real embedded database with demo data, and must be refused or contained.
Oracle-dialect attacks are checked at the guard here (the Oracle executor's
database-level defences are exercised by the Oracle integration suite).
"""

from __future__ import annotations

import json

import pytest

from oracle_rag.aggregate import REFERENCE_CATALOG, AggregateService, check_sql
from oracle_rag.caller import Caller
from oracle_rag.errors import GuardrailError

VIEWS = REFERENCE_CATALOG.names
DEV = Caller(20, "developer")
ADMIN = Caller(1, "admin")

# (name, sql) — each must raise GuardrailError on the embedded engine.
SQLITE_ATTACKS = [
    ("two statements", "SELECT 1 FROM RAG_V_TASK; DELETE FROM TASK"),
    ("two statements, comment hides", "SELECT 1 FROM RAG_V_TASK /* x */; DROP TABLE TASK -- y"),
    ("insert", "INSERT INTO TASK (TASK_ID) VALUES (99999)"),
    ("update", "UPDATE TASK SET STATUS = 'DONE'"),
    ("delete", "DELETE FROM RAG_CHUNK"),
    ("drop", "DROP TABLE TASK"),
    ("create table", "CREATE TABLE X (A INT)"),
    ("create temp table as", "CREATE TEMP TABLE X AS SELECT * FROM TASK"),
    ("attach", "ATTACH DATABASE '/tmp/evil.db' AS evil"),
    ("detach", "DETACH DATABASE main"),
    ("pragma", "PRAGMA writable_schema = 1"),
    ("pragma table_info", "PRAGMA table_info(TASK)"),
    ("vacuum into", "VACUUM INTO '/tmp/copy.db'"),
    ("copy", "COPY TASK TO '/tmp/x.csv'"),
    ("install", "INSTALL httpfs"),
    ("load", "LOAD 'ext'"),
    ("set", "SET search_path = x"),
    ("load_extension", "SELECT load_extension('/tmp/evil.so')"),
    ("readfile", "SELECT readfile('/etc/passwd')"),
    ("writefile", "SELECT writefile('/tmp/x', 'y')"),
    ("fts3_tokenizer", "SELECT fts3_tokenizer('simple')"),
    ("unknown function", "SELECT sqlite_version()"),
    ("randomblob dos", "SELECT randomblob(1000000000)"),
    ("base table", "SELECT * FROM TASK"),
    ("rag chunk", "SELECT CONTENT FROM RAG_CHUNK"),
    ("fts shadow", "SELECT * FROM RAG_CHUNK_FTS"),
    ("auth tables", "SELECT * FROM RAG_API_TOKEN"),
    ("schema table", "SELECT sql FROM sqlite_schema"),
    ("schema-qualified", "SELECT * FROM main.RAG_V_TASK"),
    ("subquery to base table", "SELECT COUNT(*) FROM RAG_V_TASK WHERE TASK_ID IN (SELECT TASK_ID FROM TASK)"),
    ("cte shadowing a table", "WITH TASK AS (SELECT * FROM TASK) SELECT COUNT(*) FROM TASK"),
    ("caller function directly", "SELECT rag_caller_id() FROM RAG_V_TASK"),
    ("for update", "SELECT * FROM RAG_V_TASK FOR UPDATE"),
    ("select into", "SELECT * INTO X FROM RAG_V_TASK"),
    ("pl/sql block", "BEGIN DELETE FROM TASK; END;"),
    ("call", "CALL evil()"),
    ("fullwidth homoglyph", "ＳＥＬＥＣＴ 1 FROM RAG_V_TASK"),
    ("cyrillic homoglyph", "SELECT COUNT(*) FROM RAG_V_TАSK"),
    ("hint comment trick", "SELECT /*+*/ 1 FROM RAG_V_TASK; DELETE FROM TASK"),
    ("case trick", "dElEtE FROM TASK"),
    ("runaway recursive cte", "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"),
    ("nul byte", "SELECT 1 FROM RAG_V_TASK\x00; DROP TABLE TASK"),
    ("empty", "   "),
    ("garbage", "SELEC * FRM"),
]

# Oracle-dialect attacks: refused by the guard before any database sees them.
ORACLE_ATTACKS = [
    ("plsql anonymous block", "BEGIN EXECUTE IMMEDIATE 'DROP TABLE TASK'; END;"),
    ("declare block", "DECLARE x NUMBER; BEGIN NULL; END;"),
    ("call procedure", "CALL DBMS_SESSION.SET_IDENTIFIER('1')"),
    ("dbms package function", "SELECT DBMS_RANDOM.VALUE FROM dual"),
    ("dbms_session in select", "SELECT DBMS_SESSION.SET_IDENTIFIER('1') FROM dual"),
    ("utl_file", "SELECT UTL_FILE.FOPEN('D', 'f', 'w') FROM dual"),
    ("utl_http", "SELECT UTL_HTTP.REQUEST('http://attacker') FROM dual"),
    ("autonomous-transaction function", "SELECT evil_autonomous_fn() FROM RAG_V_TASK"),
    ("schema function", "SELECT app.evil_fn(1) FROM RAG_V_TASK"),
    ("dblink", "SELECT * FROM RAG_V_TASK@remote_db"),
    ("for update", "SELECT * FROM RAG_V_TASK FOR UPDATE SKIP LOCKED"),
    ("merge", "MERGE INTO TASK t USING dual ON (1=1) WHEN MATCHED THEN UPDATE SET STATUS = 'X'"),
    ("set transaction", "SET TRANSACTION READ WRITE"),
    ("alter session", "ALTER SESSION SET CURRENT_SCHEMA = SYS"),
    ("lock table", "LOCK TABLE TASK IN EXCLUSIVE MODE"),
    ("sys views", "SELECT * FROM SYS.USER$"),
    ("all_users", "SELECT USERNAME FROM ALL_USERS"),
    ("vector aux table", "SELECT * FROM \"VECTOR$RAG_CHUNK_VEC_IX$1_IVF_FLAT_CENTROIDS\""),
    ("two statements", "SELECT 1 FROM dual; DROP TABLE TASK"),
    ("comment trick", "SELECT 1 FROM RAG_V_TASK --\n; DELETE FROM TASK"),
]


@pytest.fixture
def service(demo_rag):
    demo_rag.migrate(demo=True)  # adds the aggregate views to the template DB
    return AggregateService(demo_rag.engine, demo_rag.settings.with_overrides(aggregate_timeout_s=1.0))


@pytest.mark.parametrize(("name", "sql"), SQLITE_ATTACKS, ids=[a[0] for a in SQLITE_ATTACKS])
def test_sqlite_attack_is_refused_or_contained(service, name, sql):
    with pytest.raises(GuardrailError):
        service.run_sql(sql, DEV)


def test_attacks_leave_the_database_unchanged(service, demo_rag):
    import sqlalchemy as sa

    def snapshot():
        with demo_rag.engine.connect() as conn:
            return [conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                    for t in ("TASK", "RAG_CHUNK", "EMPLOYEE", "RAG_DIRTY")]

    before = snapshot()
    for _, sql in SQLITE_ATTACKS:
        with pytest.raises(GuardrailError):
            service.run_sql(sql, DEV)
    assert snapshot() == before


@pytest.mark.parametrize(("name", "sql"), ORACLE_ATTACKS, ids=[a[0] for a in ORACLE_ATTACKS])
def test_oracle_attack_is_refused_by_the_guard(name, sql):
    with pytest.raises(GuardrailError):
        check_sql(sql, VIEWS, "oracle")


def test_attack_counts_are_reported(capsys):
    """Prints the attack counts quoted in the closing note (all must be contained)."""
    contained_oracle = 0
    for _, sql in ORACLE_ATTACKS:
        try:
            check_sql(sql, VIEWS, "oracle")
        except GuardrailError:
            contained_oracle += 1
    assert contained_oracle == len(ORACLE_ATTACKS)
    print(json.dumps({"sqlite_attacks": len(SQLITE_ATTACKS), "oracle_guard_attacks": len(ORACLE_ATTACKS)}))


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM RAG_V_TASK WHERE STATUS = 'BLOCKED' AND SPRINT_ID = 14;",
    "sElEcT ASSIGNEE_ID, AVG(STORY_POINTS) FROM rag_v_task GROUP BY ASSIGNEE_ID",
    "/*+ hint */ SELECT COUNT(*) FROM RAG_V_TASK -- trailing comment",
    "WITH b AS (SELECT * FROM RAG_V_TASK WHERE STATUS = 'BLOCKED') SELECT COUNT(*) FROM b",
    "SELECT s.NAME, COUNT(t.TASK_ID) FROM RAG_V_SPRINT s LEFT JOIN RAG_V_TASK t ON t.SPRINT_ID = s.SPRINT_ID "
    "GROUP BY s.NAME ORDER BY 2 DESC",
    "SELECT 'a;b' AS x, COUNT(*) FROM RAG_V_TASK",
])
def test_legitimate_queries_run(service, sql):
    result = service.run_sql(sql, ADMIN)
    assert result.columns and result.rows is not None


def test_scope_is_applied_inside_the_database(service, demo_rag):
    import sqlalchemy as sa

    sql = "SELECT COUNT(*) FROM RAG_V_TASK"
    with demo_rag.engine.connect() as conn:
        total = conn.execute(sa.text("SELECT COUNT(*) FROM TASK")).scalar_one()
        own = conn.execute(sa.text("SELECT COUNT(*) FROM TASK WHERE ASSIGNEE_ID = 20")).scalar_one()
    assert service.run_sql(sql, ADMIN).rows == [[total]]
    assert service.run_sql(sql, DEV).rows == [[own]]
    # Reading another caller's rows through an aggregate finds nothing.
    other = service.run_sql("SELECT COUNT(*) FROM RAG_V_TASK WHERE ASSIGNEE_ID = 21", DEV)
    assert other.rows == [[0]]


def test_oversized_result_is_capped_and_reported(demo_rag):
    demo_rag.migrate(demo=True)
    svc = AggregateService(demo_rag.engine, demo_rag.settings.with_overrides(aggregate_row_cap=10))
    result = svc.run_sql("SELECT TASK_ID FROM RAG_V_TASK", ADMIN)
    assert len(result.rows) == 10 and result.truncated and result.row_cap == 10
    assert "row cap of 10 reached" in result.answer


def test_runaway_query_stops_at_the_timeout(service):
    with pytest.raises(GuardrailError, match="timeout"):
        service.run_sql("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                        "SELECT COUNT(*) FROM r", ADMIN)


def test_no_caller_is_refused(service):
    from oracle_rag.errors import AccessError

    with pytest.raises(AccessError):
        service.run_sql("SELECT COUNT(*) FROM RAG_V_TASK", None)  # type: ignore[arg-type]
