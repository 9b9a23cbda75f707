"""CLI commands for SQL-query knowledge sources (library: :mod:`oracle_rag.indexing.refresh`).

``oracle-rag sources list|sync|count|drop``. Sources are the configuration's
``[sources.NAME]`` tables; see docs/sql-sources.md.
"""

from __future__ import annotations

import json
from typing import Any

import click

from oracle_rag.cli.context import EXIT_ERROR, pass_system
from oracle_rag.system import RagSystem


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "never"


@click.group()
def sources() -> None:
    """SQL-query knowledge sources ([sources.NAME] tables in the configuration)."""


@sources.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_system
def sources_list(rag: RagSystem, as_json: bool) -> None:
    """Each source's status, document count and last refresh (reads no source)."""
    states = rag.sql_sources().states()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "name": s.name,
                        "status": s.status,
                        "configured": s.configured,
                        "documents": s.doc_count,
                        "last_refresh": s.last_refresh_at,
                        "last_attempt": s.last_attempt_at,
                        "mode": s.last_mode,
                        "error": f"{s.last_error_code}: {s.last_error}" if s.status == "failed" else None,
                    }
                    for s in states
                ],
                default=str,
            )
        )
        return
    if not states:
        click.echo("(no SQL sources configured)", err=True)
    for s in states:
        line = (
            f"{s.name}\t{s.status}\tdocuments={s.doc_count}\tlast refresh={_when(s.last_refresh_at)}"
            f"\tmode={s.last_mode or '-'}"
        )
        if not s.configured:
            line += "\t(no longer configured: `oracle-rag sources drop` removes its documents)"
        if s.status == "failed":
            line += f"\tlast attempt={_when(s.last_attempt_at)} failed: {s.last_error_code}: {s.last_error}"
        click.echo(line)


@sources.command("sync")
@click.argument("name", required=False)
@pass_system
def sources_sync(rag: RagSystem, name: str | None) -> None:
    """Read every source (or NAME) in full now; prints changed / unchanged / failed per source."""
    results = rag.sql_sources().sync(name)
    if not results:
        click.echo("(no SQL sources configured)", err=True)
    for r in results:
        click.echo(r.summary())
    if any(r.outcome == "failed" for r in results):
        click.get_current_context().exit(EXIT_ERROR)


@sources.command("count")
@click.argument("name")
@pass_system
def sources_count(rag: RagSystem, name: str) -> None:
    """NAME's indexed document count; fails with the recorded error if its last refresh failed."""
    click.echo(str(rag.sql_sources().document_count(name)))


@sources.command("drop")
@click.argument("name")
@pass_system
def sources_drop(rag: RagSystem, name: str) -> None:
    """Remove NAME's documents and recorded state (e.g. after removing it from the configuration)."""
    removed = rag.sql_sources().drop(name)
    click.echo(f"removed {removed} document(s) of {name}")
