"""Prometheus metrics, one CollectorRegistry per app.

A registry per app (not the process-global default) lets two apps live in
one process (tests, a host mounting two instances) without "duplicated
timeseries" errors, and makes each app's numbers its own.

Exposed at ``GET /metrics`` (text format). Who may read it: by default only
a loopback peer (Prometheus on the same machine); with ``metrics_token_env``
set, anyone presenting ``Authorization: Bearer <that variable's value>``,
and no one without it (a reverse proxy on the same machine makes every
peer loopback, so behind one set the token or keep the path off the proxy).
What it publishes is operational only, nothing a caller's scope governs: no
count of chunks, tasks or any other data (``oracle-rag status`` shows those
to operators). Anonymous callers may know that the service runs and how it
performs; the metrics say no more than that:

- ``oracle_rag_http_requests_total{endpoint,method,status}``
- ``oracle_rag_http_request_duration_seconds{endpoint}`` (for streams: until
  the response starts)
- ``oracle_rag_retrieval_duration_seconds{mode}``, ``oracle_rag_llm_duration_seconds{outcome}``
- ``oracle_rag_chat_answers_total{answerer}`` (llm, extractive, none)
- ``oracle_rag_embedding_duration_seconds``: each in-process embedding
  (embedded engine only; on Oracle the embedding runs inside the search
  statement and is part of the retrieval time)
- read at scrape time from the queue: ``oracle_rag_queue_depth``,
  ``oracle_rag_queue_stalled_rows``, ``oracle_rag_queue_failed_rows``,
  ``oracle_rag_queue_oldest_age_seconds``, ``oracle_rag_database_up``
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import threading
from collections.abc import Iterator

from flask import Blueprint, Request, Response, current_app, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from oracle_rag.callers.audit import audit_for
from oracle_rag.callers.tokens import bearer_token
from oracle_rag.errors import RagError
from oracle_rag.system import RagSystem
from oracle_rag.web.json_errors import error_response

log = logging.getLogger("oracle_rag.web.metrics")

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_EMBED_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

metrics_bp = Blueprint("oracle_rag_metrics", __name__)


class _QueueCollector(Collector):
    """Reads queue and chunk counts when Prometheus scrapes, so they are never stale."""

    def __init__(self, rag: RagSystem) -> None:
        self.rag = rag

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("oracle_rag_database_up", "1 when the queue statistics could be read")
        try:
            with self.rag.engine.connect() as conn:
                stats = self.rag.engine.queue_stats(conn, self.rag.settings.max_attempts)
        except Exception as exc:  # a scrape must not fail: report the database as down instead
            log.warning(
                "metrics: queue statistics unavailable: %s",
                exc if isinstance(exc, RagError) else type(exc).__name__,
            )
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for name, doc, value in (
            ("oracle_rag_queue_depth", "Rows waiting in RAG_DIRTY", stats.depth),
            ("oracle_rag_queue_stalled_rows", "Queue rows with ATTEMPTS >= 3", stats.stalled),
            ("oracle_rag_queue_failed_rows", "Queue rows parked at max_attempts", stats.failed),
            ("oracle_rag_queue_oldest_age_seconds", "Age of the oldest queue row", stats.oldest_age_s or 0.0),
        ):
            family = GaugeMetricFamily(name, doc)
            family.add_metric([], float(value))
            yield family
        trail = audit_for(self.rag.engine)
        for name, doc, value in (
            ("oracle_rag_audit_written", "Audit events written to RAG_AUDIT by this process", trail.written),
            (
                "oracle_rag_audit_write_failures",
                "Audit events that could not be written (logged; answers unaffected)",
                trail.write_failures,
            ),
        ):
            family = GaugeMetricFamily(name, doc)
            family.add_metric([], float(value))
            yield family
        # No per-type chunk totals: the scoped views hide them from developers, so an
        # unauthenticated page must not publish them.


class Metrics:
    """The app's registry and the instruments the API and the chat report to."""

    def __init__(self, rag: RagSystem) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "oracle_rag_http_requests", "HTTP requests served", ["endpoint", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "oracle_rag_http_request_duration_seconds",
            "Time to the response start",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.retrieval = Histogram(
            "oracle_rag_retrieval_duration_seconds",
            "Retrieval time per question",
            ["mode"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.llm = Histogram(
            "oracle_rag_llm_duration_seconds",
            "Language model call time",
            ["outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.answers = Counter(
            "oracle_rag_chat_answers", "Answers given, by answerer", ["answerer"], registry=r
        )
        self.checked = Counter(
            "oracle_rag_llm_sentences",
            "Model sentences checked against the computed result, by outcome (kept, removed)",
            ["outcome"],
            registry=r,
        )
        self.embedding = Histogram(
            "oracle_rag_embedding_duration_seconds",
            "In-process embedding time per text",
            buckets=_EMBED_BUCKETS,
            registry=r,
        )
        r.register(_QueueCollector(rag))
        self._rag = rag
        self._instrumented = False
        self._instrument_lock = threading.Lock()

    def instrument_embedding(self) -> None:
        """Hook the embedding timer in, once; called on API requests, not at app creation,
        so creating an app never loads (or builds) the model."""
        if self._instrumented:
            return
        with self._instrument_lock:
            if not self._instrumented:
                self._instrumented = self._rag.engine.observe_embedding(self.embedding.observe)

    def observe_chat(self, what: str, seconds: float, labels: dict[str, str]) -> None:
        """The :class:`~oracle_rag.answering.chat.Chat` observer hook."""
        if what == "retrieval":
            self.retrieval.labels(labels.get("mode", "")).observe(seconds)
        elif what == "llm":
            self.llm.labels(labels.get("outcome", "")).observe(seconds)
        elif what == "answer":
            self.answers.labels(labels.get("answerer", "")).inc()
        elif what == "checked":
            for outcome in ("kept", "removed"):
                self.checked.labels(outcome).inc(int(labels.get(outcome, "0")))

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, method, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def metrics_allowed(req: Request, token_env: str | None) -> bool:
    """Loopback peers by default; with ``metrics_token_env`` set, exactly the bearer of that token."""
    if token_env:
        expected = os.environ.get(token_env) or ""
        given = bearer_token(req.headers.get("Authorization")) or ""
        return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())
    try:
        return ipaddress.ip_address((req.remote_addr or "").split("%")[0]).is_loopback
    except ValueError:
        return False


@metrics_bp.get("/metrics")
def metrics_view() -> Response:
    web = current_app.extensions["oracle_rag"]
    if not metrics_allowed(request, web.rag.settings.metrics_token_env):
        return error_response(
            403,
            "FORBIDDEN",
            "metrics are served to loopback peers only, or to the bearer of "
            "the metrics token (metrics_token_env)",
        )
    metrics: Metrics = web.metrics
    return Response(metrics.render(), content_type=CONTENT_TYPE_LATEST)
