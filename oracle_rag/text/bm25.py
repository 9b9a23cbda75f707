"""One BM25 for both engines: the analyser, the statistics and the score.

Why here and not in the engines: FTS5's ``bm25()`` (k1 = 1.2, an IDF with a
floor, its own tokeniser) and Oracle Text's ``SCORE`` differ from standard
BM25 and from each other, so the same data ranked differently on the two
engines, and both took their collection statistics from every row in the
table, including rows the caller may not see (a leak: the order of one's
own results told how many hidden rows contained a word). Here:

* the **analyser** is fixed and engine-free, the one bm25s uses by default
  plus accent folding: lower-case, fold (NFKD, combining marks removed, so
  "sincronizacion" finds "sincronización" and the other way round),
  tokens ``(?u)\\b\\w\\w+\\b``, the 33 English stopwords of Lucene's
  classic ``StopAnalyzer`` (bm25s' ``"en"`` list), no stemming. Queries and
  records go through the same :func:`analyze`. Records analysed before the
  folding are re-analysed from their stored text by the migration step
  (``Engine.analyse_pending``), without embedding anything;
  The indexer stores each record's analysis (its length and term
  frequencies, RAG_CHUNK.TERM_COUNT and RAG_CHUNK_TERM on chunk 0), so both
  engines hold exactly the same postings;
* the **statistics** -- N, each query term's document frequency and the
  average length -- are computed over the rows the search may return (the
  caller's scope and the search's filters, in SQL or from the in-process
  index that mirrors it), never over the whole table;
* the **score** is Lucene's BM25 (Robertson-Walker tf saturation, the
  Robertson-Sparck Jones IDF with Lucene's ``1 +`` so it is never negative)::

      idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
      score(d) = sum over query tokens t of
                 idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

  A query token repeated in the query counts once per occurrence (as in
  bm25s and Lucene's boolean query). Scores are ranked rounded to
  :data:`RANK_DECIMALS` decimals and ties broken by CHUNK_ID, so a ranking
  is a pure function of the visible rows, the same in SQL on either engine
  and in the in-process index.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from oracle_rag.errors import InputError

# bm25s.stopwords.STOPWORDS_EN (Lucene's classic English stop set).
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
# RAG_CHUNK_TERM.TERM is VARCHAR2(100 CHAR) on Oracle; a longer "word" is cut.
MAX_TERM_CHARS = 100
# Distinct terms of a query that are looked up (the rest are ignored).
MAX_QUERY_TERMS = 64


def fold(text: str) -> str:
    """``text`` lower-cased and without accents: NFKD, then every combining mark dropped.

    NFKD also spells compatibility forms out ("ﬁ" -> "fi", "²" -> "2"), so
    a word is found however it was typed. Marks are dropped before
    tokenising, so a decomposed "o" + U+0301 does not split a word.
    """
    lowered = text.lower()
    if lowered.isascii():
        return lowered
    return "".join(ch for ch in unicodedata.normalize("NFKD", lowered) if not unicodedata.combining(ch))


def analyze(text: str) -> list[str]:
    """The record's (or query's) terms in order: folded (:func:`fold`), stopwords removed."""
    return [t[:MAX_TERM_CHARS] for t in _TOKEN.findall(fold(text)) if t not in STOPWORDS]


@dataclass(frozen=True)
class Analysis:
    """What the indexer stores for a record: its length in terms and each term's frequency."""

    length: int
    terms: tuple[tuple[str, int], ...]


def analyze_record(text: str) -> Analysis:
    tokens = analyze(text)
    return Analysis(len(tokens), tuple(sorted(Counter(tokens).items())))


def query_terms(text: str) -> dict[str, int]:
    """Query term -> how often it occurs in the query (at most :data:`MAX_QUERY_TERMS` terms)."""
    counts: dict[str, int] = {}
    for term in analyze(text):
        if term in counts:
            counts[term] += 1
        elif len(counts) < MAX_QUERY_TERMS:
            counts[term] = 1
    return counts


@dataclass(frozen=True)
class Bm25Params:
    """k1 and b, validated (settings ``bm25_k1``, ``bm25_b``)."""

    k1: float = 1.5
    b: float = 0.75

    def __post_init__(self) -> None:
        if not (0.0 <= self.k1 <= 3.0) or not (0.0 <= self.b <= 1.0):
            raise InputError(f"BM25 needs 0 <= k1 <= 3 and 0 <= b <= 1, got k1={self.k1}, b={self.b}")


def idf(n: int, df: int) -> float:
    """Lucene's BM25 IDF over ``n`` visible records of which ``df`` contain the term."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Stats:
    """Collection statistics of the visible set."""

    n: int
    total_length: int

    @property
    def avgdl(self) -> float:
        return self.total_length / self.n if self.n else 0.0


def score(
    stats: Stats, query: Mapping[str, int], postings: Iterable[tuple[int, str, int, int]], params: Bm25Params
) -> dict[int, float]:
    """Scores per record id from its postings ``(id, term, tf, length)`` over the visible set.

    ``postings`` must hold every visible posting of the query terms: the
    document frequencies are counted from them.
    """
    by_term: dict[str, list[tuple[int, int, int]]] = {}
    for rid, term, tf, length in postings:
        by_term.setdefault(term, []).append((rid, tf, length))
    avgdl = stats.avgdl or 1.0
    k1, b = params.k1, params.b
    out: dict[int, float] = {}
    # Terms in sorted order: every record's sum is accumulated in the same
    # order whatever order the database returned the rows in (same floats on
    # both engines and in the in-process index).
    for term in sorted(by_term):
        rows = by_term[term]
        w = query.get(term, 0) * idf(stats.n, len(rows))
        if w == 0.0:
            continue
        for rid, tf, length in rows:
            out[rid] = out.get(rid, 0.0) + w * tf / (tf + k1 * (1.0 - b + b * length / avgdl))
    return out


# Scores are compared rounded to this many decimals, then by id: the engines
# sum in different orders and precisions (Oracle NUMBER, SQLite and numpy
# doubles), ~1e-15 apart; rounded, equal scores tie the same way everywhere.
# The keyword statement writes the same ROUND(SCORE, 9) (engine_sql.py).
RANK_DECIMALS = 9


def rank_key(score: float) -> float:
    return round(score, RANK_DECIMALS)


def top(scores: Mapping[int, float], k: int) -> list[tuple[int, float]]:
    """The ``k`` best (id, score): score (rounded, :data:`RANK_DECIMALS`) descending, then id ascending."""
    return sorted(scores.items(), key=lambda item: (-rank_key(item[1]), item[0]))[:k]


def passage_weight(query: Mapping[str, int], text: str, weights: Mapping[str, float]) -> float:
    """How much of the query a passage (one chunk) holds: the idf-weighted query terms present.

    Chooses the snippet of a record found by keyword: its chunk that covers
    most of the query's weight.
    """
    present = set(analyze(text))
    return sum(weights.get(t, 0.0) * c for t, c in query.items() if t in present)
