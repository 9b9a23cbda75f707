"""The Flask side: ``create_app`` (a whole app) and ``init_app`` (mount into a host app).

See :mod:`oracle_rag.web.app` for configuration and ``docs/chat.md`` for the API.
"""

from __future__ import annotations

from oracle_rag.web.app import create_app, init_app
from oracle_rag.web.state import DemoIdentity, WebState

__all__ = ["DemoIdentity", "WebState", "create_app", "init_app"]
