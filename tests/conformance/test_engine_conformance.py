"""The same behaviour on every engine: migrations, the transactional queue, the worker, search scope.

Each test runs once per engine (``engine_system`` in conftest.py): on SQLite
always, on Oracle when one is available (``-m oracle`` selects those). The
assertions are about rows and results, never about which engine ran, so a
difference between the engines is a failure here.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
import sqlalchemy as sa

from oracle_rag.callers.caller import Caller
from oracle_rag.engines import Filters
from oracle_rag.indexing.queue import enqueue
from oracle_rag.migrations import discover

SEED_TASKS = 40
SEED_SPRINTS = 48
SEED_PROJECTS = 6
ENTITIES = SEED_TASKS + SEED_SPRINTS + SEED_PROJECTS


def _scalar(system, sql: str, **binds) -> object:  # type: ignore[no-untyped-def]
    with system.engine.connect() as conn:
        return conn.execute(sa.text(sql), binds).scalar_one()


def _rows(system, sql: str, **binds) -> list[tuple]:  # type: ignore[no-untyped-def]
    with system.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(sql), binds)]


def _busiest_developer(system) -> int:  # type: ignore[no-untyped-def]
    owners = Counter(
        int(r[0]) for r in _rows(system, "SELECT ASSIGNEE_ID FROM TASK WHERE ASSIGNEE_ID IS NOT NULL")
    )
    developers = {
        int(r[0]) for r in _rows(system, "SELECT EMPLOYEE_ID FROM EMPLOYEE WHERE ROLE = 'developer'")
    }
    return int(max((n, e) for e, n in owners.items() if e in developers)[1])


# -- migrations --------------------------------------------------------------------------------


def test_migrate_fresh_then_rerun_is_a_noop(empty_system) -> None:  # type: ignore[no-untyped-def]
    engine = empty_system.engine
    versions = {s: [m.version for m in discover(engine.migrations_dir(s))] for s in ("rag", "demo")}
    first = empty_system.migrate(demo=True)
    assert {s: r.applied for s, r in first.items()} == versions
    second = empty_system.migrate(demo=True)
    assert {s: (r.applied, r.resumed, r.skipped) for s, r in second.items()} == {
        s: ([], [], v) for s, v in versions.items()
    }
    for table in ("RAG_CHUNK", "RAG_DIRTY", "TASK", "EMPLOYEE"):
        assert _scalar(empty_system, f"SELECT COUNT(*) FROM {table}") == 0


# -- the queue follows the caller's transaction ------------------------------------------------


def test_enqueue_in_a_rolled_back_transaction_leaves_no_row(engine_system) -> None:  # type: ignore[no-untyped-def]
    with engine_system.engine.sa_engine.connect() as conn:
        tx = conn.begin()
        conn.execute(sa.text("UPDATE TASK SET TITLE = :t WHERE TASK_ID = 1"), {"t": "rolled back title"})
        enqueue(conn, "TASK", 1)
        assert conn.execute(sa.text("SELECT COUNT(*) FROM RAG_DIRTY")).scalar_one() == 1  # visible inside
        tx.rollback()
    assert _scalar(engine_system, "SELECT COUNT(*) FROM RAG_DIRTY") == 0
    assert _scalar(engine_system, "SELECT TITLE FROM TASK WHERE TASK_ID = 1") != "rolled back title"

    with engine_system.engine.begin() as conn:
        enqueue(conn, "TASK", 1)
    assert _rows(engine_system, "SELECT SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS FROM RAG_DIRTY") == [
        ("TASK", "1", "UPSERT", 0)
    ]


# -- the worker ----------------------------------------------------------------------------------


def test_worker_drain_indexes_the_demo_data(engine_system) -> None:  # type: ignore[no-untyped-def]
    assert engine_system.backfill().total == ENTITIES
    result = engine_system.worker().drain()
    assert (result.picked, result.embedded, result.failed_rows) == (ENTITIES, ENTITIES, 0), result.errors
    assert _scalar(engine_system, "SELECT COUNT(*) FROM RAG_DIRTY") == 0
    by_type = dict(_rows(engine_system, "SELECT SOURCE_TYPE, COUNT(*) FROM RAG_CHUNK GROUP BY SOURCE_TYPE"))
    assert by_type == {"TASK": SEED_TASKS, "SPRINT": SEED_SPRINTS, "PROJECT": SEED_PROJECTS}
    owners = _rows(
        engine_system,
        "SELECT c.OWNER_ID, t.ASSIGNEE_ID FROM RAG_CHUNK c "
        "JOIN TASK t ON c.SOURCE_ID = CAST(t.TASK_ID AS VARCHAR(20)) "
        "WHERE c.SOURCE_TYPE = 'TASK'",
    )
    assert len(owners) == SEED_TASKS and all(o == a for o, a in owners)
    assert (
        _scalar(
            engine_system,
            "SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE <> 'TASK' AND OWNER_ID IS NOT NULL",
        )
        == 0
    )
    for content, digest in _rows(engine_system, "SELECT CONTENT, CONTENT_HASH FROM RAG_CHUNK"):
        assert hashlib.sha256(content.encode("utf-8")).hexdigest() == digest
    with engine_system.engine.connect() as conn:
        vec = engine_system.engine.embed(conn, "login timeout")
    assert len(vec) == 384 and abs(sum(v * v for v in vec) - 1.0) < 1e-3


def test_rerun_skips_unchanged_text_and_reembeds_a_change(indexed_system) -> None:  # type: ignore[no-untyped-def]
    before = dict(_rows(indexed_system, "SELECT CHUNK_ID, UPDATED_AT FROM RAG_CHUNK"))
    assert indexed_system.backfill(all_entities=True).total == ENTITIES
    again = indexed_system.worker().drain()
    assert (again.picked, again.embedded, again.unchanged) == (ENTITIES, 0, ENTITIES)
    assert (
        dict(_rows(indexed_system, "SELECT CHUNK_ID, UPDATED_AT FROM RAG_CHUNK")) == before
    )  # nothing rewritten

    with indexed_system.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE TASK SET TITLE = :t WHERE TASK_ID = 7"), {"t": "Rotate the signing keys"}
        )
        enqueue(conn, "TASK", 7)
    changed = indexed_system.worker().drain()
    assert (changed.embedded, changed.unchanged) == (1, 0)
    content = _scalar(
        indexed_system, "SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = '7'"
    )
    assert str(content).startswith("[TASK #7] Rotate the signing keys")


def test_delete_removes_the_chunk(indexed_system) -> None:  # type: ignore[no-untyped-def]
    with indexed_system.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM TASK_COMMENT WHERE TASK_ID IN (5, 6)"))
        conn.execute(sa.text("DELETE FROM TASK WHERE TASK_ID IN (5, 6)"))
        enqueue(conn, "TASK", 5, "DELETE")
        enqueue(conn, "TASK", 6, "UPSERT")  # an upsert of a row that is gone also removes its chunk
    result = indexed_system.worker().drain()
    assert (result.deleted, result.failed_rows) == (2, 0)
    ids = {r[0] for r in _rows(indexed_system, "SELECT SOURCE_ID FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK'")}
    assert len(ids) == SEED_TASKS - 2 and not {"5", "6"} & ids


def test_failure_keeps_the_rows_and_records_the_error(engine_system) -> None:  # type: ignore[no-untyped-def]
    settings = engine_system.settings
    with engine_system.engine.begin() as conn:
        enqueue(conn, "TASK", 1)
        enqueue(conn, "NO_SUCH_SOURCE", 7)
    first = engine_system.worker().run_once()
    assert (first.picked, first.embedded, first.failed_rows) == (2, 1, 1)
    rows = _rows(engine_system, "SELECT SOURCE_TYPE, SOURCE_ID, ATTEMPTS, LAST_ERROR FROM RAG_DIRTY")
    assert len(rows) == 1 and rows[0][:3] == ("NO_SUCH_SOURCE", "7", 1)
    assert "NO_SUCH_SOURCE" in rows[0][3]
    assert _scalar(engine_system, "SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK'") == 1
    engine_system.worker().drain()  # retries until max_attempts, then the row is parked, not dropped
    assert _rows(engine_system, "SELECT ATTEMPTS FROM RAG_DIRTY") == [(settings.max_attempts,)]
    with engine_system.engine.connect() as conn:
        parked = engine_system.engine.list_queue(
            conn, failed_only=True, max_attempts=settings.max_attempts, limit=10
        )
        assert [(r.source_type, r.source_id) for r in parked] == [("NO_SUCH_SOURCE", "7")]
    assert engine_system.worker().run_once().picked == 0


# -- search scope ----------------------------------------------------------------------------------


def _visible(hit, developer: int) -> bool:  # type: ignore[no-untyped-def]
    return hit.owner_id == developer or (hit.owner_id is None and hit.source_type != "TASK")


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_search_is_scoped_and_returns_k_rows(indexed_system, mode: str) -> None:  # type: ignore[no-untyped-def]
    retriever = indexed_system.retriever()
    developer = _busiest_developer(indexed_system)
    dev = Caller(developer, "developer")
    manager = Caller(3, "manager")
    query = "sprint goal for the project"  # every sprint chunk has these words: plenty visible to anyone

    mine = retriever.search(query, 5, dev, mode)
    assert len(mine) == 5
    assert all(_visible(h, developer) for h in mine), [(h.source_type, h.owner_id) for h in mine]
    # with a k larger than everything visible, the developer gets all of it and nothing more
    wide = retriever.search(query, 100, dev, mode, exact=True)
    assert all(_visible(h, developer) for h in wide)
    own_tasks = {
        int(r[0])
        for r in _rows(indexed_system, "SELECT TASK_ID FROM TASK WHERE ASSIGNEE_ID = :d", d=developer)
    }
    found_tasks = {int(h.source_id) for h in wide if h.source_type == "TASK"}
    assert found_tasks <= own_tasks
    everyone = retriever.search(query, 100, manager, mode, exact=True)
    assert {h.owner_id for h in everyone if h.source_type == "TASK"} - {developer}, (
        "managers see others' tasks"
    )
    if mode == "semantic":  # semantic ranks every visible row
        assert found_tasks == own_tasks
        assert len(wide) == SEED_SPRINTS + SEED_PROJECTS + len(own_tasks)
        assert len(everyone) == ENTITIES
    # filters narrow inside the same statement
    only_sprints = retriever.search(query, 5, dev, mode, Filters(source_types=("SPRINT",)))
    assert len(only_sprints) == 5 and {h.source_type for h in only_sprints} == {"SPRINT"}


def test_semantic_search_finds_a_task_by_its_title(indexed_system) -> None:  # type: ignore[no-untyped-def]
    developer = _busiest_developer(indexed_system)
    first = _rows(
        indexed_system, "SELECT TASK_ID, TITLE FROM TASK WHERE ASSIGNEE_ID = :d ORDER BY TASK_ID", d=developer
    )[0]
    task_id, title = int(first[0]), str(first[1])
    hits = indexed_system.retriever().search(title, 3, Caller(developer, "developer"), "semantic")
    assert ("TASK", str(task_id)) in {(h.source_type, h.source_id) for h in hits}
    other = 9 if developer != 9 else 10  # another developer (ids 9-40): a task has one assignee
    hidden = indexed_system.retriever().search(title, 100, Caller(other, "developer"), "semantic", exact=True)
    assert ("TASK", str(task_id)) not in {(h.source_type, h.source_id) for h in hidden}


# -- keyword ranking: the same BM25 on every engine ----------------------------------------------


def _keyword_form(system, form: str):  # type: ignore[no-untyped-def]
    """The system answering keyword search in ``form``: as configured, or BM25 in SQL.

    ``sql``: the statement with the statistics the engine caches (the
    embedded engine; Oracle has no cache and scans them). ``sql_scanned``:
    the statement exactly as Oracle sends it, N and the average length
    computed in it.
    """
    from oracle_rag.system import RagSystem

    if form == "configured":
        return system
    rag = RagSystem(
        system.settings.with_overrides(embedded_term_index=False), engine=None, sources=list(system.sources)
    )
    if hasattr(system.engine, "set_runtime"):
        rag.engine.set_runtime(system.engine.runtime())
    if form == "sql_scanned" and hasattr(rag.engine, "keyword_stats_cached"):
        rag.engine.keyword_stats_cached = False
    return rag


@pytest.mark.parametrize("form", ["configured", "sql", "sql_scanned"])
@pytest.mark.parametrize(
    "query", ["sprint goal for the project", "login timeout mobile", "invoice PDF export"]
)
def test_keyword_scores_are_bm25_over_what_the_caller_sees(indexed_system, query: str, form: str) -> None:  # type: ignore[no-untyped-def]
    """The engine's keyword scores equal BM25 computed here from the visible records' texts, in every form."""
    from bm25_reference import scores

    developer = _busiest_developer(indexed_system)
    visible: dict[str, str] = {}
    with indexed_system.engine.connect() as conn:
        for source in indexed_system.sources:
            for doc in source.load_many(conn, source.all_ids(conn)).values():
                if doc.owner_id == developer or (doc.owner_id is None and doc.source_type != "TASK"):
                    visible[f"{doc.source_type}#{doc.source_id}"] = doc.content
    expected = scores(visible, query)
    rag = _keyword_form(indexed_system, form)
    try:
        hits = rag.retriever().search(query, 20, Caller(developer, "developer"), "keyword")
        configured = indexed_system.retriever().search(query, 20, Caller(developer, "developer"), "keyword")
    finally:
        if rag is not indexed_system:
            rag.close()
    assert [(h.source_type, h.source_id) for h in hits] == [(h.source_type, h.source_id) for h in configured]
    assert len(hits) == min(20, len(expected))
    got = [(f"{h.source_type}#{h.source_id}", h.score) for h in hits]
    for key, value in got:
        assert value == pytest.approx(expected[key], rel=1e-9), key
    assert [v for _, v in got] == sorted((v for _, v in got), reverse=True)
    cut = got[-1][1]
    assert {k for k, v in expected.items() if v > cut * (1 + 1e-9)} <= {k for k, _ in got}
