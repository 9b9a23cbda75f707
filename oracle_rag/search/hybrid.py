"""Hybrid search: both legs, fused, and the fused top k shown with their text, the scope re-checked in SQL.

The legs fetch keys and scores only (``hybrid_depth`` records each); fusion
(search/fusion.py) ranks the records, and one statement fetches the text of
the k shown, re-applying the scope (:func:`shown_with_text`). On the embedded
engine the legs come from the in-process indexes, which apply the same scope
as masks (:func:`hybrid`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa

from oracle_rag import tracing
from oracle_rag.config import Settings
from oracle_rag.engines import Filters, Hit, KeywordHits, Scope, SemanticHits, Where
from oracle_rag.engines.roles import CandidateIndex, Searcher, candidate_index
from oracle_rag.search.fusion import Fusion, fusion_for
from oracle_rag.search.results import MAX_K, RetrievedChunk


def semantic_leg_filters(settings: Settings, filters: Filters) -> Filters:
    """The filters of hybrid's semantic leg: by default each record's first chunk only.

    Why: fusion ranks records, and the keyword leg scores each record once,
    as a whole. Ranking a record by its nearest chunk (semantic mode) gives a
    record of n chunks the best of n draws of nearly the same text (windows
    overlap, the last one is full), which lifts long records for no reason
    of relevance; its first window is the one vector a single-vector
    retriever has for it, so with ``FIRST`` hybrid is by construction the
    Reciprocal Rank Fusion of the same two record lists the quality baseline
    fuses (BM25 over the record, the record as the model reads it). On
    Cranfield, nearest-chunk fusion was 0.4068 nDCG@10 against that
    baseline's 0.4087, first-window fusion 0.4089 (docs/retrieval.md).
    ``NEAREST`` fuses semantic mode's list instead (a fact deep in a long
    record can then rank it through the semantic leg too).
    """
    return replace(filters, first_chunk=True) if settings.hybrid_semantic_chunk == "FIRST" else filters


def shown_with_text(
    engine: Searcher,
    conn: sa.Connection,
    fused: list[RetrievedChunk],
    legs: dict[str, list[Hit]],
    scope: Scope,
    filters: Filters,
    where: Where | None,
    keyword_passages: bool = False,
) -> tuple[list[RetrievedChunk], bool]:
    """The fused top k with their text, fetched for them alone (the legs fetched none).

    Also returns whether SQL found every record shown as the legs had it
    (``fused``: :func:`rrf` of ``legs``). Both re-apply the scope in SQL: a
    record deleted or hidden since the legs ran is dropped and the ranks close up.

    False when a record was dropped (gone, or not visible to ``scope``) or,
    for a keyword leg proposed by an in-process index, its length differs.
    ``keyword_passages``: every record the keyword leg found shows its keyword
    passage, whichever leg ranked it better. Hybrid sets it when its semantic
    leg ranks records by their first window (``hybrid_semantic_chunk`` =
    ``FIRST``): that chunk says which record, not where in it the answer is,
    and the passage with the question's words does (a long record then opens
    at the comment asked about, not at its start).
    """
    keyword = legs.get("keyword")
    if keyword_passages:

        def from_keyword(
            c: RetrievedChunk,
        ) -> bool:  # ``fused`` is rrf of ``legs``: its legs say which found it
            return "keyword" in c.legs
    else:
        keyword_rank = {(h.source_type, h.source_id): r for r, h in enumerate(keyword or [], 1)}
        semantic_rank = {(h.source_type, h.source_id): r for r, h in enumerate(legs.get("semantic", []), 1)}

        def from_keyword(c: RetrievedChunk) -> bool:  # rrf keeps the hit of the leg with the better rank
            key = (c.source_type, c.source_id)
            return key in keyword_rank and keyword_rank[key] < semantic_rank.get(key, float("inf"))

    best: list[tuple[int, float]] = []
    terms: dict[str, int] = {}
    weights: dict[str, float] = {}
    lengths: dict[int, int] | None = None
    if isinstance(keyword, KeywordHits):
        best = [(c.chunk_id, c.keyword_score or 0.0) for c in fused if from_keyword(c)]
        terms, weights, lengths = keyword.terms, keyword.weights, keyword.lengths
    wanted = [c.chunk_id for c in fused if not c.content and not from_keyword(c)]
    # One statement for both (Engine.shown_chunks): the passages and the other chunks' texts.
    texts, found, complete = engine.shown_chunks(
        conn, wanted, best, terms, weights, scope, filters, where, lengths
    )
    passages = {(h.source_type, h.source_id): h for h in found}
    out: list[RetrievedChunk] = []
    for c in fused:
        key = (c.source_type, c.source_id)
        if key in passages:
            h = passages[key]
            c = replace(
                c,
                content=h.content,
                chunk_id=h.chunk_id,
                chunk_no=h.chunk_no,
                facets=h.facets,
                rank=len(out) + 1,
            )
        elif c.chunk_id in texts:
            content, facets = texts[c.chunk_id]
            c = replace(c, content=content, facets=facets, rank=len(out) + 1)
        elif not c.content:
            complete = False
            continue  # gone or hidden since the legs ran
        else:
            c = replace(c, rank=len(out) + 1)
        out.append(c)
    return out, complete


@dataclass(frozen=True)
class SemanticLeg:
    """Hybrid's semantic leg for one query, both ways it can run.

    ``checked(n, filters)``: the ``n`` nearest records in SQL (keys and
    distances, no text). ``proposed(index, n, filters)``: the same from the
    engine's candidate index alone (None when the index cannot answer). The
    retriever runs both on the question's text; a bench passes a vector
    embedded beforehand.
    """

    checked: Callable[[int, Filters], list[Hit]]
    proposed: Callable[[CandidateIndex, int, Filters], SemanticHits | None]


Legs = dict[str, list[Hit]]


def hybrid(
    engine: Searcher,
    conn: sa.Connection,
    settings: Settings,
    semantic: SemanticLeg,
    query: str,
    k: int,
    scope: Scope,
    filters: Filters,
    where: Where | None = None,
) -> tuple[list[RetrievedChunk], Legs]:
    """Both legs, fused (search/fusion.py), the fused top k with their text; and the legs.

    With the embedded engine's in-process indexes (a :class:`CandidateIndex`)
    the legs are proposals: no SQL re-checks their ``hybrid_depth`` candidates
    each (that was ~80 % of hybrid's time); the scope is re-applied in SQL to
    the k records shown (:func:`shown_with_text`), as it is to every record
    shown anyway. The indexes apply the same scope and filters as masks, so
    the legs are the ones SQL would give; if the re-check finds a shown record
    gone, hidden or changed, the indexes are repaired and the checked legs run
    (the refill: no hidden record shows, the ranks close up, still k records
    when k are visible). A ``where`` fragment has no in-process form: checked legs.
    """
    fetch = min(max(k, settings.hybrid_depth), 4 * MAX_K)
    semantic_filters = semantic_leg_filters(settings, filters)
    search = _Hybrid(
        engine, conn, settings, semantic, query, k, fetch, scope, filters, semantic_filters, where
    )
    index = candidate_index(engine)
    if index is not None and where is None:
        proposed = search.from_proposals(index)
        if proposed is not None:
            return proposed
    legs = search.checked_legs()
    return search.shown(legs, fusion_for(legs, settings))[0], legs


@dataclass(frozen=True)
class _Hybrid:
    """One hybrid search: its legs, checked or proposed, and the fused top k shown."""

    engine: Searcher
    conn: sa.Connection
    settings: Settings
    semantic: SemanticLeg
    query: str
    k: int
    fetch: int  # each leg's depth: more than k, so fusion has room to reorder
    scope: Scope
    filters: Filters
    semantic_filters: Filters  # semantic_leg_filters
    where: Where | None

    def checked_legs(self) -> Legs:
        """Both legs in SQL, the scope and ``where`` applied before each leg's top list."""
        with leg_span("semantic", self.fetch) as leg:
            semantic = self.semantic.checked(self.fetch, self.semantic_filters)
            leg.set_attribute("oracle_rag.search.hits", len(semantic))
        with leg_span("keyword", self.fetch) as leg:
            keyword = self.engine.keyword_search(
                self.conn, self.query, self.fetch, self.scope, self.filters, self.where, text=False
            )
            leg.set_attribute("oracle_rag.search.hits", len(keyword))
        return {"semantic": semantic, "keyword": keyword}

    def from_proposals(self, index: CandidateIndex) -> tuple[list[RetrievedChunk], Legs] | None:
        """The result from ``index``'s legs, or None when the checked legs must run instead.

        None when the index cannot propose a leg, when SQL disagrees on a near
        tie it settles, or when the records shown are not all as proposed (the
        index's entries are then repaired first).
        """
        with leg_span("semantic", self.fetch) as leg:
            semantic = self.semantic.proposed(index, self.fetch, self.semantic_filters)
            leg.set_attribute("oracle_rag.search.hits", len(semantic or []))
        if semantic is None:
            return None
        with leg_span("keyword", self.fetch) as leg:
            keyword = index.propose_keyword(self.conn, self.query, self.fetch, self.scope, self.filters)
            leg.set_attribute("oracle_rag.search.hits", len(keyword or []))
        if keyword is None:
            return None
        legs: Legs = {"semantic": semantic, "keyword": keyword}
        fusion = fusion_for(legs, self.settings)
        if semantic.runs:
            # Near ties left open by the index: SQL orders those that can change the fused top k.
            needed = fusion.runs_that_matter(semantic.runs, self.k)
            if needed:
                settled = semantic.settle(needed)
                if settled is None:
                    return None
                legs["semantic"] = settled
                fusion = fusion_for(legs, self.settings)
        result, complete = self.shown(legs, fusion)
        if complete:
            return result, legs
        index.reject_proposals(legs)
        return None

    def shown(self, legs: Legs, fusion: Fusion) -> tuple[list[RetrievedChunk], bool]:
        """The fused top k with their text (:func:`shown_with_text`), in the fusion span."""
        with tracing.span(
            "fusion",
            {"oracle_rag.fusion.method": self.settings.hybrid_fusion.lower(), "oracle_rag.fusion.k": self.k},
        ) as fused:
            result, complete = shown_with_text(
                self.engine,
                self.conn,
                fusion.top(self.k),
                legs,
                self.scope,
                self.filters,
                self.where,
                self.semantic_filters.first_chunk,
            )
            fused.set_attribute("oracle_rag.search.hits", len(result))
        return result, complete


def leg_span(leg: str, k: int) -> Any:
    """The span of one search leg (the query's embedding, where it runs here, is its child)."""
    return tracing.span(f"search {leg}", {"oracle_rag.search.leg": leg, "oracle_rag.search.k": k})
