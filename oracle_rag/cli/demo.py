"""CLI commands for the demo: ``demo`` (everything on the embedded engine) and ``demo seed``.

Library: :mod:`oracle_rag.demo`.
"""

from __future__ import annotations

import datetime as dt

import click

from oracle_rag.cli.context import pass_new_system, progress_bar
from oracle_rag.demo.run import run_demo
from oracle_rag.demo.seed import seed
from oracle_rag.system import RagSystem


@click.group(invoke_without_command=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--tasks", default=2000, show_default=True, type=click.IntRange(1, 1_000_000))
@click.pass_context
def demo(ctx: click.Context, port: int, tasks: int) -> None:
    """Run the whole demo on the embedded engine: migrate, seed, index, serve."""
    if ctx.invoked_subcommand is not None:
        return
    run_demo(config_file=ctx.find_root().obj.get("config"), port=port, tasks=tasks)


@demo.command("seed")
@click.option("--tasks", default=2000, show_default=True, type=click.IntRange(1, 1_000_000))
@click.option("--seed", "seed_value", default=42, show_default=True, type=int)
@click.option("--reset", is_flag=True, help="Delete existing demo rows first.")
@click.option(
    "--today",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    default=None,
    help="The day the dates are relative to (default: today).",
)
@pass_new_system
def demo_seed(rag: RagSystem, tasks: int, seed_value: int, reset: bool, today: dt.datetime | None) -> None:
    """Apply the reference schema and insert a deterministic demo data set, dated around today."""
    rag.migrate(demo=True)
    report = seed(
        rag.engine,
        tasks,
        seed_value=seed_value,
        reset=reset,
        progress=progress_bar("seed"),
        today=today.date() if today else None,
    )
    if report is None:
        click.echo("demo data already present (use --reset to replace it)")
        return
    click.echo(
        f"seeded {report.employees} employees, {report.projects} projects, {report.sprints} sprints, "
        f"{report.tasks} tasks, {report.comments} comments; run `oracle-rag backfill` and "
        f"`oracle-rag worker --once` to index them"
    )
