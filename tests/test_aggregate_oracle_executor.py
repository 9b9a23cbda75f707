"""The Oracle guarded executor's session handling, without a server.

python-oracledb needs a database for a real cursor, so the pooled connection and its cursor
are recording stand-ins that raise the driver's own exception classes with the codes a
server or the driver produces. What is checked is our side: which statements are sent, that
ORA-28194 from a READ ONLY user is tolerated for SET TRANSACTION READ ONLY and nothing else
is, that no session schema is switched, and that a failing clean-up (DPY-4011 after a call
timeout) neither hides the GuardrailError nor returns the broken connection to the pool.
The end-to-end run against a READ ONLY user is in tests/oracle/test_oracle_guarded.py.
"""

from __future__ import annotations

import re
from typing import Any

import oracledb
import pytest

from oracle_rag.answering.aggregate import aggregate_sql as q
from oracle_rag.answering.aggregate.executors import OracleExecutor
from oracle_rag.answering.aggregate.guard import CheckedQuery
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import GuardrailError

SQL = "SELECT COUNT(*) AS N FROM RAG_V_TASK"


class _Cursor:
    def __init__(self, conn: _Conn) -> None:
        self.conn = conn
        self.arraysize = 100
        self.description = [("N",)]
        self._rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str) -> None:
        self.conn.sent.append(sql)
        error = self.conn.errors.get(sql)
        if error is not None:
            raise error
        self._rows = [(7,)] if sql == SQL else []

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def close(self) -> None:
        pass


class _Conn:
    def __init__(self, errors: dict[str, BaseException], rollback_error: BaseException | None = None) -> None:
        self.errors = errors
        self.rollback_error = rollback_error
        self.sent: list[str] = []
        self.set: list[tuple[str, Any]] = []

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("client_identifier", "call_timeout", "current_schema"):
            self.set.append((name, value))
        object.__setattr__(self, name, value)

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def rollback(self) -> None:
        self.sent.append("ROLLBACK")
        if self.rollback_error is not None:
            raise self.rollback_error


class _Pooled:
    def __init__(self, conn: _Conn) -> None:
        self.driver_connection = conn
        self.events: list[str] = []

    def invalidate(self) -> None:
        self.events.append("invalidate")

    def close(self) -> None:
        self.events.append("close")


class _Engine:
    def __init__(self, pooled: _Pooled) -> None:
        self.pooled = pooled

    def raw_connection(self) -> _Pooled:
        return self.pooled


def _run(
    errors: dict[str, BaseException], rollback_error: BaseException | None = None
) -> tuple[Any, _Pooled]:
    pooled = _Pooled(_Conn(errors, rollback_error))
    executor = OracleExecutor(_Engine(pooled), timeout_s=2, row_cap=10)
    checked = CheckedQuery(sql=SQL, views=("RAG_V_TASK",), ctes=())  # type: ignore[call-arg]
    try:
        return executor.run(checked, Caller(employee_id=17, role="developer").employee_id), pooled
    except GuardrailError as exc:
        return exc, pooled


def test_a_read_only_users_ora_28194_is_tolerated() -> None:
    result, pooled = _run(
        {q.SET_READ_ONLY.oracle: oracledb.DatabaseError("ORA-28194: Can perform read operations only")}
    )
    assert not isinstance(result, GuardrailError), result
    assert result.rows == [(7,)]
    conn = pooled.driver_connection
    assert conn.sent == [q.SET_READ_ONLY.oracle, SQL, "ROLLBACK"]
    assert pooled.events == ["close"]


def test_any_other_refusal_of_set_transaction_stops_the_query() -> None:
    result, pooled = _run(
        {q.SET_READ_ONLY.oracle: oracledb.DatabaseError("ORA-01031: insufficient privileges")}
    )
    assert isinstance(result, GuardrailError) and "ORA-01031" in str(result)
    assert SQL not in pooled.driver_connection.sent


def test_no_session_schema_is_switched() -> None:
    _result, pooled = _run({})
    conn = pooled.driver_connection
    assert [name for name, _ in conn.set] == [
        "client_identifier",
        "call_timeout",
        "call_timeout",
        "client_identifier",
    ]
    # The session carries an unguessable token, never the caller's id (the views read the caller by it).
    token = conn.set[0][1]
    assert (
        re.fullmatch(r"[0-9a-f]{32}", token) and "17" != token and conn.set[-1] == ("client_identifier", "")
    )


def test_a_timeout_stays_the_error_when_clean_up_finds_the_connection_closed() -> None:
    result, pooled = _run(
        {SQL: oracledb.DatabaseError("DPY-4024: call timeout of 2000 ms exceeded")},
        rollback_error=oracledb.InterfaceError("DPY-4011: the database or network closed the connection"),
    )
    assert isinstance(result, GuardrailError) and result.message == "query stopped at the 2 s timeout"
    assert pooled.events == ["invalidate", "close"]  # the broken session never goes back to the pool


def test_a_missing_synonym_says_so() -> None:
    result, _ = _run({SQL: oracledb.DatabaseError("ORA-00942: table or view does not exist")})
    assert isinstance(result, GuardrailError)
    assert "ORA-00942" in str(result) and "local/readonly_synonyms.sql" in str(result)


@pytest.mark.parametrize("code", ["DPY-4024", "DPI-1067", "ORA-03156"])
def test_every_timeout_code_reads_as_a_timeout(code: str) -> None:
    result, _ = _run({SQL: oracledb.DatabaseError(f"{code}: timed out")})
    assert result.message == "query stopped at the 2 s timeout"
