"""No token or password in a log line or a span of the integrations.

``oracle-rag serve`` and ``oracle-rag mcp`` run as subprocesses with every
logger at DEBUG and the console span exporter on (spans as JSON on stderr),
with a database password and a model key in the environment. Each is driven
through its protocol with the real client (``openai`` SDK, MCP SDK over
stdio), including refusals, and everything the process wrote is searched for
the caller's token and the secrets, raw and encoded (the scanner of
test_secret_hygiene). The spans are checked to be there, so the search
covers them rather than an empty stream.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import openai
import pytest
from chat_helpers import DEV_A, DEV_B, task_chunks_of
from llm_server import ScriptedLLM
from mcp import Client, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from reliability_helpers import ServeProcess, clean_env, run_cli, write_config
from test_secret_hygiene import DEBUG_SERVE, encoded_forms

DB_PASSWORD = "Db-Pw/Integ+1=Qq7!z3rT"
LLM_KEY = "sk-integ/Key+2=Hh4#p8Ls"
KEY_VAR = "INTEG_LLM_KEY"
DEBUG_MCP = DEBUG_SERVE  # the same wrapper: basicConfig(DEBUG), then the CLI


def leaks(text: str, secrets: dict[str, str]) -> list[str]:
    return [name for name, secret in secrets.items() if any(form in text for form in encoded_forms(secret))]


@pytest.fixture
def setup(demo_rag, tmp_path: Path):
    data = demo_rag.settings.data_path
    own = task_chunks_of(demo_rag, DEV_A)[0]
    other = task_chunks_of(demo_rag, DEV_B)[0]
    demo_rag.close()
    env = clean_env(
        ORACLE_RAG_DB_PASSWORD=DB_PASSWORD, ORACLE_RAG_TRACING_EXPORTER="console", **{KEY_VAR: LLM_KEY}
    )
    return data, env, own, other


def issue(cfg: Path, env: dict[str, str], label: str) -> str:
    created = run_cli(["token", "create", "--employee", str(DEV_A), "--label", label], config=cfg, env=env)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip()


def test_serve_v1_logs_and_spans_hold_no_secret(setup, tmp_path: Path) -> None:
    data, env, own, _ = setup
    with ScriptedLLM() as llm:
        cfg = write_config(
            tmp_path / "oracle-rag.toml",
            data,
            llm_url=llm.url,
            llm_model="integ-model",
            llm_api_key_env=KEY_VAR,
            llm_max_retries=0,
            worker_initial_delay_ms=0,
        )
        token = issue(cfg, env, "integ-serve")
        server = ServeProcess(
            cfg,
            env,
            tmp_path,
            argv=[sys.executable, "-c", DEBUG_SERVE, "--config", str(cfg), "serve", "--port", "0"],
        )
        server.start()
        try:
            client = openai.OpenAI(base_url=f"http://{server.address}/v1", api_key=token, max_retries=0)
            assert client.models.list().data[0].id == "oracle-rag"
            llm.push(f"See [TASK #{own.task_id}].", f"Streamed [TASK #{own.task_id}].")
            messages = [{"role": "user", "content": own.title}]
            assert client.chat.completions.create(model="oracle-rag", messages=messages).choices
            assert list(client.chat.completions.create(model="oracle-rag", messages=messages, stream=True))
            with pytest.raises(openai.BadRequestError):
                client.chat.completions.create(
                    model="oracle-rag", messages=[{"role": "assistant", "content": "x"}]
                )
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(
                    base_url=f"http://{server.address}/v1", api_key=token[:-2] + "zz", max_retries=0
                ).models.list()
        finally:
            server.stop()
        assert any(LLM_KEY in r.headers.get("authorization", "") for r in llm.requests), "the key was used"
    log = server.log()
    assert 'span "POST /v1/chat/completions"' in log and 'span "chat integ-model"' in log
    assert 'span "search semantic"' in log, "the spans were exported where this test reads"
    assert not leaks(log, {"token": token, "db password": DB_PASSWORD, "llm key": LLM_KEY})
    assert own.title not in log, "no question text in a span or log line without tracing_capture_content"


def test_mcp_stdio_logs_and_spans_hold_no_secret(setup, tmp_path: Path) -> None:
    data, env, own, other = setup
    cfg = write_config(tmp_path / "oracle-rag.toml", data)
    token = issue(cfg, env, "integ-mcp")
    errlog = (tmp_path / "mcp-stderr.log").open("w+", encoding="utf-8")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", DEBUG_MCP, "--config", str(cfg), "mcp"],
        env={**env, "ORACLE_RAG_MCP_TOKEN": token},
        cwd=str(tmp_path),
    )

    async def main() -> None:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            assert not (await client.call_tool("search", {"query": own.title, "k": 3})).is_error
            assert (await client.call_tool("get_record", {"type": "TASK", "id": str(other.task_id)})).is_error
            assert (await client.call_tool("search", {"query": "x", "k": 0})).is_error
            assert not (await client.call_tool("ask", {"question": own.title})).is_error
        bad = StdioServerParameters(
            command=params.command,
            args=params.args,
            cwd=params.cwd,
            env={**env, "ORACLE_RAG_MCP_TOKEN": token[:-2] + "zz"},
        )
        async with Client(stdio_client(bad, errlog=errlog)) as refused:
            with pytest.raises(MCPError):
                await refused.list_tools()

    anyio.run(main)
    errlog.seek(0)
    log = errlog.read()
    errlog.close()
    assert 'span "search semantic"' in log and 'span "retrieval"' in log, "spans reached stderr"
    assert not leaks(log, {"token": token, "bad token": token[:-2] + "zz", "db password": DB_PASSWORD})
    assert own.title not in log and other.title not in log
