"""The ``oracle-rag`` command line.

Each command parses its arguments, calls one library function and maps
errors to exit codes: 2 for bad input, configuration or a guardrail
refusal, 1 for any other product error. Nothing is decided here.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .config import load_settings
from .errors import ConfigurationError, GuardrailError, InputError, NotFoundError, RagError

EXIT_INPUT = 2
EXIT_ERROR = 1


def _exit_code(exc: RagError) -> int:
    # An id given on the command line that does not exist (--as 9999, a token
    # id, a conversation) is bad input too.
    bad_input = InputError | ConfigurationError | GuardrailError | NotFoundError
    return EXIT_INPUT if isinstance(exc, bad_input) else EXIT_ERROR


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RagError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(_exit_code(exc))

    return wrapper


def _system(ctx: click.Context, **overrides: Any) -> Any:
    from .system import RagSystem

    settings = load_settings(config_file=ctx.obj.get("config"), **overrides)
    return RagSystem(settings)


def _progress_bar(label: str) -> Callable[[str, int, int], None]:
    """A one-line progress indicator on stderr (no extra dependency)."""

    def report(what: str, done: int, total: int) -> None:
        if not sys.stderr.isatty() and total and done not in (total,) and done % 5000:
            return
        width = 30
        filled = int(width * done / total) if total else width
        click.echo(f"\r{label} {what:<8} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", err=True,
                   nl=done >= total)

    return report


@click.group()
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
              help="TOML configuration file (default: $ORACLE_RAG_CONFIG or ./oracle-rag.toml).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.version_option(package_name="oracle-rag")
@click.pass_context
def main(ctx: click.Context, config: str | None, verbose: bool) -> None:
    """In-database retrieval-augmented generation for Oracle AI Vector Search."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


@main.command()
@click.option("--dry-run", is_flag=True, help="Print the SQL of pending migrations without running it.")
@click.option("--demo", is_flag=True, help="Also apply the reference application's schema.")
@click.pass_context
@handle_errors
def migrate(ctx: click.Context, dry_run: bool, demo: bool) -> None:
    """Apply pending schema migrations (recorded in RAG_SCHEMA_HISTORY)."""
    from .migrations import MigrationRunner

    rag = _system(ctx)
    sets = ("rag", "demo") if demo else ("rag",)
    if dry_run:
        for s in sets:
            click.echo(MigrationRunner(rag.engine, s).dry_run(), nl=False)
        return
    reports = rag.migrate(demo=demo, progress=lambda m: click.echo(m, err=True))
    for name, rep in reports.items():
        click.echo(f"{name}: applied {rep.applied or 'none'}, resumed {rep.resumed or 'none'}, "
                   f"already applied {rep.skipped or 'none'}")


# -- model --------------------------------------------------------------------
@main.group()
def model() -> None:
    """Build, load and check the embedding model."""


@model.command("build")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output file (default: <data dir>/models/all-MiniLM-L6-v2.onnx).")
@click.option("--force", is_flag=True, help="Rebuild even when the file exists.")
@click.pass_context
@handle_errors
def model_build(ctx: click.Context, out: Path | None, force: bool) -> None:
    """Build the augmented all-MiniLM-L6-v2 ONNX file (tokenizer + encoder + pooling)."""
    from .embedding import build_model

    settings = load_settings(config_file=ctx.obj.get("config"))
    target = out or settings.model_path
    if target.is_file() and not force:
        click.echo(f"{target} exists (use --force to rebuild)")
        return

    from .progress import step_progress

    path = build_model(target, progress=step_progress("model build"))
    click.echo(str(path))


@model.command("load")
@click.option("--file", "file_", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Local ONNX file, loaded as a BLOB (no directory object needed).")
@click.option("--url", help="Pre-authenticated object storage URL (DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD). "
              "Prefer --url-env: a URL on the command line is visible in process listings.")
@click.option("--url-env", default=None, metavar="VAR",
              help="Read the pre-authenticated URL from this environment variable (e.g. MINILM_ONNX_PAR_URL).")
@click.option("--name", default=None, help="Model name in the database (default: configured embedding_model).")
@click.option("--replace", is_flag=True, help="Drop and reload when the model exists.")
@click.pass_context
@handle_errors
def model_load(ctx: click.Context, file_: Path | None, url: str | None, url_env: str | None, name: str | None,
               replace: bool) -> None:
    """Load the ONNX model into Oracle, once (skips when USER_MINING_MODELS has it)."""
    import os

    from . import provision

    if url_env:
        if url:
            raise InputError("give --url or --url-env, not both")
        url = os.environ.get(url_env)
        if not url:
            raise InputError(f"environment variable {url_env} is not set")
    if bool(file_) == bool(url):
        raise InputError("give exactly one of --file, --url or --url-env")
    rag = _system(ctx)
    if file_:
        outcome = provision.load_model_file(rag.engine, file_, name=name, replace=replace)
    else:
        outcome = provision.load_model_url(rag.engine, url or "", name=name, replace=replace)
    click.echo(outcome)


@model.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def model_status(ctx: click.Context, as_json: bool) -> None:
    """Show the model's name, location, dimension and a test embedding's norm."""
    rag = _system(ctx)
    with rag.engine.connect() as conn:
        status = rag.engine.model_status(conn)
    if as_json:
        click.echo(json.dumps(status, default=str))
    else:
        for key, value in status.items():
            click.echo(f"{key}: {value}")
    if not status.get("present"):
        sys.exit(EXIT_ERROR)


# -- write path ---------------------------------------------------------------
@main.command()
@click.option("--once", is_flag=True, help="Drain until no pickable row is left, then exit.")
@click.pass_context
@handle_errors
def worker(ctx: click.Context, once: bool) -> None:
    """Drain the re-index queue (stops cleanly on SIGTERM/SIGINT after the current batch)."""
    from .worker import install_signal_handlers

    rag = _system(ctx)
    if once:
        from .progress import Progress, step_progress

        if rag.engine.name == "sqlite" and not rag.settings.model_path.is_file():
            from .embedding import ensure_model  # else built silently inside the first batch

            ensure_model(rag.settings.data_path, progress=step_progress("model build"))
        with rag.engine.connect() as conn:
            depth = rag.engine.queue_stats(conn, rag.settings.max_attempts).depth
        bar = Progress("worker", depth, unit="queue rows")
        w = rag.worker(on_batch=lambda batch: bar.advance(batch.picked))
        try:
            res = w.drain()
        finally:
            bar.finish()
        click.echo(f"picked {res.picked}, embedded {res.embedded}, unchanged {res.unchanged}, "
                   f"deleted {res.deleted}, failed rows {res.failed_rows}")
        sys.exit(EXIT_ERROR if res.failed_rows else 0)
    stop = threading.Event()
    install_signal_handlers(stop)
    click.echo("worker running; Ctrl-C to stop", err=True)
    rag.worker().run(stop)


@main.command()
@click.option("--all", "all_entities", is_flag=True, help="Enqueue every entity, not only those without a chunk.")
@click.pass_context
@handle_errors
def backfill(ctx: click.Context, all_entities: bool) -> None:
    """Enqueue entities that have no chunk yet."""
    rag = _system(ctx)
    report = rag.backfill(all_entities=all_entities, progress=_progress_bar("backfill"))
    click.echo(", ".join(f"{t}: {n}" for t, n in report.enqueued.items()) + f" (total {report.total} enqueued)")


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Queue depth, oldest age, stalled rows (ATTEMPTS >= 3), chunks per type, model."""
    rag = _system(ctx)
    info = rag.status()
    if as_json:
        click.echo(json.dumps(info, default=str))
        return
    for key, value in info.items():
        click.echo(f"{key}: {value}")


@main.group()
def queue() -> None:
    """Inspect and retry queue rows."""


@queue.command("list")
@click.option("--failed", is_flag=True, help="Only rows that reached max attempts.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.pass_context
@handle_errors
def queue_list(ctx: click.Context, failed: bool, limit: int) -> None:
    """List queue rows (id, type, id, action, attempts, last error)."""
    rag = _system(ctx)
    with rag.engine.connect() as conn:
        rows = rag.engine.list_queue(conn, failed_only=failed, max_attempts=rag.settings.max_attempts, limit=limit)
    for r in rows:
        click.echo(f"{r.dirty_id}\t{r.source_type}\t{r.source_id}\t{r.action}\tattempts={r.attempts}\t"
                   f"{r.last_error or ''}")
    if not rows:
        click.echo("(empty)", err=True)


@queue.command("retry")
@click.pass_context
@handle_errors
def queue_retry(ctx: click.Context) -> None:
    """Reset ATTEMPTS on parked rows so the worker picks them again."""
    rag = _system(ctx)
    with rag.engine.begin() as conn:
        n = rag.engine.retry_failed(conn, rag.settings.max_attempts)
    click.echo(f"{n} row(s) will be retried")


# -- read path ----------------------------------------------------------------
@main.command()
@click.argument("question")
@click.option("--as", "as_id", required=True, type=int, help="Employee id to search as (scope).")
@click.option("--mode", type=click.Choice(["semantic", "keyword", "hybrid"]), default="semantic", show_default=True)
@click.option("--k", "k", type=int, default=None, help="Number of results (default: top_k).")
@click.option("--project", type=int, default=None)
@click.option("--sprint", type=int, default=None)
@click.option("--type", "types", multiple=True, help="Restrict to source types (repeatable).")
@click.option("--exact", is_flag=True, help="Exact search (no approximate index), to measure recall.")
@click.pass_context
@handle_errors
def search(ctx: click.Context, question: str, as_id: int, mode: str, k: int | None, project: int | None,
           sprint: int | None, types: tuple[str, ...], exact: bool) -> None:
    """Print the ranked chunks EMPLOYEE_ID may see for QUESTION."""
    from . import search_output
    from .caller import load_caller
    from .engines import Filters

    rag = _system(ctx)
    with rag.engine.connect() as conn:
        caller = load_caller(conn, as_id)
        if types:
            known = {*rag.sources.types(), *rag.settings.sources,
                     *rag.engine.queue_stats(conn, rag.settings.max_attempts).chunks_by_type}
            types = search_output.resolve_types(types, known)
    results = rag.retriever().search(question, k, caller, mode, Filters(project, sprint, types), exact=exact)
    who = f"employee {caller.employee_id} ({caller.name}, {caller.role})"
    click.echo(search_output.header(mode, who, len(results)))
    for line in search_output.lines(results, mode):
        click.echo(line)
    if not results:
        click.echo("(no results visible to this caller)", err=True)


@main.command("eval")
@click.option("--dataset", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--max-docs", type=click.IntRange(1), default=None, help="Use only the first N documents.")
@click.option("--max-queries", type=click.IntRange(1), default=None, help="Use only the first N queries.")
@click.pass_context
@handle_errors
def eval_cmd(ctx: click.Context, dataset: Path, json_out: Path | None, max_docs: int | None,
             max_queries: int | None) -> None:
    """Evaluate retrieval on a BEIR-layout collection (nDCG@10, Recall@100)."""
    from .evaluation import run_eval

    settings = load_settings(config_file=ctx.obj.get("config"))
    result = run_eval(settings, dataset, max_docs=max_docs, max_queries=max_queries,
                      progress=_progress_bar("eval"))
    for mode in ("semantic", "keyword", "hybrid"):
        m = result[mode]
        click.echo(f"{mode:<9} nDCG@10 {m['ndcg@10']:.4f}  Recall@100 {m['recall@100']:.4f}")
    click.echo(f"documents {result['documents']}, queries {result['queries']}")
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n")


# -- demo ---------------------------------------------------------------------
@main.group(invoke_without_command=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--tasks", default=2000, show_default=True, type=click.IntRange(1, 1_000_000))
@click.pass_context
@handle_errors
def demo(ctx: click.Context, port: int, tasks: int) -> None:
    """Run the whole demo on the embedded engine: migrate, seed, index, serve."""
    if ctx.invoked_subcommand is not None:
        return
    from .demo.run import run_demo

    run_demo(config_file=ctx.obj.get("config"), port=port, tasks=tasks)


@demo.command("seed")
@click.option("--tasks", default=2000, show_default=True, type=click.IntRange(1, 1_000_000))
@click.option("--seed", "seed_value", default=42, show_default=True, type=int)
@click.option("--reset", is_flag=True, help="Delete existing demo rows first.")
@click.pass_context
@handle_errors
def demo_seed(ctx: click.Context, tasks: int, seed_value: int, reset: bool) -> None:
    """Apply the reference schema and insert a deterministic demo data set."""
    from .demo.seed import seed

    rag = _system(ctx)
    rag.migrate(demo=True)
    report = seed(rag.engine, tasks, seed_value=seed_value, reset=reset, progress=_progress_bar("seed"))
    if report is None:
        click.echo("demo data already present (use --reset to replace it)")
        return
    click.echo(f"seeded {report.employees} employees, {report.projects} projects, {report.sprints} sprints, "
               f"{report.tasks} tasks, {report.comments} comments; run `oracle-rag backfill` and "
               f"`oracle-rag worker --once` to index them")


from .commands import register_all  # noqa: E402  (commands attach themselves to `main`)

register_all(main)

if __name__ == "__main__":  # pragma: no cover
    main()
