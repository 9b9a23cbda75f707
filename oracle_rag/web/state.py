"""The web layer's state, per app and per request: the one module every blueprint imports.

Modelled on the Flask tutorial's ``db.py``: :func:`state` is this app's
:class:`WebState` (the RagSystem, the chat, the caller loader, metrics),
:func:`get_db` the request's pooled connection, released by
:func:`release_db` at teardown. ``app.py`` wires the blueprints and imports
this module; the blueprints import only this module, so nothing imports
``app.py`` back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from flask import Request, Response, current_app, g, request

from oracle_rag.answering.chat import Chat
from oracle_rag.answering.chat.feedback import FeedbackStore
from oracle_rag.background import BackgroundServices
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import RagError, wrap_driver_error
from oracle_rag.system import RagSystem
from oracle_rag.web.metrics import Metrics

EXTENSION = "oracle_rag"
DEFAULT_MAX_BODY = 64 * 1024

CallerLoader = Callable[[Request], Caller | None]


@dataclass(frozen=True)
class DemoIdentity:
    """An employee the demo picker offers, with the demo token that acts as them."""

    employee_id: int
    name: str
    role: str
    token: str

    def to_dict(self) -> dict[str, Any]:
        return {"employee_id": self.employee_id, "name": self.name, "role": self.role, "token": self.token}


@dataclass
class WebState:
    rag: RagSystem
    chat: Chat
    caller_loader: CallerLoader
    metrics: Metrics
    feedback: FeedbackStore  # ratings, with this app's per-caller rating limit
    demo_identities: list[DemoIdentity] = field(default_factory=list)
    max_body: int = DEFAULT_MAX_BODY
    owns_rag: bool = False
    services: BackgroundServices | None = None  # set when the server runs the background work in-process
    llm_health: LLMHealth = field(
        default_factory=lambda: LLMHealth()
    )  # the model's last outcome, for /healthz
    allowed_hosts: frozenset[str] | None = None  # parsed ``allowed_hosts``, on first request

    @property
    def demo(self) -> bool:
        return bool(self.rag.settings.demo)

    def close(self) -> None:
        if self.owns_rag:
            self.rag.close()


def state() -> WebState:
    """This app's oracle-rag state (set by ``init_app``)."""
    state_: WebState = current_app.extensions[EXTENSION]
    return state_


# -- the per-request connection ------------------------------------------------
def get_db() -> sa.Connection:
    """This request's connection, checked out of the app's pool on first use."""
    conn = g.get("oracle_rag_db")
    if conn is None:
        try:
            conn = state().rag.engine.sa_engine.connect()
        except sa.exc.DBAPIError as exc:
            raise wrap_driver_error(exc, "database connection") from None
        g.oracle_rag_db = conn
    return conn


def release_db(_exc: BaseException | None = None) -> None:
    """Return the request's connection to the pool (teardown, or early in long requests)."""
    conn = g.pop("oracle_rag_db", None)
    if conn is not None:
        conn.close()


class LLMHealth:
    """The language model's last outcome as this app saw it.

    There is no probe (a model call costs time and money, and every
    instance shares the endpoint, so a 503 for it would take them all out):
    the chat views report each call's outcome here, and ``/healthz`` lists a
    failing model under ``degraded`` until a call succeeds again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.last_ok_at: float | None = None

    def ok(self) -> None:
        with self._lock:
            self.last_ok_at = time.time()
            self.last_error = None

    def failed(self, exc: RagError) -> None:
        with self._lock:
            self.last_error, self.last_error_at = str(exc), time.time()

    def report(self, configured: bool) -> dict[str, Any]:
        with self._lock:
            age = None if self.last_error_at is None else round(time.time() - self.last_error_at, 1)
            return {
                "configured": configured,
                "ok": None if not configured else self.last_error is None,
                "last_error": self.last_error,
                "last_error_age_s": age if self.last_error else None,
            }


def finish_api_response(response: Response) -> Response:
    """After-request hook shared by the JSON blueprints (``/api`` and ``/v1``).

    Records the request in the metrics (timed from ``g.oracle_rag_started``,
    set by each blueprint's before-request hook) and marks every response as
    not cacheable and not to be sniffed: answers are per caller.
    """
    started = g.get("oracle_rag_started")
    if started is not None:
        state().metrics.observe_request(
            request.endpoint or "unmatched",
            request.method,
            response.status_code,
            time.perf_counter() - started,
        )
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
