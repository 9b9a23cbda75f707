"""A record (an entity or a SQL-source row) as the chunks that represent it.

One place decides what is written for a record, so the indexer and the
SQL-source refresher write the same thing: the chunk texts (text/chunking.py),
the record hash every chunk carries, the scope columns and facets shared by
all chunks, and the record's BM25 analysis on chunk 0 (text/bm25.py).

The record hash is the SHA-256 of the text for a one-chunk record (so rows
written before chunking existed are still recognised as unchanged), and of
the text plus the chunk plan for a longer one, so changing ``chunk_window``
or ``chunk_overlap`` re-chunks exactly the records it affects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from oracle_rag.engines import ChunkWrite, RecordAccess, content_hash
from oracle_rag.engines.indexed_columns import NO_VALUES
from oracle_rag.engines.roles import ChunkStore
from oracle_rag.text.bm25 import analyze_record
from oracle_rag.text.chunking import ChunkPlan


@dataclass(frozen=True)
class RecordWrite:
    """Every chunk of one record, ready for ``Engine.upsert_chunks``."""

    source_type: str
    source_id: str
    record_hash: str
    chunks: tuple[ChunkWrite, ...]


def record_hash(text: str, pieces: int, plan: ChunkPlan) -> str:
    return content_hash(text) if pieces == 1 else content_hash(text + "\x00" + plan.tag)


def planned_hash(plan: ChunkPlan, text: str) -> tuple[list[str], str]:
    """The record's chunk texts and its record hash: all the indexer's skip test needs.

    Cheaper than :func:`record_write` (no BM25 analysis), so a re-run over
    unchanged records analyses nothing.
    """
    parts = plan.split(text)
    return parts, record_hash(text, len(parts), plan)


def record_write(
    plan: ChunkPlan,
    source_type: str,
    source_id: str,
    text: str,
    *,
    owner_id: int | None = None,
    indexed: tuple[int | None, ...] = NO_VALUES,
    facets: str = "{}",
    access: RecordAccess | None = None,
    planned: tuple[list[str], str] | None = None,
) -> RecordWrite:
    """Every chunk of the record; ``planned`` is :func:`planned_hash` of ``text`` when already computed."""
    parts, digest = planned or planned_hash(plan, text)
    analysis = analyze_record(text)
    chunks = tuple(
        ChunkWrite(
            source_type,
            source_id,
            part,
            digest,
            owner_id,
            indexed,
            chunk_no=n,
            facets=facets,
            analysis=analysis if n == 0 else None,
            access=access,
        )
        for n, part in enumerate(parts)
    )
    return RecordWrite(source_type, source_id, digest, chunks)


def write_records(
    engine: ChunkStore,
    conn: sa.Connection,
    records: Sequence[RecordWrite],
    vectors: Mapping[int, Mapping[str, bytes]] | None = None,
) -> int:
    """Write records (every chunk embedded), dropping chunks a shorter new text no longer has.

    ``vectors``: the chunks' vectors computed beforehand (``Engine.embed_texts``);
    without them the upsert embeds in the database.
    """
    count = engine.upsert_chunks(conn, [c for r in records for c in r.chunks], vectors)
    engine.trim_chunks(conn, [(r.source_type, r.source_id, len(r.chunks)) for r in records])
    return count
