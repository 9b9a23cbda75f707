"""The ``oracle-rag`` command line: one root group, commands grouped by area.

Each command parses its arguments, calls one library function and prints
the result; nothing is decided here. What the commands share (errors mapped
to exit codes, the system opened and closed per invocation) is in
:mod:`.context`. The areas, each imported explicitly below:

* :mod:`.database`: ``migrate``, ``bootstrap``, ``model build|load|status``, ``index rebuild|status|optimize``
* :mod:`.writepath`: ``worker``, ``backfill``, ``status``, ``queue``, ``triggers``
* :mod:`.readpath`: ``search``, ``eval``
* :mod:`.web`: ``serve``, ``token``, ``ask``
* :mod:`.aggregate`: ``sql``
* :mod:`.sources`: ``sources``
* :mod:`.demo`: ``demo``, ``demo seed``
* :mod:`.integrations`: ``mcp``
* :mod:`.access`: ``audit``, ``provision --vpd``
* :mod:`.llm`: ``llm check``
* :mod:`.feedback`: ``feedback list|export``
"""

from __future__ import annotations

import logging
from functools import partial

import click

from oracle_rag.callers.audit import ENTRY_POINT, leave_entry_point
from oracle_rag.cli import (
    access,
    aggregate,
    database,
    demo,
    feedback,
    integrations,
    llm,
    readpath,
    sources,
    web,
    writepath,
)
from oracle_rag.cli.context import RagGroup
from oracle_rag.logsafety import install as install_log_scrubber


@click.group(cls=RagGroup)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    default=None,
    help="TOML configuration file (default: $ORACLE_RAG_CONFIG or ./oracle-rag.toml).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.version_option(package_name="oracle-rag")
@click.pass_context
def main(ctx: click.Context, config: str | None, verbose: bool) -> None:
    """In-database retrieval-augmented generation for Oracle AI Vector Search."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # no URL query string or user-info in any log line (httpx logs request URLs at INFO)
    install_log_scrubber()
    ctx.ensure_object(dict)
    ctx.obj["config"] = config
    # the audit's entry point (serve and mcp set their own per request), undone when the command ends
    ctx.call_on_close(partial(leave_entry_point, ENTRY_POINT.set("cli")))


for command in (
    database.migrate,
    database.bootstrap,
    database.model,
    database.index,
    writepath.worker,
    writepath.backfill,
    writepath.status,
    writepath.queue,
    writepath.triggers,
    readpath.search,
    readpath.eval_cmd,
    web.serve,
    web.token,
    web.ask,
    aggregate.sql_cmd,
    sources.sources,
    demo.demo,
    integrations.mcp,
    access.audit,
    access.provision,
    llm.llm,
    feedback.feedback,
):
    main.add_command(command)

__all__ = ["main"]
