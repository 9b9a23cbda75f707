"""``oracle-rag audit``: who asked what, through which entry point (docs/access.md)."""

from __future__ import annotations

import datetime as dt
import json

import click

from oracle_rag.callers.audit import audit_for, utc_now
from oracle_rag.cli.context import pass_new_system, pass_system
from oracle_rag.config import duration_seconds
from oracle_rag.indexing import provision as provisioning
from oracle_rag.system import RagSystem


def _since(value: str | None) -> dt.datetime | None:
    """``--since``: an ISO date/time (UTC when no offset) or a duration back from now (``7d``, ``12h``)."""
    if value is None:
        return None
    seconds = duration_seconds(value)
    if seconds is not None:
        return utc_now() - dt.timedelta(seconds=seconds)
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            "an ISO date or time (2026-03-01, 2026-03-01T12:00) or a duration (7d, 12h)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


@click.command("audit")
@click.option(
    "--caller", "caller_id", type=int, default=None, help="Only this caller's (employee id) events."
)
@click.option("--since", default=None, help="From this ISO date/time, or this long ago (7d, 12h).")
@click.option(
    "--limit", type=click.IntRange(1, 100_000), default=100, show_default=True, help="Newest rows shown."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--prune", is_flag=True, help="First delete rows older than audit_retention.")
@pass_system
def audit(
    rag: RagSystem, caller_id: int | None, since: str | None, limit: int, as_json: bool, prune: bool
) -> None:
    """List the audit trail: caller, entry point, time, records returned, guarded SQL (newest first)."""
    trail = audit_for(rag.engine)
    if prune:
        click.echo(f"pruned {trail.prune()} row(s) older than {rag.settings.audit_retention}", err=True)
    rows = trail.list(caller_id=caller_id, since=_since(since), limit=limit)
    for row in rows:
        if as_json:
            click.echo(json.dumps(row.to_dict(), ensure_ascii=False))
            continue
        line = (
            f"{row.at}\tcaller={row.caller_id}\t{row.entry_point}\t{row.action}"
            f"\t{','.join(row.records) or '-'}"
        )
        if row.guarded_sql:
            line += "\tsql=" + " ".join(row.guarded_sql.split())
        if row.question:
            line += "\tquestion=" + row.question
        click.echo(line)
    if not rows:
        click.echo("(no audit rows)", err=True)


@click.command("provision")
@click.option(
    "--vpd",
    is_flag=True,
    required=True,
    help="Oracle: create the access context, its package and the VPD policies on RAG_CHUNK and "
    "RAG_CHUNK_ACL (docs/access.md).",
)
@pass_new_system
def provision(rag: RagSystem, vpd: bool) -> None:
    """Install optional database-side protections (Oracle only): ``--vpd``, the second wall."""
    for line in provisioning.provision_vpd(rag.engine):
        click.echo(line)
