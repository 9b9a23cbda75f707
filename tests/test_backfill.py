"""Backfill: enqueue what the index lacks (or everything), never pile up rows."""

from __future__ import annotations

import sqlalchemy as sa
from writepath_helpers import index_mismatches, instrument, queue

from oracle_rag.indexing.queue import enqueue


def drop_chunks(rag, keys):
    with rag.engine.begin() as conn:
        for t, i in keys:
            conn.execute(
                sa.text("DELETE FROM RAG_CHUNK WHERE SOURCE_TYPE = :t AND SOURCE_ID = :i"),
                {"t": t, "i": str(i)},
            )


def test_enqueues_only_entities_without_a_chunk(demo_rag):
    drop_chunks(demo_rag, [("TASK", 1), ("TASK", 2), ("SPRINT", 5)])
    with demo_rag.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO TASK (TASK_ID, TITLE, STATUS, PRIORITY, PROJECT_ID) "
                "VALUES (301, 'Added without enqueue', 'TODO', 'LOW', 1)"
            )
        )
    report = demo_rag.backfill()
    assert report.enqueued == {"TASK": 3, "SPRINT": 1, "PROJECT": 0} and report.total == 4
    assert sorted(r[1:4] for r in queue(demo_rag)) == [
        ("SPRINT", "5", "UPSERT"),
        ("TASK", "1", "UPSERT"),
        ("TASK", "2", "UPSERT"),
        ("TASK", "301", "UPSERT"),
    ]
    rt = instrument(demo_rag)
    res = demo_rag.worker().drain()
    assert res.embedded == 4 and rt.calls == 4
    assert index_mismatches(demo_rag) == []


def test_does_not_duplicate_rows_already_queued(demo_rag):
    drop_chunks(demo_rag, [("TASK", 3), ("TASK", 4)])
    with demo_rag.engine.begin() as conn:
        enqueue(conn, "TASK", 3, "UPSERT")  # the application already queued this one
    assert demo_rag.backfill().enqueued["TASK"] == 1  # only task 4
    assert demo_rag.backfill().total == 0  # a second run adds nothing
    rows = [r[1:4] for r in queue(demo_rag)]
    assert sorted(rows) == [("TASK", "3", "UPSERT"), ("TASK", "4", "UPSERT")]


def test_all_enqueues_every_entity_once(demo_rag):
    with demo_rag.engine.begin() as conn:
        enqueue(conn, "TASK", 7, "UPSERT")
        enqueue(conn, "TASK", 8, "DELETE")  # a pending DELETE does not count as covered
    report = demo_rag.backfill(all_entities=True)
    assert report.enqueued == {"TASK": 299, "SPRINT": 48, "PROJECT": 6}
    assert demo_rag.backfill(all_entities=True).total == 0
    rows = [r[1:4] for r in queue(demo_rag)]
    assert len(rows) == 355
    assert rows.count(("TASK", "7", "UPSERT")) == 1 and rows.count(("TASK", "8", "UPSERT")) == 1


def test_empty_when_everything_is_indexed(demo_rag):
    seen = []
    report = demo_rag.backfill(progress=lambda *a: seen.append(a))
    assert report.total == 0 and queue(demo_rag) == []
    assert ("TASK", 0, 0) in seen  # progress still says each type was looked at


def test_cli_shows_progress_and_totals(demo_rag, cli):
    drop_chunks(demo_rag, [("TASK", i) for i in range(1, 11)] + [("PROJECT", 2)])
    result = cli("backfill")
    assert result.exit_code == 0, result.output
    assert "TASK: 10, SPRINT: 0, PROJECT: 1 (total 11 enqueued)" in result.stdout
    assert "backfill TASK" in result.stderr and "10/10" in result.stderr
    result = cli("backfill", "--all")
    assert result.exit_code == 0
    assert "TASK: 290, SPRINT: 48, PROJECT: 5 (total 343 enqueued)" in result.stdout
    assert "290/290" in result.stderr and "48/48" in result.stderr
