"""What a line-by-line review against the Oracle documentation found, checked on a database.

Each test names the item it pins. All marked ``oracle`` (conftest.py) and skipped with one line
without a database; each talks to the real server through the product's own code.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import numpy as np
import oracledb
import pytest
import sqlalchemy as sa
from oracle_helpers import OracleTarget, cli, drop_model, load_model, new_system

from oracle_rag.callers.caller import Caller
from oracle_rag.engines import ChunkWrite, Filters, Scope, content_hash
from oracle_rag.engines.records import EMBED_TEXT_MAX_BYTES, embed_text
from oracle_rag.indexing import provision


def _scalar(system, sql: str, **binds):  # type: ignore[no-untyped-def]
    with system.engine.connect() as conn:
        return conn.execute(sa.text(sql), binds).scalar_one()


# -- 1. dropping a model that does not exist ---------------------------------------------------


def test_drop_model_of_a_missing_model_is_not_an_error(oracle_target: OracleTarget, tmp_path: Path) -> None:
    """force => TRUE alone raises ORA-40284 for a model that does not exist."""
    system = new_system(oracle_target, tmp_path)
    try:
        assert provision.drop_model(system.engine, "RAG_TEST_NEVER_LOADED") is False
        assert provision.drop_model(system.engine, "RAG_TEST_NEVER_LOADED") is False
    finally:
        system.close()


# -- 2. a 40 KB chunk through MERGE --------------------------------------------------------------


def test_a_40_kb_chunk_goes_through_merge_insert_and_update(oracle_system) -> None:  # type: ignore[no-untyped-def]
    engine = oracle_system.engine
    first = "[TASK #1] " + "Sincronización sin conexión. " * 1400  # ~42 KB in UTF-8, > 32767 bytes
    second = first + " Actualizado."
    assert len(first.encode("utf-8")) > 40_000
    for text in (first, second):  # WHEN NOT MATCHED, then WHEN MATCHED
        with engine.begin() as conn:
            engine.upsert_chunks(conn, [ChunkWrite("TASK", "1", text, content_hash(text), owner_id=5)])
        with engine.connect() as conn:
            stored = conn.execute(
                sa.text(
                    "SELECT CONTENT, CONTENT_HASH FROM RAG_CHUNK "
                    "WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = '1'"
                )
            ).one()
        assert isinstance(stored[0], str), "CLOB fetched as str by the connection's handler"
        assert stored[0] == text and stored[1] == content_hash(text)


def test_long_chat_message_and_sql_source_metadata_are_stored_whole(oracle_system) -> None:  # type: ignore[no-untyped-def]
    from oracle_rag.answering.chat.conversations import ConversationStore, new_conversation_id

    store = ConversationStore(oracle_system.engine)
    long_answer = "Respuesta detallada. " * 3000  # ~63 KB, into a CLOB through INSERT ... VALUES
    conv = new_conversation_id()
    store.append_turn(conv, 3, "¿Qué pasó?", long_answer, [], new=True)
    with oracle_system.engine.connect() as conn:
        assert [m.content for m in store.messages(conn, conv, 3)] == ["¿Qué pasó?", long_answer]


# -- 5. a selective scope still gets k rows ------------------------------------------------------


def test_k_visible_means_k_returned_for_a_selective_scope(oracle_system) -> None:  # type: ignore[no-untyped-def]
    oracle_system.backfill()
    assert oracle_system.worker().drain().failed_rows == 0
    engine = oracle_system.engine
    with engine.connect() as conn:
        owners = conn.execute(
            sa.text(
                "SELECT OWNER_ID, COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' "
                "AND OWNER_ID IS NOT NULL GROUP BY OWNER_ID ORDER BY 2, 1"
            )
        ).fetchall()
    owner, own_tasks = int(owners[0][0]), int(owners[0][1])  # the developer with the fewest tasks
    scope, tasks_only = Scope(owner, False), Filters(source_types=("TASK",))
    with engine.connect() as conn:
        for k in (own_tasks, own_tasks + 5):
            found = engine.semantic_search(conn, "login timeout on the mobile app", k, scope, tasks_only)
            assert len(found) == min(k, own_tasks), (k, own_tasks, len(found))
            assert {h.owner_id for h in found} == {owner}
            distances = [h.score for h in found]
            assert distances == sorted(distances)  # ORDER BY the DISTANCE alias (item 8)
            exact = engine.semantic_search(
                conn, "login timeout on the mobile app", k, scope, tasks_only, exact=True
            )
            assert [h.chunk_id for h in exact] == [h.chunk_id for h in found] or len(found) == len(exact)


# -- 9. a 4000-byte text embeds in the database as it does locally -----------------------------


def test_a_4000_byte_text_embeds_like_the_local_runtime(
    oracle_target: OracleTarget, model_path: Path, tmp_path: Path
) -> None:
    """Truncation is graph ops after the tokenizer: 4000 bytes (> 512 word pieces) must not overflow."""
    from oracle_rag.embedding import EmbeddingRuntime

    text = embed_text("palabra, " * 800 + "Zxq " * 400)
    assert len(text.encode("utf-8")) <= EMBED_TEXT_MAX_BYTES and len(text) > 3900
    system = new_system(oracle_target, tmp_path)
    try:
        with system.engine.connect() as conn:
            in_db = np.asarray(system.engine.embed(conn, text), dtype=np.float64)
        local = np.asarray(EmbeddingRuntime(model_path).embed(text), dtype=np.float64)
        assert in_db.shape == (384,)
        assert float(in_db @ local / (np.linalg.norm(in_db) * np.linalg.norm(local))) > 0.9999
    finally:
        system.close()


# -- 10. two deploys at once: the second waits on the row lock and finds the model ------------------


def test_concurrent_loads_serialise_on_the_named_lock(
    oracle_target: OracleTarget, model_path: Path, tmp_path: Path
) -> None:
    name = "RAG_TEST_LOCKED_LOAD"
    system = new_system(oracle_target, tmp_path)
    cli(oracle_target, ["migrate"])  # the lock row lives in RAG_MAINTENANCE (V7)
    drop_model(system.engine, name)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def deploy() -> None:
        try:
            outcomes.append(load_model(oracle_target, model_path, name))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=deploy) for _ in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        loaded = [o for o in outcomes if o.startswith(f"loaded {name} (")]
        skipped = [o for o in outcomes if o == f"{name} already loaded; skipped (use --replace)"]
        assert len(loaded) == 1 and len(skipped) == 2, outcomes  # never CONCURRENT: the lock serialised them
        assert _scalar(system, "SELECT COUNT(*) FROM USER_MINING_MODELS WHERE MODEL_NAME = :n", n=name) == 1
    finally:
        drop_model(system.engine, name)
        system.close()


# -- 11. ages and watermarks in UTC -------------------------------------------------------------


def test_queue_age_is_right_whatever_the_offsets(oracle_system) -> None:  # type: ignore[no-untyped-def]
    """A row enqueued an hour ago under another offset (a DST change) is an hour old, not 0 or 2."""
    engine = oracle_system.engine
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER SESSION SET TIME_ZONE = '-07:00'")
        conn.exec_driver_sql(
            "INSERT INTO RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION, ENQUEUED_AT) VALUES "
            "('TASK', '1', 'UPSERT', (SYSTIMESTAMP - INTERVAL '1' HOUR) AT TIME ZONE '+05:30')"
        )
    with engine.connect() as conn:
        stats = engine.queue_stats(conn, 5)
    assert stats.depth == 1 and stats.oldest_age_s is not None
    assert 3590 <= stats.oldest_age_s <= 3700, stats.oldest_age_s


def test_sql_source_watermark_compares_in_utc_with_fractions(oracle_system) -> None:  # type: ignore[no-untyped-def]
    from oracle_rag.sources.sql_query import SqlSource, Watermark

    engine = oracle_system.engine
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE RAG_T_WM (ID NUMBER PRIMARY KEY, BODY VARCHAR2(100), "
            "CHANGED TIMESTAMP(6) WITH TIME ZONE)"
        )
        conn.exec_driver_sql(
            "INSERT INTO RAG_T_WM VALUES (1, 'before', TIMESTAMP '2026-03-29 03:30:00.000001 +02:00')"
        )  # 01:30:00.000001 UTC
        conn.exec_driver_sql(
            "INSERT INTO RAG_T_WM VALUES (2, 'same instant', TIMESTAMP '2026-03-29 01:30:00.000002 +00:00')"
        )
        conn.exec_driver_sql(
            "INSERT INTO RAG_T_WM VALUES (3, 'after', TIMESTAMP '2026-03-28 21:30:00.000003 -04:00')"
        )  # 01:30:00.000003 UTC
    try:
        source = SqlSource(
            "wm_test",
            "SELECT ID, BODY, CHANGED FROM RAG_T_WM",
            None,
            id_column="ID",
            content_column="BODY",
            updated_at_column="CHANGED",
        )
        mark = Watermark.of(dt.datetime(2026, 3, 29, 3, 30, 0, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))))
        with engine.connect() as conn:
            conn.exec_driver_sql("ALTER SESSION SET TIME_ZONE = 'America/Los_Angeles'")
            got = source.read(conn, watermark=mark)
        assert sorted(got.documents) == ["2", "3"]
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE RAG_T_WM PURGE")


# -- 12. LOB and VECTOR handling belongs to our connections only ---------------------------------


def test_lobs_and_vectors_are_converted_on_our_connections_only(
    oracle_system, oracle_target: OracleTarget
) -> None:  # type: ignore[no-untyped-def]
    import os

    engine = oracle_system.engine
    text = "x" * 50_000
    with engine.begin() as conn:
        engine.upsert_chunks(conn, [ChunkWrite("PROJECT", "77", text, content_hash(text))])
    with engine.connect() as conn:
        content, vector = conn.execute(
            sa.text("SELECT CONTENT, EMBEDDING FROM RAG_CHUNK WHERE SOURCE_ID = '77'")
        ).one()
    assert content == text and isinstance(vector, list) and len(vector) == 384
    assert oracledb.defaults.fetch_lobs is True  # the process-wide default is untouched
    url = sa.engine.make_url(oracle_target.url)
    plain = oracledb.connect(
        user=oracle_target.user,
        password=os.environ[oracle_target.password_env],
        dsn=f"{url.host}:{url.port or 1521}/{url.query['service_name']}",
    )
    try:
        with plain.cursor() as cur:
            cur.execute("SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_ID = '77'")
            lob = cur.fetchone()[0]
            assert isinstance(lob, oracledb.LOB) and lob.read() == text  # a host's own connection: as it was
    finally:
        plain.close()


def test_chat_and_sql_sources_see_text_not_lobs(oracle_system) -> None:  # type: ignore[no-untyped-def]
    from oracle_rag.answering.chat.chunks import chunk_detail

    engine = oracle_system.engine
    with engine.begin() as conn:
        engine.upsert_chunks(conn, [ChunkWrite("PROJECT", "78", "[PROJECT #78] Apollo", content_hash("a"))])
    with engine.connect() as conn:
        detail = chunk_detail(conn, "oracle", Caller(employee_id=3, role="manager"), "PROJECT", "78")
    assert detail.content == "[PROJECT #78] Apollo"


# -- 6. a trigger that does not compile is dropped and reported, never "installed" ---------------


def test_a_trigger_that_does_not_compile_is_dropped_and_raised(oracle_system) -> None:  # type: ignore[no-untyped-def]
    from oracle_rag.errors import DatabaseError
    from oracle_rag.indexing import triggers

    engine = oracle_system.engine
    with engine.begin() as conn:  # the triggers insert into RAG_DIRTY: without it they cannot compile
        conn.exec_driver_sql("ALTER TABLE RAG_DIRTY RENAME TO RAG_DIRTY_AWAY")
    try:
        with pytest.raises(DatabaseError) as err:
            triggers.install(engine)
        assert "did not compile" in err.value.message and "ORA-04098" in err.value.message
        assert triggers.states(engine) == {}  # dropped: no INVALID trigger left to block writes
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE RAG_DIRTY_AWAY RENAME TO RAG_DIRTY")
    assert triggers.install(engine) == sorted(triggers.trigger_names(engine))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TRIGGER RAG_TASK_ENQUEUE DISABLE")
        assert "RAG_TASK_ENQUEUE" not in triggers.installed(engine)
        assert triggers.broken(engine) == {"RAG_TASK_ENQUEUE": ("VALID", "DISABLED")}
    finally:
        triggers.uninstall(engine)


# -- 7. accents: the analyser folds them on both sides (text/bm25.py) --------------------------------


@pytest.mark.parametrize("query", ["energia", "energía", "ENERGÍA", "sincronizacion"])
def test_accented_terms_match_either_way(oracle_system, query: str) -> None:  # type: ignore[no-untyped-def]
    """Written through record_writes, as the indexer writes: chunks plus the record's postings."""
    from oracle_rag.indexing.record_writes import record_write, write_records
    from oracle_rag.text.chunking import ChunkPlan

    engine = oracle_system.engine
    text = "[PROJECT #9002] Ahorro de energía y sincronización sin conexión"
    with engine.begin() as conn:
        write_records(engine, conn, [record_write(ChunkPlan(), "PROJECT", "9002", text)])
    with engine.connect() as conn:
        found = engine.keyword_search(conn, query, 5, Scope(3, True), Filters())
    assert [(h.source_type, h.source_id) for h in found] == [("PROJECT", "9002")], query


# -- 4 and 13. the vector index is rebuilt on data; accuracy measured ----------------------------


def test_bootstrap_rebuilds_the_vector_index_once_after_the_first_backfill(oracle_system) -> None:  # type: ignore[no-untyped-def]
    from oracle_rag.indexing import index_maintenance

    engine, settings = oracle_system.engine, oracle_system.settings
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM RAG_MAINTENANCE")
    lines = provision.bootstrap(engine, settings, None)
    assert lines[-1] == "vector index: no chunks yet; the first bootstrap after a backfill rebuilds it"
    oracle_system.backfill()
    assert oracle_system.worker().drain().failed_rows == 0
    first = provision.bootstrap(engine, settings, None)[-1]
    assert first.startswith("vector index: rebuilt RAG_CHUNK_VEC_IX on "), first
    assert provision.bootstrap(engine, settings, None)[-1].endswith("; not due")
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT STATUS FROM USER_INDEXES WHERE INDEX_NAME = 'RAG_CHUNK_VEC_IX'")
        ).one()
    assert row[0] == "VALID"
    status = index_maintenance.status(engine, probes=10, top_k=5)
    assert status.probes == 10 and status.last_rebuild is not None
    assert all(0 <= a <= 100 for a in status.accuracy) and status.mean_accuracy is not None
    assert status.mean_accuracy >= 50, status.reports  # an IVF index on 94 chunks finds most of the top-5
    # search still works after the rebuild (the index was replaced, not dropped)
    with engine.connect() as conn:
        assert len(engine.semantic_search(conn, "login timeout", 5, Scope(3, True), Filters())) == 5


def test_index_rebuild_and_status_commands(
    oracle_system, oracle_target: OracleTarget, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from oracle_rag.cli import main

    oracle_system.backfill()
    assert oracle_system.worker().drain().failed_rows == 0
    env = {
        "ORACLE_RAG_DATABASE_URL": oracle_target.url,
        "ORACLE_RAG_DB_PASSWORD_ENV": oracle_target.password_env,
        "ORACLE_RAG_EMBEDDING_MODEL": oracle_target.model_name,
        "ORACLE_RAG_DATA_DIR": str(tmp_path / "cli"),
    }
    runner = CliRunner()
    res = runner.invoke(main, ["index", "rebuild"], env=env)
    assert res.exit_code == 0 and res.output.startswith("rebuilt RAG_CHUNK_VEC_IX on "), res.output
    res = runner.invoke(main, ["index", "status", "--probes", "3"], env=env)
    assert res.exit_code == 0 and "RAG_CHUNK_VEC_IX: VECTOR" in res.output and "accuracy (" in res.output, (
        res.output
    )
    assert "RAG_CHUNK_TEXT_IX" not in res.output  # V9 dropped the Oracle Text index
    with oracle_system.engine.connect() as conn:
        assert (
            conn.execute(
                sa.text("SELECT COUNT(*) FROM USER_INDEXES WHERE INDEX_TYPE = 'DOMAIN'")
            ).scalar_one()
            == 0
        )
