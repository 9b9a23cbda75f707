"""Keep RAG_CHUNK equal to what SQL-query sources return, embedding only what changed.

A refresh reads a source (in a read-only, time-limited session, see
``connections.read_session``), turns rows into documents, and compares each
document's hash (over id, content, title, owner and metadata) with the one
stored in RAG_SQL_DOCUMENT:

* new or changed documents are upserted into RAG_CHUNK (embedded in the
  database) together with their state row;
* documents whose row is gone leave RAG_CHUNK and RAG_SQL_DOCUMENT;
* unchanged documents are not touched: no write, no embedding call.

All writes of one refresh are one transaction on the product's database, so
a failure anywhere (a bad row, a timeout, a driver error, the embedding)
leaves the previous documents in place; the failure is then recorded on the
source (class/code and our own message only) and the source reports failed.

The previous documents keep their previous access too, which a failed read
cannot vouch for: a ticket moved out of a team while one bad row fails every
read would stay readable by that team. So a failed refresh of a source that
declares access (an owner column, a ``group_column`` or an ``acl_query``)
also records the source in RAG_ACCESS_FAILURE, which hides its records from
callers without see-all (the scope predicate) until a read succeeds.

Reads: a **full** read at every load (the first refresh of a source in this
process) and at every ``sync``; otherwise, when the source's ``refresh``
interval has passed, an **incremental** read if it has an
``updated_at_column`` (rows at/after the watermark plus all ids, in one
read-only transaction so both see the same data) or a full read if not. An
incremental read that finds an id it never indexed and did not receive (a
row inserted with an old timestamp) falls back to a full read.

Concurrency: a refresh claims the source by bumping RAG_SQL_SOURCE.REFRESH_SEQ
from the value it read; if another process refreshed in between, its
changes are not applied and it reports ``skipped``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from oracle_rag import errors
from oracle_rag.engines import Engine, RecordAccess, facets_json
from oracle_rag.engines.records import read_lob
from oracle_rag.errors import (
    ConfigurationError,
    DatabaseError,
    NotFoundError,
    RagError,
    SourceLoadingError,
    wrap_driver_error,
)
from oracle_rag.indexing.record_writes import record_write, write_records
from oracle_rag.sources import sql_query_sql as q
from oracle_rag.sources.access import record_access
from oracle_rag.sources.connections import ConnectionResolver, read_session
from oracle_rag.sources.sql_query import SqlDocument, SqlSource, Watermark
from oracle_rag.text.chunking import plan_of

log = logging.getLogger(__name__)
WRITE_BATCH = 256
# A source without a refresh interval whose last read failed is retried this often.
RETRY_FAILED_S = 300.0
UTC = dt.UTC


@dataclass
class SourceResult:
    """What one refresh of one source did."""

    name: str
    outcome: str  # changed | unchanged | failed | skipped
    mode: str  # full | incremental | full (fallback)
    rows_read: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    documents: int = 0
    rescoped: int = 0  # documents whose access changed (owner/group/ACL), rewritten without embedding
    error: RagError | None = None
    warnings: list[str] = field(
        default_factory=list
    )  # declarations the data contradicts (done_values unseen)

    @property
    def embedded(self) -> int:
        """Documents embedded by this refresh (new + updated)."""
        return self.new + self.updated

    def summary(self) -> str:
        if self.outcome == "failed":
            return f"{self.name}: failed ({self.mode} read): {self.error}"
        if self.outcome == "skipped":
            return f"{self.name}: skipped (refreshed concurrently by another process)"
        return (
            f"{self.name}: {self.outcome} ({self.mode} read, {self.rows_read} rows read): "
            f"{self.new} new, {self.updated} updated, {self.removed} removed, {self.unchanged} unchanged"
            + (f", {self.rescoped} re-scoped" if self.rescoped else "")
            + f"; {self.documents} documents"
            + "".join(f"\n  warning: {w}" for w in self.warnings)
        )


@dataclass
class SourceState:
    """A source's recorded state (RAG_SQL_SOURCE)."""

    name: str
    status: str = "new"  # new | ok | failed
    definition_hash: str | None = None
    refresh_seq: int = 0
    last_attempt_at: dt.datetime | None = None
    last_refresh_at: dt.datetime | None = None
    last_full_at: dt.datetime | None = None
    watermark: Watermark | None = None
    doc_count: int = 0
    rows_read: int | None = None
    last_mode: str | None = None
    last_error: str | None = None
    last_error_code: str | None = None
    configured: bool = True

    def failure(self) -> RagError:
        """The recorded failure as an error of its original class."""
        cls = _error_class(self.last_error_code)
        return cls(self.last_error or "failed", source=self.name)

    def document_count(self) -> int:
        """Documents currently indexed; raises the recorded failure if the last refresh failed."""
        if self.status == "failed":
            raise self.failure()
        return self.doc_count


@dataclass
class _Plan:
    """What a read found, compared with what is stored."""

    stored: dict[str, str]
    docs: dict[str, SqlDocument]
    rows_read: int
    watermark: Watermark | None
    mode: str
    present: set[str] = field(default_factory=set)
    acl: dict[str, tuple[str, ...]] | None = None  # the acl_query's groups per row id (None: no acl_query)

    def groups(self, doc: SqlDocument) -> tuple[str, ...]:
        return doc.groups if self.acl is None else self.acl.get(doc.row_id, ())

    @property
    def changed(self) -> list[SqlDocument]:
        return [d for d in self.docs.values() if self.stored.get(d.row_id) != d.doc_hash]

    @property
    def gone(self) -> list[str]:
        return [i for i in self.stored if i not in self.present]


class SourceRefresher:
    """Refreshes a set of SQL sources into one engine's RAG_CHUNK."""

    def __init__(self, engine: Engine, sources: Iterable[SqlSource]) -> None:
        self.plan = plan_of(engine.settings)
        self.engine = engine
        self.sources: dict[str, SqlSource] = {}
        for source in sources:
            if source.name.lower() in {n.lower() for n in self.sources}:
                raise ConfigurationError(f"sources: {source.name!r} is declared twice", key="sources")
            self.sources[source.name] = source
        self.resolver = ConnectionResolver(engine.sa_engine)
        self._loaded: set[str] = set()
        self._lock = threading.RLock()

    # -- public operations ---------------------------------------------------------------
    def sync(self, name: str | None = None, *, now: dt.datetime | None = None) -> list[SourceResult]:
        """Read every source (or ``name``) in full now; failures are reported, not raised."""
        return [self.refresh(s.name, full=True, now=now) for s in self._selected(name)]

    def refresh_due(self, now: dt.datetime | None = None) -> list[SourceResult]:
        """Load sources not yet read by this process, and refresh those whose interval passed.

        A source without ``refresh`` is read once per process (and by ``sync``),
        except that a failed one is retried every ``RETRY_FAILED_S`` seconds.

        Meant to be called periodically (:mod:`oracle_rag.background` does, for serve and worker); never
        raises for a source's failure. Returns the results of the refreshes it ran.
        """
        now = _aware(now)
        self.clear_orphan_failures()
        results = []
        for source in list(self.sources.values()):
            if source.name not in self._loaded:
                results.append(self.refresh(source.name, full=True, now=now))
                continue
            try:
                state = self.state(source.name)
            except RagError as exc:
                log.warning("SQL source %r: cannot read its state: %s", source.name, exc)
                continue
            interval = source.refresh_s
            if interval is None and state.status == "failed":
                interval = RETRY_FAILED_S  # a source without interval still recovers from a failed load
            if interval is None:
                continue
            last = state.last_attempt_at
            if last is None or (now - last).total_seconds() >= interval:
                results.append(self.refresh(source.name, full=False, now=now))
        return results

    def refresh(self, name: str, *, full: bool = False, now: dt.datetime | None = None) -> SourceResult:
        """Refresh one source now (incremental when possible unless ``full``)."""
        source = self._selected(name)[0]
        now = _aware(now)
        with self._lock:
            self._loaded.add(source.name)
            mode = "full"
            try:
                self._execute(self.engine.statement(q.ENSURE_SOURCE), {"name": source.name})
                state = self.state(source.name)
                plan = self._read(source, state, full)
                mode = plan.mode
                result = self._apply(source, state, plan, now)
                if plan.mode.startswith("full") and result.outcome != "skipped":
                    result.warnings = source.meaning_warnings(plan.docs.values())
                    for warning in result.warnings:
                        log.warning("source %r: %s", source.name, warning)
                return result
            except Exception as exc:
                error = (
                    exc
                    if isinstance(exc, RagError)
                    else SourceLoadingError(f"source {source.name!r}: internal error [{type(exc).__name__}]")
                )
                if not isinstance(exc, RagError):
                    log.debug("SQL source %r failed", source.name, exc_info=True)
                self._record_failure(source.name, error, mode, now)
                if source.declares_access:
                    self._hide(source.name, error.details.get("access_error_code") or error.code, now)
                return SourceResult(source.name, "failed", mode, error=error)

    def states(self) -> list[SourceState]:
        """Every configured source's state, then recorded sources that are no longer configured."""
        with self._connect() as conn:
            rows = conn.execute(self.engine.statement(q.ALL_SOURCE_STATES)).fetchall()
        recorded = {r[0]: _state(r) for r in rows}
        out = [recorded.pop(name, SourceState(name)) for name in self.sources]
        for state in recorded.values():
            state.configured = False
            out.append(state)
        return out

    def state(self, name: str) -> SourceState:
        with self._connect() as conn:
            row = conn.execute(self.engine.statement(q.SOURCE_STATE), {"name": name}).first()
        if row is None:
            if name not in self.sources:
                raise NotFoundError(f"no SQL source named {name!r}")
            return SourceState(name)
        state = _state(row)
        state.configured = name in self.sources
        return state

    def document_count(self, name: str) -> int:
        """Indexed documents of ``name``; raises the recorded failure if its last refresh failed."""
        return self.state(name).document_count()

    def metadata(self, name: str, row_id: str) -> dict[str, Any] | None:
        """The stored metadata of one document (``None`` if it is not indexed)."""
        with self._connect() as conn:
            value = conn.execute(
                self.engine.statement(q.DOCUMENT_METADATA), {"name": name, "row_id": str(row_id)}
            ).scalar()
        if value is None:
            return None
        text = read_lob(value)
        parsed: dict[str, Any] = json.loads(text)
        return parsed

    def drop(self, name: str) -> int:
        """Remove a source's documents and state (e.g. after it left the configuration)."""
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    ids = [
                        r[0] for r in conn.execute(self.engine.statement(q.DOCUMENT_HASHES), {"name": name})
                    ]
                    removed = 0
                    for start in range(0, len(ids), WRITE_BATCH):
                        part = [f"{name}#{i}" for i in ids[start : start + WRITE_BATCH]]
                        removed += self.engine.delete_chunks(conn, name, part)
                    conn.execute(self.engine.statement(q.DELETE_DOCUMENTS), {"name": name})
                    conn.execute(self.engine.statement(q.DELETE_SOURCE), {"name": name})
                    self.engine.set_access_failure(conn, name, None)  # nothing of it is left to hide
            except sa.exc.DBAPIError as exc:
                raise wrap_driver_error(exc, f"dropping SQL source {name!r}") from None
            self._loaded.discard(name)
            return removed

    def clear_orphan_failures(self) -> int:
        """Forget the permission-data failures of sources no longer configured and with no record left.

        Such a row hides nothing, yet ``oracle-rag status`` and /healthz kept
        reporting it for good. Never raises (called by the periodic refresh).
        """
        try:
            with self.engine.begin() as conn:
                return int(
                    conn.execute(
                        self.engine.statement(q.CLEAR_ORPHAN_ACCESS_FAILURES),
                        {"configured": sorted(self.sources)},
                    ).rowcount
                    or 0
                )
        except sa.exc.DBAPIError as exc:
            log.warning(
                "could not clear the access failures of removed sources: %s",
                wrap_driver_error(exc, "clearing access failures").message,
            )
            return 0
        except errors.RagError as exc:  # the connection or transaction itself failed (already wrapped)
            log.warning("could not clear the access failures of removed sources: %s", exc.message)
            return 0

    def poll_interval(self) -> float:
        """How often a loop should call :meth:`refresh_due`: the shortest interval, within [1 s, 60 s]."""
        intervals = [s.refresh_s for s in self.sources.values() if s.refresh_s]
        return min(60.0, max(1.0, min(intervals))) if intervals else 60.0

    def run(self, stop: threading.Event, poll_s: float | None = None) -> None:
        """Call :meth:`refresh_due` until ``stop`` is set (for a background thread)."""
        while not stop.is_set():
            for result in self.refresh_due():
                (log.warning if result.outcome == "failed" else log.info)("%s", result.summary())
            stop.wait(poll_s or self.poll_interval())

    def close(self) -> None:
        """Dispose of the engines created from source URLs (bound engines are the caller's)."""
        self.resolver.close()

    # -- reading -------------------------------------------------------------------------
    def _read(self, source: SqlSource, state: SourceState, full: bool) -> _Plan:
        stored = self._stored_hashes(source.name)
        engine = self.resolver.engine_for(source.name, source.connection, source.url_options)
        incremental = (
            not full
            and source.updated_at_column is not None
            and state.status != "new"
            and state.watermark is not None
            and state.definition_hash == source.definition_hash
        )
        if incremental:
            with read_session(engine, source=source.name, timeout_s=source.timeout_s) as conn:
                ids = source.read_ids(conn)
                delta = source.read(conn, watermark=state.watermark)
            present = set(ids) | set(delta.documents)
            if not (present - set(stored) - set(delta.documents)):
                mark = state.watermark
                if delta.watermark is not None:
                    mark = delta.watermark if mark is None else mark.later(delta.watermark, source.name, 0)
                return _Plan(
                    stored,
                    delta.documents,
                    len(ids) + delta.rows_read,
                    mark,
                    "incremental",
                    present,
                    self._read_acl(source, engine),
                )
            mode = "full (fallback)"
            extra = len(ids) + delta.rows_read
        else:
            mode, extra = "full", 0
        with read_session(engine, source=source.name, timeout_s=source.timeout_s) as conn:
            result = source.read(conn)
        return _Plan(
            stored,
            result.documents,
            extra + result.rows_read,
            result.watermark,
            mode,
            set(result.documents),
            self._read_acl(source, engine),
        )

    def _read_acl(self, source: SqlSource, engine: sa.Engine) -> dict[str, tuple[str, ...]] | None:
        """The source's ACL pairs; a failure hides the source from non-see-all callers, then raises."""
        if source.acl_query is None:
            return None
        try:
            with read_session(engine, source=source.name, timeout_s=source.timeout_s) as conn:
                return source.read_acl(conn)
        except RagError as exc:
            raise SourceLoadingError(
                f"source {source.name!r}: acl_query failed ({exc.message}); its records are hidden "
                "from callers "
                f"without see-all until it succeeds",
                access_error_code=exc.code,
            ) from None

    # -- writing -------------------------------------------------------------------------
    def _apply(self, source: SqlSource, state: SourceState, plan: _Plan, now: dt.datetime) -> SourceResult:
        changed, gone = plan.changed, plan.gone
        new = sum(1 for d in changed if d.row_id not in plan.stored)
        result = SourceResult(
            source.name,
            "changed" if changed or gone else "unchanged",
            plan.mode,
            rows_read=plan.rows_read,
            new=new,
            updated=len(changed) - new,
            unchanged=len(plan.docs) - len(changed),
            removed=len(gone),
            documents=len(plan.stored) + new - len(gone),
        )
        when = _iso(now)
        name = source.name
        try:
            with self.engine.begin() as conn:
                if not conn.execute(
                    self.engine.statement(q.CLAIM), {"name": name, "seq": state.refresh_seq}
                ).rowcount:
                    conn.rollback()
                    return SourceResult(name, "skipped", plan.mode, rows_read=plan.rows_read)
                for start in range(0, len(changed), WRITE_BATCH):
                    part = changed[start : start + WRITE_BATCH]
                    write_records(
                        self.engine,
                        conn,
                        [
                            record_write(
                                self.plan,
                                name,
                                d.document_id,
                                d.chunk_text,
                                owner_id=d.owner_id,
                                facets=facets_json(d.facets),
                                access=record_access(source.access, d.owner_id, plan.groups(d)),
                            )
                            for d in part
                        ],
                    )
                    conn.execute(
                        self.engine.statement(q.UPSERT_DOCUMENT),
                        [
                            {
                                "name": name,
                                "row_id": d.row_id,
                                "doc_hash": d.doc_hash,
                                "metadata": d.metadata_json,
                                "now": when,
                            }
                            for d in part
                        ],
                    )
                for start in range(0, len(gone), WRITE_BATCH):
                    ids = gone[start : start + WRITE_BATCH]
                    self.engine.delete_chunks(conn, name, [source.document_id(i) for i in ids])
                    conn.execute(
                        self.engine.statement(q.DELETE_DOCUMENT), [{"name": name, "row_id": i} for i in ids]
                    )
                result.rescoped = self.engine.write_access(conn, self._access_changes(conn, source, plan))
                if result.rescoped and result.outcome == "unchanged":
                    result.outcome = "changed"
                # The access data the source declares NOW was read: an earlier acl_query failure
                # no longer holds, whatever the policy has become (QA D-0: a group_column that
                # replaced a failing acl_query left the source hidden for good).
                self.engine.set_access_failure(conn, name, None)
                mark = plan.watermark
                conn.execute(
                    self.engine.statement(q.RECORD_SUCCESS),
                    {
                        "name": name,
                        "definition_hash": source.definition_hash,
                        "now": when,
                        "full_read": 0 if plan.mode == "incremental" else 1,
                        "watermark": mark.text if mark else None,
                        "watermark_kind": mark.kind if mark else None,
                        "doc_count": result.documents,
                        "rows_read": plan.rows_read,
                        "mode": plan.mode,
                    },
                )
        except sa.exc.DBAPIError as exc:
            raise wrap_driver_error(exc, f"source {name!r}: writing documents") from None
        return result

    def _access_changes(
        self, conn: sa.Connection, source: SqlSource, plan: _Plan
    ) -> list[tuple[str, str, RecordAccess]]:
        """Records whose stored access differs from what the policy gives them now (no embedding needed).

        The documents read (every one in a full read) are compared; with an
        acl_query, which is read in full every time, every stored record is.
        """
        prefix = source.name + "#"
        docs = {d.document_id: d for d in plan.docs.values()}
        out = []
        for document_id, (owner, stored) in self.engine.source_access(conn, source.name).items():
            doc = docs.get(document_id)
            if doc is not None:
                access = record_access(source.access, doc.owner_id, plan.groups(doc))
            elif plan.acl is not None and document_id.startswith(prefix):
                access = record_access(source.access, owner, plan.acl.get(document_id[len(prefix) :], ()))
            else:
                continue
            if access != stored:
                out.append((source.name, document_id, access))
        return out

    def _stored_hashes(self, name: str) -> dict[str, str]:
        with self._connect() as conn:
            rows = conn.execute(self.engine.statement(q.DOCUMENT_HASHES), {"name": name})
            return {str(r[0]): str(r[1]) for r in rows}

    def _hide(self, name: str, error_code: str, now: dt.datetime) -> None:
        """Record that ``name``'s access data failed to read: its records are hidden from callers
        without see-all."""
        try:
            with self.engine.begin() as conn:
                self.engine.set_access_failure(conn, name, _iso(now), error_code)
            log.warning(
                "SQL source %r: its records are hidden from callers without see-all until a read succeeds",
                name,
            )
        except Exception as exc:  # the product database itself is failing: nothing more to record
            log.warning(
                "SQL source %r failed and its access failure could not be recorded [%s]",
                name,
                type(exc).__name__,
            )

    def _record_failure(self, name: str, error: RagError, mode: str, now: dt.datetime) -> None:
        try:
            self._execute(self.engine.statement(q.ENSURE_SOURCE), {"name": name})
            self._execute(
                self.engine.statement(q.RECORD_FAILURE),
                {
                    "name": name,
                    "now": _iso(now),
                    "mode": mode,
                    "error": error.message[:1000],
                    "error_code": error.code,
                },
            )
        except Exception as exc:  # the product database itself is failing: nothing more to record
            log.warning(
                "SQL source %r failed and its failure could not be recorded [%s]", name, type(exc).__name__
            )

    # -- helpers -------------------------------------------------------------------------
    def _selected(self, name: str | None) -> Sequence[SqlSource]:
        if name is None:
            return list(self.sources.values())
        source = self.sources.get(name)
        if source is None:
            known = ", ".join(self.sources) or "none"
            raise NotFoundError(f"no SQL source named {name!r}; configured: {known}")
        return [source]

    @contextmanager
    def _connect(self) -> Iterator[sa.Connection]:
        """A connection for reading state; a missing V4 schema gets a hint instead of a bare driver error."""
        try:
            with self.engine.connect() as conn:
                yield conn
        except DatabaseError as exc:
            raise DatabaseError(
                f"{exc.message} (reading SQL source state: is the schema migrated? run `oracle-rag migrate`)",
                driver_class=exc.driver_class,
                vendor_code=exc.vendor_code,
            ) from None

    def _execute(self, clause: sa.TextClause, binds: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            conn.execute(clause, binds)


def _aware(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _iso(moment: dt.datetime) -> str:
    return _aware(moment).astimezone(UTC).isoformat(timespec="microseconds")


def _moment(value: Any) -> dt.datetime | None:
    """A stored time as an aware UTC datetime (SQLite: ISO text; Oracle: a naive UTC datetime)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return _aware(value)


def _state(row: Any) -> SourceState:
    return SourceState(
        name=row[0],
        status=row[1],
        definition_hash=row[2],
        refresh_seq=int(row[3] or 0),
        last_attempt_at=_moment(row[4]),
        last_refresh_at=_moment(row[5]),
        last_full_at=_moment(row[6]),
        watermark=Watermark(row[8], row[7]) if row[7] is not None and row[8] else None,
        doc_count=int(row[9] or 0),
        rows_read=None if row[10] is None else int(row[10]),
        last_mode=row[11],
        last_error=row[12],
        last_error_code=row[13],
    )


def _error_class(code: str | None) -> type[RagError]:
    for cls in _subclasses(RagError):
        if cls.code == code:
            return cls
    return errors.RagError


def _subclasses(cls: type[RagError]) -> list[type[RagError]]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out
