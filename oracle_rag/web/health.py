"""``GET /healthz``: can this instance answer questions right now?

Healthy (200) means the database answers and the embedding model is
present and embeds; otherwise 503, so a load balancer takes the instance
out. Queue figures (depth, stalled rows with ATTEMPTS >= 3, rows parked at
``max_attempts``) and the in-process worker's state are reported for
operators but do not fail the check: a stuck queue row makes answers
staler, not impossible, and pulling every instance out of rotation for it
would turn a data problem into an outage; they are listed under
``degraded`` (with the worker's last error and a failing language model)
for operators and alerts. No authentication; the body holds no data, only
counts and error codes.

Sources whose permission data failed to read (hidden from callers without
see-all) are a count to an anonymous request: which sources, and the error
class of each failure, say what a deployment reads and how it breaks. An
operator sees them with ``oracle-rag status``, or here with
``Authorization: Bearer`` and the metrics token (``metrics_token_env``) or
the API token of a caller who sees everything.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Request, Response, jsonify, request

from oracle_rag.errors import RagError
from oracle_rag.indexing.model_switch import switch_progress
from oracle_rag.web.metrics import metrics_allowed
from oracle_rag.web.state import state

health_bp = Blueprint("oracle_rag_health", __name__)


def is_operator(req: Request) -> bool:
    """Is ``req`` authenticated as an operator: the metrics token's bearer, or a caller who sees everything?

    Never an error: a missing or wrong credential is simply the anonymous view.
    """
    if "Authorization" not in req.headers:
        return False
    web = state()
    token_env = web.rag.settings.metrics_token_env
    if token_env and metrics_allowed(req, token_env):
        return True
    try:
        caller = web.caller_loader(req)
    except Exception:  # a bad token, an unreachable database: the anonymous view
        return False
    return caller is not None and bool(getattr(caller, "sees_all", False))


def health_report(operator: bool = False) -> tuple[bool, dict[str, Any]]:
    web = state()
    rag = web.rag
    report: dict[str, Any] = {"engine": rag.engine.name}
    db_ok = model_ok = False
    try:
        with rag.engine.connect() as conn:
            stats = rag.engine.queue_stats(conn, rag.settings.max_attempts)
            db_ok = True
            report["database"] = {"ok": True}
            report["queue"] = {
                "depth": stats.depth,
                "stalled_rows": stats.stalled,
                "failed_rows": stats.failed,
                "oldest_age_s": stats.oldest_age_s,
            }
            report["indexing"] = indexing_report(stats)
            report["model_switch"] = switch_progress(rag.engine)
            failures = rag.engine.access_failures(conn)
            report["access"] = {"hidden_source_count": len(failures)}
            if operator:
                report["access"]["hidden_sources"] = sorted(failures)
                report["access"]["errors"] = {name: failures[name] for name in sorted(failures)}
            model = rag.engine.model_status(conn)
            model_ok = bool(model.get("present")) and int(model.get("dimensions") or 0) > 0
            report["model"] = {
                "ok": model_ok,
                "name": model.get("model"),
                "dimensions": model.get("dimensions"),
            }
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
    llm_health = getattr(web, "llm_health", None)
    if llm_health is not None:
        report["llm"] = llm_health.report(web.chat.llm is not None)
    healthy = db_ok and model_ok
    report["status"] = "ok" if healthy else "unavailable"
    report["degraded"] = degraded_reasons(report)
    return healthy, report


def indexing_report(stats: Any) -> dict[str, Any]:
    """How far the index is: chunks stored, queue rows still to do (parked ones excluded).

    The demo serves while it indexes (and ``serve`` after a backfill), so the
    page shows this as a progress line and answers from what is indexed so far.
    ``pending`` counts queue rows, several of which may be one entity.
    """
    indexed = sum(stats.chunks_by_type.values())
    pending = max(stats.depth - stats.failed, 0)
    return {"indexed": indexed, "pending": pending, "done": pending == 0}


def degraded_reasons(report: dict[str, Any]) -> list[str]:
    """What makes answers worse without making them impossible (the check stays 200).

    A failing worker (its last batch's error), a worker thread that died,
    stalled or parked queue rows, a failed start-up backfill, and a language
    model whose last call failed. Empty when nothing is wrong.
    """
    out: list[str] = []
    worker = report.get("worker") or {}
    if worker.get("in_process") and worker.get("running") is False:
        out.append("worker: the in-process worker thread is not running")
    if worker.get("last_error"):
        out.append(f"worker: last batch failed: {worker['last_error']}")
    if worker.get("backfill_error"):
        out.append(f"backfill: {worker['backfill_error']}")
    queue = report.get("queue") or {}
    if queue.get("stalled_rows"):
        out.append(f"queue: {queue['stalled_rows']} stalled row(s) (ATTEMPTS >= 3)")
    if queue.get("failed_rows"):
        out.append(
            f"queue: {queue['failed_rows']} row(s) parked at max_attempts; see `oracle-rag queue "
            "list --failed`"
        )
    access = report.get("access") or {}
    if access.get("hidden_source_count"):
        which = (
            ", ".join(access["hidden_sources"])
            if "hidden_sources" in access
            else (f"{access['hidden_source_count']} source(s) (names: oracle-rag status)")
        )
        out.append(
            f"access: permission data of {which} could not be read; their records are hidden "
            f"from callers without see-all until it succeeds"
        )
    llm = report.get("llm") or {}
    if llm.get("last_error"):
        out.append(f"llm: last call failed: {llm['last_error']}")
    return out


@health_bp.get("/healthz")
def healthz() -> Response:
    healthy, report = health_report(operator=is_operator(request))
    response = jsonify(report)
    response.status_code = 200 if healthy else 503
    response.headers["Cache-Control"] = "no-store"
    return response
