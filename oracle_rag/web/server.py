"""Serving: waitress in production, the worker and start-up backfill in background threads.

``oracle-rag serve`` runs :func:`run_server`: the app on waitress (a
production WSGI server, pure Python, threads), bound to 127.0.0.1 unless
told otherwise, plus :class:`BackgroundServices`: the queue worker as a
thread (``--no-worker`` when workers run as their own processes) and, with
``backfill_on_startup``, one backfill pass in another thread, so the server
answers from its first second while the index fills behind it. A stop
event (set by SIGTERM/SIGINT in the CLI) stops accepting, lets running
requests finish (bounded), stops the worker after its current batch and
joins the threads. The Flask development server is used only with
``debug=True``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask

from ..errors import RagError
from ..tracing import configure
from .app import create_app

log = logging.getLogger("oracle_rag.web.server")

DEFAULT_THREADS = 8
LOOP_TIMEOUT_S = 0.25  # how often the serving loop checks the stop event
SHUTDOWN_GRACE_S = 5.0
MAX_REQUEST_BODY = 1024 * 1024  # waitress refuses larger bodies itself (413); the API's limit is lower


class BackgroundServices:
    """The in-process worker thread, the start-up backfill thread and, when SQL-query
    sources are configured, the thread that refreshes them on their ``refresh`` interval."""

    def __init__(self, rag: Any, *, worker: bool = True, backfill: bool | None = None) -> None:
        self.rag = rag
        self.run_worker = worker
        self.run_backfill = rag.settings.backfill_on_startup if backfill is None else backfill
        self.stop_event = threading.Event()
        self.worker: Any = rag.worker() if worker else None
        self._threads: list[threading.Thread] = []
        self.backfill_state = "off" if not self.run_backfill else "pending"
        self.backfill_error: str | None = None

    def start(self) -> None:
        if self.run_backfill:
            self._spawn("oracle-rag-backfill", self._backfill)
        if self.worker is not None:
            self._spawn("oracle-rag-worker", lambda: self.worker.run(self.stop_event))
            if self.rag.settings.sources:
                self._spawn("oracle-rag-sources", self._refresh_sources)

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


def make_server(app: Flask, host: str = "127.0.0.1", port: int = 8000, *, threads: int = DEFAULT_THREADS) -> Any:
    """A waitress server bound now (``port=0`` picks a free port: see ``.effective_port``)."""
    from waitress.server import create_server

    # waitress buffers a whole request body before the app sees it (up to 1 GiB by default, spilling
    # to temporary files): cap it, so a client cannot make it read far past the API's own limit.
    return create_server(app, host=host, port=port, threads=threads, ident="oracle-rag",
                         clear_untrusted_proxy_headers=True, channel_timeout=120,
                         max_request_body_size=MAX_REQUEST_BODY)


def serve_until(server: Any, stop: threading.Event) -> None:
    """Run ``server``'s loop until ``stop`` is set, then close it (running requests get a grace period)."""
    from waitress import wasyncore

    socket_map = server._map  # the server's private socket map (waitress keeps one per server)
    try:
        while not stop.is_set() and socket_map:
            wasyncore.loop(timeout=LOOP_TIMEOUT_S, map=socket_map, count=1)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.task_dispatcher.shutdown(timeout=SHUTDOWN_GRACE_S)
        wasyncore.close_all(socket_map)


def run_server(rag: Any, host: str = "127.0.0.1", port: int = 8000, *, worker: bool = True, debug: bool = False,
               threads: int = DEFAULT_THREADS, stop: threading.Event | None = None,
               on_ready: Callable[[str], None] | None = None, app_config: dict[str, Any] | None = None) -> None:
    """Serve ``rag`` until ``stop`` is set (or forever); background services start and stop with it."""
    configure(rag.settings)
    app = create_app({"ORACLE_RAG_SYSTEM": rag, **(app_config or {})})
    services = BackgroundServices(rag, worker=worker)
    app.extensions["oracle_rag"].services = services
    stop = stop or threading.Event()
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("listening on %s: the API is reachable from other machines; put TLS in front of it", host)
    services.start()
    try:
        if debug:
            if on_ready:
                on_ready(f"http://{host}:{port}/")
            app.run(host=host, port=port, debug=True, use_reloader=False, threaded=True)
            return
        server = make_server(app, host, port, threads=threads)
        if on_ready:
            shown = f"[{host}]" if ":" in host else host
            on_ready(f"http://{shown}:{server.effective_port}/")
        serve_until(server, stop)
    finally:
        if not services.stop():
            log.warning("background threads did not stop in time")
