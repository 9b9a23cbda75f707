"""OpenTelemetry traces: the span tree of one chat request, content and secret hygiene, exporters.

Spans go to the SDK's in-memory exporter through ``tracing.use_provider``
(no global provider is installed, so other tests are untouched). The chat
request is a real HTTP request to waitress on 127.0.0.1; the language model
is the scripted OpenAI-protocol server, routed to both retrieval and an
aggregate, so every step of an answer runs once. The exporter tests run a
subprocess each, because a process can install its global provider once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from chat_helpers import DEV_A, bearer, issue_tokens, task_chunks_of
from llm_server import ScriptedLLM
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from oracle_rag import tracing
from oracle_rag.answering.chat import LLMClient
from oracle_rag.web import create_app
from oracle_rag.web.server import make_server, serve_until

BOTH = '{"retrieval": true, "aggregation": true}'
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SQL = "SELECT COUNT(*) AS N FROM RAG_V_TASK"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with tracing.use_provider(provider):
        yield memory
    provider.shutdown()


def serve(rag: Any, llm: ScriptedLLM) -> Any:
    settings = rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
    app = create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": LLMClient(settings)})
    server = make_server(app, "127.0.0.1", 0, threads=2)
    stop = threading.Event()
    thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
    thread.start()
    return f"http://127.0.0.1:{server.effective_port}", stop, thread


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, str]]:
    """(depth, name) in start order, children under their parent."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(s)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in sorted(by_parent.get(parent, []), key=lambda x: x.start_time or 0):
            out.append((depth, s.name))
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return out


def all_text(spans: tuple[ReadableSpan, ...]) -> str:
    return json.dumps(
        [
            {
                "name": s.name,
                "attributes": dict(s.attributes or {}),
                "events": [dict(e.attributes or {}) for e in s.events],
                "status": s.status.description,
            }
            for s in spans
        ],
        default=str,
    )


def ask_once(rag: Any, path: str, question: str, token: str) -> tuple[int, str]:
    with ScriptedLLM().start() as llm:
        llm.push_route(BOTH)
        llm.push(json.dumps({"sql": SQL}), "You have N tasks; see [TASK #1].")
        base, stop, thread = serve(rag, llm)
        try:
            response = httpx2.post(
                base + path,
                json={"question": question},
                headers={**bearer(token), "traceparent": TRACEPARENT},
                timeout=60,
            )
        finally:
            stop.set()
            thread.join(10)
    return response.status_code, response.text


def test_span_tree_of_one_chat_request(demo_rag, exporter) -> None:
    token = issue_tokens(demo_rag, (DEV_A,))[DEV_A]
    # an aggregate-looking question that is no aggregate of a measure: only those are routed by the model
    question = "how many comments mention " + task_chunks_of(demo_rag, DEV_A)[0].title
    status, _ = ask_once(demo_rag, "/api/chat", question, token)
    assert status == 200
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        (0, "POST /api/chat"),
        (1, "query understanding"),
        (2, "chat m"),
        (1, "retrieval"),
        (2, "search semantic"),
        (3, "embeddings all-MiniLM-L6-v2"),
        (2, "search keyword"),
        (2, "fusion"),
        (1, "aggregate"),
        (2, "chat m"),
        (2, "guard"),
        (2, "guarded sql"),
        (1, "chat m"),
    ]
    by_name = {s.name: s for s in spans}
    request = by_name["POST /api/chat"]
    assert request.kind == SpanKind.SERVER and f"{request.context.trace_id:032x}" == TRACEPARENT.split("-")[1]
    assert (
        request.attributes["http.route"] == "/api/chat"
        and request.attributes["http.response.status_code"] == 200
    )
    assert {s.context.trace_id for s in spans} == {request.context.trace_id}, (
        "one trace, continued from the caller"
    )

    models = [s for s in spans if s.name == "chat m"]
    assert all(s.kind == SpanKind.CLIENT for s in models)
    answer = models[-1].attributes
    assert answer["gen_ai.operation.name"] == "chat" and answer["gen_ai.request.model"] == "m"
    assert answer["gen_ai.provider.name"] == "openai" and answer["server.address"] == "127.0.0.1"
    assert (
        answer["gen_ai.response.finish_reasons"] == ("stop",) and answer["gen_ai.request.max_tokens"] == 512
    )
    embed = by_name["embeddings all-MiniLM-L6-v2"].attributes
    assert embed["gen_ai.operation.name"] == "embeddings"
    assert by_name["guard"].attributes["oracle_rag.guard.decision"] == "allowed"
    guarded = by_name["guarded sql"]
    assert guarded.kind == SpanKind.CLIENT and guarded.attributes["db.response.returned_rows"] == 1
    assert by_name["query understanding"].attributes["oracle_rag.route"] == "both"
    assert by_name["fusion"].attributes["oracle_rag.fusion.method"] == "rrf"
    legs = {
        s.attributes["oracle_rag.search.leg"]: s.attributes["oracle_rag.search.hits"]
        for s in spans
        if s.name.startswith("search ")
    }
    assert set(legs) == {"semantic", "keyword"} and legs["semantic"] > 0

    text = all_text(spans)
    assert question not in text and SQL not in text, "no question or SQL text without tracing_capture_content"
    assert token not in text and "gen_ai.input.messages" not in text


def test_a_structured_answer_has_its_sql_span(demo_rag, exporter) -> None:
    from oracle_rag.answering.chat import Chat
    from oracle_rag.callers.access import load_caller

    with demo_rag.engine.connect() as conn:
        caller = load_caller(conn, DEV_A)
    with tracing.span("request"):
        answer = Chat(demo_rag, None).answer("my open tasks", caller, None, None)
    assert answer.route == "structured"
    spans = exporter.get_finished_spans()
    assert tree(spans) == [(0, "request"), (1, "query understanding"), (2, "structured sql")]
    sql = next(s for s in spans if s.name == "structured sql")
    assert sql.kind == SpanKind.CLIENT and sql.attributes["db.system.name"] == "sqlite"
    assert sql.attributes["oracle_rag.structured.kind"] == "list"
    assert sql.attributes["db.response.returned_rows"] == len(answer.citations) > 0
    assert sql.attributes["oracle_rag.structured.total"] >= len(answer.citations)


def test_content_is_captured_only_when_allowed(demo_rag) -> None:
    token = issue_tokens(demo_rag, (DEV_A,))[DEV_A]
    question = "average estimate of " + task_chunks_of(demo_rag, DEV_A)[0].title
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with tracing.use_provider(provider, capture_content=True):
        status, _ = ask_once(demo_rag, "/api/chat", question, token)
    assert status == 200
    spans = memory.get_finished_spans()
    answer = [s for s in spans if s.name == "chat m"][-1].attributes
    assert question in answer["gen_ai.input.messages"] and "[TASK #1]" in answer["gen_ai.output.messages"]
    assert [s for s in spans if s.name == "guarded sql"][0].attributes["db.query.text"] == SQL
    assert token not in all_text(spans)


def test_streamed_answer_is_inside_its_request_span(demo_rag, exporter) -> None:
    token = issue_tokens(demo_rag, (DEV_A,))[DEV_A]
    status, body = ask_once(demo_rag, "/api/chat/stream", task_chunks_of(demo_rag, DEV_A)[0].title, token)
    assert status == 200 and "event: done" in body
    spans = exporter.get_finished_spans()
    request = next(s for s in spans if s.name == "POST /api/chat/stream")
    answer = [s for s in spans if s.name == "chat m"][-1]
    assert answer.parent is not None and answer.parent.span_id == request.context.span_id
    assert answer.attributes["gen_ai.request.stream"] is True
    assert request.end_time >= answer.end_time, "the request span ends when the stream has been sent"


def test_a_refused_query_marks_the_guard_span(demo_rag, exporter) -> None:
    from oracle_rag.answering.aggregate import AggregateService
    from oracle_rag.callers.caller import Caller
    from oracle_rag.errors import GuardrailError

    service = AggregateService(demo_rag.engine, demo_rag.settings)
    with pytest.raises(GuardrailError):
        service.run_sql("SELECT * FROM RAG_API_TOKEN", Caller(DEV_A, "developer"))
    guard = next(s for s in exporter.get_finished_spans() if s.name == "guard")
    assert guard.attributes["oracle_rag.guard.decision"] == "refused"
    assert guard.status.description == "GuardrailError" and "RAG_API_TOKEN" not in all_text((guard,))


def test_oracle_session_tags_carry_the_trace(exporter) -> None:
    assert tracing.session_tags() == ("oracle-rag", "", ""), "outside a span nothing is attributed"
    with tracing.span("a-step-name-longer-than-thirty-two-bytes") as current:
        module, action, info = tracing.session_tags()
        ctx = current.get_span_context()
    assert module == "oracle-rag" and action == "a-step-name-longer-than-thirty-t" and len(action) == 32
    assert info == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}" and len(info) <= 64


# -- exporters, one process each ------------------------------------------------------------
SNIPPET = """
import sys
from oracle_rag import tracing
from oracle_rag.config import load_settings
tracing.configure(load_settings(env={{}}, {settings}))
with tracing.span("outer"):
    with tracing.span("inner", {{"k": 1}}):
        pass
"""


def run_snippet(**settings: Any) -> subprocess.CompletedProcess[str]:
    code = SNIPPET.format(settings=", ".join(f"{k}={v!r}" for k, v in settings.items()))
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )


def test_console_exporter_writes_spans_to_stderr_only() -> None:
    done = run_snippet(tracing_exporter="console")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", "stdout is the MCP stdio pipe"
    lines = done.stderr.splitlines()  # one line per span, not the SDK's ~40 lines of JSON
    assert len(lines) == 2, done.stderr
    inner, outer = lines
    assert inner.startswith("oracle-rag ") and ' span "inner" ' in inner and inner.endswith(' {"k":1}')
    assert ' span "outer" ' in outer and outer.endswith(" parent=- {}")
    outer_id = outer.split(" span=")[1].split()[0]
    assert (
        f" parent={outer_id} " in inner and inner.split(" trace=")[1][:32] == outer.split(" trace=")[1][:32]
    )


def test_otlp_exporter_sends_protobuf_to_the_collector() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = run_snippet(
            tracing_exporter="otlp",
            tracing_service_name="rag-test",
            tracing_otlp_endpoint=f"http://127.0.0.1:{server.server_address[1]}",
        )
    finally:
        server.shutdown()
        thread.join(10)
    assert done.returncode == 0, done.stderr
    assert received and received[0][0] == "/v1/traces" and received[0][1] == "application/x-protobuf"
    request = ExportTraceServiceRequest.FromString(received[0][2])
    names = {s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans}
    service = {
        a.value.string_value
        for rs in request.resource_spans
        for a in rs.resource.attributes
        if a.key == "service.name"
    }
    assert names == {"outer", "inner"} and service == {"rag-test"}


def test_tracing_is_off_by_default_and_validated() -> None:
    from oracle_rag.config import load_settings
    from oracle_rag.errors import ConfigurationError

    assert load_settings(env={}).tracing_exporter == "NONE"
    assert tracing.configure(load_settings(env={})) is False
    with pytest.raises(ConfigurationError, match="TRACING_EXPORTER"):
        load_settings(env={"ORACLE_RAG_TRACING_EXPORTER": "jaeger"})
    with pytest.raises(ConfigurationError, match="tracing_otlp_endpoint") as refused:
        load_settings(env={}, tracing_otlp_endpoint="http://user:hunter2@collector:4318")
    assert "hunter2" not in str(refused.value)
