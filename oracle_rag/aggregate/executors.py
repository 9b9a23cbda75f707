"""Run a guarded query with the database's own defences around it.

Embedded: a separate connection opened read-only (``mode=ro``), ``PRAGMA
query_only``, an authorizer that allows only SELECT, reads of the allowed
views (and of the tables those views read, when SQLite reports the view as
the reason), recursive CTEs, and allow-listed functions, and denies
everything else (ATTACH, PRAGMA, writes, temp objects, load_extension...);
a progress-handler timeout; a row cap. The caller's id reaches the views
through ``rag_caller_id()``, registered on this connection only.

Oracle: a separate least-privilege read-only user (SELECT on the views
only), ``SET TRANSACTION READ ONLY``, ``call_timeout``, the caller's id in
``CLIENT_IDENTIFIER`` (read by the views), rows capped at fetch, and the
connection rolled back and reset before it returns to the pool.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlean

from ..caller import Caller
from ..errors import ConfigurationError, DatabaseError, GuardrailError, wrap_driver_error
from . import aggregate_sql as q
from .guard import ALLOWED_FUNCTIONS, CheckedQuery


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    row_cap: int
    elapsed_ms: float


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if value is not None and not isinstance(value, int | float | str | bool):
        return str(value)
    return value


def _result(columns: list[str], rows: list[Any], row_cap: int, started: float) -> QueryResult:
    """Rows fetched as ``row_cap + 1`` become at most ``row_cap`` rows and a truncation flag."""
    return QueryResult(columns, [tuple(_jsonable(v) for v in r) for r in rows[:row_cap]], len(rows) > row_cap,
                       row_cap, (time.monotonic() - started) * 1000)


class SqliteExecutor:
    """The embedded engine's guarded, read-only execution path."""

    def __init__(self, db_path: Path, views: tuple[str, ...], *, timeout_s: float, row_cap: int) -> None:
        self.db_path = Path(db_path)
        self.views = {v.upper() for v in views}
        self.timeout_s = timeout_s
        self.row_cap = row_cap

    def _authorizer(self, ctes: frozenset[str], view_tables: frozenset[str]) -> Any:
        def authorize(action: int, arg1: Any, arg2: Any, _db: Any, source: Any) -> int:
            return self._decide(action, arg1, arg2, source, ctes, view_tables)

        return authorize

    def _decide(self, action: int, arg1: Any, arg2: Any, source: Any, ctes: frozenset[str],
                view_tables: frozenset[str]) -> int:
        via_view = isinstance(source, str) and source.upper() in self.views
        if action == sqlean.SQLITE_SELECT:
            return sqlean.SQLITE_OK
        if action == sqlean.SQLITE_READ:
            table = str(arg1 or "").upper()
            # When SQLite flattens a view's EXISTS subquery it reports the read
            # of the view's base table with no column and no view; that read
            # returns no column data, and only the views' own tables qualify.
            column_less = not arg2 and table in view_tables
            ok = table in self.views or via_view or table in ctes or column_less
            return sqlean.SQLITE_OK if ok else sqlean.SQLITE_DENY
        if action == sqlean.SQLITE_FUNCTION:
            name = str(arg2 or "").upper()
            if name == "RAG_CALLER_ID":
                return sqlean.SQLITE_OK if via_view else sqlean.SQLITE_DENY
            return sqlean.SQLITE_OK if name in ALLOWED_FUNCTIONS else sqlean.SQLITE_DENY
        if action == sqlean.SQLITE_RECURSIVE:
            return sqlean.SQLITE_OK
        return sqlean.SQLITE_DENY

    def _view_tables(self, conn: Any) -> frozenset[str]:
        """Base tables the allowed views read (parsed from their definitions)."""
        import sqlglot
        from sqlglot import exp

        tables: set[str] = set()
        for name, sql in conn.execute(q.SQLITE_VIEW_DEFINITIONS):
            if str(name).upper() in self.views and sql:
                tables |= {t.name.upper() for t in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Table)}
        return frozenset(tables)

    def run(self, checked: CheckedQuery, caller: Caller) -> QueryResult:
        if not self.db_path.is_file():
            raise ConfigurationError(f"database file {self.db_path.name} not found", key="data_dir")
        uri = f"file:{quote(str(self.db_path.resolve()))}?mode=ro"
        started = time.monotonic()
        deadline = started + self.timeout_s
        try:
            conn = sqlean.connect(uri, uri=True, check_same_thread=False)
        except sqlean.Error as exc:
            raise wrap_driver_error(exc, "opening the read-only connection") from None
        timed_out = False

        def progress() -> int:
            nonlocal timed_out
            if time.monotonic() > deadline:
                timed_out = True
                return 1
            return 0

        try:
            conn.create_function("rag_caller_id", 0, lambda: caller.employee_id)
            conn.execute(q.SQLITE_QUERY_ONLY)
            # A CTE may be read by name only when no real table or view has
            # that name: `WITH TASK AS (SELECT * FROM TASK)` would otherwise
            # read the real TASK table through the CTE's name.
            objects = {str(r[0]).upper() for r in conn.execute(q.SQLITE_OBJECT_NAMES)}
            shadowing = sorted(set(checked.ctes) & objects)
            if shadowing:
                raise GuardrailError(f"a WITH name shadows a database object: {', '.join(shadowing)}")
            conn.set_authorizer(self._authorizer(frozenset(checked.ctes), self._view_tables(conn)))
            conn.set_progress_handler(progress, 1000)
            cur = conn.execute(checked.sql)
            rows = cur.fetchmany(self.row_cap + 1)
            columns = [d[0] for d in cur.description or []]
        except sqlean.Error as exc:
            if timed_out:
                raise GuardrailError(f"query stopped at the {self.timeout_s:g} s timeout") from None
            if "not authorized" in str(exc):
                raise GuardrailError("the database refused the query: not authorized "
                                     "(only SELECT on the allowed views)") from None
            raise GuardrailError(f"the query failed: {type(exc).__name__}: {str(exc)[:200]}") from None
        finally:
            conn.close()
        return _result(columns, rows, self.row_cap, started)


class OracleExecutor:
    """The Oracle guarded path: a read-only user's pool, read-only transactions."""

    def __init__(self, sa_engine: Any, *, timeout_s: float, row_cap: int, schema: str | None = None) -> None:
        self.sa_engine = sa_engine
        self.schema = schema  # the application schema owning the views (the RO user owns nothing)
        self.timeout_s = timeout_s
        self.row_cap = row_cap

    def run(self, checked: CheckedQuery, caller: Caller) -> QueryResult:
        started = time.monotonic()
        try:
            pooled = self.sa_engine.raw_connection()
        except Exception as exc:
            raise wrap_driver_error(exc, "connecting as the read-only user") from None
        conn = pooled.driver_connection
        own_schema = None
        try:
            own_schema = conn.current_schema or conn.username
            if self.schema:
                conn.current_schema = self.schema.upper()
            conn.client_identifier = str(caller.employee_id)
            conn.call_timeout = int(self.timeout_s * 1000)
            cur = conn.cursor()
            cur.execute(q.ORACLE_SET_READ_ONLY)
            cur.arraysize = min(self.row_cap + 1, 1000)
            cur.execute(checked.sql)
            rows = cur.fetchmany(self.row_cap + 1)
            columns = [d[0] for d in cur.description or []]
            cur.close()
        except Exception as exc:
            wrapped: DatabaseError = wrap_driver_error(exc, "running the guarded query")
            if wrapped.vendor_code in ("DPI-1067", "ORA-03156", "DPY-4024"):
                raise GuardrailError(f"query stopped at the {self.timeout_s:g} s timeout") from None
            raise GuardrailError(f"the database refused or failed the query [{wrapped.driver_class}"
                                 f"{', ' + wrapped.vendor_code if wrapped.vendor_code else ''}]") from None
        finally:
            try:
                conn.rollback()
                conn.call_timeout = 0
                conn.client_identifier = ""
                if self.schema and own_schema:
                    conn.current_schema = own_schema
            finally:
                pooled.close()
        return _result(columns, rows, self.row_cap, started)
