"""The allow-list of views the query model may read, with their descriptions.

The operator declares it; the reference catalogue covers the reference
application. The model receives names, column types and comments only, no
sample rows, and never the caller's identity (the views are scoped inside
the database).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sources.meanings import Meanings
from ..sources.reference import TaskSource


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


def lifecycle_comment(values: str, meanings: Meanings, column: str) -> str:
    """What a state column's values mean, from the source's declared lifecycle (issue 22): which are
    finished, so that "open" is every other value (a model left BLOCKED out of "open": issue 26)."""
    if not meanings.done:
        return values
    done = ", ".join(f"'{v}'" for v in meanings.done)
    return (f"{values}; finished = {done}: 'open', 'pending', 'not done', 'abiertas', 'sin terminar' mean "
            f"{column} NOT IN ({done}), every other value included")


def not_estimated(column: str, unit: str) -> str:
    """A nullable measure: NULL means "not estimated", never 0 (SUM/COUNT(*) counted them as 0: issue 26)."""
    return (f"{unit}; NULL = not estimated (not 0): an average is AVG({column}) over the estimated rows, and the "
            f"query also returns COUNT({column}) AS ESTIMATED and COUNT(*) - COUNT({column}) AS NOT_ESTIMATED")


REFERENCE_CATALOG = Catalog(
    (
        View("RAG_V_TASK", "tasks the caller may see", (
            Column("TASK_ID", "INTEGER", "primary key"),
            Column("TITLE", "TEXT"),
            Column("STATUS", "TEXT", lifecycle_comment("TODO, IN_PROGRESS, IN_REVIEW, DONE or BLOCKED",
                                                       TaskSource.meanings, "STATUS")),
            Column("PRIORITY", "TEXT", "LOW, MEDIUM, HIGH or CRITICAL"),
            Column("SPRINT_ID", "INTEGER", "RAG_V_SPRINT.SPRINT_ID; NULL when in the backlog"),
            Column("PROJECT_ID", "INTEGER", "RAG_V_PROJECT.PROJECT_ID"),
            Column("ASSIGNEE_ID", "INTEGER", "RAG_V_EMPLOYEE.EMPLOYEE_ID; NULL when unassigned"),
            Column("STORY_POINTS", "INTEGER", not_estimated("STORY_POINTS", "story points")),
            Column("ESTIMATED_HOURS", "NUMBER", not_estimated("ESTIMATED_HOURS", "hours of work")),
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
