"""Enqueueing changes in the caller's own transaction.

The queue row is one INSERT on the connection the application is already
writing with, so it commits or rolls back together with the change it
describes: no change can be committed without its queue row, and a rolled
back change leaves no queue row behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from oracle_rag.engines.engine_sql import ENQUEUE
from oracle_rag.engines.records import enqueue_params
from oracle_rag.engines.statements import for_connection


def _connection(conn: Any) -> sa.Connection:
    if isinstance(conn, sa.Connection):
        return conn
    if hasattr(conn, "connection") and callable(conn.connection):  # an ORM Session
        return conn.connection()
    raise TypeError("enqueue() needs a SQLAlchemy Connection or Session")


def enqueue(conn: Any, source_type: str, source_id: Any, action: str = "UPSERT") -> None:
    """Queue (source_type, source_id) for re-indexing inside the caller's transaction."""
    enqueue_many(conn, [(source_type, source_id, action)])


def enqueue_many(conn: Any, items: Iterable[tuple[str, Any, str]]) -> int:
    connection = _connection(conn)
    sql = for_connection(connection, ENQUEUE)  # TypeError for a database we do not run on
    rows = enqueue_params(items)
    if rows:
        connection.execute(sql, rows)
    return len(rows)


@dataclass(frozen=True)
class Tracked:
    """How an ORM class maps to the entity to re-index.

    ``key(obj)`` returns the id of the entity (or ``None`` to skip). With
    ``owns=True`` the object *is* the entity, so deleting it enqueues
    DELETE; with ``owns=False`` it is a child (a comment of a task), so any
    change to it, deletion included, enqueues UPSERT of the parent.
    """

    source_type: str
    key: Callable[[Any], Any]
    owns: bool = True


def install_orm_hooks(session_class: Any, mapping: dict[type, Tracked]) -> Callable[[], None]:
    """Enqueue automatically, in the same flush, when mapped objects change.

    Returns a function that removes the hook.
    """

    def tracked(obj: Any) -> Tracked | None:
        for cls, spec in mapping.items():
            if isinstance(obj, cls):
                return spec
        return None

    def after_flush(session: Any, _ctx: Any) -> None:
        items: dict[tuple[str, str], str] = {}
        changed = list(session.new) + [o for o in session.dirty if session.is_modified(o)]
        for obj in changed:
            spec = tracked(obj)
            if spec and spec.key(obj) is not None:
                items.setdefault((spec.source_type, str(spec.key(obj))), "UPSERT")
        for obj in session.deleted:
            spec = tracked(obj)
            if spec and spec.key(obj) is not None:
                key = (spec.source_type, str(spec.key(obj)))
                items[key] = "DELETE" if spec.owns else items.get(key, "UPSERT")
        if items:
            enqueue_many(session, [(t, i, a) for (t, i), a in items.items()])

    sa.event.listen(session_class, "after_flush", after_flush)

    def remove() -> None:
        sa.event.remove(session_class, "after_flush", after_flush)

    return remove
