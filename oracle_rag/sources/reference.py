"""The three reference sources: TASK, SPRINT and PROJECT.

The templates are the product's contract with the model and with the
golden tests: change them and every chunk re-embeds (the hash changes), so
they change rarely and on purpose. Comments fold into their task's chunk,
so a comment edit re-indexes the task.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from oracle_rag.engines import Engine
from oracle_rag.engines.statements import Sql, for_connection
from oracle_rag.errors import missing_table
from oracle_rag.sources import reference_sql as q
from oracle_rag.sources.access import OWNER_ONLY, PUBLIC
from oracle_rag.sources.base import (
    Document,
    Source,
    SourceRegistry,
    as_int,
    chunked,
    fmt_date,
    fmt_number,
    text_or_dash,
)
from oracle_rag.sources.meanings import Meanings
from oracle_rag.sources.reference_facets import (
    ASSIGNEE,
    DUE_DATE,
    PRIORITY,
    PROJECT,
    PROJECT_STATUS,
    SPRINT,
    SPRINT_STATUS,
    STATUS,
)


def _int_ids(ids: Sequence[str]) -> list[int]:
    out = []
    for i in ids:
        try:
            out.append(int(i))
        except (TypeError, ValueError):
            continue  # a non-numeric id cannot exist in these tables
    return out


def render_task(row: Mapping[str, Any], comments: Sequence[Mapping[str, Any]] = ()) -> str:
    lines = [f"[TASK #{row['TASK_ID']}] {row['TITLE']}"]
    sprint = row.get("SPRINT_NAME") or "none"
    lines.append(f"Status: {row['STATUS']} | Priority: {row['PRIORITY']} | Sprint: {sprint}")
    lines.append(f"Project: {text_or_dash(row.get('PROJECT_NAME'))}")
    if row.get("ASSIGNEE_ID") is not None:
        lines.append(f"Assignee: {row.get('FIRST_NAME')} {row.get('LAST_NAME')}")
    else:
        lines.append("Assignee: unassigned")
    if row.get("STORY_POINTS") is not None:
        lines.append(f"Story points: {fmt_number(row['STORY_POINTS'])}")
    if row.get("ESTIMATED_HOURS") is not None:
        lines.append(f"Estimated hours: {fmt_number(row['ESTIMATED_HOURS'])}")
    lines.append(f"Due: {fmt_date(row.get('DUE_DATE'))}")
    lines.append(f"Description: {text_or_dash(row.get('DESCRIPTION'))}")
    if comments:
        lines.append("Comments:")
        for c in comments:
            lines.append(f"- {c['FIRST_NAME']} {c['LAST_NAME']}: {c['BODY']}")
    return "\n".join(lines)


def render_sprint(row: Mapping[str, Any]) -> str:
    return "\n".join(
        [
            f"[SPRINT #{row['SPRINT_ID']}] {row['NAME']} ({row['STATUS']})",
            f"Project: {text_or_dash(row.get('PROJECT_NAME'))}",
            f"Dates: {fmt_date(row.get('START_DATE'))} -> {fmt_date(row.get('END_DATE'))}",
            f"Goal: {text_or_dash(row.get('GOAL'))}",
        ]
    )


def render_project(row: Mapping[str, Any]) -> str:
    lines = [
        f"[PROJECT #{row['PROJECT_ID']}] {row['NAME']} ({row['STATUS']})",
        f"Dates: {fmt_date(row.get('START_DATE'))} -> {fmt_date(row.get('END_DATE'))}",
    ]
    description = row.get("DESCRIPTION")
    if description is not None and str(description).strip():
        lines.append(f"Description: {str(description).strip()}")
    return "\n".join(lines)


def _rows(conn: sa.Connection, sql: Sql, ids: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in chunked(ids):
        result = conn.execute(for_connection(conn, sql), {"ids": part})
        out.extend({k.upper(): v for k, v in row.items()} for row in result.mappings())
    return out


def _ids(conn: sa.Connection, sql: Sql) -> list[str]:
    return [str(r[0]) for r in conn.execute(for_connection(conn, sql))]


def _iso_date(value: Any) -> str | None:
    text = fmt_date(value)
    return None if text == "-" else text


def _names(conn: sa.Connection, sql: Sql) -> dict[Any, str]:
    out: dict[Any, str] = {}
    for row in conn.execute(for_connection(conn, sql)):
        out[int(row[0])] = " ".join(str(part).strip() for part in row[1:] if part is not None)
    return out


def _project_labels(conn: sa.Connection) -> dict[str, dict[Any, str]]:
    return {"project_id": _names(conn, q.PROJECT_NAMES)}


def task_facets(row: Mapping[str, Any]) -> dict[str, Any]:
    """A task's facet values (the JSON object stored on its chunks)."""
    return {
        "status": row["STATUS"],
        "priority": row["PRIORITY"],
        "assignee_id": as_int(row.get("ASSIGNEE_ID")),
        "project_id": as_int(row.get("PROJECT_ID")),
        "sprint_id": as_int(row.get("SPRINT_ID")),
        "sprint_status": row.get("SPRINT_STATUS"),
        "due_date": _iso_date(row.get("DUE_DATE")),
    }


class TaskSource(Source):
    SOURCE_TYPE = "TASK"
    facets = (STATUS, PRIORITY, ASSIGNEE, PROJECT, SPRINT, SPRINT_STATUS, DUE_DATE)
    meanings = Meanings(
        nouns={"en": ("task", "tasks"), "es": ("tarea", "tareas")},
        words=(
            "ticket",
            "tickets",
            "issue",
            "issues",
            "bug",
            "bugs",
            "item",
            "items",
            "work",
            "incidencia",
            "incidencias",
            "trabajo",
        ),
        mine="assignee_id",
        lifecycle="status",
        done=("DONE",),
        due="due_date",
        display=("status", "priority", "assignee_id", "due_date"),
    )
    access = OWNER_ONLY  # the assignee; an unassigned task: see-all callers only

    def labels(self, conn: sa.Connection) -> dict[str, dict[Any, str]]:
        # the assignee's names are the deployment's people (oracle_rag/callers/people.py), as for every
        # person facet
        return {**_project_labels(conn), "sprint_id": _names(conn, q.SPRINT_NAMES)}

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        wanted = _int_ids(ids)
        if not wanted:
            return {}
        tasks = _rows(conn, q.TASKS, wanted)
        comments: dict[int, list[dict[str, Any]]] = {}
        for c in _rows(conn, q.TASK_COMMENTS, wanted):
            comments.setdefault(int(c["TASK_ID"]), []).append(c)
        out = {}
        for t in tasks:
            tid = int(t["TASK_ID"])
            out[str(tid)] = Document(
                "TASK",
                str(tid),
                render_task(t, comments.get(tid, [])),
                owner_id=as_int(t["ASSIGNEE_ID"]),
                facets=task_facets(t),
            )
        return out

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return _ids(conn, q.TASK_IDS)


class SprintSource(Source):
    SOURCE_TYPE = "SPRINT"
    facets = (PROJECT, SPRINT, SPRINT_STATUS)
    meanings = Meanings(
        nouns={"en": ("sprint", "sprints"), "es": ("sprint", "sprints")},
        words=("iteration", "iterations", "iteracion", "iteraciones"),
        bare_ids=False,
    )
    access = PUBLIC

    def labels(self, conn: sa.Connection) -> dict[str, dict[Any, str]]:
        return {**_project_labels(conn), "sprint_id": _names(conn, q.SPRINT_NAMES)}

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        wanted = _int_ids(ids)
        if not wanted:
            return {}
        return {
            str(int(s["SPRINT_ID"])): Document(
                "SPRINT",
                str(int(s["SPRINT_ID"])),
                render_sprint(s),
                facets={
                    "project_id": as_int(s["PROJECT_ID"]),
                    "sprint_id": as_int(s["SPRINT_ID"]),
                    "sprint_status": s["STATUS"],
                },
            )
            for s in _rows(conn, q.SPRINTS, wanted)
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return _ids(conn, q.SPRINT_IDS)


class ProjectSource(Source):
    SOURCE_TYPE = "PROJECT"
    facets = (PROJECT, PROJECT_STATUS)
    meanings = Meanings(
        nouns={"en": ("project", "projects"), "es": ("proyecto", "proyectos")}, bare_ids=False
    )
    access = PUBLIC

    def labels(self, conn: sa.Connection) -> dict[str, dict[Any, str]]:
        return _project_labels(conn)

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        wanted = _int_ids(ids)
        if not wanted:
            return {}
        return {
            str(int(p["PROJECT_ID"])): Document(
                "PROJECT",
                str(int(p["PROJECT_ID"])),
                render_project(p),
                facets={"project_id": as_int(p["PROJECT_ID"]), "project_status": p["STATUS"]},
            )
            for p in _rows(conn, q.PROJECTS, wanted)
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return _ids(conn, q.PROJECT_IDS)


# The reference application's people: the names of every person facet's ids
# (oracle_rag/callers/people.py), read like a deployment's [people] query.
REFERENCE_PEOPLE = q.PEOPLE_QUERY


def reference_sources() -> list[Source]:
    return [TaskSource(), SprintSource(), ProjectSource()]


def reference_app_present(conn: sa.Connection) -> bool:
    """Whether the reference application's tables are all there (a missing one: False; any other
    failure raises)."""
    try:
        conn.execute(for_connection(conn, q.PRESENT)).fetchall()
    except sa.exc.DBAPIError as exc:
        if not missing_table(exc):
            raise
        conn.rollback()
        return False
    return True


REFERENCE_MODES = ("AUTO", "ON", "OFF")


class ReferenceRegistry(SourceRegistry):
    """The reference sources, registered only where the reference application's tables exist.

    A deployment with SQL-query sources only has no TASK to backfill, no task
    words in its questions and no EMPLOYEE to name anyone from. ``mode`` is the
    ``reference_app`` setting: ``AUTO`` looks for the tables on first use and,
    while they are missing, again at most every ``recheck_s`` (an injected clock
    decides) or at once on ``settle(force=True)`` (``RagSystem.migrate(demo=True)``
    calls it after creating them); ``ON`` registers them at once (a missing table
    then fails as MISSING_TABLE where it is read); ``OFF`` never does (a database
    whose own tables have the reference application's names).
    """

    def __init__(
        self,
        engine: Engine,
        sources: Sequence[Source] | None = None,
        *,
        mode: str = "AUTO",
        recheck_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if mode not in REFERENCE_MODES:
            raise ValueError(f"reference_app mode must be one of {REFERENCE_MODES}, not {mode!r}")
        self._engine = engine
        self.mode = mode
        self._pending = [] if mode == "OFF" else list(reference_sources() if sources is None else sources)
        self._recheck_s = recheck_s
        self._clock = clock
        self._checked_at: float | None = None
        self._lock = threading.Lock()
        if mode == "ON":
            self._register()

    @property
    def active(self) -> bool:
        """Whether the reference sources are registered (looks for the tables when due)."""
        return self.settle()

    def settle(self, *, force: bool = False) -> bool:
        if self.mode == "OFF":
            return False
        if not self._pending:
            return True
        now = self._clock()
        with self._lock:
            if not force and self._checked_at is not None and now - self._checked_at < self._recheck_s:
                return False
            self._checked_at = now
        with self._engine.connect() as conn:
            present = reference_app_present(conn)
        if present:
            self._register()
        return present

    def _register(self) -> None:
        with self._lock:
            for source in self._pending:
                if super().get(source.SOURCE_TYPE) is None:
                    self.add(source)
            self._pending = []

    def get(self, source_type: str) -> Source | None:
        self.settle()
        return super().get(source_type)

    def types(self) -> list[str]:
        self.settle()
        return super().types()

    def __iter__(self) -> Iterator[Source]:
        self.settle()
        return super().__iter__()
