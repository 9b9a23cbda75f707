"""The engine seam: everything whose SQL or behaviour differs between Oracle and SQLite.

The indexer, worker, retriever, chat and web layer are engine-free: they call
these methods with a SQLAlchemy ``Connection`` and never see SQL dialects or
an engine's name. Statements come from ``*_sql.py`` modules as
:class:`~oracle_rag.engines.statements.Sql` objects, and only the engine
chooses the text (:meth:`Engine.statement`); what differs beyond text is a
method or attribute here (capabilities), overridden by ``OracleEngine`` and
``SqliteEngine``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..config import Settings
from ..errors import wrap_driver_error
from . import engine_sql as q
from .records import (
    ChunkWrite,
    Filters,
    GuardedAccess,
    Hit,
    QueueRow,
    QueueStats,
    Scope,
    Where,
    chunk_params,
    enqueue_params,
    facets_json,
    facets_value,
    hits,
    queue_rows,
    search_binds,
    vector_values,
    with_where,
)
from .statements import Sql, stmt

SQL_ROOT = Path(__file__).resolve().parent.parent / "sql"


class Engine(ABC):
    """A database the product can run on."""

    name: str  # "oracle" | "sqlite": selects the statement text and the migration folder, nowhere else
    transactional_ddl: bool
    sql_dialect_name: str  # for messages and the model-writing prompt ("Oracle", "SQLite")
    # Capabilities the engine-free code asks about instead of the engine's name.
    loads_models: bool = False  # the model is loaded into the database (DBMS_VECTOR), not run in-process
    clob_binds: bool = False  # long text binds must be typed CLOB (Oracle's VARCHAR2 limit)
    maintains_indexes: bool = False  # approximate/text indexes to rebuild and optimise (`oracle-rag index`)
    ddl_compile_warnings: bool = False  # PL/SQL DDL can "succeed" with compile errors, seen only on a raw cursor

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._sa: sa.Engine | None = None

    # -- connections -----------------------------------------------------
    @property
    def sa_engine(self) -> sa.Engine:
        if self._sa is None:
            self._sa = self._create_sa_engine()
        return self._sa

    @abstractmethod
    def _create_sa_engine(self) -> sa.Engine: ...

    @contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """A connection in a transaction, committed on success."""
        try:
            with self.sa_engine.begin() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise wrap_driver_error(exc, f"{self.name} transaction") from None

    @contextmanager
    def connect(self) -> Iterator[sa.Connection]:
        try:
            with self.sa_engine.connect() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise wrap_driver_error(exc, f"{self.name} connection") from None

    @contextmanager
    def begin_exclusive(self) -> Iterator[sa.Connection]:
        """A transaction for draining the queue (SQLite: BEGIN IMMEDIATE)."""
        with self.begin() as conn:
            yield conn

    sql_dialect = "sqlite"  # sqlglot dialect used to classify untrusted SQL

    @abstractmethod
    def guarded_access(self) -> GuardedAccess:
        """Where untrusted (model-written) SQL may run: never this engine's own connections.

        ``aggregate/executors.py`` builds the guarded executor on it; the
        engine only says which database access is the read-only one.
        """

    def observe_embedding(self, observe: Callable[[float], None]) -> bool:
        """Report each in-process embedding's duration (seconds) to ``observe`` (``/metrics``).

        True once hooked in, or when there is nothing to time (this engine
        embeds inside the database); False when it cannot be yet (the model
        does not load): the caller tries again later.
        """
        return True

    def bind_value(self, value: Any) -> Any:
        """A Python value as this engine stores it (SQLite keeps dates as ISO text)."""
        return value

    def dispose(self) -> None:
        if self._sa is not None:
            self._sa.dispose()
            self._sa = None

    # -- migrations ------------------------------------------------------
    def migrations_dir(self, migration_set: str = "rag") -> Path:
        base = SQL_ROOT / self.name
        return base if migration_set == "rag" else base / migration_set

    @abstractmethod
    def split_script(self, script: str) -> list[str]: ...

    def render_migration(self, script: str) -> str:
        """Fill configuration placeholders in a migration template."""
        return script

    def history_ddl(self) -> list[str]:
        return [self.text(q.HISTORY_DDL)]

    # -- embedding -------------------------------------------------------
    @abstractmethod
    def model_status(self, conn: sa.Connection) -> dict[str, Any]:
        """Where the model is, whether it loads, its dimension."""

    # -- statements -------------------------------------------------------
    def text(self, sql: Sql) -> str:
        """This engine's text of ``sql`` (Oracle fills ``{model}``)."""
        text: str | None = getattr(sql, self.name)
        if text is None:
            raise NotImplementedError(f"statement has no {self.sql_dialect_name} text: {sql!r:.120}")
        return text

    def statement(self, sql: Sql, where: Where | None = None) -> sa.TextClause:
        """``sql`` as an executable, cached ``text()`` for this engine (``where`` in its marker)."""
        return stmt(with_where(self.text(sql), where), sql.expanding, sql.clobs if self.clob_binds else ())

    @property
    def model_label(self) -> str:
        """The embedding model as status output names it."""
        return "all-MiniLM-L6-v2 (in-process)"

    def script_statement(self, sql: str) -> str:
        """``sql`` terminated as it would appear in a script for this engine (sqlite3 here)."""
        return sql if sql.rstrip().endswith(";") else sql + ";"

    def trigger_scripts_dir(self) -> Path:
        return SQL_ROOT / self.name / "triggers"

    # -- chunks -----------------------------------------------------------
    def read_chunk_state(self, conn: sa.Connection, source_type: str,
                         ids: Sequence[str]) -> dict[str, tuple[str, int | None, int | None, int | None, str]]:
        """Stored (hash, owner, project, sprint, facets JSON) per record, for the indexer's skip test."""

        def num(v: Any) -> int | None:
            return None if v is None else int(v)

        out: dict[str, tuple[str, int | None, int | None, int | None, str]] = {}
        for start in range(0, len(ids), 500):
            part = [str(i) for i in ids[start : start + 500]]
            rows = conn.execute(self.statement(q.READ_CHUNK_STATE), {"source_type": source_type, "ids": part})
            out.update({str(r[0]): (r[1], num(r[2]), num(r[3]), num(r[4]), facets_json(facets_value(r[5])))
                        for r in rows})
        return out

    def chunk_ids(self, conn: sa.Connection, source_type: str) -> set[str]:
        return {str(r[0]) for r in conn.execute(self.statement(q.CHUNK_IDS), {"source_type": source_type})}

    def queued_ids(self, conn: sa.Connection, source_type: str) -> set[str]:
        return {str(r[0]) for r in conn.execute(self.statement(q.QUEUED_IDS), {"source_type": source_type})}

    def upsert_chunks(self, conn: sa.Connection, chunks: Sequence[ChunkWrite]) -> int:
        if not chunks:
            return 0
        conn.execute(self.statement(q.UPSERT_CHUNK), chunk_params(chunks))
        return len(chunks)

    def delete_chunks(self, conn: sa.Connection, source_type: str, ids: Sequence[str]) -> int:
        """Delete every chunk of the given records; returns the number of chunks deleted."""
        if not ids:
            return 0
        params = [{"source_type": source_type, "source_id": str(i)} for i in ids]
        return int(conn.execute(self.statement(q.DELETE_CHUNK), params).rowcount or 0)

    def trim_chunks(self, conn: sa.Connection, counts: Sequence[tuple[str, str, int]]) -> int:
        """Drop the chunks a record no longer has: ``counts`` is (type, id, new chunk count)."""
        if not counts:
            return 0
        params = [{"source_type": t, "source_id": str(i), "chunk_count": int(n)} for t, i, n in counts]
        return int(conn.execute(self.statement(q.DELETE_EXTRA_CHUNKS), params).rowcount or 0)

    # -- queue -----------------------------------------------------------
    def enqueue(self, conn: sa.Connection, source_type: str, source_id: str, action: str) -> None:
        self.enqueue_many(conn, [(source_type, source_id, action)])

    def enqueue_many(self, conn: sa.Connection, items: Sequence[tuple[str, str, str]]) -> int:
        rows = enqueue_params(items)
        if rows:
            conn.execute(self.statement(q.ENQUEUE), rows)
        return len(rows)

    @abstractmethod
    def pick(self, conn: sa.Connection, limit: int, max_attempts: int) -> list[QueueRow]: ...

    def delete_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int]) -> int:
        if not dirty_ids:
            return 0
        params = [{"dirty_id": i} for i in dirty_ids]
        return int(conn.execute(self.statement(q.DELETE_QUEUE_ROW), params).rowcount or 0)

    def fail_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int], error: str) -> int:
        if not dirty_ids:
            return 0
        params = [{"dirty_id": i, "error": error[:1000]} for i in dirty_ids]
        return int(conn.execute(self.statement(q.FAIL_QUEUE_ROW), params).rowcount or 0)

    def retry_failed(self, conn: sa.Connection, max_attempts: int) -> int:
        return int(conn.execute(self.statement(q.RETRY_FAILED), {"max_attempts": max_attempts}).rowcount or 0)

    def list_queue(self, conn: sa.Connection, *, failed_only: bool, max_attempts: int, limit: int) -> list[QueueRow]:
        binds = {"failed_only": 1 if failed_only else 0, "max_attempts": max_attempts, "limit": limit}
        return queue_rows(conn.execute(self.statement(q.LIST_QUEUE), binds).fetchall())

    def queue_stats(self, conn: sa.Connection, max_attempts: int) -> QueueStats:
        row = conn.execute(self.statement(q.QUEUE_STATS), {"max_attempts": max_attempts}).one()
        by_type = {r[0]: int(r[1]) for r in conn.execute(self.statement(q.CHUNKS_BY_TYPE))}
        return QueueStats(depth=int(row[0] or 0), oldest_age_s=None if row[4] is None else float(row[4]),
                          stalled=int(row[2] or 0), failed=int(row[3] or 0), chunks_by_type=by_type)

    def embed(self, conn: sa.Connection, text: str) -> list[float]:
        """Embed one text in the database (status checks and parity tests)."""
        return vector_values(conn.execute(self.statement(q.EMBED), {"text": text}).scalar_one())

    # -- search ----------------------------------------------------------
    def semantic_search(
        self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters, exact: bool = False,
        where: Where | None = None,
    ) -> list[Hit]:
        template = q.SEMANTIC_SEARCH_EXACT if exact else q.SEMANTIC_SEARCH
        rows = conn.execute(self.statement(template, where), search_binds(scope, filters, where, query=query, k=k))
        return hits(rows.fetchall())

    def keyword_search(self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters,
                       where: Where | None = None) -> list[Hit]:
        match = self.keyword_query(query)
        if match is None:
            return []
        rows = conn.execute(self.statement(q.KEYWORD_SEARCH, where),
                            search_binds(scope, filters, where, match=match, k=k))
        return hits(rows.fetchall())

    @abstractmethod
    def keyword_query(self, text: str) -> str | None:
        """User text to this engine's full-text syntax, every term quoted."""
