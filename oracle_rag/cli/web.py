"""CLI commands for the web area: ``serve``, ``token create|revoke|list``, ``ask``.

Libraries: :mod:`oracle_rag.web.server`, :mod:`oracle_rag.callers.tokens`,
:mod:`oracle_rag.answering.chat`. The demo (``oracle-rag demo``) is in :mod:`.demo`.
"""

from __future__ import annotations

import json
import threading

import click

from oracle_rag.answering.aggregate.service import cap_text
from oracle_rag.answering.chat import Chat, LLMClient
from oracle_rag.callers.access import load_caller
from oracle_rag.callers.tokens import create_token, list_tokens, revoke_token
from oracle_rag.cli.context import pass_system
from oracle_rag.data_dir import data_dir_line
from oracle_rag.errors import NotFoundError
from oracle_rag.indexing.worker import install_signal_handlers
from oracle_rag.search.retriever import MODES
from oracle_rag.system import RagSystem
from oracle_rag.web.server import check_port, run_server


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--no-worker", is_flag=True, help="Do not run the queue worker in this process.")
@click.option(
    "--debug", is_flag=True, help="Flask's development server with debugging (never in production)."
)
@click.option(
    "--threads", default=8, show_default=True, type=click.IntRange(1, 256), help="Request threads (waitress)."
)
@pass_system
def serve(rag: RagSystem, host: str, port: int, no_worker: bool, debug: bool, threads: int) -> None:
    """Serve the chat API and page (waitress), with the worker as a background thread."""
    check_port(host, port)  # a port in use is one line, before anything starts
    if where := data_dir_line(rag.settings):
        click.echo(where, err=True)
    click.echo(LLMClient.describe(rag.settings), err=True)
    stop = threading.Event()
    if not debug:  # Flask's development server stops on Ctrl-C by itself
        install_signal_handlers(stop)
    run_server(
        rag,
        host,
        port,
        worker=not no_worker,
        debug=debug,
        threads=threads,
        stop=stop,
        on_ready=lambda url: click.echo(f"serving on {url} (Ctrl-C to stop)", err=True),
    )
    click.echo("stopped", err=True)


@click.group()
def token() -> None:
    """Create, revoke and list API tokens (only their SHA-256 is stored)."""


@token.command("create")
@click.option("--employee", "employee_id", required=True, type=int, help="Employee the token acts as.")
@click.option(
    "--expires-days",
    type=click.FloatRange(min=0, min_open=True, max=3650),
    default=None,
    help="Days until the token expires (default: never).",
)
@click.option("--label", default=None, help="A note stored with the token (e.g. where it is used).")
@pass_system
def token_create(rag: RagSystem, employee_id: int, expires_days: float | None, label: str | None) -> None:
    """Print a new token once; send it as `Authorization: Bearer <token>`."""
    issued = create_token(rag.engine, employee_id, expires_days=expires_days, label=label)
    click.echo(issued.token)
    expiry = f"expires in {issued.expires_days:g} day(s)" if issued.expires_days else "does not expire"
    click.echo(
        f"token id {issued.token_id} for employee {issued.employee_id}, {expiry}; it is shown only now",
        err=True,
    )


@token.command("revoke")
@click.argument("token_id", type=int)
@pass_system
def token_revoke(rag: RagSystem, token_id: int) -> None:
    """Revoke a token by its id (see `token list`)."""
    if not revoke_token(rag.engine, token_id):
        raise NotFoundError(f"no active token with id {token_id}")
    click.echo(f"token {token_id} revoked")


@token.command("list")
@click.option("--employee", "employee_id", type=int, default=None)
@pass_system
def token_list(rag: RagSystem, employee_id: int | None) -> None:
    """Token ids, owners, dates and state (never the tokens)."""
    tokens = list_tokens(rag.engine, employee_id)
    for t in tokens:
        state = "revoked" if t.revoked else "active"
        click.echo(
            f"{t.token_id}\temployee={t.employee_id}\t{state}\tcreated={t.created_at}\t"
            f"expires={t.expires_at or 'never'}\t{t.label or ''}"
        )
    if not tokens:
        click.echo("(no tokens)", err=True)


@click.command()
@click.argument("question")
@click.option("--as", "as_id", required=True, type=int, help="Employee id to answer as (scope).")
@click.option("--mode", type=click.Choice(MODES), default=None, help="Retrieval mode (default: hybrid).")
@click.option(
    "--conversation",
    "conversation_id",
    default=None,
    help="Continue this conversation of the employee (stored).",
)
@click.option("--save", is_flag=True, help="Store the question and answer as a new conversation.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON answer.")
@click.option("--show-sql", is_flag=True, help="Also print the SQL an aggregate question ran, and its rows.")
@pass_system
def ask(
    rag: RagSystem,
    question: str,
    as_id: int,
    mode: str | None,
    conversation_id: str | None,
    save: bool,
    as_json: bool,
    show_sql: bool,
) -> None:
    """Answer QUESTION as EMPLOYEE_ID, with citations (LLM if configured, else extractive)."""
    with rag.engine.connect() as conn:
        caller = load_caller(conn, as_id, rag.engine)
    answer = Chat(rag).answer(question, caller, conversation_id, mode, store=save)
    if as_json:
        click.echo(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2))
        return
    click.echo(answer.answer)
    click.echo("")
    if answer.citations:
        click.echo("Citations:")
        for c in answer.citations:
            click.echo(f"  {c.anchor} {c.snippet}")
    else:
        click.echo("Citations: none")
    if show_sql:
        agg = answer.aggregate
        if agg is None:
            click.echo(f"SQL: none (route: {answer.route})")
        else:
            click.echo(f"SQL ({agg.attempts} attempt(s)): {agg.sql or '-'}")
            if agg.error:
                click.echo(f"refused or failed: {agg.error}")
            if agg.columns:
                click.echo("\t".join(agg.columns))
                for row in agg.rows[:50]:
                    click.echo("\t".join("" if v is None else str(v) for v in row))
            if agg.truncated:
                click.echo(f"({cap_text(agg)}: rows incomplete)")
    if answer.conversation_id:
        click.echo(f"conversation {answer.conversation_id}", err=True)
