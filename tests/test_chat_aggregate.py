"""Aggregate questions through the chat: routing, guarded SQL from the model, transparency.

The model is the scripted OpenAI-protocol server on 127.0.0.1; it returns
the routing verdict, then SQL (honest, or one of the verification list's
attacks), then the final answer. Every attack must be refused by the
guarded path, the refusal fed back, and nothing outside the caller's scope
may appear in the response.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from llm_server import ScriptedLLM

from oracle_rag.answering.chat import Chat
from oracle_rag.answering.chat.llm import LLMClient
from oracle_rag.answering.chat.router import AGGREGATION_UNAVAILABLE, ROUTER_MARKER, parse_route
from oracle_rag.callers.caller import Caller

DEV = Caller(20, "developer")
ADMIN = Caller(1, "admin")
AGG_ONLY = '{"retrieval": false, "aggregation": true}'


@pytest.fixture
def llm():
    with ScriptedLLM().start() as server:
        yield server


@pytest.fixture
def agg_rag(demo_rag):
    demo_rag.migrate(demo=True)
    return demo_rag


def _chat(rag, server, **overrides):
    """The text-to-SQL path under test: structured answers (which take understood counts such as
    "how many tasks are blocked?" before any router call, tests/test_answers.py) are off."""
    overrides.setdefault("aggregate_timeout_s", 60.0)  # a hang guard: a legitimate query never races it
    settings = rag.settings.with_overrides(
        llm_url=server.url, llm_model="m", llm_api_key="k", llm_max_retries=0, **overrides
    )
    return Chat(rag, LLMClient.from_settings(settings), settings=settings, structured=False)


def _count(rag, sql, **binds):
    with rag.engine.connect() as conn:
        return conn.execute(sa.text(sql), binds).scalar_one()


def test_aggregate_question_runs_scoped_sql_and_reports_it(agg_rag, llm):
    llm.push_route(AGG_ONLY)
    llm.push(
        json.dumps({"sql": "SELECT COUNT(*) AS N FROM RAG_V_TASK WHERE STATUS = 'BLOCKED'"}),
        "There are N blocked tasks.",
    )
    answer = _chat(agg_rag, llm).answer("how many tasks are blocked?", DEV, store=False)
    own_blocked = _count(agg_rag, "SELECT COUNT(*) FROM TASK WHERE STATUS = 'BLOCKED' AND ASSIGNEE_ID = 20")
    assert answer.route == "aggregation" and answer.aggregate is not None
    assert answer.aggregate.sql.startswith("SELECT COUNT(*)") and answer.aggregate.rows == [[own_blocked]]
    body = answer.to_dict()
    assert body["aggregate"]["rows"] == [[own_blocked]] and body["aggregate"]["truncated"] is False
    # The final prompt carried the (scoped) query result as data; the caller id was never sent.
    final = llm.requests[-1]
    assert "<query_result>" in final.last_user and "20" not in llm.requests[0].system
    assert all("rag_caller_id" not in r.last_user for r in llm.requests)


ATTACK_SQL = [
    "SELECT COUNT(*) FROM TASK",  # table outside the allow-list
    "SELECT * FROM RAG_CHUNK",  # the index itself
    "SELECT * FROM RAG_API_TOKEN",  # auth tables
    "SELECT 1 FROM RAG_V_TASK; DELETE FROM TASK",  # two statements
    "DELETE FROM TASK",  # DML
    "ATTACH DATABASE '/tmp/x.db' AS x",  # attach
    "PRAGMA writable_schema = 1",  # pragma
    "SELECT load_extension('/tmp/evil.so')",  # extension loading
    "SELECT readfile('/etc/passwd')",  # file access
    "WITH TASK AS (SELECT * FROM TASK) SELECT COUNT(*) FROM TASK",  # CTE shadowing
    "ＳＥＬＥＣＴ COUNT(*) FROM RAG_V_TASK",  # homoglyphs
    "SELECT * FROM RAG_V_TASK FOR UPDATE",  # locking
    "BEGIN DELETE FROM TASK; END;",  # PL/SQL
]


@pytest.mark.parametrize("attack", ATTACK_SQL)
def test_model_written_attack_is_refused_and_fed_back(agg_rag, llm, attack):
    before = _count(agg_rag, "SELECT COUNT(*) FROM TASK")
    llm.push_route(AGG_ONLY)
    # The model insists: the attack on every attempt (1 + aggregate_retries).
    for _ in range(3):
        llm.push(json.dumps({"sql": attack}))
    answer = _chat(agg_rag, llm).answer("how many tasks are there?", DEV, store=False)
    assert answer.aggregate is not None and answer.aggregate.error and answer.aggregate.rows == []
    assert answer.aggregate.attempts == 3 and answer.answerer == "aggregate"
    assert "could not produce a valid query" in answer.answer
    # Each refusal went back to the model with its reason.
    assert "refused or failed" in llm.requests[1].last_user
    assert _count(agg_rag, "SELECT COUNT(*) FROM TASK") == before


def test_another_callers_rows_stay_invisible_through_an_aggregate(agg_rag, llm):
    llm.push_route(AGG_ONLY)
    llm.push(json.dumps({"sql": "SELECT COUNT(*) FROM RAG_V_TASK WHERE ASSIGNEE_ID = 21"}), "None.")
    answer = _chat(agg_rag, llm).answer("how many tasks does employee 21 have?", DEV, store=False)
    assert answer.aggregate.rows == [[0]]


def test_runaway_query_is_stopped_and_reported(agg_rag, llm):
    runaway = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    llm.push_route(AGG_ONLY)
    for _ in range(3):
        llm.push(json.dumps({"sql": runaway}))
    answer = _chat(agg_rag, llm, aggregate_timeout_s=1.0).answer("count forever", ADMIN, store=False)
    assert answer.aggregate.timed_out and "timeout" in answer.aggregate.error


def test_oversized_result_is_capped_and_reported(agg_rag, llm):
    llm.push_route(AGG_ONLY)
    llm.push(json.dumps({"sql": "SELECT TASK_ID FROM RAG_V_TASK"}), "Many tasks.")
    answer = _chat(agg_rag, llm, aggregate_row_cap=5).answer("list task ids", ADMIN, store=False)
    assert len(answer.aggregate.rows) == 5 and answer.aggregate.truncated
    assert "row cap of 5" in llm.requests[-1].last_user


def test_model_can_decline(agg_rag, llm):
    llm.push_route(AGG_ONLY)
    llm.push(json.dumps({"sql": None, "reason": "no salary data"}))
    answer = _chat(agg_rag, llm).answer("average salary?", ADMIN, store=False)
    assert answer.answerer == "aggregate" and "no salary data" in answer.answer


def test_both_routes_combine_records_and_rows(agg_rag, llm):
    llm.push_route('{"retrieval": true, "aggregation": true}')
    llm.push(json.dumps({"sql": "SELECT COUNT(*) FROM RAG_V_TASK"}), "Here you go.")
    answer = _chat(agg_rag, llm).answer("how many tasks mention invoices and which ones?", ADMIN, store=False)
    assert answer.route == "both" and answer.retrieval.chunks > 0 and answer.aggregate.rows
    assert "<chunk" in llm.requests[-1].last_user and "<query_result>" in llm.requests[-1].last_user


def test_router_reply_that_is_not_json_falls_back_deterministically(agg_rag, llm):
    llm.push_route("sure! I think aggregation")
    llm.push("It is about a timeout.")
    answer = _chat(agg_rag, llm).answer("what is the login timeout task about?", DEV, store=False)
    assert answer.route == "retrieval" and llm.route_requests
    assert ROUTER_MARKER in llm.route_requests[0].system


def test_without_a_model_aggregation_is_unavailable_and_said(agg_rag):
    # a count of records by a topic is not a structured question (nothing exact to count it by)
    answer = Chat(agg_rag, None).answer("how many comments mention invoices?", DEV, store=False)
    assert answer.route == "retrieval" and answer.aggregate is None
    assert answer.answer.startswith(AGGREGATION_UNAVAILABLE)


@pytest.mark.parametrize(
    ("question", "truth"),
    [
        ("what is the largest estimate of any task?", "SELECT MAX(ESTIMATED_HOURS) FROM TASK"),
        (
            "¿cuál es el promedio de horas estimadas?",
            "SELECT AVG(ESTIMATED_HOURS) FROM TASK",
        ),  # repaired to AVG
    ],
)
def test_an_aggregate_of_a_measure_is_routed_by_its_words(agg_rag, llm, question, truth):
    """MAX/MIN/SUM/AVG of a measure goes to guarded SQL with no routing call: a model that would have
    voted "retrieval" is never asked, and no record text is handed to it to guess a number from."""
    llm.default_route = '{"retrieval": true, "aggregation": false}'
    llm.push(
        json.dumps({"sql": "SELECT MAX(ESTIMATED_HOURS) AS M FROM RAG_V_TASK"}), "The largest is M hours."
    )
    settings = agg_rag.settings.with_overrides(
        llm_url=llm.url, llm_model="m", llm_api_key="k", llm_max_retries=0, aggregate_timeout_s=60.0
    )
    answer = Chat(agg_rag, LLMClient.from_settings(settings), settings=settings).answer(
        question, ADMIN, store=False
    )
    assert not llm.route_requests and answer.route == "aggregation" and answer.retrieval.chunks == 0
    assert answer.aggregate is not None and answer.aggregate.rows[0][0] == pytest.approx(
        _count(agg_rag, truth)
    )
    without = Chat(agg_rag, None).answer(question, ADMIN, store=False)  # no model: the records, and why
    assert without.route == "retrieval" and without.answer.startswith(AGGREGATION_UNAVAILABLE)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"retrieval": true, "aggregation": false}', ("retrieval",)),
        ('{"retrieval": false, "aggregation": true}', ("aggregation",)),
        ('```json\n{"retrieval": true, "aggregation": true}\n```', ("both",)),
        ('{"retrieval": false, "aggregation": false}', ("retrieval",)),
        ('{"retrieval": "yes"}', None),
        ("nope", None),
    ],
)
def test_parse_route(reply, expected):
    parsed = parse_route(reply)
    assert (parsed.name,) == expected if expected else parsed is None


def test_ask_show_sql_cli(agg_rag, llm, tmp_path):
    from click.testing import CliRunner

    from oracle_rag.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'data_dir = "{agg_rag.settings.data_dir}"\nllm_url = "{llm.url}"\nllm_model = "m"\n'
        f'llm_api_key = "k"\nllm_max_retries = 0\n'
    )
    llm.push_route(AGG_ONLY)
    llm.push(json.dumps({"sql": "SELECT STATUS, COUNT(*) AS N FROM RAG_V_TASK GROUP BY STATUS"}), "Counts.")
    result = CliRunner().invoke(
        main,
        [
            "--config",
            str(cfg),
            "ask",
            "what is the average of story points per status?",
            "--as",
            "1",
            "--show-sql",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "SQL (1 attempt(s)): SELECT STATUS, COUNT(*)" in result.stdout and "STATUS\tN" in result.stdout
