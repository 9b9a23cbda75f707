"""Drain RAG_DIRTY into RAG_CHUNK without losing a row.

The rows of a batch are coalesced by (SOURCE_TYPE, SOURCE_ID) so the latest
queue row decides the action; the entities are re-indexed and exactly the
picked rows deleted in the transaction that writes their chunks. A crash
anywhere before that commit leaves the queue rows in place. A failure is
recorded on the rows (ATTEMPTS + 1 and LAST_ERROR) instead of dropping
them; rows that reach ``max_attempts`` stay in the queue, are skipped by
picks and reported until an operator runs ``oracle-rag queue retry``.
A record whose re-index failed keeps its last good chunks but not their
access: that is who could read it before the change the queue row announces
(a task reassigned while its re-index fails must not stay with its old
assignee), so it is readable only by see-all callers until it is indexed
again (sources with a ``public`` policy excepted: their access never changes).

Two shapes of batch, chosen by the engine (``Engine.prepared_writes``):

* **one transaction** (Oracle): pick with SKIP LOCKED, re-index with the
  text embedded in SQL, delete the rows, commit. Row locks keep workers
  apart and other writers never wait for the batch.
* **prepared** (the embedded engine, one write lock per database): holding
  the worker slot (two workers never take the same rows), pick and plan in
  one read snapshot, embed in-process with no transaction open, then in a
  short ``BEGIN IMMEDIATE`` re-check and write. The re-check: a picked row
  no longer queued, or a record whose stored state changed since the plan,
  means someone else wrote it; that entity is not written and its rows stay
  for the next batch. An entity changed by the application meanwhile has a
  newer queue row, which the batch does not delete: it is redone. Other
  writers wait for the write only (``BatchResult.lock_s``), never for the model.
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

from oracle_rag.config import Settings
from oracle_rag.engines import QueueRow, RecordAccess
from oracle_rag.engines.generations import STANDBY
from oracle_rag.engines.roles import WorkerStore
from oracle_rag.errors import RagError, wrap_driver_error
from oracle_rag.indexing.indexer import Indexer, IndexPlan, IndexResult

log = logging.getLogger("oracle_rag.indexing.worker")


@dataclass
class BatchResult:
    picked: int = 0
    keys: int = 0
    embedded: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed_rows: int = 0
    deferred_rows: int = 0  # picked rows left queued: their entity was written by someone else meanwhile
    filled: int = (
        0  # chunks given a live model generation's missing vector (the fill, when the queue is idle)
    )
    fill_picked: int = 0
    errors: list[str] = field(default_factory=list)
    # Where the time went: the write lock held (the whole batch on a one-transaction
    # engine), waiting for it, and embedding outside it (prepared batches).
    lock_s: float = 0.0
    lock_wait_s: float = 0.0
    embed_s: float = 0.0

    @property
    def idle(self) -> bool:
        return self.picked == 0 and self.fill_picked == 0


Groups = dict[tuple[str, str], tuple[str, list[int]]]  # (type, id) -> (action, the DIRTY_IDs)


def coalesce(rows: Sequence[QueueRow]) -> Groups:
    """Group rows by entity; the row with the highest DIRTY_ID decides the action.

    ``'task'`` and ``'TASK'`` are one entity (another application may write
    lower case); the first spelling seen names the group, and the indexer maps
    it to the registered one.
    """
    out: dict[tuple[str, str], tuple[str, list[int]]] = {}
    latest: dict[tuple[str, str], int] = {}
    spelling: dict[tuple[str, str], tuple[str, str]] = {}
    for row in rows:
        key = spelling.setdefault(
            (row.source_type.casefold(), row.source_id), (row.source_type, row.source_id)
        )
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
    def __init__(
        self,
        engine: WorkerStore,
        indexer: Indexer,
        settings: Settings,
        on_batch: Callable[[BatchResult], None] | None = None,
    ) -> None:
        self.engine = engine
        self.indexer = indexer
        self.settings = settings
        self.on_batch = on_batch
        self.last_error: str | None = None
        self.last_success: float | None = None

    def run_once(self) -> BatchResult:
        """Process one batch; returns what happened. Never raises for a per-row failure."""
        result = BatchResult()
        if self.engine.prepared_writes:
            self._prepared_batch(result)
        else:
            self._one_transaction(result)
        if result.picked == 0:  # the fill runs behind live writes: only when no queue row was ready
            self._fill(result)
        if result.picked and self.on_batch:
            self.on_batch(result)
        if result.errors:
            self.last_error = result.errors[-1]
        elif result.picked:
            self.last_success = time.time()
            self.last_error = None
        return result

    # -- one transaction (the pick locks its rows) ---------------------------------
    def _one_transaction(self, result: BatchResult) -> None:
        started = time.perf_counter()
        with self.engine.begin_exclusive() as conn:
            locked = time.perf_counter()
            result.lock_wait_s = locked - started
            rows = self.engine.pick(conn, self.settings.batch_size, self.settings.max_attempts)
            result.picked = len(rows)
            if rows:
                groups = coalesce(rows)
                result.keys = len(groups)
                try:
                    with conn.begin_nested():
                        self._add(result, self.indexer.apply(conn, *self._split(groups)))
                    self.engine.delete_queue_rows(conn, [r.dirty_id for r in rows])
                except Exception as exc:  # isolate the failing entities, keep the rest
                    log.warning(
                        "batch of %d failed (%s); retrying entity by entity", len(rows), safe_error(exc)
                    )
                    self._one_by_one(conn, groups, result)
        result.lock_s = time.perf_counter() - locked

    def _one_by_one(self, conn: sa.Connection, groups: Groups, result: BatchResult) -> None:
        for key, (action, ids) in groups.items():
            try:
                with conn.begin_nested():
                    self._add(result, self.indexer.apply(conn, *self._split({key: (action, ids)})))
                self.engine.delete_queue_rows(conn, ids)
            except Exception as exc:
                self._record_failure(conn, key, (action, ids), exc, result)

    # -- prepared: embed outside the write lock, write in a short transaction -------
    def _prepared_batch(self, result: BatchResult) -> None:
        with self.engine.worker_slot():
            plan: IndexPlan | None = None
            with self.engine.begin() as conn:  # one snapshot: the rows and the entities they name
                rows = self.engine.pick(conn, self.settings.batch_size, self.settings.max_attempts)
                result.picked = len(rows)
                if not rows:
                    return
                groups = coalesce(rows)
                result.keys = len(groups)
                try:
                    plan = self.indexer.plan(conn, *self._split(groups))
                except Exception as exc:
                    log.warning(
                        "batch of %d failed (%s); retrying entity by entity", len(rows), safe_error(exc)
                    )
            if plan is not None:
                try:
                    self._embed_and_write(groups, plan, result)
                    return
                except Exception as exc:
                    log.warning(
                        "batch of %d failed (%s); retrying entity by entity", len(rows), safe_error(exc)
                    )
            for key, group in groups.items():
                self._prepared_entity(key, group, result)

    def _prepared_entity(
        self, key: tuple[str, str], group: tuple[str, list[int]], result: BatchResult
    ) -> None:
        try:
            with self.engine.begin() as conn:
                plan = self.indexer.plan(conn, *self._split({key: group}))
            self._embed_and_write({key: group}, plan, result)
        except Exception as exc:
            started = time.perf_counter()
            with self.engine.begin_exclusive() as conn:
                locked = time.perf_counter()
                self._record_failure(conn, key, group, exc, result)
            result.lock_wait_s += locked - started
            result.lock_s += time.perf_counter() - locked

    def _embed_and_write(self, groups: Groups, plan: IndexPlan, result: BatchResult) -> None:
        """Embed the plan's texts (no transaction open), then re-check and write under the write lock."""
        started = time.perf_counter()
        vectors = self.engine.embed_texts(plan.texts())
        result.embed_s += time.perf_counter() - started
        started = time.perf_counter()
        with self.engine.begin_exclusive() as conn:
            locked = time.perf_counter()
            present = self.engine.queue_rows_present(conn, [i for _, ids in groups.values() for i in ids])
            stored = self.indexer.stored_now(conn, plan)
            # A model generation that went live since the vectors were computed
            # (a switch) has none of them: redo the batch rather than leave gaps.
            embedded_for = set(vectors) if plan.changed else None
            current = {g.generation_id for g in self.engine.live_generations(conn).values()}
            same_models = embedded_for is None or current <= embedded_for
            ready: dict[tuple[str, str], list[int]] = {}
            for (source_type, source_id), (_action, ids) in groups.items():
                key = self.indexer.key(source_type, source_id)
                if (
                    same_models
                    and all(i in present for i in ids)
                    and (key not in stored or plan.stored[key] == stored[key])
                ):
                    ready[key] = ids
                else:
                    result.deferred_rows += sum(1 for i in ids if i in present)
            self._add(result, self.indexer.write(conn, plan.only(ready), vectors))
            self.engine.delete_queue_rows(conn, [i for ids in ready.values() for i in ids])
        result.lock_wait_s += locked - started
        result.lock_s += time.perf_counter() - locked

    # -- the fill: a live generation's missing vectors (model switch) -------------
    # Chunks per fill batch, at most: a live write that arrives during a batch waits
    # for it (the worker does one thing at a time), and a model without a batched
    # path (e5) embeds ~10 texts a second on a busy 2-core machine.
    fill_batch = 8

    def _fill(self, result: BatchResult) -> None:
        """One batch of chunks lacking a live generation's vector: the one being switched to first,
        then any gap of the active one. Each chunk's stored text is embedded once with that model."""
        with self.engine.connect() as conn:
            live = sorted(
                self.engine.live_generations(conn).values(), key=lambda g: (g.state != STANDBY, g.slot)
            )
        for gen in live:
            if self.engine.prepared_writes:
                with self.engine.worker_slot():
                    with self.engine.begin() as conn:
                        chunks = self.engine.fill_pick(
                            conn, gen, min(self.fill_batch, self.settings.batch_size)
                        )
                    if not chunks:
                        continue
                    started = time.perf_counter()
                    vectors = self.engine.embed_passages(gen, [content for _, content in chunks])
                    result.embed_s += time.perf_counter() - started
                    with self.engine.begin_exclusive() as conn:
                        result.filled += self.engine.fill_write(conn, gen, chunks, vectors)
            else:
                with self.engine.begin_exclusive() as conn:
                    chunks = self.engine.fill_pick(conn, gen, min(self.fill_batch, self.settings.batch_size))
                    if not chunks:
                        continue
                    result.filled += self.engine.fill_write(conn, gen, chunks)
            result.fill_picked += len(
                chunks
            )  # fewer written: those chunks changed meanwhile (the edit wrote both)
            return

    # -- shared -------------------------------------------------------------------
    @staticmethod
    def _split(groups: Groups) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(upserts, deletes) of coalesced groups."""
        return (
            [k for k, (a, _) in groups.items() if a == "UPSERT"],
            [k for k, (a, _) in groups.items() if a == "DELETE"],
        )

    @staticmethod
    def _add(result: BatchResult, res: IndexResult) -> None:
        result.embedded += res.embedded
        result.unchanged += res.unchanged
        result.deleted += res.deleted

    def _record_failure(
        self,
        conn: sa.Connection,
        key: tuple[str, str],
        group: tuple[str, list[int]],
        exc: Exception,
        result: BatchResult,
    ) -> None:
        action, ids = group
        message = safe_error(exc)
        self.engine.fail_queue_rows(conn, ids, message)
        if action == "UPSERT":
            self._hide(conn, key)
        result.failed_rows += len(ids)
        result.errors.append(f"{key[0]} #{key[1]}: {message}")
        log.error("re-index of %s #%s failed: %s", key[0], key[1], message)

    def _hide(self, conn: sa.Connection, key: tuple[str, str]) -> None:
        """Leave the record whose re-index failed to see-all callers (its stored access is no longer
        vouched for)."""
        source_type, source_id = self.indexer.key(*key)
        source = self.indexer.sources.get(source_type)
        if source is None or "public" in source.access.rules:
            return
        try:
            self.engine.write_access(conn, [(source_type, source_id, RecordAccess())])
        except Exception as exc:  # the failure itself is recorded; the database refused this too
            log.warning(
                "re-index of %s #%s failed and its record could not be hidden: %s",
                source_type,
                source_id,
                safe_error(exc),
            )

    def drain(self, max_batches: int | None = None) -> BatchResult:
        """Run batches until no pickable row is left (``--once``)."""
        total = BatchResult()
        batches = 0
        while max_batches is None or batches < max_batches:
            res = self.run_once()
            batches += 1
            if res.idle:
                break
            for name in (
                "picked",
                "keys",
                "embedded",
                "unchanged",
                "deleted",
                "failed_rows",
                "deferred_rows",
                "filled",
                "fill_picked",
                "lock_s",
                "lock_wait_s",
                "embed_s",
            ):
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
            log.error(
                "%d queue row(s) reached max attempts (%d) and are parked; inspect with "
                "`oracle-rag queue list --failed`, fix the cause, then `oracle-rag queue retry`",
                stats.failed,
                self.settings.max_attempts,
            )


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM/SIGINT set ``stop``: the loop finishes its batch and exits cleanly."""

    def handler(signum: int, _frame: Any) -> None:
        log.info("signal %d received: stopping after the current batch", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
