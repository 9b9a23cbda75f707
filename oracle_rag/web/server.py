"""Serving: waitress in production, with the library's background services beside it.

``oracle-rag serve`` runs :func:`run_server`: the app on waitress (a
production WSGI server, pure Python, threads), bound to 127.0.0.1 unless
told otherwise, plus :class:`oracle_rag.services.BackgroundServices` (the
queue worker, the start-up backfill and the SQL-source refresh, in threads;
``--no-worker`` when workers run as their own processes), so the server
answers from its first second while the index fills behind it. The web
layer only wires them: ``oracle-rag worker`` runs the same services without
the app. A stop event (set by SIGTERM/SIGINT in the CLI) stops accepting,
lets running requests finish (bounded), stops the worker after its current
batch and joins the threads. The Flask development server is used only
with ``debug=True``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask

from ..services import BackgroundServices
from ..system import RagSystem
from ..tracing import configure
from .app import create_app

log = logging.getLogger("oracle_rag.web.server")

DEFAULT_THREADS = 8
LOOP_TIMEOUT_S = 0.25  # how often the serving loop checks the stop event
SHUTDOWN_GRACE_S = 5.0
MAX_REQUEST_BODY = 1024 * 1024  # waitress refuses larger bodies itself (413); the API's limit is lower


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


def run_server(rag: RagSystem, host: str = "127.0.0.1", port: int = 8000, *, worker: bool = True, debug: bool = False,
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
