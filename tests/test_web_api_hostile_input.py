"""Hostile input against the JSON API — clear 4xx errors, never a 500, the server stays up.

Three layers:

1. **Contract fuzzing** with schemathesis over the OpenAPI document the app
   serves (``GET /api/openapi.json``, :mod:`oracle_rag.web.openapi`): valid
   and invalid requests generated per operation, each response checked
   against the document (status documented, body schema, content type, no
   5xx, auth enforced). Responses are closed objects there, so a field the
   code adds without describing it fails here.
2. **Hand-picked hostile bodies** (the cases a generator rarely builds):
   huge bodies, wrong content types, invalid UTF-8, JSON nested 10,000 and
   30,000 levels deep, NUL bytes, lone surrogates, wrong types, hostile
   headers and paths, plus a hypothesis property over arbitrary bytes and
   arbitrary JSON values.
3. A short run against a **real waitress server** on 127.0.0.1: raw sockets
   for what a test client cannot send (chunked bodies without a length,
   a lying Content-Length), some schemathesis cases over HTTP, and a normal
   request afterwards.

Examples are kept few (the whole module runs in well under a minute).
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import schemathesis
from chat_helpers import DEV_A, DEV_B, bearer, issue_tokens
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from oracle_rag.config import load_settings
from oracle_rag.system import RagSystem
from oracle_rag.web import create_app
from oracle_rag.web.openapi import build_spec
from oracle_rag.web.server import make_server, serve_until

SPEC = build_spec()
http_schema = schemathesis.openapi.from_dict(SPEC)  # the same document, sent over real HTTP
served_schema = schemathesis.pytest.from_fixture("wsgi_schema")  # the app's own document, fuzzed in-process
FUZZ = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
ERROR_KEYS = {"error", "code", "status"}


@pytest.fixture(scope="module")
def web(demo_template, model_path, tmp_path_factory) -> Iterator[SimpleNamespace]:
    """The demo data (a private copy), one token per developer, an app without a language model."""
    data = tmp_path_factory.mktemp("fuzz") / "data"
    (data / "models").mkdir(parents=True)
    shutil.copyfile(demo_template, data / "oracle-rag.db")
    (data / "models" / model_path.name).symlink_to(model_path)
    rag = RagSystem(load_settings(env={}, data_dir=str(data)))
    tokens = issue_tokens(rag, (DEV_A, DEV_B))
    app = create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None})
    yield SimpleNamespace(
        app=app, client=app.test_client(), rag=rag, auth=bearer(tokens[DEV_A]), tokens=tokens
    )
    rag.close()


@pytest.fixture(scope="module")
def wsgi_schema(web):
    """The document as the app serves it, bound to the app (checks that re-send requests reach it too)."""
    return schemathesis.openapi.from_wsgi("/api/openapi.json", web.app)


def assert_error(response, status: int, code: str | None = None) -> dict:
    """A JSON error body with this status (and code); no traceback, no HTML."""
    text = response.get_data(as_text=True)
    assert response.status_code == status, text[:300]
    assert response.mimetype == "application/json", response.mimetype
    body = response.get_json()
    assert set(body) == ERROR_KEYS and body["status"] == status and body["error"], body
    if code is not None:
        assert body["code"] == code, body
    assert "Traceback" not in text and "<html" not in text.lower()
    return body


def assert_still_serving(client, auth) -> None:
    ok = client.post("/api/chat", json={"question": "login timeout on the mobile app"}, headers=auth)
    assert ok.status_code == 200 and ok.get_json()["answerer"] == "extractive"


# -- the document -------------------------------------------------------------------------
def test_the_served_document_is_the_built_one(web) -> None:
    response = web.client.get("/api/openapi.json")
    assert response.status_code == 200 and response.mimetype == "application/json"
    served = response.get_json()
    assert served == json.loads(json.dumps(SPEC))
    assert served["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "orag_ API token or JWT",
        "description": "oracle-rag token create --employee ID, or a JWT from the [auth] identity provider "
        "(docs/identity.md)",
    }
    chat = served["paths"]["/api/chat"]["post"]["responses"]
    assert {"200", "400", "401", "404", "413", "415", "502", "503", "504"} <= set(chat)
    assert all(
        chat[s]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
        for s in chat
        if s != "200"
    )
    # schemathesis loads it as a valid OpenAPI 3.0 document with every operation (the document's own
    # path is left out of what it tests when loaded from the app)
    loaded = schemathesis.openapi.from_wsgi("/api/openapi.json", web.app)
    assert {op.ok().label for op in loaded.get_all_operations()} | {"GET /api/openapi.json"} == {
        "POST /api/chat",
        "POST /api/chat/stream",
        "POST /api/feedback",
        "GET /api/conversations",
        "GET /api/conversations/{conversation_id}",
        "GET /api/chunks/{source_type}/{source_id}",
        "GET /api/me",
        "GET /api/demo/identities",
        "GET /api/openapi.json",
        "GET /healthz",
        "GET /metrics",
    }


def test_the_document_follows_the_mount_points(web) -> None:
    from flask import Flask

    from oracle_rag.web import init_app

    host = Flask("host")
    init_app(host, web.rag, llm=None, api_prefix="/assistant/api", ops_prefix="/ops")
    spec = host.test_client().get("/assistant/api/openapi.json").get_json()
    assert "/assistant/api/chat" in spec["paths"] and "/ops/healthz" in spec["paths"]


def test_real_responses_match_the_document(web, wsgi_schema) -> None:
    """A few hand-made requests, validated with schemathesis' response checks (not only generated ones)."""
    chat_op = wsgi_schema["/api/chat"]["POST"]
    case = chat_op.Case(body={"question": "invoice PDF generation", "mode": "keyword"})
    case.call_and_validate(headers=web.auth)
    stream = wsgi_schema["/api/chat/stream"]["POST"].Case(body={"question": "invoice PDF generation"})
    assert stream.call_and_validate(headers=web.auth).status_code == 200
    answer = web.client.post("/api/chat", json={"question": "login"}, headers=web.auth).get_json()
    conversation = wsgi_schema["/api/conversations/{conversation_id}"]["GET"].Case(
        path_parameters={"conversation_id": answer["conversation_id"]}
    )
    assert conversation.call_and_validate(headers=web.auth).status_code == 200
    wsgi_schema["/api/conversations"]["GET"].Case().call_and_validate(headers=web.auth)
    chunk = wsgi_schema["/api/chunks/{source_type}/{source_id}"]["GET"].Case(
        path_parameters={"source_type": "sprint", "source_id": "1"}
    )
    assert chunk.call_and_validate(headers=web.auth).status_code == 200
    wsgi_schema["/healthz"]["GET"].Case().call_and_validate()
    wsgi_schema["/api/me"]["GET"].Case().call_and_validate(headers=web.auth)


# -- generated (schemathesis) ------------------------------------------------------------------
@served_schema.parametrize()
@FUZZ
def test_api_contract_under_fuzzing(case, web) -> None:
    """Positive and negative cases per operation: documented statuses and bodies, never a 5xx."""
    case.call_and_validate(headers=web.auth)


def test_server_still_serves_after_fuzzing(web) -> None:
    assert_still_serving(web.client, web.auth)


# -- hand-picked hostile bodies -------------------------------------------------------------------
def test_huge_bodies_are_413(web) -> None:
    for size in (64 * 1024 + 1, 1024 * 1024, 8 * 1024 * 1024):
        body = json.dumps({"question": "x" * size})
        assert_error(
            web.client.post("/api/chat", data=body, content_type="application/json", headers=web.auth),
            413,
            "PAYLOAD_TOO_LARGE",
        )
    # before authentication too: a stranger cannot make the server read a huge body
    assert_error(
        web.client.post("/api/chat", data="x" * 200_000, content_type="application/json"),
        413,
        "PAYLOAD_TOO_LARGE",
    )
    assert_error(web.client.post("/api/chat", json={"question": "q" * 5000}, headers=web.auth), 400, "INPUT")


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "text/json",
        "application/json-patch",
        "application/octet-stream",
    ],
)
def test_wrong_content_types_are_415(web, content_type) -> None:
    headers = dict(web.auth)
    if content_type:
        headers["Content-Type"] = content_type
    for path in ("/api/chat", "/api/chat/stream"):
        assert_error(
            web.client.post(path, data='{"question": "login"}', headers=headers),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        )


@pytest.mark.parametrize(
    "body",
    [
        b'{"question": "\xff\xfe login"}',  # invalid UTF-8
        b"\xc3\x28",
        b'{"question": "login"',  # truncated
        b"",  # empty
        b"{'question': 'login'}",  # not JSON
        b'{"question": NaN}',
        b"[" * 10_000 + b"]" * 10_000,  # 10,000 levels deep
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        b"[" * 30_000 + b"]" * 30_000,  # as deep as fits in the body limit
        b"\x00\x00\x00",
    ],
    ids=[
        "invalid-utf8",
        "bad-utf8-seq",
        "truncated",
        "empty",
        "single-quotes",
        "nan",
        "nested-10000",
        "nested-objects-10000",
        "nested-30000",
        "nul-bytes",
    ],
)
def test_malformed_json_is_400(web, body) -> None:
    for path in ("/api/chat", "/api/chat/stream"):
        response = web.client.post(path, data=body, content_type="application/json", headers=web.auth)
        if body == b'{"question": NaN}':  # Python's decoder accepts NaN: then the field is the wrong type
            assert_error(response, 400, "INPUT")
        else:
            assert assert_error(response, 400, "BAD_REQUEST")["error"] == "the request body is not valid JSON"


@pytest.mark.parametrize(
    "payload,needle",
    [
        ({"question": 1}, "question"),
        ({"question": None}, "question"),
        ({"question": ["a"]}, "question"),
        ({"question": {"a": 1}}, "question"),
        ({"question": True}, "question"),
        ({}, "question"),
        ({"question": "ok", "mode": 3}, "mode"),
        ({"question": "ok", "mode": "fuzzy"}, "mode"),
        ({"question": "ok", "conversation_id": 5}, "conversation_id"),
        ({"question": "ok", "employee_id": 1}, "unknown field"),
        ({"question": "   "}, "empty"),
        ({"question": "\x00\x00"}, "empty"),
        ({"question": "login \ud800 timeout"}, "surrogate"),
        ([{"question": "ok"}], "JSON object"),
        ("login", "JSON object"),
        (42, "JSON object"),
        (None, "JSON object"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_wrong_types_and_values_are_400(web, payload, needle) -> None:
    for path in ("/api/chat", "/api/chat/stream"):
        body = assert_error(
            web.client.post(
                path, data=json.dumps(payload), content_type="application/json", headers=web.auth
            ),
            400,
            "INPUT",
        )
        assert needle in body["error"], body


def test_nul_bytes_and_odd_text_are_answered(web) -> None:
    for question in (
        "login\x00 timeout",
        "\x00login",
        "login\u202etimeout",
        "ﬁ\u0301 invoice",
        "💥" * 500,
        "SELECT * FROM TASK; --",
        "<script>alert(1)</script>",
        "' OR 1=1 --",
        "NEAR(a b)",
        "*",
    ):
        response = web.client.post("/api/chat", json={"question": question}, headers=web.auth)
        assert response.status_code == 200, (question, response.get_data(as_text=True)[:200])
        assert "\x00" not in response.get_json()["answer"]


@pytest.mark.parametrize(
    "header",
    [
        "Bearer " + "A" * 20_000,
        "Bearer orag_" + "\x00" * 43,
        "Bearer\torag_x",
        "bearer",
        "Bearer  ",
        "Basic Og==",
        "Bearer orag_" + "é" * 43,
        "Bearer orag_' OR '1'='1' --aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "Token abc",
    ],
)
def test_hostile_authorization_headers_are_401(web, header) -> None:
    response = web.client.get("/api/me", headers={"Authorization": header})
    assert_error(response, 401, "ACCESS")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "path",
    [
        "/api/chunks/TASK/%00",
        "/api/chunks/%00/1",
        "/api/chunks/TASK/" + "9" * 5000,
        "/api/chunks/TASK/..%2F..%2Fetc",
        "/api/chunks/TASK/1%20OR%201=1",
        "/api/chunks/%ff%fe/1",
        "/api/chunks/TASK'--/1",
        "/api/chunks/TASK/%ED%A0%80",
        "/api/conversations/%00",
        "/api/conversations/" + "a" * 5000,
        "/api/conversations/%ED%A0%80",
        "/api/conversations/..%2Fconversations",
        "/api/%00",
        "/api/chat/%ff",
    ],
)
def test_hostile_paths_are_404(web, path) -> None:
    assert_error(web.client.get(path, headers=web.auth), 404, "NOT_FOUND")


def test_wrong_methods_are_405(web) -> None:
    for method, path in (
        ("put", "/api/chat"),
        ("delete", "/api/conversations"),
        ("get", "/api/chat"),
        ("post", "/api/me"),
        ("patch", "/api/chunks/TASK/1"),
    ):
        response = getattr(web.client, method)(path, headers=web.auth)
        assert_error(response, 405, "METHOD_NOT_ALLOWED")
        assert response.headers.get("Allow")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["question", "mode", "conversation_id", "x", ""]) | st.text(max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(body=st.binary(max_size=300))
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_arbitrary_bytes_are_never_a_500(web, body) -> None:
    response = web.client.post("/api/chat", data=body, content_type="application/json", headers=web.auth)
    assert response.status_code in (200, 400), response.get_data(as_text=True)[:200]
    assert set(response.get_json()) >= ({"answer"} if response.status_code == 200 else ERROR_KEYS)


@given(value=json_values)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_arbitrary_json_values_are_never_a_500(web, value) -> None:
    response = web.client.post(
        "/api/chat", data=json.dumps(value), content_type="application/json", headers=web.auth
    )
    assert response.status_code in (200, 400, 404), response.get_data(as_text=True)[:200]
    if response.status_code != 200:
        assert_error(response, response.status_code)


def test_still_serving_after_the_hostile_bodies(web) -> None:
    assert_still_serving(web.client, web.auth)
    assert web.client.get("/healthz").status_code == 200


# -- a real waitress server ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(web) -> Iterator[str]:
    server = make_server(web.app, "127.0.0.1", 0, threads=4)
    stop = threading.Event()
    thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.effective_port}"
    stop.set()
    thread.join(10)


def raw_exchange(address: str, payload: bytes) -> bytes:
    """Send raw bytes, read the response until the server closes or a full response arrived."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def status_and_body(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2 :]
        body = out
    return status, json.loads(body)


def test_waitress_refuses_hostile_bodies(served, web) -> None:
    auth = web.auth["Authorization"]

    def post(body: bytes, extra: str = "", *, length: int | None = None) -> tuple[int, dict]:
        headers = (
            f"POST /api/chat HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Authorization: {auth}\r\nConnection: close\r\n{extra}"
        )
        if length is not None:
            headers += f"Content-Length: {length}\r\n"
        return status_and_body(raw_exchange(served, headers.encode() + b"\r\n" + body))

    assert post(b'{"question": "\xff"}', length=16) == (
        400,
        {"error": "the request body is not valid JSON", "code": "BAD_REQUEST", "status": 400},
    )
    deep = b"[" * 10_000 + b"]" * 10_000
    assert post(deep, length=len(deep))[0] == 400
    # chunked, no Content-Length: the body limit still applies while reading
    big = b"x" * 200_000
    chunked = b"".join(
        b"%x\r\n%s\r\n" % (len(big[i : i + 8192]), big[i : i + 8192]) for i in range(0, len(big), 8192)
    )
    status, body = post(chunked + b"0\r\n\r\n", "Transfer-Encoding: chunked\r\n")
    assert status == 413 and body["code"] == "PAYLOAD_TOO_LARGE"
    # a Content-Length far beyond the limit is refused by waitress itself, before reading the body
    head = raw_exchange(
        served,
        (
            f"POST /api/chat HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {50 * 1024 * 1024}\r\n\r\n{{}}"
        ).encode(),
    )
    assert head.split(b"\r\n", 1)[0].split(b" ")[1] == b"413"
    # garbage instead of HTTP: the server answers 400 and stays up
    garbage = raw_exchange(
        served, b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 64 + b"\r\n\r\n"
    )
    assert garbage == b"" or garbage.startswith(b"HTTP/1.") and b" 400 " in garbage.split(b"\r\n", 1)[0]


@given(data=st.data())
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_waitress_contract_over_http(served, web, data) -> None:
    """A short schemathesis run over real HTTP (chat and chunk detail), then a normal request."""
    operation = data.draw(
        st.sampled_from(
            [http_schema["/api/chat"]["POST"], http_schema["/api/chunks/{source_type}/{source_id}"]["GET"]]
        )
    )
    case = data.draw(operation.as_strategy())
    case.call_and_validate(base_url=f"http://{served}", headers=web.auth)


def test_waitress_still_serves(served, web) -> None:
    from reliability_helpers import http_request

    ok = http_request(served, "POST", "/api/chat", {"question": "login timeout"}, web.auth)
    assert ok.status == 200 and ok.json()["citations"]
    assert http_request(served, "GET", "/healthz").status == 200
