"""The optional enqueue triggers: raw writes from outside the application enqueue.

SQLite: installed on a real database, then written to through a bare
``sqlean`` connection (no SQLAlchemy, no product code), as another program
would. Oracle: the script is split with the engine's splitter and checked
for shape (there is no Oracle database here; the integration suite runs it).
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
import sqlean
from writepath_helpers import index_mismatches, queue

from oracle_rag.config import load_settings
from oracle_rag.engines.base import SQL_ROOT
from oracle_rag.errors import MissingTableError
from oracle_rag.indexing import triggers
from oracle_rag.migrations import MIGRATION_SETS, MigrationRunner, discover
from oracle_rag.sql_scripts import split_oracle_script
from oracle_rag.system import RagSystem

TABLES = ("TASK", "TASK_COMMENT", "SPRINT", "PROJECT")


@pytest.fixture
def seeded(rag):
    from oracle_rag.demo.seed import seed

    seed(rag.engine, 12)
    return rag


def raw(rag):
    conn = sqlean.connect(str(rag.engine.path))
    conn.isolation_level = None  # autocommit unless BEGIN
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def take(rag):
    rows = [r[1:4] for r in queue(rag)]
    with rag.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM RAG_DIRTY"))
    return rows


def test_install_reports_every_trigger_and_is_idempotent(seeded):
    names = triggers.trigger_names(seeded.engine)
    assert len(names) == 13
    assert triggers.installed(seeded.engine) == []
    assert triggers.install(seeded.engine) == sorted(names)
    assert triggers.install(seeded.engine) == sorted(names)  # replaces, never duplicates


def test_raw_writes_enqueue_and_uninstall_stops_it(seeded):
    triggers.install(seeded.engine)
    db = raw(seeded)
    db.execute("UPDATE TASK SET TITLE = 'raw edit' WHERE TASK_ID = 1")
    assert take(seeded) == [("TASK", "1", "UPSERT")]
    db.execute(
        "INSERT INTO TASK (TASK_ID, TITLE, STATUS, PRIORITY, PROJECT_ID) VALUES (100, 'x', 'TODO', 'LOW', 1)"
    )
    assert take(seeded) == [("TASK", "100", "UPSERT")]
    db.execute("INSERT INTO TASK_COMMENT (COMMENT_ID, TASK_ID, AUTHOR_ID, BODY) VALUES (9000, 100, 9, 'hi')")
    db.execute("UPDATE TASK_COMMENT SET BODY = 'hello' WHERE COMMENT_ID = 9000")
    db.execute("DELETE FROM TASK_COMMENT WHERE COMMENT_ID = 9000")
    assert take(seeded) == [("TASK", "100", "UPSERT")] * 3
    db.execute("INSERT INTO TASK_COMMENT (COMMENT_ID, TASK_ID, AUTHOR_ID, BODY) VALUES (9001, 100, 9, 'hi')")
    take(seeded)
    db.execute("DELETE FROM TASK WHERE TASK_ID = 100")  # cascades to comment 9001
    rows = take(seeded)
    assert ("TASK", "100", "DELETE") in rows
    assert set(rows) <= {("TASK", "100", "DELETE"), ("TASK", "100", "UPSERT")}
    db.execute("UPDATE SPRINT SET GOAL = 'new goal' WHERE SPRINT_ID = 2")
    db.execute("UPDATE PROJECT SET STATUS = 'CLOSED' WHERE PROJECT_ID = 3")
    db.execute("INSERT INTO PROJECT (PROJECT_ID, NAME, STATUS) VALUES (50, 'New', 'PLANNED')")
    db.execute("INSERT INTO SPRINT (SPRINT_ID, PROJECT_ID, NAME, STATUS) VALUES (500, 50, 'S', 'PLANNED')")
    db.execute("DELETE FROM SPRINT WHERE SPRINT_ID = 500")
    db.execute("DELETE FROM PROJECT WHERE PROJECT_ID = 50")
    assert take(seeded) == [
        ("SPRINT", "2", "UPSERT"),
        ("PROJECT", "3", "UPSERT"),
        ("PROJECT", "50", "UPSERT"),
        ("SPRINT", "500", "UPSERT"),
        ("SPRINT", "500", "DELETE"),
        ("PROJECT", "50", "DELETE"),
    ]

    assert len(triggers.uninstall(seeded.engine)) == 13
    assert triggers.installed(seeded.engine) == []
    db.execute("UPDATE TASK SET TITLE = 'unseen' WHERE TASK_ID = 2")
    db.execute("DELETE FROM TASK_COMMENT WHERE TASK_ID = 3")
    assert take(seeded) == []
    assert triggers.uninstall(seeded.engine) == []  # safe when nothing is installed
    db.close()


def test_renames_fan_out(seeded):
    triggers.install(seeded.engine)
    db = raw(seeded)
    tasks_of_sprint = {
        str(r[0])
        for r in db.execute(
            "SELECT TASK_ID FROM TASK WHERE SPRINT_ID = (SELECT SPRINT_ID FROM TASK WHERE TASK_ID = 1)"
        )
    }
    sprint = db.execute("SELECT SPRINT_ID FROM TASK WHERE TASK_ID = 1").fetchone()[0]
    db.execute("UPDATE SPRINT SET NAME = 'Renamed' WHERE SPRINT_ID = ?", (sprint,))
    rows = take(seeded)
    assert rows[0] == ("SPRINT", str(sprint), "UPSERT")
    assert {r[1] for r in rows[1:]} == tasks_of_sprint and {r[0] for r in rows[1:]} == {"TASK"}
    db.execute(
        "UPDATE SPRINT SET STATUS = CASE STATUS WHEN 'ACTIVE' THEN 'CLOSED' ELSE 'ACTIVE' END "
        "WHERE SPRINT_ID = ?",
        (sprint,),
    )  # the sprint's status is a facet of its tasks
    rows = take(seeded)
    assert rows[0] == ("SPRINT", str(sprint), "UPSERT") and {r[1] for r in rows[1:]} == tasks_of_sprint
    db.execute("UPDATE PROJECT SET NAME = 'Renamed' WHERE PROJECT_ID = 1")
    rows = take(seeded)
    assert {r[0] for r in rows} == {"PROJECT", "SPRINT", "TASK"}
    assert len([r for r in rows if r[0] == "SPRINT"]) == 8
    author = db.execute("SELECT AUTHOR_ID FROM TASK_COMMENT WHERE TASK_ID = 1").fetchone()
    if author is not None:
        db.execute("UPDATE EMPLOYEE SET LAST_NAME = LAST_NAME || ' Jr' WHERE EMPLOYEE_ID = ?", (author[0],))
        assert ("TASK", "1", "UPSERT") in take(seeded)
    db.execute("UPDATE EMPLOYEE SET ROLE = 'manager' WHERE EMPLOYEE_ID = 12")  # not shown in chunks
    assert take(seeded) == []
    db.close()


def test_raw_rollback_enqueues_nothing(seeded):
    triggers.install(seeded.engine)
    db = raw(seeded)
    db.execute("BEGIN")
    db.execute("UPDATE TASK SET TITLE = 'rolled back' WHERE TASK_ID = 1")
    db.execute("ROLLBACK")
    assert take(seeded) == []
    db.close()


def test_worker_drains_trigger_rows_into_a_correct_index(seeded):
    triggers.install(seeded.engine)
    seeded.backfill()
    seeded.worker().drain()
    db = raw(seeded)
    db.execute("UPDATE TASK SET TITLE = 'Changed by a batch job' WHERE TASK_ID = 4")
    db.execute("DELETE FROM TASK WHERE TASK_ID = 5")
    db.execute(
        "INSERT INTO TASK_COMMENT (COMMENT_ID, TASK_ID, AUTHOR_ID, BODY) VALUES (9100, 6, 9, 'from SQL')"
    )
    db.close()
    res = seeded.worker().drain()
    assert res.deleted == 1 and res.embedded == 2
    assert index_mismatches(seeded) == []


def test_install_without_the_tables_fails_cleanly(make_settings, tmp_path):
    system = RagSystem(make_settings(data_dir=str(tmp_path / "bare")))
    system.migrate()  # product tables only: no TASK
    with pytest.raises(MissingTableError) as info:  # said before any statement runs
        triggers.install(system.engine)
    assert "migrate --demo" in str(info.value) and "SQL-query sources need no triggers" in str(info.value)
    assert triggers.installed(system.engine) == []  # SQLite: all or nothing
    system.close()


# --- not migrations --------------------------------------------------------------
@pytest.mark.parametrize("engine_name", ["sqlite", "oracle"])
def test_trigger_scripts_are_not_migrations(engine_name):
    folder = SQL_ROOT / engine_name / "triggers"
    assert (folder / triggers.INSTALL_SCRIPT).is_file() and (folder / triggers.UNINSTALL_SCRIPT).is_file()
    for migration_set in MIGRATION_SETS:
        base = SQL_ROOT / engine_name if migration_set == "rag" else SQL_ROOT / engine_name / migration_set
        for m in discover(base):
            assert m.path.parent == base and "triggers" not in m.path.parts
    assert not any(re.match(r"V\d+__", p.name) for p in folder.iterdir())


def test_migrating_installs_no_enqueue_trigger(rag):
    # `rag` ran every migration of both sets.
    for migration_set in MIGRATION_SETS:
        assert MigrationRunner(rag.engine, migration_set).pending() == []
    assert triggers.installed(rag.engine) == []


# --- the Oracle script -------------------------------------------------------------
def oracle_engine():
    from oracle_rag.engines.oracle.engine import OracleEngine

    return OracleEngine(
        load_settings(env={}, database_url="oracle+oracledb://rag@db:1521/?service_name=FREEPDB1")
    )


def test_oracle_install_script_is_create_or_replace_blocks():
    engine = oracle_engine()
    statements = triggers.install_statements(engine)
    assert len(statements) == 5
    covered = set()
    for sql in statements:
        assert sql.startswith("CREATE OR REPLACE TRIGGER RAG_")
        assert sql.rstrip().endswith("END;")  # the '/' line is the terminator, not part of the block
        assert "FOR EACH ROW" in sql and "INSERT INTO RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION)" in sql
        covered.add(re.search(r"\bON (\w+)\s*\n", sql).group(1))
    assert covered == set(TABLES) | {"EMPLOYEE"}
    text = (SQL_ROOT / "oracle" / "triggers" / triggers.INSTALL_SCRIPT).read_text()
    assert len(re.findall(r"^/$", text, re.M)) == 5
    assert triggers.trigger_names(engine) == [
        "RAG_TASK_ENQUEUE",
        "RAG_TASK_COMMENT_ENQUEUE",
        "RAG_SPRINT_ENQUEUE",
        "RAG_PROJECT_ENQUEUE",
        "RAG_EMPLOYEE_ENQUEUE",
    ]


def test_oracle_uninstall_drops_what_install_creates():
    engine = oracle_engine()
    drops = triggers.uninstall_statements(engine)
    assert [re.match(r"DROP TRIGGER IF EXISTS (\w+)$", s).group(1) for s in drops] == triggers.trigger_names(
        engine
    )


def test_oracle_statements_are_exposed_for_the_golden_tests():
    stmts = {
        "LIST_TRIGGERS": triggers.LIST_TRIGGERS.oracle or "",
        **{k: v.oracle or "" for k, v in triggers.SCRIPT_STATEMENTS.items()},
    }
    oracle_text = (SQL_ROOT / "oracle" / "triggers" / triggers.INSTALL_SCRIPT).read_text()
    assert {k for k in stmts if k.startswith("CREATE_")} == {
        f"CREATE_{n}"
        for n in [
            "RAG_TASK_ENQUEUE",
            "RAG_TASK_COMMENT_ENQUEUE",
            "RAG_SPRINT_ENQUEUE",
            "RAG_PROJECT_ENQUEUE",
            "RAG_EMPLOYEE_ENQUEUE",
        ]
    }
    assert [v for k, v in stmts.items() if k.startswith("CREATE_")] == split_oracle_script(oracle_text)
    assert ":names" in stmts["LIST_TRIGGERS"]


def test_sqlite_scripts_cover_every_table_and_event(seeded):
    names = triggers.trigger_names(seeded.engine)
    for table in TABLES:
        for suffix in ("AI", "AU", "AD"):
            assert f"RAG_{table}_{suffix}" in names
    drops = triggers.uninstall_statements(seeded.engine)
    assert [re.match(r"DROP TRIGGER IF EXISTS (\w+);$", s).group(1) for s in drops] == names


# -- a trigger that did not compile is not "installed" ------------------------


def test_compile_failure_reads_the_warning_or_user_errors() -> None:
    """python-oracledb raises nothing for CREATE TRIGGER with errors: DPY-7000 on the cursor and
    rows in USER_ERRORS are the signals; either is enough, and the message says where."""
    assert triggers.compile_failure("RAG_TASK_ENQUEUE", None, []) is None
    rows = [
        (3, 5, "PL/SQL: ORA-00942: table or view\n does not exist"),
        (3, 5, "PL/SQL: SQL Statement ignored"),
    ]
    assert triggers.compile_failure("RAG_TASK_ENQUEUE", "DPY-7000", rows) == (
        "trigger RAG_TASK_ENQUEUE did not compile (line 3, position 5: PL/SQL: ORA-00942: table or view does not "
        "exist; line 3, position 5: PL/SQL: SQL Statement ignored)"
    )
    assert triggers.compile_failure("T", "DPY-7000", []) == "trigger T did not compile (DPY-7000)"
    assert triggers.compile_failure("T", None, rows[:1]) is not None  # USER_ERRORS alone


def test_oracle_status_needs_valid_and_enabled() -> None:
    sql = triggers.LIST_TRIGGERS.oracle or ""
    assert (
        "USER_OBJECTS" in sql and "o.OBJECT_TYPE = 'TRIGGER'" in sql and "t.STATUS AS TRIGGER_STATUS" in sql
    )
    assert "ATTRIBUTE = 'ERROR'" in (triggers.TRIGGER_ERRORS.oracle or "")
    # the drop after a failed compile is the uninstall script's own statement for that trigger
    for name in triggers.trigger_names(oracle_engine()):
        assert triggers.SCRIPT_STATEMENTS[f"DROP_{name}"].oracle == f"DROP TRIGGER IF EXISTS {name}"


def test_status_lists_installed_and_exits_0(seeded, tmp_path):  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from oracle_rag.cli import main

    triggers.install(seeded.engine)
    env = {"ORACLE_RAG_DATA_DIR": str(seeded.settings.data_dir)}
    res = CliRunner().invoke(main, ["triggers", "status"], env=env)
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{len(triggers.trigger_names(seeded.engine))} of ")
    assert triggers.broken(seeded.engine) == {}
