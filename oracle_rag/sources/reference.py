"""The three reference sources: TASK, SPRINT and PROJECT.

The templates are the product's contract with the model and with the
golden tests: change them and every chunk re-embeds (the hash changes), so
they change rarely and on purpose. Comments fold into their task's chunk,
so a comment edit re-indexes the task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from ..engines.statements import Sql, for_connection
from . import reference_sql as q
from .base import Document, Source, as_int, chunked, fmt_date, fmt_number, text_or_dash


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


class TaskSource(Source):
    SOURCE_TYPE = "TASK"

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
                "TASK", str(tid), render_task(t, comments.get(tid, [])),
                owner_id=as_int(t["ASSIGNEE_ID"]), project_id=as_int(t["PROJECT_ID"]),
                sprint_id=as_int(t["SPRINT_ID"]),
            )
        return out

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return _ids(conn, q.TASK_IDS)


class SprintSource(Source):
    SOURCE_TYPE = "SPRINT"

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        wanted = _int_ids(ids)
        if not wanted:
            return {}
        return {
            str(int(s["SPRINT_ID"])): Document(
                "SPRINT", str(int(s["SPRINT_ID"])), render_sprint(s),
                project_id=as_int(s["PROJECT_ID"]), sprint_id=as_int(s["SPRINT_ID"]),
            )
            for s in _rows(conn, q.SPRINTS, wanted)
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return _ids(conn, q.SPRINT_IDS)


class ProjectSource(Source):
    SOURCE_TYPE = "PROJECT"

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        wanted = _int_ids(ids)
        if not wanted:
            return {}
        return {
            str(int(p["PROJECT_ID"])): Document(
                "PROJECT", str(int(p["PROJECT_ID"])), render_project(p), project_id=as_int(p["PROJECT_ID"])
            )
            for p in _rows(conn, q.PROJECTS, wanted)
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return _ids(conn, q.PROJECT_IDS)


def reference_sources() -> list[Source]:
    return [TaskSource(), SprintSource(), ProjectSource()]
