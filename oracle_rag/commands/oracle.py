"""CLI commands for the oracle area (see commands/__init__.py): ``oracle-rag bootstrap`` and
``oracle-rag index rebuild|status|optimize`` (library: :mod:`oracle_rag.index_maintenance`).

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

    @main.group("index")
    def index() -> None:
        """Maintain the search indexes (Oracle: the IVF vector index and the Oracle Text index)."""

    @index.command("rebuild")
    @click.pass_context
    @handle_errors
    def index_rebuild(ctx: click.Context) -> None:
        """Rebuild the vector index from the current chunks.

        IVF centroids are computed when the index is built, and the migration
        builds it on an empty table: rebuild after the first backfill
        (bootstrap does it), after large loads, and periodically. 26ai: ALTER
        INDEX ... REBUILD ONLINE (the table stays writable); 23ai:
        DBMS_VECTOR.REBUILD_INDEX.
        """
        from .. import index_maintenance

        click.echo(index_maintenance.rebuild(_system(ctx).engine))

    @index.command("status")
    @click.option("--probes", type=click.IntRange(0, 1000), default=20, show_default=True,
                  help="Stored vectors used as query vectors for the accuracy measure (0: skip it).")
    @click.option("--top-k", "top_k", type=click.IntRange(1, 100), default=10, show_default=True,
                  help="k of the top-k compared with the exact search.")
    @click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
    @click.pass_context
    @handle_errors
    def index_status(ctx: click.Context, probes: int, top_k: int, as_json: bool) -> None:
        """The indexes, their state, and the accuracy the vector index achieves (DBMS_VECTOR.INDEX_ACCURACY_QUERY)."""
        import dataclasses
        import json

        from .. import index_maintenance

        result = index_maintenance.status(_system(ctx).engine, probes=probes, top_k=top_k)
        if as_json:
            click.echo(json.dumps({**dataclasses.asdict(result), "mean_accuracy": result.mean_accuracy},
                                  default=str))
            return
        for line in result.lines():
            click.echo(line)

    @index.command("optimize")
    @click.option("--maxtime", type=click.IntRange(1, 1440), default=None,
                  help="Stop after this many minutes (CTX_DDL.OPTIMIZE_INDEX maxtime); default: until done.")
    @click.pass_context
    @handle_errors
    def index_optimize(ctx: click.Context, maxtime: int | None) -> None:
        """Compact the Oracle Text index (fragmented by SYNC ON COMMIT); run daily or weekly."""
        from .. import index_maintenance

        click.echo(index_maintenance.optimize_text(_system(ctx).engine, maxtime_min=maxtime))
