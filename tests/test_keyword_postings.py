"""Postings carry their record's length, scope and filter columns (SQLite V13 / Oracle V13).

The keyword statement reads only RAG_CHUNK_TERM (engine_sql.POSTING_COLUMNS),
so the migration must fill the columns from the stored records with no
embedding, and every write path (upsert, analysis, re-scope, access change,
a chunk 0 written without analysis) must keep them equal to chunk 0. Real
SQLite files, the real model, the SQL form of keyword search (the base
Engine.keyword_search, as Oracle runs it).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from writepath_helpers import instrument, postings_out_of_step

from oracle_rag.engines import ChunkWrite, Engine, Filters, RecordAccess, Scope
from oracle_rag.migrations import MigrationRunner

BLOB = b"\x00" * 1536


def _sql_keyword(engine: Engine, query: str, scope: Scope, where: Any = None) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        return [
            (h.source_type, h.source_id)
            for h in Engine.keyword_search(engine, conn, query, 10, scope, Filters(), where)
        ]


def _postings(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.text(
                    "SELECT c.SOURCE_ID, t.TERM, t.TF, t.TERM_COUNT, t.SOURCE_TYPE, t.ACCESS_PUBLIC, t.ACCESS_OWNER, "
                    "t.PROJECT_ID, t.SPRINT_ID FROM RAG_CHUNK_TERM t JOIN RAG_CHUNK c ON c.CHUNK_ID = t.CHUNK_ID "
                    "ORDER BY c.SOURCE_ID, t.TERM"
                )
            )
        ]


def test_v13_fills_the_postings_from_their_records_with_no_embedding(make_settings) -> None:
    from oracle_rag.system import RagSystem

    system = RagSystem(make_settings())
    try:
        engine = system.engine
        runner = MigrationRunner(engine)
        v13 = next(m for m in runner.migrations if m.path.name == "V13__postings_carry_record.sql")
        runner.migrations = [m for m in runner.migrations if m.version < v13.version]
        runner.migrate()
        with engine.begin() as conn:  # as V12 left them: postings of (TERM, CHUNK_ID, TF) only
            insert = sa.text(
                "INSERT INTO RAG_CHUNK (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, PROJECT_ID, SPRINT_ID, CONTENT, "
                "EMBEDDING, CONTENT_HASH, TERM_COUNT, ACCESS_OWNER, ACCESS_PUBLIC) "
                "VALUES (:t, :i, :n, :o, :p, :s, :c, :e, 'h', :tc, :o, :pub)"
            )
            conn.execute(
                insert,
                [
                    {
                        "t": "TASK",
                        "i": "1",
                        "n": 0,
                        "o": 7,
                        "p": 2,
                        "s": 3,
                        "c": "quokka quokka wombat",
                        "e": BLOB,
                        "tc": 3,
                        "pub": 0,
                    },
                    {
                        "t": "TASK",
                        "i": "1",
                        "n": 1,
                        "o": 7,
                        "p": 2,
                        "s": 3,
                        "c": "second window",
                        "e": BLOB,
                        "tc": None,
                        "pub": 0,
                    },
                    # not analysed (TERM_COUNT NULL) but with stale postings: the statement never read them
                    {
                        "t": "PROJECT",
                        "i": "5",
                        "n": 0,
                        "o": None,
                        "p": 5,
                        "s": None,
                        "c": "quokka habitat",
                        "e": BLOB,
                        "tc": None,
                        "pub": 1,
                    },
                ],
            )
            ids = {
                r[0]: r[1]
                for r in conn.execute(sa.text("SELECT SOURCE_ID, CHUNK_ID FROM RAG_CHUNK WHERE CHUNK_NO = 0"))
            }
            conn.execute(
                sa.text("INSERT INTO RAG_CHUNK_TERM (TERM, CHUNK_ID, TF) VALUES (:term, :id, :tf)"),
                [
                    {"term": "quokka", "id": ids["1"], "tf": 2},
                    {"term": "wombat", "id": ids["1"], "tf": 1},
                    {"term": "quokka", "id": ids["5"], "tf": 1},
                ],
            )
        rt = instrument(system)
        MigrationRunner(engine).migrate()
        assert _postings(engine) == [
            ("1", "quokka", 2, 3, "TASK", 0, 7, 2, 3),
            ("1", "wombat", 1, 3, "TASK", 0, 7, 2, 3),
        ]
        assert postings_out_of_step(system) == []
        assert _sql_keyword(engine, "quokka", Scope(7, False)) == [("TASK", "1")]
        assert _sql_keyword(engine, "quokka", Scope(8, False)) == []  # the scope, read from the postings
        system.migrate()  # the step after the migrations analyses the record that had none, from its chunks
        assert postings_out_of_step(system) == []
        assert _sql_keyword(engine, "habitat", Scope(8, False)) == [("PROJECT", "5")]
        assert rt.calls == 0
        with engine.connect() as conn:
            indexes = {
                r[0] for r in conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'index'"))
            }
        assert {"RAG_CHUNK_TERM_CHUNK_IX", "RAG_CHUNK_RECORD_IX"} <= indexes
    finally:
        system.close()


def _task_one_owner(demo_rag: Any) -> tuple[str, int]:
    with demo_rag.engine.connect() as conn:
        title, owner = conn.execute(sa.text("SELECT TITLE, ASSIGNEE_ID FROM TASK WHERE TASK_ID = 1")).one()
    return str(title), int(owner)


def test_reassignment_moves_the_postings_scope_with_no_embedding(demo_rag) -> None:
    title, old_owner = _task_one_owner(demo_rag)
    with demo_rag.engine.begin() as conn:
        first, last = conn.execute(
            sa.text("SELECT FIRST_NAME, LAST_NAME FROM EMPLOYEE WHERE EMPLOYEE_ID = :e"), {"e": old_owner}
        ).one()
        conn.execute(
            sa.text("INSERT INTO EMPLOYEE VALUES (900, :f, :l, 'developer')"), {"f": first, "l": last}
        )
        conn.execute(sa.text("UPDATE TASK SET ASSIGNEE_ID = 900 WHERE TASK_ID = 1"))
    assert ("TASK", "1") in _sql_keyword(demo_rag.engine, title, Scope(old_owner, False))
    rt = instrument(demo_rag)
    with demo_rag.engine.begin() as conn:
        res = demo_rag.indexer.apply(conn, [("TASK", "1")])
    assert (res.embedded, res.rescoped, rt.calls) == (0, 1, 0)  # same text: re-scoped, not embedded
    assert postings_out_of_step(demo_rag) == []
    assert ("TASK", "1") in _sql_keyword(demo_rag.engine, title, Scope(900, False))
    assert ("TASK", "1") not in _sql_keyword(demo_rag.engine, title, Scope(old_owner, False))


def test_access_change_and_a_write_without_analysis_keep_the_postings_in_step(demo_rag) -> None:
    engine = demo_rag.engine
    title, owner = _task_one_owner(demo_rag)
    with engine.begin() as conn:
        engine.write_access(conn, [("TASK", "1", RecordAccess(owner=None, public=False, groups=("team-x",)))])
    assert postings_out_of_step(demo_rag) == []
    assert ("TASK", "1") not in _sql_keyword(engine, title, Scope(owner, False))
    assert ("TASK", "1") in _sql_keyword(engine, title, Scope(owner, False, ("team-x",)))
    with engine.connect() as conn:
        content = conn.execute(
            sa.text(
                "SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = '1' AND CHUNK_NO = 0"
            )
        ).scalar()
    # chunk 0 written without an analysis: the record is unanalysed (TERM_COUNT NULL), so it has no postings
    with engine.begin() as conn:
        engine.upsert_chunks(conn, [ChunkWrite("TASK", "1", str(content), "h", owner_id=owner)])
    assert postings_out_of_step(demo_rag) == []
    assert ("TASK", "1") not in _sql_keyword(engine, title, Scope(1, True))


def test_exact_ties_beyond_k_rank_by_chunk_id_in_every_form(make_settings) -> None:
    # SQLite rounds only the scores within 1e-9 of the k-th best (engine_sql._BEST): twelve records
    # of one text tie exactly, so the top 5 must be the five lowest chunk ids, as in the index.
    from oracle_rag.system import RagSystem
    from oracle_rag.text import bm25

    system = RagSystem(make_settings())
    try:
        system.migrate()
        engine = system.engine
        text = "quokka burrow survey"
        with engine.begin() as conn:
            engine.upsert_chunks(
                conn,
                [
                    ChunkWrite("NOTE", f"n{i:02d}", text, "h", analysis=bm25.analyze_record(text))
                    for i in range(12)
                ]
                + [
                    ChunkWrite(
                        "NOTE",
                        "best",
                        "quokka quokka burrow",
                        "h",
                        analysis=bm25.analyze_record("quokka quokka burrow"),
                    )
                ],
            )
        manager = Scope(1, True)
        with engine.connect() as conn:
            ids = {r[0]: r[1] for r in conn.execute(sa.text("SELECT SOURCE_ID, CHUNK_ID FROM RAG_CHUNK"))}
            index = [h.source_id for h in engine.keyword_search(conn, "quokka", 5, manager, Filters())]
            sql = [h.source_id for h in Engine.keyword_search(engine, conn, "quokka", 5, manager, Filters())]
        tied = sorted((sid for sid in ids if sid != "best"), key=lambda sid: ids[sid])
        assert sql == index == ["best", *tied[:4]]
    finally:
        system.close()
