"""Rated answers as question -> SQL examples never cross callers, through the real server.

The app runs on waitress on 127.0.0.1; the language model is the recording OpenAI-protocol server
(tests/llm_server.py), so each test asserts on what the model actually received. A developer's
private task title goes into an aggregate question and the SQL the model writes for it; the answer
is rated up. Then:

- another developer's SQL prompt holds neither the title nor the example, anywhere (system or user);
- the rater's own next similar question gets the example, with every literal a placeholder, as
  JSON data in the user turn; the system prompt holds no example;
- ``oracle-rag feedback approve`` offers it to others (masked); ``--withdraw`` takes that back;
- a later "down" rating retires the example (the newest rating counts);
- ratings are limited per caller (an injected clock): 429 with Retry-After on /api and /v1;
- a message id past 2^63 - 1 is a 404 on /api/feedback and /v1/feedback, never a 500.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from chat_helpers import DEV_A, DEV_B, MANAGER, issue_tokens, rewrite_task, task_chunks_of
from llm_server import ScriptedLLM

from oracle_rag.answering.aggregate.examples import example_of, list_examples
from oracle_rag.answering.chat import LLMClient
from oracle_rag.web import create_app
from oracle_rag.web.server import make_server, serve_until
from oracle_rag.web.state import EXTENSION

AGG_ONLY = '{"retrieval": false, "aggregation": true}'
SQL_MARKER = "You write one read-only SQL query"
SECRET = "Quarterly layoffs"
SECRET_SQL = f"SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE TITLE LIKE '%{SECRET}%' AND ESTIMATED_HOURS > 12"
QUESTION = f"how many of my tasks mention {SECRET} and take more than 12 hours of effort"
LIKE_QUESTION = "how many of my tasks mention budget cuts and take more than 40 hours of effort"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world(demo_rag) -> Iterator[SimpleNamespace]:
    own = task_chunks_of(demo_rag, DEV_A)[0]
    rewrite_task(demo_rag, own.task_id, title=f"{SECRET} plan")
    tokens = issue_tokens(demo_rag, (DEV_A, DEV_B, MANAGER))
    with ScriptedLLM().start() as llm:
        settings = demo_rag.settings.with_overrides(
            llm_url=llm.url, llm_model="m", llm_api_key="k", llm_max_retries=0, llm_timeout_s=30.0
        )
        app = create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": LLMClient(settings)})
        clock = Clock()
        app.extensions[EXTENSION].feedback.limit.clock = clock
        server = make_server(app, "127.0.0.1", 0, threads=4)
        stop = threading.Event()
        thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
        thread.start()
        try:
            yield SimpleNamespace(
                rag=demo_rag,
                llm=llm,
                tokens=tokens,
                clock=clock,
                settings=settings,
                base=f"http://127.0.0.1:{server.effective_port}",
            )
        finally:
            stop.set()
            thread.join(120)
            assert not thread.is_alive()


def call(
    world: SimpleNamespace, path: str, body: dict[str, Any], who: int
) -> tuple[int, dict[str, Any], Any]:
    request = urllib.request.Request(
        world.base + path,
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {world.tokens[who]}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (a local URL)
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


def ask_aggregate(world: SimpleNamespace, who: int, question: str, sql: str) -> tuple[dict[str, Any], Any]:
    """Ask through /api/chat with the model routing to aggregation and writing ``sql``; the SQL request."""
    world.llm.push_route(AGG_ONLY)
    world.llm.push(json.dumps({"sql": sql}), "The count is in the rows.")
    before = len(world.llm.requests)
    status, body, _ = call(world, "/api/chat", {"question": question}, who)
    assert status == 200, body
    [sql_request] = [r for r in world.llm.requests[before:] if SQL_MARKER in r.system]
    return body, sql_request


def whole_prompt(request: Any) -> str:
    return json.dumps(request.messages, ensure_ascii=False)


def examples_in(request: Any) -> list[dict[str, str]]:
    """The examples the user turn carries as data (the JSON list after the question), or []."""
    user = request.messages[1]["content"]
    assert request.messages[1]["role"] == "user"
    if "\n[" not in user:
        return []
    return json.loads(user[user.index("\n[") + 1 :])


def test_an_example_stays_with_its_caller_until_approved_and_is_masked(world, cli) -> None:
    rated, first = ask_aggregate(world, DEV_A, QUESTION, SECRET_SQL)
    assert rated["aggregate"]["sql"] == SECRET_SQL and examples_in(first) == []
    assert call(world, "/api/feedback", {"message_id": rated["message_id"], "rating": "up"}, DEV_A)[0] == 201

    # Another developer and a manager asking alike: no example, and the title nowhere in what the model got.
    for other in (DEV_B, MANAGER):
        _, request = ask_aggregate(world, other, LIKE_QUESTION, "SELECT COUNT(*) AS N FROM RAG_V_TASK")
        assert examples_in(request) == [] and SECRET.lower() not in whole_prompt(request).lower()
        assert "layoffs" not in whole_prompt(request).lower()

    # The rater: the example, masked, as data in the user turn; never in the system prompt.
    _, own = ask_aggregate(world, DEV_A, LIKE_QUESTION, "SELECT COUNT(*) AS N FROM RAG_V_TASK")
    assert examples_in(own) == [
        {
            "question": "how many of my tasks mention :text :text and take more than :number hours of effort",
            "sql": "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE TITLE LIKE :text AND "
            "ESTIMATED_HOURS > :number",
        }
    ]
    assert "layoffs" not in whole_prompt(own).lower() and "12" not in json.dumps(examples_in(own))
    assert "SQL:" not in own.system and "RAG_V_TASK WHERE TITLE" not in own.system
    assert own.messages[1]["content"].startswith(LIKE_QUESTION + "\n\n")

    # The administrator approves it: now others get the masked example too.
    listed = cli("feedback", "examples", "--pending", "--json")
    assert listed.exit_code == 0, listed.output
    [candidate] = [json.loads(line) for line in listed.output.splitlines()]
    assert candidate["caller_id"] == DEV_A and candidate["approved"] is False and SECRET not in listed.output
    assert cli("feedback", "approve", candidate["id"]).exit_code == 0
    assert cli("feedback", "examples", "--pending").output == ""
    _, approved = ask_aggregate(world, DEV_B, LIKE_QUESTION, "SELECT COUNT(*) AS N FROM RAG_V_TASK")
    assert [e["sql"] for e in examples_in(approved)] == [candidate["sql"]]
    assert "layoffs" not in whole_prompt(approved).lower() and "SQL:" not in approved.system

    # Withdrawn: back to its own caller only.
    assert cli("feedback", "approve", candidate["id"], "--withdraw").exit_code == 0
    _, withdrawn = ask_aggregate(world, DEV_B, LIKE_QUESTION, "SELECT COUNT(*) AS N FROM RAG_V_TASK")
    assert examples_in(withdrawn) == []
    for missing in (candidate["id"] + 1000, 2**63, 2**70):
        refused = cli("feedback", "approve", missing)
        assert refused.exit_code == 2 and "no current example" in refused.output, refused.output


def test_no_example_crosses_callers_through_v1_or_mcp(world) -> None:
    import anyio
    from test_mcp import http_client, uvicorn_app

    from oracle_rag.answering.chat import Chat
    from oracle_rag.integrations.mcp_server import http_app

    rated, _ = ask_aggregate(world, DEV_A, QUESTION, SECRET_SQL)
    assert call(world, "/v1/feedback", {"message_id": rated["message_id"], "rating": "up"}, DEV_A)[0] == 201
    other_sql = json.dumps({"sql": "SELECT COUNT(*) AS N FROM RAG_V_TASK"})
    world.llm.push_route(AGG_ONLY)
    world.llm.push(other_sql, "Counted.")
    before = len(world.llm.requests)
    status, _, _ = call(
        world,
        "/v1/chat/completions",
        {"model": "oracle-rag", "messages": [{"role": "user", "content": LIKE_QUESTION}]},
        DEV_B,
    )
    assert status == 200
    with uvicorn_app(http_app(world.rag, chat=Chat(world.rag, LLMClient(world.settings)))) as url:
        world.llm.push_route(AGG_ONLY)
        world.llm.push(other_sql, "Counted.")

        async def ask() -> None:
            async with http_client(url, world.tokens[DEV_B]) as session:
                assert not (await session.call_tool("ask", {"question": LIKE_QUESTION})).is_error

        anyio.run(ask)
    sql_requests = [r for r in world.llm.requests[before:] if SQL_MARKER in r.system]
    assert len(sql_requests) == 2
    for request in sql_requests:  # /v1, then MCP: the other developer's prompt holds nothing of the example
        assert examples_in(request) == [] and "layoffs" not in whole_prompt(request).lower()


def test_the_newest_rating_counts(world, cli) -> None:
    rated, _ = ask_aggregate(world, DEV_A, QUESTION, SECRET_SQL)
    for rating in ("up", "down"):
        assert (
            call(world, "/api/feedback", {"message_id": rated["message_id"], "rating": rating}, DEV_A)[0]
            == 201
        )
    _, own = ask_aggregate(world, DEV_A, LIKE_QUESTION, "SELECT COUNT(*) AS N FROM RAG_V_TASK")
    assert examples_in(own) == [] and list_examples(world.rag.engine) == []
    assert cli("feedback", "examples").output == ""
    # up again: an example again (a new, unapproved one); an approval of an older rating does not carry over
    assert call(world, "/v1/feedback", {"message_id": rated["message_id"], "rating": "up"}, DEV_A)[0] == 201
    [current] = list_examples(world.rag.engine)
    assert current.caller_id == DEV_A and current.approved_at is None
    assert cli("feedback", "approve", current.feedback_id).exit_code == 0
    assert (
        call(world, "/api/feedback", {"message_id": rated["message_id"], "rating": "down"}, DEV_A)[0] == 201
    )
    _, other = ask_aggregate(world, DEV_B, LIKE_QUESTION, "SELECT COUNT(*) AS N FROM RAG_V_TASK")
    assert examples_in(other) == []


@pytest.mark.parametrize("path", ["/api/feedback", "/v1/feedback"])
def test_ratings_are_limited_per_caller(world, path) -> None:
    limit = world.rag.settings.feedback_per_minute
    rated, _ = ask_aggregate(world, DEV_A, QUESTION, SECRET_SQL)
    for _ in range(limit):
        assert call(world, path, {"message_id": rated["message_id"], "rating": "up"}, DEV_A)[0] == 201
    status, body, headers = call(world, path, {"message_id": rated["message_id"], "rating": "up"}, DEV_A)
    assert status == 429 and int(headers["Retry-After"]) == 60, body
    code = body["code"] if path.startswith("/api") else body["error"]["code"]
    assert code in ("RATE_LIMITED", "rate_limit_exceeded")
    # another caller is not limited by this one; nothing was stored for the refused rating
    assert call(world, path, {"message_id": rated["message_id"], "rating": "up"}, DEV_B)[0] == 404
    from oracle_rag.answering.chat.feedback import FeedbackStore

    assert len(FeedbackStore(world.rag.engine).list()) == limit
    world.clock.now += 30
    assert call(world, path, {"message_id": rated["message_id"], "rating": "up"}, DEV_A)[0] == 429
    world.clock.now += 30.5
    assert call(world, path, {"message_id": rated["message_id"], "rating": "up"}, DEV_A)[0] == 201


@pytest.mark.parametrize("path", ["/api/feedback", "/v1/feedback"])
@pytest.mark.parametrize("message_id", [2**63 - 1, 2**63, 2**64 + 5, 10**40])
def test_a_huge_message_id_is_not_found(world, path, message_id) -> None:
    status, body, _ = call(world, path, {"message_id": message_id, "rating": "up"}, DEV_A)
    assert status == 404, body


def test_literals_become_placeholders_on_both_dialects() -> None:
    question = "tasks of 'Project Nova' due 2026-03-01 with ＂x＂ over 7.5 hours, Nova first"
    for dialect in ("sqlite", "oracle"):
        masked = example_of(
            question,
            "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE PROJECT_NAME = 'Project Nova' "
            "AND DUE_DATE < '2026-03-01' AND ESTIMATED_HOURS > 7.5 -- Nova",
            dialect,
        )
        assert masked is not None
        asked, sql = masked
        assert sql == (
            "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE PROJECT_NAME = :text AND DUE_DATE < :date "
            "AND ESTIMATED_HOURS > :number"
        )
        assert "Nova" not in asked and "2026" not in asked and "7.5" not in asked, asked
    assert example_of(question, "SELECT 'unterminated", "sqlite") is None
    assert example_of("  ", "SELECT 1", "sqlite") is None
