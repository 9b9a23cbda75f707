"""Run a guarded query with the database's own defences around it.

Embedded: ``sqlite_executor.SqliteExecutor`` (sealed views, an authorizer
that decides alone, value/row/byte caps, timeout).

Oracle: a separate least-privilege READ ONLY user (READ on the views only,
reached through private synonyms), ``SET TRANSACTION READ ONLY`` for a user
that is not READ ONLY (ORA-28194 from one that is is tolerated),
``call_timeout``, the caller written by the product's session under an
unguessable token that the read-only session carries in
``CLIENT_IDENTIFIER`` (the views read it: engines/guarded_scope_sql.py),
rows capped at fetch, and the connection rolled back and reset before
it returns to the pool (or discarded when that fails).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from oracle_rag.answering.aggregate import aggregate_sql as q
from oracle_rag.answering.aggregate.guard import CheckedQuery
from oracle_rag.answering.aggregate.results import (
    GuardedExecutor,
    QueryResult,
    caller_scope,
    capped_result,
    fetch_capped,
)
from oracle_rag.answering.aggregate.sqlite_executor import SqliteExecutor
from oracle_rag.engines import Engine, Scope
from oracle_rag.engines.records import ReadOnlyFile, ReadOnlyUser
from oracle_rag.errors import DatabaseError, GuardrailError, wrap_driver_error

__all__ = ["OracleExecutor", "QueryResult", "SqliteExecutor", "guarded_executor"]

log = logging.getLogger("oracle_rag.answering.aggregate")


def guarded_executor(
    engine: Engine, views: tuple[str, ...], *, timeout_s: float, row_cap: int, byte_cap: int = 1_000_000
) -> GuardedExecutor:
    """The executor for ``engine``'s read-only access (``Engine.guarded_access``)."""
    access = engine.guarded_access()
    if isinstance(access, ReadOnlyFile):
        return SqliteExecutor(access.path, views, timeout_s=timeout_s, row_cap=row_cap, byte_cap=byte_cap)
    if isinstance(access, ReadOnlyUser):
        return OracleExecutor(
            access.sa_engine, timeout_s=timeout_s, row_cap=row_cap, byte_cap=byte_cap, owner=engine
        )
    raise TypeError(f"no guarded executor for {type(access).__name__}")


# python-oracledb's codes for "the call ran out of time": thin DPY-4024 (call timeout of N ms
# exceeded), thick DPI-1067; ORA-03156 is the server's own "OCI call timed out".
TIMEOUT_CODES = ("DPY-4024", "DPI-1067", "ORA-03156")
# A READ ONLY user (ALTER USER ... READ ONLY, 23ai) may be refused transaction control with
# ORA-28194; SET TRANSACTION READ ONLY is redundant for it, so exactly that error is tolerated.
READ_ONLY_USER_REFUSAL = "ORA-28194"


class OracleExecutor:
    """The Oracle guarded path: a read-only user's pool, read-only transactions.

    The views live in the application schema. The read-only user reaches them
    through *private synonyms* a DBA creates in its schema
    (``local/readonly_synonyms.sql``: ``CREATE SYNONYM RAG_RO.RAG_V_TASK FOR
    RAG_APP.RAG_V_TASK``), not by switching ``current_schema``: that is an
    ``ALTER SESSION`` a READ ONLY user is not documented to be allowed, and a
    session setting a pooled connection could keep. With synonyms the
    model's unqualified ``FROM RAG_V_TASK`` resolves in the user's own schema.

    The caller: ``owner`` (the product's engine, the schema owner) writes it
    to RAG_GUARDED_CALLER/RAG_GUARDED_GROUP under a fresh 128-bit token and
    commits; the read-only session sets ``CLIENT_IDENTIFIER`` to the token;
    the row is deleted after the query. A read-only session cannot set an
    application context (that needs the schema's package), and a token, not
    the caller's id, is what it carries: a query that managed to change its
    identifier would still have to guess a live token. Without ``owner``
    no row is written and the views return nothing (fail closed).
    """

    def __init__(
        self,
        sa_engine: Any,
        *,
        timeout_s: float,
        row_cap: int,
        byte_cap: int = 1_000_000,
        owner: Engine | None = None,
    ) -> None:
        self.sa_engine = sa_engine
        self.owner = owner
        self.byte_cap = byte_cap
        self.timeout_s = timeout_s
        self.row_cap = row_cap

    def run(self, checked: CheckedQuery, caller: Scope | int) -> QueryResult:
        started = time.monotonic()
        token = secrets.token_hex(16)
        self._enter(token, caller_scope(caller))
        try:
            return self._run(checked, token, started)
        finally:
            self._leave(token)

    def _enter(self, token: str, scope: Scope) -> None:
        if self.owner is None:
            return
        try:
            with self.owner.begin() as conn:
                conn.execute(
                    self.owner.statement(q.INSERT_GUARDED_CALLER),
                    {"token": token, "caller_id": scope.caller_id, "see_all": 1 if scope.see_all else 0},
                )
                if scope.groups:
                    conn.execute(
                        self.owner.statement(q.INSERT_GUARDED_GROUP),
                        [{"token": token, "principal": g} for g in scope.groups],
                    )
        except Exception as exc:
            raise wrap_driver_error(exc, "recording the guarded query's caller") from None

    def _leave(self, token: str) -> None:
        if self.owner is None:
            return
        try:
            with self.owner.begin() as conn:
                conn.execute(self.owner.statement(q.DELETE_GUARDED_CALLER), {"token": token})
        except Exception as exc:  # the token is dead anyway; a row left behind is pruned a day later
            log.warning(
                "could not delete a guarded query's caller row: %s", wrap_driver_error(exc, "").message
            )

    def _run(self, checked: CheckedQuery, token: str, started: float) -> QueryResult:
        try:
            pooled = self.sa_engine.raw_connection()
        except Exception as exc:
            raise wrap_driver_error(exc, "connecting as the read-only user") from None
        conn = pooled.driver_connection
        failure: GuardrailError | None = None
        try:
            conn.client_identifier = token
            conn.call_timeout = int(self.timeout_s * 1000)
            cur = conn.cursor()
            try:
                cur.execute(q.SET_READ_ONLY.oracle)
            except Exception as exc:  # a READ ONLY user: the user itself is the read-only guarantee
                if wrap_driver_error(exc, "").vendor_code != READ_ONLY_USER_REFUSAL:
                    raise
            cur.arraysize = min(self.row_cap + 1, 1000)
            cur.execute(checked.sql)
            columns = [d[0] for d in cur.description or []]
            rows, cap = fetch_capped(cur, self.row_cap, self.byte_cap)
            cur.close()
        except Exception as exc:
            failure = self._guardrail_error(exc)
        finally:
            self._release(pooled, conn)
        if failure is not None:
            raise failure from None
        return capped_result(columns, rows, cap, self.row_cap, self.byte_cap, started)

    def _guardrail_error(self, exc: BaseException) -> GuardrailError:
        wrapped: DatabaseError = wrap_driver_error(exc, "running the guarded query")
        if wrapped.vendor_code in TIMEOUT_CODES:
            return GuardrailError(f"query stopped at the {self.timeout_s:g} s timeout")
        hint = ""
        if wrapped.vendor_code == "ORA-00942":
            hint = (
                ": a view the query names is not visible to the read-only user (is it allowed, and does "
                "the user have its private synonym? local/readonly_synonyms.sql)"
            )
        return GuardrailError(
            f"the database refused or failed the query [{wrapped.driver_class}"
            f"{', ' + wrapped.vendor_code if wrapped.vendor_code else ''}]{hint}"
        )

    @staticmethod
    def _release(pooled: Any, conn: Any) -> None:
        """Roll back and reset the session, then return it; a broken one is discarded instead.

        After a call timeout python-oracledb may have closed the connection
        (DPY-4011), so the clean-up itself can fail: that failure must not
        replace the GuardrailError the caller is about to see, and the
        connection must not go back to the pool.
        """
        try:
            conn.rollback()
            conn.call_timeout = 0
            conn.client_identifier = ""
        except Exception:
            pooled.invalidate()
        finally:
            pooled.close()
