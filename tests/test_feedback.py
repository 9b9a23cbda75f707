"""Feedback on answers (issue 26): POST /api/feedback on the indexed demo database, real tokens,
real SQLite; the stored rows read back through the store and the CLI."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from chat_helpers import DEV_A, DEV_B, bearer, issue_tokens

from oracle_rag.chat.feedback import FeedbackStore
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
    r = web.client.post("/api/feedback", json={"message_id": answer["message_id"], "rating": "down",
                                               "comment": "  wrong count "}, headers=web.as_(DEV_A))
    assert r.status_code == 201, r.data
    assert r.get_json() == {"recorded": True, "message_id": answer["message_id"], "rating": "down"}
    [row] = FeedbackStore(web.rag.engine).list()
    assert (row.message_id, row.caller_id, row.rating, row.comment) == (answer["message_id"], DEV_A, -1, "wrong count")
    assert row.question == "how many open tasks are there?"
    assert row.answer == answer["answer"]
    if answer["structured"] is not None:
        assert row.understood == {"kind": answer["structured"]["kind"], "filters": answer["structured"]["filters"]}
    sql = (answer.get("aggregate") or {}).get("sql")
    assert row.guarded_sql == sql


def test_the_stored_id_is_the_answer_in_the_conversation(web) -> None:
    first = ask(web, DEV_A, "what is blocked?")
    second = web.client.post("/api/chat", json={"question": "and what about sprint 2?",
                                                "conversation_id": first["conversation_id"]},
                             headers=web.as_(DEV_A)).get_json()
    assert second["message_id"] > first["message_id"]
    conv = web.client.get(f"/api/conversations/{first['conversation_id']}", headers=web.as_(DEV_A)).get_json()
    assert [m["content"] for m in conv["messages"] if m["role"] == "assistant"] == [first["answer"], second["answer"]]
    web.client.post("/api/feedback", json={"message_id": second["message_id"], "rating": "up"}, headers=web.as_(DEV_A))
    [row] = FeedbackStore(web.rag.engine).list(rating=1)
    assert (row.question, row.answer) == ("and what about sprint 2?", second["answer"])


def test_another_callers_answer_a_question_or_a_missing_id_is_404(web) -> None:
    answer = ask(web, DEV_A, "what is blocked?")
    for who, message_id in ((DEV_B, answer["message_id"]), (DEV_A, answer["message_id"] - 1),
                            (DEV_A, answer["message_id"] + 1000)):
        r = web.client.post("/api/feedback", json={"message_id": message_id, "rating": "up"}, headers=web.as_(who))
        assert r.status_code == 404 and r.get_json()["code"] == "NOT_FOUND", (who, message_id, r.data)
    assert FeedbackStore(web.rag.engine).list() == []


@pytest.mark.parametrize("body", [
    {"rating": "up"}, {"message_id": "1", "rating": "up"}, {"message_id": True, "rating": "up"},
    {"message_id": 1, "rating": "meh"}, {"message_id": 1}, {"message_id": 1, "rating": "up", "comment": 5},
    {"message_id": 1, "rating": "up", "comment": "x" * 2001}, {"message_id": 1, "rating": "up", "extra": 1},
])
def test_invalid_bodies_are_400(web, body) -> None:
    r = web.client.post("/api/feedback", json=body, headers=web.as_(DEV_A))
    assert r.status_code == 400 and r.get_json()["status"] == 400, r.data


def test_without_a_token_it_is_401(web) -> None:
    assert web.client.post("/api/feedback", json={"message_id": 1, "rating": "up"}).status_code == 401


def test_openapi_documents_feedback(web) -> None:
    spec = web.client.get("/api/openapi.json").get_json()
    assert "201" in spec["paths"]["/api/feedback"]["post"]["responses"]
    assert "message_id" in spec["components"]["schemas"]["ChatAnswer"]["properties"]
