"""CLI commands for the aggregate area: ``oracle-rag sql`` runs SQL through the guarded path."""

from __future__ import annotations

import json

import click

from oracle_rag.answering.aggregate import AggregateService
from oracle_rag.answering.aggregate.service import cap_text
from oracle_rag.callers.access import load_caller
from oracle_rag.cli.context import exit_code, pass_system
from oracle_rag.errors import GuardrailError
from oracle_rag.system import RagSystem


@click.command("sql")
@click.argument("sql")
@click.option("--as", "as_id", required=True, type=int, help="Employee id whose scope the views apply.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_system
def sql_cmd(rag: RagSystem, sql: str, as_id: int, as_json: bool) -> None:
    """Run SQL exactly as model-written SQL runs (guard, read-only, scoped, capped).

    For operators auditing the guardrails: rows on stdout and exit 0, or the
    refusal reason on stderr and exit 2.
    """
    with rag.engine.connect() as conn:
        caller = load_caller(conn, as_id, rag.engine)
    try:
        result = AggregateService(rag.engine, rag.settings).run_sql(sql, caller)
    except GuardrailError as exc:  # the audit's answer, not a failure of the command
        click.echo(f"refused: {exc.message}", err=True)
        click.get_current_context().exit(exit_code(exc))
    if as_json:
        click.echo(json.dumps(result.rows_dict(), default=str))
        return
    click.echo("\t".join(result.columns))
    for row in result.rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))
    if result.truncated:
        click.echo(f"({cap_text(result)}: output incomplete)", err=True)
