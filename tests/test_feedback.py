"""Feedback on answers: POST /api/feedback on the indexed demo database, real tokens,
real SQLite; the stored rows read back through the store and the CLI."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from chat_helpers import DEV_A, DEV_B, bearer, issue_tokens

from oracle_rag.answering.chat.feedback import FeedbackStore
from oracle_rag.web import create_app


@pytest.fixture
def web(demo_rag) -> SimpleNamespace:
    tokens = issue_tokens(demo_rag)
    app = create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None, "TESTING": True})
    return SimpleNamespace(client=app.test_client(), rag=demo_rag, as_=lambda e: bearer(tokens[e]))


def ask(web, who: int, question: str) -> dict:
    r = web.client.post("/api/chat", json={"question": question}, headers=web.as_(who))
    assert r.status_code == 200, r.data[:300]
    return r.get_json()


def test_an_answer_is_rated_with_what_was_understood(web) -> None:
    answer = ask(web, DEV_A, "how many open tasks are there?")
    assert isinstance(answer["message_id"], int)
    r = web.client.post(
        "/api/feedback",
        json={"message_id": answer["message_id"], "rating": "down", "comment": "  wrong count "},
        headers=web.as_(DEV_A),
    )
    assert r.status_code == 201, r.data
    assert r.get_json() == {"recorded": True, "message_id": answer["message_id"], "rating": "down"}
    [row] = FeedbackStore(web.rag.engine).list()
    assert (row.message_id, row.caller_id, row.rating, row.comment) == (
        answer["message_id"],
        DEV_A,
        -1,
        "wrong count",
    )
    assert row.question == "how many open tasks are there?"
    assert row.answer == answer["answer"]
    if answer["structured"] is not None:
        s = answer["structured"]
        assert row.understood == {"kind": s["kind"], "filters": s["filters"], "language": s["language"]}
    sql = (answer.get("aggregate") or {}).get("sql")
    assert row.guarded_sql == sql


def test_the_stored_id_is_the_answer_in_the_conversation(web) -> None:
    first = ask(web, DEV_A, "what is blocked?")
    second = web.client.post(
        "/api/chat",
        json={"question": "and what about sprint 2?", "conversation_id": first["conversation_id"]},
        headers=web.as_(DEV_A),
    ).get_json()
    assert second["message_id"] > first["message_id"]
    conv = web.client.get(f"/api/conversations/{first['conversation_id']}", headers=web.as_(DEV_A)).get_json()
    assert [m["content"] for m in conv["messages"] if m["role"] == "assistant"] == [
        first["answer"],
        second["answer"],
    ]
    web.client.post(
        "/api/feedback", json={"message_id": second["message_id"], "rating": "up"}, headers=web.as_(DEV_A)
    )
    [row] = FeedbackStore(web.rag.engine).list(rating=1)
    assert (row.question, row.answer) == ("and what about sprint 2?", second["answer"])


def test_another_callers_answer_a_question_or_a_missing_id_is_404(web) -> None:
    answer = ask(web, DEV_A, "what is blocked?")
    for who, message_id in (
        (DEV_B, answer["message_id"]),
        (DEV_A, answer["message_id"] - 1),
        (DEV_A, answer["message_id"] + 1000),
    ):
        r = web.client.post(
            "/api/feedback", json={"message_id": message_id, "rating": "up"}, headers=web.as_(who)
        )
        assert r.status_code == 404 and r.get_json()["code"] == "NOT_FOUND", (who, message_id, r.data)
    assert FeedbackStore(web.rag.engine).list() == []


@pytest.mark.parametrize(
    "body",
    [
        {"rating": "up"},
        {"message_id": "1", "rating": "up"},
        {"message_id": True, "rating": "up"},
        {"message_id": 1, "rating": "meh"},
        {"message_id": 1},
        {"message_id": 1, "rating": "up", "comment": 5},
        {"message_id": 1, "rating": "up", "comment": "x" * 2001},
        {"message_id": 1, "rating": "up", "extra": 1},
    ],
)
def test_invalid_bodies_are_400(web, body) -> None:
    r = web.client.post("/api/feedback", json=body, headers=web.as_(DEV_A))
    assert r.status_code == 400 and r.get_json()["status"] == 400, r.data


def test_without_a_token_it_is_401(web) -> None:
    assert web.client.post("/api/feedback", json={"message_id": 1, "rating": "up"}).status_code == 401


def test_openapi_documents_feedback(web) -> None:
    spec = web.client.get("/api/openapi.json").get_json()
    assert "201" in spec["paths"]["/api/feedback"]["post"]["responses"]
    assert "message_id" in spec["components"]["schemas"]["ChatAnswer"]["properties"]


def test_cli_lists_and_exports_ratings_as_a_question_set(web, cli, tmp_path) -> None:
    up = ask(web, DEV_A, "how many open tasks are there?")
    down = ask(web, DEV_B, "what is blocked?")
    for who, answer, rating in ((DEV_A, up, "up"), (DEV_B, down, "down")):
        r = web.client.post(
            "/api/feedback",
            json={"message_id": answer["message_id"], "rating": rating, "comment": f"{rating} comment"},
            headers=web.as_(who),
        )
        assert r.status_code == 201
    listed = cli("feedback", "list", "--json")
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert [(r["caller_id"], r["rating"]) for r in rows] == [(DEV_A, "up"), (DEV_B, "down")]
    only_down = cli("feedback", "list", "--rating", "down")
    assert (
        only_down.exit_code == 0
        and "what is blocked?" in only_down.output
        and "open tasks" not in only_down.output
    )
    assert cli("feedback", "list", "--since", "2999-01-01").output == ""
    assert cli("feedback", "list", "--since", "yesterday").exit_code != 0

    out = tmp_path / "fb.json"
    result = cli("feedback", "export", "--out", out, "--rating", "down")
    assert result.exit_code == 0, result.output
    [item] = json.loads(out.read_text(encoding="utf-8"))["questions"]
    assert item["question"] == "what is blocked?" and item["as"] == DEV_B and item["rating"] == "down"
    assert item["answer_given"] == down["answer"] and item["truth"] is None and item["needs_truth"] is True
    assert {"id", "category", "lang", "as", "question", "truth"} <= set(item)


def test_bench_qa_skips_items_that_need_truth(tmp_path) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import qa

    path = tmp_path / "set.json"
    path.write_text(
        json.dumps(
            {
                "questions": [
                    {
                        "id": "a",
                        "category": "count",
                        "lang": "en",
                        "as": 3,
                        "question": "q",
                        "truth": "SELECT 1",
                    },
                    {
                        "id": "fb1",
                        "category": "topic",
                        "lang": "en",
                        "as": 3,
                        "question": "q",
                        "truth": None,
                        "needs_truth": True,
                    },
                ]
            }
        ),
        encoding="utf-8",
    )
    assert [q["id"] for q in qa.load_questions(path)] == ["a"]


def test_accepted_aggregate_sql_becomes_an_example_for_its_caller(demo_rag) -> None:
    from llm_server import ScriptedLLM

    from oracle_rag.answering.aggregate.service import AggregateService
    from oracle_rag.answering.chat import LLMClient
    from oracle_rag.answering.chat.conversations import ConversationStore, new_conversation_id
    from oracle_rag.callers.access import load_caller

    store, feedback = ConversationStore(demo_rag.engine), FeedbackStore(demo_rag.engine)
    up_sql = "SELECT AVG(ESTIMATED_HOURS) AS AVG_HOURS FROM RAG_V_TASK WHERE STATUS = 'OPEN'"
    down_sql = "SELECT SUM(ESTIMATED_HOURS) AS WRONG FROM RAG_V_TASK"
    for who, asked, sql, rating in (
        (DEV_B, "average estimated hours of open tasks", up_sql, 1),
        (DEV_B, "average estimated hours of open tasks please", down_sql, -1),
    ):
        message_id = store.append_turn(new_conversation_id(), who, asked, "42", [], new=True, guarded_sql=sql)
        feedback.record(message_id, who, rating, None)
    with demo_rag.engine.connect() as conn:
        manager, rater = load_caller(conn, 3), load_caller(conn, DEV_B)
    with ScriptedLLM() as llm:
        llm.push(*['{"sql": "SELECT COUNT(*) AS N FROM RAG_V_TASK"}'] * 3)
        settings = demo_rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
        service = AggregateService(demo_rag.engine, settings)
        for who, asked in (
            (rater, "what are the average estimated hours of open tasks?"),
            (rater, "how many sprints are there?"),
            (manager, "what are the average estimated hours of open tasks?"),
        ):
            service.ask(asked, who, LLMClient(settings).complete)
        similar, unrelated, other = (r.messages for r in llm.requests)
    [example] = json.loads(similar[1]["content"].split("\n", 3)[3])
    assert example == {
        "question": "average estimated hours of :text tasks",
        "sql": "SELECT AVG(ESTIMATED_HOURS) AS AVG_HOURS FROM RAG_V_TASK WHERE STATUS = :text",
    }
    assert "RAG_V_TASK WHERE STATUS" not in similar[0]["content"]  # never in the system prompt
    assert down_sql not in json.dumps(similar)  # a "down" answer is never an example
    assert unrelated[1]["content"] == "how many sprints are there?"
    assert other[1]["content"] == "what are the average estimated hours of open tasks?"  # not the rater's
