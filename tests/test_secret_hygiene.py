"""No secret ever reaches a log line, an error message or an HTTP response.

A full demo session runs with distinctive secrets in the environment (the
Oracle password variable, the read-only user's password variable, the
language model key through ``llm_api_key_env``, and ``ORACLE_RAG_LLM_API_KEY``
which that setting overrides): ``oracle-rag serve`` as a subprocess on
127.0.0.1 logging at DEBUG (our loggers and the HTTP/SDK libraries'), the
scripted OpenAI-protocol server as the model, then chat, stream,
conversations, health, metrics and every kind of failing request (bad
token, bad JSON, too large, wrong type, the model refusing the key, the
model down), and the CLI commands an operator runs (status, search, ask,
sql refusals, token create, model status, migrate --dry-run, queue list),
plus configuration that carries a password inside a URL, which must be
refused without echoing it. Every captured line, header and body is
searched for each secret, raw, percent-encoded and base64-encoded (at all
three byte alignments). The model server must have received the key in the
Authorization header and nowhere else.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from chat_helpers import DEV_A
from llm_server import Reply, ScriptedLLM
from reliability_helpers import HttpResult, ServeProcess, clean_env, run_cli, write_config

DB_PASSWORD = "Db-Pw/Hyg+1ene=Zq8!x7kQ"
RO_PASSWORD = "Ro-Pw/Hyg+2ene=Kp3@y5mW"
LLM_KEY = "sk-hyg/Key+3=Lm9#w2Rt5vX"
UNUSED_KEY = "sk-unused/Key+4=Tt1$v8Jq"  # ORACLE_RAG_LLM_API_KEY, overridden by llm_api_key_env
URL_PASSWORD = "Url-Pw/Hyg+5=Bb2c4NnP"
SECRETS = {
    "db password": DB_PASSWORD,
    "ro password": RO_PASSWORD,
    "llm key": LLM_KEY,
    "unused llm key": UNUSED_KEY,
    "url password": URL_PASSWORD,
}
KEY_VAR = "HYGIENE_LLM_KEY"

DEBUG_SERVE = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.DEBUG, format='%(asctime)s %(levelname)s %(name)s: %(message)s')\n"
    "from oracle_rag.cli import main\n"
    "sys.argv = ['oracle-rag', '-v'] + sys.argv[1:]\n"
    "main()\n"
)


def encoded_forms(secret: str) -> set[str]:
    """The secret as it could appear in text: raw, percent-encoded, base64 (standard and URL-safe).

    Base64 of a secret embedded in a longer value depends on its byte
    offset modulo 3, so each alignment is encoded and only the characters
    that depend on the secret alone are kept.
    """
    out = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
    raw = secret.encode("utf-8")
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * pad + raw).decode()
            out.add(text[(pad * 8 + 5) // 6 : len(text) - 4])
    assert all(len(form) >= 16 for form in out)
    return out


def find_secrets(text: str) -> list[str]:
    return [
        f"{name} ({form!r})"
        for name, secret in SECRETS.items()
        for form in encoded_forms(secret)
        if form in text
    ]


@pytest.fixture
def session_env() -> dict[str, str]:
    return clean_env(
        ORACLE_RAG_DB_PASSWORD=DB_PASSWORD,
        ORACLE_RAG_RO_PASSWORD=RO_PASSWORD,
        ORACLE_RAG_LLM_API_KEY=UNUSED_KEY,
        **{KEY_VAR: LLM_KEY},
    )


def test_encoded_forms_are_found() -> None:
    """The scanner itself: each form of a secret embedded in other text is detected."""
    for secret in SECRETS.values():
        for prefix in ("", "u:", "ab:"):
            blob = base64.b64encode((prefix + secret + "@host").encode()).decode()
            assert find_secrets(f"Authorization: Basic {blob}"), (prefix, secret)
        assert find_secrets(f"url=https://x/?k={quote_plus(secret)}&z=1")
    assert not find_secrets("nothing secret here: sk-hyg/Key")


def test_a_full_session_leaks_no_secret(demo_rag, session_env, tmp_path: Path) -> None:
    data = demo_rag.settings.data_path
    demo_rag.close()
    collected: list[tuple[str, str]] = []  # (where, text) for every output we could see

    def keep(where: str, result) -> None:
        if isinstance(result, HttpResult):
            collected.append((where, result.raw()))
        else:
            collected.append((where, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"))

    with ScriptedLLM() as llm:
        cfg = write_config(
            tmp_path / "oracle-rag.toml",
            data,
            llm_url=llm.url,
            llm_model="hygiene-model",
            llm_api_key_env=KEY_VAR,
            llm_timeout_s=3.0,
            llm_max_retries=1,
            worker_initial_delay_ms=0,
            worker_poll_ms=200,
        )
        created = run_cli(
            ["token", "create", "--employee", str(DEV_A), "--label", "hygiene"],
            config=cfg,
            env=session_env,
            verbose=True,
        )
        keep("token create", created)
        assert created.returncode == 0, created.stderr
        token = created.stdout.strip()
        auth = {"Authorization": f"Bearer {token}"}

        server = ServeProcess(
            cfg,
            session_env,
            tmp_path,
            argv=[sys.executable, "-c", DEBUG_SERVE, "--config", str(cfg), "serve", "--port", "0"],
        )
        server.start()
        try:

            def call(where: str, method: str, path: str, body=None, headers=None) -> HttpResult:
                result = server.request(method, path, body, headers)
                keep(where, result)
                return result

            assert call("healthz", "GET", "/healthz").status == 200
            assert call("me", "GET", "/api/me", headers=auth).status == 200
            llm.push("See the records.")  # uncited: the extractive answer follows it
            answer = call("chat", "POST", "/api/chat", {"question": "invoice PDF generation"}, auth)
            assert answer.status == 200 and answer.json()["answerer"] == "extractive" and llm.requests
            conversation = answer.json()["conversation_id"]
            llm.push("Streaming works too.")
            assert (
                call(
                    "stream",
                    "POST",
                    "/api/chat/stream",
                    {"question": "and invoices?", "conversation_id": conversation},
                    auth,
                ).status
                == 200
            )
            assert call("conversations", "GET", "/api/conversations", headers=auth).status == 200
            assert (
                call("conversation", "GET", f"/api/conversations/{conversation}", headers=auth).status == 200
            )
            assert call("chunk", "GET", "/api/chunks/SPRINT/1", headers=auth).status == 200
            assert call("openapi", "GET", "/api/openapi.json").status == 200
            # failures of every kind
            assert (
                call(
                    "bad token", "GET", "/api/me", headers={"Authorization": f"Bearer {token[:-2]}xx"}
                ).status
                == 401
            )
            assert call("no token", "POST", "/api/chat", {"question": "x"}).status == 401
            assert (
                call(
                    "bad json",
                    "POST",
                    "/api/chat",
                    '{"question": ',
                    {**auth, "Content-Type": "application/json"},
                ).status
                == 400
            )
            assert (
                call(
                    "too large",
                    "POST",
                    "/api/chat",
                    "x" * 100_000,
                    {**auth, "Content-Type": "application/json"},
                ).status
                == 413
            )
            assert (
                call(
                    "wrong type",
                    "POST",
                    "/api/chat",
                    "question=x",
                    {**auth, "Content-Type": "application/x-www-form-urlencoded"},
                ).status
                == 415
            )
            assert (
                call(
                    "unknown field", "POST", "/api/chat", {"question": "x", "password": DB_PASSWORD}, auth
                ).status
                == 400
            )
            assert call("missing", "GET", "/api/conversations/" + "f" * 32, headers=auth).status == 404
            llm.push(Reply(status=401))  # the endpoint refuses the key
            assert (
                call("llm 401", "POST", "/api/chat", {"question": "invoice PDF generation"}, auth).status
                == 502
            )
            llm.push(Reply(status=500), Reply(status=500))
            assert (
                call(
                    "llm 500", "POST", "/api/chat/stream", {"question": "invoice PDF generation"}, auth
                ).status
                == 502
            )
            llm.stop()  # the model goes away
            assert (
                call("llm down", "POST", "/api/chat", {"question": "invoice PDF generation"}, auth).status
                == 502
            )
            assert call("healthz after", "GET", "/healthz").status == 200
            assert call("metrics", "GET", "/metrics").status == 200
        finally:
            server.stop()
        collected.append(("server log (DEBUG)", server.log()))
        assert "DEBUG" in server.log() and "INFO" in server.log()  # the levels really were on

        # what the model server received: the key in Authorization, nowhere else
        received = llm.requests + llm.route_requests
        assert len(received) >= 6
        for req in received:
            assert req.headers["authorization"] == f"Bearer {LLM_KEY}"
            others = {k: v for k, v in req.headers.items() if k != "authorization"}
            leaks = find_secrets(json.dumps(others) + req.path + json.dumps(req.body))
            assert not leaks, f"secret sent outside the Authorization header: {leaks}"
            assert not find_secrets(req.headers["authorization"].replace(LLM_KEY, "")), "another secret sent"

    # the operator's commands (the model is down now: ask fails, and says why without the key)
    for args in (
        ["status"],
        ["status", "--json"],
        ["search", "login timeout", "--as", str(DEV_A)],
        ["ask", "login timeout", "--as", str(DEV_A)],
        ["sql", "SELECT COUNT(*) FROM RAG_V_TASK", "--as", str(DEV_A)],
        ["sql", "DELETE FROM TASK", "--as", str(DEV_A)],
        ["sql", "SELECT * FROM RAG_API_TOKEN", "--as", str(DEV_A)],
        ["sql", "ATTACH DATABASE 'x.db' AS x", "--as", str(DEV_A)],
        ["token", "list"],
        ["model", "status"],
        ["migrate", "--dry-run"],
        ["queue", "list"],
    ):
        keep(" ".join(args), run_cli(args, config=cfg, env=session_env, verbose=True))
    refused = [r for w, r in collected if w.startswith("sql DELETE") or w.startswith("sql ATTACH")]
    assert all(r.startswith("exit 2") for r in refused), refused

    # passwords inside URLs are refused, and the refusal does not repeat them
    url_cases = {
        "ORACLE_RAG_DATABASE_URL": f"oracle+oracledb://app:{URL_PASSWORD}@db.example.com:1521/?service_name=FREEPDB1",
        "ORACLE_RAG_AGGREGATE_DATABASE_URL": f"oracle+oracledb://ro:{quote(URL_PASSWORD, safe='')}@db.example.com/x",
        "ORACLE_RAG_LLM_URL": f"http://user:{URL_PASSWORD}@127.0.0.1:9/v1",
    }
    for var, url in url_cases.items():
        for args in (["status"], ["migrate", "--dry-run"], ["serve", "--port", "0"]):
            result = run_cli(args, env={**session_env, var: url}, cwd=tmp_path, verbose=True)
            keep(f"{var} {args[0]}", result)
            assert result.returncode == 2 and "error: CONFIGURATION:" in result.stderr, (var, result.stderr)
    with_query = f"oracle+oracledb://app@db.example.com/?service_name=X&password={quote_plus(URL_PASSWORD)}"
    result = run_cli(["status"], env={**session_env, "ORACLE_RAG_DATABASE_URL": with_query}, cwd=tmp_path)
    keep("password in query", result)
    assert result.returncode == 2

    # the scan
    assert len(collected) > 40
    leaks = [(where, found) for where, text in collected if (found := find_secrets(text))]
    assert not leaks, f"secrets found: {leaks}"


def test_settings_repr_and_errors_hold_no_secret(monkeypatch, tmp_path: Path) -> None:
    """The library surface: Settings' redacted view, LLMClient's repr, config errors."""
    from oracle_rag.answering.chat import LLMClient
    from oracle_rag.config import load_settings
    from oracle_rag.errors import ConfigurationError

    monkeypatch.setenv(KEY_VAR, LLM_KEY)
    settings = load_settings(
        env={},
        data_dir=str(tmp_path),
        llm_url="http://127.0.0.1:9/v1",
        llm_model="m",
        llm_api_key=UNUSED_KEY,
        llm_api_key_env=KEY_VAR,
    )
    assert settings.llm_key() == LLM_KEY
    texts = [json.dumps(settings.redacted(), default=str), repr(LLMClient(settings))]
    for url in (
        f"oracle+oracledb://app:{URL_PASSWORD}@h/x",
        f"oracle+oracledb://app:{quote(URL_PASSWORD, safe='')}@h/x",
    ):
        with pytest.raises(ConfigurationError) as info:
            load_settings(env={}, data_dir=str(tmp_path), database_url=url)
        texts += [str(info.value), repr(info.value), json.dumps(info.value.details, default=str)]
    assert not [t for t in texts if find_secrets(t)], texts
