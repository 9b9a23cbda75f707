"""Run a guarded query with the database's own defences around it.

Embedded: ``sqlite_executor.SqliteExecutor`` (sealed views, an authorizer
that decides alone, value/row/byte caps, timeout).

Oracle: a separate least-privilege read-only user (SELECT on the views
only), ``SET TRANSACTION READ ONLY``, ``call_timeout``, the caller's id in
``CLIENT_IDENTIFIER`` (read by the views), rows capped at fetch, and the
connection rolled back and reset before it returns to the pool.
"""

from __future__ import annotations

import time
from typing import Any

from ..caller import Caller
from ..errors import DatabaseError, GuardrailError, wrap_driver_error
from . import aggregate_sql as q
from .guard import CheckedQuery
from .results import QueryResult, fetch_capped
from .sqlite_executor import SqliteExecutor

__all__ = ["OracleExecutor", "QueryResult", "SqliteExecutor"]


class OracleExecutor:
    """The Oracle guarded path: a read-only user's pool, read-only transactions."""

    def __init__(self, sa_engine: Any, *, timeout_s: float, row_cap: int, schema: str | None = None,
                 byte_cap: int = 1_000_000) -> None:
        self.sa_engine = sa_engine
        self.byte_cap = byte_cap
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
            columns = [d[0] for d in cur.description or []]
            rows, cap = fetch_capped(cur, self.row_cap, self.byte_cap)
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
        return QueryResult(columns, rows, cap is not None, self.row_cap, (time.monotonic() - started) * 1000,
                           cap=cap, byte_cap=self.byte_cap)
