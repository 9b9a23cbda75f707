"""The allow-list of views the query model may read, with their descriptions.

The operator declares it; the reference catalogue covers the reference
application. The model receives names, column types and comments only, no
sample rows, and never the caller's identity (the views are scoped inside
the database).
"""

from __future__ import annotations

from dataclasses import dataclass

from oracle_rag.sources.facets import SYNONYMS, Facet
from oracle_rag.sources.meanings import Meanings
from oracle_rag.sources.reference import TaskSource
from oracle_rag.sources.reference_facets import PRIORITY, PROJECT_STATUS, SPRINT_STATUS

# Words that mean "not finished" / "finished" in a question, shown to the model beside the rule (EN and ES;
# the full lists the repair reads are answers.lexicon.OPEN and FINISHED).
OPEN_WORDS = ("open", "pending", "not done", "unfinished", "abiertas", "pendientes", "sin terminar")
DONE_WORDS = ("done", "finished", "completed", "terminadas", "completadas")


@dataclass(frozen=True)
class Column:
    """A view column and what its values mean, declared: ``values`` (an enum's values, exactly as stored),
    ``done`` (the values of the record's lifecycle meaning finished: "open" is every other value),
    ``null_means`` (what NULL means for a measure, e.g. "not estimated": never 0) and ``unit``."""

    name: str
    type: str
    comment: str = ""
    values: tuple[str, ...] = ()
    done: tuple[str, ...] = ()
    null_means: str = ""
    unit: str = ""
    words: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (value, other words for it, any language)

    @property
    def text(self) -> str:
        """The column's comment: the declared note and meanings (the prompt's schema, Oracle's COMMENT ON)."""
        parts = [p for p in (self.unit, self.comment) if p]
        if self.values:
            parts.append("values " + ", ".join(self.values))
        if self.done:
            parts.append(
                f"finished = {quoted(self.done)}; open (not finished) = {self.name} NOT IN "
                f"({quoted(self.done)}), every other value included"
            )
        if self.null_means:
            parts.append(f"NULL = {self.null_means} (not 0)")
        return "; ".join(parts)


@dataclass(frozen=True)
class View:
    name: str
    comment: str
    columns: tuple[Column, ...]

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name.upper()), None)


@dataclass(frozen=True)
class Catalog:
    views: tuple[View, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.views)

    def view(self, name: str) -> View | None:
        return next((v for v in self.views if v.name == name.upper()), None)

    def describe(self) -> str:
        """The schema text sent to the query model (on Oracle the views carry the same comments)."""
        parts = []
        for view in self.views:
            cols = "\n".join(
                f"  {c.name} {c.type}" + (f" -- {c.text}" if c.text else "") for c in view.columns
            )
            parts.append(f"VIEW {view.name} -- {view.comment}\n{cols}")
        return "\n\n".join(parts)

    def rules(self) -> str:
        """The declared meanings as rules the query must follow (a small model ignores comments)."""
        lines = [
            f"- Only these views exist: {', '.join(self.names)}. A column that lists its values holds them "
            "itself (there is no lookup table): filter and GROUP BY that column directly.",
            "- Compare a column that lists its values only with those values, exactly as written "
            "(upper case).",
        ]
        for view in self.views:
            for c in view.columns:
                if c.done:
                    lines.append(
                        f"- {'/'.join(OPEN_WORDS)} {view.name} rows: "
                        f"WHERE {c.name} NOT IN ({quoted(c.done)}) "
                        f"({', '.join(v for v in c.values if v not in c.done)} are all open; never "
                        f"{c.name} = 'OPEN'); {'/'.join(DONE_WORDS)}: {c.name} IN ({quoted(c.done)})."
                    )
                if c.null_means:
                    lines.append(
                        f"- {view.name}.{c.name} is NULL when {c.null_means}: an average is AVG({c.name}) "
                        "(over the "
                        f"rows that have one), never SUM({c.name})/COUNT(*) and never COALESCE({c.name}, 0)."
                    )
        return "\n".join(lines)


def quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def enum_column(name: str, facet: Facet, meanings: Meanings | None = None, comment: str = "") -> Column:
    """A column holding a declared enum facet: its values, and its finished values when it is the
    source's declared lifecycle (sources/meanings.py), so that "open" includes BLOCKED."""
    done = meanings.done if meanings is not None and meanings.lifecycle == facet.name else ()
    declared = dict(meanings.value_words) if meanings is not None else {}
    words = tuple(
        (v, (*(w for forms in SYNONYMS.get(v, {}).values() for w in forms), *declared.get(v, ())))
        for v in facet.values
    )
    return Column(name, "TEXT", comment, values=facet.values, done=done, words=words)


def lifecycle_facet(facets: tuple[Facet, ...], meanings: Meanings) -> Facet:
    """The enum facet a source declares as its records' lifecycle."""
    return next(f for f in facets if f.name == meanings.lifecycle)


REFERENCE_CATALOG = Catalog(
    (
        View(
            "RAG_V_TASK",
            "tasks the caller may see",
            (
                Column("TASK_ID", "INTEGER", "primary key"),
                Column("TITLE", "TEXT"),
                enum_column(
                    "STATUS", lifecycle_facet(TaskSource.facets, TaskSource.meanings), TaskSource.meanings
                ),
                enum_column("PRIORITY", PRIORITY),
                Column("SPRINT_ID", "INTEGER", "RAG_V_SPRINT.SPRINT_ID; NULL when in the backlog"),
                Column("PROJECT_ID", "INTEGER", "RAG_V_PROJECT.PROJECT_ID"),
                Column("ASSIGNEE_ID", "INTEGER", "RAG_V_EMPLOYEE.EMPLOYEE_ID; NULL when unassigned"),
                Column("STORY_POINTS", "INTEGER", null_means="not estimated", unit="story points"),
                Column("ESTIMATED_HOURS", "NUMBER", null_means="not estimated", unit="hours of work"),
                Column("DUE_DATE", "DATE", "may be NULL"),
            ),
        ),
        View(
            "RAG_V_SPRINT",
            "sprints",
            (
                Column(
                    "SPRINT_ID", "INTEGER", "primary key; sprint 14 has SPRINT_ID 14 and NAME 'Sprint 14'"
                ),
                Column("PROJECT_ID", "INTEGER"),
                Column("NAME", "TEXT"),
                enum_column("STATUS", SPRINT_STATUS),
                Column("START_DATE", "DATE"),
                Column("END_DATE", "DATE"),
            ),
        ),
        View(
            "RAG_V_PROJECT",
            "projects",
            (
                Column("PROJECT_ID", "INTEGER", "primary key"),
                Column("NAME", "TEXT"),
                enum_column("STATUS", PROJECT_STATUS),
                Column("START_DATE", "DATE"),
                Column("END_DATE", "DATE"),
            ),
        ),
        View(
            "RAG_V_EMPLOYEE",
            "employees",
            (
                Column("EMPLOYEE_ID", "INTEGER", "primary key"),
                Column("FIRST_NAME", "TEXT"),
                Column("LAST_NAME", "TEXT"),
                Column("ROLE", "TEXT", "developer, manager or admin"),
            ),
        ),
    )
)
