"""The LLM client against a real local HTTP server speaking the OpenAI protocol."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from llm_server import Reply, ScriptedLLM

from oracle_rag.answering.chat.llm import LLMClient
from oracle_rag.config import load_settings
from oracle_rag.errors import ConfigurationError, LLMError

KEY = "sk-test-0123456789abcdef-SECRET"
MESSAGES = [{"role": "system", "content": "rules"}, {"role": "user", "content": "question"}]


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def client(server: ScriptedLLM, sleeps: list[float] | None = None, **overrides) -> LLMClient:
    values = {
        "llm_url": server.url,
        "llm_model": "m1",
        "llm_api_key_env": "TEST_LLM_KEY",
        "llm_timeout_s": 10.0,
        "llm_max_retries": 2,
        "llm_max_tokens": 77,
        **overrides,
    }
    settings = load_settings(env={}, **values)
    import time

    def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)
        time.sleep(min(seconds, 0.05))  # backoff is real but kept short for the test

    return LLMClient(settings, sleep=sleep)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", KEY)


def test_complete_sends_the_openai_request(llm: ScriptedLLM) -> None:
    llm.push("the answer [TASK #1]")
    assert client(llm).complete(MESSAGES) == "the answer [TASK #1]"
    (req,) = llm.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"  # the key from llm_api_key_env reaches the server
    assert req.body["model"] == "m1" and req.body["max_tokens"] == 77
    assert req.body["messages"] == MESSAGES and not req.body.get("stream")


def test_5xx_then_success_is_retried_with_backoff(llm: ScriptedLLM) -> None:
    llm.push(Reply(status=500), Reply(status=503), "finally")
    sleeps: list[float] = []
    assert client(llm, sleeps).complete(MESSAGES) == "finally"
    assert len(llm.requests) == 3
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] > 0  # exponential backoff


def test_429_honours_retry_after(llm: ScriptedLLM) -> None:
    llm.push(Reply(status=429, retry_after="1"), "ok")
    sleeps: list[float] = []
    assert client(llm, sleeps).complete(MESSAGES) == "ok"
    assert sleeps == [1.0]


def test_retries_are_bounded(llm: ScriptedLLM) -> None:
    llm.push(*[Reply(status=500)] * 3)
    with pytest.raises(LLMError) as info:
        client(llm, llm_max_retries=2).complete(MESSAGES)
    assert len(llm.requests) == 3
    assert info.value.details["http_status"] == 502
    assert "HTTP 500" in info.value.message and "3 attempts" in info.value.message


def test_client_errors_are_not_retried(llm: ScriptedLLM) -> None:
    llm.push(Reply(status=400), "never sent")
    with pytest.raises(LLMError) as info:
        client(llm).complete(MESSAGES)
    assert len(llm.requests) == 1 and info.value.details["http_status"] == 502


def test_retry_after_beyond_the_budget_gives_up_at_once(llm: ScriptedLLM) -> None:
    llm.push(Reply(status=429, retry_after="3600"), "never sent")
    sleeps: list[float] = []
    with pytest.raises(LLMError, match="rate limiting"):
        client(llm, sleeps).complete(MESSAGES)
    assert sleeps == [] and len(llm.requests) == 1


def test_slow_server_times_out_with_504(llm: ScriptedLLM) -> None:
    llm.push(Reply(text="too late", delay_s=30))
    with pytest.raises(LLMError) as info:
        client(llm, llm_timeout_s=0.5).complete(MESSAGES)
    assert info.value.details["http_status"] == 504
    assert "did not answer within 0.5 s" in info.value.message
    assert len(llm.requests) == 1  # the budget was spent: no second attempt


def test_unreachable_endpoint_is_502(llm: ScriptedLLM) -> None:
    url = llm.url
    llm.stop()
    settings = load_settings(env={}, llm_url=url, llm_model="m", llm_timeout_s=2, llm_max_retries=1)
    with pytest.raises(LLMError) as info:
        LLMClient(settings, sleep=lambda s: None).complete(MESSAGES)
    assert info.value.details["http_status"] == 502 and "could not be reached" in info.value.message


def test_empty_answer_is_an_error(llm: ScriptedLLM) -> None:
    llm.push("   ")
    with pytest.raises(LLMError, match="empty answer"):
        client(llm).complete(MESSAGES)


def test_stream_yields_pieces(llm: ScriptedLLM) -> None:
    llm.push(Reply(text="unused", pieces=["Hel", "lo ", "[TASK #1]"]))
    assert list(client(llm).stream(MESSAGES)) == ["Hel", "lo ", "[TASK #1]"]
    assert llm.requests[0].body["stream"] is True


def test_stream_retries_before_the_first_piece(llm: ScriptedLLM) -> None:
    llm.push(Reply(status=502), Reply(text="after retry"))
    assert "".join(client(llm).stream(MESSAGES)) == "after retry"
    assert len(llm.requests) == 2


def test_stream_refused_raises_when_opening(llm: ScriptedLLM) -> None:
    llm.push(Reply(status=401))
    with pytest.raises(LLMError) as info:
        client(llm).stream(MESSAGES)  # raises before any iteration
    assert info.value.details["http_status"] == 502


def test_stream_stalling_mid_answer_is_a_504(llm: ScriptedLLM) -> None:
    llm.push(Reply(text="x", pieces=["partial "], stall_after_pieces=30))
    pieces = client(llm, llm_timeout_s=0.5).stream(MESSAGES)
    got = []
    with pytest.raises(LLMError) as info:
        for piece in pieces:
            got.append(piece)
    assert got == ["partial "]
    assert info.value.details["http_status"] == 504


def test_the_key_is_never_logged_or_shown(llm: ScriptedLLM, caplog: pytest.LogCaptureFixture) -> None:
    llm.push(Reply(status=500), "ok", Reply(status=400))
    with caplog.at_level(logging.DEBUG):
        c = client(llm)
        c.complete(MESSAGES)
        with pytest.raises(LLMError) as info:
            c.complete(MESSAGES)
    assert caplog.records, "the retry is logged"
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert llm.url not in record.getMessage() or record.name.startswith(("openai", "httpx", "httpcore"))
    assert KEY not in str(info.value) and KEY not in repr(c)
    assert llm.url not in str(info.value)


def test_configuration_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="llm_model"):
        LLMClient(load_settings(env={}, llm_url="http://127.0.0.1:9/v1"))
    assert LLMClient.from_settings(load_settings(env={})) is None


def test_describe_names_the_active_answerer(llm: ScriptedLLM) -> None:
    """`serve`/`demo` say which answerer runs; the endpoint as host:port, no path, no key."""
    assert LLMClient.describe(load_settings(env={})).startswith(
        "answerer: extractive (no language model configured; set ORACLE_RAG_LLM_URL and ORACLE_RAG_LLM_MODEL"
    )
    settings = load_settings(env={}, llm_url=llm.url, llm_model="m1", llm_api_key_env="TEST_LLM_KEY")
    line = LLMClient.describe(settings)
    port = llm.url.split(":")[2].split("/")[0]
    assert line == f"answerer: llm (model m1 at 127.0.0.1:{port})"
    assert KEY not in line and "/v1" not in line
    c = client(llm)  # the line describes a client that really answers
    llm.push("pong")
    assert c.complete(MESSAGES) == "pong"
