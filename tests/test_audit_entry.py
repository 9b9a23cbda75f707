"""The audit trail keeps no question values without ``audit_questions``, and its entry point comes from
the server, not from a header: through the real server (waitress on 127.0.0.1) and the recording
OpenAI-protocol model (tests/llm_server.py), and the CLI.

- with ``audit_questions = false`` the guarded SQL is stored with its literals as placeholders (the
  private title and the number the question asked about appear nowhere in RAG_AUDIT);
  with ``audit_questions = true`` the SQL and the question are kept as they were;
- a token-authenticated request is ``api`` even when it sends ``Sec-Fetch-Site: same-origin``;
  a request the host's caller loader authenticated from its own session cookie is ``page``;
  ``/v1`` is ``v1``.
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
import sqlalchemy as sa
from chat_helpers import DEV_A, issue_tokens
from flask import Request
from llm_server import ScriptedLLM

from oracle_rag.answering.chat import LLMClient
from oracle_rag.callers.access import load_caller
from oracle_rag.callers.audit import audit_for
from oracle_rag.callers.caller import Caller
from oracle_rag.system import RagSystem
from oracle_rag.web import create_app
from oracle_rag.web.app import get_db, state, token_caller_loader
from oracle_rag.web.server import make_server, serve_until

AGG_ONLY = '{"retrieval": false, "aggregation": true}'
SECRET = "Quarterly layoffs"
SQL = f"SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE TITLE LIKE '%{SECRET}%' AND ESTIMATED_HOURS > 17"
QUESTION = f"how many tasks mention {SECRET} and take more than 17 hours"
SESSION = "host-session-cookie-value"


def session_loader(request: Request) -> Caller | None:
    """A host application's caller loader: its own session cookie, or the built-in token loader's answer."""
    if request.cookies.get("host_session") == SESSION:
        return load_caller(get_db(), DEV_A, state().rag.engine)
    return token_caller_loader(request)


def audit_rows(rag: RagSystem) -> list[dict[str, Any]]:
    audit_for(rag.engine).flush()
    with rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT ENTRY_POINT, ACTION, GUARDED_SQL, QUESTION FROM RAG_AUDIT ORDER BY AUDIT_ID")
        ).fetchall()
    return [{"entry": r[0], "action": r[1], "sql": r[2], "question": r[3]} for r in rows]


def serve(rag: RagSystem) -> Iterator[SimpleNamespace]:
    tokens = issue_tokens(rag, (DEV_A,))
    with ScriptedLLM().start() as llm:
        settings = rag.settings.with_overrides(
            llm_url=llm.url, llm_model="m", llm_api_key="k", llm_max_retries=0, llm_timeout_s=30.0
        )
        app = create_app(
            {
                "ORACLE_RAG_SYSTEM": rag,
                "ORACLE_RAG_LLM": LLMClient(settings),
                "ORACLE_RAG_CALLER_LOADER": session_loader,
            }
        )
        server = make_server(app, "127.0.0.1", 0, threads=4)
        stop = threading.Event()
        thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
        thread.start()
        try:
            yield SimpleNamespace(
                rag=rag, llm=llm, token=tokens[DEV_A], base=f"http://127.0.0.1:{server.effective_port}"
            )
        finally:
            stop.set()
            thread.join(120)
            assert not thread.is_alive()


@pytest.fixture
def world(demo_rag) -> Iterator[SimpleNamespace]:
    yield from serve(demo_rag)


@pytest.fixture
def world_with_questions(demo_rag, make_settings) -> Iterator[SimpleNamespace]:
    rag = RagSystem(make_settings(audit_questions=True))
    try:
        yield from serve(rag)
    finally:
        rag.close()


def post(world: SimpleNamespace, path: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    world.llm.push_route(AGG_ONLY)
    world.llm.push(json.dumps({"sql": SQL}), "Counted.")
    request = urllib.request.Request(
        world.base + path,
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (a local URL)
        assert response.status == 200
        return json.loads(response.read())


def test_without_audit_questions_no_literal_of_the_question_is_kept(world) -> None:
    token = {"Authorization": f"Bearer {world.token}"}
    answer = post(world, "/api/chat", {"question": QUESTION}, {**token, "Sec-Fetch-Site": "same-origin"})
    assert answer["aggregate"]["sql"] == SQL  # the caller sees the SQL that ran; the audit keeps its shape
    post(
        world,
        "/v1/chat/completions",
        {"model": "oracle-rag", "messages": [{"role": "user", "content": QUESTION}]},
        token,
    )
    post(world, "/api/chat", {"question": QUESTION}, {"Cookie": f"host_session={SESSION}"})
    rows = audit_rows(world.rag)
    masked = "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE TITLE LIKE :text AND ESTIMATED_HOURS > :number"
    assert [(r["entry"], r["action"], r["sql"], r["question"]) for r in rows] == [
        ("api", "sql", masked, None),
        ("api", "answer", masked, None),
        ("v1", "sql", masked, None),
        ("v1", "answer", masked, None),
        ("page", "sql", masked, None),
        ("page", "answer", masked, None),
    ]
    with world.rag.engine.connect() as conn:
        kept = json.dumps(
            [list(r) for r in conn.execute(sa.text("SELECT RECORDS, GUARDED_SQL, QUESTION FROM RAG_AUDIT"))]
        )  # every text column but the time
    assert "layoffs" not in kept.lower() and "17" not in kept, kept


def test_mcp_ask_keeps_no_literal_either(demo_rag) -> None:
    import anyio
    from test_mcp import http_client, uvicorn_app

    from oracle_rag.answering.chat import Chat
    from oracle_rag.integrations.mcp_server import http_app

    token = issue_tokens(demo_rag, (DEV_A,))[DEV_A]
    with ScriptedLLM().start() as llm:
        settings = demo_rag.settings.with_overrides(
            llm_url=llm.url, llm_model="m", llm_api_key="k", llm_max_retries=0, llm_timeout_s=30.0
        )
        llm.push_route(AGG_ONLY)
        llm.push(json.dumps({"sql": SQL}), "Counted.")
        with uvicorn_app(http_app(demo_rag, chat=Chat(demo_rag, LLMClient(settings)))) as url:

            async def ask() -> None:
                async with http_client(url, token) as session:
                    asked = await session.call_tool("ask", {"question": QUESTION})
                    assert not asked.is_error, asked

            anyio.run(ask)
    masked = "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE TITLE LIKE :text AND ESTIMATED_HOURS > :number"
    assert [(r["entry"], r["action"], r["sql"], r["question"]) for r in audit_rows(demo_rag)] == [
        ("mcp", "sql", masked, None),
        ("mcp", "answer", masked, None),
    ]


def test_a_client_header_does_not_make_a_request_the_page(world) -> None:
    for headers in (
        {
            "Sec-Fetch-Site": "same-origin",
            "Sec-Fetch-Mode": "cors",
            "Origin": world.base,
            "Referer": world.base + "/",
        },
        {},
    ):
        post(
            world, "/api/chat", {"question": QUESTION}, {"Authorization": f"Bearer {world.token}", **headers}
        )
    assert {r["entry"] for r in audit_rows(world.rag)} == {"api"}
    # no token and no session: refused, nothing audited
    request = urllib.request.Request(
        world.base + "/api/chat",
        method="POST",
        data=b'{"question": "x"}',
        headers={"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)  # noqa: S310 (a local URL)
    assert refused.value.code == 401 and len(audit_rows(world.rag)) == 4


def test_with_audit_questions_the_question_and_its_sql_are_kept(world_with_questions) -> None:
    world = world_with_questions
    post(world, "/api/chat", {"question": QUESTION}, {"Authorization": f"Bearer {world.token}"})
    rows = audit_rows(world.rag)
    assert [(r["action"], r["sql"]) for r in rows] == [("sql", SQL), ("answer", SQL)]
    assert rows[-1]["question"] == QUESTION


def test_the_cli_sql_command_masks_literals_without_audit_questions(demo_rag, cli) -> None:
    result = cli(
        "sql", "--as", DEV_A, "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE TITLE = 'Payroll audit' AND 1 = 1"
    )
    assert result.exit_code == 0, result.output
    [row] = audit_rows(demo_rag)
    assert (row["entry"], row["sql"]) == (
        "cli",
        "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE TITLE = :text AND :number = :number",
    )
