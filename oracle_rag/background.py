"""Background work of a running product: the queue worker, the start-up backfill, the SQL-source refresh,
the audit trail's pruning (rows older than ``audit_retention``).

The library's, not the web layer's: ``oracle-rag serve`` runs these threads
beside the app (``web/server.py`` wires them and shows their state on
``/healthz``), and ``oracle-rag worker`` runs the same ones without it, so a
worker process refreshes SQL-query sources as a serving process does. A host
application that wants the background work starts a
:class:`BackgroundServices` of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from oracle_rag.callers.audit import audit_for, prune_safely
from oracle_rag.errors import RagError
from oracle_rag.indexing.worker import Worker
from oracle_rag.system import RagSystem

log = logging.getLogger("oracle_rag.background")
AUDIT_PRUNE_INTERVAL_S = 3600.0


class BackgroundServices:
    """The in-process worker thread, the start-up backfill thread and, when SQL-query
    sources are configured, the thread that refreshes them on their ``refresh`` interval."""

    def __init__(self, rag: RagSystem, *, worker: bool = True, backfill: bool | None = None) -> None:
        self.rag = rag
        self.run_worker = worker
        self.run_backfill = rag.settings.backfill_on_startup if backfill is None else backfill
        self.stop_event = threading.Event()
        self.worker: Worker | None = rag.worker() if worker else None
        self._threads: list[threading.Thread] = []
        self.backfill_state = "off" if not self.run_backfill else "pending"
        self.backfill_error: str | None = None

    def start(self) -> None:
        if self.run_backfill:
            self._spawn("oracle-rag-backfill", self._backfill)
        if self.worker is not None:
            worker_ = self.worker
            self._spawn("oracle-rag-worker", lambda: worker_.run(self.stop_event))
            if self.rag.settings.sources:
                self._spawn("oracle-rag-sources", self._refresh_sources)
            self._spawn("oracle-rag-audit-prune", self._prune_audit)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _backfill(self) -> None:
        self.backfill_state = "running"
        try:
            report = self.rag.backfill()
        except RagError as exc:
            self.backfill_state, self.backfill_error = "failed", str(exc)
            log.error("start-up backfill failed: %s", exc)
            return
        except Exception as exc:  # keep the server up; the error is reported on /healthz
            self.backfill_state, self.backfill_error = "failed", type(exc).__name__
            log.error("start-up backfill failed: %s", type(exc).__name__)
            return
        self.backfill_state = "done"
        log.info("start-up backfill enqueued %d entities", report.total)

    def _refresh_sources(self) -> None:
        """Refresh due SQL-query sources until stopped; a failing source is reported, never fatal."""
        try:
            self.rag.sql_sources().run(self.stop_event)
        except Exception as exc:  # a configuration error: reported on /healthz, the server stays up
            self.sources_error = str(exc) if hasattr(exc, "code") else type(exc).__name__
            log.error("SQL-source refresh stopped: %s", self.sources_error)

    sources_error: str | None = None

    def _prune_audit(self) -> None:
        """At start and then hourly, until stopped: delete audit rows older than ``audit_retention``;
        without SQL-query sources (whose refresh does it), forget the permission-data failures of
        removed sources with no record left, which status and /healthz would otherwise report for good."""
        trail = audit_for(self.rag.engine)
        while True:
            prune_safely(trail)
            if not self.rag.settings.sources:
                self.rag.sql_sources().clear_orphan_failures()
            if self.stop_event.wait(AUDIT_PRUNE_INTERVAL_S):
                return

    def stop(self, timeout: float = 30.0) -> bool:
        """Signal the threads and wait; True when all have finished."""
        self.stop_event.set()
        for thread in self._threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"in_process": self.worker is not None, "backfill": self.backfill_state}
        if self.worker is not None:
            alive = any(t.name == "oracle-rag-worker" and t.is_alive() for t in self._threads)
            out["running"] = alive
            out["last_error"] = self.worker.last_error
        if self.backfill_error:
            out["backfill_error"] = self.backfill_error
        if self.rag.settings.sources:
            out["sources_refresh"] = "stopped" if self.sources_error else "running"
            if self.sources_error:
                out["sources_error"] = self.sources_error
        return out


def run_until(services: BackgroundServices, stop: threading.Event, *, poll_s: float = 0.5) -> bool:
    """Start ``services``, wait for ``stop`` (set by a signal handler), stop them; True when all stopped."""
    services.start()
    try:
        while not stop.wait(poll_s):
            pass
    finally:
        stopped = services.stop()
    return stopped
