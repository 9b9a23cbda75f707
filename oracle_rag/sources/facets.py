"""Facets: the structured attributes a source declares for its records.

A facet is a named attribute of a record (a task's status, priority,
assignee, project, sprint, its sprint's status, its due date) that questions
filter and count by. Sources declare their facets and put the values of each
record in ``Document.facets``; the indexer stores them on every chunk of the
record (``RAG_CHUNK.FACETS``, a flat JSON object), so a filter or a count is
a SQL predicate next to the scope predicate (``oracle_rag.answering.structured``).

Nothing about a facet is hard-coded in the question parser: it learns the
facet names, the words that name them (``cues``), and the values from these
declarations and from the data; :data:`SYNONYMS` adds a small EN/ES table of
other words for the reference values (used only for values the data has).

Facet names are lower-case identifiers because they are written into SQL as
JSON paths (``'$.status'``): :func:`check_facet_name` is the one gate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from oracle_rag.engines.indexed_columns import INDEXED_FACETS
from oracle_rag.errors import ConfigurationError

KINDS = ("enum", "ref", "date", "number")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


def check_facet_name(name: Any) -> str:
    """A facet name safe to write into a JSON path: lower-case letters, digits, ``_``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"facet name {name!r}: expected a lower-case identifier (letters, digits, _)", key="facets"
        )
    return name


@dataclass(frozen=True)
class Facet:
    """One declared facet.

    ``kind``: ``enum`` (text values from the data, e.g. statuses), ``ref``
    (integer ids whose names come from the source's :meth:`labels`: employees,
    projects, sprints), ``date`` (ISO ``YYYY-MM-DD``) or ``number``.
    ``cues``: words (EN and ES) that name the facet in a question ("status",
    "estado"), used for "per status" and to spot an unknown value ("project
    Atlas Biling"). ``cue_required``: a value counts only next to a cue (a
    sprint's status "active" only in "active sprint"). ``person``: the values
    are employee ids (names from EMPLOYEE; the empty value is nobody, not a
    person). Which person facet "my" means, which values are finished and
    which date is due are a source's meanings (``sources/meanings.py``);
    ``done`` and ``due`` here are kept for older declarations and not read
    by the answerer. ``indexed``: the record's value is also stored in the
    chunk table's indexed column of that name (engines/indexed_columns.py),
    so a search's ``Filters`` narrows by it through that column's index; only
    an integer facet whose name has such a column. ``values``: the enum's
    values known by declaration; the parser also learns every value among the
    records the caller may see (a developer without a BLOCKED task still asks
    about "blocked" ones, and a value only others' records hold stays unknown).
    """

    name: str
    kind: str
    label: str
    cues: tuple[str, ...] = ()
    cue_required: bool = False
    person: bool = False
    done: tuple[str, ...] = ()
    due: bool = False
    display: bool = True  # shown as a column of a list answer
    refers_to: str | None = None  # the source type whose records the ids name (project_id -> PROJECT)
    values: tuple[str, ...] = ()  # enum values known by declaration, beyond those found in the data
    label_es: str = ""  # the label in Spanish answers (the label itself when empty)
    none_words: tuple[str, ...] = ()  # words for "no value" ("backlog": no sprint), EN and ES
    indexed: bool = False  # also stored in the chunk table's indexed column of its name

    def label_in(self, language: str) -> str:
        return self.label_es if language == "es" and self.label_es else self.label

    def __post_init__(self) -> None:
        check_facet_name(self.name)
        if self.kind not in KINDS:
            raise ConfigurationError(
                f"facet {self.name}: kind must be one of {', '.join(KINDS)}", key="facets"
            )
        if self.indexed and (self.name not in INDEXED_FACETS or self.kind not in ("ref", "number")):
            raise ConfigurationError(
                f"facet {self.name}: only an integer facet named {' or '.join(INDEXED_FACETS)} "
                "has an indexed column",
                key="facets",
            )

    @property
    def numeric(self) -> bool:
        return self.kind in ("ref", "number")


# Words that name any person facet ("per person", "cada responsable"), besides its own label.
PERSON_CUES = (
    "person",
    "people",
    "persons",
    "member",
    "members",
    "user",
    "users",
    "responsable",
    "responsables",
    "persona",
    "personas",
    "usuario",
    "usuarios",
)

# Words for the reference values, per language, matched accent- and case-folded.
# A value's own text (BLOCKED -> "blocked", IN_PROGRESS -> "in progress") always
# counts; these are the other ways people say it. Only values present in the
# data are ever matched.
SYNONYMS: dict[str, dict[str, tuple[str, ...]]] = {
    "BLOCKED": {
        "en": ("blocked", "stuck", "blocker", "blockers", "blocking"),
        "es": ("bloqueada", "bloqueadas", "bloqueado", "bloqueados", "bloqueo", "bloqueos"),
    },
    "IN_PROGRESS": {
        "en": (
            "in progress",
            "in-progress",
            "ongoing",
            "being worked on",
            "wip",
            "started",
            "under way",
            "underway",
            "working on",
        ),
        "es": (
            "en progreso",
            "en curso",
            "en marcha",
            "en proceso",
            "empezadas",
            "empezados",
            "trabajando en",
            "en desarrollo",
        ),
    },
    "IN_REVIEW": {
        "en": (
            "in review",
            "under review",
            "in code review",
            "awaiting review",
            "waiting for review",
            "being reviewed",
        ),
        "es": ("en revision", "en revisión", "pendiente de revision", "pendientes de revision"),
    },
    "TODO": {
        "en": ("to do", "to-do", "todo", "not started", "not yet started"),
        "es": ("por hacer", "sin empezar", "sin iniciar", "no empezadas", "no iniciadas"),
    },
    "DONE": {
        "en": ("done", "finished", "completed", "complete", "closed", "resolved"),
        "es": (
            "terminada",
            "terminadas",
            "terminado",
            "terminados",
            "hecha",
            "hechas",
            "completada",
            "completadas",
            "finalizada",
            "finalizadas",
            "cerrada",
            "cerradas",
            "resuelta",
            "resueltas",
            "acabada",
            "acabadas",
        ),
    },
    "CRITICAL": {
        "en": ("critical", "urgent", "critical priority"),
        "es": ("critica", "criticas", "critico", "criticos", "urgente", "urgentes", "prioridad critica"),
    },
    "HIGH": {
        "en": ("high", "high priority", "high-priority"),
        "es": ("alta", "altas", "alta prioridad", "prioridad alta"),
    },
    "MEDIUM": {"en": ("medium", "medium priority"), "es": ("media", "medias", "prioridad media")},
    "LOW": {"en": ("low", "low priority", "low-priority"), "es": ("baja", "bajas", "prioridad baja")},
    # sprint and project statuses (matched next to "sprint"/"project": cue_required)
    "ACTIVE": {
        "en": ("active", "current", "this", "ongoing", "open", "running"),
        "es": ("activo", "activos", "activa", "activas", "actual", "actuales", "en curso", "este"),
    },
    "CLOSED": {
        "en": ("closed", "past", "previous", "finished", "completed"),
        "es": (
            "cerrado",
            "cerrados",
            "pasado",
            "pasados",
            "anterior",
            "anteriores",
            "terminado",
            "terminados",
        ),
    },
    "PLANNED": {
        "en": ("planned", "upcoming", "future"),
        "es": (
            "planificado",
            "planificados",
            "planeado",
            "planeados",
            "futuro",
            "futuros",
            "proximo",
            "proximos",
            "siguiente",
            "siguientes",
        ),
    },
    "ON_HOLD": {
        "en": ("on hold", "paused", "on-hold"),
        "es": ("en pausa", "en espera", "pausado", "pausados"),
    },
    "PLANNING": {"en": ("planning", "in planning"), "es": ("en planificacion", "planificacion")},
}
