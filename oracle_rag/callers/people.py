"""The names of the people behind person facets, as a deployment declares them (docs/access.md).

Every person facet of every source (a task's assignee, a deal's rep, a
ticket's owner) holds a person id; questions name people ("deals of Tomás
Herrera") and answers show names ("Tomás Herrera has the most open deals").
Where the names come from:

* ``[people] query``: ``SELECT person_id, name`` (or ``SELECT person_id,
  first_name, last_name``: the name columns after the id are joined by a
  space), run on the read-only, time-limited session SQL-query sources and the
  ``[access]`` queries use (sources/connections.py ``read_session``);
* else the reference application's declaration of the same thing (its
  EMPLOYEE table), where its tables exist;
* else nobody has a name: answers show the id.

The names are kept for ``[people] refresh`` (an injected clock decides, so a
test controls time) and then read again. A read that fails keeps the names
read last (a name is shown, it grants nothing, so a stale one hides nothing
and shows nothing it should not); the failure is logged, counted and shown by
``oracle-rag status``. A row whose id is not an integer or whose name is empty
is skipped (person ids are integers, like callers').
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from oracle_rag.config import duration_seconds
from oracle_rag.engines import Engine
from oracle_rag.engines.per_engine import PerEngine
from oracle_rag.errors import DatabaseError, RagError
from oracle_rag.sources.connections import read_session
from oracle_rag.sources.reference import REFERENCE_PEOPLE, reference_app_present
from oracle_rag.sources.sql_query import check_query

log = logging.getLogger("oracle_rag.callers.people")

QUERY_TIMEOUT_S = 30.0
DEFAULT_REFRESH_S = 300.0
DECLARED = "[people] query"
REFERENCE = "EMPLOYEE (the reference application)"


@dataclass
class PeopleState:
    """What ``oracle-rag status`` shows about the names."""

    names_from: str = "none"
    loaded_at: float | None = None
    people: int = 0
    skipped_rows: int = 0
    failures: int = 0
    last_error: str | None = None


def person_id(value: Any) -> int | None:
    """A person id as person facets hold it: an integer (a whole float, Decimal or digit text too)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal):
        return int(value) if value == int(value) else None
    text = str(value).strip()
    return int(text) if text.lstrip("-").isdigit() else None


def person_name(parts: tuple[Any, ...]) -> str:
    """The name columns of one row joined by a space (NULL parts left out)."""
    return " ".join(" ".join(str(p).split()) for p in parts if p is not None and str(p).strip())


class PeopleDirectory:
    """Names by person id for one deployment (thread-safe; one per Engine: :func:`people_for`)."""

    def __init__(
        self,
        engine: Engine,
        query: str | None = None,
        *,
        reference: str = "AUTO",
        refresh_s: float = DEFAULT_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``query``: the deployment's ``[people] query``; None: the reference application's, as the
        ``reference_app`` setting (``reference``) says: AUTO where its tables exist (looked for at each
        read, so tables created after start-up are found), ON always, OFF never."""
        # A weak reference: people_for keys a WeakKeyDictionary by the engine, and a value that held the
        # engine strongly would keep it (and its model session and caches) alive for the process.
        self._engine_ref = weakref.ref(engine)
        self.reference = reference
        self.query = None if not query else check_query(query, key="people.query")
        self.refresh_s = refresh_s
        self.clock = clock
        self._lock = threading.Lock()
        self._names: dict[int, str] = {}
        self._loaded_at: float | None = None
        self.state = PeopleState()

    def names(self) -> dict[int, str]:
        """Every known person's name by id (read again when ``refresh`` has passed)."""
        self.refresh()
        with self._lock:
            return self._names

    def name(self, pid: Any) -> str | None:
        """``pid``'s name, or None when nobody declared one (show the id then)."""
        key = person_id(pid)
        return None if key is None else self.names().get(key)

    def refresh(self, *, force: bool = False) -> None:
        now = self.clock()
        with self._lock:
            if not force and self._loaded_at is not None and now - self._loaded_at < self.refresh_s:
                return
            self._loaded_at = now
        try:
            query, label = self._source()
        except RagError as exc:
            self._failed("where names come from", exc.message)
            return
        if query is None:
            with self._lock:
                self._names = {}
                self.state.names_from, self.state.people, self.state.loaded_at = label, 0, now
                self.state.last_error = None
            return
        names, skipped = self._read(query, label)
        if names is None:
            return
        with self._lock:
            self._names = names
            self.state.names_from = label
            self.state.loaded_at = now
            self.state.people = len(names)
            self.state.skipped_rows = skipped
            self.state.last_error = None

    def _source(self) -> tuple[str | None, str]:
        """(the statement to read, where it comes from): declared, the reference app's, or none."""
        if self.query is not None:
            return self.query, DECLARED
        if self.reference != "AUTO":
            return (REFERENCE_PEOPLE, REFERENCE) if self.reference == "ON" else (None, "none")
        with self._engine.connect() as conn:
            present = reference_app_present(conn)
        return (REFERENCE_PEOPLE, REFERENCE) if present else (None, "none")

    @property
    def _engine(self) -> Engine:
        engine = self._engine_ref()
        if engine is None:
            raise DatabaseError("the engine of this people directory is gone")
        return engine

    def _failed(self, label: str, message: str) -> None:
        with self._lock:
            self.state.failures += 1
            self.state.last_error = f"{label}: {message}"
        log.warning("people: reading names failed (the names read last are kept): %s", message)

    def _read(self, query: str, label: str) -> tuple[dict[int, str] | None, int]:
        names: dict[int, str] = {}
        skipped = 0
        try:
            with read_session(
                self._engine.sa_engine, source="people.query", timeout_s=QUERY_TIMEOUT_S
            ) as conn:
                for row in conn.exec_driver_sql(query):
                    pid = person_id(row[0]) if len(row) >= 2 else None
                    name = person_name(tuple(row[1:])) if pid is not None else ""
                    if pid is None or not name:
                        skipped += 1
                        continue
                    names[pid] = name
        except (RagError, sa.exc.SQLAlchemyError) as exc:
            self._failed(label, exc.message if isinstance(exc, RagError) else type(exc).__name__)
            return None, 0
        return names, skipped


def _directory(engine: Engine) -> PeopleDirectory:
    settings = engine.settings
    return PeopleDirectory(
        engine,
        settings.people_query,
        reference=settings.reference_app,
        refresh_s=duration_seconds(settings.people_refresh) or DEFAULT_REFRESH_S,
    )


_DIRECTORIES: PerEngine[PeopleDirectory] = PerEngine(_directory)


def people_for(engine: Engine) -> PeopleDirectory:
    """The deployment's people: one directory per Engine, from its settings' ``[people]``."""
    return _DIRECTORIES.get(engine)


def people_status(engine: Engine) -> dict[str, Any]:
    """Where person names come from, how many, and the last failure (``oracle-rag status``)."""
    directory = people_for(engine)
    directory.refresh()
    state = directory.state
    return {
        "names_from": state.names_from,
        "people": state.people,
        "skipped_rows": state.skipped_rows,
        "failures": state.failures,
        "last_error": state.last_error,
    }
