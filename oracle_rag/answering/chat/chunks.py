"""The citation detail view: one whole record, only when the caller's scope allows it.

The scope predicate is the one every search uses, inside the statement, so
a record the caller may not see is indistinguishable from one that does not
exist: both are :class:`NotFoundError` (a 404), and nothing about the
hidden record, not even its existence, reaches the caller.

A long record is stored as several overlapping windows (:mod:`oracle_rag.text.chunking`);
the view joins them back into the record's text (the overlaps once) and says
where each window lies in it, so the page can open the record at the cited
window, or at the cited passage (:func:`find_passage`, the citation's snippet).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from oracle_rag.answering.chat import chat_sql as q
from oracle_rag.callers.caller import Caller, require_caller
from oracle_rag.engines import Engine
from oracle_rag.engines.indexed_columns import INDEXED_COLUMNS, by_facet
from oracle_rag.engines.records import integers, lob_text
from oracle_rag.errors import NotFoundError
from oracle_rag.sources.meanings import anchor_of
from oracle_rag.text.chunking import join_chunks, plan_of

_SOURCE_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")  # product types and SQL-source names
MAX_SOURCE_ID = 256


@dataclass(frozen=True)
class ChunkDetail:
    source_type: str
    source_id: str
    content: str
    indexed: dict[str, int | None]  # the record's indexed facets (engines/indexed_columns.py) by name
    updated_at: str | None
    # (start, end) of each stored window in ``content``, in CHUNK_NO order
    windows: tuple[tuple[int, int], ...] = ((0, 0),)

    @property
    def anchor(self) -> str:
        return anchor_of(self.source_type, str(self.source_id))

    def view_dict(self, passage: str = "") -> dict[str, Any]:
        """:meth:`to_dict` plus the windows' places and where ``passage`` (a citation's snippet) is,
        if found."""
        found = find_passage(self.content, passage) if passage else None
        return {
            **self.to_dict(),
            "chunks": [{"chunk_no": n, "start": a, "end": b} for n, (a, b) in enumerate(self.windows)],
            "passage": None if found is None else {"start": found[0], "end": found[1]},
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_type": self.source_type,
            "source_id": self.source_id,
            "anchor": self.anchor,
            "content": self.content,
            **self.indexed,
            "updated_at": self.updated_at,
        }


def chunk_detail(
    conn: sa.Connection, engine: Engine, caller: Caller, source_type: str, source_id: str
) -> ChunkDetail:
    who = require_caller(caller)
    if not _SOURCE_TYPE.match(source_type or "") or not source_id or len(source_id) > MAX_SOURCE_ID:
        raise NotFoundError("record not found")
    # The type as written first: a SQL source's type is its name, case kept ("crm_accounts").
    # Then upper case, so /chunk/task/7 finds TASK #7. Source names differing only in case
    # are refused at configuration, and product type names are reserved, so at most one matches.
    rows: list[Any] = []
    for kind in dict.fromkeys((source_type, source_type.upper())):
        rows = list(
            conn.execute(
                engine.statement(q.GET_CHUNK),
                {"source_type": kind, "source_id": str(source_id), **who.scope().binds()},
            )
        )
        if rows:
            break
    if not rows:
        raise NotFoundError("record not found")
    # SOURCE_TYPE, SOURCE_ID, CONTENT, OWNER_ID, the indexed facet columns, UPDATED_AT, CHUNK_NO
    at = 4 + len(INDEXED_COLUMNS)
    rows.sort(key=lambda r: int(r[at + 1]))
    parts = [lob_text(r[2]) for r in rows]
    content = join_chunks(parts, plan_of(engine.settings)) if len(parts) > 1 else parts[0]
    row = rows[0]
    updated = (
        row[at].isoformat()
        if isinstance(row[at], dt.datetime)
        else (None if row[at] is None else str(row[at]))
    )
    return ChunkDetail(
        str(row[0]),
        str(row[1]),
        content,
        by_facet(integers(row[4:at])),
        updated,
        _windows(content, parts),
    )


def _windows(content: str, parts: list[str]) -> tuple[tuple[int, int], ...]:
    """Where each window lies in the joined text: each is a slice of it, found after its
    predecessor's start."""
    out: list[tuple[int, int]] = []
    at = 0
    for part in parts:
        start = content.find(part, at)
        if start < 0:  # joined across a whitespace gap the split dropped: place it by its stripped text
            start = max(content.find(part.strip(), at), at)
        out.append((start, min(start + len(part), len(content))))
        at = start + 1
    return tuple(out)


_ELLIPSIS = "\u2026"


def find_passage(content: str, passage: str) -> tuple[int, int] | None:
    """Where a citation's snippet (the text on one line, maybe cut with ellipses) is in ``content``.

    The snippet flattened the record's whitespace and may have dropped its
    leading anchor, so the search is word by word with any whitespace between.
    """
    words = passage.replace(_ELLIPSIS, " ").split()
    if not words:
        return None
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    match = pattern.search(content)
    return (match.start(), match.end()) if match else None
