"""Versioned migrations: fresh apply, re-run, checksum tamper, dry run, resume, Oracle goldens.

Golden files live in ``tests/golden/oracle/``; regenerate them with
``UPDATE_GOLDEN=1 pytest tests/test_migrations.py`` and review the diff.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oracle_rag.config import Settings, load_settings
from oracle_rag.engines.base import SQL_ROOT
from oracle_rag.engines.oracle.engine import OracleEngine
from oracle_rag.engines.sqlite.engine import SqliteEngine
from oracle_rag.errors import ConfigurationError, MigrationError
from oracle_rag.migrations import MigrationRunner, discover, migrate_all
from oracle_rag.sql_scripts import is_plsql, split_oracle_script

GOLDEN_DIR = Path(__file__).resolve().parent / "golden" / "oracle"
ORACLE_URL = "oracle+oracledb://scott@127.0.0.1:1/?service_name=FREEPDB1"
# the shipped embedded-engine versions (later issues add more; tests must not pin the count)
SQLITE_RAG = [m.version for m in discover(SQL_ROOT / "sqlite")]


def assert_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``golden/oracle/<name>``; with UPDATE_GOLDEN=1, rewrite the file."""
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        return
    assert path.is_file(), f"golden file {path} is missing; run with UPDATE_GOLDEN=1 and review it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{name} differs from its golden file (UPDATE_GOLDEN=1 to accept)"


def _settings(tmp_path: Path, **overrides) -> Settings:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    return load_settings(env={}, config_file=empty, data_dir=str(tmp_path / "data"), **overrides)


def _tables(engine: SqliteEngine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")
        return {r[0] for r in rows}


def _history(engine: SqliteEngine, mset: str = "rag") -> list[tuple]:
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.text(
                    "SELECT VERSION, DESCRIPTION, CHECKSUM, STATEMENTS_DONE, SUCCESS "
                    "FROM RAG_SCHEMA_HISTORY WHERE MIGRATION_SET = :m ORDER BY VERSION"
                ),
                {"m": mset},
            )
        ]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[SqliteEngine]:
    eng = SqliteEngine(_settings(tmp_path))
    yield eng
    eng.dispose()


# -- fresh file, re-run ------------------------------------------------------------


def test_fresh_sqlite_file(engine: SqliteEngine, tmp_path: Path) -> None:
    assert not engine.path.exists()
    report = MigrationRunner(engine).migrate()
    assert engine.path == tmp_path / "data" / "oracle-rag.db"
    assert engine.path.is_file()
    assert report.applied == SQLITE_RAG
    assert report.skipped == [] and report.resumed == []
    tables = _tables(engine)
    assert {"RAG_CHUNK", "RAG_DIRTY", "RAG_SCHEMA_HISTORY", "RAG_CHUNK_TERM"} <= tables
    assert not {
        n for n in tables if n.startswith("RAG_CHUNK_FTS")
    }  # V2's FTS5, dropped by V8: nothing read it
    history = _history(engine)
    runner = MigrationRunner(engine)
    assert [(v, d, done, ok) for v, d, _, done, ok in history[:2]] == [
        (1, "rag chunk", 5, 1),
        (2, "keyword search", 5, 1),
    ]
    assert [(v, done, ok) for v, _, _, done, ok in history] == [
        (m.version, len(runner.statements(m)), 1) for m in runner.migrations
    ]
    assert [h[2] for h in history] == [m.checksum for m in runner.migrations]
    assert runner.pending() == []


def test_rerun_is_a_noop(engine: SqliteEngine) -> None:
    MigrationRunner(engine).migrate()
    before = _history(engine)
    messages: list[str] = []
    report = MigrationRunner(engine).migrate(progress=messages.append)
    assert report.applied == [] and report.resumed == []
    assert report.skipped == SQLITE_RAG
    assert messages == []
    assert _history(engine) == before


def test_rerun_in_a_new_engine_on_the_same_file(tmp_path: Path) -> None:
    first = SqliteEngine(_settings(tmp_path))
    MigrationRunner(first).migrate()
    first.dispose()
    second = SqliteEngine(_settings(tmp_path))
    try:
        assert MigrationRunner(second).migrate().skipped == SQLITE_RAG
    finally:
        second.dispose()


def test_progress_messages(engine: SqliteEngine) -> None:
    messages: list[str] = []
    MigrationRunner(engine).migrate(progress=messages.append)
    assert messages[:2] == ["applying rag V1 rag chunk", "applying rag V2 keyword search"]
    assert len(messages) == len(SQLITE_RAG)


def test_demo_set_is_separate(engine: SqliteEngine) -> None:
    demo_versions = [m.version for m in discover(engine.migrations_dir("demo"))]
    assert demo_versions[:1] == [1]
    reports = migrate_all(engine, ("rag", "demo"))
    assert reports["rag"].applied == SQLITE_RAG
    assert reports["demo"].applied == demo_versions
    assert [h[0] for h in _history(engine, "demo")] == demo_versions
    assert [h[0] for h in _history(engine, "rag")] == SQLITE_RAG
    assert migrate_all(engine, ("rag", "demo"))["demo"].skipped == demo_versions


def test_unknown_migration_set(engine: SqliteEngine) -> None:
    with pytest.raises(MigrationError, match="unknown migration set"):
        MigrationRunner(engine, "nope")


def test_rag_tables_work_after_migration(engine: SqliteEngine) -> None:
    MigrationRunner(engine).migrate()
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION) VALUES ('TASK', '1', 'UPSERT')")
        )
        with pytest.raises(sa.exc.IntegrityError):  # the ACTION check constraint exists
            conn.execute(
                sa.text("INSERT INTO RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION) VALUES ('TASK', '1', 'NOPE')")
            )


# -- checksum tamper ---------------------------------------------------------------


def _copy_sql(engine: SqliteEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "sql-copy"
    shutil.copytree(engine.migrations_dir("rag"), copy)
    monkeypatch.setattr(engine, "migrations_dir", lambda migration_set="rag": copy)
    return copy


def test_checksum_tamper_is_refused(engine: SqliteEngine, tmp_path: Path, monkeypatch) -> None:
    copy = _copy_sql(engine, tmp_path, monkeypatch)
    assert MigrationRunner(engine).migrate().applied == SQLITE_RAG
    v1 = copy / "V1__rag_chunk.sql"
    v1.write_text(v1.read_text("utf-8") + "\nCREATE INDEX RAG_CHUNK_SPRINT_IX ON RAG_CHUNK (SPRINT_ID);\n")
    before = _history(engine)
    for call in (lambda r: r.migrate(), lambda r: r.pending()):
        with pytest.raises(MigrationError) as info:
            call(MigrationRunner(engine))
        message = str(info.value)
        assert "V1" in message
        assert "V1__rag_chunk.sql" in message
        assert "must not change" in message
        assert "V2" not in message
    assert _history(engine) == before
    assert "RAG_CHUNK_SPRINT_IX" not in _indexes(engine)


def test_whitespace_change_is_a_change(engine: SqliteEngine, tmp_path: Path, monkeypatch) -> None:
    copy = _copy_sql(engine, tmp_path, monkeypatch)
    MigrationRunner(engine).migrate()
    v2 = copy / "V2__keyword_search.sql"
    v2.write_text(v2.read_text("utf-8") + "\n")
    with pytest.raises(MigrationError, match="V2"):
        MigrationRunner(engine).migrate()


def test_new_version_after_applied_ones(engine: SqliteEngine, tmp_path: Path, monkeypatch) -> None:
    copy = _copy_sql(engine, tmp_path, monkeypatch)
    MigrationRunner(engine).migrate()
    (copy / f"V{SQLITE_RAG[-1] + 1}__sprint_index.sql").write_text(
        "CREATE INDEX RAG_CHUNK_SPRINT_IX ON RAG_CHUNK (SPRINT_ID);\n"
    )
    report = MigrationRunner(engine).migrate()
    assert report.applied == [SQLITE_RAG[-1] + 1] and report.skipped == SQLITE_RAG
    assert "RAG_CHUNK_SPRINT_IX" in _indexes(engine)


def _indexes(engine: SqliteEngine) -> set[str]:
    with engine.connect() as conn:
        return {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")}


def test_duplicate_versions_are_refused(tmp_path: Path) -> None:
    (tmp_path / "V1__a.sql").write_text("SELECT 1;")
    (tmp_path / "V01__b.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="version 1"):
        discover(tmp_path)


def test_discover_orders_by_number_and_ignores_other_files(tmp_path: Path) -> None:
    for name in ("V10__ten.sql", "V2__two.sql", "V1__one.sql", "README.md", "v3__lower.sql", "V4-bad.sql"):
        (tmp_path / name).write_text("SELECT 1;")
    (tmp_path / "demo").mkdir()
    assert [(m.version, m.description) for m in discover(tmp_path)] == [(1, "one"), (2, "two"), (10, "ten")]
    assert discover(tmp_path / "missing") == []


# -- dry run -------------------------------------------------------------------------


def test_dry_run_on_fresh_file(engine: SqliteEngine) -> None:
    out = MigrationRunner(engine).dry_run()
    assert "-- rag V1: rag chunk" in out
    assert "-- rag V2: keyword search" in out
    assert "CREATE TABLE RAG_CHUNK (" in out
    assert "CREATE TABLE RAG_DIRTY (" in out
    assert "CREATE INDEX RAG_DIRTY_PICK_IX ON RAG_DIRTY (ENQUEUED_AT, DIRTY_ID);" in out
    assert "CREATE VIRTUAL TABLE RAG_CHUNK_FTS USING fts5(" in out
    assert ";;" not in out
    assert "\n/" not in out  # SQL*Plus terminators are for Oracle only
    # nothing was applied
    assert "RAG_CHUNK" not in _tables(engine)


def test_dry_run_output_is_a_runnable_sqlite_script(engine: SqliteEngine, tmp_path: Path) -> None:
    import sqlean

    out = MigrationRunner(engine).dry_run()
    conn = sqlean.connect(str(tmp_path / "scratch.db"))
    try:
        conn.executescript(out)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert {"RAG_CHUNK", "RAG_DIRTY", "RAG_CHUNK_TERM"} <= names
    assert not {n for n in names if n.startswith("RAG_CHUNK_FTS")}


def test_dry_run_after_migrate_is_empty(engine: SqliteEngine) -> None:
    MigrationRunner(engine).migrate()
    assert MigrationRunner(engine).dry_run() == ""


def test_oracle_dry_run_when_database_unreachable(tmp_path: Path) -> None:
    pytest.importorskip("oracledb")
    oracle = OracleEngine(_settings(tmp_path, database_url=ORACLE_URL))
    try:
        out = MigrationRunner(oracle).dry_run()
    finally:
        oracle.dispose()
    assert out.startswith("-- rag V1: rag chunk\n\nCREATE TABLE RAG_CHUNK (")
    assert "ORGANIZATION NEIGHBOR PARTITIONS" in out
    assert "WITH TARGET ACCURACY 90;" in out
    assert (
        "INDEXTYPE IS CTXSYS.CONTEXT" not in out and "CTX_DDL.CREATE_PREFERENCE" not in out
    )  # V2/V6 retired
    assert "-- rag V9: drop text index" in out
    for statement in _oracle_statements(_settings(tmp_path, database_url=ORACLE_URL), "V1__rag_chunk.sql"):
        assert statement + ";" in out


def test_retired_versions_accept_the_text_they_replace(tmp_path: Path) -> None:
    """Oracle V2/V6 (the Oracle Text index, dropped by V9) run nothing now; a database that applied
    their earlier text passes the checksum check, any other change is still refused."""
    pytest.importorskip("oracledb")
    oracle = OracleEngine(_settings(tmp_path, database_url=ORACLE_URL))
    try:
        runner = MigrationRunner(oracle)
        retired = {m.version: m for m in runner.migrations if m.replaced_checksums}
        assert sorted(retired) == [2, 6]
        assert all(runner.statements(m) == [] for m in retired.values())
        old = {v: (next(iter(m.replaced_checksums)), 1, True) for v, m in retired.items()}
        runner._check_checksums(old)  # noqa: SLF001 - the check migrate() runs first
        runner._check_checksums({v: (m.checksum, 0, True) for v, m in retired.items()})  # noqa: SLF001
        with pytest.raises(MigrationError, match="applied migrations must not change"):
            runner._check_checksums({2: ("0" * 64, 1, True)})  # noqa: SLF001
        assert not any(
            m.replaced_checksums for m in MigrationRunner(oracle).migrations if m.version not in (2, 6)
        )
    finally:
        oracle.dispose()


# -- resume after half-failure (engines whose DDL commits as it goes) -------------------

HALF_FAILING_V1 = """\
-- statement 1: would fail if re-run (table exists)
CREATE TABLE T_FIRST (ID INTEGER PRIMARY KEY);
-- statement 2: would fail if re-run (primary key)
INSERT INTO T_FIRST (ID) VALUES (1);
-- statement 3: needs a table that is not there yet
INSERT INTO T_LATER (ID) VALUES (42);
-- statement 4
CREATE TABLE T_LAST (ID INTEGER);
"""


class NonTransactionalSqlite(SqliteEngine):
    """SQLite standing in for Oracle: each statement commits on its own."""

    transactional_ddl = False


def _half_failing_engine(cls: type[SqliteEngine], tmp_path: Path) -> SqliteEngine:
    migrations = tmp_path / "half"
    migrations.mkdir()
    (migrations / "V1__half.sql").write_text(HALF_FAILING_V1)
    (migrations / "V2__after.sql").write_text("CREATE TABLE T_V2 (ID INTEGER);\n")
    eng = cls(_settings(tmp_path))
    eng.migrations_dir = lambda migration_set="rag": migrations  # type: ignore[method-assign]
    return eng


def _count(engine: SqliteEngine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar_one())  # noqa: S608


def test_resume_after_half_failure(tmp_path: Path) -> None:
    eng = _half_failing_engine(NonTransactionalSqlite, tmp_path)
    try:
        with pytest.raises(MigrationError) as info:
            MigrationRunner(eng).migrate()
        message = str(info.value)
        assert "rag V1 statement 3" in message
        assert "resumes" in message
        assert "T_LATER" not in message  # the driver's text is not echoed
        # statements 1-2 committed and were recorded; V2 never started
        assert _history(eng) == [(1, "half", MigrationRunner(eng).migrations[0].checksum, 2, 0)]
        assert _count(eng, "T_FIRST") == 1
        assert "T_V2" not in _tables(eng)
        # the dry run shows what is left: statements 3 and 4 of V1, then V2
        dry = MigrationRunner(eng).dry_run()
        assert "T_FIRST" not in dry
        assert "INSERT INTO T_LATER (ID) VALUES (42);" in dry
        assert "CREATE TABLE T_V2" in dry
        assert [m.version for m in MigrationRunner(eng).pending()] == [1, 2]

        # fix the environment, not the file (its checksum is recorded)
        with eng.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE T_LATER (ID INTEGER)")
        messages: list[str] = []
        report = MigrationRunner(eng).migrate(progress=messages.append)
        assert report.resumed == [1]
        assert report.applied == [2]
        assert messages[0] == "applying rag V1 half (resuming at statement 3)"
        assert _count(eng, "T_FIRST") == 1  # statement 2 did not run again
        assert _count(eng, "T_LATER") == 1
        assert {"T_LAST", "T_V2"} <= _tables(eng)
        assert [(v, done, ok) for v, _, _, done, ok in _history(eng)] == [(1, 4, 1), (2, 1, 1)]

        again = MigrationRunner(eng).migrate()
        assert again.skipped == [1, 2] and again.applied == [] and again.resumed == []
    finally:
        eng.dispose()


def test_half_applied_file_must_not_change_either(tmp_path: Path) -> None:
    eng = _half_failing_engine(NonTransactionalSqlite, tmp_path)
    try:
        with pytest.raises(MigrationError):
            MigrationRunner(eng).migrate()
        v1 = eng.migrations_dir("rag") / "V1__half.sql"
        v1.write_text(HALF_FAILING_V1.replace("T_LATER", "T_FIRST"))
        with pytest.raises(MigrationError) as info:
            MigrationRunner(eng).migrate()
        assert "V1" in str(info.value)
        assert "partly applied (2 statements)" in str(info.value)
    finally:
        eng.dispose()


def test_transactional_engine_leaves_no_trace(tmp_path: Path) -> None:
    eng = _half_failing_engine(SqliteEngine, tmp_path)
    try:
        with pytest.raises(MigrationError, match="rag V1 statement 3"):
            MigrationRunner(eng).migrate()
        assert _history(eng) == []
        assert "T_FIRST" not in _tables(eng)
        with eng.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE T_LATER (ID INTEGER)")
        report = MigrationRunner(eng).migrate()
        assert report.applied == [1, 2] and report.resumed == []
        assert _count(eng, "T_FIRST") == 1
    finally:
        eng.dispose()


# -- Oracle rendering: goldens and validation -----------------------------------------------


def _oracle_statements(settings: Settings, filename: str) -> list[str]:
    oracle = OracleEngine(settings)
    template = (oracle.migrations_dir("rag") / filename).read_text("utf-8")
    return oracle.split_script(oracle.render_migration(template))


def _as_script(statements: list[str], header: str) -> str:
    body = "\n\n".join(s + ("\n/" if is_plsql(s) else ";") for s in statements)
    return f"-- {header}\n-- Generated by tests/test_migrations.py; UPDATE_GOLDEN=1 rewrites it.\n\n{body}\n"


GOLDEN_CASES = [
    ("IVF-90", {}),
    ("HNSW-95", {"vector_index_type": "HNSW", "vector_index_accuracy": 95}),
    ("IVF-90-partitions-64", {"vector_index_partitions": 64}),
]


@pytest.mark.parametrize("filename", ["V1__rag_chunk.sql", "V2__keyword_search.sql"])
@pytest.mark.parametrize(("label", "overrides"), GOLDEN_CASES, ids=[c[0] for c in GOLDEN_CASES])
def test_oracle_migration_golden(tmp_path: Path, filename: str, label: str, overrides: dict) -> None:
    settings = _settings(tmp_path, database_url=ORACLE_URL, **overrides)
    statements = _oracle_statements(settings, filename)
    script = _as_script(
        statements,
        f"{filename} rendered for Oracle with vector_index_type={settings.vector_index_type}, "
        f"vector_index_accuracy={settings.vector_index_accuracy}, "
        f"vector_index_partitions={settings.vector_index_partitions}",
    )
    assert_golden(f"{filename.removesuffix('.sql')}.{label}.sql", script)
    # the golden file is itself a script that splits back into the same statements
    assert split_oracle_script(script) == statements
    for sql in statements:
        assert "{{" not in sql and not sql.endswith(";")


def test_oracle_golden_key_lines(tmp_path: Path) -> None:
    ivf = _oracle_statements(_settings(tmp_path, database_url=ORACLE_URL), "V1__rag_chunk.sql")
    assert ivf[-1] == (
        "CREATE VECTOR INDEX RAG_CHUNK_VEC_IX ON RAG_CHUNK (EMBEDDING)\n"
        "  ORGANIZATION NEIGHBOR PARTITIONS\n"
        "  DISTANCE COSINE\n"
        "  WITH TARGET ACCURACY 90"
    )
    hnsw = _oracle_statements(
        _settings(tmp_path, database_url=ORACLE_URL, vector_index_type="hnsw", vector_index_accuracy=95),
        "V1__rag_chunk.sql",
    )
    assert hnsw[-1] == (
        "CREATE VECTOR INDEX RAG_CHUNK_VEC_IX ON RAG_CHUNK (EMBEDDING)\n"
        "  ORGANIZATION INMEMORY NEIGHBOR GRAPH\n"
        "  DISTANCE COSINE\n"
        "  WITH TARGET ACCURACY 95"
    )
    assert ivf[:-1] == hnsw[:-1]
    assert [s.split("(")[0].strip() for s in ivf] == [
        "CREATE TABLE RAG_CHUNK",
        "CREATE INDEX RAG_CHUNK_OWNER_IX ON RAG_CHUNK",
        "CREATE INDEX RAG_CHUNK_PROJECT_IX ON RAG_CHUNK",
        "CREATE TABLE RAG_DIRTY",
        "CREATE INDEX RAG_DIRTY_PICK_IX ON RAG_DIRTY",
        "CREATE VECTOR INDEX RAG_CHUNK_VEC_IX ON RAG_CHUNK",
    ]
    assert "EMBEDDING     VECTOR(384, FLOAT32) NOT NULL" in ivf[0]


def test_every_golden_file_is_used() -> None:
    expected = {
        f"{f.removesuffix('.sql')}.{label}.sql"
        for f in ("V1__rag_chunk.sql", "V2__keyword_search.sql")
        for label, _ in GOLDEN_CASES
    }
    present = {p.name for p in GOLDEN_DIR.glob("*.sql")}
    assert present == expected


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"ORACLE_RAG_VECTOR_INDEX_TYPE": "FLAT"}, "vector_index_type"),
        ({"ORACLE_RAG_VECTOR_INDEX_ACCURACY": "0"}, "vector_index_accuracy"),
        ({"ORACLE_RAG_VECTOR_INDEX_ACCURACY": "101"}, "vector_index_accuracy"),
        ({"ORACLE_RAG_VECTOR_INDEX_ACCURACY": "high"}, "vector_index_accuracy"),
    ],
)
def test_bad_index_settings_fail_at_load(tmp_path: Path, env: dict[str, str], key: str) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    with pytest.raises(ConfigurationError) as info:
        load_settings(env={"ORACLE_RAG_DATABASE_URL": ORACLE_URL, **env}, config_file=empty)
    assert "ORACLE_RAG_" + key.upper() in str(info.value)
    assert "[1, 100]" in str(info.value) or "IVF, HNSW" in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [("vector_index_type", "FLAT"), ("vector_index_accuracy", 0), ("vector_index_accuracy", 101)],
)
def test_bad_index_settings_fail_at_render(tmp_path: Path, field: str, value: Any) -> None:
    # Settings built around the validation (dataclasses.replace does not validate):
    # the renderer checks again before any SQL is produced.
    good = _settings(tmp_path, database_url=ORACLE_URL)
    oracle = OracleEngine(dataclasses.replace(good, **{field: value}))
    template = (oracle.migrations_dir("rag") / "V1__rag_chunk.sql").read_text("utf-8")
    with pytest.raises(ConfigurationError) as info:
        oracle.render_migration(template)
    assert field in str(info.value)
    assert info.value.details["key"] == field
    with pytest.raises(ConfigurationError):
        MigrationRunner(oracle).statements(MigrationRunner(oracle).migrations[0])


def test_unfilled_placeholder_is_refused(tmp_path: Path) -> None:
    oracle = OracleEngine(_settings(tmp_path, database_url=ORACLE_URL))
    with pytest.raises(ConfigurationError, match="VECTOR_INDEX_NEIGHBORS"):
        oracle.render_migration("CREATE TABLE X (A NUMBER) {{VECTOR_INDEX_NEIGHBORS}};")


def test_checksum_covers_the_template_not_the_render(tmp_path: Path) -> None:
    ivf = MigrationRunner(OracleEngine(_settings(tmp_path, database_url=ORACLE_URL)))
    hnsw = MigrationRunner(
        OracleEngine(_settings(tmp_path, database_url=ORACLE_URL, vector_index_type="HNSW"))
    )
    assert [m.checksum for m in ivf.migrations] == [m.checksum for m in hnsw.migrations]
    assert ivf.statements(ivf.migrations[0]) != hnsw.statements(hnsw.migrations[0])
