"""The embedded engine's guarded execution: the database decides alone.

Nothing here consults the text check or anything derived from the SQL text.
Each query gets a fresh connection on which:

* the file is opened ``mode=ro``, ``PRAGMA query_only`` is on, and the
  connection is hardened (``sqlite_native.harden``): values are capped at
  ``VALUE_LIMIT`` bytes (``SQLITE_LIMIT_LENGTH``, so a doubling string fails
  at ~1 MB), no database may be attached (``SQLITE_LIMIT_ATTACHED = 0``),
  defensive mode is on, double-quoted strings are identifiers only;
* every allow-listed view ``V`` is *sealed*: its stored body is copied into a
  temp view with an unguessable per-query name ``rag_sealed_<random>``, and a
  temp view named ``V`` reads that one. SQLite's authorizer reports, with each
  column read, the innermost view (or CTE!) through which it happens; a CTE
  may take any name, including ``V``, but not a name it cannot know. So the
  authorizer allows ``SQLITE_READ`` only of

  - the temp views (the allow-listed names and their sealed bodies), and
  - any column whose innermost view is a sealed body, i.e. exactly the reads
    the stored view definition makes,

  and denies everything else: base tables read directly or through a CTE of
  any name, ``main.V`` (the unsealed view), ``sqlite_schema``, built-in and
  extension virtual tables (``sqlite_dbpage``, ``sqlite_stmt``, FTS5 shadow
  tables, ``json_each``), ``pragma_*`` table-valued functions, temp
  objects, attached schemas; every statement other than SELECT; every
  function not in ``ALLOWED_FUNCTIONS``; the caller functions outside a
  sealed body;
* a progress handler and a watchdog (``interrupt``) stop the query at the
  timeout, also while another query holds the GIL or a sort runs. Both act
  between steps of SQLite's virtual machine, so no single step may run long:
  the quadratic string functions are replaced by linear ones
  (``sqlite_functions``) and LIKE/GLOB patterns are capped at
  ``LIKE_PATTERN_LIMIT`` bytes;
* rows are fetched one by one under a row cap and a byte cap.

The caller reaches the views through ``rag_caller_id()``,
``rag_caller_see_all()`` and ``rag_caller_groups()`` (a JSON array),
registered on this connection only; the views apply the one scope
predicate with them (engines/guarded_scope_sql.py).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlean

from oracle_rag.answering.aggregate import aggregate_sql as q
from oracle_rag.answering.aggregate.guard import ALLOWED_FUNCTIONS, CheckedQuery
from oracle_rag.answering.aggregate.lexer import WORD, LexError, code_tokens, tokenize
from oracle_rag.answering.aggregate.results import QueryResult, caller_scope, capped_result, fetch_capped
from oracle_rag.answering.aggregate.sqlite_functions import LIKE_PATTERN_LIMIT, register
from oracle_rag.answering.aggregate.sqlite_native import (
    LIMIT_ATTACHED,
    LIMIT_COMPOUND_SELECT,
    LIMIT_EXPR_DEPTH,
    LIMIT_FUNCTION_ARG,
    LIMIT_LENGTH,
    LIMIT_LIKE_PATTERN_LENGTH,
    LIMIT_SQL_LENGTH,
    LIMIT_TRIGGER_DEPTH,
    LIMIT_VARIABLE_NUMBER,
    LIMIT_WORKER_THREADS,
    NativeError,
    harden,
)
from oracle_rag.engines import Scope
from oracle_rag.errors import ConfigurationError, GuardrailError, wrap_driver_error

VALUE_LIMIT = 1_000_000  # bytes in any one string, blob or row the guarded query builds
GUARDED_LIMITS = {
    LIMIT_LENGTH: VALUE_LIMIT,
    LIMIT_SQL_LENGTH: 100_000,
    LIMIT_EXPR_DEPTH: 200,
    LIMIT_COMPOUND_SELECT: 50,
    LIMIT_FUNCTION_ARG: 32,
    LIMIT_ATTACHED: 0,
    LIMIT_VARIABLE_NUMBER: 0,
    LIMIT_TRIGGER_DEPTH: 0,
    LIMIT_WORKER_THREADS: 0,
    LIMIT_LIKE_PATTERN_LENGTH: LIKE_PATTERN_LIMIT,
}
_CALLER_FUNCTIONS = frozenset({"RAG_CALLER_ID", "RAG_CALLER_SEE_ALL", "RAG_CALLER_GROUPS"})
# EXPLAIN and EXPLAIN QUERY PLAN compile like their SELECT (so the authorizer
# has already judged every read) but return the plan; they are recognised by
# their fixed result columns and refused.
_EXPLAIN_SHAPES = {
    ("addr", "opcode", "p1", "p2", "p3", "p4", "p5", "comment"),
    ("id", "parent", "notused", "detail"),
}
# sqlite3.h's authorizer action codes, for refusal messages.
_ACTION_NAMES = dict(
    enumerate(
        """COPY CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER
    CREATE_TEMP_VIEW CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX
    DROP_TEMP_TABLE DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ SELECT
    TRANSACTION UPDATE ATTACH DETACH ALTER_TABLE REINDEX ANALYZE CREATE_VTABLE DROP_VTABLE FUNCTION
    SAVEPOINT RECURSIVE""".split()
    )
)


def view_select(create_sql: str) -> tuple[str, str]:
    """A stored ``CREATE VIEW``'s (column list or "", SELECT text)."""
    try:
        toks = code_tokens(tokenize(create_sql, "sqlite"))
    except LexError:
        raise ConfigurationError("a view definition could not be read", key="aggregate views") from None
    depth, start, as_at = 0, None, None
    for i, tok in enumerate(toks):
        if tok.kind == WORD and tok.upper == "VIEW" and start is None:
            start = i + 1
        elif tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth -= 1
        elif start is not None and depth == 0 and tok.kind == WORD and tok.upper == "AS":
            as_at = i
            break
    if start is None or as_at is None:
        raise ConfigurationError("not a CREATE VIEW statement", key="aggregate views")
    columns = ""
    if toks[as_at - 1].text == ")":
        opening = next(i for i in range(as_at - 1, start - 1, -1) if toks[i].text == "(")
        columns = create_sql[toks[opening].start : toks[as_at - 1].start + 1]
    return columns, create_sql[toks[as_at].start + 2 :].strip()


def quote_identifier(name: str) -> str:
    """``name`` as one SQLite identifier (a view name from the allow-list or a sealed name)."""
    if not name or "\x00" in name:
        raise ConfigurationError("an allowed view name is empty or holds a NUL", key="aggregate views")
    return '"' + name.replace('"', '""') + '"'


@dataclass
class _Decisions:
    """The authorizer for one query: what it allows, and the first thing it denied."""

    views: frozenset[str]  # allow-listed names (upper case), as temp views
    sealed: frozenset[str]  # the per-query sealed body names (exact)
    known: frozenset[str]  # every table, view and eponymous virtual table name (upper case)
    denied: list[str] = field(default_factory=list)

    def __call__(self, action: int, arg1: Any, arg2: Any, db: Any, source: Any) -> int:
        if action in (sqlean.SQLITE_SELECT, sqlean.SQLITE_RECURSIVE):
            return sqlean.SQLITE_OK
        through_sealed = source in self.sealed
        if action == sqlean.SQLITE_READ:
            table = str(arg1 or "")
            if db == "temp" and (table.upper() in self.views or table in self.sealed):
                return sqlean.SQLITE_OK
            if through_sealed and db in ("main", None):
                return sqlean.SQLITE_OK
            if (
                arg2 == ""
                and db is None
                and (table.upper() in self.views or table in self.sealed or table.upper() not in self.known)
            ):
                # A read of no column (``count(*)``) of an allowed view, or of a
                # CTE or subquery name: no data, and what it counts is checked
                # where its rows come from. Base tables are "known" and denied.
                return sqlean.SQLITE_OK
            return self._deny(
                f"reading {table or 'a table'}"
                + (f" through {source}" if source else "")
                + " (only the allowed views may be read)"
            )
        if action == sqlean.SQLITE_FUNCTION:
            name = str(arg2 or "").upper()
            if name in _CALLER_FUNCTIONS:
                return (
                    sqlean.SQLITE_OK if through_sealed else self._deny(f"function {arg2} outside the views")
                )
            if name in ALLOWED_FUNCTIONS:
                return sqlean.SQLITE_OK
            return self._deny(f"function {arg2} (not in the allow-list)")
        what = _ACTION_NAMES.get(action, str(action))
        return self._deny(f"{what} {arg1 or ''}".strip() + " (only SELECT is allowed)")

    def _deny(self, reason: str) -> int:
        if not self.denied:
            self.denied.append(reason)
        return sqlean.SQLITE_DENY


class SqliteExecutor:
    """The embedded engine's guarded, read-only execution path."""

    def __init__(
        self,
        db_path: Path,
        views: tuple[str, ...],
        *,
        timeout_s: float,
        row_cap: int,
        byte_cap: int = 1_000_000,
    ) -> None:
        self.db_path = Path(db_path)
        self.views = tuple(dict.fromkeys(v.upper() for v in views))
        self.timeout_s = timeout_s
        self.row_cap = row_cap
        self.byte_cap = byte_cap

    def _open(self) -> Any:
        if not self.db_path.is_file():
            raise ConfigurationError(f"database file {self.db_path.name} not found", key="data_dir")
        path = str(self.db_path.resolve())
        try:
            conn = sqlean.connect(
                f"file:{quote(path)}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
            )
        except sqlean.Error as exc:
            raise wrap_driver_error(exc, "opening the read-only connection") from None
        try:
            harden(conn, path, GUARDED_LIMITS)
        except NativeError as exc:
            conn.close()
            raise GuardrailError(f"the guarded connection could not be hardened ({exc}); refused") from None
        return conn

    def _seal(self, conn: Any) -> tuple[frozenset[str], frozenset[str]]:
        """Create the sealed temp views on ``conn``; returns their names and every known object name.

        The sealed body is ``SELECT * FROM (<stored select>) LIMIT -1 OFFSET 0``:
        a subquery with an OFFSET is never flattened into the query that uses
        it, so SQLite also reports a read of no column of the view's tables
        (``count(*)``) with the sealed name as its context instead of none.
        The price is that the outer WHERE is not pushed into the view.
        """
        stored = {str(name).upper(): sql for name, sql in conn.execute(q.VIEW_DEFINITIONS.sqlite)}
        known = {str(r[0]).upper() for r in conn.execute(q.KNOWN_OBJECTS.sqlite)}
        sealed = set()
        for view in self.views:
            create = stored.get(view)
            if not create:
                raise ConfigurationError(
                    f"allowed view {view} does not exist in the database "
                    "(run `oracle-rag migrate --demo` or create it)",
                    key="aggregate views",
                )
            name = f"rag_sealed_{secrets.token_hex(16)}"
            columns, select = view_select(create)
            conn.execute(
                q.SQLITE_SEAL_BODY.format(sealed=quote_identifier(name), columns=columns, select=select)
            )
            conn.execute(
                q.SQLITE_SEAL_NAME.format(view=quote_identifier(view), sealed=quote_identifier(name))
            )
            sealed.add(name)
        return frozenset(sealed), frozenset(known | set(self.views))

    def run(self, checked: CheckedQuery, caller: Scope | int) -> QueryResult:
        scope = caller_scope(caller)
        started = time.monotonic()
        conn = self._open()
        deadline = started + self.timeout_s
        stopped = threading.Event()

        def progress() -> int:
            if time.monotonic() > deadline:
                stopped.set()
                return 1
            return 0

        def watchdog() -> None:
            stopped.set()
            conn.interrupt()

        timer = threading.Timer(self.timeout_s, watchdog)
        decisions = _Decisions(frozenset(self.views), frozenset(), frozenset())
        oversized: list[str] = []
        try:
            groups = json.dumps(list(scope.groups))
            conn.create_function("rag_caller_id", 0, lambda: scope.caller_id, deterministic=True)
            conn.create_function(
                "rag_caller_see_all", 0, lambda: 1 if scope.see_all else 0, deterministic=True
            )
            conn.create_function("rag_caller_groups", 0, lambda: groups, deterministic=True)
            oversized = register(conn, VALUE_LIMIT)
            decisions.sealed, decisions.known = self._seal(conn)
            conn.execute(q.QUERY_ONLY.sqlite)
            conn.set_authorizer(decisions)
            conn.set_progress_handler(progress, 1000)
            timer.start()
            cur = conn.execute(checked.sql)
            if not cur.description:
                raise GuardrailError("not a query: it returns no columns (only SELECT is allowed)")
            columns = [d[0] for d in cur.description]
            if tuple(c.lower() for c in columns) in _EXPLAIN_SHAPES:
                raise GuardrailError("EXPLAIN is not a query (only SELECT is allowed)")
            rows, cap = fetch_capped(cur, self.row_cap, self.byte_cap)
        except (sqlean.Error, sqlean.Warning, ValueError, OverflowError, MemoryError) as exc:
            raise self._refusal(exc, stopped.is_set(), decisions, oversized) from None
        finally:
            timer.cancel()
            conn.close()
        return capped_result(columns, rows, cap, self.row_cap, self.byte_cap, started)

    def _refusal(
        self, exc: BaseException, timed_out: bool, decisions: _Decisions, oversized: list[str]
    ) -> GuardrailError:
        text = str(exc)
        if timed_out:
            return GuardrailError(f"query stopped at the {self.timeout_s:g} s timeout")
        if "not authorized" in text or decisions.denied:
            why = decisions.denied[0] if decisions.denied else "not authorized"
            return GuardrailError(f"the database refused the query: {why}")
        if "pattern too complex" in text:
            return GuardrailError(
                f"size limit: a LIKE or GLOB pattern longer than {LIKE_PATTERN_LIMIT} bytes"
            )
        if oversized:
            return GuardrailError(f"size limit: {oversized[0]}")
        if "too big" in text or isinstance(exc, OverflowError | MemoryError):
            return GuardrailError(f"size limit: a value or row exceeded {VALUE_LIMIT:,} bytes")
        if "too many" in text or "too deep" in text or "depth" in text:
            return GuardrailError(f"depth or size limit: {text[:200]}")
        if "one statement" in text:
            return GuardrailError("exactly one statement is allowed")
        if isinstance(exc, ValueError) and "null character" in text:
            return GuardrailError("SQL contains a NUL character")
        return GuardrailError(f"the query failed: {type(exc).__name__}: {text[:200]}")
