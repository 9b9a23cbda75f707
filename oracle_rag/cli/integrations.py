"""CLI command for the integrations area: ``mcp`` (stdio, or streamable HTTP with ``--http``)."""

from __future__ import annotations

import click

from oracle_rag.cli.context import pass_system
from oracle_rag.data_dir import data_dir_line
from oracle_rag.system import RagSystem
from oracle_rag.web.server import check_port


@click.command()
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP at /mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (with --http).")
@click.option(
    "--port",
    default=8001,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (with --http; 0 picks a free one).",
)
@pass_system
def mcp(rag: RagSystem, use_http: bool, host: str, port: int) -> None:
    """Serve the MCP tools search, get_record and ask, scoped to the caller's API token.

    stdio reads the token from $ORACLE_RAG_MCP_TOKEN (setting mcp_token_env);
    HTTP takes `Authorization: Bearer <token>` on each request. The data
    directory used is printed on stderr (which stdio MCP leaves to logs).
    """
    # Imported here: the MCP SDK takes ~1.7 s of CPU to import, which every
    # other command (and each CLI subprocess the tests start) would pay.
    from oracle_rag.integrations.mcp_server import run_http, run_stdio

    if where := data_dir_line(rag.settings):
        click.echo(where, err=True)
    if use_http:
        check_port(host, port)  # a port in use is one line naming its holder, not a traceback
        run_http(rag, host, port, on_ready=lambda url: click.echo(f"MCP on {url} (Ctrl-C to stop)", err=True))
    else:
        run_stdio(rag)
