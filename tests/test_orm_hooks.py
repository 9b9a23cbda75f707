"""The ORM integration: mapped writes enqueue in the same flush, rollbacks leave nothing.

A host application's own SQLAlchemy engine and sessionmaker on the product's
SQLite file, the reference models of ``oracle_rag.demo.models`` and the
hook from ``track_reference_models``; the worker then brings RAG_CHUNK in
step, checked against a fresh render of every entity.
"""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
import sqlean
from sqlalchemy.orm import sessionmaker
from writepath_helpers import index_mismatches, queue

from oracle_rag.demo.models import (
    Employee,
    Project,
    Sprint,
    Task,
    TaskComment,
    track_reference_models,
)


@pytest.fixture
def app(rag):
    engine = sa.create_engine(f"sqlite:///{rag.engine.path}", module=sqlean)

    @sa.event.listens_for(engine, "connect")
    def _fk(dbapi_conn, _rec):
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    factory = sessionmaker(engine)
    remove = track_reference_models(factory)
    with factory.begin() as s:
        s.add_all(
            [
                Employee(employee_id=1, first_name="Ana", last_name="García", role="developer"),
                Employee(employee_id=2, first_name="Luis", last_name="Pérez", role="manager"),
            ]
        )
        s.add(Project(project_id=1, name="Atlas", status="ACTIVE", start_date=dt.date(2026, 1, 5)))
        s.add(Sprint(sprint_id=1, project_id=1, name="Sprint 1", status="ACTIVE"))
        s.add(
            Task(
                task_id=1,
                title="First",
                status="TODO",
                priority="LOW",
                project_id=1,
                sprint_id=1,
                assignee_id=1,
            )
        )
    yield factory, remove
    remove()
    engine.dispose()


def take(rag):
    """The queued (type, id, action) rows, then empty the queue."""
    rows = [r[1:4] for r in queue(rag)]
    with rag.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM RAG_DIRTY"))
    return rows


def test_setup_inserts_were_enqueued(app, rag):
    assert sorted(take(rag)) == [
        ("PROJECT", "1", "UPSERT"),
        ("SPRINT", "1", "UPSERT"),
        ("TASK", "1", "UPSERT"),
    ]


def test_task_insert_update_delete(app, rag):
    factory, _ = app
    take(rag)
    with factory.begin() as s:
        s.add(Task(title="Autoincremented id", status="TODO", priority="LOW", project_id=1))
    assert take(rag) == [("TASK", "2", "UPSERT")]
    with factory.begin() as s:
        s.get(Task, 2).title = "Renamed"
    assert take(rag) == [("TASK", "2", "UPSERT")]
    with factory.begin() as s:
        s.delete(s.get(Task, 2))
    assert take(rag) == [("TASK", "2", "DELETE")]


def test_unchanged_loaded_object_enqueues_nothing(app, rag):
    factory, _ = app
    take(rag)
    with factory.begin() as s:
        task = s.get(Task, 1)
        task.title = task.title  # set to the same value: not a modification
        s.flush()
    assert take(rag) == []


@pytest.mark.parametrize(
    ("cls", "source_type", "key", "new", "change"),
    [
        (
            Sprint,
            "SPRINT",
            "sprint_id",
            lambda: Sprint(sprint_id=5, project_id=1, name="Sprint 5", status="PLANNED"),
            ("goal", "Ship it"),
        ),
        (
            Project,
            "PROJECT",
            "project_id",
            lambda: Project(project_id=5, name="Helios", status="PLANNED"),
            ("description", "Search"),
        ),
    ],
)
def test_sprint_and_project_insert_update_delete(app, rag, cls, source_type, key, new, change):
    factory, _ = app
    take(rag)
    with factory.begin() as s:
        s.add(new())
    assert take(rag) == [(source_type, "5", "UPSERT")]
    with factory.begin() as s:
        setattr(s.get(cls, 5), *change)
    assert take(rag) == [(source_type, "5", "UPSERT")]
    with factory.begin() as s:
        s.delete(s.get(cls, 5))
    assert take(rag) == [(source_type, "5", "DELETE")]


def test_comment_add_edit_delete_enqueue_the_task(app, rag):
    factory, _ = app
    take(rag)
    with factory.begin() as s:
        s.add(TaskComment(comment_id=1, task_id=1, author_id=2, body="Looks good"))
    assert take(rag) == [("TASK", "1", "UPSERT")]
    with factory.begin() as s:
        s.get(TaskComment, 1).body = "Looks good to me"
    assert take(rag) == [("TASK", "1", "UPSERT")]
    with factory.begin() as s:
        s.delete(s.get(TaskComment, 1))
    assert take(rag) == [("TASK", "1", "UPSERT")]


def test_comment_appended_through_the_relationship(app, rag):
    factory, _ = app
    take(rag)
    with factory.begin() as s:
        task = s.get(Task, 1)
        task.comments.append(TaskComment(author_id=1, body="via relationship"))
    assert take(rag) == [("TASK", "1", "UPSERT")]


def test_comment_moved_to_another_task_enqueues_both(app, rag):
    factory, _ = app
    with factory.begin() as s:
        s.add(Task(task_id=2, title="Second", status="TODO", priority="LOW", project_id=1))
        s.add(TaskComment(comment_id=1, task_id=1, author_id=2, body="wrong task"))
    take(rag)
    with factory.begin() as s:
        s.get(TaskComment, 1).task_id = 2
    assert sorted(take(rag)) == [("TASK", "1", "UPSERT"), ("TASK", "2", "UPSERT")]


def test_task_delete_with_comments_resolves_to_delete(app, rag):
    factory, _ = app
    with factory.begin() as s:
        s.add_all(
            [TaskComment(task_id=1, author_id=2, body="a"), TaskComment(task_id=1, author_id=1, body="b")]
        )
    take(rag)
    with factory.begin() as s:
        s.delete(s.get(Task, 1))  # cascades to the comments in the same flush
    assert take(rag) == [("TASK", "1", "DELETE")]


def test_rollback_queues_nothing(app, rag):
    factory, _ = app
    take(rag)
    s = factory()
    s.add(Task(task_id=3, title="Never", status="TODO", priority="LOW", project_id=1))
    s.get(Task, 1).title = "Never either"
    s.add(TaskComment(task_id=1, author_id=1, body="never"))
    s.flush()  # the hook has run: the rows exist in the open transaction
    assert s.connection().execute(sa.text("SELECT COUNT(*) FROM RAG_DIRTY")).scalar_one() == 2
    s.rollback()
    s.close()
    assert take(rag) == []
    with rag.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT TITLE FROM TASK WHERE TASK_ID = 1")).scalar_one() == "First"


def test_renames_fan_out_to_the_chunks_that_show_the_name(app, rag):
    factory, _ = app
    with factory.begin() as s:
        s.add(Task(task_id=2, title="Second", status="TODO", priority="LOW", project_id=1, sprint_id=None))
        s.add(TaskComment(task_id=2, author_id=2, body="comment by Luis"))
    take(rag)
    with factory.begin() as s:
        s.get(Sprint, 1).name = "Sprint One"
    assert sorted(take(rag)) == [("SPRINT", "1", "UPSERT"), ("TASK", "1", "UPSERT")]
    with factory.begin() as s:
        s.get(Project, 1).name = "Atlas 2"
    assert sorted(take(rag)) == [
        ("PROJECT", "1", "UPSERT"),
        ("SPRINT", "1", "UPSERT"),
        ("TASK", "1", "UPSERT"),
        ("TASK", "2", "UPSERT"),
    ]
    with factory.begin() as s:
        s.get(Employee, 2).last_name = "Pérez Gil"  # commented on task 2
    assert take(rag) == [("TASK", "2", "UPSERT")]
    with factory.begin() as s:
        s.get(Sprint, 1).goal = "goal only"  # not the name: only the sprint itself
    assert take(rag) == [("SPRINT", "1", "UPSERT")]


def test_remove_stops_enqueueing(app, rag):
    factory, remove = app
    remove()
    take(rag)
    with factory.begin() as s:
        s.get(Task, 1).title = "Unwatched"
    assert take(rag) == []


def test_models_read_seeded_rows_and_write_the_same_timestamp_format(rag):
    from oracle_rag.demo.seed import seed

    seed(rag.engine, 5)
    engine = sa.create_engine(f"sqlite:///{rag.engine.path}", module=sqlean)
    factory = sessionmaker(engine)
    track_reference_models(factory)
    with factory.begin() as s:
        task = s.get(Task, 1)
        assert isinstance(task.project.start_date, dt.date)
        old = [c.created_at for c in task.comments]
        assert all(isinstance(c, dt.datetime) for c in old)
        task.comments.append(TaskComment(author_id=9, body="newest", created_at=dt.datetime(2030, 1, 1, 12)))
    with rag.engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT CREATED_AT FROM TASK_COMMENT WHERE BODY = 'newest'")
        ).scalar_one()
    assert stored == "2030-01-01T12:00:00"
    engine.dispose()


def test_end_to_end_worker_brings_the_index_in_step(app, rag):
    factory, _ = app
    with factory.begin() as s:
        s.add(Task(task_id=2, title="Second", status="TODO", priority="LOW", project_id=1))
        s.add(TaskComment(task_id=1, author_id=2, body="first comment"))
    rag.worker().drain()
    assert index_mismatches(rag) == []
    with factory.begin() as s:
        s.get(Employee, 1).first_name = "Anabel"
        s.delete(s.get(Task, 2))
        s.get(Sprint, 1).name = "Sprint Uno"
    res = rag.worker().drain()
    assert res.deleted == 1
    assert index_mismatches(rag) == []


def test_a_sprints_status_change_reindexes_its_tasks(app, rag):
    """A task's facets hold its sprint's status ("what is blocked in the current sprint?")."""
    factory, _ = app
    take(rag)
    with factory.begin() as s:
        s.get(Sprint, 1).status = "CLOSED"
    assert sorted(take(rag)) == [("SPRINT", "1", "UPSERT"), ("TASK", "1", "UPSERT")]
