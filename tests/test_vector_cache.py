"""The embedded engine's in-process vector index (engines/sqlite/vector_cache.py).

Every comparison is against the SQL scan on the same file (a second
RagSystem with ``embedded_vector_cache=False``), which the retriever tests
check against visibility recomputed from the reference tables. Writes come
from another process (a real ``python`` subprocess running the product's
write path or plain SQL), because keeping in step across processes is the
point of the change log.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_helpers import link_model

from oracle_rag.callers.access import load_caller
from oracle_rag.callers.caller import Caller
from oracle_rag.config import load_settings
from oracle_rag.engines import ChunkWrite, Filters, Scope, content_hash
from oracle_rag.engines.sqlite.vector_cache import NULL
from oracle_rag.sources.access import record_access
from oracle_rag.sources.reference import TaskSource
from oracle_rag.system import RagSystem

REPO = Path(__file__).resolve().parent.parent
VOCABULARY = [
    "invoice",
    "payment",
    "login",
    "timeout",
    "mobile",
    "Kubernetes",
    "facturas",
    "sprint",
    "PDF",
    "retry",
    "dashboard",
    "GDPR",
    "SSO",
    "blocked",
    "release",
    "Atlas",
    "Nova",
    "audit",
    "exchange rates",
    "Sprint 12",
    "goal",
    "project",
    "export",
    "search ranking",
]
LOG_ROWS = sa.text("SELECT COUNT(*) FROM RAG_CHUNK_LOG")
LOG_SEQ = sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'RAG_CHUNK_LOG'")


def _copy_demo(demo_template: Path, model_path: Path, d: Path) -> Path:
    link_model(model_path, d)
    shutil.copyfile(demo_template, d / "oracle-rag.db")
    return d


def _pair(d: Path) -> tuple[RagSystem, RagSystem]:
    """The product path (cache) and the SQL scan, on the same file."""
    return (
        RagSystem(load_settings(env={}, data_dir=str(d))),
        RagSystem(load_settings(env={}, data_dir=str(d), embedded_vector_cache=False)),
    )


@pytest.fixture(scope="module")
def systems(tmp_path_factory, demo_template: Path, model_path: Path):
    """Read-only: one copy of the demo data, searched through both paths."""
    d = _copy_demo(demo_template, model_path, tmp_path_factory.mktemp("vcache-ro"))
    cached, scan = _pair(d)
    with cached.engine.connect() as conn:
        callers = {i: load_caller(conn, i) for i in range(1, 41)}
    yield cached, scan, callers
    cached.close()
    scan.close()


@pytest.fixture
def fresh(tmp_path: Path, demo_template: Path, model_path: Path):
    """A private copy for tests that write."""
    d = _copy_demo(demo_template, model_path, tmp_path / "vcache")
    cached, scan = _pair(d)
    yield d, cached, scan
    cached.close()
    scan.close()


def search(rag: RagSystem, query: str, k: int, caller: Caller, filters: Filters | None = None):
    return rag.retriever().search(query, k, caller, mode="semantic", filters=filters)


def assert_same(got, want) -> None:
    assert [h.chunk_id for h in got] == [h.chunk_id for h in want]
    assert np.allclose([h.distance for h in got], [h.distance for h in want], rtol=0, atol=1e-6)
    assert [(h.source_type, h.source_id, h.content, h.owner_id) for h in got] == [
        (h.source_type, h.source_id, h.content, h.owner_id) for h in want
    ]


def run_other_process(data_dir: Path, code: str) -> None:
    """Run ``code`` in a fresh Python process with ``rag`` open on ``data_dir``."""
    script = (
        textwrap.dedent("""
        import sqlalchemy as sa
        from oracle_rag.config import load_settings
        from oracle_rag.system import RagSystem
        rag = RagSystem(load_settings(env={}, data_dir=DATA_DIR))
    """)
        + textwrap.dedent(code)
        + "\nrag.close()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORACLE_RAG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", f"DATA_DIR = {str(data_dir)!r}\n" + script],
        env=env,
        cwd=str(data_dir),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


# -- same answers as the scan ------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    emp=st.integers(1, 40),
    k=st.integers(1, 100),
    words=st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4),
    project=st.one_of(st.none(), st.integers(1, 7)),
    sprint=st.one_of(st.none(), st.integers(1, 50)),
    types=st.lists(st.sampled_from(["TASK", "SPRINT", "PROJECT", "OTHER"]), max_size=2, unique=True),
)
def test_identical_to_the_sql_scan(systems, emp, k, words, project, sprint, types):
    cached, scan, callers = systems
    filters = Filters(project_id=project, sprint_id=sprint, source_types=tuple(types))
    query = " ".join(words)
    fallbacks = cached.engine.cache_fallbacks
    got = search(cached, query, k, callers[emp], filters)
    want = search(scan, query, k, callers[emp], filters)
    assert_same(got, want)
    cache = cached.engine.vector_cache()
    assert cache.loaded and cache.full_loads == 1 and len(cache) > 300
    assert cached.engine.cache_fallbacks == fallbacks  # the cache answered, not the fallback scan


def test_scoped_search_still_returns_k_rows(systems):
    """Scope as masks before the top-k: a developer gets k rows when k are visible."""
    cached, scan, callers = systems
    dev = callers[12]
    assert dev.role == "developer"
    for k in (1, 8, 40):
        got = search(cached, "invoice payment", k, dev)
        assert len(got) == min(k, len(search(scan, "invoice payment", 100, dev)))
        assert all(h.owner_id in (None, 12) for h in got)
        assert all(h.owner_id == 12 or h.source_type != "TASK" for h in got)


def test_candidates_keep_near_ties(systems):
    """Identical distances at the k-th place: every tied row is a candidate, so
    SQL's (distance, CHUNK_ID) order decides exactly as in the scan."""
    cached, _, callers = systems
    cache = cached.engine.vector_cache()
    with cached.engine.connect() as conn:
        vec = np.array(cached.engine.embed(conn, "invoice"), dtype=np.float32)
    found = cache.candidates(vec, 3, Scope(3, True), Filters())
    assert found is not None and len(found.ids) >= 3
    kth = sorted(found.distances.values())[2]
    assert all(d <= kth + 2e-4 for d in found.distances.values())


# -- keeping in step with other processes ----------------------------------------------
def test_writes_from_another_process_are_seen(fresh):
    d, cached, scan = fresh
    dev = Caller(12, "developer", name="dev")
    with cached.engine.connect() as conn:
        owned = [
            int(r[0])
            for r in conn.execute(sa.text("SELECT TASK_ID FROM TASK WHERE ASSIGNEE_ID = 12 ORDER BY TASK_ID"))
        ]
        moved_text = conn.execute(
            sa.text("SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = :i"),
            {"i": str(owned[0])},
        ).scalar_one()
        deleted_text = conn.execute(
            sa.text("SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = :i"),
            {"i": str(owned[1])},
        ).scalar_one()
    assert len(owned) >= 2
    before = search(cached, moved_text, 8, dev)
    assert before[0].source_id == str(owned[0])  # its own text finds it first
    cache = cached.engine.vector_cache()
    assert cache.full_loads == 1
    position = cache.position

    # Another process: reassign the first task away from developer 12, delete
    # the second, add a new task for developer 12; all through queue + worker.
    run_other_process(
        d,
        f"""
        from oracle_rag.indexing.queue import enqueue
        with rag.engine.begin() as conn:
            conn.execute(sa.text("UPDATE TASK SET ASSIGNEE_ID = 13 WHERE TASK_ID = {owned[0]}"))
            enqueue(conn, "TASK", {owned[0]}, "UPSERT")
            conn.execute(sa.text("DELETE FROM TASK_COMMENT WHERE TASK_ID = {owned[1]}"))
            conn.execute(sa.text("DELETE FROM TASK WHERE TASK_ID = {owned[1]}"))
            enqueue(conn, "TASK", {owned[1]}, "DELETE")
            conn.execute(sa.text(
                "INSERT INTO TASK (TASK_ID, TITLE, DESCRIPTION, STATUS, PRIORITY, SPRINT_ID, PROJECT_ID, "
                "ASSIGNEE_ID, STORY_POINTS, ESTIMATED_HOURS, DUE_DATE) "
                "SELECT 90001, 'Zebra stripes render purple in the quarterly xylophone report', "
                "'xylophone zebra purple', STATUS, PRIORITY, SPRINT_ID, PROJECT_ID, 12, STORY_POINTS, "
                "ESTIMATED_HOURS, DUE_DATE FROM TASK WHERE TASK_ID = {owned[2] if len(owned) > 2 else owned[0]}"))
            enqueue(conn, "TASK", 90001, "UPSERT")
        result = rag.worker().drain()
        assert result.failed_rows == 0 and result.embedded >= 2 and result.deleted == 1, result
    """,
    )

    for text in (moved_text, deleted_text, "zebra xylophone purple report"):
        got = search(cached, text, 8, dev)
        assert_same(got, search(scan, text, 8, dev))
        ids = {h.source_id for h in got if h.source_type == "TASK"}
        assert str(owned[0]) not in ids  # moved out of developer 12's scope
        assert str(owned[1]) not in ids  # deleted
        assert all(h.owner_id == 12 or (h.owner_id is None and h.source_type != "TASK") for h in got)
    assert search(cached, "zebra xylophone purple report", 1, dev)[0].source_id == "90001"
    # the manager sees the moved task, now owned by 13, with its new owner
    top = search(cached, moved_text, 1, Caller(3, "manager", name="m"))[0]
    assert (top.source_id, top.owner_id) == (str(owned[0]), 13)
    assert cache.full_loads == 1 and cache.position > position and cache.delta_rows >= 3
    assert cached.engine.cache_fallbacks == 0


def test_pruned_log_gap_forces_a_full_reload(fresh):
    d, cached, scan = fresh
    dev = Caller(12, "developer", name="dev")
    search(cached, "login timeout", 8, dev)
    cache = cached.engine.vector_cache()
    assert cache.full_loads == 1
    # Another process moves every task of developer 12 to 14 and prunes the
    # log past our position (keep 1 row), as a long-lagging reader would find it.
    run_other_process(
        d,
        """
        from oracle_rag.engines import engine_sql
        with rag.engine.begin() as conn:
            conn.execute(sa.text("UPDATE RAG_CHUNK SET OWNER_ID = 14, ACCESS_OWNER = 14 WHERE OWNER_ID = 12"))
            conn.execute(rag.engine.statement(engine_sql.PRUNE_CHUNK_LOG), {"keep": 1})
            assert conn.execute(sa.text("SELECT COUNT(*) FROM RAG_CHUNK_LOG")).scalar() == 1
    """,
    )
    got = search(cached, "login timeout", 8, dev)
    assert cache.full_loads == 2
    assert all(h.source_type != "TASK" for h in got)  # developer 12 owns nothing now
    assert_same(got, search(scan, "login timeout", 8, dev))
    # An emptied log: sqlite_sequence still says we are behind.
    run_other_process(
        d,
        """
        with rag.engine.begin() as conn:
            conn.execute(sa.text("UPDATE RAG_CHUNK SET OWNER_ID = 12, ACCESS_OWNER = 12 WHERE OWNER_ID = 14"))
            conn.execute(sa.text("DELETE FROM RAG_CHUNK_LOG"))
    """,
    )
    got = search(cached, "login timeout", 8, dev)
    assert cache.full_loads == 3
    assert any(h.owner_id == 12 for h in got)
    assert_same(got, search(scan, "login timeout", 8, dev))


def test_engine_writes_prune_the_log(fresh):
    d, cached, _ = fresh
    engine = cached.engine
    engine.chunk_log_keep = 5
    writes = [ChunkWrite("NOTE", str(i), f"note {i}", content_hash(f"note {i}")) for i in range(12)]
    with engine.begin() as conn:
        engine.upsert_chunks(conn, writes)
        assert conn.execute(LOG_ROWS).scalar() == 5
    with engine.begin() as conn:
        engine.delete_chunks(conn, "NOTE", ["0", "1"])
        rows = [int(r[0]) for r in conn.execute(sa.text("SELECT SEQ FROM RAG_CHUNK_LOG ORDER BY SEQ"))]
    assert len(rows) == 5 and rows == list(range(rows[0], rows[0] + 5))  # a contiguous suffix


def test_rolled_back_write_leaves_no_log_row(fresh):
    d, cached, scan = fresh
    engine = cached.engine
    manager = Caller(3, "manager", name="m")
    search(cached, "quokka", 4, manager)
    with engine.connect() as conn:
        before = (conn.execute(LOG_ROWS).scalar(), conn.execute(LOG_SEQ).scalar())
    with pytest.raises(RuntimeError), engine.begin() as conn:
        engine.upsert_chunks(conn, [ChunkWrite("NOTE", "q1", "quokka quokka", content_hash("quokka quokka"))])
        assert conn.execute(LOG_ROWS).scalar() == before[0] + 1  # written with the chunk...
        raise RuntimeError("host application fails after the write")
    with engine.connect() as conn:
        assert (
            conn.execute(LOG_ROWS).scalar(),
            conn.execute(LOG_SEQ).scalar(),
        ) == before  # ...and gone with it
    got = search(cached, "quokka quokka", 4, manager)
    assert all(h.source_type != "NOTE" for h in got)
    assert_same(got, search(scan, "quokka quokka", 4, manager))
    # the committed write is one log row and is found
    with engine.begin() as conn:
        engine.upsert_chunks(conn, [ChunkWrite("NOTE", "q1", "quokka quokka", content_hash("quokka quokka"))])
    with engine.connect() as conn:
        assert conn.execute(LOG_SEQ).scalar() == before[1] + 1
    assert search(cached, "quokka quokka", 1, manager)[0].source_id == "q1"


# -- scope stays in SQL ---------------------------------------------------------------
def test_corrupt_owner_mask_never_leaks_a_foreign_task(fresh):
    d, cached, scan = fresh
    dev = Caller(12, "developer", name="dev")
    with cached.engine.connect() as conn:
        foreign = conn.execute(
            sa.text(
                "SELECT CHUNK_ID, CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND OWNER_ID = 20 "
                "ORDER BY CHUNK_ID LIMIT 3"
            )
        ).fetchall()
    want = search(scan, foreign[0][1], 8, dev)
    assert len(want) == 8
    search(cached, "warm up", 1, dev)
    cache = cached.engine.vector_cache()
    for chunk_id, _ in foreign:  # the cache now wrongly believes developer 12 owns them
        cache._access.owner[cache._slot[int(chunk_id)]] = 12
    got = search(cached, foreign[0][1], 8, dev)
    assert cached.engine.cache_fallbacks == 1  # SQL dropped the foreign candidates...
    assert_same(got, want)  # ...and the scan gave the k correct rows
    assert {int(c) for c, _ in foreign}.isdisjoint(h.chunk_id for h in got)
    # the rejected candidate was re-read: the next search is answered by the cache
    assert cache._access.owner[cache._slot[int(foreign[0][0])]] == 20
    assert_same(search(cached, foreign[0][1], 8, dev), want)
    assert cached.engine.cache_fallbacks == 1
    # the other corrupted rows: found as candidates by their own text, dropped by SQL
    for chunk_id, text in foreign[1:]:
        got = search(cached, text, 8, dev)
        assert int(chunk_id) not in {h.chunk_id for h in got}
        assert_same(got, search(scan, text, 8, dev))
    # each was re-read by the fallback that rejected it (or an earlier one)
    assert all(cache._access.owner[cache._slot[int(c)]] == 20 for c, _ in foreign)
    assert cached.engine.cache_fallbacks <= 3


def test_null_owner_task_is_for_managers_only(fresh):
    d, cached, scan = fresh
    with cached.engine.begin() as conn:
        # written as the TASK source writes an unassigned task: its policy (owner, missing: hidden)
        access = record_access(TaskSource.access, None)
        cached.engine.upsert_chunks(
            conn,
            [
                ChunkWrite(
                    "TASK",
                    "77777",
                    "unassigned wombat migration",
                    content_hash("unassigned wombat migration"),
                    access=access,
                )
            ],
        )
    dev, manager = Caller(12, "developer", name="dev"), Caller(3, "manager", name="m")
    assert "77777" not in {h.source_id for h in search(cached, "unassigned wombat migration", 8, dev)}
    assert search(cached, "unassigned wombat migration", 1, manager)[0].source_id == "77777"
    cache = cached.engine.vector_cache()
    with cached.engine.connect() as conn:
        chunk_id = conn.execute(
            sa.text("SELECT CHUNK_ID FROM RAG_CHUNK WHERE SOURCE_ID = '77777'")
        ).scalar_one()
    assert cache._owner[cache._slot[chunk_id]] == NULL and cache._access.owner[cache._slot[chunk_id]] == NULL


def test_database_without_the_log_falls_back_to_the_scan(fresh):
    d, cached, scan = fresh
    with cached.engine.begin() as conn:
        for name in ("RAG_CHUNK_LOG_AI", "RAG_CHUNK_LOG_AU", "RAG_CHUNK_LOG_AD"):
            conn.execute(sa.text(f"DROP TRIGGER {name}"))
        conn.execute(sa.text("DROP TABLE RAG_CHUNK_LOG"))
    dev = Caller(12, "developer", name="dev")
    got = search(cached, "payment retry", 8, dev)
    assert cached.engine.vector_cache().unusable and len(got) == 8
    assert_same(got, search(scan, "payment retry", 8, dev))


def test_concurrent_searches_share_one_cache(systems):
    """Threads searching at once through one engine get the scan's answers; one load."""
    from concurrent.futures import ThreadPoolExecutor

    cached, scan, callers = systems
    cases = [
        (" ".join(VOCABULARY[i : i + 2]), callers[1 + (i * 7) % 40], 1 + (i * 13) % 50) for i in range(16)
    ]
    want = [search(scan, q, k, c) for q, c, k in cases]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda case: search(cached, case[0], case[2], case[1]), cases * 2))
    for g, w in zip(got, want * 2, strict=True):
        assert_same(g, w)
    assert cached.engine.vector_cache().full_loads == 1
