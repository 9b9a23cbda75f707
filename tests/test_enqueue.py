"""enqueue(): one INSERT on the caller's own connection, in the caller's transaction.

The host application here is a plain SQLAlchemy engine on the product's
SQLite file (no vector extension, no product code in its connections), the
way an application that only writes tasks would be set up.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
import sqlean
from sqlalchemy.orm import Session
from writepath_helpers import queue

from oracle_rag.errors import InputError
from oracle_rag.indexing.queue import enqueue, enqueue_many

INSERT_TASK = sa.text(
    "INSERT INTO TASK (TASK_ID, TITLE, STATUS, PRIORITY, PROJECT_ID) "
    "VALUES (:id, 'New task', 'TODO', 'LOW', 1)"
)


@pytest.fixture
def app_engine(rag):
    with rag.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO PROJECT (PROJECT_ID, NAME, STATUS) VALUES (1, 'P', 'ACTIVE')"))
    engine = sa.create_engine(f"sqlite:///{rag.engine.path}", module=sqlean)
    yield engine
    engine.dispose()


def task_count(rag, task_id):
    with rag.engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT COUNT(*) FROM TASK WHERE TASK_ID = :i"), {"i": task_id}
        ).scalar_one()


def test_is_one_insert_on_the_callers_connection(app_engine, rag):
    seen = []

    def record(conn, _cursor, statement, _params, _ctx, _executemany):
        seen.append((conn, statement))

    with app_engine.begin() as conn:
        conn.execute(INSERT_TASK, {"id": 7})
        sa.event.listen(app_engine, "before_cursor_execute", record)
        try:
            enqueue(conn, "TASK", 7, "upsert")
        finally:
            sa.event.remove(app_engine, "before_cursor_execute", record)
    assert len(seen) == 1
    assert seen[0][0] is conn
    assert seen[0][1].startswith("INSERT INTO RAG_DIRTY")
    assert [r[1:5] for r in queue(rag)] == [("TASK", "7", "UPSERT", 0)]


def test_connection_rollback_takes_the_queue_row_with_it(app_engine, rag):
    with app_engine.connect() as conn:
        trans = conn.begin()
        conn.execute(INSERT_TASK, {"id": 8})
        enqueue(conn, "TASK", 8)
        # Not visible to anyone else before the commit.
        assert queue(rag) == []
        trans.rollback()
    assert task_count(rag, 8) == 0
    assert queue(rag) == []


def test_connection_commit_keeps_both(app_engine, rag):
    with app_engine.connect() as conn, conn.begin():
        conn.execute(INSERT_TASK, {"id": 9})
        enqueue(conn, "TASK", 9, "UPSERT")
    assert task_count(rag, 9) == 1
    assert [r[1:4] for r in queue(rag)] == [("TASK", "9", "UPSERT")]


def test_failed_write_rolls_back_the_queue_row(app_engine, rag):
    with pytest.raises(sa.exc.IntegrityError), app_engine.begin() as conn:
        enqueue(conn, "TASK", 10)
        conn.execute(INSERT_TASK, {"id": 10})
        conn.execute(INSERT_TASK, {"id": 10})  # duplicate key: the whole transaction fails
    assert queue(rag) == []
    assert task_count(rag, 10) == 0


def test_session_rollback_and_commit(app_engine, rag):
    with Session(app_engine) as session:
        session.execute(INSERT_TASK, {"id": 11})
        enqueue(session, "TASK", 11)
        session.rollback()
    assert queue(rag) == []
    assert task_count(rag, 11) == 0
    with Session(app_engine) as session:
        session.execute(INSERT_TASK, {"id": 12})
        enqueue(session, "TASK", 12, "UPSERT")
        enqueue(session, "TASK", 13, "DELETE")
        session.commit()
    assert [r[1:4] for r in queue(rag)] == [("TASK", "12", "UPSERT"), ("TASK", "13", "DELETE")]
    assert task_count(rag, 12) == 1


def test_enqueue_many_and_the_facade(app_engine, rag):
    with app_engine.begin() as conn:
        assert enqueue_many(conn, [("TASK", 1, "UPSERT"), ("SPRINT", "2", "delete")]) == 2
        assert enqueue_many(conn, []) == 0
        rag.enqueue(conn, "PROJECT", 3)
    assert [r[1:4] for r in queue(rag)] == [
        ("TASK", "1", "UPSERT"),
        ("SPRINT", "2", "DELETE"),
        ("PROJECT", "3", "UPSERT"),
    ]


def test_bad_action_is_refused_and_nothing_is_written(app_engine, rag):
    with app_engine.begin() as conn:
        with pytest.raises(InputError):
            enqueue_many(conn, [("TASK", 1, "UPSERT"), ("TASK", 2, "TRUNCATE")])
    assert queue(rag) == []


def test_needs_a_connection_or_session():
    with pytest.raises(TypeError):
        enqueue(object(), "TASK", 1)
