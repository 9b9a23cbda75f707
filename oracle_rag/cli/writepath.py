"""CLI commands for the write path: ``worker``, ``backfill``, ``status``, ``queue``, ``triggers``.

Libraries: :mod:`oracle_rag.indexing.worker`, :mod:`oracle_rag.indexing.backfill`,
:mod:`oracle_rag.indexing.triggers` (the optional enqueue triggers).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TextIO

import click

from oracle_rag.background import BackgroundServices, run_until
from oracle_rag.callers.identity import identity_status
from oracle_rag.cli.context import EXIT_ERROR, pass_system, progress_bar
from oracle_rag.embedding import ensure_model
from oracle_rag.indexing import triggers as lib
from oracle_rag.indexing.worker import BatchResult, install_signal_handlers
from oracle_rag.progress import Progress, step_progress
from oracle_rag.system import RagSystem


@click.command()
@click.option("--once", is_flag=True, help="Drain until no pickable row is left, then exit.")
@pass_system
def worker(rag: RagSystem, once: bool) -> None:
    """Drain the re-index queue and refresh due SQL sources (stops on SIGTERM/SIGINT after the current batch).

    The same background services ``serve`` runs beside the app, without it
    (no start-up backfill: ``oracle-rag backfill`` is its own command).
    """
    if once:
        if not rag.engine.loads_models and not rag.settings.model_path.is_file():
            ensure_model(
                rag.settings.data_path, progress=step_progress("model build")
            )  # else built inside batch 1
        res = drain_with_progress(rag)
        click.echo(
            f"picked {res.picked}, embedded {res.embedded}, unchanged {res.unchanged}, "
            f"deleted {res.deleted}, failed rows {res.failed_rows}"
        )
        click.get_current_context().exit(EXIT_ERROR if res.failed_rows else 0)
    stop = threading.Event()
    install_signal_handlers(stop)
    click.echo("worker running; Ctrl-C to stop", err=True)
    if not run_until(BackgroundServices(rag, worker=True, backfill=False), stop):
        click.echo("background threads did not stop in time", err=True)


def drain_with_progress(
    rag: RagSystem, *, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic
) -> BatchResult:
    """Drain the queue once with a progress bar (a log line off a terminal) on ``stream`` (stderr).

    The clock is a parameter so that a test can show the rate and ETA
    frames without depending on how fast its machine embeds.
    """
    with rag.engine.connect() as conn:
        depth = rag.engine.queue_stats(conn, rag.settings.max_attempts).depth
    bar = Progress("worker", depth, unit="queue rows", stream=stream, clock=clock)
    w = rag.worker(on_batch=lambda batch: bar.advance(batch.picked))
    try:
        return w.drain()
    finally:
        bar.finish()


@click.command()
@click.option(
    "--all", "all_entities", is_flag=True, help="Enqueue every entity, not only those without a chunk."
)
@pass_system
def backfill(rag: RagSystem, all_entities: bool) -> None:
    """Enqueue entities that have no chunk yet."""
    report = rag.backfill(all_entities=all_entities, progress=progress_bar("backfill"))
    if not report.enqueued:
        click.echo(
            "nothing to backfill: no registered source here (SQL-query sources are read by "
            "`oracle-rag sources sync` and refreshed by the worker)"
        )
        return
    click.echo(
        ", ".join(f"{t}: {n}" for t, n in report.enqueued.items()) + f" (total {report.total} enqueued)"
    )


@click.command()
@click.option("--json", "as_json", is_flag=True)
@pass_system
def status(rag: RagSystem, as_json: bool) -> None:
    """Queue depth, oldest age, stalled rows (ATTEMPTS >= 3), chunks per type, model."""
    # [auth]: the identity provider's issuer and the key ids its key set holds, read now (docs/identity.md).
    info = {**rag.status(), "identity": identity_status(rag.engine)}
    if as_json:
        click.echo(json.dumps(info, default=str))
        return
    for key, value in info.items():
        click.echo(f"{key}: {value}")
    for line in info.get("model_builds") or ():
        click.echo(f"WARNING: {line}")
    for name in info.get("access_hidden_sources") or ():
        # Said in words, not only as a list value (QA D-7): these records are invisible to most callers.
        code = (info.get("access_hidden_errors") or {}).get(name)
        click.echo(
            f"WARNING: source {name!r} is hidden from callers without see-all: its last read, which "
            f"carries its permission data, failed{f' [{code}]' if code else ''} (`oracle-rag sources list` "
            f"shows the error; it clears on its next successful sync)"
        )


@click.group()
def queue() -> None:
    """Inspect and retry queue rows."""


@queue.command("list")
@click.option("--failed", is_flag=True, help="Only rows that reached max attempts.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@pass_system
def queue_list(rag: RagSystem, failed: bool, limit: int) -> None:
    """List queue rows (id, type, id, action, attempts, last error)."""
    with rag.engine.connect() as conn:
        rows = rag.engine.list_queue(
            conn, failed_only=failed, max_attempts=rag.settings.max_attempts, limit=limit
        )
    for r in rows:
        click.echo(
            f"{r.dirty_id}\t{r.source_type}\t{r.source_id}\t{r.action}\tattempts={r.attempts}\t"
            f"{r.last_error or ''}"
        )
    if not rows:
        click.echo("(empty)", err=True)


@queue.command("retry")
@pass_system
def queue_retry(rag: RagSystem) -> None:
    """Reset ATTEMPTS on parked rows so the worker picks them again."""
    with rag.engine.begin() as conn:
        n = rag.engine.retry_failed(conn, rag.settings.max_attempts)
    click.echo(f"{n} row(s) will be retried")


@click.group()
def triggers() -> None:
    """Optional database triggers that enqueue changes made outside the application."""


@triggers.command("install")
@pass_system
def triggers_install(rag: RagSystem) -> None:
    """Create (or replace) the triggers on TASK, TASK_COMMENT, SPRINT, PROJECT, EMPLOYEE."""
    names = lib.install(rag.engine)
    click.echo(f"installed {len(names)} trigger(s): {', '.join(names)}")


@triggers.command("uninstall")
@pass_system
def triggers_uninstall(rag: RagSystem) -> None:
    """Drop the enqueue triggers (safe when they are not installed)."""
    names = lib.uninstall(rag.engine)
    click.echo(f"removed {len(names)} trigger(s)" + (f": {', '.join(names)}" if names else ""))


@triggers.command("status")
@pass_system
def triggers_status(rag: RagSystem) -> None:
    """List which enqueue triggers are installed (compiled and enabled); exit 1 if one is broken.

    A trigger that exists but is INVALID or DISABLED is listed as broken: an
    invalid one makes every write to its table fail (ORA-04098).
    """
    names = lib.installed(rag.engine)
    expected = lib.trigger_names(rag.engine)
    click.echo(
        f"{len(names)} of {len(expected)} enqueue trigger(s) installed"
        + (f": {', '.join(names)}" if names else "")
    )
    bad = lib.broken(rag.engine)
    if bad:
        click.echo(
            "broken: "
            + ", ".join(f"{n} ({'/'.join(s)})" for n, s in sorted(bad.items()))
            + "; run `oracle-rag triggers install` again, or uninstall",
            err=True,
        )
        click.get_current_context().exit(EXIT_ERROR)
