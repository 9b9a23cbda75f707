"""The chat page: one template, one script, one stylesheet; no build step, no CDN.

The page talks to the JSON API with ``fetch`` (the streamed answer is read
from the ``/chat/stream`` response body). It sends the API token the user
pasted, or, in demo mode only, the demo token of the employee picked in a
clearly marked box. A host app whose caller loader reads its own session
cookie needs neither: the page's same-origin requests carry the cookie.

``/chunk/<type>/<id>[?passage=...]`` is the same page opened on a record's
detail (at the cited passage), so a citation link works in a new tab too. Every response carries a strict
Content-Security-Policy: scripts and styles only from this origin.

In demo mode the page offers example questions the demo data answers
(structured and open, :data:`oracle_rag.demo.questions.EXAMPLES`): a click asks
one as the employee picked.
"""

from __future__ import annotations

from flask import Blueprint, Response, render_template, request, url_for

from oracle_rag.demo.questions import EXAMPLES
from oracle_rag.web.state import state

pages_bp = Blueprint(
    "oracle_rag_pages",
    __name__,
    static_folder="static",
    static_url_path="/static/oracle-rag",
    template_folder="templates",
)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


@pages_bp.after_request
def _headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _render(chunk_type: str = "", chunk_id: str = "", chunk_passage: str = "") -> str:
    api_base = url_for("oracle_rag_api.me").rsplit("/me", 1)[0]
    demo = state().demo
    return render_template(
        "oracle_rag_chat.html",
        api_base=api_base,
        demo=demo,
        examples=EXAMPLES if demo else (),
        page_base=url_for("oracle_rag_pages.index"),
        chunk_type=chunk_type,
        chunk_id=chunk_id,
        chunk_passage=chunk_passage,
        health_url=url_for("oracle_rag_health.healthz"),
    )


@pages_bp.get("/")
def index() -> str:
    return _render()


@pages_bp.get("/chunk/<source_type>/<path:source_id>")
def chunk_page(source_type: str, source_id: str) -> str:
    return _render(source_type, source_id, request.args.get("passage", "")[:2000])
