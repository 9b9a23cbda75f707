"""CLI commands for the database: ``migrate``, ``bootstrap``, ``model build|load|status``, ``model
switch|activate|rollback|drop|generations`` (indexing/model_switch.py), ``index``.

``model load`` and ``bootstrap`` both call :mod:`oracle_rag.indexing.provision`;
``index rebuild|status`` calls :mod:`oracle_rag.indexing.index_maintenance`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from oracle_rag.cli.context import (
    EXIT_ERROR,
    cli_settings,
    open_system,
    pass_new_system,
    pass_system,
)
from oracle_rag.embedding import build_model, catalog
from oracle_rag.errors import InputError
from oracle_rag.indexing import index_maintenance, model_switch, provision
from oracle_rag.migrations import MigrationRunner
from oracle_rag.progress import step_progress
from oracle_rag.system import RagSystem


@click.command()
@click.option("--dry-run", is_flag=True, help="Print the SQL of pending migrations without running it.")
@click.option("--demo", is_flag=True, help="Also apply the reference application's schema.")
@pass_new_system
def migrate(rag: RagSystem, dry_run: bool, demo: bool) -> None:
    """Apply pending schema migrations (recorded in RAG_SCHEMA_HISTORY)."""
    sets = ("rag", "demo") if demo else ("rag",)
    if dry_run:
        for s in sets:
            click.echo(MigrationRunner(rag.engine, s).dry_run(), nl=False)
        return
    reports = rag.migrate(demo=demo, progress=lambda m: click.echo(m, err=True))
    for name, rep in reports.items():
        click.echo(
            f"{name}: applied {rep.applied or 'none'}, resumed {rep.resumed or 'none'}, "
            f"already applied {rep.skipped or 'none'}"
        )


@click.command("bootstrap")
@pass_new_system
def bootstrap(rag: RagSystem) -> None:
    """Apply migrations, then load the model from $MINILM_ONNX_PAR_URL if set.

    Safe to run on every deploy (Oracle Database Free or Autonomous
    Database): applied migrations and an already loaded model are
    skipped. The URL is read from the environment so it never appears on
    a command line, and only its host is ever printed.
    """
    par_url = os.environ.get(provision.PAR_URL_ENV) or None
    for line in provision.bootstrap(
        rag.engine, rag.settings, par_url, progress=lambda m: click.echo(m, err=True)
    ):
        click.echo(line)
    if rag.engine.indexes_facets:
        click.echo(f"facet indexes: {', '.join(rag.ensure_facet_indexes()) or 'none declared'}")


@click.group()
def model() -> None:
    """Build, load and check the embedding model."""


@model.command("build")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Output file (default: <data dir>/models/all-MiniLM-L6-v2.onnx).",
)
@click.option("--force", is_flag=True, help="Rebuild even when the file exists.")
@click.pass_context
def model_build(ctx: click.Context, out: Path | None, force: bool) -> None:
    """Build the augmented all-MiniLM-L6-v2 ONNX file (tokenizer + encoder + pooling)."""
    target = out or cli_settings(ctx).model_path
    if target.is_file() and not force:
        click.echo(f"{target} exists (use --force to rebuild)")
        return

    path = build_model(target, progress=step_progress("model build"))
    click.echo(str(path))


@model.command("load")
@click.option(
    "--file",
    "file_",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Local ONNX file, loaded as a BLOB (no directory object needed).",
)
@click.option(
    "--url",
    help="Pre-authenticated object storage URL (DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD). "
    "Prefer --url-env: a URL on the command line is visible in process listings.",
)
@click.option(
    "--url-env",
    default=None,
    metavar="VAR",
    help="Read the pre-authenticated URL from this environment variable (e.g. MINILM_ONNX_PAR_URL).",
)
@click.option(
    "--name", default=None, help="Model name in the database (default: configured embedding_model)."
)
@click.option("--replace", is_flag=True, help="Drop and reload when the model exists.")
@click.pass_context
def model_load(
    ctx: click.Context,
    file_: Path | None,
    url: str | None,
    url_env: str | None,
    name: str | None,
    replace: bool,
) -> None:
    """Load the ONNX model into Oracle, once (skips when USER_MINING_MODELS has it)."""
    if url_env:
        if url:
            raise InputError("give --url or --url-env, not both")
        url = os.environ.get(url_env)
        if not url:
            raise InputError(f"environment variable {url_env} is not set")
    if bool(file_) == bool(url):
        raise InputError("give exactly one of --file, --url or --url-env")
    rag = open_system(ctx)
    if file_:
        outcome = provision.load_model_file(rag.engine, file_, name=name, replace=replace)
    else:
        outcome = provision.load_model_url(rag.engine, url or "", name=name, replace=replace)
    click.echo(outcome)


@model.command("status")
@click.option("--json", "as_json", is_flag=True)
@pass_system
def model_status(rag: RagSystem, as_json: bool) -> None:
    """Show the model's name, location, dimension and a test embedding's norm."""
    with rag.engine.connect() as conn:
        status = rag.engine.model_status(conn)
    if as_json:
        click.echo(json.dumps(status, default=str))
    else:
        for key, value in status.items():
            click.echo(f"{key}: {value}")
    if not status.get("present"):
        click.get_current_context().exit(EXIT_ERROR)


@model.command("switch")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="NAME",
    help=f"The model to switch to ({', '.join(catalog.names())}).",
)
@pass_system
def model_switch_cmd(rag: RagSystem, to: str) -> None:
    """Start a switch: load the model as a new generation; the worker embeds every chunk with it."""
    click.echo(model_switch.switch(rag.engine, rag.settings, to))


@model.command("activate")
@click.argument("name", required=False)
@pass_system
def model_activate(rag: RagSystem, name: str | None) -> None:
    """Flip searches to the new generation (refused while chunks lack its vectors)."""
    click.echo(model_switch.activate(rag.engine, name))


@model.command("rollback")
@pass_system
def model_rollback(rag: RagSystem) -> None:
    """Flip searches back to the generation that was active before."""
    click.echo(model_switch.rollback(rag.engine))


@model.command("drop")
@click.argument("name")
@pass_system
def model_drop(rag: RagSystem, name: str) -> None:
    """Remove a generation that is not active (its vectors, index and loaded model)."""
    click.echo(model_switch.drop(rag.engine, name))


@model.command("generations")
@click.option("--json", "as_json", is_flag=True)
@pass_system
def model_generations(rag: RagSystem, as_json: bool) -> None:
    """List the model generations: state, slot, chunks still lacking their vectors."""
    found = [s.as_dict() for s in model_switch.statuses(rag.engine)]
    if as_json:
        click.echo(json.dumps(found, default=str))
        return
    for g in found:
        click.echo(
            f"{g['generation']:>3}  {g['model']:<28} {g['state']:<8} slot {g['slot']}  "
            f"{g['chunks'] - g['missing']}/{g['chunks']} chunks"
        )
    for line in model_switch.earlier_builds(rag.engine, rag.settings):
        click.echo(line)


@click.group("index")
def index() -> None:
    """Maintain the vector index (Oracle); the embedded engine's in-process index needs nothing."""


@index.command("rebuild")
@pass_system
def index_rebuild(rag: RagSystem) -> None:
    """Rebuild the vector index from the current chunks.

    IVF centroids are computed when the index is built, and the migration
    builds it on an empty table: rebuild after the first backfill
    (bootstrap does it), after large loads, and periodically. 26ai: ALTER
    INDEX ... REBUILD ONLINE (the table stays writable); 23ai:
    DBMS_VECTOR.REBUILD_INDEX.
    """
    click.echo(index_maintenance.rebuild(rag.engine))


@index.command("status")
@click.option(
    "--probes",
    type=click.IntRange(0, 1000),
    default=20,
    show_default=True,
    help="Stored vectors used as query vectors for the accuracy measure (0: skip it).",
)
@click.option(
    "--top-k",
    "top_k",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="k of the top-k compared with the exact search.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@pass_system
def index_status(rag: RagSystem, probes: int, top_k: int, as_json: bool) -> None:
    """The indexes, their state, and the accuracy the vector index achieves
    (DBMS_VECTOR.INDEX_ACCURACY_QUERY)."""
    result = index_maintenance.status(rag.engine, probes=probes, top_k=top_k)
    if as_json:
        click.echo(json.dumps(result.to_dict(), default=str))
        return
    for line in result.lines():
        click.echo(line)
