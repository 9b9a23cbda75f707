"""The JSON API, one blueprint (mounted at ``/api`` by default).

Views parse and check the request, take the caller from the app's caller
loader, call the library (:class:`~oracle_rag.answering.chat.Chat`, the conversation
store, the chunk detail view) and map errors to statuses
(:mod:`oracle_rag.web.json_errors`). The reference is ``docs/chat.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response, g, jsonify, request, stream_with_context
from werkzeug.exceptions import BadRequest, RequestEntityTooLarge, UnsupportedMediaType

from oracle_rag.answering.chat.answer import check_drop
from oracle_rag.answering.chat.chunks import chunk_detail
from oracle_rag.answering.chat.conversations import ConversationStore
from oracle_rag.answering.chat.feedback import check_comment, check_rating
from oracle_rag.callers.audit import ENTRY_POINT, leave_entry_point
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import AccessError, InputError, LLMError, NotFoundError, RagError
from oracle_rag.hosts import is_loopback_request
from oracle_rag.web import json_errors
from oracle_rag.web.openapi import spec_response
from oracle_rag.web.state import finish_api_response, get_db, release_db, state

api_bp = Blueprint("oracle_rag_api", __name__)
json_errors.register(api_bp)

CHAT_FIELDS = {"question", "conversation_id", "mode", "drop_filters"}
FEEDBACK_FIELDS = {"message_id", "rating", "comment"}


# -- request plumbing -----------------------------------------------------------
@api_bp.before_request
def _before() -> None:
    g.oracle_rag_started = time.perf_counter()
    # The audit's entry point, from the way the caller is authenticated (never from a header a client picks to
    # name itself): a token is the API, the page's own fetches included; no Authorization header means the
    # host's caller loader read its own session (the page in a host application), or the request is refused.
    g.oracle_rag_entry = ENTRY_POINT.set("api" if "Authorization" in request.headers else "page")
    request.max_content_length = state().max_body
    if request.content_length is not None and request.content_length > state().max_body:
        raise RequestEntityTooLarge()


api_bp.after_request(finish_api_response)


@api_bp.teardown_request
def _entry_point_done(_exc: BaseException | None) -> None:
    leave_entry_point(g.pop("oracle_rag_entry", None))


def current_caller() -> Caller:
    """The authenticated caller, or AccessError (401). Loaded once per request."""
    caller = g.get("oracle_rag_caller")
    if caller is None:
        caller = state().caller_loader(request)
        if caller is None:
            raise AccessError("authentication required: send Authorization: Bearer <API token>")
        if not isinstance(caller, Caller):
            raise TypeError("caller_loader must return a Caller or None")
        g.oracle_rag_caller = caller
    return caller


def _json_object(allowed: set[str]) -> dict[str, Any]:
    if not request.is_json:
        raise UnsupportedMediaType()
    try:
        body = request.get_json()  # 413 past the body limit
    except RecursionError:  # json's decoder gives up on deep nesting ("[[[[..."): a bad request, not a 500
        raise BadRequest("the request body is not valid JSON (nested too deeply)") from None
    except BadRequest:  # invalid JSON or invalid UTF-8; Flask's own text is generic outside debug
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise InputError("the request body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InputError(f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return body


def _chat_request() -> tuple[str, str | None, str | None, list[str]]:
    body = _json_object(CHAT_FIELDS)
    question = body.get("question")
    if not isinstance(question, str):
        raise InputError("question is required and must be a string")
    conversation_id = body.get("conversation_id")
    if conversation_id is not None and not isinstance(conversation_id, str):
        raise InputError("conversation_id must be a string")
    mode = body.get("mode")
    if mode is not None and not isinstance(mode, str):
        raise InputError("mode must be a string")
    return question, conversation_id, mode, list(check_drop(body.get("drop_filters")))


# -- chat -------------------------------------------------------------------------
@api_bp.post("/chat")
def chat() -> Response:
    caller = current_caller()
    question, conversation_id, mode, drop = _chat_request()
    state().metrics.instrument_embedding()  # once, after authentication (it may load the model)
    release_db()  # the answer may wait on the model: do not hold a pooled connection meanwhile
    try:
        answer = state().chat.answer(question, caller, conversation_id, mode, drop_filters=drop)
    except LLMError as exc:
        state().llm_health.failed(exc)  # /healthz lists the model under "degraded"
        raise
    if answer.model_answered:
        state().llm_health.ok()
    return jsonify(answer.to_dict())


def sse(event: str, data: dict[str, Any]) -> str:
    """One server-sent event; JSON keeps newlines in the data escaped, so one ``data:`` line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


@api_bp.post("/chat/stream")
def chat_stream() -> Response:
    caller = current_caller()
    question, conversation_id, mode, drop = _chat_request()
    state().metrics.instrument_embedding()
    release_db()
    llm_health = state().llm_health
    try:
        stream = state().chat.stream(
            question, caller, conversation_id, mode, drop_filters=drop
        )  # errors here are plain JSON
    except LLMError as exc:
        llm_health.failed(exc)
        raise

    def events() -> Iterator[str]:
        yield sse(
            "meta",
            {
                "conversation_id": stream.conversation_id,
                "retrieval": stream.retrieval.to_dict(),
                "answerer": stream.answerer,
            },
        )
        try:
            for event in stream:
                if event.kind == "token":
                    yield sse("token", {"text": event.text})
                elif event.kind == "done" and event.answer is not None:
                    if event.answer.model_answered:
                        llm_health.ok()
                    yield sse("done", event.answer.to_dict())
                elif event.kind == "error" and event.error is not None:
                    if isinstance(event.error, LLMError):
                        llm_health.failed(event.error)
                    yield sse("error", _error_body(event.error))
        except RagError as exc:
            yield sse("error", _error_body(exc))
        except Exception as exc:  # headers are sent: report in-band, never a traceback
            json_errors.log.error("unhandled %s while streaming an answer", type(exc).__name__)
            yield sse("error", {"error": "internal error", "code": "INTERNAL", "status": 500})

    response = Response(stream_with_context(events()), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache, no-store"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
    return response


def _error_body(exc: RagError) -> dict[str, Any]:
    return {"error": exc.message, "code": exc.code, "status": json_errors.rag_error_status(exc)}


# -- conversations ----------------------------------------------------------------
@api_bp.get("/conversations")
def conversations() -> Response:
    caller = current_caller()
    store = ConversationStore(state().rag.engine)
    items = store.list_for(get_db(), caller.employee_id)
    return jsonify({"conversations": [c.to_dict() for c in items]})


@api_bp.get("/conversations/<conversation_id>")
def conversation(conversation_id: str) -> Response:
    caller = current_caller()
    store = ConversationStore(state().rag.engine)
    conn = get_db()
    summary = store.get(conn, conversation_id, caller.employee_id)
    messages = store.messages(conn, conversation_id, caller.employee_id)
    return jsonify({**summary.to_dict(), "messages": [m.to_dict() for m in messages]})


# -- feedback ------------------------------------------------------------------------
@api_bp.post("/feedback")
def feedback() -> tuple[Response, int]:
    """Thumbs up/down on one of the caller's stored answers (``message_id`` of the answer's JSON)."""
    caller = current_caller()
    body = _json_object(FEEDBACK_FIELDS)
    message_id = body.get("message_id")
    if isinstance(message_id, bool) or not isinstance(message_id, int):
        raise InputError("message_id is required and must be an integer")
    rating = check_rating(body.get("rating"))
    comment = check_comment(body.get("comment"))
    release_db()
    state().feedback.record(message_id, caller.employee_id, rating, comment)
    return jsonify({"recorded": True, "message_id": message_id, "rating": body["rating"]}), 201


# -- citation detail ----------------------------------------------------------------
@api_bp.get("/chunks/<source_type>/<path:source_id>")
def chunk(source_type: str, source_id: str) -> Response:
    caller = current_caller()
    detail = chunk_detail(get_db(), state().rag.engine, caller, source_type, source_id)
    # the whole record; ?passage=<a citation's snippet> also says where that passage is in it
    return jsonify(detail.view_dict(request.args.get("passage", "")[:2000]))


# -- the API's own description -----------------------------------------------------------
@api_bp.get("/openapi.json")
def openapi() -> Response:
    """OpenAPI 3.0 (:mod:`oracle_rag.web.openapi`); no authentication, no data."""
    return spec_response()


# -- who am I, demo picker ------------------------------------------------------------
@api_bp.get("/me")
def me() -> Response:
    caller = current_caller()
    return jsonify(
        {
            "employee_id": caller.employee_id,
            "name": caller.name,
            "role": caller.role,
            "roles": list(caller.roles),
            "groups": list(caller.groups),
            "sees_all": caller.sees_all,
            "demo": state().demo,
        }
    )


@api_bp.get("/demo/identities")
def demo_identities() -> Response:
    """Demo mode only: the demo employees and their demo tokens, for the page's picker.

    Outside demo mode (or without identities), or unless both the Host and the peer are loopback
    (a rebound name must not read the admin token), this route does not exist (404).
    The picker only chooses which Bearer token the page sends; there is no
    other way in.
    """
    web = state()
    if not web.demo or not web.demo_identities or not is_loopback_request(request):
        raise NotFoundError("no such resource")
    return jsonify(
        {
            "demo": True,
            "notice": "Demo mode: these tokens act as demo employees. Never enable demo mode in production.",
            "identities": [i.to_dict() for i in web.demo_identities],
        }
    )
