"""What every command shares: the root group, errors mapped to exit codes, the system per invocation.

* Errors are mapped in one place, :class:`RagGroup` (the root group): a
  :class:`~oracle_rag.errors.RagError` from any command becomes ``error: ...``
  on stderr and exit 2 for bad input (an unknown id included), configuration
  or a guardrail refusal, 1 for any other product error. Commands never catch errors to print them.
* The system is opened through the click context and closed by it: the
  first :func:`open_system` of an invocation builds the :class:`RagSystem`
  and registers its ``close`` on the root context (the model is
  sqlite-utils' ``_register_db_for_cleanup``), so a command cannot forget
  to close it, on success or failure.
* On the embedded engine a command reads an existing database unless it is
  declared with :func:`pass_new_system` (``migrate``, ``bootstrap``,
  ``demo seed``...): :func:`open_system` refuses a missing or empty one in
  one line naming the absolute ``data_dir``, instead of creating an empty
  directory wherever the command was started (a desktop MCP client starts
  ``oracle-rag mcp`` in a directory of its own).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from oracle_rag.config import Settings, load_settings
from oracle_rag.data_dir import require_database
from oracle_rag.errors import (
    ConfigurationError,
    GuardrailError,
    InputError,
    NotFoundError,
    RagError,
)
from oracle_rag.system import RagSystem

EXIT_INPUT = 2
EXIT_ERROR = 1

R = TypeVar("R")


def exit_code(exc: RagError) -> int:
    """2 for what the user can fix in the command or configuration, 1 for everything else."""
    # An id given on the command line that does not exist (--as 9999, a token
    # id, a conversation) is bad input too.
    bad_input = InputError | ConfigurationError | GuardrailError | NotFoundError
    return EXIT_INPUT if isinstance(exc, bad_input) else EXIT_ERROR


class RagGroup(click.Group):
    """The root ``oracle-rag`` group: every command runs inside its ``invoke``, so errors map here."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RagError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exit_code(exc))


def cli_settings(ctx: click.Context, **overrides: Any) -> Settings:
    """Settings from ``--config`` (or the default file and the environment)."""
    return load_settings(config_file=ctx.find_root().obj.get("config"), **overrides)


def open_system(ctx: click.Context, *, creates: bool = False) -> RagSystem:
    """This invocation's system, opened once and closed when the root context closes.

    Unless ``creates``, an embedded database must already exist (:func:`require_database`).
    """
    root = ctx.find_root()
    rag: RagSystem | None = root.obj.get("system")
    if rag is None:
        settings = cli_settings(ctx)
        if not creates:
            require_database(settings)
        rag = root.obj["system"] = RagSystem(settings)
        root.call_on_close(rag.close)
    return rag


def pass_system(f: Callable[..., R]) -> Callable[..., R]:
    """Pass this invocation's :class:`RagSystem` (over an existing database) as the command's
    first argument."""

    def new_func(*args: Any, **kwargs: Any) -> R:
        return f(open_system(click.get_current_context()), *args, **kwargs)

    return functools.update_wrapper(new_func, f)


def pass_new_system(f: Callable[..., R]) -> Callable[..., R]:
    """Like :func:`pass_system`, for the commands that may create the database (``migrate``...)."""

    def new_func(*args: Any, **kwargs: Any) -> R:
        return f(open_system(click.get_current_context(), creates=True), *args, **kwargs)

    return functools.update_wrapper(new_func, f)


def progress_bar(label: str) -> Callable[[str, int, int], None]:
    """A one-line progress indicator on stderr (no extra dependency)."""

    def report(what: str, done: int, total: int) -> None:
        if not sys.stderr.isatty() and total and done not in (total,) and done % 5000:
            return
        width = 30
        filled = int(width * done / total) if total else width
        click.echo(
            f"\r{label} {what:<8} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
            err=True,
            nl=done >= total,
        )

    return report
