"""What a guarded query returns, and the caps applied while fetching it.

Rows are fetched one at a time so that neither the row cap nor the byte cap
is exceeded in memory: a result of 1,000 rows of 1 MB each stops at the byte
cap after the first rows, not after a gigabyte. Which cap stopped the fetch
is reported (``cap``: ``"rows"`` or ``"bytes"``) so a caller can say why the
result is incomplete.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from oracle_rag.answering.aggregate.guard import CheckedQuery
from oracle_rag.engines import Scope


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    row_cap: int
    elapsed_ms: float
    cap: str | None = None  # "rows" or "bytes" when truncated
    byte_cap: int = 0


def capped_result(
    columns: list[str],
    rows: list[tuple[Any, ...]],
    cap: str | None,
    row_cap: int,
    byte_cap: int,
    started: float,
) -> QueryResult:
    """What :func:`fetch_capped` fetched as a result: truncated exactly when a cap stopped it,
    timed from ``started`` (``time.monotonic()``). Both engines' executors answer this way."""
    return QueryResult(
        columns,
        rows,
        cap is not None,
        row_cap,
        (time.monotonic() - started) * 1000,
        cap=cap,
        byte_cap=byte_cap,
    )


class GuardedExecutor(Protocol):
    """The read-only path for untrusted SQL on an engine (``executors.guarded_executor``)."""

    def run(self, checked: CheckedQuery, caller: Scope | int) -> QueryResult: ...


def caller_scope(caller: Scope | int) -> Scope:
    """The caller a guarded query runs for; a bare employee id is a caller without see-all or groups."""
    if isinstance(caller, Scope):
        return caller
    return Scope(caller_id=int(caller), see_all=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if value is not None and not isinstance(value, int | float | str | bool):
        return str(value)
    return value


def value_bytes(value: Any) -> int:
    """Bytes a fetched value costs against the byte cap (UTF-8 for text)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes | bytearray | memoryview):
        return len(bytes(value))
    return 8


def fetch_capped(cur: Any, row_cap: int, byte_cap: int) -> tuple[list[tuple[Any, ...]], str | None]:
    """Fetch at most ``row_cap`` rows and ``byte_cap`` bytes; returns (rows, cap hit or None)."""
    rows: list[tuple[Any, ...]] = []
    used = 0
    while True:
        row = cur.fetchone()
        if row is None:
            return rows, None
        if len(rows) >= row_cap:
            return rows, "rows"
        size = sum(value_bytes(v) for v in row)
        if used + size > byte_cap:
            return rows, "bytes"
        used += size
        rows.append(tuple(_jsonable(v) for v in row))
