"""Role-scoped semantic, keyword and hybrid retrieval.

The scope predicate is part of every search statement (engines/*_sql.py),
applied before the top-k, so a developer's search returns k rows whenever
k are visible and can never return a row they may not see, whatever the
query or the model says. Hybrid search fuses the two legs (Reciprocal Rank
Fusion, or their scores standardised and combined: ``hybrid_fusion``);
each leg fetches more than k so fusion has room to reorder.
On the embedded engine the legs come from the in-process indexes (the same
scope as masks) and SQL re-checks the k records shown (:func:`hybrid`).
"""

from __future__ import annotations

import heapq
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from oracle_rag import tracing
from oracle_rag.callers.caller import Caller, require_caller
from oracle_rag.config import Settings
from oracle_rag.engines import (
    Engine,
    Filters,
    Hit,
    KeywordHits,
    Run,
    Scope,
    SemanticHits,
    Where,
    embed_text,
)
from oracle_rag.errors import InputError
from oracle_rag.sources.meanings import anchor_of

MODES = ("semantic", "keyword", "hybrid")
MAX_K = 100


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
    project_id: int | None = None
    sprint_id: int | None = None
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


_SURROGATE = re.compile("[\ud800-\udfff]")


def validate_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer in [1, {MAX_K}], got {k!r}")
    return k


def clean_query(query: Any, max_chars: int) -> str:
    if not isinstance(query, str):
        raise InputError("query must be a string")
    text = query.replace("\x00", " ").strip()
    if _SURROGATE.search(
        text
    ):  # cannot be stored or embedded as UTF-8 (JSON "\\ud800", surrogateescape argv)
        raise InputError("query is not valid Unicode text (it holds a lone surrogate)")
    if not text:
        raise InputError("query is empty")
    if len(text) > max_chars:
        raise InputError(f"query is {len(text)} characters; the limit is {max_chars} (max_question_chars)")
    return text


Key = tuple[str, str]


class Fusion:
    """Reciprocal Rank Fusion of some legs: each record's score, and what its top k shows (:meth:`top`).

    The scores are summed per record over the legs in their order (the
    float operations of the definition); everything else a shown record
    carries (its best rank and hit, its legs, distance and keyword score) is
    looked up for the few records that can be among the k best only: hybrid
    fuses two 100-deep legs into ~8, and building those for every record
    cost more than the scores.
    """

    def __init__(self, legs: dict[str, list[Hit]], rrf_k: int, weights: dict[str, float]) -> None:
        self.legs = legs
        self.rrf_k = rrf_k
        self.weights = weights
        self.keys = {leg: [(h.source_type, h.source_id) for h in hits] for leg, hits in legs.items()}
        self.position = {
            leg: dict(zip(keys, range(len(keys)), strict=True)) for leg, keys in self.keys.items()
        }
        # A leg that lists a record twice (legs list each once): the definition's loop, as it stands.
        self.simple = all(len(self.position[leg]) == len(keys) for leg, keys in self.keys.items())
        self.scores = self._scores()

    def _scores(self) -> dict[Key, float]:
        """Each record's fused score: the sum over the legs of weight / (rrf_k + rank)."""
        scores: dict[Key, float] = {}
        for leg, keys in self.keys.items():
            weight = self.weights.get(leg, 1.0)
            get = scores.get
            for rank, key in enumerate(keys, 1):
                scores[key] = get(key, 0.0) + weight / (self.rrf_k + rank)
        return scores

    def top(self, k: int) -> list[RetrievedChunk]:
        """The k best records: score, then the better best rank, then the lower chunk id."""
        if not self.simple:
            return _rrf_by_definition(self.legs, k, self.rrf_k, self.weights)
        scores = self.scores
        if len(scores) > k:  # the k-th best score: no record below it can be shown
            floor = heapq.nlargest(k, scores.values())[-1]
            contenders = [key for key, score in scores.items() if score >= floor]
        else:
            contenders = list(scores)
        shown = []
        for key in contenders:
            best: tuple[int, Hit] | None = None
            found: list[str] = []
            dist = kw = None
            for leg, position in self.position.items():
                i = position.get(key)
                if i is None:
                    continue
                hit = self.legs[leg][i]
                found.append(leg)
                if best is None or i + 1 < best[0]:
                    best = (i + 1, hit)
                if leg == "semantic":
                    dist = hit.score
                else:
                    kw = hit.score
            assert best is not None
            shown.append((-scores[key], best[0], best[1].chunk_id, best[1], found, dist, kw, scores[key]))
        shown.sort(key=lambda row: row[:3])
        return [
            RetrievedChunk(
                hit.source_type,
                hit.source_id,
                hit.content,
                score,
                rank,
                tuple(found),
                hit.chunk_id,
                dist,
                kw,
                hit.owner_id,
                hit.project_id,
                hit.sprint_id,
                hit.chunk_no,
                hit.facets,
            )
            for rank, (_, _, _, hit, found, dist, kw, score) in enumerate(shown[:k], 1)
        ]

    def runs_that_matter(self, runs: Sequence[Run], k: int) -> list[Run]:
        """The open runs of the semantic leg (:class:`SemanticHits`) whose order can change :meth:`top`.

        Whatever a run's order, each of its records has a semantic rank in
        the run's positions, so its fused score lies between its score at
        the run's last position (``low``) and at its first (``high``),
        computed with the same float operations in the same order (both
        monotonic: weights are never negative). At least k records score at
        least the k-th largest ``low``; a record whose ``high`` is below it
        is below those k whatever the order, and so is every record of a run
        whose records all are: that run cannot change the top k (its
        records, order, scores or chunks).
        """
        if not runs:
            return []
        if len(self.scores) <= k or not self.simple:
            return list(runs)  # every record is shown
        place = {i: (a + 1, b) for a, b in runs for i in range(a, b)}  # position -> (best rank, worst rank)
        semantic = self.keys["semantic"]
        low = dict(self.scores)
        high: dict[Key, float] = {}
        for i in place:
            key = semantic[i]
            lo = hi = 0.0
            for leg, position in self.position.items():
                j = position.get(key)
                if j is None:
                    continue
                weight = self.weights.get(leg, 1.0)
                best, worst = place[j] if leg == "semantic" else (j + 1, j + 1)
                lo = lo + weight / (self.rrf_k + worst)
                hi = hi + weight / (self.rrf_k + best)
            low[key], high[key] = lo, hi
        floor = heapq.nlargest(k, low.values())[-1]
        return [(a, b) for a, b in runs if any(high[semantic[i]] >= floor for i in range(a, b))]


# How far a distance the in-process index proposes may lie from SQL's (its near ties, engines/sqlite/engine.py),
# with room: score fusion bounds a near tie's fused score by its run's distances widened by this.
DISTANCE_HAIR = 1e-5


class ScoreFusion(Fusion):
    """Score-normalised fusion: each leg's scores standardised over the records it returned (z-scores:
    the semantic leg's distance negated, BM25 as it is), a record a leg did not return scored as that
    leg's lowest, then ``alpha * semantic + (1 - alpha) * keyword``.

    Unlike RRF it keeps how far ahead a leg's best records are (a keyword match that stands out, a
    near-duplicate in the semantic leg), which ranks discard: on Cranfield and the help desk of
    bench/qa_open.py it ranks better than RRF and than either leg (bench/fusion_quality.py). What a
    shown record carries (best rank and hit, legs, distance, keyword score) and the tie rule (the
    better best rank, then the lower chunk id) are :class:`Fusion`'s.
    """

    def __init__(self, legs: dict[str, list[Hit]], alpha: float) -> None:
        self.alpha = alpha
        self.stats: dict[str, tuple[float, float, float]] = {}  # leg -> (mean, spread, lowest z)
        super().__init__({leg: _first_of_each(hits) for leg, hits in legs.items()}, 0, {})

    def _value(self, leg: str, hit: Hit) -> float:
        return -hit.score if leg == "semantic" else hit.score

    def _z(self, leg: str, value: float) -> float:
        mean, spread, _ = self.stats[leg]
        return (value - mean) / spread if spread > 0 else 0.0

    def _scores(self) -> dict[Key, float]:
        shares = {"semantic": self.alpha, "keyword": 1.0 - self.alpha}
        z: dict[str, dict[Key, float]] = {}
        for leg, hits in self.legs.items():
            values = [self._value(leg, h) for h in hits]
            mean = sum(values) / len(values) if values else 0.0
            spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 if values else 0.0
            self.stats[leg] = (mean, spread, 0.0)
            z[leg] = {key: self._z(leg, v) for key, v in zip(self.keys[leg], values, strict=True)}
            self.stats[leg] = (mean, spread, min(z[leg].values(), default=0.0))
        every = {key for keys in self.keys.values() for key in keys}
        return {
            key: sum(shares.get(leg, 0.0) * z[leg].get(key, self.stats[leg][2]) for leg in self.legs)
            for key in every
        }

    def runs_that_matter(self, runs: Sequence[Run], k: int) -> list[Run]:
        """The open runs of the semantic leg whose records can reach the fused top k.

        A record's semantic z-score follows its distance, not its place in the run, so a run's
        order changes nothing but the distances SQL gives its records, each within a hair of the
        run's: its fused score lies between the scores at the run's farthest and nearest distance
        widened by :data:`DISTANCE_HAIR` (``low``, ``high``); a run whose records all stay below the
        k-th largest ``low`` cannot change the top k."""
        if not runs:
            return []
        if len(self.scores) <= k:
            return list(runs)
        semantic = self.keys["semantic"]
        hits = self.legs["semantic"]
        low = dict(self.scores)
        high: dict[Key, float] = {}
        for a, b in runs:
            values = [-hits[i].score for i in range(a, b)]
            worst = self._z("semantic", min(values) - DISTANCE_HAIR)
            best = self._z("semantic", max(values) + DISTANCE_HAIR)
            for i in range(a, b):
                key = semantic[i]
                rest = self.scores[key] - self.alpha * self._z("semantic", -hits[i].score)
                low[key], high[key] = rest + self.alpha * worst, rest + self.alpha * best
        floor = heapq.nlargest(k, low.values())[-1]
        return [(a, b) for a, b in runs if any(high[semantic[i]] >= floor - 1e-9 for i in range(a, b))]


def _first_of_each(hits: list[Hit]) -> list[Hit]:
    """A leg with each record once, at its first (best) hit: a leg lists each record once anyway."""
    seen: set[Key] = set()
    out = []
    for h in hits:
        key = (h.source_type, h.source_id)
        if key not in seen:
            seen.add(key)
            out.append(h)
    return out


def fusion_for(legs: dict[str, list[Hit]], settings: Settings) -> Fusion:
    """Hybrid's fusion as configured (``hybrid_fusion``): RRF or z-scores (``hybrid_alpha``)."""
    if settings.hybrid_fusion == "ZSCORE":
        return ScoreFusion(legs, settings.hybrid_alpha)
    return Fusion(
        legs, settings.rrf_k, {"semantic": settings.semantic_weight, "keyword": settings.keyword_weight}
    )


def rrf(legs: dict[str, list[Hit]], k: int, rrf_k: int, weights: dict[str, float]) -> list[RetrievedChunk]:
    """Reciprocal Rank Fusion over records: score = sum of weight / (rrf_k + rank) over the legs.

    Each leg lists each record once (its best chunk); the fused result shows
    the chunk of the leg that ranked the record best; ties in score go to the
    better best rank, then the lower chunk id (:class:`Fusion`).
    """
    return Fusion(legs, rrf_k, weights).top(k)


def _rrf_by_definition(
    legs: dict[str, list[Hit]], k: int, rrf_k: int, weights: dict[str, float]
) -> list[RetrievedChunk]:
    """:func:`rrf` hit by hit (a leg that lists a record twice counts it twice)."""
    scores: dict[Key, float] = {}
    best: dict[Key, tuple[int, Hit]] = {}
    found: dict[Key, list[str]] = {}
    dist: dict[Key, float] = {}
    kw: dict[Key, float] = {}
    for leg, hits in legs.items():
        for rank, hit in enumerate(hits, 1):
            key = (hit.source_type, hit.source_id)
            scores[key] = scores.get(key, 0.0) + weights.get(leg, 1.0) / (rrf_k + rank)
            found.setdefault(key, []).append(leg)
            if key not in best or rank < best[key][0]:
                best[key] = (rank, hit)
            (dist if leg == "semantic" else kw)[key] = hit.score
    order = sorted(scores, key=lambda key: (-scores[key], best[key][0], best[key][1].chunk_id))[:k]
    out = []
    for rank, key in enumerate(order, 1):
        hit = best[key][1]
        out.append(
            RetrievedChunk(
                hit.source_type,
                hit.source_id,
                hit.content,
                scores[key],
                rank,
                tuple(found[key]),
                hit.chunk_id,
                dist.get(key),
                kw.get(key),
                hit.owner_id,
                hit.project_id,
                hit.sprint_id,
                hit.chunk_no,
                hit.facets,
            )
        )
    return out


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
        with _leg("semantic", fetch) as leg:
            found = semantic(fetch, semantic_filters, proposed)
            leg.set_attribute("oracle_rag.search.hits", len(found or []))
        if found is None:
            continue
        raw["semantic"] = found
        with _leg("keyword", fetch) as leg:
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


def _leg(leg: str, k: int) -> Any:
    """The span of one search leg (the query's embedding, where it runs here, is its child)."""
    return tracing.span(f"search {leg}", {"oracle_rag.search.leg": leg, "oracle_rag.search.k": k})


def _single(hits: list[Hit], leg: str) -> list[RetrievedChunk]:
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
            h.project_id,
            h.sprint_id,
            h.chunk_no,
            h.facets,
        )
        for rank, h in enumerate(hits, 1)
    ]


class Retriever:
    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.last_stats: SearchStats | None = None

    def search(
        self,
        query: str,
        top_k: int | None = None,
        caller: Caller | None = None,
        mode: str = "semantic",
        filters: Filters | None = None,
        *,
        exact: bool = False,
        max_chars: int | None = None,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        """Top-k chunks the caller may see. Refuses a call without a caller.

        ``where`` (see :class:`~oracle_rag.engines.Where`) is an extra SQL
        predicate built by product code (facets, ids, dates), applied inside
        every leg's statement next to the scope predicate, before the top-k.
        """
        who = require_caller(caller)
        k = validate_k(self.settings.top_k if top_k is None else top_k)
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        text = clean_query(query, max_chars or self.settings.max_question_chars)
        filters = filters or Filters()
        scope = who.scope()
        # Oracle's VECTOR_EMBEDDING takes at most 4000 bytes, and a 4000-char
        # question in a multi-byte script is longer; the model reads only 256
        # wordpieces, so the cut (the one chunks get) leaves natural text's vector as is.
        sem_text = embed_text(text)
        started = time.perf_counter()
        with self.engine.connect() as conn:
            if mode == "semantic":
                with _leg("semantic", k) as leg:
                    result = _single(
                        self.engine.semantic_search(conn, sem_text, k, scope, filters, exact, where),
                        "semantic",
                    )
                    leg.set_attribute("oracle_rag.search.hits", len(result))
                legs = {"semantic": len(result)}
            elif mode == "keyword":
                with _leg("keyword", k) as leg:
                    result = _single(
                        self.engine.keyword_search(conn, text, k, scope, filters, where), "keyword"
                    )
                    leg.set_attribute("oracle_rag.search.hits", len(result))
                legs = {"keyword": len(result)}
            else:

                def semantic(n: int, leg_filters: Filters, proposed: bool) -> list[Hit] | None:
                    if proposed:
                        return self.engine.propose_semantic(conn, sem_text, n, scope, leg_filters)
                    return self.engine.semantic_search(
                        conn, sem_text, n, scope, leg_filters, exact, where, text=False
                    )

                result, raw = hybrid(
                    self.engine, conn, self.settings, semantic, text, k, scope, filters, where
                )
                legs = {leg: len(h) for leg, h in raw.items()}
        self.last_stats = SearchStats(mode, k, (time.perf_counter() - started) * 1000, legs)
        return result
