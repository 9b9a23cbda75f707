"""``GET /healthz``: can this instance answer questions right now?

Healthy (200) means the database answers and the embedding model is
present and embeds; otherwise 503, so a load balancer takes the instance
out. Queue figures (depth, stalled rows with ATTEMPTS >= 3, rows parked at
``max_attempts``) and the in-process worker's state are reported for
operators but do not fail the check: a stuck queue row makes answers
staler, not impossible, and pulling every instance out of rotation for it
would turn a data problem into an outage. No authentication; the body
holds no data, only counts and error codes.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from ..errors import RagError
from .app import state

health_bp = Blueprint("oracle_rag_health", __name__)


def health_report() -> tuple[bool, dict[str, Any]]:
    web = state()
    rag = web.rag
    report: dict[str, Any] = {"engine": rag.engine.name}
    db_ok = model_ok = False
    try:
        with rag.engine.connect() as conn:
            stats = rag.engine.queue_stats(conn, rag.settings.max_attempts)
            db_ok = True
            report["database"] = {"ok": True}
            report["queue"] = {"depth": stats.depth, "stalled_rows": stats.stalled, "failed_rows": stats.failed,
                               "oldest_age_s": stats.oldest_age_s}
            model = rag.engine.model_status(conn)
            model_ok = bool(model.get("present")) and int(model.get("dimensions") or 0) > 0
            report["model"] = {"ok": model_ok, "name": model.get("model"), "dimensions": model.get("dimensions")}
            if not model_ok and model.get("fix"):
                report["model"]["fix"] = model["fix"]
    except Exception as exc:  # any failure is a 503 with its code; driver text never leaves
        key = "model" if db_ok else "database"
        if isinstance(exc, RagError):
            report[key] = {"ok": False, "error": exc.code, "message": exc.message}
        else:
            report[key] = {"ok": False, "error": type(exc).__name__}
        if not db_ok:
            report["model"] = {"ok": False, "error": "UNKNOWN", "message": "database unreachable"}
    if web.services is not None:
        report["worker"] = web.services.status()
    healthy = db_ok and model_ok
    report["status"] = "ok" if healthy else "unavailable"
    return healthy, report


@health_bp.get("/healthz")
def healthz() -> Response:
    healthy, report = health_report()
    response = jsonify(report)
    response.status_code = 200 if healthy else 503
    response.headers["Cache-Control"] = "no-store"
    return response
