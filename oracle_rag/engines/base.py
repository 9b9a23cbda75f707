"""The engine seam: everything whose SQL differs between Oracle and SQLite.

The indexer, worker, retriever and chat are engine-free: they call these
methods with a SQLAlchemy ``Connection`` and never see SQL dialects. Each
engine keeps its statements in one module (``oracle_sql.py``,
``sqlite_sql.py``) so a reviewer can read everything sent to a database in
one file, and the golden tests pin them.
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..config import Settings
from ..errors import InputError, wrap_driver_error

ACTIONS = ("UPSERT", "DELETE")
SQL_ROOT = Path(__file__).resolve().parent.parent / "sql"


@dataclass(frozen=True)
class QueueRow:
    """One row of RAG_DIRTY as a worker sees it."""

    dirty_id: int
    source_type: str
    source_id: str
    action: str
    attempts: int
    enqueued_at: Any = None
    last_error: str | None = None


def facets_json(facets: Mapping[str, Any] | None) -> str:
    """A record's facets as the canonical JSON text both engines store (sorted keys, compact).

    Facets are a flat object: each value a string, number, boolean or null
    (a date goes in as ISO text). Canonical text makes "facets unchanged"
    a plain string comparison for the indexer's skip test.
    """
    if not facets:
        return "{}"
    out: dict[str, Any] = {}
    for key, value in facets.items():
        if not isinstance(key, str) or not key:
            raise InputError(f"facet names must be non-empty strings, got {key!r}")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise InputError(f"facet {key!r}: a flat value (text, number, boolean, null) is needed, "
                             f"got {type(value).__name__}")
        out[key] = value
    return json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def facets_value(raw: Any) -> dict[str, Any]:
    """FACETS as read back: SQLite gives JSON text, Oracle a dict (native JSON); NULL reads as {}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        from ._common import read_lob

        raw = read_lob(raw)
        raw = json.loads(raw if isinstance(raw, str) else bytes(raw).decode("utf-8"))
        if not isinstance(raw, dict):
            return {}
    # Oracle's JSON numbers may arrive as Decimal: back to int/float, as they were written.
    return {k: (int(v) if v == int(v) else float(v)) if isinstance(v, Decimal) else v for k, v in raw.items()}


@dataclass(frozen=True)
class ChunkWrite:
    """A chunk to store: the indexer fills it, the engine embeds and upserts it.

    ``chunk_no`` is the chunk's position in its record (0-based); every chunk
    of a record carries the record's scope columns and ``facets`` (canonical
    JSON text, see :func:`facets_json`).
    """

    source_type: str
    source_id: str
    content: str
    content_hash: str
    owner_id: int | None = None
    project_id: int | None = None
    sprint_id: int | None = None
    chunk_no: int = 0
    facets: str = "{}"

    @property
    def embed_text(self) -> str:
        return embed_text(self.content)


@dataclass(frozen=True)
class Scope:
    """What a caller may read: everything, or organisational rows plus their own."""

    caller_id: int
    see_all: bool

    def binds(self) -> dict[str, Any]:
        return {"see_all": 1 if self.see_all else 0, "caller_id": self.caller_id}


@dataclass(frozen=True)
class Filters:
    """Optional narrowing applied in SQL next to the scope predicate."""

    project_id: int | None = None
    sprint_id: int | None = None
    source_types: tuple[str, ...] = ()

    def binds(self) -> dict[str, Any]:
        return {"f_project": self.project_id, "f_sprint": self.sprint_id}


_WHERE_BIND = re.compile(r"^w_[a-z0-9_]{1,28}$")
WHERE_MARKER = "/* where */ 1 = 1"


@dataclass(frozen=True)
class Where:
    """An extra SQL predicate over the chunk row ``c``, applied with the scope before the top-k.

    Built by trusted product code (the answers module turns facet values,
    ids and dates into it), never from user text: ``sql`` is a fragment such
    as ``JSON_VALUE(c.FACETS, '$.status') = :w_status`` and ``binds`` its
    values. Bind names must match ``w_[a-z0-9_]+`` so they cannot collide
    with the statements' own binds. Each search statement carries the
    marker :data:`WHERE_MARKER` where the fragment goes (``AND (fragment)``).
    """

    sql: str
    binds: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.sql, str) or not self.sql.strip() or ";" in self.sql:
            raise InputError("a where fragment must be one non-empty SQL predicate (no ';')")
        for name in self.binds:
            if not _WHERE_BIND.match(name):
                raise InputError(f"where bind {name!r} must match w_[a-z0-9_]+")

    def apply(self, sql: str) -> str:
        if WHERE_MARKER not in sql:
            raise InputError("this statement takes no where fragment")
        return sql.replace(WHERE_MARKER, "(" + self.sql + ")")


def with_where(sql: str, where: Where | None) -> str:
    """``sql`` with the caller's where fragment in place of the marker (unchanged without one)."""
    return sql if where is None else where.apply(sql)


@dataclass(frozen=True)
class Hit:
    """One row from a search leg; ``score`` is a distance (semantic) or a relevance (keyword)."""

    chunk_id: int
    source_type: str
    source_id: str
    content: str
    score: float
    owner_id: int | None = None
    project_id: int | None = None
    sprint_id: int | None = None
    chunk_no: int = 0
    facets: dict[str, Any] = field(default_factory=dict)


@dataclass
class QueueStats:
    depth: int = 0
    oldest_age_s: float | None = None
    stalled: int = 0
    failed: int = 0
    chunks_by_type: dict[str, int] = field(default_factory=dict)


# Oracle's VECTOR_EMBEDDING takes VARCHAR2; 4000 bytes is the portable limit.
# The model reads at most 256 wordpieces, far fewer than 4000 bytes of text,
# so the cut never changes an embedding; both engines apply it for parity.
EMBED_TEXT_MAX_BYTES = 4000


def embed_text(content: str) -> str:
    raw = content.encode("utf-8")
    if len(raw) <= EMBED_TEXT_MAX_BYTES:
        return content
    return raw[:EMBED_TEXT_MAX_BYTES].decode("utf-8", errors="ignore")


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class Engine(ABC):
    """A database the product can run on."""

    name: str
    transactional_ddl: bool

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
    sql_dialect_name = "SQLite"

    @abstractmethod
    def guarded_executor(self, views: tuple[str, ...], *, timeout_s: float, row_cap: int,
                         byte_cap: int = 1_000_000) -> Any:
        """The read-only execution path for untrusted (model-written) SQL."""

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

    @abstractmethod
    def history_ddl(self) -> list[str]: ...

    # -- embedding -------------------------------------------------------
    @abstractmethod
    def model_status(self, conn: sa.Connection) -> dict[str, Any]:
        """Where the model is, whether it loads, its dimension."""

    # -- chunks (statements differ only in text: each engine's module `q`) --
    q: Any  # the engine's SQL module (oracle_sql / sqlite_sql)

    def sql(self, template: str) -> str:
        """Fill engine-specific parts of a statement (Oracle: the model name)."""
        return template

    def read_chunk_state(self, conn: sa.Connection, source_type: str,
                         ids: Sequence[str]) -> dict[str, tuple[str, int | None, int | None, int | None, str]]:
        """Stored (hash, owner, project, sprint, facets JSON) per record, for the indexer's skip test."""
        from ._common import stmt

        def num(v: Any) -> int | None:
            return None if v is None else int(v)

        out: dict[str, tuple[str, int | None, int | None, int | None, str]] = {}
        for start in range(0, len(ids), 500):
            part = [str(i) for i in ids[start : start + 500]]
            rows = conn.execute(stmt(self.q.READ_CHUNK_STATE, ("ids",)), {"source_type": source_type, "ids": part})
            out.update({str(r[0]): (r[1], num(r[2]), num(r[3]), num(r[4]), facets_json(facets_value(r[5])))
                        for r in rows})
        return out

    def chunk_ids(self, conn: sa.Connection, source_type: str) -> set[str]:
        from ._common import stmt

        return {str(r[0]) for r in conn.execute(stmt(self.q.CHUNK_IDS), {"source_type": source_type})}

    def queued_ids(self, conn: sa.Connection, source_type: str) -> set[str]:
        from ._common import stmt

        return {str(r[0]) for r in conn.execute(stmt(self.q.QUEUED_IDS), {"source_type": source_type})}

    def upsert_chunks(self, conn: sa.Connection, chunks: Sequence[ChunkWrite]) -> int:
        from ._common import chunk_params, stmt

        if not chunks:
            return 0
        conn.execute(stmt(self.sql(self.q.UPSERT_CHUNK), clobs=self.clob_binds), chunk_params(chunks))
        return len(chunks)

    clob_binds: tuple[str, ...] = ()

    def delete_chunks(self, conn: sa.Connection, source_type: str, ids: Sequence[str]) -> int:
        """Delete every chunk of the given records; returns the number of chunks deleted."""
        from ._common import stmt

        if not ids:
            return 0
        params = [{"source_type": source_type, "source_id": str(i)} for i in ids]
        return int(conn.execute(stmt(self.q.DELETE_CHUNK), params).rowcount or 0)

    def trim_chunks(self, conn: sa.Connection, counts: Sequence[tuple[str, str, int]]) -> int:
        """Drop the chunks a record no longer has: ``counts`` is (type, id, new chunk count)."""
        from ._common import stmt

        if not counts:
            return 0
        params = [{"source_type": t, "source_id": str(i), "chunk_count": int(n)} for t, i, n in counts]
        return int(conn.execute(stmt(self.q.DELETE_EXTRA_CHUNKS), params).rowcount or 0)

    # -- queue -----------------------------------------------------------
    def enqueue(self, conn: sa.Connection, source_type: str, source_id: str, action: str) -> None:
        self.enqueue_many(conn, [(source_type, source_id, action)])

    def enqueue_many(self, conn: sa.Connection, items: Sequence[tuple[str, str, str]]) -> int:
        from ._common import enqueue_params, stmt

        rows = enqueue_params(items)
        if rows:
            conn.execute(stmt(self.q.ENQUEUE), rows)
        return len(rows)

    @abstractmethod
    def pick(self, conn: sa.Connection, limit: int, max_attempts: int) -> list[QueueRow]: ...

    def delete_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int]) -> int:
        from ._common import stmt

        if not dirty_ids:
            return 0
        return int(conn.execute(stmt(self.q.DELETE_QUEUE_ROW), [{"dirty_id": i} for i in dirty_ids]).rowcount or 0)

    def fail_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int], error: str) -> int:
        from ._common import stmt

        if not dirty_ids:
            return 0
        params = [{"dirty_id": i, "error": error[:1000]} for i in dirty_ids]
        return int(conn.execute(stmt(self.q.FAIL_QUEUE_ROW), params).rowcount or 0)

    def retry_failed(self, conn: sa.Connection, max_attempts: int) -> int:
        from ._common import stmt

        return int(conn.execute(stmt(self.q.RETRY_FAILED), {"max_attempts": max_attempts}).rowcount or 0)

    def list_queue(self, conn: sa.Connection, *, failed_only: bool, max_attempts: int, limit: int) -> list[QueueRow]:
        from ._common import queue_rows, stmt

        binds = {"failed_only": 1 if failed_only else 0, "max_attempts": max_attempts, "limit": limit}
        return queue_rows(conn.execute(stmt(self.q.LIST_QUEUE), binds).fetchall())

    def queue_stats(self, conn: sa.Connection, max_attempts: int) -> QueueStats:
        from ._common import stmt

        row = conn.execute(stmt(self.q.QUEUE_STATS), {"max_attempts": max_attempts}).one()
        by_type = {r[0]: int(r[1]) for r in conn.execute(stmt(self.q.CHUNKS_BY_TYPE))}
        return QueueStats(depth=int(row[0] or 0), oldest_age_s=None if row[4] is None else float(row[4]),
                          stalled=int(row[2] or 0), failed=int(row[3] or 0), chunks_by_type=by_type)

    def embed(self, conn: sa.Connection, text: str) -> list[float]:
        """Embed one text in the database (status checks and parity tests)."""
        from ._common import stmt, vector_values

        return vector_values(conn.execute(stmt(self.sql(self.q.EMBED)), {"text": text}).scalar_one())

    # -- search ----------------------------------------------------------
    def semantic_search(
        self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters, exact: bool = False,
        where: Where | None = None,
    ) -> list[Hit]:
        from ._common import hits, search_binds, stmt

        template = self.q.SEMANTIC_SEARCH_EXACT if exact else self.q.SEMANTIC_SEARCH
        rows = conn.execute(stmt(with_where(self.sql(template), where), ("f_types",)),
                            search_binds(scope, filters, where, query=query, k=k))
        return hits(rows.fetchall())

    def keyword_search(self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters,
                       where: Where | None = None) -> list[Hit]:
        from ._common import hits, search_binds, stmt

        match = self.keyword_query(query)
        if match is None:
            return []
        rows = conn.execute(stmt(with_where(self.q.KEYWORD_SEARCH, where), ("f_types",)),
                            search_binds(scope, filters, where, match=match, k=k))
        return hits(rows.fetchall())

    @abstractmethod
    def keyword_query(self, text: str) -> str | None:
        """User text to this engine's full-text syntax, every term quoted."""
