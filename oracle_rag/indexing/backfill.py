"""Enqueue the entities the index does not cover yet.

Run on start-up (``backfill_on_startup``) and as ``oracle-rag backfill``.
It only enqueues: the worker does the embedding, so a server starting with
an empty index serves requests immediately and fills the index behind.
``all_entities=True`` enqueues every entity; unchanged text then costs a
hash comparison, not an embedding. Entities with an UPSERT already queued
are skipped in both modes, so running backfill twice adds nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from oracle_rag.engines.roles import QueueStore
from oracle_rag.sources import SourceRegistry

Progress = Callable[[str, int, int], None]


@dataclass
class BackfillReport:
    enqueued: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.enqueued.values())


def backfill(
    engine: QueueStore,
    sources: SourceRegistry,
    *,
    all_entities: bool = False,
    progress: Progress | None = None,
    batch: int = 1000,
) -> BackfillReport:
    report = BackfillReport()
    for source in sources:
        with engine.connect() as conn:
            ids = source.all_ids(conn)
            # An entity with an UPSERT already queued is covered either way:
            # re-running backfill (with or without --all) never piles up rows.
            covered = engine.queued_ids(conn, source.SOURCE_TYPE)
            if not all_entities:
                covered |= engine.chunk_ids(conn, source.SOURCE_TYPE)
            ids = [i for i in ids if i not in covered]
        done = 0
        for start in range(0, len(ids), batch):
            part = ids[start : start + batch]
            with engine.begin() as conn:
                engine.enqueue_many(conn, [(source.SOURCE_TYPE, i, "UPSERT") for i in part])
            done += len(part)
            if progress:
                progress(source.SOURCE_TYPE, done, len(ids))
        report.enqueued[source.SOURCE_TYPE] = len(ids)
        if progress and not ids:
            progress(source.SOURCE_TYPE, 0, 0)
    return report
