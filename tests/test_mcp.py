"""The MCP server through the SDK's own client, over both transports.

stdio: ``oracle-rag mcp`` is started as a subprocess by the SDK's stdio
client, its token in ``ORACLE_RAG_MCP_TOKEN``. Streamable HTTP: the real
ASGI app on uvicorn on 127.0.0.1, the token in ``Authorization: Bearer``.
The database is the indexed demo copy; scope expectations are computed
from the tables directly (chat_helpers), not from the engine's SQL.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx2
import pytest
from chat_helpers import ADMIN, DEV_A, DEV_B, bearer, issue_tokens, task_chunks_of, visible_to
from llm_server import ScriptedLLM
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from reliability_helpers import CLI, clean_env

from oracle_rag.answering.chat import Chat, LLMClient
from oracle_rag.callers.tokens import revoke_label
from oracle_rag.integrations.mcp_server import MCP_PATH, asgi_app, http_app
from oracle_rag.web import create_app

IDENTITY_WORDS = ("employee", "caller", "user", "as", "as_id", "identity", "token", "role")


# -- transports ---------------------------------------------------------------------
@contextmanager
def uvicorn_app(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free 127.0.0.1 port in a thread; yields the base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(6000):  # polls; the bound (2 min) only guards against a hang
        if server.started or not thread.is_alive():
            break
        threading.Event().wait(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(120)  # a hang guard: stopping takes one poll
        sock.close()
        assert not thread.is_alive(), "uvicorn stops when asked"


def stdio_params(rag: Any, **env: str) -> StdioServerParameters:
    command, *args = CLI
    return StdioServerParameters(
        command=command, args=[*args, "mcp"], env=clean_env(ORACLE_RAG_DATA_DIR=rag.settings.data_dir, **env)
    )


@asynccontextmanager
async def http_client(url: str, token: str | None, responses: list[httpx2.Response] | None = None):
    async def record(response: httpx2.Response) -> None:
        if responses is not None:
            responses.append(response)

    headers = bearer(token) if token else {}
    async with httpx2.AsyncClient(
        headers=headers, event_hooks={"response": [record]}, timeout=httpx2.Timeout(60.0)
    ) as http:
        async with Client(streamable_http_client(url + MCP_PATH, http_client=http)) as client:
            yield client


def run(coro_fn, *args) -> Any:
    return anyio.run(coro_fn, *args)


@pytest.fixture
def tokens(demo_rag) -> dict[int, str]:
    return issue_tokens(demo_rag, (ADMIN, DEV_A, DEV_B))


@pytest.fixture
def served(demo_rag) -> Iterator[str]:
    with uvicorn_app(http_app(demo_rag, chat=Chat(demo_rag, None))) as url:
        yield url


def api_error_text(rag: Any, token: str, source_type: str, source_id: str) -> tuple[int, str]:
    """What the HTTP API says for the same record and caller."""
    client = create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None}).test_client()
    response = client.get(f"/api/chunks/{source_type}/{source_id}", headers=bearer(token))
    return response.status_code, response.get_json()["error"]


# -- the scope checks both transports share ---------------------------------------------
async def check_scoped_tools(client: Client, rag: Any, token: str) -> None:
    own = task_chunks_of(rag, DEV_A)[0]
    other = task_chunks_of(rag, DEV_B)[0]

    found = await client.call_tool("search", {"query": own.title, "mode": "hybrid", "k": 10})
    assert not found.is_error
    hits = found.structured_content["hits"]
    assert hits and len(hits) <= 10
    assert all(visible_to(rag, DEV_A, h["source_type"], h["source_id"]) for h in hits)
    assert any(h["source_type"] == "TASK" and h["source_id"] == str(own.task_id) for h in hits)

    narrowed = await client.call_tool(
        "search", {"query": own.title, "k": 5, "filters": {"source_types": ["TASK"]}}
    )
    assert {h["source_type"] for h in narrowed.structured_content["hits"]} == {"TASK"}

    edge = await client.call_tool("search", {"query": own.title, "filters": {"project_id": 2**63 - 1}})
    assert not edge.is_error and edge.structured_content["hits"] == []  # the largest id is a plain filter

    mine = await client.call_tool("get_record", {"type": "TASK", "id": str(own.task_id)})
    assert not mine.is_error and mine.structured_content["anchor"] == f"[TASK #{own.task_id}]"
    assert mine.structured_content["content"] == own.content

    theirs = await client.call_tool("get_record", {"type": "TASK", "id": str(other.task_id)})
    status, api_text = api_error_text(rag, token, "TASK", str(other.task_id))
    assert status == 404 and theirs.is_error
    assert theirs.structured_content is None
    assert theirs.content[0].text.endswith(api_text), "the API's own 'not visible' text"
    assert other.title not in theirs.content[0].text

    asked = await client.call_tool("ask", {"question": own.title})
    body = asked.structured_content
    assert not asked.is_error and body["answerer"] == "extractive"
    assert body["citations"] and all(
        visible_to(rag, DEV_A, c["source_type"], c["source_id"]) for c in body["citations"]
    )


async def check_bad_arguments(client: Client) -> None:
    cases = [
        ("search", {"query": "x", "k": 1000}, "k"),
        ("search", {"query": "x", "mode": "fuzzy"}, "mode"),
        ("search", {"query": "x", "filters": {"owner_id": 10}}, "filters.owner_id"),
        # beyond 64 bits: a validation error, not the driver's OverflowError
        ("search", {"query": "x", "filters": {"project_id": 2**64}}, "filters.project_id"),
        ("search", {"query": "x", "filters": {"sprint_id": -(2**70)}}, "filters.sprint_id"),
        ("search", {"query": ""}, "query"),
        ("get_record", {"type": "TASK"}, "id"),
        ("ask", {"question": 42}, "question"),
    ]
    for tool, arguments, name in cases:
        result = await client.call_tool(tool, arguments)
        assert result.is_error, (tool, arguments)
        text = result.content[0].text
        assert "validation error" in text and f"\n{name}\n" in text, text


# -- stdio -------------------------------------------------------------------------------
def test_stdio_tools_run_in_the_token_callers_scope(demo_rag, tokens) -> None:
    async def main() -> None:
        async with Client(stdio_params(demo_rag, ORACLE_RAG_MCP_TOKEN=tokens[DEV_A])) as client:
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == {"search", "get_record", "ask"}
            for tool in listed.tools:
                props = set(tool.input_schema["properties"])
                assert not props & set(IDENTITY_WORDS), f"{tool.name} takes no identity argument"
                assert tool.output_schema is not None and tool.annotations.read_only_hint
            search = next(t for t in listed.tools if t.name == "search")
            assert search.input_schema["properties"]["k"]["maximum"] == 100
            assert search.input_schema["properties"]["mode"]["enum"] == ["semantic", "keyword", "hybrid"]
            await check_scoped_tools(client, demo_rag, tokens[DEV_A])
            await check_bad_arguments(client)

    run(main)


@pytest.mark.parametrize(
    "env", [{}, {"ORACLE_RAG_MCP_TOKEN": "orag_" + "x" * 43}, {"ORACLE_RAG_MCP_TOKEN": "not-a-token"}]
)
def test_stdio_without_a_valid_token_is_refused(demo_rag, env) -> None:
    async def main() -> None:
        async with Client(stdio_params(demo_rag, **env)) as client:
            for call in (client.list_tools(), client.call_tool("get_record", {"type": "TASK", "id": "1"})):
                with pytest.raises(MCPError) as refused:
                    await call
                assert refused.value.data == {"status": 401, "error": "invalid_token"}
                assert "ORACLE_RAG_MCP_TOKEN" in refused.value.message

    run(main)


def test_stdio_token_variable_is_a_setting_and_revocation_applies_mid_session(demo_rag) -> None:
    from oracle_rag.callers.tokens import create_token

    token = create_token(demo_rag.engine, DEV_A, label="mcp-revoke").token

    async def main() -> None:
        params = stdio_params(demo_rag, ORACLE_RAG_MCP_TOKEN_ENV="AGENT_TOKEN", AGENT_TOKEN=token)
        async with Client(params) as client:
            assert (await client.list_tools()).tools
            revoke_label(demo_rag.engine, "mcp-revoke")
            with pytest.raises(MCPError) as refused:
                await client.call_tool("search", {"query": "login"})
            assert "AGENT_TOKEN" in refused.value.message and token not in refused.value.message

    run(main)


# -- streamable HTTP ---------------------------------------------------------------------
def test_http_tools_run_in_the_bearer_callers_scope(demo_rag, tokens, served) -> None:
    async def main() -> None:
        async with http_client(served, tokens[DEV_A]) as client:
            await check_scoped_tools(client, demo_rag, tokens[DEV_A])
            await check_bad_arguments(client)
        async with http_client(served, tokens[ADMIN]) as admin:  # a manager/admin sees the other's task
            other = task_chunks_of(demo_rag, DEV_B)[0]
            record = await admin.call_tool("get_record", {"type": "TASK", "id": str(other.task_id)})
            assert not record.is_error and record.structured_content["content"] == other.content

    run(main)


@pytest.mark.parametrize("token", [None, "orag_" + "y" * 43, "Basic abc"])
def test_http_without_a_valid_token_gets_401(demo_rag, served, token) -> None:
    responses: list[httpx2.Response] = []

    async def main() -> None:
        with pytest.raises(BaseException) as refused:  # noqa: B017  (the SDK raises it inside a task group)
            async with http_client(served, token, responses) as client:
                await client.list_tools()
        errors = (
            refused.value.exceptions if isinstance(refused.value, BaseExceptionGroup) else [refused.value]
        )
        assert any(isinstance(e, MCPError | BaseExceptionGroup) for e in errors)

    run(main)
    assert responses and all(r.status_code == 401 for r in responses)
    challenge = responses[0].headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert token is None or token not in responses[0].text


def test_http_session_belongs_to_its_token(demo_rag, tokens, served) -> None:
    """A session id opened by one caller cannot be used with another caller's token."""

    async def main() -> None:
        async with http_client(served, tokens[DEV_A]) as client:
            await client.list_tools()
        async with httpx2.AsyncClient(timeout=30) as http:  # raw JSON-RPC: the session id is ours to reuse
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
            accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            opened = await http.post(
                served + MCP_PATH, json=init, headers={**accept, **bearer(tokens[DEV_A])}
            )
            session = opened.headers["mcp-session-id"]
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            hijack = await http.post(
                served + MCP_PATH,
                json=call,
                headers={
                    **accept,
                    **bearer(tokens[DEV_B]),
                    "mcp-session-id": session,
                    "mcp-protocol-version": "2025-06-18",
                },
            )
            assert hijack.status_code in (403, 404), hijack.status_code

    run(main)


def test_ask_reports_the_read_only_sql_and_rows(demo_rag, tokens) -> None:
    with ScriptedLLM().start() as llm:
        settings = demo_rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
        chat = Chat(demo_rag, LLMClient(settings), settings=settings)
        llm.push_route('{"retrieval": false, "aggregation": true}')
        llm.push(json.dumps({"sql": "SELECT COUNT(*) AS N FROM RAG_V_TASK"}), "You have N tasks.")
        with uvicorn_app(http_app(demo_rag, chat=chat)) as url:

            async def main() -> dict[str, Any]:
                async with http_client(url, tokens[DEV_A]) as client:
                    # not a count of records ("average"): the model's guarded SQL, not a structured answer
                    result = await client.call_tool(
                        "ask", {"question": "what is the average of story points of my tasks?"}
                    )
                    assert not result.is_error, result.content
                    return dict(result.structured_content)

            body = run(main)
    assert body["route"] == "aggregation" and body["sql"] == "SELECT COUNT(*) AS N FROM RAG_V_TASK"
    assert body["columns"] == ["N"] and body["rows"] == [[len(task_chunks_of(demo_rag, DEV_A))]]


def test_mounted_beside_the_flask_app(demo_rag, tokens) -> None:
    """One ASGI app: the API through the WSGI bridge, MCP at /mcp, the same token for both."""
    with uvicorn_app(
        asgi_app(demo_rag, create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None}))
    ) as url:
        me = httpx2.get(url + "/api/me", headers=bearer(tokens[DEV_A]))
        assert me.status_code == 200 and me.json()["employee_id"] == DEV_A
        assert httpx2.get(url + "/healthz").status_code in (200, 503)
        assert httpx2.post(url + MCP_PATH, json={}).status_code == 401

        async def main() -> None:
            async with http_client(url, tokens[DEV_A]) as client:
                own = task_chunks_of(demo_rag, DEV_A)[0]
                record = await client.call_tool("get_record", {"type": "TASK", "id": str(own.task_id)})
                assert record.structured_content["content"] == own.content

        run(main)


def test_cli_mcp_is_documented_with_a_client_configuration() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "mcp.md").read_text()
    config = json.loads(text.split("```json", 1)[1].split("```", 1)[0])
    server = config["mcpServers"]["oracle-rag"]
    assert server["command"] == "oracle-rag" and server["args"] == ["mcp"]
    assert "ORACLE_RAG_MCP_TOKEN" in server["env"]


def test_cli_serves_streamable_http_on_loopback(demo_rag, tokens) -> None:
    """``oracle-rag mcp --http --port 0`` as an operator runs it: URL on stderr, 401 without a token."""
    import subprocess

    own = task_chunks_of(demo_rag, DEV_A)[0]
    command, *args = CLI
    proc = subprocess.Popen(
        [command, *args, "mcp", "--http", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(ORACLE_RAG_DATA_DIR=demo_rag.settings.data_dir),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # which data directory, first
        assert line.rstrip() == f"data_dir {demo_rag.settings.data_dir}", line
        line = proc.stderr.readline()
        assert line.startswith("MCP on http://127.0.0.1:") and line.rstrip().endswith(
            "/mcp (Ctrl-C to stop)"
        ), line
        url = line.split()[2].removesuffix(MCP_PATH)
        assert httpx2.post(url + MCP_PATH, json={}).status_code == 401

        async def main() -> None:
            async with http_client(url, tokens[DEV_A]) as client:
                record = await client.call_tool("get_record", {"type": "TASK", "id": str(own.task_id)})
                assert record.structured_content["content"] == own.content

        run(main)
    finally:
        proc.terminate()
        proc.wait(30)
