"""Drain RAG_DIRTY into RAG_CHUNK without losing a row.

One batch is one transaction: pick (SKIP LOCKED on Oracle, BEGIN IMMEDIATE
on SQLite), coalesce by (SOURCE_TYPE, SOURCE_ID) so the latest queue row
decides the action, re-index, delete exactly the picked rows, commit. A
crash anywhere before the commit rolls everything back and the queue rows
are still there. A failure is recorded on the rows (ATTEMPTS + 1 and
LAST_ERROR) instead of dropping them; rows that reach ``max_attempts`` stay
in the queue, are skipped by picks and reported until an operator runs
``oracle-rag queue retry``.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from .config import Settings
from .engines import Engine, QueueRow
from .errors import RagError, wrap_driver_error
from .indexer import Indexer, IndexResult

log = logging.getLogger("oracle_rag.worker")


@dataclass
class BatchResult:
    picked: int = 0
    keys: int = 0
    embedded: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed_rows: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def idle(self) -> bool:
        return self.picked == 0


def coalesce(rows: Sequence[QueueRow]) -> dict[tuple[str, str], tuple[str, list[int]]]:
    """Group rows by entity; the row with the highest DIRTY_ID decides the action.

    ``'task'`` and ``'TASK'`` are one entity (another application may write
    lower case); the first spelling seen names the group, and the indexer maps
    it to the registered one.
    """
    out: dict[tuple[str, str], tuple[str, list[int]]] = {}
    latest: dict[tuple[str, str], int] = {}
    spelling: dict[tuple[str, str], tuple[str, str]] = {}
    for row in rows:
        key = spelling.setdefault((row.source_type.casefold(), row.source_id), (row.source_type, row.source_id))
        action, ids = out.get(key, (row.action, []))
        ids.append(row.dirty_id)
        if row.dirty_id >= latest.get(key, -1):
            latest[key] = row.dirty_id
            action = row.action
        out[key] = (action, ids)
    return out


def safe_error(exc: BaseException) -> str:
    """A LAST_ERROR text: our own message for RagErrors, only the class otherwise.

    Driver errors keep their class and vendor code (ORA-xxxxx, SQLITE_BUSY),
    never their message, so an operator can still tell a lock from a bug.
    """
    if isinstance(exc, RagError):
        return str(exc)[:1000]
    if isinstance(exc, sa.exc.DBAPIError):
        return str(wrap_driver_error(exc, "re-indexing"))[:1000]
    return f"{type(exc).__name__} (details withheld: driver messages may carry credentials)"


class Worker:
    def __init__(self, engine: Engine, indexer: Indexer, settings: Settings,
                 on_batch: Callable[[BatchResult], None] | None = None) -> None:
        self.engine = engine
        self.indexer = indexer
        self.settings = settings
        self.on_batch = on_batch
        self.last_error: str | None = None
        self.last_success: float | None = None

    def run_once(self) -> BatchResult:
        """Process one batch; returns what happened. Never raises for a per-row failure."""
        result = BatchResult()
        with self.engine.begin_exclusive() as conn:
            rows = self.engine.pick(conn, self.settings.batch_size, self.settings.max_attempts)
            result.picked = len(rows)
            if not rows:
                return result
            groups = coalesce(rows)
            result.keys = len(groups)
            try:
                with conn.begin_nested():
                    self._apply(conn, groups, result)
                self.engine.delete_queue_rows(conn, [r.dirty_id for r in rows])
            except Exception as exc:  # isolate the failing entities, keep the rest
                log.warning("batch of %d failed (%s); retrying entity by entity", len(rows), safe_error(exc))
                self._one_by_one(conn, groups, result)
        if self.on_batch:
            self.on_batch(result)
        if result.errors:
            self.last_error = result.errors[-1]
        else:
            self.last_success = time.time()
            self.last_error = None
        return result

    def _apply(self, conn: sa.Connection, groups: dict[tuple[str, str], tuple[str, list[int]]],
               result: BatchResult) -> None:
        upserts = [k for k, (a, _) in groups.items() if a == "UPSERT"]
        deletes = [k for k, (a, _) in groups.items() if a == "DELETE"]
        res: IndexResult = self.indexer.apply(conn, upserts, deletes)
        result.embedded += res.embedded
        result.unchanged += res.unchanged
        result.deleted += res.deleted

    def _one_by_one(self, conn: sa.Connection, groups: dict[tuple[str, str], tuple[str, list[int]]],
                    result: BatchResult) -> None:
        for key, (action, ids) in groups.items():
            try:
                with conn.begin_nested():
                    self._apply(conn, {key: (action, ids)}, result)
                self.engine.delete_queue_rows(conn, ids)
            except Exception as exc:
                message = safe_error(exc)
                self.engine.fail_queue_rows(conn, ids, message)
                result.failed_rows += len(ids)
                result.errors.append(f"{key[0]} #{key[1]}: {message}")
                log.error("re-index of %s #%s failed: %s", key[0], key[1], message)

    def drain(self, max_batches: int | None = None) -> BatchResult:
        """Run batches until no pickable row is left (``--once``)."""
        total = BatchResult()
        batches = 0
        while max_batches is None or batches < max_batches:
            res = self.run_once()
            batches += 1
            if res.idle:
                break
            for name in ("picked", "keys", "embedded", "unchanged", "deleted", "failed_rows"):
                setattr(total, name, getattr(total, name) + getattr(res, name))
            total.errors.extend(res.errors)
        return total

    def run(self, stop: threading.Event, *, initial_delay: bool = True) -> None:
        """Poll until ``stop`` is set; finishes the current batch before returning."""
        if initial_delay and stop.wait(self.settings.worker_initial_delay_ms / 1000):
            return
        poll = self.settings.worker_poll_ms / 1000
        last_report = 0.0
        while not stop.is_set():
            try:
                res = self.run_once()
            except RagError as exc:
                self.last_error = str(exc)
                log.error("worker batch failed: %s", exc)
                res = BatchResult()
            except Exception as exc:  # keep the loop alive; the rows are safe in the queue
                self.last_error = safe_error(exc)
                log.error("worker batch failed: %s", self.last_error)
                res = BatchResult()
            if time.monotonic() - last_report > 60:
                last_report = time.monotonic()
                self._report_dead_rows()
            if res.idle or res.failed_rows:
                stop.wait(poll)

    def _report_dead_rows(self) -> None:
        try:
            with self.engine.connect() as conn:
                stats = self.engine.queue_stats(conn, self.settings.max_attempts)
        except Exception:
            return
        if stats.failed:
            log.error("%d queue row(s) reached max attempts (%d) and are parked; inspect with "
                      "`oracle-rag queue list --failed`, fix the cause, then `oracle-rag queue retry`",
                      stats.failed, self.settings.max_attempts)


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM/SIGINT set ``stop``: the loop finishes its batch and exits cleanly."""

    def handler(signum: int, _frame: Any) -> None:
        log.info("signal %d received: stopping after the current batch", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
