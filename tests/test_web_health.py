"""/healthz, /metrics, mounting in a host app, and a real waitress server on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from chat_helpers import DEV_A, MANAGER, bearer, issue_tokens
from flask import Flask

from oracle_rag.background import BackgroundServices
from oracle_rag.web import create_app, init_app
from oracle_rag.web.server import make_server, serve_until


def test_healthz_ok(client) -> None:
    response = client.get("/healthz")
    body = response.get_json()
    assert response.status_code == 200 and body["status"] == "ok"
    assert body["database"]["ok"] and body["model"]["ok"] and body["model"]["dimensions"] == 384
    assert body["queue"] == {"depth": 0, "stalled_rows": 0, "failed_rows": 0, "oldest_age_s": None}


def test_healthz_reports_stalled_rows_and_a_missing_model(demo_rag) -> None:
    app = create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None})
    engine = demo_rag.engine
    with engine.begin() as conn:  # two queue rows that failed three times: "stalled"
        engine.enqueue_many(conn, [("TASK", "1", "UPSERT"), ("TASK", "2", "UPSERT")])
        ids = [r.dirty_id for r in engine.list_queue(conn, failed_only=False, max_attempts=5, limit=10)]
        for _ in range(3):
            engine.fail_queue_rows(conn, ids, "boom")
    body = app.test_client().get("/healthz").get_json()
    assert body["queue"]["depth"] == 2 and body["queue"]["stalled_rows"] == 2
    assert body["status"] == "ok"  # a stuck row makes answers staler, not impossible
    demo_rag.settings.model_path.unlink()  # this test's own hard link to the session model
    response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.get_json()["model"]["ok"] is False and "fix" in response.get_json()["model"]


def test_healthz_503_when_the_database_is_unreachable(make_settings, tmp_path) -> None:
    from oracle_rag.system import RagSystem

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    rag = RagSystem(make_settings(data_dir=str(blocker)))
    try:
        response = (
            create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None}).test_client().get("/healthz")
        )
    finally:
        rag.close()
    body = response.get_json()
    assert response.status_code == 503 and body["database"]["ok"] is False and body["status"] == "unavailable"


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        metric, _, value = line.rpartition(" ")
        if metric.split("{")[0] != name:
            continue
        if all(f'{k}="{v}"' in metric for k, v in labels.items()):
            return float(value)
    raise AssertionError(f"{name}{labels} not in metrics")


def test_metrics_per_app_registries(demo_rag) -> None:
    tokens = issue_tokens(demo_rag, (DEV_A,))
    first = create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None}).test_client()
    second = create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None}).test_client()  # no collision
    for _ in range(2):
        assert (
            first.post("/api/chat", json={"question": "invoice"}, headers=bearer(tokens[DEV_A])).status_code
            == 200
        )
    assert first.get("/api/me").status_code == 401
    response = first.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    assert _sample(text, "oracle_rag_http_requests_total", endpoint="oracle_rag_api.chat", status="200") == 2
    assert _sample(text, "oracle_rag_http_requests_total", endpoint="oracle_rag_api.me", status="401") == 1
    assert (
        _sample(text, "oracle_rag_http_request_duration_seconds_count", endpoint="oracle_rag_api.chat") == 2
    )
    assert _sample(text, "oracle_rag_retrieval_duration_seconds_count", mode="hybrid") == 2
    assert _sample(text, "oracle_rag_chat_answers_total", answerer="extractive") == 2
    assert (
        _sample(text, "oracle_rag_embedding_duration_seconds_count") >= 2
    )  # one query embedding per question
    assert _sample(text, "oracle_rag_queue_depth") == 0 and _sample(text, "oracle_rag_database_up") == 1
    assert "oracle_rag_chunks" not in text and "TASK" not in text  # no data counts
    other = second.get("/metrics").get_data(as_text=True)
    with pytest.raises(AssertionError):
        _sample(other, "oracle_rag_http_requests_total", endpoint="oracle_rag_api.chat", status="200")


def test_mounting_in_a_host_app(demo_rag) -> None:
    host = Flask("host")

    @host.get("/")
    def home() -> str:
        return "host home"

    init_app(host, demo_rag, llm=None, api_prefix="/rag/api", pages_prefix="/rag", ops_prefix="/rag")
    tokens = issue_tokens(demo_rag, (MANAGER,))
    client = host.test_client()
    assert client.get("/").get_data(as_text=True) == "host home"
    answer = client.post("/rag/api/chat", json={"question": "sprint goals"}, headers=bearer(tokens[MANAGER]))
    assert answer.status_code == 200 and answer.get_json()["citations"]
    assert client.get("/rag/healthz").status_code == 200 and client.get("/rag/metrics").status_code == 200
    page = client.get("/rag/").get_data(as_text=True)
    assert 'data-api="/rag/api"' in page and "/rag/static/oracle-rag/chat.js" in page
    assert client.get("/rag/api/nope").get_json()["code"] == "NOT_FOUND"  # JSON under our prefix
    assert "<" in client.get("/host-page-missing").get_data(as_text=True)  # the host keeps its HTML 404
    with pytest.raises(RuntimeError):
        init_app(host, demo_rag)


# -- a real server ---------------------------------------------------------------------
@pytest.fixture
def served(demo_rag) -> Iterator[tuple[str, dict[int, str]]]:
    tokens = issue_tokens(demo_rag, (DEV_A, MANAGER))
    app = create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None})
    server = make_server(app, "127.0.0.1", 0, threads=4)
    stop = threading.Event()
    thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.effective_port}", tokens
    stop.set()
    thread.join(120)  # a hang guard: stopping takes one poll
    assert not thread.is_alive(), "the server loop stops when asked"


def test_waitress_serves_json_and_streams_sse(served) -> None:
    address, tokens = served
    with urllib.request.urlopen(f"http://{address}/healthz") as response:  # noqa: S310 (a local URL)
        assert response.status == 200 and json.load(response)["status"] == "ok"
    conn = http.client.HTTPConnection(address, timeout=30)
    payload = json.dumps({"question": "push notification delivery"})
    headers = {"Content-Type": "application/json", **bearer(tokens[DEV_A])}
    conn.request("POST", "/api/chat/stream", body=payload, headers=headers)
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
    first = response.readline().decode()
    assert first == "event: meta\n"  # the first event arrives before the body is complete
    rest = response.read().decode()
    events = [b for b in (first + rest).split("\n\n") if b]
    assert events[0].startswith("event: meta") and events[-1].startswith("event: done")
    conn.request("POST", "/api/chat", body=payload, headers=headers)  # keep-alive: same connection
    again = conn.getresponse()
    assert again.status == 200 and json.loads(again.read())["citations"]
    conn.request("POST", "/api/chat", body="x" * 70_000, headers=headers)
    too_big = conn.getresponse()
    assert too_big.status == 413 and json.loads(too_big.read())["code"] == "PAYLOAD_TOO_LARGE"
    conn.close()


def test_background_worker_indexes_while_serving(demo_rag) -> None:
    from chat_helpers import task_chunks_of

    from oracle_rag.engines.statements import stmt

    task = task_chunks_of(demo_rag, DEV_A)[0]
    with demo_rag.engine.begin() as conn:
        conn.execute(
            stmt("UPDATE TASK SET TITLE = :t WHERE TASK_ID = :i"),
            {"t": "Renamed by the host app", "i": task.task_id},
        )
        demo_rag.enqueue(conn, "TASK", task.task_id)
    fast = demo_rag.settings.with_overrides(worker_initial_delay_ms=0, worker_poll_ms=50)
    demo_rag.settings = fast
    services = BackgroundServices(demo_rag, worker=True, backfill=True)
    services.start()
    try:
        done = threading.Event()

        def indexed() -> bool:
            with demo_rag.engine.connect() as conn:
                row = conn.execute(
                    stmt("SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = :i"),
                    {"i": str(task.task_id)},
                ).one()
            return "Renamed by the host app" in row[0]

        for _ in range(6000):  # polls the database; the bound (5 min) only guards against a hang
            if indexed():
                done.set()
                break
            services.stop_event.wait(0.05)
        assert done.is_set(), "the in-process worker picked up the queue row"
        status = services.status()
        assert status["in_process"] and status["running"] and status["backfill"] in ("running", "done")
    finally:
        assert services.stop(timeout=300), (
            "worker and backfill threads stop cleanly"
        )  # after the current batch
    assert services.status()["running"] is False
