"""A realistic, deterministic demo data set for the reference application.

Same seed and day, same rows: tests and benchmarks can name a task by id.
Titles, descriptions and comment threads mix English and Spanish, as the
reference team's tracker does, so retrieval is exercised on both. Each
task's description and thread tell one specific story (a symptom at a
customer, its root cause, a workaround, a decision, who said which:
:mod:`.stories`), drawn from a stream of its own.

Dates are relative to the day of seeding (``today``, tests pass a fixed
one), so "overdue", "due this week" and "the current sprint" look like a
real team's on any day: each project's ACTIVE sprint contains ``today``
(they end on different days), four CLOSED sprints lie before it and three
PLANNED ones after; most unfinished work of a closed sprint was carried
over to the active one, a fifth of it slipped (overdue). The day changes
only dates and sprint carry-overs: titles, texts, statuses, assignees and
comment threads are drawn from ``seed`` alone, the date decisions from a
stream of their own.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oracle_rag.demo.stories import Story, Teller
from oracle_rag.engines import Engine
from oracle_rag.engines.statements import Sql

FIRST = [
    "Ana",
    "Luis",
    "María",
    "Carlos",
    "Sofía",
    "Jorge",
    "Lucía",
    "Diego",
    "Elena",
    "Pablo",
    "Marta",
    "Andrés",
    "Laura",
    "Javier",
    "Camila",
    "Tomás",
    "Valeria",
    "Miguel",
    "Paula",
    "Raúl",
    "Emma",
    "Noah",
    "Olivia",
    "Liam",
    "Ava",
    "James",
    "Mia",
    "Lucas",
    "Grace",
    "Henry",
]
LAST = [
    "García",
    "Martínez",
    "López",
    "Hernández",
    "González",
    "Pérez",
    "Sánchez",
    "Ramírez",
    "Torres",
    "Flores",
    "Rivera",
    "Gómez",
    "Díaz",
    "Reyes",
    "Morales",
    "Smith",
    "Johnson",
    "Brown",
    "Taylor",
    "Anderson",
    "Thomas",
    "Moore",
    "Clark",
    "Lewis",
    "Walker",
]
PROJECTS = [
    ("Atlas Billing", "Rebuild the invoicing and payment reconciliation platform for enterprise customers."),
    ("Nova Mobile", "Native mobile app for field technicians with offline sync and push notifications."),
    ("Orion Data Platform", "Central data lake, ingestion pipelines and the analytics warehouse."),
    ("Plataforma Clientes", "Portal de autoservicio para clientes: facturas, tickets de soporte y perfil."),
    ("Helios Search", "Search and recommendations across the product catalogue."),
    ("Migración Nube", "Migración de los servicios internos al cloud con Kubernetes y observabilidad."),
]
PROJECT_STATUS = ["ACTIVE", "ACTIVE", "ACTIVE", "ON_HOLD", "ACTIVE", "PLANNING"]
TASK_STATUS = ["TODO", "IN_PROGRESS", "IN_REVIEW", "DONE", "BLOCKED"]
TASK_STATUS_W = [30, 25, 10, 28, 7]
PRIORITY = ["LOW", "MEDIUM", "HIGH", "CRITICAL"]
PRIORITY_W = [25, 45, 22, 8]
EN_VERBS = [
    "Fix",
    "Implement",
    "Refactor",
    "Add",
    "Investigate",
    "Document",
    "Optimize",
    "Migrate",
    "Test",
    "Review",
    "Remove",
    "Upgrade",
]
EN_OBJECTS = [
    "login timeout on the mobile app",
    "invoice PDF generation",
    "payment retry logic",
    "CSV export of monthly reports",
    "password reset emails",
    "search ranking for product names",
    "API rate limiting",
    "database connection pool leak",
    "dark mode in the settings page",
    "push notification delivery",
    "offline sync conflicts",
    "audit log retention",
    "currency rounding in invoices",
    "Kafka consumer lag alerts",
    "SSO with Azure AD",
    "onboarding tutorial screens",
    "slow dashboard queries",
    "flaky integration tests",
    "GDPR data deletion requests",
    "image upload size limit",
    "Kubernetes liveness probes",
    "error messages on the checkout form",
    "timezone handling in due dates",
    "caching of exchange rates",
    "accessibility of the navigation menu",
]
ES_VERBS = [
    "Corregir",
    "Implementar",
    "Refactorizar",
    "Añadir",
    "Investigar",
    "Documentar",
    "Optimizar",
    "Migrar",
    "Probar",
    "Revisar",
]
ES_OBJECTS = [
    "el error de inicio de sesión en Android",
    "la generación de facturas en PDF",
    "la sincronización sin conexión",
    "los correos de recuperación de contraseña",
    "el rendimiento del panel de control",
    "la exportación de informes a Excel",
    "las notificaciones push en iOS",
    "la validación del formulario de pago",
    "los permisos de usuarios administradores",
    "la búsqueda de clientes por NIF",
    "el despliegue en Kubernetes",
    "las alertas de monitorización",
    "la copia de seguridad nocturna",
    "la traducción de la interfaz al portugués",
]
# Draws of the former one-line templates: still made, so that every later draw of the main stream (statuses,
# assignees, estimates, dates) is what it was; the text itself comes from stories.Teller.
EN_DESC_DRAWS, ES_DESC_DRAWS, EN_COMMENT_DRAWS, ES_COMMENT_DRAWS = 7, 4, 10, 6
SPRINT_GOALS = [
    "Ship the MVP of {p} to pilot customers.",
    "Stabilise {p}: fix critical bugs and flaky tests.",
    "Close the security review findings for {p}.",
    "Cerrar las incidencias críticas de {p}.",
    "Prepare the {p} release candidate and documentation.",
]


@dataclass
class SeedReport:
    employees: int
    projects: int
    sprints: int
    tasks: int
    comments: int


INSERT_EMPLOYEE = Sql.both(
    "INSERT INTO EMPLOYEE (EMPLOYEE_ID, FIRST_NAME, LAST_NAME, ROLE) VALUES (:id, :first, :last, :role)"
)
INSERT_PROJECT = Sql.both(
    "INSERT INTO PROJECT (PROJECT_ID, NAME, STATUS, START_DATE, END_DATE, DESCRIPTION) "
    "VALUES (:id, :name, :status, :start, :end, :description)"
)
INSERT_SPRINT = Sql.both(
    "INSERT INTO SPRINT (SPRINT_ID, PROJECT_ID, NAME, STATUS, START_DATE, END_DATE, GOAL) "
    "VALUES (:id, :project, :name, :status, :start, :end, :goal)"
)
INSERT_TASK = Sql.both(
    "INSERT INTO TASK (TASK_ID, TITLE, DESCRIPTION, STATUS, PRIORITY, SPRINT_ID, PROJECT_ID, "
    "ASSIGNEE_ID, STORY_POINTS, ESTIMATED_HOURS, DUE_DATE) VALUES (:id, :title, :description, "
    ":status, :priority, :sprint, :project, :assignee, :points, :hours, :due)"
)
INSERT_COMMENT = Sql.both(
    "INSERT INTO TASK_COMMENT (COMMENT_ID, TASK_ID, AUTHOR_ID, BODY, CREATED_AT) "
    "VALUES (:id, :task, :author, :body, :created)"
)
COUNT_TASKS = Sql.both("SELECT COUNT(*) FROM TASK")
DELETE_ALL = [
    Sql.both("DELETE FROM TASK_COMMENT"),
    Sql.both("DELETE FROM TASK"),
    Sql.both("DELETE FROM SPRINT"),
    Sql.both("DELETE FROM PROJECT"),
    Sql.both("DELETE FROM EMPLOYEE"),
]


SPRINT_DAYS = 14
ACTIVE_SPRINT = 5  # of 8 per project: 1-4 CLOSED, 5 ACTIVE, 6-8 PLANNED
SLIPPED = 0.2  # unfinished tasks of a closed sprint (or backlog past its date) left overdue


def generate(
    tasks: int = 2000, seed: int = 42, today: dt.date | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The rows of the demo data set, as plain dicts (dates as ``datetime.date``), dated around ``today``."""
    return _build(tasks, seed, today or dt.date.today())[0]


def task_stories(tasks: int = 2000, seed: int = 42) -> dict[int, Story]:
    """What each task's free text is made of, by task id (the same for any day: only dates depend on it)."""
    return _build(tasks, seed, dt.date(2026, 1, 5))[1]


def _build(tasks: int, seed: int, today: dt.date) -> tuple[dict[str, list[dict[str, Any]]], dict[int, Story]]:
    rng = random.Random(seed)
    dates = random.Random(f"dates-{seed}")  # date decisions: the main stream (and so every text) is day-free
    employees: list[dict[str, Any]] = []
    for i in range(1, 41):
        role = "admin" if i <= 2 else "manager" if i <= 8 else "developer"
        employees.append(
            {"id": i, "first": FIRST[(i * 7) % len(FIRST)], "last": LAST[(i * 11) % len(LAST)], "role": role}
        )
    developers = [e["id"] for e in employees if e["role"] == "developer"]
    projects: list[dict[str, Any]] = []
    sprints: list[dict[str, Any]] = []
    sprint_id = 0
    active: dict[int, dict[str, Any]] = {}  # project -> its ACTIVE sprint
    for p, (name, desc) in enumerate(PROJECTS, 1):
        # the active sprint started 0-13 days ago, a different day for each project
        active_start = today - dt.timedelta(days=(5 * p) % SPRINT_DAYS)
        start = active_start - dt.timedelta(days=SPRINT_DAYS * (ACTIVE_SPRINT - 1))
        projects.append(
            {
                "id": p,
                "name": name,
                "status": PROJECT_STATUS[p - 1],
                "start": start,
                "end": start + dt.timedelta(days=7 * 30),
                "description": desc if p != 5 else None,
            }
        )
        for s in range(1, 9):
            sprint_id += 1
            s_start = start + dt.timedelta(days=SPRINT_DAYS * (s - 1))
            status = "CLOSED" if s < ACTIVE_SPRINT else "ACTIVE" if s == ACTIVE_SPRINT else "PLANNED"
            sprints.append(
                {
                    "id": sprint_id,
                    "project": p,
                    "name": f"Sprint {sprint_id}",
                    "status": status,
                    "start": s_start,
                    "end": s_start + dt.timedelta(days=SPRINT_DAYS - 1),
                    "goal": rng.choice(SPRINT_GOALS).format(p=name) if s != 8 else None,
                }
            )
            if status == "ACTIVE":
                active[p] = sprints[-1]
    task_rows, comment_rows = [], []
    comment_id = 0
    people = {e["id"]: f"{e['first']} {e['last']}" for e in employees}
    stories: dict[int, Story] = {}
    teller = Teller(seed, people, [e["id"] for e in employees if e["role"] == "manager"])
    for t in range(1, tasks + 1):
        sprint = rng.choice(sprints)
        spanish = rng.random() < 0.3
        if spanish:
            verb, obj = rng.choice(ES_VERBS), rng.choice(ES_OBJECTS)
            rng.randrange(ES_DESC_DRAWS)
        else:
            verb, obj = rng.choice(EN_VERBS), rng.choice(EN_OBJECTS)
            rng.randrange(EN_DESC_DRAWS)
        in_backlog = rng.random() < 0.1
        has_description = rng.random() > 0.05
        row: dict[str, Any] = {
            "id": t,
            "title": f"{verb} {obj}",
            "description": None,
            "status": rng.choices(TASK_STATUS, TASK_STATUS_W)[0],
            "priority": rng.choices(PRIORITY, PRIORITY_W)[0],
            "sprint": None if in_backlog else sprint["id"],
            "project": sprint["project"],
            "assignee": rng.choice(developers) if rng.random() > 0.08 else None,
            "points": rng.choice([1, 2, 3, 5, 8, 13]) if rng.random() > 0.1 else None,
            "hours": rng.choice([1, 2, 4, 6, 8, 12, 16, 2.5]) if rng.random() > 0.15 else None,
            "due": sprint["end"] if rng.random() > 0.1 else None,
        }
        late = row["due"] is not None and row["due"] < today and row["status"] != "DONE"
        if late and dates.random() >= SLIPPED:  # carried over: into the active sprint, due at its end
            current = active[sprint["project"]]
            row["due"] = current["end"]
            if not in_backlog:
                row["sprint"] = current["id"]
        task_rows.append(row)
        # a thread starts when its sprint did, or yesterday for a sprint still to come
        opened: dt.date = min(sprint["start"], today - dt.timedelta(days=1))
        thread: list[tuple[int, dt.datetime]] = []
        for c in range(rng.choice([0, 0, 1, 1, 2, 3, 4])):
            author = rng.choice(developers + [3, 4, 5])
            rng.randrange(ES_COMMENT_DRAWS if spanish else EN_COMMENT_DRAWS)
            thread.append(
                (
                    author,
                    dt.datetime.combine(opened, dt.time(9, 0))
                    + dt.timedelta(hours=5 * c + rng.randint(0, 4)),
                )
            )
        story = teller.tell(t, obj, spanish, row["status"], has_description, [a for a, _ in thread])
        row["description"] = story.description
        stories[t] = story
        for (author, created), body in zip(thread, story.comments, strict=True):
            comment_id += 1
            comment_rows.append(
                {"id": comment_id, "task": t, "author": author, "body": body, "created": created}
            )
    return {
        "employees": employees,
        "projects": projects,
        "sprints": sprints,
        "tasks": task_rows,
        "comments": comment_rows,
    }, stories


def seed(
    engine: Engine,
    tasks: int = 2000,
    *,
    seed_value: int = 42,
    reset: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    today: dt.date | None = None,
) -> SeedReport | None:
    """Insert the demo data set dated around ``today`` (default: this day); ``None`` when data exists and
    ``reset`` is false."""
    data = generate(tasks, seed_value, today)
    with engine.begin() as conn:
        existing = conn.execute(engine.statement(COUNT_TASKS)).scalar_one()
        if existing and not reset:
            return None
        if existing:
            for sql in DELETE_ALL:
                conn.execute(engine.statement(sql))
        for table, sql in (
            ("employees", INSERT_EMPLOYEE),
            ("projects", INSERT_PROJECT),
            ("sprints", INSERT_SPRINT),
            ("tasks", INSERT_TASK),
            ("comments", INSERT_COMMENT),
        ):
            rows = [{k: engine.bind_value(v) for k, v in r.items()} for r in data[table]]
            for start in range(0, len(rows), 1000):
                conn.execute(engine.statement(sql), rows[start : start + 1000])
                if progress:
                    progress(table, min(start + 1000, len(rows)), len(rows))
    return SeedReport(*(len(data[k]) for k in ("employees", "projects", "sprints", "tasks", "comments")))
