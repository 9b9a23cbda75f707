"""``oracle-rag demo``: the whole product on one machine in one command.

Embedded engine only (a configured database URL is refused: the demo
seeds and rewrites data, which must never happen to a real database).
A port already in use is refused first, before any step (a second demo
must not revoke the tokens of the one running). Steps, each showing progress: build the embedding model if
missing, migrate (product + reference schema), seed the demo data if absent,
enqueue everything not indexed yet, issue one demo token per role for a
few demo employees (earlier demo tokens are revoked), switch on demo mode
(the page's identity picker), then serve at once with the worker thread
indexing behind it: the terminal shows a progress bar, the page and
``/healthz`` the indexing progress, and answers come from what is indexed
so far (a first run indexes ~2,000 entities, minutes on 2 cores).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oracle_rag.answering.chat.llm import LLMClient
from oracle_rag.callers.access import load_caller
from oracle_rag.callers.tokens import create_token, revoke_label
from oracle_rag.config import Settings, load_settings
from oracle_rag.data_dir import describe_data_dir
from oracle_rag.demo.seed import seed
from oracle_rag.embedding import ensure_model
from oracle_rag.errors import ConfigurationError
from oracle_rag.indexing.worker import install_signal_handlers
from oracle_rag.progress import Progress, step_progress
from oracle_rag.system import RagSystem
from oracle_rag.web import DemoIdentity
from oracle_rag.web.server import check_port, run_server

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


def _pending(rag: Any) -> int:
    """Queue rows still to index (parked ones excluded)."""
    with rag.engine.connect() as conn:
        stats = rag.engine.queue_stats(conn, rag.settings.max_attempts)
    return max(stats.depth - stats.failed, 0)


def prepare_demo(
    rag: RagSystem, tasks: int, *, echo: Callable[[str], None] = _echo, index: bool = True
) -> DemoReport:
    """Everything before serving: model, schema, data, demo tokens, and the index unless
    ``index=False`` (then the rows stay queued for the server's worker thread). Re-runnable."""

    settings = rag.settings
    if not settings.model_path.is_file():
        echo("building the embedding model (all-MiniLM-L6-v2, once)")
        ensure_model(settings.data_path, progress=step_progress("model build"))
    echo(f"{describe_data_dir(settings.data_dir)}, database {settings.sqlite_path.name}")
    rag.migrate(demo=True, progress=echo)
    bars: dict[str, Progress] = {}

    def seeding(what: str, done: int, total: int) -> None:
        bar = bars.get(what) or bars.setdefault(what, Progress(f"seed {what}", total, unit="rows"))
        bar.update(done, total)
        if done >= total:
            bar.finish()

    report = seed(rag.engine, tasks, progress=seeding)
    if report is None:
        echo("demo data already present")
    else:
        echo(
            f"seeded {report.employees} employees, {report.projects} projects, {report.sprints} sprints, "
            f"{report.tasks} tasks, {report.comments} comments"
        )
    backfill = rag.backfill()
    embedded = 0
    total = _pending(rag)
    if total and index:
        echo(f"indexing {total} queued entities (embedding in-process)")
        bar = Progress("index", total, unit="queue rows")
        worker = rag.worker()
        while True:
            batch = worker.run_once()
            if batch.idle:
                break
            embedded += batch.embedded
            bar.advance(batch.picked)
            if batch.failed_rows and batch.failed_rows == batch.picked:
                echo(f"indexing stopped: {batch.errors[-1] if batch.errors else 'every row failed'}")
                break
        bar.finish()
    revoke_label(rag.engine, DEMO_TOKEN_LABEL)
    identities = []
    for employee_id in DEMO_EMPLOYEES:
        issued = create_token(rag.engine, employee_id, expires_days=DEMO_TOKEN_DAYS, label=DEMO_TOKEN_LABEL)
        with rag.engine.connect() as conn:
            caller = load_caller(conn, employee_id, rag.engine)
        identities.append(DemoIdentity(employee_id, caller.name, caller.role, issued.token))
    return DemoReport(report is not None, backfill.total, embedded, identities)


def run_demo(
    config_file: str | None,
    port: int,
    tasks: int,
    *,
    host: str = "127.0.0.1",
    stop: threading.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
    install_signals: bool = True,
) -> None:
    """Prepare the demo, then serve it until ``stop`` is set (Ctrl-C / SIGTERM from the CLI)."""

    settings = load_settings(config_file=config_file)
    if settings.database_url:
        raise ConfigurationError(
            "the demo runs on the embedded engine only (it seeds and rewrites data); unset "
            "ORACLE_RAG_DATABASE_URL / database_url, or use `oracle-rag serve` for a real database",
            key="database_url",
        )
    # Serve at once and index behind it: the worker thread starts without its
    # usual delay (unless one is configured) and there is nothing left to backfill.
    quick = (
        {"worker_initial_delay_ms": 0}
        if settings.worker_initial_delay_ms == Settings.worker_initial_delay_ms
        else {}
    )
    settings = settings.with_overrides(demo=True, backfill_on_startup=False, **quick)
    # Before anything changes: a second demo must not rotate the tokens the running page hands out.
    check_port(host, port)
    stop = stop or threading.Event()
    if install_signals:
        install_signal_handlers(stop)
    with RagSystem(settings) as rag:
        report = prepare_demo(rag, tasks, index=False)
        _echo("")
        _echo("demo tokens (Authorization: Bearer <token>; the page's picker uses them):")
        for ident in report.identities:
            _echo(f"  {ident.role:<9} #{ident.employee_id:<3} {ident.name:<24} {ident.token}")
        watcher: list[threading.Thread] = []

        def ready(url: str) -> None:
            _echo("")
            _echo(LLMClient.describe(settings))
            _echo(f"oracle-rag demo is running: open {url}  (Ctrl-C to stop)")
            pending = _pending(rag)
            if pending:
                _echo(
                    f"indexing {pending} queued entities in the background; the page shows the progress "
                    f"and answers from what is indexed so far"
                )
                thread = threading.Thread(
                    target=_watch_indexing,
                    args=(rag, pending, stop),
                    daemon=True,
                    name="oracle-rag-demo-progress",
                )
                thread.start()
                watcher.append(thread)
            if on_ready:
                on_ready(url)

        run_server(
            rag,
            host,
            port,
            worker=True,
            stop=stop,
            on_ready=ready,
            app_config={"ORACLE_RAG_DEMO_IDENTITIES": report.identities},
        )
        for thread in watcher:
            thread.join(5)
    _echo("demo stopped")


def _watch_indexing(rag: Any, total: int, stop: threading.Event, every_s: float = 1.0) -> None:
    """Draw the server's indexing progress on the terminal until the queue is empty or ``stop``."""
    bar = Progress("index", total, unit="queue rows")
    try:
        while not stop.wait(every_s):
            try:
                pending = _pending(rag)
            except Exception:  # the server reports database faults; the bar just waits
                continue
            bar.update(max(total - pending, 0))
            if pending == 0:
                break
    finally:
        bar.finish()
