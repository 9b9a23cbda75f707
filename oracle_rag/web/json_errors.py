"""Every API error is JSON: ``{"error": message, "code": CODE, "status": n}``.

No HTML error page and no stack trace ever leaves the API. Product errors
map by class (their ``code`` is stable); HTTP errors raised by Flask or
Werkzeug (bad JSON, wrong content type, body too large, unknown route,
wrong method) keep their status; anything else is a 500 with a fixed
message, and only the exception's class reaches the log (a driver message
may carry SQL parameters or connection details).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Response, jsonify, request
from werkzeug.exceptions import HTTPException

from oracle_rag.errors import (
    AccessError,
    ConfigurationError,
    DatabaseError,
    EmbeddingError,
    GuardrailError,
    InputError,
    LLMError,
    NotFoundError,
    RagError,
    RateLimitError,
)

log = logging.getLogger("oracle_rag.web")

_HTTP_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "TOO_MANY_REQUESTS",
}
_HTTP_MESSAGES = {
    404: "no such resource",
    405: "method not allowed for this resource",
    413: "request body too large",
    415: "send the request body as JSON with Content-Type: application/json",
}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    response = jsonify({"error": message, "code": code, "status": status})
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    response.headers["Cache-Control"] = "no-store"
    return response


def rag_error_status(exc: RagError) -> int:
    if isinstance(exc, InputError | GuardrailError):
        return 400
    if isinstance(exc, AccessError):
        return 401
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, RateLimitError):
        return 429
    if isinstance(exc, LLMError):
        status = exc.details.get("http_status")
        return status if status in (502, 503, 504) else 502
    if isinstance(exc, DatabaseError | EmbeddingError):
        return 503
    return 500


def handle_rag_error(exc: RagError) -> Response:
    status = rag_error_status(exc)
    if isinstance(exc, ConfigurationError) or status == 500:
        log.error("%s on %s %s: %s", exc.code, request.method, request.path, exc)
        return error_response(500, exc.code, "the server is misconfigured; see its log")
    if status >= 500:
        log.warning("%s on %s %s: %s", exc.code, request.method, request.path, exc)
    return error_response(status, exc.code, exc.message, error_headers(exc, status))


def error_headers(exc: RagError, status: int) -> dict[str, str] | None:
    """The headers an error's status calls for: the auth challenge on 401, ``Retry-After`` on 429."""
    if status == 401:
        return {"WWW-Authenticate": 'Bearer realm="oracle-rag"'}
    if status == 429 and isinstance(exc.details.get("retry_after"), int):
        return {"Retry-After": str(exc.details["retry_after"])}
    return None


def handle_http_error(exc: HTTPException) -> Response:
    status = exc.code or 500
    message = _HTTP_MESSAGES.get(status) or (exc.description or exc.name or "error")
    if status == 400 and exc.description and "JSON" in exc.description:
        message = "the request body is not valid JSON"
    headers = {k: v for k, v in exc.get_headers() if k.lower() in ("allow", "www-authenticate")}
    return error_response(status, _HTTP_CODES.get(status, "HTTP_ERROR"), message, headers)


def handle_unexpected(exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        return handle_http_error(exc)
    if isinstance(exc, RagError):
        return handle_rag_error(exc)
    log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.path)
    return error_response(500, "INTERNAL", "internal error")


def register(target: Any) -> None:
    """Install the handlers on an app or a blueprint."""
    target.register_error_handler(RagError, handle_rag_error)
    target.register_error_handler(HTTPException, handle_http_error)
    target.register_error_handler(Exception, handle_unexpected)
