"""What a search returns: the records shown, ranked, and the figures of the search that found them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oracle_rag.engines import Hit
from oracle_rag.engines.indexed_columns import NO_VALUES, by_facet
from oracle_rag.sources.meanings import anchor_of

MAX_K = 100  # the most records one search returns


@dataclass(frozen=True)
class RetrievedChunk:
    source_type: str
    source_id: str
    content: str
    score: float
    rank: int
    legs: tuple[str, ...]
    chunk_id: int
    distance: float | None = None
    keyword_score: float | None = None
    owner_id: int | None = None
    # The record's indexed facets (engines/indexed_columns.py) by name, None where it has no value.
    indexed: dict[str, int | None] = field(default_factory=lambda: by_facet(NO_VALUES))
    chunk_no: int = 0
    facets: dict[str, Any] = field(default_factory=dict)

    @property
    def anchor(self) -> str:
        return anchor_of(self.source_type, str(self.source_id))


@dataclass
class SearchStats:
    mode: str
    k: int
    latency_ms: float
    legs: dict[str, int] = field(default_factory=dict)


def ranked(hits: list[Hit], leg: str) -> list[RetrievedChunk]:
    """One leg's hits as the records shown, in its order (semantic or keyword mode: no fusion)."""
    return [
        RetrievedChunk(
            h.source_type,
            h.source_id,
            h.content,
            h.score,
            rank,
            (leg,),
            h.chunk_id,
            h.score if leg == "semantic" else None,
            h.score if leg == "keyword" else None,
            h.owner_id,
            by_facet(h.indexed),
            h.chunk_no,
            h.facets,
        )
        for rank, h in enumerate(hits, 1)
    ]
