"""Text-to-SQL is told what the data means: finished values from the declared lifecycle, NULL.

The meanings reach the model three ways, all from the declarations: the schema's column comments (on
Oracle also COMMENT ON the views), rules in the prompt, and a deterministic repair of the SQL it writes
where it breaks one (``answering/aggregate/repair.py``), measured as needed with a 1.5B model (``STATUS = 'open'``).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from llm_server import ScriptedLLM

from oracle_rag.answering.aggregate import AggregateService
from oracle_rag.answering.aggregate.catalog import REFERENCE_CATALOG, Catalog, Column, View
from oracle_rag.answering.aggregate.repair import repair
from oracle_rag.answering.chat import LLMClient
from oracle_rag.callers.access import load_caller
from oracle_rag.sources.reference import TaskSource

DONE = ", ".join(f"'{v}'" for v in TaskSource.meanings.done)  # from the source's declaration


def test_the_catalog_says_what_open_and_null_mean():
    text = REFERENCE_CATALOG.describe()
    assert f"STATUS NOT IN ({DONE}), every other value included" in text
    assert "ESTIMATED_HOURS NUMBER -- hours of work; NULL = not estimated (not 0)" in text
    rules = REFERENCE_CATALOG.rules()
    assert f"RAG_V_TASK rows: WHERE STATUS NOT IN ({DONE})" in rules and "BLOCKED are all open" in rules
    assert "an average is AVG(ESTIMATED_HOURS)" in rules and "never COALESCE(ESTIMATED_HOURS, 0)" in rules


def test_rules_come_from_the_declarations_not_from_tasks():
    """Another application's catalogue gets its own rules: its lifecycle's finished values, its measures."""
    catalog = Catalog(
        (
            View(
                "V_CASE",
                "support cases",
                (
                    Column(
                        "STAGE",
                        "TEXT",
                        values=("NEW", "WAITING", "SOLVED", "REJECTED"),
                        done=("SOLVED", "REJECTED"),
                    ),
                    Column("MINUTES", "NUMBER", null_means="not timed", unit="minutes"),
                ),
            ),
        )
    )
    rules = catalog.rules()
    assert (
        "V_CASE rows: WHERE STAGE NOT IN ('SOLVED', 'REJECTED')" in rules
        and "NEW, WAITING are all open" in rules
    )
    assert "V_CASE.MINUTES is NULL when not timed" in rules and "STATUS" not in rules
    mended = repair(
        "SELECT SUM(MINUTES) / COUNT(*) FROM V_CASE WHERE STAGE = 'open'",
        "average minutes of open cases",
        catalog,
        "sqlite",
    )
    assert mended.sql == (
        "SELECT AVG(MINUTES), COUNT(*) - COUNT(MINUTES) AS NOT_TIMED FROM V_CASE "
        "WHERE NOT STAGE IN ('SOLVED', 'REJECTED')"
    )


@pytest.mark.parametrize("dialect", ["sqlite", "oracle"])
@pytest.mark.parametrize(
    ("question", "sql", "mended"),
    [
        # a word that is not a value
        (
            "How many estimated hours do the open tasks add up to?",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS = 'open'",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE NOT STATUS IN ('DONE')",
        ),
        (
            "Suma de horas de las tareas abiertas",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS IN ('OPEN', 'pending')",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE NOT STATUS IN ('DONE')",
        ),
        # "open" that leaves BLOCKED out, or no filter at all
        (
            "Sum of story points of the open tasks",
            "SELECT SUM(STORY_POINTS) FROM RAG_V_TASK WHERE STATUS IN ('TODO', 'IN_PROGRESS', 'IN_REVIEW')",
            "SELECT SUM(STORY_POINTS) FROM RAG_V_TASK WHERE NOT STATUS IN ('DONE')",
        ),
        (
            "Highest story points among open tasks",
            "SELECT MAX(STORY_POINTS) FROM RAG_V_TASK",
            "SELECT MAX(STORY_POINTS) FROM RAG_V_TASK WHERE NOT STATUS IN ('DONE')",
        ),
        (
            "Sum of story points of the open tasks in sprint 4",
            "SELECT SUM(t.STORY_POINTS) FROM RAG_V_TASK t JOIN RAG_V_SPRINT s ON s.SPRINT_ID = t.SPRINT_ID "
            "WHERE s.NAME = 'Sprint 4'",
            "SELECT SUM(t.STORY_POINTS) FROM RAG_V_TASK{as}t JOIN RAG_V_SPRINT{as}s ON s.SPRINT_ID = t.SPRINT_ID "
            "WHERE s.NAME = 'Sprint 4' AND NOT t.STATUS IN ('DONE')",
        ),
        # a value in another case
        (
            "Total estimated hours of blocked tasks",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS = 'blocked'",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS = 'BLOCKED'",
        ),
        # NULL is not 0: averages over the estimated rows, and how many were left out
        (
            "Average estimated hours per priority",
            "SELECT PRIORITY, AVG(COALESCE(ESTIMATED_HOURS, 0)) AS H FROM RAG_V_TASK GROUP BY PRIORITY",
            "SELECT PRIORITY, AVG(ESTIMATED_HOURS) AS H, COUNT(*) - COUNT(ESTIMATED_HOURS) AS NOT_ESTIMATED "
            "FROM RAG_V_TASK GROUP BY PRIORITY",
        ),
        (
            "What is the average estimated hours per task?",
            "SELECT SUM(ESTIMATED_HOURS) / COUNT(*) AS AVG_HOURS FROM RAG_V_TASK",
            "SELECT AVG(ESTIMATED_HOURS) AS AVG_HOURS, COUNT(*) - COUNT(ESTIMATED_HOURS) AS NOT_ESTIMATED FROM RAG_V_TASK",
        ),
        # a value of another declared column, and NULL is not a value for MIN either
        (
            "Average story points of critical tasks",
            "SELECT AVG(T1.STORY_POINTS) FROM RAG_V_TASK AS T1 JOIN RAG_V_PROJECT AS T2 ON T1.PROJECT_ID = T2.PROJECT_ID "
            "WHERE T2.STATUS = 'CRITICAL'",
            "SELECT AVG(T1.STORY_POINTS), COUNT(*) - COUNT(T1.STORY_POINTS) AS NOT_ESTIMATED FROM RAG_V_TASK{as}T1 "
            "JOIN RAG_V_PROJECT{as}T2 ON T1.PROJECT_ID = T2.PROJECT_ID WHERE T1.PRIORITY = 'CRITICAL'",
        ),
        (
            "Mínimo de horas estimadas de las tareas críticas",
            "SELECT AVG(COALESCE(ESTIMATED_HOURS, 0)) AS M FROM RAG_V_TASK WHERE PRIORITY = 'CRITICAL'",
            "SELECT MIN(ESTIMATED_HOURS) AS M FROM RAG_V_TASK WHERE PRIORITY = 'CRITICAL'",
        ),
        (
            "Lowest estimated hours of a task",
            "SELECT MIN(COALESCE(ESTIMATED_HOURS, 0)) FROM RAG_V_TASK",
            "SELECT MIN(ESTIMATED_HOURS) FROM RAG_V_TASK",
        ),
        # the one state the question names (its declared words: "en progreso"), not a list around it
        (
            "Suma de horas estimadas de las tareas en progreso",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS IN ('IN_PROGRESS', 'IN_REVIEW', 'BLOCKED')",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS = 'IN_PROGRESS'",
        ),
        # a lookup view that does not exist, named for a view and its enum column, is that column
        (
            "Suma de puntos de historia por prioridad",
            "SELECT SUM(T1.STORY_POINTS) AS S, T2.PRIORITY FROM RAG_V_TASK AS T1 INNER JOIN RAG_V_TASK_PRIORITY AS T2 "
            "ON T1.PRIORITY = T2.PRIORITY GROUP BY T2.PRIORITY",
            "SELECT SUM(T1.STORY_POINTS) AS S, T1.PRIORITY FROM RAG_V_TASK{as}T1 GROUP BY T1.PRIORITY",
        ),
        # the aggregate the question asks for, not another
        (
            "Total estimated hours per priority",
            "SELECT PRIORITY, ROUND(AVG(ESTIMATED_HOURS), 2) AS H FROM RAG_V_TASK GROUP BY PRIORITY",
            "SELECT PRIORITY, ROUND(SUM(ESTIMATED_HOURS), 2) AS H FROM RAG_V_TASK GROUP BY PRIORITY",
        ),
        (
            "¿Cuál es la estimación máxima en horas de las tareas bloqueadas?",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS = 'BLOCKED'",
            "SELECT MAX(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS = 'BLOCKED'",
        ),
        (
            "Promedio de puntos de historia por estado",
            "SELECT STATUS, SUM(STORY_POINTS) FROM RAG_V_TASK GROUP BY STATUS",
            "SELECT STATUS, AVG(STORY_POINTS), COUNT(*) - COUNT(STORY_POINTS) AS NOT_ESTIMATED FROM RAG_V_TASK "
            "GROUP BY STATUS",
        ),
    ],
)
def test_sql_that_breaks_a_declared_meaning_is_mended(dialect, question, sql, mended):
    got = repair(sql, question, REFERENCE_CATALOG, dialect)
    assert got.sql == mended.format(**{"as": " AS " if dialect == "sqlite" else " "}) and got.notes


@pytest.mark.parametrize(
    ("question", "sql"),
    [
        ("How many open tasks are blocked?", "SELECT COUNT(*) FROM RAG_V_TASK WHERE STATUS = 'BLOCKED'"),
        ("Hours of the open tasks", "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS <> 'DONE'"),
        (
            "Hours of the tasks in the active sprint",  # "active" is a value of the sprint's status, not "open"
            "SELECT SUM(t.ESTIMATED_HOURS) FROM RAG_V_TASK t JOIN RAG_V_SPRINT s ON s.SPRINT_ID = t.SPRINT_ID "
            "WHERE s.STATUS = 'ACTIVE'",
        ),
        ("How many tasks are not done?", "SELECT COUNT(*) FROM RAG_V_TASK WHERE STATUS NOT IN ('DONE')"),
        (
            "Hours of tasks in progress or in review",
            "SELECT SUM(ESTIMATED_HOURS) FROM RAG_V_TASK WHERE STATUS IN ('IN_PROGRESS', 'IN_REVIEW')",
        ),
        (
            "Average hours of done tasks",
            "SELECT AVG(ESTIMATED_HOURS), COUNT(*) - COUNT(ESTIMATED_HOURS) AS NOT_ESTIMATED "
            "FROM RAG_V_TASK WHERE STATUS = 'DONE'",
        ),
        (
            "Total hours per priority",
            "SELECT PRIORITY, SUM(ESTIMATED_HOURS) FROM RAG_V_TASK GROUP BY PRIORITY",
        ),
        (
            "Total and average hours",
            "SELECT SUM(ESTIMATED_HOURS), MAX(ESTIMATED_HOURS) FROM RAG_V_TASK",
        ),  # two asked
        ("Total number of tasks per priority", "SELECT PRIORITY, COUNT(*) FROM RAG_V_TASK GROUP BY PRIORITY"),
        ("anything", "SELECT FROM WHERE"),  # unreadable: left to the guard
        (
            "anything",
            "SELECT COUNT(*) FROM RAG_V_TASK t JOIN RAG_V_FOO f ON f.ID = t.TASK_ID",
        ),  # the guard refuses it
    ],
)
def test_sql_that_keeps_the_meanings_is_left_as_written(question, sql):
    got = repair(sql, question, REFERENCE_CATALOG, "sqlite")
    assert got.sql == sql and got.notes == []


def test_the_query_model_receives_the_meanings_and_the_answer_states_what_was_counted(demo_rag):
    with demo_rag.engine.connect() as conn:
        manager = load_caller(conn, 3)
    with ScriptedLLM() as llm:
        llm.push(
            '{"sql": "SELECT AVG(ESTIMATED_HOURS) AS AVG_HOURS, COUNT(ESTIMATED_HOURS) AS ESTIMATED, '
            'COUNT(*) - COUNT(ESTIMATED_HOURS) AS NOT_ESTIMATED FROM RAG_V_TASK"}'
        )
        settings = demo_rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
        result = AggregateService(demo_rag.engine, settings).ask(
            "average hours per task?", manager, LLMClient(settings).complete
        )
        system = llm.requests[0].system
    assert "A column's comment says what its values and NULL mean" in system
    assert REFERENCE_CATALOG.rules() in system and f"WHERE STATUS NOT IN ({DONE})" in system
    assert result.error is None and result.columns == ["AVG_HOURS", "ESTIMATED", "NOT_ESTIMATED"]
    assert result.repairs == []
    assert "NOT_ESTIMATED" in result.answer  # the computed part shown first names what was left out


def test_a_mended_query_counts_what_open_means_and_says_so(demo_rag):
    """The model's "open" left BLOCKED out; the mended query matches SQL truth over the reference table."""
    with demo_rag.engine.connect() as conn:
        manager = load_caller(conn, 3)
        truth = conn.execute(
            sa.text("SELECT SUM(ESTIMATED_HOURS) FROM TASK WHERE STATUS NOT IN ('DONE')")
        ).scalar()
        without_blocked = conn.execute(
            sa.text(
                "SELECT SUM(ESTIMATED_HOURS) FROM TASK WHERE STATUS IN ('TODO', 'IN_PROGRESS', 'IN_REVIEW')"
            )
        ).scalar()
    assert truth != without_blocked  # the demo has blocked tasks with hours: the test can fail
    with ScriptedLLM() as llm:
        llm.push(
            '{"sql": "SELECT SUM(ESTIMATED_HOURS) AS HOURS FROM RAG_V_TASK '
            "WHERE STATUS IN ('TODO', 'IN_PROGRESS', 'IN_REVIEW')\"}"
        )
        settings = demo_rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
        result = AggregateService(demo_rag.engine, settings).ask(
            "How many hours do my open tasks add up to?", manager, LLMClient(settings).complete
        )
    assert result.error is None and result.rows == [[pytest.approx(truth)]]
    assert (
        result.repairs == ["open = STATUS NOT IN (DONE)"] and "open = STATUS NOT IN (DONE)" in result.answer
    )


def test_the_query_is_asked_at_temperature_0_and_a_reply_that_is_not_json_is_asked_again(demo_rag):
    """A local server samples at its default temperature (0.8 in llama.cpp): a query is the most likely one.
    A reply that is only a query is taken; prose is asked again, like a refused query, not an error."""
    with demo_rag.engine.connect() as conn:
        manager = load_caller(conn, 3)
        truth = conn.execute(sa.text("SELECT MAX(STORY_POINTS) FROM TASK")).scalar()
    with ScriptedLLM() as llm:
        llm.push(
            "Sure! Here is the answer you want.",
            "```sql\nSELECT MAX(STORY_POINTS) AS M FROM RAG_V_TASK;\n```",
        )
        settings = demo_rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
        result = AggregateService(demo_rag.engine, settings).ask(
            "largest story points?", manager, LLMClient(settings).complete_query
        )
        bodies = [r.body for r in llm.requests]
    assert result.error is None and result.rows == [[truth]] and result.attempts == 2
    assert [b["temperature"] for b in bodies] == [0.0, 0.0]
    assert bodies[1]["messages"][-1]["content"].startswith("Reply with JSON only")
