"""CLI commands for the read path: ``search`` and ``eval`` (retrieval quality).

Libraries: :mod:`oracle_rag.search.retriever`, :mod:`oracle_rag.evaluation`.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from oracle_rag.callers.access import load_caller
from oracle_rag.callers.audit import audit_for, record_keys
from oracle_rag.cli import search_output
from oracle_rag.cli.context import cli_settings, pass_system, progress_bar
from oracle_rag.engines import Filters
from oracle_rag.evaluation import run_eval
from oracle_rag.search.retriever import MODES
from oracle_rag.sources.reference_facets import PROJECT, SPRINT
from oracle_rag.system import RagSystem


@click.command()
@click.argument("question")
@click.option("--as", "as_id", required=True, type=int, help="Employee id to search as (scope).")
@click.option("--mode", type=click.Choice(MODES), default="semantic", show_default=True)
@click.option("--k", "k", type=int, default=None, help="Number of results (default: top_k).")
@click.option(
    "--project", type=int, default=None, help="Only records of this project (the reference sources)."
)
@click.option("--sprint", type=int, default=None, help="Only records of this sprint (the reference sources).")
@click.option("--type", "types", multiple=True, help="Restrict to source types (repeatable).")
@click.option("--exact", is_flag=True, help="Exact search (no approximate index), to measure recall.")
@pass_system
def search(
    rag: RagSystem,
    question: str,
    as_id: int,
    mode: str,
    k: int | None,
    project: int | None,
    sprint: int | None,
    types: tuple[str, ...],
    exact: bool,
) -> None:
    """Print the ranked chunks EMPLOYEE_ID may see for QUESTION."""
    with rag.engine.connect() as conn:
        caller = load_caller(conn, as_id, rag.engine)
        if types:
            known = {
                *rag.sources.types(),
                *rag.settings.sources,
                *rag.engine.queue_stats(conn, rag.settings.max_attempts).chunks_by_type,
            }
            types = search_output.resolve_types(types, known)
    # The reference sources' indexed facets: a search narrows by them in SQL, through their columns.
    narrowing = Filters(source_types=types, facets={PROJECT.name: project, SPRINT.name: sprint})
    results = rag.retriever().search(question, k, caller, mode, narrowing, exact=exact)
    audit_for(rag.engine).record(caller.employee_id, "search", record_keys(results), question=question)
    who = (
        f"employee {caller.employee_id} ({caller.name or 'no name'}, {', '.join(caller.roles) or 'no role'})"
    )
    click.echo(search_output.header(mode, who, len(results)))
    for line in search_output.lines(results, mode):
        click.echo(line)
    if not results:
        click.echo("(no results visible to this caller)", err=True)


@click.command("eval")
@click.option("--dataset", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--max-docs", type=click.IntRange(1), default=None, help="Use only the first N documents.")
@click.option("--max-queries", type=click.IntRange(1), default=None, help="Use only the first N queries.")
@click.pass_context
def eval_cmd(
    ctx: click.Context, dataset: Path, json_out: Path | None, max_docs: int | None, max_queries: int | None
) -> None:
    """Evaluate retrieval on a BEIR-layout collection (nDCG@10, Recall@100)."""
    result = run_eval(
        cli_settings(ctx), dataset, max_docs=max_docs, max_queries=max_queries, progress=progress_bar("eval")
    )
    for mode in MODES:
        m = result[mode]
        click.echo(f"{mode:<9} nDCG@10 {m['ndcg@10']:.4f}  Recall@100 {m['recall@100']:.4f}")
    ref = result["details"]["rrf_reference"]["keyword+semantic_first_window"]
    click.echo(
        f"{'rrf':<9} nDCG@10 {ref['ndcg@10']:.4f}  Recall@100 {ref['recall@100']:.4f}  "
        f"(plain RRF k=60 of the keyword and first-window semantic runs: what hybrid fuses)"
    )
    click.echo(f"documents {result['documents']}, queries {result['queries']}")
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n")
