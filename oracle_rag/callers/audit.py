"""The audit trail: who asked, through which entry point, when, and which records came back.

Every answer (page, API, ``/v1``, MCP, CLI), every search through an entry
point (MCP ``search``/``get_record``, ``oracle-rag search``) and every guarded
SQL run records one RAG_AUDIT row: the caller's id, the entry point, the
action, the time (UTC, ISO text), the cited or returned records
(``TYPE#id`` keys) and the guarded SQL that ran. The question text only with
``audit_questions = true``.

Off the answer's critical path: :meth:`AuditTrail.record` puts the event on
an in-process queue and returns; one daemon thread writes batches in its own
transaction. A failed write is logged (class only) and counted
(``write_failures``, published on /metrics); it never fails an answer.
Rows older than ``audit_retention`` are pruned by the background services
(background.py) and by ``oracle-rag audit --prune``.

The entry point is a context variable each entry point sets (web blueprints,
the MCP identity, the CLI), so the layers in between need not pass it. It
comes from what the server knows, never from a header a client chooses: on
the JSON API a request authenticated by a token (``Authorization``) is
``api``, one the host's caller loader authenticated from its own session (no
``Authorization`` header: the page in a host application) is ``page``.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import queue
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from oracle_rag.callers import audit_sql as q
from oracle_rag.config import Settings, duration_seconds
from oracle_rag.engines import Engine
from oracle_rag.engines.per_engine import PerEngine
from oracle_rag.errors import DatabaseError

log = logging.getLogger("oracle_rag.callers.audit")

ENTRY_POINTS = ("page", "api", "v1", "mcp", "cli", "python")
ACTIONS = ("answer", "search", "record", "sql")
ENTRY_POINT: contextvars.ContextVar[str] = contextvars.ContextVar("oracle_rag_entry_point", default="python")


def leave_entry_point(token: contextvars.Token[str] | None) -> None:
    """Undo the ``ENTRY_POINT.set`` of a request or a command when it ends.

    A server thread or a CLI process serves one entry point at a time, but a host that runs
    commands and requests in one thread (a test, an app calling the CLI in-process) would
    otherwise record its next plain Python call under the last entry point seen.
    """
    if token is None:
        return
    try:
        ENTRY_POINT.reset(token)
    except ValueError:  # set in another context (the request's thread): nothing leaked into this one
        pass


MAX_SQL_CHARS = 20_000
MAX_QUESTION_CHARS = 4_000


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class AuditEvent:
    at: str
    caller_id: int
    entry_point: str
    action: str
    records: tuple[str, ...]
    guarded_sql: str | None = None
    question: str | None = None

    def binds(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "caller_id": self.caller_id,
            "entry_point": self.entry_point,
            "action": self.action,
            "records": json.dumps(list(self.records), ensure_ascii=False),
            "guarded_sql": self.guarded_sql,
            "question": self.question,
        }


@dataclass(frozen=True)
class AuditRow:
    audit_id: int
    at: str
    caller_id: int
    entry_point: str
    action: str
    records: list[str]
    guarded_sql: str | None
    question: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class AuditTrail:
    """The process's audit writer for one engine (RagSystem.audit)."""

    def __init__(
        self, engine: Engine, settings: Settings, *, clock: Callable[[], dt.datetime] = utc_now
    ) -> None:
        # Held weakly, as this trail is by its writer thread: audit_for's WeakKeyDictionary is keyed by
        # the engine, and a trail that held it strongly would keep every engine (its model session and
        # caches) alive for the life of the process.
        self._engine_ref = weakref.ref(engine)
        self.with_questions = bool(settings.audit_questions)
        self.retention_s = duration_seconds(settings.audit_retention) or 30 * 86_400.0
        self.clock = clock
        self._queue: queue.Queue[AuditEvent] = queue.Queue(maxsize=10_000)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.written = 0
        self.write_failures = 0
        self.dropped = 0

    # -- recording (never raises) -----------------------------------------------------
    def record(
        self,
        caller_id: int,
        action: str,
        records: Iterable[tuple[str, str]] = (),
        *,
        guarded_sql: str | None = None,
        masked_sql: str | None = None,
        question: str | None = None,
    ) -> None:
        """Queue one event. ``masked_sql`` is ``guarded_sql`` with its literals as placeholders
        (``answering/aggregate/literals.py``): what is kept unless questions are (no SQL if it is missing)."""
        if not self.with_questions:
            guarded_sql = masked_sql
        try:
            keys = tuple(dict.fromkeys(f"{t}#{i}" for t, i in records))
            event = AuditEvent(
                iso(self.clock()),
                int(caller_id),
                ENTRY_POINT.get(),
                action,
                keys,
                guarded_sql[:MAX_SQL_CHARS] if guarded_sql else None,
                question[:MAX_QUESTION_CHARS] if question and self.with_questions else None,
            )
            self._queue.put_nowait(event)
            self._ensure_thread()
        except queue.Full:
            self.dropped += 1
            self.write_failures += 1
            log.warning("audit: queue full, event dropped")
        except Exception as exc:  # the audit must never fail an answer
            self.write_failures += 1
            log.warning("audit: event not recorded [%s]", type(exc).__name__)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=_drain, args=(weakref.ref(self), self._queue), name="oracle-rag-audit", daemon=True
                )
                self._thread.start()

    @property
    def engine(self) -> Engine:
        engine = self._engine_ref()
        if engine is None:
            raise DatabaseError("the engine of this audit trail is gone")
        return engine

    def _write(self, batch: list[AuditEvent]) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(self.engine.statement(q.INSERT_AUDIT), [e.binds() for e in batch])
            self.written += len(batch)
        except Exception as exc:
            self.write_failures += len(batch)
            log.warning("audit: %d event(s) not written [%s]", len(batch), type(exc).__name__)

    def flush(self) -> None:
        """Wait until every recorded event is written (or failed): the CLI before it exits, tests."""
        if self._thread is not None:
            self._queue.join()

    # -- reading and pruning -------------------------------------------------------------
    def list(
        self, *, caller_id: int | None = None, since: dt.datetime | None = None, limit: int = 100
    ) -> list[AuditRow]:
        self.flush()
        with self.engine.connect() as conn:
            rows = conn.execute(
                self.engine.statement(q.LIST_AUDIT),
                {"caller_id": caller_id, "since": iso(since) if since else None, "limit": int(limit)},
            ).fetchall()
        return [
            AuditRow(
                int(r[0]),
                str(r[1]),
                int(r[2]),
                str(r[3]),
                str(r[4]),
                json.loads(str(r[5] or "[]")),
                r[6],
                r[7],
            )
            for r in rows
        ]

    def prune(self, now: dt.datetime | None = None) -> int:
        """Delete rows older than the retention; returns how many."""
        before = (now or self.clock()) - dt.timedelta(seconds=self.retention_s)
        with self.engine.begin() as conn:
            return int(
                conn.execute(self.engine.statement(q.DELETE_OLD_AUDIT), {"before": iso(before)}).rowcount or 0
            )


def _drain(trail_ref: weakref.ref[AuditTrail], events: queue.Queue[AuditEvent]) -> None:
    """The writer thread: batches of up to 200 events, written in one statement each.

    It holds its trail weakly and looks again whenever it has waited a while with nothing to write,
    so an engine its owner dropped is freed and the thread ends.
    """
    while True:
        try:
            batch = [events.get(timeout=_IDLE_CHECK_S)]
        except queue.Empty:
            if trail_ref() is None:
                return
            continue
        while len(batch) < 200:
            try:
                batch.append(events.get_nowait())
            except queue.Empty:
                break
        trail = trail_ref()
        if trail is not None:
            trail._write(batch)
        del trail
        for _ in batch:
            events.task_done()


# How long the writer thread waits for an event before it checks that its trail still exists.
_IDLE_CHECK_S = 5.0

_TRAILS: PerEngine[AuditTrail] = PerEngine(lambda engine: AuditTrail(engine, engine.settings))


def audit_for(engine: Engine) -> AuditTrail:
    """The process's audit trail for ``engine`` (its settings), created on first use."""
    return _TRAILS.get(engine)


def flush_audit(engine: Engine) -> None:
    """Write what this process recorded for ``engine`` (nothing when it recorded nothing)."""
    trail = _TRAILS.peek(engine)
    if trail is not None:
        trail.flush()


def record_keys(items: Iterable[Any]) -> list[tuple[str, str]]:
    """(source_type, source_id) of hits, citations or records (anything with those attributes)."""
    return [(str(x.source_type), str(x.source_id)) for x in items]


def prune_safely(trail: AuditTrail) -> None:
    """Prune for the background services: a failure is logged, never raised."""
    try:
        removed = trail.prune()
        if removed:
            log.info("audit: pruned %d row(s) older than the retention", removed)
    except Exception as exc:  # background housekeeping: reported, never raised
        log.warning("audit: pruning failed [%s]", type(exc).__name__)
