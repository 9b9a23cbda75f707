"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

The language model is the one collaborator we cannot run here, so tests
talk to this real HTTP server instead: the ``openai`` SDK (and therefore our
client) goes through its real HTTP stack. Each request to
``POST /v1/chat/completions`` takes the next scripted :class:`Reply` from a
queue: a status code (with an OpenAI-style error body and an optional
``Retry-After``), a delay before answering, and the answer text, sent as one
JSON completion or, when the request says ``"stream": true``, as SSE
``chat.completion.chunk`` events (chunked transfer encoding) ending with
``data: [DONE]``. Every request is recorded (path, headers, JSON body).

With no reply left it answers 500, so a test that calls more often than
it scripted fails loudly. Delays wait on an event that ``stop()`` sets, so
shutting down never waits for a sleeping handler.
"""

from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from oracle_rag.answering.chat.router import ROUTER_MARKER


@dataclass
class Reply:
    text: str = "OK"
    status: int = 200
    delay_s: float = 0.0
    retry_after: str | None = None
    pieces: list[str] | None = None  # how a streamed answer is split (default: word by word)
    stall_after_pieces: float = 0.0  # streaming: wait this long after the pieces, before [DONE]
    piece_delay_s: float = 0.0  # streaming: pause before each piece (to watch an answer arrive)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, str]]:
        return list(self.body.get("messages", []))

    @property
    def system(self) -> str:
        return "\n".join(m["content"] for m in self.messages if m["role"] == "system")

    @property
    def last_user(self) -> str:
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""


@dataclass
class ScriptedLLM:
    replies: queue.Queue[Reply] = field(default_factory=queue.Queue)
    requests: list[RecordedRequest] = field(default_factory=list)
    model: str = "scripted-model"
    # The chat's router asks the model to route every question first. Those
    # requests are answered from `routes` (default: retrieval only) and kept
    # apart in `route_requests`, so tests that script answers see only theirs.
    routes: queue.Queue[str] = field(default_factory=queue.Queue)
    route_requests: list[RecordedRequest] = field(default_factory=list)
    default_route: str = '{"retrieval": true, "aggregation": false}'

    def push_route(self, *routes: str) -> ScriptedLLM:
        for r in routes:
            self.routes.put(r)
        return self

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------
    def push(self, *replies: Reply | str) -> ScriptedLLM:
        for reply in replies:
            self.replies.put(Reply(text=reply) if isinstance(reply, str) else reply)
        return self

    def discard(self) -> int:
        """Drop the replies no request took (how many): a test sharing one server across examples
        starts each from an empty script, so a reply left by an answer the model never wrote (a
        computed one) cannot become the next example's answer."""
        dropped = 0
        while True:
            try:
                self.replies.get_nowait()
            except queue.Empty:
                return dropped
            dropped += 1

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> ScriptedLLM:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_invalid": raw.decode("utf-8", "replace")}
                recorded = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                if ROUTER_MARKER in recorded.system:
                    with llm._lock:
                        llm.route_requests.append(recorded)
                    try:
                        text = llm.routes.get_nowait()
                    except queue.Empty:
                        text = llm.default_route
                    self._json(200, _completion(text, body.get("model", llm.model)))
                    return
                with llm._lock:
                    llm.requests.append(recorded)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                    return
                try:
                    reply = llm.replies.get_nowait()
                except queue.Empty:
                    self._json(500, {"error": {"message": "no scripted reply left", "type": "server_error"}})
                    return
                if reply.delay_s and llm._stop.wait(reply.delay_s):
                    return
                if reply.status != 200:
                    headers = {"Retry-After": reply.retry_after} if reply.retry_after else {}
                    self._json(
                        reply.status,
                        {
                            "error": {
                                "message": f"scripted status {reply.status}",
                                "type": "server_error",
                                "code": None,
                            }
                        },
                        headers,
                    )
                    return
                if body.get("stream"):
                    self._stream(reply, body.get("model", llm.model))
                else:
                    self._json(200, _completion(reply.text, body.get("model", llm.model)))

            def _json(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self, reply: Reply, model: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                pieces = reply.pieces if reply.pieces is not None else _words(reply.text)
                first = True
                for piece in pieces:
                    if reply.piece_delay_s and llm._stop.wait(reply.piece_delay_s):
                        return
                    delta: dict[str, Any] = {"content": piece}
                    if first:
                        delta["role"] = "assistant"
                        first = False
                    self._chunk(_sse(_chunk_obj(model, delta, None)))
                if reply.stall_after_pieces and llm._stop.wait(reply.stall_after_pieces):
                    return
                self._chunk(_sse(_chunk_obj(model, {}, "stop")))
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")  # the terminating zero-length chunk

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-llm",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up (a timed-out SDK call, a closed pool) are normal here: no traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _words(text: str) -> list[str]:
    """Split text into pieces that concatenate back to it exactly (word + following space)."""
    out: list[str] = []
    current = ""
    for ch in text:
        current += ch
        if ch == " ":
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def _chunk_obj(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _completion(text: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
