"""The allow-list of views the query model may read, with their descriptions.

The operator declares it; the reference catalogue covers the reference
application. The model receives names, column types and comments only, no
sample rows, and never the caller's identity (the views are scoped inside
the database).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str = ""


@dataclass(frozen=True)
class View:
    name: str
    comment: str
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Catalog:
    views: tuple[View, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.views)

    def describe(self) -> str:
        """The schema text sent to the query model."""
        parts = []
        for view in self.views:
            cols = "\n".join(
                f"  {c.name} {c.type}" + (f" -- {c.comment}" if c.comment else "") for c in view.columns
            )
            parts.append(f"VIEW {view.name} -- {view.comment}\n{cols}")
        return "\n\n".join(parts)


REFERENCE_CATALOG = Catalog(
    (
        View("RAG_V_TASK", "tasks the caller may see", (
            Column("TASK_ID", "INTEGER", "primary key"),
            Column("TITLE", "TEXT"),
            Column("STATUS", "TEXT", "TODO, IN_PROGRESS, IN_REVIEW, DONE or BLOCKED"),
            Column("PRIORITY", "TEXT", "LOW, MEDIUM, HIGH or CRITICAL"),
            Column("SPRINT_ID", "INTEGER", "RAG_V_SPRINT.SPRINT_ID; NULL when in the backlog"),
            Column("PROJECT_ID", "INTEGER", "RAG_V_PROJECT.PROJECT_ID"),
            Column("ASSIGNEE_ID", "INTEGER", "RAG_V_EMPLOYEE.EMPLOYEE_ID; NULL when unassigned"),
            Column("STORY_POINTS", "INTEGER", "may be NULL"),
            Column("ESTIMATED_HOURS", "NUMBER", "may be NULL"),
            Column("DUE_DATE", "DATE", "may be NULL"),
        )),
        View("RAG_V_SPRINT", "sprints", (
            Column("SPRINT_ID", "INTEGER", "primary key; sprint 14 has SPRINT_ID 14 and NAME 'Sprint 14'"),
            Column("PROJECT_ID", "INTEGER"),
            Column("NAME", "TEXT"),
            Column("STATUS", "TEXT", "CLOSED, ACTIVE or PLANNED"),
            Column("START_DATE", "DATE"),
            Column("END_DATE", "DATE"),
        )),
        View("RAG_V_PROJECT", "projects", (
            Column("PROJECT_ID", "INTEGER", "primary key"),
            Column("NAME", "TEXT"),
            Column("STATUS", "TEXT", "ACTIVE, ON_HOLD or PLANNING"),
            Column("START_DATE", "DATE"),
            Column("END_DATE", "DATE"),
        )),
        View("RAG_V_EMPLOYEE", "employees", (
            Column("EMPLOYEE_ID", "INTEGER", "primary key"),
            Column("FIRST_NAME", "TEXT"),
            Column("LAST_NAME", "TEXT"),
            Column("ROLE", "TEXT", "developer, manager or admin"),
        )),
    )
)
