"""An in-process BM25 index for the embedded engine, kept in step like the vector cache.

Why: BM25 over the caller's visible set needs every visible posting of the
query terms (the document frequencies are counted from them); read from
SQLite row by row that costs ~10x a numpy scan at 100k records. This index
mirrors RAG_CHUNK_TERM (the postings) and, per record, the scope and filter
columns and the length (TERM_COUNT of chunk 0), as numpy arrays. A search
applies the scope and the filters as a boolean mask first and computes N,
the average length and the document frequencies over that mask only, then
the scores (text/bm25.py, the same floating-point operations in the same order
as the SQL path, so the same ranking).

SQL stays the source of truth: the engine re-reads the best records in SQL
with the scope and filters (``KEYWORD_PASSAGES``); a record SQL drops, or
whose length differs from the index's, means the index was wrong: it is
repaired and the query answered by the SQL path.

Staying in step: the RAG_CHUNK_LOG triggers (migration V5) log every write
of RAG_CHUNK; a record's postings only ever change together with its chunk
0 row in one transaction (upsert, analysis, re-scope), so the log announces
every change. The sync machinery (own connection, fresh snapshot, gap and
file-replacement detection, full reload) is the vector cache's; only what is
loaded differs. Changed records get a new slot and their postings go to a
small delta; the old slot is masked out. When the delta or the dead slots
grow past a quarter of the index, the next sync reloads it in full.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oracle_rag.engines import engine_sql as q
from oracle_rag.engines.access_mask import AccessSlots
from oracle_rag.engines.indexed_columns import INDEXED_COLUMNS
from oracle_rag.engines.records import Filters, Scope
from oracle_rag.engines.sqlite.vector_cache import (
    ID_BATCH,
    ROW_INDEXED,
    Unusable,
    VectorCache,
    filterable,
    indexed_mask,
    int_or_null,
    record_rows,
    sqlite_text,
)
from oracle_rag.text.bm25 import RANK_DECIMALS


@dataclass(frozen=True)
class TermHits:
    """What the index found: the visible set's statistics and the best records."""

    n: int
    total_length: int
    best: list[tuple[int, float]]  # (chunk 0 id, score), best first
    lengths: dict[int, int]  # record length per id in ``best`` (re-checked in SQL)
    weights: dict[str, float]  # idf per query term present in the visible set
    # per record of ``best``, in its order: (CHUNK_ID, SOURCE_TYPE, SOURCE_ID, score, OWNER_ID, (the
    # indexed facet columns), CHUNK_NO = 0), None for NULL (records.key_hits)
    rows: list[tuple[Any, ...]] = field(default_factory=list)


class TermIndex(VectorCache):
    """Postings and per-record columns; the sync logic is inherited from :class:`VectorCache`."""

    def _clear(self) -> None:
        self.loaded = False
        self.position = 0
        self.unusable: str | None = None
        self._file_id: tuple[int, int] | None = None
        self._n = 0
        self._slot: dict[int, int] = {}
        self._types: dict[str, int] = {}
        self._ids = np.zeros(0, dtype=np.int64)
        self._owner = np.zeros(0, dtype=np.int64)
        self._indexed = [np.zeros(0, dtype=np.int64) for _ in INDEXED_COLUMNS]
        self._type = np.zeros(0, dtype=np.int32)
        self._length = np.zeros(0, dtype=np.float64)
        self._live = np.zeros(0, dtype=bool)
        self._source_id = np.zeros(0, dtype=object)
        self._access = AccessSlots()
        self._failed: frozenset[str] = frozenset()
        self._base: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._base_postings = 0
        self._delta: dict[str, list[tuple[int, int]]] = {}
        self._delta_postings = 0
        self._dead = 0

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return (
            self._ids,
            self._owner,
            *self._indexed,
            self._type,
            self._length,
            self._live,
            self._source_id,
        )

    @property
    def nbytes(self) -> int:
        arrays = sum(a.nbytes for a in self._arrays())
        return int(
            arrays + sum(s.nbytes + t.nbytes for s, t in self._base.values()) + 16 * self._delta_postings
        )

    def _grow(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        new = max(needed, capacity + capacity // 4 + 1024)
        grown = []
        for a in self._arrays():
            b = np.zeros(new, dtype=a.dtype)
            b[: len(a)] = a
            grown.append(b)
        self._ids, self._owner = grown[:2]
        self._indexed = grown[2 : 2 + len(INDEXED_COLUMNS)]
        (self._type, self._length, self._live, self._source_id) = grown[2 + len(INDEXED_COLUMNS) :]
        self._access.grow(new)

    def _add_records(self, rows: Sequence[Any]) -> None:
        """New slots for records (CHUNK_ID, SOURCE_TYPE, OWNER_ID, the two indexed facet columns,
        TERM_COUNT, ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS, SOURCE_ID): engine_sql.TERM_RECORDS."""
        self._grow(self._n + len(rows))
        for r in rows:
            slot = self._n
            self._n += 1
            if not isinstance(r[1], str):
                raise Unusable("a non-text SOURCE_TYPE")
            self._slot[int(r[0])] = slot
            self._ids[slot] = int(r[0])
            self._owner[slot] = int_or_null(r[2])
            for column, value in zip(self._indexed, r[ROW_INDEXED], strict=True):
                column[slot] = int_or_null(value)
            self._type[slot] = self._types.setdefault(r[1], len(self._types))
            self._length[slot] = float(int(r[5]))
            self._source_id[slot] = str(r[9])
            self._access.set(slot, int_or_null(r[6]), r[7], r[8])
            self._live[slot] = True

    # -- loading (called by the inherited sync with the lock held) ----------------
    def _read_all(self, conn: Any, position: int) -> None:
        cursor = conn.execute(sqlite_text(q.TERM_RECORDS))
        while batch := cursor.fetchmany(5000):
            self._add_records(batch)
        lookup = np.full(int(self._ids[: self._n].max(initial=0)) + 1, -1, dtype=np.int32)
        lookup[self._ids[: self._n]] = np.arange(self._n, dtype=np.int32)
        cursor = conn.execute(sqlite_text(q.TERM_POSTINGS))
        while batch := cursor.fetchmany(5000):
            for term, ids, tfs in batch:
                cids = np.fromstring(ids, dtype=np.int64, sep=",")
                freq = np.fromstring(str(tfs), dtype=np.int32, sep=",")
                inside = cids < len(lookup)
                slots = np.where(inside, lookup[np.where(inside, cids, 0)], -1)
                keep = slots >= 0  # postings of a chunk that is not an analysed chunk 0: ignored
                self._base[str(term)] = (slots[keep].astype(np.int32), freq[keep])
                self._base_postings += int(keep.sum())

    def _apply(self, conn: Any, chunk_ids: Sequence[int]) -> None:
        for start in range(0, len(chunk_ids), ID_BATCH):
            part = [int(i) for i in chunk_ids[start : start + ID_BATCH]]
            for chunk_id in part:  # every logged chunk loses its slot; records still there come back
                slot = self._slot.pop(chunk_id, None)
                if slot is not None:
                    self._live[slot] = False
                    self._access.clear(slot)
                    self._dead += 1
            ids = json.dumps(part)
            records = conn.execute(sqlite_text(q.TERM_RECORDS_BY_ID), {"ids": ids}).fetchall()
            self._add_records(records)
            present = {int(r[0]) for r in records}
            for term, chunk_id, tf in conn.execute(sqlite_text(q.TERM_POSTINGS_BY_ID), {"ids": ids}):
                if int(chunk_id) in present:
                    self._delta.setdefault(str(term), []).append((self._slot[int(chunk_id)], int(tf)))
                    self._delta_postings += 1
        if self._delta_postings > max(50_000, self._base_postings // 4) or self._dead > max(
            1000, self._n // 4
        ):
            self.loaded = False  # the next sync reloads in full

    # -- searching -------------------------------------------------------------------
    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        slots, tfs = self._base.get(term, (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)))
        extra = self._delta.get(term)
        if extra:
            more = np.asarray(extra, dtype=np.int64)
            slots = np.concatenate([slots, more[:, 0].astype(np.int32)])
            tfs = np.concatenate([tfs, more[:, 1].astype(np.int32)])
        return slots, tfs

    def search(
        self, terms: Mapping[str, int], k: int, scope: Scope, filters: Filters, k1: float, b: float
    ) -> TermHits | None:
        """BM25 over the records ``scope`` and ``filters`` let through; ``None``: use SQL."""
        if not filterable(scope, filters):
            return None
        with self._lock:
            if not self.loaded or self.unusable:
                return None
            n_slots = self._n
            mask = self._live[:n_slots] & self._access.visible(
                n_slots, scope, self._type, self._types, self._failed
            )
            mask = indexed_mask(mask, self._indexed, n_slots, filters)
            if filters.source_types:
                codes = [self._types[t] for t in filters.source_types if t in self._types]
                mask &= np.isin(self._type[:n_slots], np.asarray(codes, dtype=np.int32))
            lengths = self._length[:n_slots]
            # The visible slots' positions, then their lengths: a boolean selection (and bool.sum) cost
            # 2-3x more when the visible slots are scattered (a caller in groups) rather than adjacent
            # (an owner's records, loaded in ACCESS_OWNER order). Same values, same order: same sum.
            seen = np.flatnonzero(mask)
            n = len(seen)
            total = int(lengths.take(seen).sum())
            avgdl = total / n if n else 1.0
            scores = np.zeros(n_slots, dtype=np.float64)
            touched: list[bool] = []
            weights: dict[str, float] = {}
            for term in sorted(terms):  # the order bm25.score sums in
                slots, tfs = self._postings(term)
                if len(slots) == 0:
                    continue
                visible = np.flatnonzero(
                    mask[slots]
                )  # positions, taken twice: cheaper than two boolean selections
                if len(visible) == 0:
                    continue
                slots = slots[visible]
                tf = tfs[visible].astype(np.float64)
                weights[term] = math.log(1.0 + (n - len(slots) + 0.5) / (len(slots) + 0.5))
                w = terms[term] * weights[term]
                if w == 0.0:
                    continue
                scores[slots] += w * tf / (tf + k1 * (1.0 - b + b * lengths[slots] / avgdl))
                touched.append(True)
            if not touched:
                return TermHits(n, total, [], {}, weights)
            cand = np.flatnonzero(scores)
            values = scores[cand]
            ranked = np.round(values, RANK_DECIMALS)  # bm25.top's order: rounded score, then id
            if len(cand) > k:
                kth = np.partition(-ranked, k - 1)[k - 1]
                keep = -ranked <= kth
                cand, values, ranked = cand[keep], values[keep], ranked[keep]
            ids = self._ids[cand]
            order = np.lexsort((ids, -ranked))[:k]
            best = [(int(ids[i]), float(values[i])) for i in order]
            found_lengths = {int(ids[i]): int(lengths[cand[i]]) for i in order}
            rows = record_rows(
                cand[order],
                self._ids,
                self._types,
                self._type,
                self._source_id,
                [value for _, value in best],
                self._owner,
                self._indexed,
            )
        return TermHits(n, total, best, found_lengths, weights, rows)
