"""Structured answers end to end on the indexed demo database: every number and record against SQL truth.

The truth is computed here from the reference tables (TASK, SPRINT, PROJECT,
EMPLOYEE) and the scope rule (managers see every task, developers their own),
never from RAG_CHUNK, so these tests also check the facets the indexer wrote.
Entry points: ``Chat.answer``, ``POST /api/chat``, ``/api/chat/stream`` and
``oracle-rag ask``; with a model, the scripted OpenAI-protocol server.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from chat_helpers import DEV_A, DEV_B, MANAGER, parse_sse
from llm_server import Reply, ScriptedLLM
from test_web_api import make_web

from oracle_rag.answering.chat import Chat, LLMClient
from oracle_rag.callers.access import load_caller
from oracle_rag.engines import facets_value

TODAY = dt.date(2026, 3, 11)
VISIBLE = "WITH V AS (SELECT t.* FROM TASK t WHERE :all = 1 OR t.ASSIGNEE_ID = :me) "


def truth(rag, caller, where: str, **binds) -> set[str]:
    sql = VISIBLE + (
        "SELECT t.TASK_ID FROM V t LEFT JOIN SPRINT s ON s.SPRINT_ID = t.SPRINT_ID "
        "LEFT JOIN PROJECT p ON p.PROJECT_ID = t.PROJECT_ID WHERE " + where
    )
    with rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(sql), {"all": 1 if caller.sees_all else 0, "me": caller.employee_id, **binds}
        )
        return {str(r[0]) for r in rows}


def who(rag, employee_id):
    with rag.engine.connect() as conn:
        return load_caller(conn, employee_id)


def chat(rag, **kw) -> Chat:
    return Chat(rag, None, today=lambda: TODAY, **kw)


def cited_tasks(answer) -> set[str]:
    return {c.source_id for c in answer.citations if c.source_type == "TASK"}


def first_number(text: str) -> int:
    return int(re.match(r"\D*?(\d+)", text.split("\n", 1)[0]).group(1))


@pytest.mark.parametrize("employee", [MANAGER, DEV_A])
@pytest.mark.parametrize(
    ("question", "where"),
    [
        ("which tasks are blocked in the current sprint?", "t.STATUS = 'BLOCKED' AND s.STATUS = 'ACTIVE'"),
        ("which critical tasks are not done yet?", "t.PRIORITY = 'CRITICAL' AND t.STATUS <> 'DONE'"),
        (
            "¿qué tareas de Atlas Billing están en revisión?",
            "t.STATUS = 'IN_REVIEW' AND p.NAME = 'Atlas Billing'",
        ),
        (
            "which of my tasks are overdue?",
            "t.ASSIGNEE_ID = :me AND t.DUE_DATE < '2026-03-11' AND t.STATUS <> 'DONE'",
        ),
        ("unassigned high priority tasks", "t.ASSIGNEE_ID IS NULL AND t.PRIORITY = 'HIGH'"),
        ("open tasks in sprint 12", "t.SPRINT_ID = 12 AND t.STATUS <> 'DONE'"),
    ],
)
def test_a_filter_cites_exactly_the_matching_visible_records(demo_rag, employee, question, where):
    caller = who(demo_rag, employee)
    want = truth(demo_rag, caller, where)
    answer = chat(demo_rag).answer(question, caller, store=False)
    assert answer.answerer == "structured" and answer.route == "structured"
    assert answer.structured is not None and answer.structured["total"] == len(want)
    got = cited_tasks(answer)
    if not want:
        assert answer.citations == [] and answer.answer.startswith(("No ", "Ninguna ", "Ningún "))
    elif len(want) <= demo_rag.settings.list_limit:
        assert got == want
    else:
        assert (
            first_number(answer.answer) == len(want)
            and got <= want
            and len(got) == demo_rag.settings.list_limit
        )
    assert len(answer.citations) == len(answer.structured["records"])


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_filters_apply_before_ranking_in_every_search_mode(demo_rag, mode):
    caller = who(demo_rag, MANAGER)
    want = truth(demo_rag, caller, "t.STATUS <> 'DONE' AND p.NAME = 'Nova Mobile'")
    answer = chat(demo_rag).answer(
        "open tasks in Nova Mobile about SSO with Azure AD", caller, mode=mode, store=False
    )
    got = cited_tasks(answer)
    assert got and got <= want and answer.structured["total"] == len(want)
    assert answer.structured["topic"] == "SSO Azure AD"
    # only the records about the topic are listed: each holds both words; every open Nova Mobile task titled
    # with them is one of them, and the answer says how many match the filters but not the topic
    titled = truth(
        demo_rag, caller, "t.STATUS <> 'DONE' AND p.NAME = 'Nova Mobile' AND t.TITLE LIKE '%SSO with Azure%'"
    )
    assert titled and titled <= got and all(holds_words(demo_rag, task, ("sso", "azure")) for task in got)
    assert f"{len(want) - len(got)} match the filters but not \u201cSSO Azure AD\u201d" in answer.answer


def holds_words(rag, task_id: str, stems: tuple[str, ...]) -> bool:
    """The task's own text (title, description, comments) holds every one of ``stems``."""
    with rag.engine.connect() as conn:
        text = " ".join(
            str(v)
            for v in conn.execute(
                sa.text(
                    "SELECT TITLE, COALESCE(DESCRIPTION, '') FROM TASK WHERE TASK_ID = :t UNION ALL "
                    "SELECT BODY, '' FROM TASK_COMMENT WHERE TASK_ID = :t"
                ),
                {"t": int(task_id)},
            ).fetchall()
            for v in v
        ).lower()
    return all(stem in text for stem in stems)


def test_a_filter_with_a_topic_nothing_is_about_answers_the_topic_without_it(demo_rag):
    """No blocked task is about the topic: said, and the topic answered without the filter, naming it."""
    caller = who(demo_rag, MANAGER)
    answer = chat(demo_rag).answer("which blocked tasks are about SSO with Azure AD?", caller, store=False)
    blocked = truth(demo_rag, caller, "t.STATUS = 'BLOCKED'")
    about = truth(demo_rag, caller, "t.TITLE LIKE '%SSO with Azure%'")
    assert blocked and about and not blocked & about  # the demo's data: the premise of the question
    first = answer.answer.split("\n", 1)[0]
    assert first == (
        f"None of the {len(blocked)} tasks matching status: BLOCKED is about \u201cSSO Azure AD\u201d; "
        "without status: BLOCKED, about \u201cSSO Azure AD\u201d:"
    )
    assert answer.route == "retrieval" and cited_tasks(answer) and cited_tasks(answer) <= about


@pytest.mark.parametrize("employee", [MANAGER, DEV_B])
def test_counts_are_sql_over_the_callers_scope(demo_rag, employee):
    caller = who(demo_rag, employee)
    c = chat(demo_rag)
    blocked = truth(demo_rag, caller, "t.STATUS = 'BLOCKED'")
    answer = c.answer("how many tasks are blocked?", caller, store=False)
    assert first_number(answer.answer) == len(blocked) and answer.structured["count"] == len(blocked)
    per = c.answer("¿cuántas tareas en progreso hay por proyecto?", caller, store=False)
    with demo_rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                VISIBLE + "SELECT p.NAME, COUNT(*) FROM V t JOIN PROJECT p "
                "ON p.PROJECT_ID = t.PROJECT_ID WHERE t.STATUS = 'IN_PROGRESS' GROUP BY p.NAME"
            ),
            {"all": 1 if caller.sees_all else 0, "me": caller.employee_id},
        ).fetchall()
    lines = per.answer.split("\n")
    assert sum(n for _, n in rows) == first_number(per.answer)
    for name, n in rows:
        assert f"{name}: {n}" in lines
    assert len([line for line in lines if re.match(r"^[^:]+: \d+$", line)]) == len(rows)
    assert {r["label"]: r["count"] for r in per.structured["groups"]["rows"]} == {name: n for name, n in rows}


def test_a_hidden_record_reads_exactly_like_a_missing_one(demo_rag):
    c = chat(demo_rag)
    dev = who(demo_rag, DEV_A)
    with demo_rag.engine.connect() as conn:
        foreign = conn.execute(
            sa.text("SELECT MIN(TASK_ID) FROM TASK WHERE ASSIGNEE_ID <> :me"), {"me": DEV_A}
        ).scalar()
        own = conn.execute(
            sa.text("SELECT MIN(TASK_ID) FROM TASK WHERE ASSIGNEE_ID = :me"), {"me": DEV_A}
        ).scalar()
    hidden = c.answer(f"task {foreign}", dev, store=False)
    missing = c.answer("task 987654", dev, store=False)
    assert hidden.answer == missing.answer and hidden.citations == missing.citations == []
    assert str(foreign) not in hidden.answer and json.dumps(hidden.structured).find(str(foreign)) == -1
    for form in (
        f"task {own}",
        f"#{own}",
        f"TASK-{own}",
        f"tarea {own}",
        f"summarize the comments on task {own}",
    ):
        answer = c.answer(form, dev, store=False)
        assert (answer.citations[0].source_type, answer.citations[0].source_id) == ("TASK", str(own)), form
    manager = c.answer(f"task {foreign}", who(demo_rag, MANAGER), store=False)
    assert manager.citations[0].source_id == str(foreign)
    sprint = c.answer("what is the goal of sprint 7?", dev, store=False)
    assert (sprint.citations[0].source_type, sprint.citations[0].source_id) == ("SPRINT", "7")


def test_unknown_names_are_reported_not_dropped(demo_rag):
    answer = chat(demo_rag).answer(
        "blocked tasks in project Atlas Bling", who(demo_rag, MANAGER), store=False
    )
    assert answer.answer.startswith("No project named 'Atlas Bling' \u2014 did you mean Atlas Billing?")
    assert answer.citations == [] and answer.structured["notices"][0]["suggestion"] == "Atlas Billing"
    # one typo is read as the name it is one edit from, and said
    typo = chat(demo_rag).answer("blocked tasks in project Atlas Biling", who(demo_rag, MANAGER), store=False)
    assert typo.structured["read_as"] == ["billing"] and "Read as: billing." in typo.answer


def test_the_indexer_wrote_every_tasks_facets(demo_rag):
    with demo_rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT t.TASK_ID, t.STATUS, t.PRIORITY, t.ASSIGNEE_ID, t.PROJECT_ID, t.SPRINT_ID, s.STATUS, t.DUE_DATE, "
                "c.FACETS FROM TASK t LEFT JOIN SPRINT s ON s.SPRINT_ID = t.SPRINT_ID JOIN RAG_CHUNK c "
                "ON c.SOURCE_TYPE = 'TASK' AND c.SOURCE_ID = CAST(t.TASK_ID AS TEXT)"
            )
        ).fetchall()
    assert rows
    for r in rows:
        assert facets_value(r[8]) == {
            "status": r[1],
            "priority": r[2],
            "assignee_id": r[3],
            "project_id": r[4],
            "sprint_id": r[5],
            "sprint_status": r[6],
            "due_date": r[7],
        }, r[0]


def test_api_fields_chips_and_dropping_a_filter(demo_rag):
    web = make_web(demo_rag)
    body = web.client.post(
        "/api/chat", headers=web.as_(MANAGER), json={"question": "what is blocked in the current sprint?"}
    ).get_json()
    s = body["structured"]
    assert s["kind"] == "list" and [f["key"] for f in s["filters"]] == ["status", "sprint_status"]
    assert [f["label"] for f in s["filters"]] == ["status: BLOCKED", "sprint status: ACTIVE"]
    assert s["columns"][:2] == ["status", "priority"] and s["records"][0]["values"]["status"] == "BLOCKED"
    wider = web.client.post(
        "/api/chat",
        headers=web.as_(MANAGER),
        json={"question": "what is blocked in the current sprint?", "drop_filters": ["sprint_status"]},
    ).get_json()["structured"]
    assert [f["key"] for f in wider["filters"]] == ["status"] and wider["dropped"] == ["sprint_status"]
    assert wider["total"] > s["total"]
    bad = web.client.post(
        "/api/chat", headers=web.as_(MANAGER), json={"question": "x", "drop_filters": "status"}
    )
    assert bad.status_code == 400 and bad.get_json()["code"] == "INPUT"


def test_the_stream_carries_the_same_answer(demo_rag):
    web = make_web(demo_rag)
    question = {"question": "how many tasks per status?"}
    plain = web.client.post("/api/chat", headers=web.as_(MANAGER), json=question).get_json()
    events = parse_sse(
        web.client.post("/api/chat/stream", headers=web.as_(MANAGER), json=question).get_data(as_text=True)
    )
    done = events[-1][1]
    assert events[-1][0] == "done" and done["answer"] == plain["answer"]
    assert "".join(e[1]["text"] for e in events if e[0] == "token") == plain["answer"]
    assert done["structured"]["groups"] == plain["structured"]["groups"]


def test_cli_ask_answers_counts_exactly(demo_rag, tmp_path: Path):
    from click.testing import CliRunner

    from oracle_rag.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{demo_rag.settings.data_dir}"\n')
    result = CliRunner().invoke(
        main,
        [
            "--config",
            str(cfg),
            "ask",
            "how many critical tasks are not done?",
            "--as",
            str(MANAGER),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    want = truth(demo_rag, who(demo_rag, MANAGER), "t.PRIORITY = 'CRITICAL' AND t.STATUS <> 'DONE'")
    assert body["structured"]["count"] == len(want) and first_number(body["answer"]) == len(want)


def test_with_a_model_the_numbers_and_records_come_from_sql(demo_rag):
    caller = who(demo_rag, MANAGER)
    want = truth(demo_rag, caller, "t.STATUS = 'BLOCKED' AND s.STATUS = 'ACTIVE'")
    first = sorted(want, key=int)[0]
    with ScriptedLLM() as llm:
        settings = demo_rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
        c = Chat(demo_rag, LLMClient(settings), settings=settings, today=lambda: TODAY)
        llm.push(f"Several are blocked, for example [TASK #{first}]; I count 999 of them.")
        answer = c.answer("what is blocked in the current sprint?", caller, store=False)
        assert (
            answer.answerer == "llm" and not llm.route_requests
        )  # no router: understood before any model call
        head = answer.answer.split("\n", 1)[0]
        assert first_number(head) == len(want)  # the first line is computed, whatever the model says
        assert cited_tasks(answer) == want
        prompt = llm.requests[0].last_user
        assert (
            "<facts>" in prompt
            and f"{len(want)} tasks match" in prompt
            and f'"id": "TASK #{first}"' in prompt
        )
        assert "999" not in answer.answer and answer.checked == {
            "sentences": 1,
            "removed": 1,
        }  # a count it made up
        llm.push(Reply(text="Mostly payments.", pieces=["Mostly ", "payments."]))
        events = list(c.stream("what is blocked in the current sprint?", caller, store=False))
        assert events[0].text.startswith(head) and events[-1].answer is not None
        assert cited_tasks(events[-1].answer) == want


def test_a_sql_source_declares_facet_columns_and_questions_use_them(rag, make_settings, tmp_path: Path):
    import sqlean

    from oracle_rag.system import RagSystem

    crm = tmp_path / "crm.db"
    with sqlean.connect(str(crm)) as conn:
        conn.execute("CREATE TABLE tickets (id INTEGER PRIMARY KEY, body TEXT, severity TEXT, region TEXT)")
        rows = [
            (
                i,
                f"ticket {i} about the {'billing' if i % 2 else 'login'} page",
                ["low", "high", "urgent"][i % 3],
                ["EMEA", "APAC"][i % 2],
            )
            for i in range(1, 31)
        ]
        conn.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?)", rows)
    settings = make_settings(
        sources={
            "tickets": {
                "query": "SELECT id, body AS content, severity, region FROM tickets",
                "url": f"sqlite:///{crm}",
                "facet_columns": ["severity", "region"],
            }
        }
    )
    system = RagSystem(settings, engine=rag.engine)
    system.sql_sources().sync()
    c = Chat(system, None, today=lambda: TODAY)
    with rag.engine.connect() as conn:
        conn.execute(sa.text("INSERT INTO EMPLOYEE VALUES (3, 'M', 'One', 'manager')"))
        conn.commit()
        caller = load_caller(conn, 3)
    answer = c.answer("how many tickets per region?", caller, store=False)
    want = {region: sum(1 for r in rows if r[3] == region) for region in ("EMEA", "APAC")}
    assert answer.structured["groups"]["facet"] == "region"
    assert {r["label"]: r["count"] for r in answer.structured["groups"]["rows"]} == want
    listed = c.answer("urgent tickets in APAC", caller, store=False)
    assert {cit.source_id for cit in listed.citations} == {
        f"tickets#{r[0]}" for r in rows if r[2] == "urgent" and r[3] == "APAC"
    }


def test_a_type_asked_for_by_its_word_is_answered_with_the_part_asked_for(demo_rag):
    """ "which sprint ... is active and what is its goal?": the sprints, not their tasks, and the goal shown;
    "goal" asks for a part of the record, so it ranks the lines shown and restricts nothing."""
    caller = who(demo_rag, MANAGER)
    answer = chat(demo_rag).answer(
        "which sprint of Atlas Billing is active and what is its goal?", caller, store=False
    )
    with demo_rag.engine.connect() as conn:
        active = {
            str(r[0])
            for r in conn.execute(
                sa.text(
                    "SELECT s.SPRINT_ID FROM SPRINT s JOIN PROJECT p ON p.PROJECT_ID = s.PROJECT_ID "
                    "WHERE p.NAME = 'Atlas Billing' AND s.STATUS = 'ACTIVE'"
                )
            )
        }
    assert active and {c.source_id for c in answer.citations if c.source_type == "SPRINT"} == active
    assert (
        answer.structured["type"] == "SPRINT" and "Goal:" in answer.answer and " about " not in answer.answer
    )


def test_an_aggregate_without_a_model_is_not_called_unanswered(demo_rag):
    answer = chat(demo_rag).answer(
        "what is the largest estimate of any task?", who(demo_rag, MANAGER), store=False
    )
    assert answer.route == "retrieval" and "Nothing I can see says" not in answer.answer
