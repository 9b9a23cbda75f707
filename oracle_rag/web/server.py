"""Serving: waitress in production, with the library's background services beside it.

``oracle-rag serve`` runs :func:`run_server`: the app on waitress (a
production WSGI server, pure Python, threads), bound to 127.0.0.1 unless
told otherwise, plus :class:`oracle_rag.background.BackgroundServices` (the
queue worker, the start-up backfill and the SQL-source refresh, in threads;
``--no-worker`` when workers run as their own processes), so the server
answers from its first second while the index fills behind it. The web
layer only wires them: ``oracle-rag worker`` runs the same services without
the app. A stop event (set by SIGTERM/SIGINT in the CLI) stops accepting,
lets running requests finish (bounded), stops the worker after its current
batch and joins the threads. The Flask development server is used only
with ``debug=True``.

A port already taken is one line naming the process that holds it
(:func:`check_port`, called by ``serve`` and the demo *before* they change
anything: the demo rotates its tokens, and a second ``make demo`` must not
hand the running page dead ones).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask

from oracle_rag.background import BackgroundServices
from oracle_rag.errors import ConfigurationError
from oracle_rag.system import RagSystem
from oracle_rag.tracing import configure
from oracle_rag.web.app import create_app

log = logging.getLogger("oracle_rag.web.server")

DEFAULT_THREADS = 8
LOOP_TIMEOUT_S = 0.25  # how often the serving loop checks the stop event
SHUTDOWN_GRACE_S = 5.0
MAX_REQUEST_BODY = 1024 * 1024  # waitress refuses larger bodies itself (413); the API's limit is lower


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on ``port`` (any address), from /proc/net/tcp{,6}; empty where there is
    no /proc."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)  # header
                for line in f:
                    fields = line.split()
                    # local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 is the inode
                    if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(fields[9])
        except (OSError, ValueError, IndexError):
            continue
    return inodes


def port_holder(port: int) -> str | None:
    """Best effort: ``pid N (command line)`` of the process listening on ``port``, or ``None``.

    Linux only (/proc); a process of another user is not readable and is not named.
    """
    targets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not targets:
        return None
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") not in targets:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode("utf-8", "replace").split("\0")
            except OSError:
                continue
            shown = _command_words(argv)
            return f"pid {pid} ({shown})" if shown else f"pid {pid}"
    return None


def _command_words(argv: list[str]) -> str:
    """The first words of a command line, programs by their base name, anything secret-shaped left out."""
    words = []
    for arg in [a for a in argv if a][:4]:
        if any(mark in arg for mark in ("://", "@", "=")) or len(arg) > 64:
            words.append("…")
        else:
            words.append(os.path.basename(arg) if arg.startswith("/") else arg)
    return " ".join(words)


def port_in_use(host: str, port: int) -> ConfigurationError:
    """The one-line error for a taken port, naming its holder when it can be found."""
    holder = port_holder(port)
    held = f"held by {holder}" if holder else "held by another process"
    return ConfigurationError(
        f"port {port} on {host} is already in use ({held}); stop it, or pass --port with another port "
        f"(0 picks a free one)",
        key="port",
    )


def check_port(host: str, port: int) -> None:
    """Refuse, before anything else happens, a port another process listens on (``0`` is always free).

    Binds a throw-away socket the way waitress does (``SO_REUSEADDR``, so a
    port in TIME_WAIT is free) and closes it at once.
    """
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigurationError(f"cannot listen on host {host!r}: {exc.strerror}", key="host") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        if os.name != "nt":
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise port_in_use(host, port) from None
            raise ConfigurationError(
                f"cannot listen on {host}:{port} ({exc.strerror or type(exc).__name__})", key="port"
            ) from None


def make_server(
    app: Flask, host: str = "127.0.0.1", port: int = 8000, *, threads: int = DEFAULT_THREADS
) -> Any:
    """A waitress server bound now (``port=0`` picks a free port: see ``.effective_port``)."""
    from waitress.server import create_server

    # waitress buffers a whole request body before the app sees it (up to 1 GiB by default, spilling
    # to temporary files): cap it, so a client cannot make it read far past the API's own limit.
    return create_server(
        app,
        host=host,
        port=port,
        threads=threads,
        ident="oracle-rag",
        clear_untrusted_proxy_headers=True,
        channel_timeout=120,
        max_request_body_size=MAX_REQUEST_BODY,
    )


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


def run_server(
    rag: RagSystem,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    worker: bool = True,
    debug: bool = False,
    threads: int = DEFAULT_THREADS,
    stop: threading.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
    app_config: dict[str, Any] | None = None,
) -> None:
    """Serve ``rag`` until ``stop`` is set (or forever); background services start and stop with it."""
    check_port(host, port)
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
        try:
            server = make_server(app, host, port, threads=threads)
        except OSError as exc:  # taken since check_port, or a caller that did not check
            if exc.errno == errno.EADDRINUSE:
                raise port_in_use(host, port) from None
            raise
        if on_ready:
            shown = f"[{host}]" if ":" in host else host
            on_ready(f"http://{shown}:{server.effective_port}/")
        serve_until(server, stop)
    finally:
        if not services.stop():
            log.warning("background threads did not stop in time")
