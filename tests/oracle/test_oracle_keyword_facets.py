"""BM25 ranked inside Oracle, and the facet indexes, as Oracle plans them.

Marked ``oracle`` by conftest.py and skipped with one line without a database.
The plans are read with EXPLAIN PLAN + DBMS_XPLAN.DISPLAY for the exact text
the engine sends (the binds bound, as values are not peeked).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from oracle_plans import filters_over, full_scans, plan_rows

from oracle_rag.answering.structured import answers_sql
from oracle_rag.answering.structured.facet_indexes import facet_index_ddl
from oracle_rag.answering.structured.predicates import build_predicate
from oracle_rag.answering.structured.understood import Condition
from oracle_rag.callers.caller import Caller
from oracle_rag.engines import Filters, Scope, engine_sql
from oracle_rag.engines.records import Where, search_binds
from oracle_rag.engines.statements import stmt


def _index(system) -> None:  # type: ignore[no-untyped-def]
    system.backfill()
    result = system.worker().drain()
    assert result.failed_rows == 0, result.errors


def _plan(conn, sql: str, binds: dict, expanding: tuple[str, ...] = ()) -> str:  # type: ignore[type-arg]
    conn.execute(stmt("EXPLAIN PLAN FOR " + sql, expanding), binds)
    plan = "\n".join(
        r[0]
        for r in conn.execute(
            sa.text("SELECT PLAN_TABLE_OUTPUT FROM TABLE(DBMS_XPLAN.DISPLAY(NULL, NULL, 'TYPICAL'))")
        )
    )
    conn.rollback()
    return plan


# A developer in two groups: the statements' group test is read, not skipped as for see-all.
DEVELOPER = Scope(17, False, ("ops", "net"))
_ACL = ("RAG_CHUNK_ACL", "RAG_CHUNK_GROUP")


def test_keyword_statement_reads_postings_by_term_and_returns_the_top_k(oracle_system) -> None:  # type: ignore[no-untyped-def]
    _index(oracle_system)
    engine = oracle_system.engine
    terms = {"login": 1, "timeout": 1}
    binds = {
        **search_binds(DEVELOPER, Filters()),
        **engine_sql.keyword_binds(terms),
        "k": 8,
        "k1": 1.5,
        "b": 0.75,
    }
    statement = engine_sql.keyword_top(len(terms), stats_bound=True)
    with engine.connect() as conn:
        stats_plan = _plan(
            conn, engine.text(engine_sql.KEYWORD_STATS), search_binds(DEVELOPER, Filters()), ("f_types",)
        )
        stats = engine.keyword_stats(conn, DEVELOPER, Filters(), None)
        assert stats is not None
        binds.update(n=stats.n, total_length=stats.total_length)
        plan = _plan(conn, engine.text(statement), binds, ("f_types",))
        rows = conn.execute(engine.statement(statement), binds).fetchall()
    # the visible set's N and length from RAG_CHUNK_RECORD_IX, kept in the server result cache
    assert "RAG_CHUNK_RECORD_IX" in stats_plan, stats_plan
    assert any(r.operation == "RESULT CACHE" for r in plan_rows(stats_plan)), stats_plan
    # the postings by term through RAG_CHUNK_TERM_SCORE_IX (V13: TERM first, then every column the
    # statement reads of a posting), one range per term; never a full scan of them
    assert "RAG_CHUNK_TERM_SCORE_IX" in plan, plan
    # the group test joined (SCOPE_JOIN), never a FILTER re-running the ACL per posting or record
    assert filters_over(plan, _ACL) == [], plan
    assert filters_over(stats_plan, _ACL) == [], stats_plan
    # (matched by operation and object name: DBMS_XPLAN pads its columns to the widest row)
    assert full_scans(plan, "RAG_CHUNK_TERM") == [], plan
    # the row limit is applied in the database (a stopkey / pushed rank), so only k rows leave it
    assert "STOPKEY" in plan or "PUSHED RANK" in plan, plan
    scored = [r for r in rows if r[2] is None]
    assert 0 < len(scored) <= 8 and {r[2] for r in rows if r[2] is not None} <= set(terms)


def test_keyword_ranking_in_oracle_equals_the_reference(oracle_system) -> None:  # type: ignore[no-untyped-def]
    from bm25_reference import scores

    _index(oracle_system)
    visible: dict[str, str] = {}
    with oracle_system.engine.connect() as conn:
        for source in oracle_system.sources:
            for doc in source.load_many(conn, source.all_ids(conn)).values():
                visible[f"{doc.source_type}#{doc.source_id}"] = doc.content
    query = "login timeout mobile"
    expected = scores(visible, query)
    hits = oracle_system.retriever().search(query, 20, Caller(3, "manager"), "keyword")
    ranked = sorted(expected.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))
    assert len(hits) == min(20, len(expected))
    for hit in hits:
        assert abs(hit.score - expected[f"{hit.source_type}#{hit.source_id}"]) <= 1e-9 * max(1.0, hit.score)
    assert {f"{h.source_type}#{h.source_id}" for h in hits} == {k for k, _ in ranked[: len(hits)]}


def test_declared_facets_are_indexed_with_the_predicates_expression(oracle_system) -> None:  # type: ignore[no-untyped-def]
    _index(oracle_system)
    expected = dict(facet_index_ddl(oracle_system.declarations()))
    with oracle_system.engine.connect() as conn:
        found = {
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT INDEX_NAME FROM USER_INDEXES WHERE TABLE_NAME = 'RAG_CHUNK' AND INDEX_NAME LIKE 'RAG_CHUNK_F%'"
                )
            )
        }
        assert set(expected) <= found, sorted(set(expected) - found)
        facets = {f.name: f for d in oracle_system.declarations() for f in d.facets}
        predicate = build_predicate([Condition("status", "in", ("DONE",), "status", "done")], facets, "TASK")
        where = Where(predicate.sql.oracle or "", predicate.binds)
        # A hint naming the index is followed only when the predicate's expression is the indexed one:
        # a plan without it means the texts differ (or the return type does).
        sql = where.apply(oracle_system.engine.text(answers_sql.COUNT_RECORDS)).replace(
            "SELECT COUNT(*)", "SELECT /*+ INDEX(c RAG_CHUNK_FT_STATUS_IX) */ COUNT(*)", 1
        )
        # COUNT_RECORDS carries the scope: every scope bind, the caller's groups too
        plan = _plan(conn, sql, {**predicate.binds, **Scope(3, True).binds()})
    assert "RAG_CHUNK_FT_STATUS_IX" in plan, plan


@pytest.mark.parametrize(
    "name", ["COUNT_RECORDS", "LIST_RECORDS", "SEMANTIC_SEARCH_EXACT", "SEMANTIC_RECORDS"]
)
def test_whole_table_statements_join_the_group_test(oracle_system, name: str) -> None:  # type: ignore[no-untyped-def]
    """Oracle runs a subquery under the scope's OR as a FILTER per row; these statements join it instead."""
    _index(oracle_system)
    engine = oracle_system.engine
    sql = getattr(answers_sql, name, None) or getattr(engine_sql, name)
    binds = search_binds(DEVELOPER, Filters(), query="login timeout", k=8, limit=8)
    with engine.connect() as conn:
        plan = _plan(conn, engine.text(sql), binds, sql.expanding)
    assert filters_over(plan, _ACL) == [], plan


def test_a_facet_index_is_created_while_a_worker_holds_uncommitted_writes(oracle_system) -> None:  # type: ignore[no-untyped-def]
    """A deploy next to a running worker: ONLINE (and the session's DDL_LOCK_TIMEOUT) wait for the open
    transaction instead of failing with ORA-00054; the writers probe sees the transaction while it is open."""
    import threading

    from oracle_rag.answering.structured.facet_indexes import ensure_facet_indexes

    _index(oracle_system)
    engine = oracle_system.engine
    name, _ddl = facet_index_ddl(oracle_system.declarations())[0]
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP INDEX {name}")
    assert not engine.writers_active()
    worker = engine.sa_engine.connect()  # a worker mid-batch: a row of RAG_CHUNK locked, not committed
    worker.exec_driver_sql("UPDATE RAG_CHUNK SET UPDATED_AT = UPDATED_AT WHERE ROWNUM = 1")
    outcome: list[object] = []
    try:
        assert engine.writers_active()
        deploy = threading.Thread(
            target=lambda: outcome.append(
                _try(lambda: ensure_facet_indexes(engine, oracle_system.declarations()))
            )
        )
        deploy.start()
        deploy.join(timeout=3)  # still waiting on the open transaction (not failed at once)
        assert deploy.is_alive() or (outcome and not isinstance(outcome[0], Exception)), outcome
    finally:
        worker.commit()
        worker.close()
    deploy.join(timeout=120)
    assert outcome and not isinstance(outcome[0], Exception), outcome
    assert name in outcome[0]  # type: ignore[operator]
    assert not engine.writers_active()


def _try(run):  # type: ignore[no-untyped-def]
    try:
        return run()
    except Exception as exc:  # reported to the asserting thread
        return exc
