"""Oracle's joined group test (engine_sql.SCOPE_JOIN / SCOPE_JOINED) selects what SCOPE selects.

Oracle runs SCOPE's group IN, which sits inside the rule's OR, as a FILTER
once per row; its statements over the whole table take the group test as
outer joins instead (scope_sql.py). The joins and the predicate are plain
SQL, so their rule is checked here on the embedded engine, on a world made to
break a careless join: a record in two of the caller's groups (one row, not
two), a record of a failed source with the caller's group (hidden), public and
owned records, see-all and a caller with no groups. Oracle's whole-table
statements whose text runs on SQLite as it is (the counts, the facet values,
the keyword statistics) are run verbatim; the keyword statement runs its
SQLite text with Oracle's scope steps (the rest of its Oracle text, FROM dual
and FETCH FIRST, does not run here).
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from oracle_rag.answering.structured import answers_sql
from oracle_rag.engines import Filters, RecordAccess, Scope, engine_sql
from oracle_rag.engines.records import search_binds
from oracle_rag.engines.statements import Sql, stmt
from oracle_rag.indexing.record_writes import record_write, write_records
from oracle_rag.text.chunking import ChunkPlan

SCOPES = (
    Scope(1, False),
    Scope(2, False, ("ops", "fin")),
    Scope(7, False, ("ops", "net", "fin", "hr", "x")),
    Scope(9, False),
    Scope(3, True),
)


@pytest.fixture
def world(rag: Any) -> Any:
    engine = rag.engine
    records = []
    for i in range(1, 25):
        source_type = ("DOC", "NOTE", "MEMO")[i % 3]
        groups = (("ops", "fin"), ("ops",), ("net",), (), ("fin", "hr"))[i % 5]
        access = RecordAccess(owner=(1, 2, None, 7)[i % 4], public=i % 7 == 0, groups=tuple(sorted(groups)))
        words = ["alpha beta", "beta gamma delta", "alpha alpha delta", "gamma"][i % 4]
        records.append(
            record_write(
                ChunkPlan(),
                source_type,
                str(i),
                f"record {i} {words} " * (1 + i % 3),
                facets=f'{{"status": "{("OPEN", "DONE")[i % 2]}"}}',
                access=access,
            )
        )
    with engine.begin() as conn:
        write_records(engine, conn, records)
        engine.set_access_failure(conn, "MEMO", "2026-12-01T00:00:00")  # MEMO records: see-all only
    return rag


def _run(
    conn: sa.Connection, text: str, binds: dict[str, Any], expanding: tuple[str, ...] = ()
) -> list[tuple]:
    return sorted((tuple(r) for r in conn.execute(stmt(text, expanding), binds)), key=repr)


@pytest.mark.parametrize("name", ["COUNT_RECORDS", "COUNT_GROUPS", "FACET_VALUES"])
def test_oracle_whole_table_statements_select_as_scope_does(world: Any, name: str) -> None:
    sql: Sql = (
        answers_sql.grouped(getattr(answers_sql, name), answers_sql.FACET_TEXT)
        if name != "COUNT_RECORDS"
        else answers_sql.COUNT_RECORDS
    )
    oracle = (sql.oracle or "").replace(
        "JSON_VALUE(c.FACETS, '{path}')", "json_extract(c.FACETS, '$.status')"
    )
    sqlite = (sql.sqlite or "").replace(
        "json_extract(c.FACETS, '{path}')", "json_extract(c.FACETS, '$.status')"
    )
    assert "LEFT JOIN RAG_ACCESS_FAILURE scope_f" in oracle and "scope_m.CHUNK_ID IS NOT NULL" in oracle
    assert "SELECT scope_g.CHUNK_ID FROM RAG_CHUNK_GROUP" in sqlite  # SQLite keeps SCOPE's IN
    with world.engine.connect() as conn:
        for scope in SCOPES:
            binds = {**scope.binds(), "types": ["DOC", "NOTE", "MEMO"]}
            assert _run(conn, oracle, binds, sql.expanding) == _run(conn, sqlite, binds, sql.expanding), scope


def test_oracle_keyword_statistics_are_the_visible_records(world: Any) -> None:
    assert (engine_sql.KEYWORD_STATS.oracle or "").startswith("SELECT /*+ RESULT_CACHE */ COUNT(*)")
    with world.engine.connect() as conn:
        seen = set()
        for scope in SCOPES:
            binds = search_binds(scope, Filters())
            oracle = _run(conn, engine_sql.KEYWORD_STATS.oracle or "", binds, ("f_types",))
            assert oracle == _run(conn, engine_sql.KEYWORD_STATS.sqlite or "", binds, ("f_types",)), scope
            seen.add(oracle[0])
        assert len(seen) == len(SCOPES)  # the world tells every scope apart


@pytest.mark.parametrize("joined", [False, True])
def test_keyword_statement_with_oracles_scope_steps_ranks_as_sqlites(world: Any, joined: bool) -> None:
    terms = {"alpha": 1, "delta": 1, "gamma": 1}
    params = world.engine.bm25_params()
    results = set()
    for scope in SCOPES:
        binds = {
            **search_binds(scope, Filters()),
            **engine_sql.keyword_binds(terms),
            "k": 5,
            "k1": params.k1,
            "b": params.b,
        }
        with world.engine.connect() as conn:
            n, total = conn.execute(stmt(engine_sql.KEYWORD_STATS.sqlite or "", ("f_types",)), binds).one()
            binds.update(n=n, total_length=total)
            texts = [
                engine_sql._keyword_top_text("sqlite", len(terms), True, joined, scope_side=side)
                for side in ("sqlite", "oracle")
            ]
            assert "caller_chunks" in texts[1] and "caller_chunks" not in texts[0]
            if joined:
                texts = [t.replace("/* where */ 1 = 1", "1 = 1") for t in texts]
            ours, theirs = (_run(conn, t, binds, ("f_types",)) for t in texts)
        assert ours == theirs, scope
        results.add(repr([r for r in ours if r[2] is None]))
    assert len(results) == len(SCOPES)  # each caller ranks a different set
