"""Behaviour only Oracle has: ONNX models in the database, the IVF index, BM25 postings in SQL,
SKIP LOCKED, read-only users.

All marked ``oracle`` (by conftest.py) and skipped with one line without a
database. Nothing here is faked: each test talks to the real server through
the product's own code, and asserts on what the database reports.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from oracle_helpers import OracleTarget, drop_model, load_model, new_system

from oracle_rag.cli import main
from oracle_rag.engines import Filters, Scope, engine_sql
from oracle_rag.engines.records import search_binds
from oracle_rag.engines.statements import stmt
from oracle_rag.errors import driver_error_code
from oracle_rag.indexing import provision
from oracle_rag.indexing.worker import BatchResult


def _scalar(system, sql: str, **binds):  # type: ignore[no-untyped-def]
    with system.engine.connect() as conn:
        return conn.execute(sa.text(sql), binds).scalar_one()


def _index(system) -> None:  # type: ignore[no-untyped-def]
    system.backfill()
    result = system.worker().drain()
    assert result.failed_rows == 0, result.errors


# -- the embedding model ---------------------------------------------------------------------


def test_session_model_is_loaded_and_embeds(oracle_target: OracleTarget, tmp_path: Path) -> None:
    # the output of `oracle-rag model load` (the session ran the CLI, local/README.md step 6)
    assert re.search(
        rf"^(loaded {oracle_target.model_name} \(|{oracle_target.model_name} already loaded)",
        oracle_target.model_outcome,
        re.MULTILINE,
    ), oracle_target.model_outcome
    system = new_system(oracle_target, tmp_path)
    with system.engine.connect() as conn:
        status = system.engine.model_status(conn)
    system.close()
    assert status["present"] and status["mining_function"] == "EMBEDDING"
    assert status["dimensions"] == 384 and abs(status["test_norm"] - 1.0) < 1e-3


def test_model_load_is_idempotent_and_replace_reloads(
    oracle_target: OracleTarget, model_path: Path, tmp_path: Path
) -> None:
    name = "RAG_TEST_IDEMPOTENT"
    system = new_system(oracle_target, tmp_path, embedding_model=name)
    drop_model(system.engine, name)
    try:
        first = provision.load_model_file(system.engine, model_path, name=name)
        assert re.fullmatch(rf"loaded {name} \(\d+\.\d MB\)", first), first
        assert provision.load_model_file(system.engine, model_path, name=name) == (
            f"{name} already loaded; skipped (use --replace)"
        )
        assert provision.load_model_file(system.engine, model_path, name=name, replace=True).startswith(
            f"replaced {name} ("
        )
        assert _scalar(system, "SELECT COUNT(*) FROM USER_MINING_MODELS WHERE MODEL_NAME = :n", n=name) == 1
        # the CLI goes through the same code
        env = {
            "ORACLE_RAG_DATABASE_URL": oracle_target.url,
            "ORACLE_RAG_DB_PASSWORD_ENV": oracle_target.password_env,
            "ORACLE_RAG_DATA_DIR": str(tmp_path / "cli"),
        }
        res = CliRunner().invoke(
            main, ["model", "load", "--file", str(model_path), "--name", name.lower()], env=env
        )
        assert res.exit_code == 0 and f"{name} already loaded; skipped" in res.output, res.output
        # the in-database model and the in-process runtime compute the same vectors
        from oracle_rag.embedding import EmbeddingRuntime

        runtime = EmbeddingRuntime(model_path)
        with system.engine.connect() as conn:
            for text in (
                "Fix login timeout on the mobile app",
                "Corregir la sincronización sin conexión",
                "[TASK #42] Status: BLOCKED | Priority: HIGH",
            ):
                in_db = np.asarray(system.engine.embed(conn, text), dtype=np.float64)
                local = np.asarray(runtime.embed(text), dtype=np.float64)
                assert float(in_db @ local / (np.linalg.norm(in_db) * np.linalg.norm(local))) > 0.9999
    finally:
        drop_model(system.engine, name)
        system.close()


def test_concurrent_loads_load_once(oracle_target: OracleTarget, model_path: Path, tmp_path: Path) -> None:
    """Two deploys at once: one loads, the other finds the model (before or after its own try)."""
    name = "RAG_TEST_CONCURRENT"
    system = new_system(oracle_target, tmp_path)
    drop_model(system.engine, name)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def deploy() -> None:
        try:
            outcomes.append(load_model(oracle_target, model_path, name))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=deploy) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert sorted(o.split(" ")[0] for o in outcomes) == [name, "loaded"], outcomes
        assert _scalar(system, "SELECT COUNT(*) FROM USER_MINING_MODELS WHERE MODEL_NAME = :n", n=name) == 1
    finally:
        drop_model(system.engine, name)
        system.close()


def test_bootstrap_is_a_noop_on_a_provisioned_database(oracle_target: OracleTarget, tmp_path: Path) -> None:
    system = new_system(oracle_target, tmp_path)
    try:
        provision.bootstrap(system.engine, system.settings, None)
        lines = provision.bootstrap(system.engine, system.settings, None)
        assert lines[0].startswith("migrations (rag): applied none, resumed none, already applied [1, 2")
        assert lines[1] == (
            f"model: {oracle_target.model_name} present; MINILM_ONNX_PAR_URL not set, nothing to load"
        )
    finally:
        system.close()


def test_bootstrap_loads_from_a_par_url_once(oracle_target: OracleTarget, tmp_path: Path) -> None:
    """Needs ORACLE_RAG_TEST_PAR_URL: an Object Storage PAR of the ONNX file the database can reach."""
    url = os.environ.get("ORACLE_RAG_TEST_PAR_URL")
    if not url:
        pytest.skip("ORACLE_RAG_TEST_PAR_URL is not set (LOAD_ONNX_MODEL_CLOUD needs a reachable PAR URL)")
    name = "RAG_TEST_CLOUD"
    system = new_system(oracle_target, tmp_path, embedding_model=name)
    drop_model(system.engine, name)
    try:
        first = provision.bootstrap(system.engine, system.settings, url)
        assert first[1] == f"model: loaded {name} (from {provision.par_url_host(url)})"
        second = provision.bootstrap(system.engine, system.settings, url)
        assert second[1] == f"model: {name} already loaded; skipped (use --replace)"
        assert all(url not in line for line in first + second)
    finally:
        drop_model(system.engine, name)
        system.close()


# -- the vector index ------------------------------------------------------------------------


_INDEX_SHAPES = re.compile(r"VECTOR INDEX|VW_IVCN|IVF_FLAT_CENTROID|RAG_CHUNK_VEC_IX", re.IGNORECASE)


@pytest.mark.parametrize(("see_all", "caller"), [(1, 3), (0, 17)], ids=["manager", "developer-scope"])
def test_ivf_index_exists_and_fetch_approx_uses_it(oracle_system, see_all: int, caller: int) -> None:  # type: ignore[no-untyped-def]
    _index(oracle_system)
    with oracle_system.engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT INDEX_TYPE, INDEX_SUBTYPE, STATUS FROM USER_INDEXES "
                "WHERE INDEX_NAME = 'RAG_CHUNK_VEC_IX'"
            )
        ).one()
        assert row[0] == "VECTOR" and row[2] == "VALID", tuple(row)
        assert "HNSW" not in str(row[1] or ""), "the default index is IVF (neighbor partitions)"
        # EXPLAIN PLAN needs its binds bound (values are not peeked); the same statement the engine sends.
        sql = "EXPLAIN PLAN FOR " + oracle_system.engine.text(engine_sql.SEMANTIC_SEARCH)
        binds = search_binds(Scope(caller, bool(see_all)), Filters(), query="login timeout", k=8)
        conn.execute(stmt(sql, ("f_types",)), binds)
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                sa.text("SELECT PLAN_TABLE_OUTPUT FROM TABLE(DBMS_XPLAN.DISPLAY(NULL, NULL, 'TYPICAL'))")
            )
        )
        conn.rollback()
    assert _INDEX_SHAPES.search(plan), f"FETCH APPROX did not use the vector index:\n{plan}"


# -- keyword search (BM25 postings written with the record) ----------------------------------


def _write(engine, source_type: str, source_id: str, text: str, **kw) -> None:  # type: ignore[no-untyped-def]
    """Write one record as the indexer does: chunks, embeddings and its BM25 postings (record_writes)."""
    from oracle_rag.indexing.record_writes import record_write, write_records
    from oracle_rag.text.chunking import ChunkPlan

    with engine.begin() as conn:
        write_records(engine, conn, [record_write(ChunkPlan(), source_type, source_id, text, **kw)])


def test_keyword_search_sees_a_record_once_committed(oracle_system) -> None:  # type: ignore[no-untyped-def]
    from oracle_rag.indexing.record_writes import record_write, write_records
    from oracle_rag.text.chunking import ChunkPlan

    engine = oracle_system.engine
    manager = Scope(3, True)

    def found(word: str) -> list[tuple[str, str]]:
        with engine.connect() as conn:
            return [
                (h.source_type, h.source_id) for h in engine.keyword_search(conn, word, 5, manager, Filters())
            ]

    text = "[PROJECT #9001] Zyxwvortex migration plan"
    with engine.begin() as conn:
        write_records(engine, conn, [record_write(ChunkPlan(), "PROJECT", "9001", text)])
        assert found("zyxwvortex") == []  # not committed: invisible to other sessions
    assert found("zyxwvortex") == [("PROJECT", "9001")]  # postings in RAG_CHUNK_TERM, same transaction
    # each posting carries its record's length, scope and filter columns (V13), equal to chunk 0's
    differs = " OR ".join(f"DECODE(t.{col}, c.{col}, 0, 1) = 1" for col in engine_sql.POSTING_COLUMNS)
    assert (
        _scalar(
            oracle_system,
            "SELECT COUNT(*) FROM RAG_CHUNK_TERM t JOIN RAG_CHUNK c ON c.CHUNK_ID = t.CHUNK_ID "
            f"WHERE c.SOURCE_ID = '9001' AND (c.CHUNK_NO <> 0 OR {differs})",
        )
        == 0
    )
    assert (
        _scalar(
            oracle_system,
            "SELECT COUNT(*) FROM RAG_CHUNK_TERM t JOIN RAG_CHUNK c "
            "ON c.CHUNK_ID = t.CHUNK_ID WHERE c.SOURCE_ID = '9001'",
        )
        > 0
    )
    _write(engine, "PROJECT", "9001", "[PROJECT #9001] Quibblefrost migration plan")
    assert found("quibblefrost") == [("PROJECT", "9001")] and found("zyxwvortex") == []
    with engine.begin() as conn:
        engine.delete_chunks(conn, "PROJECT", ["9001"])
    assert found("quibblefrost") == []
    assert (
        _scalar(
            oracle_system,
            "SELECT COUNT(*) FROM RAG_CHUNK_TERM t JOIN RAG_CHUNK c "
            "ON c.CHUNK_ID = t.CHUNK_ID WHERE c.SOURCE_ID = '9001'",
        )
        == 0
    )  # ON DELETE CASCADE


# -- the queue under concurrency ----------------------------------------------------------------


def test_skip_locked_gives_concurrent_workers_disjoint_full_batches(oracle_system) -> None:  # type: ignore[no-untyped-def]
    engine = oracle_system.engine
    with engine.begin() as conn:
        engine.enqueue_many(conn, [("TASK", str(i), "UPSERT") for i in range(1, 11)])
    with engine.begin_exclusive() as a:
        first = engine.pick(a, 3, 5)
        with engine.begin_exclusive() as b:
            second = engine.pick(b, 3, 5)
            with engine.begin_exclusive() as c:
                rest = engine.pick(c, 100, 5)
    ids = [{r.dirty_id for r in rows} for rows in (first, second, rest)]
    # full batches while unlocked rows wait, no row twice, and only fetched rows were locked
    assert [len(x) for x in ids] == [3, 3, 4]
    assert len(ids[0] | ids[1] | ids[2]) == 10
    assert [r.source_id for r in first] == ["1", "2", "3"]  # queue order: ENQUEUED_AT, DIRTY_ID
    with engine.begin_exclusive() as d:  # all locks released at commit
        assert len(engine.pick(d, 100, 5)) == 10


def test_two_workers_drain_the_queue_together(
    oracle_system, oracle_target: OracleTarget, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    total = oracle_system.backfill().total
    results: list[BatchResult] = []
    errors: list[BaseException] = []
    systems = [new_system(oracle_target, tmp_path / f"w{i}", batch_size=8) for i in range(2)]

    def work(system) -> None:  # type: ignore[no-untyped-def]
        try:
            results.append(system.worker().drain())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in systems]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in systems:
        s.close()
    assert not errors, errors
    assert sum(r.picked for r in results) == total, "a row was picked twice or left behind"
    assert sum(r.embedded for r in results) == total and not any(r.failed_rows for r in results)
    assert _scalar(oracle_system, "SELECT COUNT(*) FROM RAG_DIRTY") == 0
    assert _scalar(oracle_system, "SELECT COUNT(*) FROM RAG_CHUNK") == total


# -- the read-only user -----------------------------------------------------------------------


def test_read_only_user_cannot_write(oracle_system, oracle_target: OracleTarget) -> None:  # type: ignore[no-untyped-def]
    if not oracle_target.ro_url or not oracle_target.ro_password_env:
        pytest.skip("no read-only user: set ORACLE_RAG_TEST_RO_URL and ORACLE_RAG_TEST_RO_PASSWORD")
    app = oracle_target.user
    ro_user = re.match(r"^[a-z+]+://([^@/:]+)@", oracle_target.ro_url).group(1).upper()  # type: ignore[union-attr]
    if oracle_target.created_ro_user:
        with (
            oracle_system.engine.begin() as conn
        ):  # even a granted write must be refused: the user is READ ONLY
            conn.exec_driver_sql(f"GRANT READ ON RAG_CHUNK TO {ro_user}")
            conn.exec_driver_sql(f"GRANT INSERT ON RAG_DIRTY TO {ro_user}")
    ro = sa.create_engine(
        oracle_target.ro_url, connect_args={"password": os.environ[oracle_target.ro_password_env]}
    )
    try:
        with ro.connect() as conn:
            if oracle_target.created_ro_user:
                assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {app}.RAG_CHUNK")).scalar_one() == 0
            for sql in (
                f"INSERT INTO {app}.RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION) VALUES ('TASK', '1', 'UPSERT')",
                f"DELETE FROM {app}.RAG_CHUNK",
                "CREATE TABLE RAG_RO_PROBE (A NUMBER)",
            ):
                with pytest.raises(sa.exc.DatabaseError) as err:
                    conn.execute(sa.text(sql))
                conn.rollback()
                code = driver_error_code(err.value)
                allowed = {"ORA-28194", "ORA-01031"} | (
                    set() if oracle_target.created_ro_user else {"ORA-00942"}
                )
                assert code in allowed, (sql, code)
            if oracle_target.created_ro_user:
                with pytest.raises(sa.exc.DatabaseError) as err:
                    conn.execute(
                        sa.text(
                            f"INSERT INTO {app}.RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION) "
                            "VALUES ('TASK', '1', 'UPSERT')"
                        )
                    )
                assert driver_error_code(err.value) == "ORA-28194", "granted INSERT must fail: READ ONLY user"
    finally:
        ro.dispose()
    assert _scalar(oracle_system, "SELECT COUNT(*) FROM RAG_DIRTY") == 0


# -- chunks per record and facets (migration V5) ------------------------------------------------


def test_record_chunks_and_native_json_facets_round_trip(oracle_system) -> None:  # type: ignore[no-untyped-def]
    """Three chunks of one record share its facets (native JSON); search returns the record once."""
    from oracle_rag.engines import facets_json
    from oracle_rag.indexing.record_writes import record_write, write_records
    from oracle_rag.text.chunking import ChunkPlan

    engine = oracle_system.engine
    manager = Scope(3, True)
    facets = facets_json({"status": "open", "points": 3, "urgent": True, "due": None})
    text = "[PROJECT #9002] " + " ".join(f"quillwhistle window {n} of the long record" for n in range(40))
    record = record_write(ChunkPlan(64, 8), "PROJECT", "9002", text, facets=facets)
    assert len(record.chunks) >= 3
    with engine.begin() as conn:
        write_records(engine, conn, [record])
        state = engine.read_chunk_state(conn, "PROJECT", ["9002"])
    assert state["9002"].facets == facets  # JSON read back as the same canonical text
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT CHUNK_NO, JSON_SERIALIZE(FACETS), TERM_COUNT FROM RAG_CHUNK "
                "WHERE SOURCE_TYPE = 'PROJECT' AND SOURCE_ID = '9002' ORDER BY CHUNK_NO"
            )
        ).all()
        hits = engine.semantic_search(
            conn, "quillwhistle", 10, manager, Filters(source_types=("PROJECT",)), True
        )
    assert [r[0] for r in rows] == list(range(len(record.chunks)))
    assert all(json_equal(r[1], facets) for r in rows)
    assert rows[0][2] is not None and all(r[2] is None for r in rows[1:])  # the analysis is on chunk 0 only
    mine = [h for h in hits if h.source_id == "9002"]
    assert len(mine) == 1, "semantic search returns one hit per record (its best chunk)"
    assert mine[0].facets == {"status": "open", "points": 3, "urgent": True, "due": None}
    with engine.begin() as conn:
        assert engine.trim_chunks(conn, [("PROJECT", "9002", 1)]) == len(record.chunks) - 1
        assert engine.delete_chunks(conn, "PROJECT", ["9002"]) == 1


def json_equal(a: str, b: str) -> bool:
    import json

    return bool(json.loads(a) == json.loads(b))


def test_structured_answers_count_and_filter_through_json_value(oracle_system) -> None:  # type: ignore[no-untyped-def]
    """On Oracle: JSON_VALUE predicates (RETURNING NUMBER for ids) next to the scope predicate,
    COUNT/GROUP BY over native JSON facets, and the same numbers as SQL over the reference tables."""
    import datetime as dt

    from oracle_rag.answering.chat import Chat
    from oracle_rag.callers.access import load_caller

    _index(oracle_system)
    chat = Chat(oracle_system, None, today=lambda: dt.date(2026, 3, 11))
    with oracle_system.engine.connect() as conn:
        manager = load_caller(conn, 3)
        developer = load_caller(conn, 9)
    blocked = _scalar(oracle_system, "SELECT COUNT(*) FROM TASK WHERE STATUS = 'BLOCKED'")
    answer = chat.answer("how many tasks are blocked?", manager, store=False)
    assert answer.structured is not None and answer.structured["count"] == blocked
    mine = _scalar(oracle_system, "SELECT COUNT(*) FROM TASK WHERE ASSIGNEE_ID = 9 AND STATUS <> 'DONE'")
    listed = chat.answer("which of my tasks are not done?", developer, store=False)
    assert listed.structured is not None and listed.structured["total"] == mine
    per = chat.answer("how many tasks per project?", manager, store=False)
    rows = {
        r[0]: int(r[1])
        for r in oracle_system.engine.connect().execute(
            sa.text(
                "SELECT p.NAME, COUNT(*) FROM TASK t JOIN PROJECT p ON p.PROJECT_ID = t.PROJECT_ID GROUP BY p.NAME"
            )
        )
    }
    assert per.structured is not None
    assert {r["label"]: r["count"] for r in per.structured["groups"]["rows"]} == rows
    ranked = chat.answer("open tasks in Atlas Billing about invoices", manager, mode="hybrid", store=False)
    assert ranked.structured is not None and ranked.citations
