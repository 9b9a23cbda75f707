"""SQLAlchemy ORM models of the reference application, and the write hook.

A host application that writes through the ORM gets its queue rows for
free: :func:`track_reference_models` makes every flush that inserts,
updates or deletes a Task, Sprint, Project or TaskComment enqueue the
entity to re-index, in the same flush and therefore in the same
transaction (a rollback takes the queue rows with it).

The models map the tables created by ``sql/*/demo/V1__reference_app.sql``;
they never create tables (migrations do). Names are lower case so
SQLAlchemy renders them unquoted, which Oracle resolves to the upper-case
names of the migration. On Oracle the primary keys have no identity or
sequence: the host application supplies ids (SQLite assigns them).

What the chunk text of an entity depends on, and therefore what enqueues
it:

- a task's own columns, its comments (they fold into the task's chunk),
  the names of its sprint, project and assignee, and its sprint's status
  (a facet of the task: "the current sprint");
- a sprint's columns and its project's name; a project's columns.

Changes to the entity itself go through :func:`oracle_rag.indexing.queue.install_orm_hooks`.
The second group (a sprint or project renamed, an employee renamed, a
comment moved to another task) is fanned out by a small extra
``after_flush`` listener here, because those changes make *other* chunks
stale.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from oracle_rag.engines.statements import Sql, for_connection
from oracle_rag.indexing.queue import Tracked, enqueue_many, install_orm_hooks

# SQLite keeps timestamps as ISO-8601 text with a "T", the format of the
# migration's DEFAULT and of the seed data; comments are ordered by this
# text, so the ORM must write the same format (SQLAlchemy's default has a
# space and microseconds, which would sort before every seeded comment).
_SQLITE_TIMESTAMP = sqlite.DATETIME(
    storage_format="%(year)04d-%(month)02d-%(day)02dT%(hour)02d:%(minute)02d:%(second)02d",
    regexp=r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)",
)
Timestamp = sa.DateTime().with_variant(_SQLITE_TIMESTAMP, "sqlite")


class Base(DeclarativeBase):
    """Declarative base of the reference application's models."""


class Employee(Base):
    __tablename__ = "employee"

    employee_id: Mapped[int] = mapped_column(primary_key=True)
    first_name: Mapped[str] = mapped_column(sa.String(100))
    last_name: Mapped[str] = mapped_column(sa.String(100))
    role: Mapped[str] = mapped_column(sa.String(16))


class Project(Base):
    __tablename__ = "project"

    project_id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    status: Mapped[str] = mapped_column(sa.String(32))
    start_date: Mapped[dt.date | None] = mapped_column(sa.Date)
    end_date: Mapped[dt.date | None] = mapped_column(sa.Date)
    description: Mapped[str | None] = mapped_column(sa.String(4000))

    sprints: Mapped[list[Sprint]] = relationship(back_populates="project")


class Sprint(Base):
    __tablename__ = "sprint"

    sprint_id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(sa.ForeignKey("project.project_id"))
    name: Mapped[str] = mapped_column(sa.String(200))
    status: Mapped[str] = mapped_column(sa.String(32))
    start_date: Mapped[dt.date | None] = mapped_column(sa.Date)
    end_date: Mapped[dt.date | None] = mapped_column(sa.Date)
    goal: Mapped[str | None] = mapped_column(sa.String(4000))

    project: Mapped[Project] = relationship(back_populates="sprints")


class Task(Base):
    __tablename__ = "task"

    task_id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(sa.String(400))
    description: Mapped[str | None] = mapped_column(sa.String(4000))
    status: Mapped[str] = mapped_column(sa.String(32))
    priority: Mapped[str] = mapped_column(sa.String(16))
    sprint_id: Mapped[int | None] = mapped_column(sa.ForeignKey("sprint.sprint_id"))
    project_id: Mapped[int] = mapped_column(sa.ForeignKey("project.project_id"))
    assignee_id: Mapped[int | None] = mapped_column(sa.ForeignKey("employee.employee_id"))
    story_points: Mapped[int | None] = mapped_column(sa.Integer)
    estimated_hours: Mapped[float | None] = mapped_column(sa.Numeric(7, 2, asdecimal=False))
    due_date: Mapped[dt.date | None] = mapped_column(sa.Date)

    sprint: Mapped[Sprint | None] = relationship()
    project: Mapped[Project] = relationship()
    assignee: Mapped[Employee | None] = relationship()
    comments: Mapped[list[TaskComment]] = relationship(
        back_populates="task",
        cascade="all, delete-orphan",
        order_by="(TaskComment.created_at, TaskComment.comment_id)",
    )


class TaskComment(Base):
    __tablename__ = "task_comment"

    comment_id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(sa.ForeignKey("task.task_id", ondelete="CASCADE"))
    author_id: Mapped[int] = mapped_column(sa.ForeignKey("employee.employee_id"))
    body: Mapped[str] = mapped_column(sa.String(4000))
    # Filled by the database default when not given.
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, server_default=sa.FetchedValue())

    task: Mapped[Task] = relationship(back_populates="comments")
    author: Mapped[Employee] = relationship()


def _comment_task(comment: TaskComment) -> int | None:
    if comment.task_id is not None:
        return comment.task_id
    return comment.task.task_id if comment.task is not None else None


TRACKED: dict[type, Tracked] = {
    Task: Tracked("TASK", lambda t: t.task_id),
    Sprint: Tracked("SPRINT", lambda s: s.sprint_id),
    Project: Tracked("PROJECT", lambda p: p.project_id),
    TaskComment: Tracked("TASK", _comment_task, owns=False),
}

# Rows whose chunk shows a name that just changed (read on the flushing
# connection, so they see the session's own uncommitted writes).
# Portable: the same text runs on both engines.
TASKS_OF_SPRINT = Sql.both("SELECT TASK_ID FROM TASK WHERE SPRINT_ID = :id")
TASKS_OF_PROJECT = Sql.both("SELECT TASK_ID FROM TASK WHERE PROJECT_ID = :id")
SPRINTS_OF_PROJECT = Sql.both("SELECT SPRINT_ID FROM SPRINT WHERE PROJECT_ID = :id")
TASKS_OF_EMPLOYEE = Sql.both(
    "SELECT TASK_ID FROM TASK WHERE ASSIGNEE_ID = :id "
    "UNION SELECT TASK_ID FROM TASK_COMMENT WHERE AUTHOR_ID = :id"
)


def _changed(obj: Any, *attrs: str) -> bool:
    state = sa.inspect(obj)
    return any(state.attrs[a].history.has_changes() for a in attrs)


def _fan_out(session: Any) -> list[tuple[str, Any, str]]:
    """UPSERTs for chunks that show a renamed sprint/project/employee or a moved comment."""
    conn = session.connection()
    out: list[tuple[str, Any, str]] = []

    def ids(sql: Sql, key: Any) -> Iterable[Any]:
        return [r[0] for r in conn.execute(for_connection(conn, sql), {"id": key})]

    for obj in list(session.dirty):
        if isinstance(obj, Sprint) and _changed(obj, "name", "status"):  # names shown, status a task facet
            out += [("TASK", i, "UPSERT") for i in ids(TASKS_OF_SPRINT, obj.sprint_id)]
        elif isinstance(obj, Project) and _changed(obj, "name"):
            out += [("SPRINT", i, "UPSERT") for i in ids(SPRINTS_OF_PROJECT, obj.project_id)]
            out += [("TASK", i, "UPSERT") for i in ids(TASKS_OF_PROJECT, obj.project_id)]
        elif isinstance(obj, Employee) and _changed(obj, "first_name", "last_name"):
            out += [("TASK", i, "UPSERT") for i in ids(TASKS_OF_EMPLOYEE, obj.employee_id)]
        elif isinstance(obj, TaskComment):
            # A comment moved to another task: the old task loses it.
            old = sa.inspect(obj).attrs.task_id.history.deleted
            out += [("TASK", i, "UPSERT") for i in old if i is not None]
    return out


def track_reference_models(session_class: Any) -> Callable[[], None]:
    """Enqueue re-index rows on every flush of ``session_class`` (a Session or sessionmaker).

    Returns a function that removes both listeners (calling it again does nothing).
    """
    remove_direct = install_orm_hooks(session_class, TRACKED)
    state = {"installed": True}

    def after_flush(session: Any, _ctx: Any) -> None:
        items = _fan_out(session)
        if items:
            enqueue_many(session, items)

    sa.event.listen(session_class, "after_flush", after_flush)

    def remove() -> None:
        if state["installed"]:
            state["installed"] = False
            remove_direct()
            sa.event.remove(session_class, "after_flush", after_flush)

    return remove


__all__ = [
    "TRACKED",
    "Base",
    "Employee",
    "Project",
    "Sprint",
    "Task",
    "TaskComment",
    "track_reference_models",
]
