"""Every statement SQL-query sources send, in one place.

Three groups:

* **State** (RAG_SQL_SOURCE, RAG_SQL_DOCUMENT, migration V4) on the
  product's own database: one :class:`~oracle_rag.engines.Sql` per
  statement, the engine picks the text. Timestamps travel as ISO-8601 text
  (UTC, microseconds, ``+00:00``); Oracle turns them into ``TIMESTAMP WITH
  TIME ZONE`` with ``TO_TIMESTAMP_TZ`` so no driver time-zone rule applies.
* **Read sessions** on the source's database: the statements that make a
  read read-only and bounded in time, per SQLAlchemy dialect name.
* **Wrappers** around a source's own query for incremental reads. The
  source's query and two validated plain identifiers are the only text put
  into SQL (by :func:`wrap`); the watermark is a ``:named`` bind.

``tests/test_sql_sources_statements.py`` pins every Oracle statement.
"""

from __future__ import annotations

import re

from oracle_rag.engines.statements import Sql

_TS_SQLITE = ":{name}"
_TS_ORACLE = "TO_TIMESTAMP_TZ(:{name}, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6TZH:TZM')"


def _ts(dialect: str, name: str) -> str:
    return (_TS_ORACLE if dialect == "oracle" else _TS_SQLITE).replace("{name}", name)


_STATE_COLUMNS = (
    "SOURCE_NAME, STATUS, DEFINITION_HASH, REFRESH_SEQ, "
    "{LAST_ATTEMPT_AT}, {LAST_REFRESH_AT}, {LAST_FULL_AT},\n"
    "       WATERMARK, WATERMARK_KIND, DOC_COUNT, ROWS_READ, LAST_MODE, LAST_ERROR, LAST_ERROR_CODE"
)


def _state_columns(dialect: str) -> str:
    """Oracle returns the times as plain UTC timestamps, so no driver time-zone rule applies on fetch."""
    text = _STATE_COLUMNS
    for col in ("LAST_ATTEMPT_AT", "LAST_REFRESH_AT", "LAST_FULL_AT"):
        text = text.replace(
            "{" + col + "}", f"SYS_EXTRACT_UTC({col}) AS {col}" if dialect == "oracle" else col
        )
    return text


def _common(dialect: str) -> dict[str, str]:
    now = _ts(dialect, "now")
    columns = _state_columns(dialect)
    return {
        "SOURCE_STATE": f"SELECT {columns}\nFROM RAG_SQL_SOURCE\nWHERE SOURCE_NAME = :name",
        "ALL_SOURCE_STATES": f"SELECT {columns}\nFROM RAG_SQL_SOURCE\nORDER BY SOURCE_NAME",
        "DOCUMENT_HASHES": "SELECT ROW_ID, DOC_HASH FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name",
        "DOCUMENT_METADATA": (
            "SELECT METADATA FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name AND ROW_ID = :row_id"
        ),
        # Optimistic claim: the refresh that read REFRESH_SEQ = :seq applies its
        # changes only if nobody else refreshed in between; the UPDATE also takes
        # the row lock (Oracle) / the write lock (SQLite) for the transaction.
        "CLAIM": (
            "UPDATE RAG_SQL_SOURCE SET REFRESH_SEQ = REFRESH_SEQ + 1\n"
            "WHERE SOURCE_NAME = :name AND REFRESH_SEQ = :seq"
        ),
        "DELETE_DOCUMENT": "DELETE FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name AND ROW_ID = :row_id",
        "DELETE_DOCUMENTS": "DELETE FROM RAG_SQL_DOCUMENT WHERE SOURCE_NAME = :name",
        "DELETE_SOURCE": "DELETE FROM RAG_SQL_SOURCE WHERE SOURCE_NAME = :name",
        "RECORD_SUCCESS": (
            "UPDATE RAG_SQL_SOURCE SET\n"
            "  STATUS = 'ok',\n"
            "  DEFINITION_HASH = :definition_hash,\n"
            f"  LAST_ATTEMPT_AT = {now},\n"
            f"  LAST_REFRESH_AT = {now},\n"
            f"  LAST_FULL_AT = CASE WHEN :full_read = 1 THEN {now} ELSE LAST_FULL_AT END,\n"
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
            f"  LAST_ATTEMPT_AT = {now},\n"
            "  LAST_MODE = :mode,\n"
            "  LAST_ERROR = :error,\n"
            "  LAST_ERROR_CODE = :error_code\n"
            "WHERE SOURCE_NAME = :name"
        ),
    }


_SQLITE = {
    **_common("sqlite"),
    "ENSURE_SOURCE": (
        "INSERT INTO RAG_SQL_SOURCE (SOURCE_NAME) VALUES (:name) ON CONFLICT (SOURCE_NAME) DO NOTHING"
    ),
    "UPSERT_DOCUMENT": """INSERT INTO RAG_SQL_DOCUMENT (SOURCE_NAME, ROW_ID, DOC_HASH, METADATA, UPDATED_AT)
VALUES (:name, :row_id, :doc_hash, :metadata, :now)
ON CONFLICT (SOURCE_NAME, ROW_ID) DO UPDATE SET
  DOC_HASH = excluded.DOC_HASH,
  METADATA = excluded.METADATA,
  UPDATED_AT = excluded.UPDATED_AT""",
}

_ORACLE = {
    **_common("oracle"),
    "ENSURE_SOURCE": """MERGE INTO RAG_SQL_SOURCE t
USING (SELECT :name AS SOURCE_NAME FROM dual) s
ON (t.SOURCE_NAME = s.SOURCE_NAME)
WHEN NOT MATCHED THEN INSERT (SOURCE_NAME) VALUES (s.SOURCE_NAME)""",
    # :metadata is bound as a CLOB (JSON text, checked by IS JSON).
    "UPSERT_DOCUMENT": f"""MERGE INTO RAG_SQL_DOCUMENT t
USING (SELECT :name AS SOURCE_NAME, :row_id AS ROW_ID FROM dual) s
ON (t.SOURCE_NAME = s.SOURCE_NAME AND t.ROW_ID = s.ROW_ID)
WHEN MATCHED THEN UPDATE SET
  t.DOC_HASH = :doc_hash,
  t.METADATA = :metadata,
  t.UPDATED_AT = {_ts("oracle", "now")}
WHEN NOT MATCHED THEN INSERT (SOURCE_NAME, ROW_ID, DOC_HASH, METADATA, UPDATED_AT)
VALUES (s.SOURCE_NAME, s.ROW_ID, :doc_hash, :metadata, {_ts("oracle", "now")})""",
}


def _state(name: str, *, clobs: tuple[str, ...] = ()) -> Sql:
    return Sql(oracle=_ORACLE[name], sqlite=_SQLITE[name], clobs=clobs)


SOURCE_STATE = _state("SOURCE_STATE")
ALL_SOURCE_STATES = _state("ALL_SOURCE_STATES")
DOCUMENT_HASHES = _state("DOCUMENT_HASHES")
DOCUMENT_METADATA = _state("DOCUMENT_METADATA")
CLAIM = _state("CLAIM")
DELETE_DOCUMENT = _state("DELETE_DOCUMENT")
DELETE_DOCUMENTS = _state("DELETE_DOCUMENTS")
DELETE_SOURCE = _state("DELETE_SOURCE")
RECORD_SUCCESS = _state("RECORD_SUCCESS")
RECORD_FAILURE = _state("RECORD_FAILURE")
ENSURE_SOURCE = _state("ENSURE_SOURCE")
UPSERT_DOCUMENT = _state("UPSERT_DOCUMENT", clobs=("metadata",))

# A permission-data failure of a source that left the configuration and has no
# record left (dropped, or never indexed): nothing is hidden by it any more, so
# status and /healthz stop reporting it. A source that left but still has
# records keeps it (fail closed) until `oracle-rag sources drop` removes them.
CLEAR_ORPHAN_ACCESS_FAILURES = Sql.both(
    "DELETE FROM RAG_ACCESS_FAILURE WHERE RAG_ACCESS_FAILURE.SOURCE_TYPE NOT IN :configured "
    "AND NOT EXISTS (SELECT 1 FROM RAG_CHUNK c WHERE c.SOURCE_TYPE = RAG_ACCESS_FAILURE.SOURCE_TYPE)",
    expanding=("configured",),
)

# -- read sessions on a source's database ----------------------------------------
# SQLite: on the raw DBAPI connection, outside any transaction; the previous
# value is read first and put back after the read (see connections.py).
SQLITE_QUERY_ONLY_GET = "PRAGMA query_only"
SQLITE_QUERY_ONLY_ON = "PRAGMA query_only = ON"
SQLITE_QUERY_ONLY_OFF = "PRAGMA query_only = OFF"

# Oracle: must be the transaction's first statement; ended by the rollback.
# The time limit is the connection's call_timeout (per round trip), set and
# restored in Python.
ORACLE_READ_ONLY = "SET TRANSACTION READ ONLY"

# PostgreSQL: both are transaction-scoped, so the rollback restores them.
POSTGRESQL_READ_ONLY = "SET TRANSACTION READ ONLY"
POSTGRESQL_TIMEOUT = "SELECT set_config('statement_timeout', :timeout_ms, true)"

# MySQL/MariaDB: applies to the next transaction only (the read itself).
MYSQL_READ_ONLY = "SET TRANSACTION READ ONLY"

READ_SESSION: dict[str, tuple[str, ...]] = {
    "oracle": (ORACLE_READ_ONLY,),
    "postgresql": (POSTGRESQL_READ_ONLY, POSTGRESQL_TIMEOUT),
    "mysql": (MYSQL_READ_ONLY,),
    "mariadb": (MYSQL_READ_ONLY,),
}

# -- wrappers around a source's own query ----------------------------------------
# The query sits on its own lines so a trailing "-- comment" in it cannot
# swallow the closing parenthesis.
DELTA_TEMPLATE = "SELECT * FROM (\n{query}\n) src WHERE src.{updated_at} >= :watermark"
IDS_TEMPLATE = "SELECT src.{id} FROM (\n{query}\n) src"

# Oracle: a datetime watermark travels as ISO text and becomes a timestamp in
# SQL. Bound as a Python datetime it would go through SQLAlchemy's DateTime ->
# setinputsizes(DATETIME) = DB_TYPE_DATE (no fractional seconds, no zone), and
# python-oracledb sends an aware datetime's wall clock labelled UTC whatever
# its offset (python-oracledb issue #374). An aware watermark is converted to
# UTC first (Watermark.oracle_bind), so the TIMESTAMP WITH TIME ZONE
# comparison with the column is made in UTC; a naive one stays naive
# (TO_TIMESTAMP), so no session time zone enters a naive comparison.
ORACLE_DELTA_TZ_TEMPLATE = DELTA_TEMPLATE.replace(":watermark", _TS_ORACLE.replace("{name}", "watermark"))
ORACLE_DELTA_NAIVE_TEMPLATE = DELTA_TEMPLATE.replace(
    ":watermark", "TO_TIMESTAMP(:watermark, 'YYYY-MM-DD\"T\"HH24:MI:SS.FF6')"
)


_PLAIN_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def is_plain_identifier(name: str) -> bool:
    """Letters, digits and ``_``, not starting with a digit, at most 128 characters."""
    return bool(_PLAIN_IDENTIFIER.match(name))


def wrap(template: str, query: str, **identifiers: str) -> str:
    """A wrapper template filled with a checked query and validated identifiers.

    The query must already have passed :func:`oracle_rag.sources.sql_query.check_query`;
    identifiers are checked here again, so nothing but a plain name reaches the SQL.
    """
    for key, name in identifiers.items():
        if not is_plain_identifier(name):
            raise ValueError(f"{key} must be a plain identifier")
    text = template
    for key, name in identifiers.items():
        text = text.replace("{" + key + "}", name)
    return text.replace("{query}", query)
