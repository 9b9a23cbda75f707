"""The reference application's facets: what its tasks, sprints and projects are filtered and counted by.

Declarations like any source's (``sources/facets.py`` says what each field
means); the reference sources list them (``sources/reference.py``). The
project and the sprint are declared ``indexed``: besides ``FACETS``, their
values go to the chunk table's indexed facet columns, which a search's
``Filters`` (the CLI's ``--project``/``--sprint``, the MCP tool's filters)
compares through their own indexes (engines/indexed_columns.py).
"""

from __future__ import annotations

from oracle_rag.sources.facets import PERSON_CUES, Facet

STATUS = Facet(
    "status",
    "enum",
    "status",
    ("status", "statuses", "state", "estado", "estados"),
    done=("DONE",),
    values=("TODO", "IN_PROGRESS", "IN_REVIEW", "BLOCKED", "DONE"),
    label_es="estado",
)
PRIORITY = Facet(
    "priority",
    "enum",
    "priority",
    ("priority", "priorities", "prioridad", "prioridades"),
    values=("LOW", "MEDIUM", "HIGH", "CRITICAL"),
    label_es="prioridad",
)
ASSIGNEE = Facet(
    "assignee_id",
    "ref",
    "assignee",
    (
        "assignee",
        "assignees",
        "developer",
        "developers",
        "owner",
        "owners",
        *PERSON_CUES,
        "desarrollador",
        "desarrolladores",
        "desarrolladora",
        "asignado",
        "asignada",
    ),
    person=True,
    label_es="responsable",
)
PROJECT = Facet(
    "project_id",
    "ref",
    "project",
    ("project", "projects", "proyecto", "proyectos"),
    refers_to="PROJECT",
    label_es="proyecto",
    indexed=True,
)
SPRINT = Facet(
    "sprint_id",
    "ref",
    "sprint",
    ("sprint", "sprints"),
    refers_to="SPRINT",
    none_words=(
        "backlog",
        "in the backlog",
        "without a sprint",
        "no sprint",
        "not in a sprint",
        "sin sprint",
        "en el backlog",
        "fuera de sprint",
        "fuera de los sprints",
    ),
    indexed=True,
)
SPRINT_STATUS = Facet(
    "sprint_status",
    "enum",
    "sprint status",
    ("sprint", "sprints"),
    cue_required=True,
    display=False,
    values=("PLANNED", "ACTIVE", "CLOSED"),
    label_es="estado del sprint",
)
PROJECT_STATUS = Facet(
    "project_status",
    "enum",
    "project status",
    ("project", "projects", "proyecto", "proyectos"),
    cue_required=True,
    values=("PLANNING", "ACTIVE", "ON_HOLD"),
    label_es="estado del proyecto",
)
DUE_DATE = Facet(
    "due_date",
    "date",
    "due",
    ("due", "deadline", "deadlines", "vence", "vencen", "vencimiento", "entrega", "fecha limite"),
    due=True,
    label_es="vencimiento",
)
