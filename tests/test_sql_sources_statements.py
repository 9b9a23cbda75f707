"""SQL-query sources: every Oracle statement pinned (golden), binds listed, V4 migration shape.

There is no Oracle database here, so the statements are checked as text:
the exact strings below are what is sent; a change must show up in review.
The SQLite twins run in the other test modules.
"""

from __future__ import annotations

import re

import pytest
import sqlglot

from oracle_rag.engines import Sql
from oracle_rag.engines.base import SQL_ROOT
from oracle_rag.sources import sql_query_sql as q
from oracle_rag.sql_scripts import split_oracle_script, split_sqlite_script

# The state statements per engine, plus the Oracle read-session statement and the wrappers.
SQLITE_STATEMENTS = {n: v.sqlite for n, v in vars(q).items() if isinstance(v, Sql) and v.sqlite}
ORACLE_STATEMENTS = {
    **{n: v.oracle for n, v in vars(q).items() if isinstance(v, Sql) and v.oracle},
    "READ_ONLY": q.ORACLE_READ_ONLY,
    "DELTA_TEMPLATE": q.DELTA_TEMPLATE,
    "DELTA_TZ_TEMPLATE": q.ORACLE_DELTA_TZ_TEMPLATE,
    "DELTA_NAIVE_TEMPLATE": q.ORACLE_DELTA_NAIVE_TEMPLATE,
    "IDS_TEMPLATE": q.IDS_TEMPLATE,
}

GOLDEN = {
    "SOURCE_STATE": (
        "SELECT SOURCE_NAME, STATUS, DEFINITION_HASH, REFRESH_SEQ, SYS_EXTRACT_UTC(LAST_ATTEMPT_AT) AS LAST_ATTEMPT_AT, SYS_EXTRACT_UTC(LAST_REFRESH_AT) AS LAST_REFRESH_AT, SYS_EXTRACT_UTC(LAST_FULL_AT) AS LAST_FULL_AT,\n"
        "       WATERMARK, WATERMARK_KIND, DOC_COUNT, ROWS_READ, LAST_MODE, LAST_ERROR, LAST_ERROR_CODE\n"
        "FROM RAG_SQL_SOURCE\n"
        "WHERE SOURCE_NAME = :name"
    ),
    "ALL_SOURCE_STATES": (
        "SELECT SOURCE_NAME, STATUS, DEFINITION_HASH, REFRESH_SEQ, SYS_EXTRACT_UTC(LAST_ATTEMPT_AT) AS LAST_ATTEMPT_AT, SYS_EXTRACT_UTC(LAST_REFRESH_AT) AS LAST_REFRESH_AT, SYS_EXTRACT_UTC(LAST_FULL_AT) AS LAST_FULL_AT,\n"
        "       WATERMARK, WATERMARK_KIND, DOC_COUNT, ROWS_READ, LAST_MODE, LAST_ERROR, LAST_ERROR_CODE\n"
        "FROM RAG_SQL_SOURCE\n"
        "ORDER BY SOURCE_NAME"
    ),
    "DOCUMENT_HASHES": ("SELECT ROW_ID, DOC_HASH FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name"),
    "DOCUMENT_METADATA": (
        "SELECT METADATA FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name AND ROW_ID = :row_id"
    ),
    "CLAIM": (
        "UPDATE RAG_SQL_SOURCE SET REFRESH_SEQ = REFRESH_SEQ + 1\n"
        "WHERE SOURCE_NAME = :name AND REFRESH_SEQ = :seq"
    ),
    "DELETE_DOCUMENT": ("DELETE FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name AND ROW_ID = :row_id"),
    "DELETE_DOCUMENTS": ("DELETE FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name"),
    "DELETE_SOURCE": ("DELETE FROM RAG_SQL_SOURCE WHERE SOURCE_NAME = :name"),
    "RECORD_SUCCESS": (
        "UPDATE RAG_SQL_SOURCE SET\n"
        "  STATUS = 'ok',\n"
        "  DEFINITION_HASH = :definition_hash,\n"
        "  LAST_ATTEMPT_AT = TO_TIMESTAMP_TZ(:now, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM'),\n"
        "  LAST_REFRESH_AT = TO_TIMESTAMP_TZ(:now, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM'),\n"
        "  LAST_FULL_AT = CASE WHEN :full_read = 1 THEN TO_TIMESTAMP_TZ(:now, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM') ELSE LAST_FULL_AT END,\n"
        "  WATERMARK = :watermark,\n"
        "  WATERMARK_KIND = :watermark_kind,\n"
        "  DOC_COUNT = :doc_count,\n"
        "  ROWS_READ = :rows_read,\n"
        "  LAST_MODE = :mode,\n"
        "  LAST_ERROR = NULL,\n"
        "  LAST_ERROR_CODE = NULL\n"
        "WHERE SOURCE_NAME = :name"
    ),
    "RECORD_FAILURE": (
        "UPDATE RAG_SQL_SOURCE SET\n"
        "  STATUS = 'failed',\n"
        "  LAST_ATTEMPT_AT = TO_TIMESTAMP_TZ(:now, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM'),\n"
        "  LAST_MODE = :mode,\n"
        "  LAST_ERROR = :error,\n"
        "  LAST_ERROR_CODE = :error_code\n"
        "WHERE SOURCE_NAME = :name"
    ),
    "ENSURE_SOURCE": (
        "MERGE INTO RAG_SQL_SOURCE t\n"
        "USING (SELECT :name AS SOURCE_NAME FROM dual) s\n"
        "ON (t.SOURCE_NAME = s.SOURCE_NAME)\n"
        "WHEN NOT MATCHED THEN INSERT (SOURCE_NAME) VALUES (s.SOURCE_NAME)"
    ),
    "UPSERT_DOCUMENT": (
        "MERGE INTO RAG_SQL_DOCUMENT t\n"
        "USING (SELECT :name AS SOURCE_NAME, :row_id AS ROW_ID FROM dual) s\n"
        "ON (t.SOURCE_NAME = s.SOURCE_NAME AND t.ROW_ID = s.ROW_ID)\n"
        "WHEN MATCHED THEN UPDATE SET\n"
        "  t.DOC_HASH = :doc_hash,\n"
        "  t.METADATA = :metadata,\n"
        "  t.UPDATED_AT = TO_TIMESTAMP_TZ(:now, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM')\n"
        "WHEN NOT MATCHED THEN INSERT (SOURCE_NAME, ROW_ID, DOC_HASH, METADATA, UPDATED_AT)\n"
        "VALUES (s.SOURCE_NAME, s.ROW_ID, :doc_hash, :metadata, TO_TIMESTAMP_TZ(:now, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM'))"
    ),
    "CLEAR_ORPHAN_ACCESS_FAILURES": (
        "DELETE FROM RAG_ACCESS_FAILURE WHERE RAG_ACCESS_FAILURE.SOURCE_TYPE NOT IN :configured "
        "AND NOT EXISTS (SELECT 1 FROM RAG_CHUNK c WHERE c.SOURCE_TYPE = RAG_ACCESS_FAILURE.SOURCE_TYPE)"
    ),
    "READ_ONLY": ("SET TRANSACTION READ ONLY"),
    "DELTA_TEMPLATE": ("SELECT * FROM (\n{query}\n) src WHERE src.{updated_at} >= :watermark"),
    "IDS_TEMPLATE": ("SELECT src.{id} FROM (\n{query}\n) src"),
    "DELTA_TZ_TEMPLATE": (
        "SELECT * FROM (\n"
        "{query}\n"
        ") src WHERE src.{updated_at} >= TO_TIMESTAMP_TZ(:watermark, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM')"
    ),
    "DELTA_NAIVE_TEMPLATE": (
        "SELECT * FROM (\n"
        "{query}\n"
        ") src WHERE src.{updated_at} >= TO_TIMESTAMP(:watermark, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6')"
    ),
}

BINDS = {
    "SOURCE_STATE": {"name"},
    "ALL_SOURCE_STATES": set(),
    "DOCUMENT_HASHES": {"name"},
    "DOCUMENT_METADATA": {"name", "row_id"},
    "CLAIM": {"name", "seq"},
    "DELETE_DOCUMENT": {"name", "row_id"},
    "DELETE_DOCUMENTS": {"name"},
    "DELETE_SOURCE": {"name"},
    "RECORD_SUCCESS": {
        "name",
        "definition_hash",
        "now",
        "full_read",
        "watermark",
        "watermark_kind",
        "doc_count",
        "rows_read",
        "mode",
    },
    "RECORD_FAILURE": {"name", "now", "mode", "error", "error_code"},
    "ENSURE_SOURCE": {"name"},
    "UPSERT_DOCUMENT": {"name", "row_id", "doc_hash", "metadata", "now"},
    "CLEAR_ORPHAN_ACCESS_FAILURES": {"configured"},
    "READ_ONLY": set(),
    "DELTA_TEMPLATE": {"watermark"},
    "DELTA_TZ_TEMPLATE": {"watermark"},
    "DELTA_NAIVE_TEMPLATE": {"watermark"},
    "IDS_TEMPLATE": set(),
}
_BIND = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def _binds(sql: str) -> set[str]:
    without_literals = re.sub(r"'[^']*'", "''", sql)
    return set(_BIND.findall(without_literals))


def test_every_oracle_statement_is_pinned() -> None:
    assert set(ORACLE_STATEMENTS) == set(GOLDEN)
    for name, text in GOLDEN.items():
        assert ORACLE_STATEMENTS[name] == text, f"{name} changed: update the golden after review"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_binds_are_named_and_listed(name: str) -> None:
    assert _binds(ORACLE_STATEMENTS[name]) == BINDS[name]
    if name in SQLITE_STATEMENTS:
        assert _binds(SQLITE_STATEMENTS[name]) == BINDS[name]


def test_sqlite_twins_cover_every_state_statement() -> None:
    templates = {"READ_ONLY", "DELTA_TEMPLATE", "DELTA_TZ_TEMPLATE", "DELTA_NAIVE_TEMPLATE", "IDS_TEMPLATE"}
    assert set(SQLITE_STATEMENTS) == set(GOLDEN) - templates


KINDS = {
    "Select": (
        "SOURCE_STATE",
        "ALL_SOURCE_STATES",
        "DOCUMENT_HASHES",
        "DOCUMENT_METADATA",
        "DELTA_TEMPLATE",
        "DELTA_TZ_TEMPLATE",
        "DELTA_NAIVE_TEMPLATE",
        "IDS_TEMPLATE",
    ),
    "Update": ("CLAIM", "RECORD_SUCCESS", "RECORD_FAILURE"),
    "Delete": ("DELETE_DOCUMENT", "DELETE_DOCUMENTS", "DELETE_SOURCE", "CLEAR_ORPHAN_ACCESS_FAILURES"),
    "Merge": ("ENSURE_SOURCE", "UPSERT_DOCUMENT"),
    "Set": ("READ_ONLY",),
}


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, names in KINDS.items() for n in names])
def test_oracle_statements_parse_as_what_they_are(kind: str, name: str) -> None:
    sql = GOLDEN[name]
    if "{query}" in sql:
        sql = q.wrap(
            sql, "SELECT 1 AS ID, SYSTIMESTAMP AS UPDATED_AT FROM dual", updated_at="UPDATED_AT", id="ID"
        )
    assert type(sqlglot.parse_one(sql, read="oracle")).__name__ == kind
    assert sum(len(names) for names in KINDS.values()) == len(GOLDEN)


def test_wrap_refuses_anything_but_plain_identifiers() -> None:
    for bad in ("a b", "x;--", '"Quoted"', "1st", "a.b", ""):
        with pytest.raises(ValueError):
            q.wrap(q.IDS_TEMPLATE, "SELECT 1", id=bad)
    assert q.wrap(q.IDS_TEMPLATE, "SELECT {id} AS x", id="ACCOUNT_ID") == (
        "SELECT src.ACCOUNT_ID FROM (\nSELECT {id} AS x\n) src"
    )  # the query itself is never rewritten


def test_read_session_statements_per_dialect() -> None:
    assert q.READ_SESSION["oracle"] == ("SET TRANSACTION READ ONLY",)
    assert q.READ_SESSION["postgresql"] == (
        "SET TRANSACTION READ ONLY",
        "SELECT set_config('statement_timeout', :timeout_ms, true)",
    )
    assert "sqlite" not in q.READ_SESSION  # SQLite uses PRAGMA query_only on the raw connection


def test_v4_migration_shape() -> None:
    oracle = split_oracle_script((SQL_ROOT / "oracle" / "V4__sql_sources.sql").read_text("utf-8"))
    sqlite = split_sqlite_script((SQL_ROOT / "sqlite" / "V4__sql_sources.sql").read_text("utf-8"))
    assert [s.split("(")[0].strip() for s in oracle] == [
        "CREATE TABLE RAG_SQL_SOURCE",
        "CREATE TABLE RAG_SQL_DOCUMENT",
    ]
    assert [s.split("(")[0].strip() for s in sqlite] == [
        "CREATE TABLE RAG_SQL_SOURCE",
        "CREATE TABLE RAG_SQL_DOCUMENT",
    ]
    source, document = oracle
    assert source.count("TIMESTAMP WITH TIME ZONE") == 3
    assert "METADATA     CLOB               NOT NULL" in document
    assert "CHECK (METADATA IS JSON)" in document
    assert "SOURCE_ID" not in document and "ROW_ID       VARCHAR2(256 CHAR)" in document
    for statement in oracle:
        assert not statement.endswith(";")
        assert (
            type(sqlglot.parse_one(statement.replace("IS JSON", "IS NOT NULL"), read="oracle")).__name__
            == "Create"
        )


def test_oracle_watermark_binds_utc_text_with_microseconds() -> None:
    """An aware watermark reaches Oracle as UTC text (python-oracledb would send the wall clock as UTC,
    issue #374) and a naive one as naive text; neither goes through DB_TYPE_DATE (no fractions)."""
    import datetime as dt

    from oracle_rag.sources.sql_query import Watermark

    aware = Watermark.of(
        dt.datetime(2026, 3, 29, 3, 30, 0, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    )
    assert aware.oracle_bind() == (q.ORACLE_DELTA_TZ_TEMPLATE, "2026-03-29T01:30:00.123456+00:00")
    naive = Watermark.of(dt.datetime(2026, 3, 29, 3, 30, 0, 5))
    assert naive.oracle_bind() == (q.ORACLE_DELTA_NAIVE_TEMPLATE, "2026-03-29T03:30:00.000005")
    day = Watermark.of(dt.date(2026, 3, 29))
    assert day.oracle_bind() == (q.ORACLE_DELTA_NAIVE_TEMPLATE, "2026-03-29T00:00:00.000000")
    assert Watermark("text", "2026-03-29 03:30").oracle_bind() == (q.DELTA_TEMPLATE, "2026-03-29 03:30")
