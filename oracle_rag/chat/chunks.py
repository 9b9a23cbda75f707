"""The citation detail view: one chunk, only when the caller's scope allows it.

The scope predicate is the one every search uses, inside the statement, so
a chunk the caller may not see is indistinguishable from one that does not
exist: both are :class:`NotFoundError` (a 404), and nothing about the
hidden chunk, not even its existence, reaches the caller.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..caller import Caller, require_caller
from ..engines import Engine
from ..engines.records import lob_text
from ..errors import NotFoundError
from . import chat_sql as q

_SOURCE_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")  # product types and SQL-source names
MAX_SOURCE_ID = 256


@dataclass(frozen=True)
class ChunkDetail:
    source_type: str
    source_id: str
    content: str
    project_id: int | None
    sprint_id: int | None
    updated_at: str | None

    @property
    def anchor(self) -> str:
        return f"[{self.source_type} #{self.source_id}]"

    def to_dict(self) -> dict[str, Any]:
        return {"source_type": self.source_type, "source_id": self.source_id, "anchor": self.anchor,
                "content": self.content, "project_id": self.project_id, "sprint_id": self.sprint_id,
                "updated_at": self.updated_at}


def chunk_detail(conn: sa.Connection, engine: Engine, caller: Caller, source_type: str,
                 source_id: str) -> ChunkDetail:
    who = require_caller(caller)
    if not _SOURCE_TYPE.match(source_type or "") or not source_id or len(source_id) > MAX_SOURCE_ID:
        raise NotFoundError("record not found")
    # The type as written first: a SQL source's type is its name, case kept ("crm_accounts").
    # Then upper case, so /chunk/task/7 finds TASK #7. Source names differing only in case
    # are refused at configuration, and product type names are reserved, so at most one matches.
    row = None
    for kind in dict.fromkeys((source_type, source_type.upper())):
        row = conn.execute(engine.statement(q.GET_CHUNK),
                           {"source_type": kind, "source_id": str(source_id), **who.scope().binds()}).first()
        if row is not None:
            break
    if row is None:
        raise NotFoundError("record not found")
    content = lob_text(row[2])
    updated = row[6].isoformat() if isinstance(row[6], dt.datetime) else (None if row[6] is None else str(row[6]))
    return ChunkDetail(str(row[0]), str(row[1]), content, None if row[4] is None else int(row[4]),
                       None if row[5] is None else int(row[5]), updated)
