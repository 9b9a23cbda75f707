"""Hybrid search: both legs, fused, and the fused top k shown with their text, the scope re-checked in SQL.

The legs fetch keys and scores only (``hybrid_depth`` records each); fusion
(search/fusion.py) ranks the records, and one statement fetches the text of
the k shown, re-applying the scope (:func:`shown_with_text`). On the embedded
engine the legs come from the in-process indexes, which apply the same scope
as masks (:func:`hybrid`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from oracle_rag import tracing
from oracle_rag.config import Settings
from oracle_rag.engines import Engine, Filters, Hit, KeywordHits, Scope, SemanticHits, Where
from oracle_rag.search.fusion import fusion_for
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
    engine: Engine,
    conn: Any,
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


# Hybrid's semantic leg: (k, filters, proposed) -> hits. ``proposed``: the
# engine may answer from its in-process index without a SQL re-check (None
# when it cannot); otherwise the checked leg, without text.
SemanticLeg = Callable[[int, Filters, bool], "list[Hit] | None"]


def hybrid(
    engine: Engine,
    conn: Any,
    settings: Settings,
    semantic: SemanticLeg,
    query: str,
    k: int,
    scope: Scope,
    filters: Filters,
    where: Where | None = None,
) -> tuple[list[RetrievedChunk], dict[str, list[Hit]]]:
    """Both legs, fused (:func:`rrf`), the fused top k with their text; and the legs.

    With the embedded engine's in-process indexes the legs are proposals: no
    SQL re-checks their ``hybrid_depth`` candidates each (that was ~80 % of
    hybrid's time); the scope is re-applied in SQL to the k records shown
    (:func:`shown_with_text`), as it is to every record shown anyway. The
    indexes apply the same scope and filters as masks, so the legs are the
    ones SQL would give; if the re-check finds a shown record gone, hidden or
    changed, the indexes are repaired and the checked legs run (the refill:
    no hidden record shows, the ranks close up, still k records when k are
    visible). A ``where`` fragment has no in-process form: checked legs.
    """
    fetch = min(max(k, settings.hybrid_depth), 4 * MAX_K)
    semantic_filters = semantic_leg_filters(settings, filters)
    attempts = [True, False] if where is None else [False]
    for proposed in attempts:
        raw: dict[str, list[Hit]] = {}
        with leg_span("semantic", fetch) as leg:
            found = semantic(fetch, semantic_filters, proposed)
            leg.set_attribute("oracle_rag.search.hits", len(found or []))
        if found is None:
            continue
        raw["semantic"] = found
        with leg_span("keyword", fetch) as leg:
            keyword: list[Hit] | None = (
                engine.propose_keyword(conn, query, fetch, scope, filters)
                if proposed
                else engine.keyword_search(conn, query, fetch, scope, filters, where, text=False)
            )
            leg.set_attribute("oracle_rag.search.hits", len(keyword or []))
        if keyword is None:
            continue
        raw["keyword"] = keyword
        fusion = fusion_for(raw, settings)
        if isinstance(found, SemanticHits) and found.runs and found.settle is not None:
            # Near ties left open by the index: SQL orders those that can change the fused top k.
            needed = fusion.runs_that_matter(found.runs, k)
            if needed:
                settled = found.settle(needed)
                if settled is None:
                    continue
                raw["semantic"] = settled
                fusion = fusion_for(raw, settings)
        with tracing.span(
            "fusion", {"oracle_rag.fusion.method": settings.hybrid_fusion.lower(), "oracle_rag.fusion.k": k}
        ) as fused:
            result, complete = shown_with_text(
                engine, conn, fusion.top(k), raw, scope, filters, where, semantic_filters.first_chunk
            )
            fused.set_attribute("oracle_rag.search.hits", len(result))
        if complete or not proposed:
            return result, raw
        engine.reject_proposals(raw)
    raise AssertionError("the checked legs always answer")  # pragma: no cover


def leg_span(leg: str, k: int) -> Any:
    """The span of one search leg (the query's embedding, where it runs here, is its child)."""
    return tracing.span(f"search {leg}", {"oracle_rag.search.leg": leg, "oracle_rag.search.k": k})
