"""The OpenAI chat protocol on ``oracle-rag serve``: ``POST /v1/chat/completions``, ``GET /v1/models``.

A chat front-end that speaks this protocol (Open WebUI, LibreChat, the
``openai`` SDK, anything with a "base URL" and an "API key" field) becomes a
scoped oracle-rag client: the API key is an oracle-rag API token and is the
caller (the app's caller loader, ``Authorization: Bearer``), the last user
message is the question and the earlier user/assistant messages are the
conversation, which the client keeps.

Each answer is stored as a one-turn conversation of the caller (the question
and the answer, what was understood and any guarded SQL; not the client's
earlier turns) so that it can be rated: ``oracle_rag.message_id`` names it,
and ``POST /v1/feedback`` (or ``POST /api/feedback``, same token) takes
``{"message_id", "rating": "up" | "down", "comment"}``; a caller can rate only
their own answers (anything else is 404, as for a missing id). The protocol's
own ``"store": false`` keeps an answer unstored (``message_id`` is then null).

What the protocol cannot say is carried without breaking it:

- the answer text keeps its ``[TYPE #id]`` anchors and, for a model's answer,
  ends with a ``Sources:`` list naming each cited record, so a front-end that
  shows only text still shows the citations;
- a non-standard top-level ``citations`` field carries them structured
  (``source_type``, ``source_id``, ``anchor``, ``snippet``), and
  ``oracle_rag`` carries the answerer, the route, an aggregate's SQL and
  rows, a structured answer's computed result (``structured``: the exact
  ``count``/``total`` and the listed ``records``, as ``/api/chat`` gives it,
  so a client reads the number without parsing prose), and the stored
  answer's ``message_id``. Streamed, both arrive on the final chunk (the one with
  ``finish_reason``). The ``openai`` SDK keeps unknown fields (``model_extra``).

System and developer messages are ignored: the product's own rules govern
the prompt, and a client cannot loosen them. Sampling parameters
(``temperature``, ``max_tokens``...) are accepted and ignored; the server's
settings decide. Errors use the OpenAI error body
``{"error": {"message", "type", "param", "code"}}`` with the same statuses as
the API (401 without a valid token, 400 for a bad request, 404 for an
unknown model, 502/504 when the language model fails).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response, g, jsonify, request, stream_with_context
from werkzeug.exceptions import HTTPException

from oracle_rag.answering.chat.answer import ChatAnswer
from oracle_rag.answering.chat.citations import Citation, snippet
from oracle_rag.answering.chat.feedback import check_comment, check_rating
from oracle_rag.answering.chat.prompt import Turn
from oracle_rag.callers.audit import ENTRY_POINT, leave_entry_point
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import AccessError, InputError, LLMError, NotFoundError, RagError
from oracle_rag.web import json_errors
from oracle_rag.web.state import finish_api_response, release_db, state

MODEL_ID = "oracle-rag"
CREATED = 1_767_225_600  # 2026-01-01: a fixed "created" for the one model (the protocol wants an int)
SOURCE_SNIPPET = 80
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
FEEDBACK_FIELDS = {"message_id", "rating", "comment"}

openai_bp = Blueprint("oracle_rag_openai", __name__)


# -- errors in the protocol's shape ------------------------------------------------------
def openai_error(
    status: int, message: str, *, kind: str, code: str | None, param: str | None = None
) -> Response:
    response = jsonify({"error": {"message": message, "type": kind, "param": param, "code": code}})
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="oracle-rag"'
    return response


def _error_parts(exc: RagError) -> tuple[int, str, str | None]:
    status = json_errors.rag_error_status(exc)
    if isinstance(exc, AccessError) and status == 401:
        return status, "invalid_request_error", "invalid_api_key"
    if isinstance(exc, NotFoundError):
        return status, "invalid_request_error", exc.details.get("openai_code", "not_found")
    if isinstance(exc, LLMError):
        return status, "api_error", "upstream_error"
    if status == 429:
        return status, "rate_limit_error", "rate_limit_exceeded"
    if status < 500:
        return status, "invalid_request_error", None
    return status, "api_error", None


@openai_bp.errorhandler(RagError)
def _rag_error(exc: RagError) -> Response:
    status, kind, code = _error_parts(exc)
    if status >= 500:
        json_errors.log.error("%s on %s: %s", exc.code, request.path, exc.message)
    response = openai_error(status, exc.message, kind=kind, code=code, param=exc.details.get("param"))
    response.headers.update(json_errors.error_headers(exc, status) or {})
    return response


@openai_bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException) -> Response:
    status = exc.code or 500
    message = "request body too large" if status == 413 else (exc.description or exc.name or "error")
    return openai_error(status, message, kind="invalid_request_error", code=None)


@openai_bp.errorhandler(Exception)
def _unexpected(exc: Exception) -> Response:
    json_errors.log.error("unhandled %s on %s", type(exc).__name__, request.path)
    return openai_error(500, "internal error", kind="api_error", code=None)


@openai_bp.before_request
def _before() -> None:
    g.oracle_rag_started = time.perf_counter()
    g.oracle_rag_entry = ENTRY_POINT.set("v1")  # the audit's entry point
    request.max_content_length = state().max_body


openai_bp.after_request(finish_api_response)


@openai_bp.teardown_request
def _entry_point_done(_exc: BaseException | None) -> None:
    leave_entry_point(g.pop("oracle_rag_entry", None))


def _caller() -> Caller:
    caller = state().caller_loader(request)
    if caller is None:
        raise AccessError(
            "authentication required: send your oracle-rag API token as the API key "
            "(Authorization: Bearer <token>)"
        )
    return caller


# -- the request ----------------------------------------------------------------------------
def _text(content: Any, index: int) -> str:
    """A message's text: a string, or the text parts of a content array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise InputError(
                    f"messages[{index}].content parts must be objects with a type",
                    param=f"messages[{index}].content",
                )
            if part["type"] == "text":
                if not isinstance(part.get("text"), str):
                    raise InputError(
                        f"messages[{index}].content text part needs a string text",
                        param=f"messages[{index}].content",
                    )
                parts.append(part["text"])
        return "\n".join(parts)
    if content is None:
        return ""
    raise InputError(
        f"messages[{index}].content must be a string or an array of parts", param=f"messages[{index}].content"
    )


def parse_store(body: dict[str, Any]) -> bool:
    """The protocol's ``store`` field: whether the answer is kept (and so can be rated); default yes."""
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise InputError("store must be a boolean", param="store")
    return store


def parse_request(body: Any) -> tuple[str, list[Turn], bool]:
    """(question, earlier turns, stream) from a chat-completions body, or InputError naming the field."""
    options = body.get("stream_options") if isinstance(body, dict) else None
    if options is not None and (
        not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool)
    ):
        raise InputError(
            "stream_options must be an object with a boolean include_usage", param="stream_options"
        )
    if not isinstance(body, dict):
        raise InputError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str):
        raise InputError("model is required and must be a string", param="model")
    if model != MODEL_ID:
        raise NotFoundError(
            f"the model {model!r} does not exist; GET /v1/models lists {MODEL_ID!r}",
            param="model",
            openai_code="model_not_found",
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise InputError("stream must be a boolean", param="stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InputError("messages is required and must be a non-empty array", param="messages")
    turns: list[Turn] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise InputError(
                f"messages[{i}] must be an object with a role ({', '.join(sorted(ROLES))})",
                param=f"messages[{i}].role",
            )
        if message["role"] in ("user", "assistant"):
            turns.append(Turn(message["role"], _text(message.get("content"), i)))
        else:
            _text(message.get("content"), i)  # validated, then ignored (the product's rules govern)
    if messages[-1].get("role") != "user":
        raise InputError("the last message must be the user's question", param="messages")
    question = turns.pop()
    return question.content, turns, stream


# -- the response ----------------------------------------------------------------------------
def citation_dict(c: Citation) -> dict[str, str]:
    return {"source_type": c.source_type, "source_id": c.source_id, "anchor": c.anchor, "snippet": c.snippet}


def sources_footer(answer: ChatAnswer) -> str:
    """A model's answer cites by anchor only; name the records so a text-only front-end shows them."""
    if answer.answerer != "llm" or not answer.citations:
        return ""
    lines = [f"- {c.anchor} {snippet(c.snippet, SOURCE_SNIPPET)}" for c in answer.citations]
    return "\n\nSources:\n" + "\n".join(lines)


def extras(answer: ChatAnswer) -> dict[str, Any]:
    body = answer.to_dict()
    return {
        "citations": [citation_dict(c) for c in answer.citations],
        "oracle_rag": {
            "answerer": answer.answerer,
            "route": answer.route,
            "retrieval": body["retrieval"],
            "aggregate": body["aggregate"],
            "structured": body["structured"],
            "checked": body["checked"],
            "message_id": answer.message_id,
        },
    }


def _usage(prompt: str, completion: str) -> dict[str, int]:
    """Estimated like the prompt budget (characters / 4): the protocol requires the field."""
    p, c = max(1, len(prompt) // 4), max(1, len(completion) // 4)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _chunk(completion_id: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    data = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


@openai_bp.get("/models")
def models() -> Response:
    _caller()
    return jsonify(
        {
            "object": "list",
            "data": [{"id": MODEL_ID, "object": "model", "created": CREATED, "owned_by": "oracle-rag"}],
        }
    )


def _json_body() -> Any:
    if not request.is_json:
        raise InputError("send the request body as JSON with Content-Type: application/json")
    try:
        return request.get_json()
    except RecursionError:
        raise InputError("the request body is not valid JSON (nested too deeply)") from None
    except HTTPException as exc:
        if exc.code == 413:
            raise
        raise InputError("the request body is not valid JSON") from None


@openai_bp.post("/chat/completions")
def chat_completions() -> Response:
    caller = _caller()
    body = _json_body()
    question, history, stream = parse_request(body)
    store = parse_store(body)
    web = state()
    web.metrics.instrument_embedding()
    release_db()  # the answer may wait on the model: do not hold a pooled connection meanwhile
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if stream:
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return _stream(completion_id, question, caller, history, usage, store)
    try:
        answer = web.chat.answer(question, caller, None, None, store=store, history=history)
    except LLMError as exc:
        web.llm_health.failed(exc)
        raise
    if answer.model_answered:
        web.llm_health.ok()
    text = answer.answer + sources_footer(answer)
    return jsonify(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL_ID,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": _usage(question, text),
            **extras(answer),
        }
    )


def _stream(
    completion_id: str, question: str, caller: Caller, history: list[Turn], usage: bool, store: bool
) -> Response:
    web = state()
    try:
        stream = web.chat.stream(question, caller, None, None, store=store, history=history)
    except LLMError as exc:  # before any byte: a plain error response
        web.llm_health.failed(exc)
        raise
    llm_health = web.llm_health

    def events() -> Iterator[str]:
        yield _chunk(completion_id, {"role": "assistant", "content": ""})
        try:
            for event in stream:
                if event.kind == "token":
                    yield _chunk(completion_id, {"content": event.text})
                elif event.kind == "done" and event.answer is not None:
                    if event.answer.model_answered:
                        llm_health.ok()
                    footer = sources_footer(event.answer)
                    if footer:
                        yield _chunk(completion_id, {"content": footer})
                    yield _chunk(completion_id, {}, "stop", **extras(event.answer))
                    if usage:  # stream_options.include_usage: one more chunk, no choices, the usage
                        data = {
                            "id": completion_id,
                            "object": "chat.completion.chunk",
                            "created": int(time.time()),
                            "model": MODEL_ID,
                            "choices": [],
                            "usage": _usage(question, event.answer.answer + footer),
                        }
                        yield f"data: {json.dumps(data)}\n\n"
                elif event.kind == "error" and event.error is not None:
                    if isinstance(event.error, LLMError):
                        llm_health.failed(event.error)
                    yield _stream_error(event.error)
        except RagError as exc:
            yield _stream_error(exc)
        except Exception as exc:  # headers are sent: report in-band, never a traceback
            json_errors.log.error("unhandled %s while streaming a completion", type(exc).__name__)
            yield f"data: {json.dumps({'error': {'message': 'internal error', 'type': 'api_error'}})}\n\n"
        yield "data: [DONE]\n\n"

    response = Response(stream_with_context(events()), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache, no-store"
    response.headers["X-Accel-Buffering"] = "no"
    return response


def _checked(check: Any, value: Any, param: str) -> Any:
    """``check(value)``, its InputError naming the field (the protocol's ``param``)."""
    try:
        return check(value)
    except InputError as exc:
        raise InputError(exc.message, param=param) from None


@openai_bp.post("/feedback")
def feedback() -> tuple[Response, int]:
    """Thumbs up/down on one of the caller's answers: ``message_id`` from the answer's ``oracle_rag``."""
    caller = _caller()
    body = _json_body()
    if not isinstance(body, dict):
        raise InputError("the request body must be a JSON object")
    unknown = sorted(set(body) - FEEDBACK_FIELDS)
    if unknown:
        raise InputError(
            f"unknown field {unknown[0]!r}; send {', '.join(sorted(FEEDBACK_FIELDS))}", param=unknown[0]
        )
    message_id = body.get("message_id")
    if isinstance(message_id, bool) or not isinstance(message_id, int):
        raise InputError("message_id is required and must be an integer", param="message_id")
    rating = _checked(check_rating, body.get("rating"), "rating")
    comment = _checked(check_comment, body.get("comment"), "comment")
    release_db()
    state().feedback.record(message_id, caller.employee_id, rating, comment)
    return jsonify(
        {"object": "feedback", "recorded": True, "message_id": message_id, "rating": body["rating"]}
    ), 201


def _stream_error(exc: RagError) -> str:
    status, kind, code = _error_parts(exc)
    return (
        "data: "
        f"{json.dumps({'error': {'message': exc.message, 'type': kind, 'code': code, 'status': status}})}\n\n"
    )
