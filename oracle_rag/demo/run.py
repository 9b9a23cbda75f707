"""``oracle-rag demo``: the whole product on one machine in one command.

Embedded engine only (a configured database URL is refused: the demo
seeds and rewrites data, which must never happen to a real database).
Steps, each showing progress: build the embedding model if missing,
migrate (product + reference schema), seed the demo data if absent,
backfill and index everything, then issue one demo token per role for a
few demo employees (earlier demo tokens are revoked), switch on demo mode
(the page's identity picker) and serve with the worker thread on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# (employee id, why it is in the picker): ids follow demo/seed.py
# (1-2 admin, 3-8 manager, 9-40 developer).
DEMO_EMPLOYEES = (1, 3, 9, 10)
DEMO_TOKEN_LABEL = "demo"
DEMO_TOKEN_DAYS = 7


@dataclass
class DemoReport:
    seeded: bool
    enqueued: int
    embedded: int
    identities: list[Any]


def _echo(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _bar(label: str, done: int, total: int) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    end = "\n" if done >= total else ""
    print(f"\r{label:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end=end, file=sys.stderr,
          flush=True)


def prepare_demo(rag: Any, tasks: int, *, echo: Callable[[str], None] = _echo) -> DemoReport:
    """Everything before serving: model, schema, data, index, demo tokens. Re-runnable."""
    from ..auth import create_token, revoke_label
    from ..caller import load_caller
    from ..embedding import ensure_model
    from ..web import DemoIdentity
    from .seed import seed

    settings = rag.settings
    if not settings.model_path.is_file():
        echo("building the embedding model (all-MiniLM-L6-v2, once)")
        ensure_model(settings.data_path, progress=lambda step, f: _bar("model", int(f * 100), 100))
    echo(f"database: {settings.sqlite_path}")
    rag.migrate(demo=True, progress=echo)
    report = seed(rag.engine, tasks, progress=lambda what, d, t: _bar(what, d, t))
    if report is None:
        echo("demo data already present")
    else:
        echo(f"seeded {report.employees} employees, {report.projects} projects, {report.sprints} sprints, "
             f"{report.tasks} tasks, {report.comments} comments")
    backfill = rag.backfill()
    worker = rag.worker()
    with rag.engine.connect() as conn:
        total = rag.engine.queue_stats(conn, settings.max_attempts).depth
    embedded = done = 0
    if total:
        echo(f"indexing {total} queued entities (embedding in-process)")
        _bar("index", 0, total)
        while True:
            batch = worker.run_once()
            if batch.idle:
                break
            done += batch.picked
            embedded += batch.embedded
            _bar("index", min(done, total), total)
            if batch.failed_rows and batch.failed_rows == batch.picked:
                echo(f"indexing stopped: {batch.errors[-1] if batch.errors else 'every row failed'}")
                break
        if done < total:
            _bar("index", total, total)
    revoke_label(rag.engine, DEMO_TOKEN_LABEL)
    identities = []
    for employee_id in DEMO_EMPLOYEES:
        issued = create_token(rag.engine, employee_id, expires_days=DEMO_TOKEN_DAYS, label=DEMO_TOKEN_LABEL)
        with rag.engine.connect() as conn:
            caller = load_caller(conn, employee_id)
        identities.append(DemoIdentity(employee_id, caller.name, caller.role, issued.token))
    return DemoReport(report is not None, backfill.total, embedded, identities)


def run_demo(config_file: str | None, port: int, tasks: int, *, host: str = "127.0.0.1",
             stop: threading.Event | None = None, on_ready: Callable[[str], None] | None = None,
             install_signals: bool = True) -> None:
    """Prepare the demo, then serve it until ``stop`` is set (Ctrl-C / SIGTERM from the CLI)."""
    from ..config import load_settings
    from ..errors import ConfigurationError
    from ..system import RagSystem
    from ..web.server import run_server

    settings = load_settings(config_file=config_file)
    if settings.database_url:
        raise ConfigurationError(
            "the demo runs on the embedded engine only (it seeds and rewrites data); unset "
            "ORACLE_RAG_DATABASE_URL / database_url, or use `oracle-rag serve` for a real database",
            key="database_url")
    settings = settings.with_overrides(demo=True)
    stop = stop or threading.Event()
    if install_signals:
        from ..worker import install_signal_handlers

        install_signal_handlers(stop)
    with RagSystem(settings) as rag:
        report = prepare_demo(rag, tasks)
        _echo("")
        _echo("demo tokens (Authorization: Bearer <token>; the page's picker uses them):")
        for ident in report.identities:
            _echo(f"  {ident.role:<9} #{ident.employee_id:<3} {ident.name:<24} {ident.token}")

        def ready(url: str) -> None:
            from ..chat.llm import LLMClient

            _echo("")
            _echo(LLMClient.describe(settings))
            _echo(f"oracle-rag demo is running: open {url}  (Ctrl-C to stop)")
            if on_ready:
                on_ready(url)

        run_server(rag, host, port, worker=True, stop=stop, on_ready=ready,
                   app_config={"ORACLE_RAG_DEMO_IDENTITIES": report.identities})
    _echo("demo stopped")
