"""The attack lists end to end: through `oracle-rag sql` and through the chat API with a scripted model.

Both run with the text check on and off (the database alone). A canary task
assigned to another employee, a canary comment and a canary conversation
message are planted first; no response, no prompt sent to the model and no
stored answer may hold a canary, every attack is refused with a reason,
nothing is written, and the server keeps answering.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from attack_lists import BYPASS_ATTACKS, SQLITE_ATTACKS
from chat_helpers import bearer, issue_tokens, parse_sse
from click.testing import CliRunner
from llm_server import ScriptedLLM

from oracle_rag.answering.aggregate import AggregateService
from oracle_rag.answering.chat.llm import LLMClient
from oracle_rag.web import create_app

DEV = 20
CANARY = "CANARY-7f3c9b"
AGG_ONLY = '{"retrieval": false, "aggregation": true}'
MODES = [pytest.param(True, id="text-check"), pytest.param(False, id="database-alone")]
ALL_ATTACKS = SQLITE_ATTACKS + BYPASS_ATTACKS


@pytest.fixture(params=MODES)
def text_check(request, monkeypatch):
    monkeypatch.setattr(AggregateService, "text_check", request.param)
    return request.param


@pytest.fixture
def planted(demo_rag):
    """The demo database with canaries the developer must never see."""
    demo_rag.migrate(demo=True)
    with demo_rag.engine.begin() as conn:
        other = conn.execute(
            sa.text(
                "SELECT EMPLOYEE_ID FROM EMPLOYEE WHERE EMPLOYEE_ID <> :d AND ROLE = 'developer' LIMIT 1"
            ),
            {"d": DEV},
        ).scalar_one()
        project = conn.execute(sa.text("SELECT MIN(PROJECT_ID) FROM PROJECT")).scalar_one()
        conn.execute(
            sa.text(
                "INSERT INTO TASK (TASK_ID, TITLE, DESCRIPTION, STATUS, PRIORITY, PROJECT_ID, ASSIGNEE_ID) "
                "VALUES (990001, :t, :t, 'TODO', 'LOW', :p, :a)"
            ),
            {"t": CANARY, "p": project, "a": other},
        )
        conn.execute(
            sa.text("INSERT INTO TASK_COMMENT (TASK_ID, AUTHOR_ID, BODY) VALUES (990001, :a, :t)"),
            {"t": CANARY, "a": other},
        )
    return demo_rag


def _snapshot(rag):
    with rag.engine.connect() as conn:
        names = [
            r[0]
            for r in conn.execute(
                sa.text("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            )
        ]
        return {n: conn.execute(sa.text(f'SELECT COUNT(*) FROM "{n}"')).scalar_one() for n in names}


def test_attacks_through_oracle_rag_sql(planted, text_check, tmp_path):
    from oracle_rag.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{planted.settings.data_dir}"\n')
    before = _snapshot(planted)
    runner = CliRunner()
    refused = 0
    for name, sql in ALL_ATTACKS:
        if "\x00" in sql:
            continue  # not passable as a command-line argument
        result = runner.invoke(main, ["--config", str(cfg), "sql", sql, "--as", str(DEV)])
        assert result.exit_code == 2, (name, result.output)
        assert result.stderr.startswith("refused: ") and len(result.stderr) > len("refused: \n"), name
        assert CANARY not in result.output and result.stdout == "", name
        refused += 1
    assert _snapshot(planted) == before
    ok = runner.invoke(
        main, ["--config", str(cfg), "sql", "SELECT COUNT(*) AS N FROM RAG_V_TASK", "--as", str(DEV)]
    )
    assert ok.exit_code == 0 and ok.stdout.startswith("N\n")
    print(json.dumps({"cli_attacks_refused": refused, "text_check": text_check}))


@pytest.fixture
def llm():
    with ScriptedLLM().start() as server:
        yield server


@pytest.fixture
def chat_rag(planted, llm):
    from oracle_rag.system import RagSystem

    settings = planted.settings.with_overrides(
        llm_url=llm.url,
        llm_model="m",
        llm_api_key="k",
        llm_max_retries=0,
        aggregate_retries=0,
        aggregate_timeout_s=2.0,
    )
    system = RagSystem(settings)
    yield system
    system.close()


def test_attacks_through_the_chat_api_and_stream(planted, chat_rag, text_check, llm):
    app = create_app(
        {"ORACLE_RAG_SYSTEM": chat_rag, "ORACLE_RAG_LLM": LLMClient(chat_rag.settings), "TESTING": True}
    )
    client, token = app.test_client(), issue_tokens(chat_rag, (DEV,))[DEV]
    before = _snapshot(planted)
    for name, sql in BYPASS_ATTACKS:
        for path in ("/api/chat", "/api/chat/stream"):
            llm.push_route(AGG_ONLY)
            llm.push(json.dumps({"sql": sql}))
            # an aggregate the structured answerer leaves to the model's SQL (a count would be answered in SQL)
            response = client.post(
                path,
                headers=bearer(token),
                json={"question": "what is the average of story points of the tasks?"},
            )
            text = response.get_data(as_text=True)
            assert response.status_code == 200, (name, path, text[:300])
            body = json.loads(text) if path == "/api/chat" else parse_sse(text)[-1][1]
            assert body["aggregate"]["rows"] == [] and body["aggregate"]["error"], (name, path)
            assert CANARY not in text, (name, path)
    assert all(CANARY not in json.dumps(r.body) for r in llm.requests)
    with planted.engine.connect() as conn:
        stored = (
            conn.execute(sa.text("SELECT group_concat(CONTENT, ' ') FROM RAG_MESSAGE")).scalar_one() or ""
        )
    assert CANARY not in stored
    after = _snapshot(planted)
    # what the product itself writes for every answer: the conversation and the audit trail
    written = ("RAG_CONVERSATION", "RAG_AUDIT")
    assert {k: v for k, v in after.items() if not k.startswith("RAG_MESSAGE") and k not in written} == {
        k: v for k, v in before.items() if not k.startswith("RAG_MESSAGE") and k not in written
    }
    # The server is still up and answers a legitimate aggregate.
    llm.push_route(AGG_ONLY)
    llm.push(json.dumps({"sql": "SELECT COUNT(*) AS N FROM RAG_V_TASK"}), "N tasks.")
    ok = client.post(
        "/api/chat", headers=bearer(token), json={"question": "what is the sum of estimated hours?"}
    )
    assert ok.status_code == 200 and ok.get_json()["aggregate"]["rows"]
