"""The Flask app factory, and ``init_app`` for mounting into a host application.

One :class:`~oracle_rag.system.RagSystem` per app: its engine is the app's
connection pool. The per-app and per-request state (``state()``, ``get_db()``)
is in :mod:`.state`, which the blueprints import (flaskr's ``db.py`` is the
model), so this module imports the blueprints and none imports it back. A
request that needs the database borrows one connection (:func:`get_db`),
released in ``teardown_appcontext``; the chat endpoints
give it back as soon as the caller is authenticated, because an answer can
wait many seconds on the language model and a pooled connection held that
long would cap concurrent chats at the pool size.

Who is asking comes from a ``caller_loader(request) -> Caller | None`` that
the host provides (its session, a verified JWT…). The built-in loader
accepts ``Authorization: Bearer <API token>`` (:mod:`oracle_rag.callers.tokens`) and,
when ``[auth]`` declares an issuer, a JWT from it (:mod:`oracle_rag.callers.identity`).
Nothing in a request body or query string can set the caller.

Configuration keys read by :func:`create_app` (all optional):

- ``ORACLE_RAG_SYSTEM``: a RagSystem to serve (else one is built and owned)
- ``ORACLE_RAG_SETTINGS``: Settings for the RagSystem built here
- ``ORACLE_RAG_CONFIG_FILE``: a TOML file for :func:`~oracle_rag.config.load_settings`
- ``ORACLE_RAG_CALLER_LOADER``: the caller loader (default: API tokens)
- ``ORACLE_RAG_LLM``: an :class:`~oracle_rag.answering.chat.LLMClient`, or None for the
  extractive answerer (default: from settings)
- ``ORACLE_RAG_DEMO_IDENTITIES``: demo identities for the picker (demo mode only)
- ``MAX_CONTENT_LENGTH``: request body limit (default 64 KiB; the API applies
  ``ORACLE_RAG_MAX_BODY``, same default, even inside a host app)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import EllipsisType
from typing import Any

import sqlalchemy as sa
from flask import Flask, Request, request
from werkzeug.exceptions import HTTPException

from oracle_rag.answering.chat import Chat, LLMClient
from oracle_rag.answering.chat.feedback import FeedbackStore, RatingLimit
from oracle_rag.callers.caller import Caller
from oracle_rag.callers.identity import caller_for_bearer
from oracle_rag.callers.tokens import bearer_token
from oracle_rag.config import load_settings
from oracle_rag.errors import wrap_driver_error
from oracle_rag.hosts import host_allowed, parse_allowed_hosts
from oracle_rag.system import RagSystem
from oracle_rag.tracing import instrument_flask
from oracle_rag.web import json_errors
from oracle_rag.web.api import api_bp
from oracle_rag.web.health import health_bp
from oracle_rag.web.metrics import Metrics, metrics_bp
from oracle_rag.web.openai_api import openai_bp
from oracle_rag.web.pages import pages_bp
from oracle_rag.web.state import (
    DEFAULT_MAX_BODY,
    EXTENSION,
    CallerLoader,
    DemoIdentity,
    LLMHealth,
    WebState,
    get_db,
    release_db,
    state,
)

__all__ = [
    "DEFAULT_MAX_BODY",
    "CallerLoader",
    "DemoIdentity",
    "WebState",
    "create_app",
    "get_db",
    "init_app",
    "release_db",
    "state",
    "token_caller_loader",
]


def token_caller_loader(req: Request) -> Caller | None:
    """The built-in loader: ``Authorization: Bearer <token>`` → an API token's employee, or the caller of a
    JWT from the ``[auth]`` issuer (oracle_rag/callers/identity.py). None, whatever the reason, is the
    one 401."""
    token = bearer_token(req.headers.get("Authorization"))
    if token is None:
        return None
    try:
        return caller_for_bearer(get_db(), state().rag.engine, token)
    except sa.exc.DBAPIError as exc:
        raise wrap_driver_error(exc, "verifying an API token") from None


def _scoped_handler(prefix: str, handler: Callable[[HTTPException], Any]) -> Callable[[HTTPException], Any]:
    """A host-app handler that answers JSON for our API paths only."""

    def handle(exc: HTTPException) -> Any:
        if request.path == prefix or request.path.startswith(prefix.rstrip("/") + "/"):
            return handler(exc)
        return exc

    return handle


# Our blueprints whose requests must name an allowed Host (/healthz is exempt: see hosts.py).
_HOST_CHECKED = frozenset({"oracle_rag_api", "oracle_rag_metrics", "oracle_rag_pages", "oracle_rag_openai"})


def _check_host() -> Any:
    """Refuse a request to our endpoints whose Host is not in ``allowed_hosts`` (DNS rebinding)."""
    if request.blueprint not in _HOST_CHECKED:
        return None
    web = state()
    if web.allowed_hosts is None:
        web.allowed_hosts = parse_allowed_hosts(web.rag.settings.allowed_hosts)
    if host_allowed(request, web.allowed_hosts):
        return None
    return json_errors.error_response(
        400, "HOST_NOT_ALLOWED", "this server does not answer for the requested Host (see allowed_hosts)"
    )


def init_app(
    app: Flask,
    rag: RagSystem,
    *,
    caller_loader: CallerLoader | None = None,
    llm: LLMClient | None | EllipsisType = ...,
    demo_identities: Sequence[DemoIdentity] = (),
    api_prefix: str = "/api",
    pages_prefix: str = "",
    ops_prefix: str = "",
    max_body: int = DEFAULT_MAX_BODY,
    owns_rag: bool = False,
    json_errors_app_wide: bool = False,
    openai_prefix: str | None = "/v1",
) -> WebState:
    """Mount the API, the chat page, ``/healthz`` and ``/metrics`` on ``app``.

    In a host app, JSON errors cover everything our views raise plus
    routing errors (404/405) under ``api_prefix``; the host's own pages keep
    its handlers. ``create_app`` makes them app-wide. ``openai_prefix`` mounts the
    OpenAI-compatible chat protocol (:mod:`oracle_rag.web.openai_api`); None leaves it out.
    """
    if EXTENSION in app.extensions:
        raise RuntimeError("oracle-rag is already initialised on this app")
    metrics = Metrics(rag)
    chat = (
        Chat(rag, observer=metrics.observe_chat)
        if llm is ...
        else Chat(rag, llm, observer=metrics.observe_chat)
    )
    feedback = FeedbackStore(rag.engine, RatingLimit(rag.settings.feedback_per_minute))
    web_state = WebState(
        rag=rag,
        chat=chat,
        caller_loader=caller_loader or token_caller_loader,
        metrics=metrics,
        feedback=feedback,
        demo_identities=list(demo_identities),
        max_body=max_body,
        owns_rag=owns_rag,
        llm_health=LLMHealth(),
    )
    app.extensions[EXTENSION] = web_state
    app.teardown_appcontext(release_db)
    app.register_blueprint(api_bp, url_prefix=api_prefix)
    app.register_blueprint(health_bp, url_prefix=ops_prefix or None)
    app.register_blueprint(metrics_bp, url_prefix=ops_prefix or None)
    app.register_blueprint(pages_bp, url_prefix=pages_prefix or None)
    if openai_prefix is not None:
        app.register_blueprint(openai_bp, url_prefix=openai_prefix)
    app.before_request(_check_host)
    if json_errors_app_wide:
        json_errors.register(app)
    else:
        for status in (404, 405):
            app.register_error_handler(status, _scoped_handler(api_prefix, json_errors.handle_http_error))
    return web_state


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """A Flask app serving the chat API, the chat page, ``/healthz`` and ``/metrics``."""
    app = Flask("oracle_rag.web", static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = DEFAULT_MAX_BODY
    app.json.sort_keys = False  # type: ignore[attr-defined]  # keep answer fields in their documented order
    if config:
        app.config.update(config)
    rag = app.config.get("ORACLE_RAG_SYSTEM")
    owns = rag is None
    if rag is None:
        settings = app.config.get("ORACLE_RAG_SETTINGS") or load_settings(
            config_file=app.config.get("ORACLE_RAG_CONFIG_FILE")
        )
        rag = RagSystem(settings)
    init_app(
        app,
        rag,
        caller_loader=app.config.get("ORACLE_RAG_CALLER_LOADER"),
        llm=app.config["ORACLE_RAG_LLM"] if "ORACLE_RAG_LLM" in app.config else ...,
        demo_identities=app.config.get("ORACLE_RAG_DEMO_IDENTITIES", ()),
        max_body=int(app.config.get("ORACLE_RAG_MAX_BODY", DEFAULT_MAX_BODY)),
        owns_rag=owns,
        json_errors_app_wide=True,
    )
    instrument_flask(app)  # one span per request (a no-op until tracing is configured)
    return app
