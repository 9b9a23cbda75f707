"""Fusion of hybrid's two legs: Reciprocal Rank Fusion, or their scores standardised and combined.

Both rank records (a leg lists each record once) and show the hit of the leg
that ranked a record best. With the embedded engine's in-process index the
semantic leg may hold runs of near ties whose order SQL settles; each fusion
says which runs can change its top k (``runs_that_matter``), so only those are settled.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from oracle_rag.config import Settings
from oracle_rag.engines import Hit, Run
from oracle_rag.engines.indexed_columns import by_facet
from oracle_rag.engines.records import one_per_record
from oracle_rag.search.results import RetrievedChunk

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
                by_facet(hit.indexed),
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


# How far a distance the in-process index proposes may lie from SQL's (its near
# ties, engines/sqlite/engine.py), with room: score fusion bounds a near tie's fused score by its run's
# distances widened by this.
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
        super().__init__({leg: one_per_record(hits) for leg, hits in legs.items()}, 0, {})

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
                by_facet(hit.indexed),
                hit.chunk_no,
                hit.facets,
            )
        )
    return out
