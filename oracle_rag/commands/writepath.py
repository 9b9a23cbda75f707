"""CLI commands for the write path: the optional enqueue triggers.

``oracle-rag triggers install|uninstall|status`` (library: :mod:`oracle_rag.triggers`).
The worker, backfill, status and queue commands live in ``cli.py``.
"""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    from ..cli import _system, handle_errors

    @main.group()
    def triggers() -> None:
        """Optional database triggers that enqueue changes made outside the application."""

    @triggers.command("install")
    @click.pass_context
    @handle_errors
    def triggers_install(ctx: click.Context) -> None:
        """Create (or replace) the triggers on TASK, TASK_COMMENT, SPRINT, PROJECT, EMPLOYEE."""
        from .. import triggers as lib

        names = lib.install(_system(ctx).engine)
        click.echo(f"installed {len(names)} trigger(s): {', '.join(names)}")

    @triggers.command("uninstall")
    @click.pass_context
    @handle_errors
    def triggers_uninstall(ctx: click.Context) -> None:
        """Drop the enqueue triggers (safe when they are not installed)."""
        from .. import triggers as lib

        names = lib.uninstall(_system(ctx).engine)
        click.echo(f"removed {len(names)} trigger(s)" + (f": {', '.join(names)}" if names else ""))

    @triggers.command("status")
    @click.pass_context
    @handle_errors
    def triggers_status(ctx: click.Context) -> None:
        """List which enqueue triggers are installed (compiled and enabled); exit 1 if one is broken.

        A trigger that exists but is INVALID or DISABLED is listed as broken: an
        invalid one makes every write to its table fail (ORA-04098).
        """
        from .. import triggers as lib

        engine = _system(ctx).engine
        names = lib.installed(engine)
        expected = lib.trigger_names(engine)
        click.echo(f"{len(names)} of {len(expected)} enqueue trigger(s) installed"
                   + (f": {', '.join(names)}" if names else ""))
        bad = lib.broken(engine)
        if bad:
            click.echo("broken: " + ", ".join(f"{n} ({'/'.join(s)})" for n, s in sorted(bad.items()))
                       + "; run `oracle-rag triggers install` again, or uninstall", err=True)
            ctx.exit(1)
