"""CLI commands for the oracle area (see commands/__init__.py): ``oracle-rag bootstrap``.

``model load`` (in cli.py) and ``bootstrap`` both call :mod:`oracle_rag.provision`.
"""

from __future__ import annotations

import os

import click


def register(main: click.Group) -> None:
    # cli.py imports this module while it is being initialised; import its helpers lazily.
    from ..cli import _system, handle_errors

    @main.command("bootstrap")
    @click.pass_context
    @handle_errors
    def bootstrap(ctx: click.Context) -> None:
        """Apply migrations, then load the model from $MINILM_ONNX_PAR_URL if set.

        Safe to run on every deploy (Oracle Database Free or Autonomous
        Database): applied migrations and an already loaded model are
        skipped. The URL is read from the environment so it never appears on
        a command line, and only its host is ever printed.
        """
        from .. import provision

        rag = _system(ctx)
        par_url = os.environ.get(provision.PAR_URL_ENV) or None
        for line in provision.bootstrap(rag.engine, rag.settings, par_url,
                                        progress=lambda m: click.echo(m, err=True)):
            click.echo(line)
