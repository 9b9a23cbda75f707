"""The JSON API as an OpenAPI 3.0 document, built from code and served at ``GET /api/openapi.json``.

It describes exactly what ``docs/chat.md`` documents and what the views
return: every success body (closed objects, so a field added to a response
without being described here fails the contract test), every error body
(``{"error", "code", "status"}``) with its statuses, and the
``bearerAuth`` security scheme (API tokens, or the ``[auth]`` provider's JWTs).
``tests/test_web_api_hostile_input.py`` fuzzes the app against it with schemathesis, so the document cannot
drift from the code without a failing test.

Paths follow where the blueprints are mounted: :func:`build_spec` takes the
API and operations prefixes, and the view passes the app's own.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from flask import Response, jsonify, url_for

from oracle_rag.answering.chat.citations import SNIPPET_CHARS
from oracle_rag.engines.indexed_columns import INDEXED_FACETS
from oracle_rag.search.retriever import MODES
from oracle_rag.web.state import state

# Statuses every authenticated endpoint can answer, beyond its own.
_AUTH_ERRORS = ("401", "500", "503")


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(
    properties: dict[str, Any], required: list[str] | None = None, *, closed: bool = True
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }
    if closed:
        out["additionalProperties"] = False
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}

ERROR_DESCRIPTIONS = {
    "400": "INPUT (invalid field or value) or BAD_REQUEST (the body is not valid JSON)",
    "401": "ACCESS: no or invalid credentials (WWW-Authenticate: Bearer)",
    "403": "FORBIDDEN: /metrics for a peer that is not loopback, or without the metrics "
    "token (metrics_token_env)",
    "404": "NOT_FOUND: no such route, conversation or visible record",
    "413": "PAYLOAD_TOO_LARGE: body over the limit (64 KiB by default)",
    "415": "UNSUPPORTED_MEDIA_TYPE: body not sent as application/json",
    "429": "RATE_LIMITED: more ratings in a minute than feedback_per_minute (Retry-After: seconds)",
    "500": "INTERNAL or CONFIGURATION: fixed message, details only in the server log",
    "502": "LLM: the model endpoint refused or failed (after retries)",
    "503": "DATABASE or EMBEDDING: the database or the embedding model is unavailable",
    "504": "LLM: the model did not answer within llm_timeout_s",
}


def _schemas(max_question_chars: int) -> dict[str, Any]:
    # anchor: how the answer cites the record ([TICKETS #1042]); history stored before it had none
    citation = _obj(
        {
            "source_type": _STR,
            "source_id": _STR,
            "anchor": _STR,
            "snippet": {"type": "string", "maxLength": SNIPPET_CHARS},
        },
        required=["source_type", "source_id", "snippet"],
    )
    aggregate = _nullable(
        _obj(
            {
                "sql": _nullable(_STR),
                "columns": {"type": "array", "items": _STR},
                "rows": {"type": "array", "items": {"type": "array", "items": {}}},
                "truncated": _BOOL,
                "row_cap": _INT,
                "cap": _nullable({"type": "string", "enum": ["rows", "bytes"]}),
                "byte_cap": _INT,
                "timed_out": _BOOL,
                "error": _nullable(_STR),
                "attempts": _INT,
                "repairs": {
                    "type": "array",
                    "items": _STR,
                    "description": "declared meanings the model's SQL broke, mended before it ran",
                },
            }
        )
    )
    summary = {"id": _STR, "title": _STR, "created_at": _STR, "updated_at": _STR}
    return {
        "Error": _obj(
            {"error": _STR, "code": _STR, "status": {"type": "integer", "minimum": 400, "maximum": 599}}
        ),
        "ChatRequest": _obj(
            {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": max_question_chars,
                    "description": "at most max_question_chars characters, and not only spaces",
                },
                "conversation_id": {
                    "type": "string",
                    "nullable": True,
                    "description": "one of your conversations; omit (or null) to start one",
                },
                "mode": {
                    "type": "string",
                    "enum": [*MODES, None],
                    "default": "hybrid",
                    "nullable": True,
                    "description": "omitted or null: hybrid",
                },
                "drop_filters": {
                    "type": "array",
                    "maxItems": 20,
                    "nullable": True,
                    "items": {"type": "string", "minLength": 1, "maxLength": 64},
                    "description": "keys of understood filters (structured.filters[].key) to leave out",
                },
            },
            ["question"],
        ),
        "Citation": citation,
        "Retrieval": _obj(
            {
                "mode": {"type": "string", "enum": list(MODES)},
                "k": _INT,
                "latency_ms": {"type": "number"},
                "chunks": _INT,
            }
        ),
        "Aggregate": aggregate,
        "ChatAnswer": _obj(
            {
                "answer": _STR,
                "citations": {"type": "array", "items": _ref("Citation")},
                "conversation_id": _nullable(_STR),
                "retrieval": _ref("Retrieval"),
                "answerer": {
                    "type": "string",
                    "enum": ["llm", "structured", "extractive", "aggregate", "none"],
                },
                "route": {"type": "string", "enum": ["retrieval", "aggregation", "both", "structured"]},
                "aggregate": _ref("Aggregate"),
                "structured": _ref("Structured"),
                "checked": _nullable(
                    _obj(
                        {"sentences": _INT, "removed": _INT, "model_error": _STR},
                        required=["sentences", "removed"],
                    )
                ),
                "message_id": {
                    "type": "integer",
                    "nullable": True,
                    "description": "the stored answer's id, what POST /feedback rates (null: not stored)",
                },
            }
        ),
        "FeedbackRequest": _obj(
            {
                "message_id": {
                    "type": "integer",
                    "description": "an answer's message_id, in one of your conversations",
                },
                "rating": {"type": "string", "enum": ["up", "down"]},
                "comment": {"type": "string", "nullable": True, "maxLength": 2000},
            },
            ["message_id", "rating"],
        ),
        "FeedbackRecorded": _obj(
            {"recorded": _BOOL, "message_id": _INT, "rating": {"type": "string", "enum": ["up", "down"]}}
        ),
        "Structured": _nullable(
            _obj(
                {
                    "kind": {"type": "string", "enum": ["lookup", "list", "count", "notice"]},
                    "type": _nullable(_STR),
                    "language": {"type": "string", "enum": ["en", "es"]},
                    # several types answered: each with its own total; notes: understood but not applied
                    # (or which date was used); read_as: words read with a typo corrected
                    "types": _nullable({"type": "array", "items": _obj({"type": _STR, "total": _INT})}),
                    "notes": {"type": "array", "items": _STR},
                    "read_as": {"type": "array", "items": _STR},
                    "filters": {
                        "type": "array",
                        "items": _obj(
                            {
                                "key": _STR,
                                "label": _STR,
                                "conditions": {
                                    "type": "array",
                                    "items": _obj(
                                        {
                                            "facet": _STR,
                                            "label": _STR,
                                            "op": _STR,
                                            "values": {"type": "array", "items": {}},
                                            "display": {"type": "array", "items": _STR},
                                            "text": _STR,
                                        }
                                    ),
                                },
                            }
                        ),
                    },
                    "dropped": {"type": "array", "items": _STR},
                    "notices": {
                        "type": "array",
                        "items": _obj(
                            {"facet": _STR, "text": _STR, "suggestion": _nullable(_STR), "message": _STR}
                        ),
                    },
                    "topic": _nullable(_STR),
                    "total": _nullable(_INT),
                    "count": _nullable(_INT),
                    "groups": _nullable(
                        _obj(
                            {
                                "facet": _STR,
                                "label": _STR,
                                "rows": {
                                    "type": "array",
                                    "items": _obj(
                                        {"value": {"nullable": True}, "label": _STR, "count": _INT}
                                    ),
                                },
                            }
                        )
                    ),
                    "columns": {"type": "array", "items": _STR},
                    "records": {
                        "type": "array",
                        "items": _obj(
                            {
                                "anchor": _STR,
                                "source_type": _STR,
                                "source_id": _STR,
                                "title": _STR,
                                "values": {"type": "object", "additionalProperties": _STR},
                            }
                        ),
                    },
                }
            )
        ),
        "ConversationSummary": _obj(summary),
        "ConversationList": _obj({"conversations": {"type": "array", "items": _ref("ConversationSummary")}}),
        "Message": _obj(
            {
                "role": {"type": "string", "enum": ["user", "assistant"]},
                "content": _STR,
                "citations": {"type": "array", "items": _ref("Citation")},
                "created_at": _STR,
            }
        ),
        "Conversation": _obj({**summary, "messages": {"type": "array", "items": _ref("Message")}}),
        "ChunkDetail": _obj(
            {
                "source_type": _STR,
                "source_id": _STR,
                "anchor": _STR,
                "content": _STR,
                **{facet: _nullable(_INT) for facet in INDEXED_FACETS},  # the indexed facets, by name
                "updated_at": _nullable(_STR),
                "chunks": {"type": "array", "items": _obj({"chunk_no": _INT, "start": _INT, "end": _INT})},
                "passage": _nullable(_obj({"start": _INT, "end": _INT})),
            }
        ),
        # roles come from EMPLOYEE.ROLE or a declared roles_query (any names); role is the first of them
        "Me": _obj(
            {
                "employee_id": _INT,
                "name": _nullable(_STR),
                "role": _STR,
                "roles": {"type": "array", "items": _STR},
                "groups": {"type": "array", "items": _STR},
                "sees_all": _BOOL,
                "demo": _BOOL,
            }
        ),
        "DemoIdentities": _obj(
            {
                "demo": _BOOL,
                "notice": _STR,
                "identities": {
                    "type": "array",
                    "items": _obj({"employee_id": _INT, "name": _STR, "role": _STR, "token": _STR}),
                },
            }
        ),
        # One server-sent event as schemathesis and OpenAPI 3.2 read a stream: its event name and its
        # data line (a JSON object: meta {conversation_id, retrieval, answerer}, token {text},
        # done = ChatAnswer, error = Error).
        "ChatEvent": _obj(
            {
                "event": {"type": "string", "enum": ["meta", "token", "done", "error"]},
                "data": {"type": "string", "description": "a JSON object (see the summary)"},
            },
            ["event", "data"],
            closed=False,
        ),
        # Operational: open objects (sections appear with the server's configuration).
        "Health": _obj(
            {
                "engine": _STR,
                "status": {"type": "string", "enum": ["ok", "unavailable"]},
                "database": {"type": "object"},
                "model": {"type": "object"},
                "queue": {"type": "object"},
                "worker": {"type": "object"},
                "llm": {"type": "object"},
                "degraded": {"type": "array", "items": _STR},
            },
            ["engine", "status", "database", "model", "degraded"],
            closed=False,
        ),
    }


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status in statuses:
        response = _json(_ref("Error"), ERROR_DESCRIPTIONS[status])
        if status == "401":
            response["headers"] = {
                "WWW-Authenticate": {"schema": _STR, "description": 'Bearer realm="oracle-rag"'}
            }
        if status == "429":
            response["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}
        out[status] = response
    return out


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": _STR, "description": description}


def build_spec(
    api_prefix: str = "/api", ops_prefix: str = "", *, max_question_chars: int = 4000
) -> dict[str, Any]:
    """The OpenAPI 3.0 document for an app whose API is at ``api_prefix`` and /healthz at ``ops_prefix``."""
    api = api_prefix.rstrip("/")
    ops = ops_prefix.rstrip("/")
    chat_body = {"required": True, "content": {"application/json": {"schema": _ref("ChatRequest")}}}
    chat_errors = _errors("400", "401", "404", "413", "415", "500", "502", "503", "504")
    no_auth: list[dict[str, list[str]]] = []
    try:
        release = version("oracle-rag")
    except PackageNotFoundError:  # running from a source tree that is not installed
        release = "0"
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "oracle-rag chat API",
            "version": release,
            "description": "Answers with citations, scoped to the authenticated caller. See docs/chat.md.",
        },
        "security": [{"bearerAuth": []}],
        "paths": {
            f"{api}/chat": {
                "post": {
                    "operationId": "chat",
                    "summary": "Answer a question with citations",
                    "requestBody": chat_body,
                    "responses": {"200": _json(_ref("ChatAnswer"), "the answer"), **chat_errors},
                }
            },
            f"{api}/chat/stream": {
                "post": {
                    "operationId": "chatStream",
                    "summary": "The same answer as server-sent events (meta, token..., then done or error)",
                    "requestBody": chat_body,
                    "responses": {
                        "200": {
                            "description": "event stream: meta, token..., then done or error",
                            "content": {"text/event-stream": {"schema": _ref("ChatEvent")}},
                        },
                        **chat_errors,
                    },
                }
            },
            f"{api}/conversations": {
                "get": {
                    "operationId": "listConversations",
                    "summary": "Your conversations, most recent first",
                    "responses": {
                        "200": _json(_ref("ConversationList"), "at most 100"),
                        **_errors(*_AUTH_ERRORS),
                    },
                }
            },
            f"{api}/conversations/{{conversation_id}}": {
                "get": {
                    "operationId": "getConversation",
                    "summary": "One of your conversations with its messages",
                    "parameters": [
                        _path_param("conversation_id", "32 hex characters; anyone else's is a 404")
                    ],
                    "responses": {
                        "200": _json(_ref("Conversation"), "the conversation"),
                        **_errors("404", *_AUTH_ERRORS),
                    },
                }
            },
            f"{api}/feedback": {
                "post": {
                    "operationId": "feedback",
                    "summary": "Thumbs up/down (and a comment) on one of your answers",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("FeedbackRequest")}},
                    },
                    "responses": {
                        "201": _json(_ref("FeedbackRecorded"), "recorded"),
                        **_errors("400", "404", "413", "415", "429", *_AUTH_ERRORS),
                    },
                }
            },
            f"{api}/chunks/{{source_type}}/{{source_id}}": {
                "get": {
                    "operationId": "getChunk",
                    "summary": "A cited record's whole text, if your scope allows it",
                    "parameters": [
                        _path_param("source_type", "TASK, SPRINT, PROJECT... (case-insensitive)"),
                        _path_param("source_id", "the record's id"),
                        {
                            "name": "passage",
                            "in": "query",
                            "required": False,
                            "schema": _STR,
                            "description": "a citation's snippet: the answer says where it is in the text",
                        },
                    ],
                    "responses": {
                        "200": _json(_ref("ChunkDetail"), "the record"),
                        **_errors("404", *_AUTH_ERRORS),
                    },
                }
            },
            f"{api}/me": {
                "get": {
                    "operationId": "me",
                    "summary": "Who the token belongs to",
                    "responses": {"200": _json(_ref("Me"), "the caller"), **_errors(*_AUTH_ERRORS)},
                }
            },
            f"{api}/demo/identities": {
                "get": {
                    "operationId": "demoIdentities",
                    "summary": "Demo mode only: demo employees and their tokens",
                    "security": no_auth,
                    "responses": {"200": _json(_ref("DemoIdentities"), "demo mode"), **_errors("404")},
                }
            },
            f"{api}/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "security": no_auth,
                    "responses": {"200": _json({"type": "object"}, "OpenAPI 3.0")},
                }
            },
            f"{ops}/healthz": {
                "get": {
                    "operationId": "healthz",
                    "summary": "Can this instance answer questions right now?",
                    "security": no_auth,
                    "responses": {
                        "200": _json(_ref("Health"), "healthy"),
                        "503": _json(_ref("Health"), "unhealthy"),
                    },
                }
            },
            f"{ops}/metrics": {
                "get": {
                    "operationId": "metrics",
                    "summary": "Prometheus text format",
                    "security": no_auth,
                    "responses": {
                        "200": {"description": "metrics", "content": {"text/plain": {"schema": _STR}}},
                        **_errors("403"),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "orag_ API token or JWT",
                    "description": "oracle-rag token create --employee ID, or a JWT "
                    "from the [auth] identity provider (docs/identity.md)",
                }
            },
            "schemas": _schemas(max_question_chars),
        },
    }


def spec_response() -> Response:
    """The document for this app's mount points (``GET <api prefix>/openapi.json``, no authentication)."""
    api_prefix = url_for("oracle_rag_api.me").rsplit("/me", 1)[0]
    ops_prefix = url_for("oracle_rag_health.healthz").rsplit("/healthz", 1)[0]
    spec = build_spec(api_prefix, ops_prefix, max_question_chars=state().rag.settings.max_question_chars)
    return jsonify(spec)
