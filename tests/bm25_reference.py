"""BM25 written from its definition (bm25s, method "lucene"), independent of oracle_rag/text/bm25.py.

Used as the oracle for the product's keyword ranking on every engine.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping

STOP = set(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)


def tokens(text: str) -> list[str]:
    # accents folded: decompose (NFKD), drop the combining marks
    folded = "".join(
        c for c in unicodedata.normalize("NFKD", text.lower()) if unicodedata.category(c) != "Mn"
    )
    return [w[:100] for w in re.findall(r"(?u)\b\w\w+\b", folded) if w not in STOP]


def scores(docs: Mapping[str, str], query: str, k1: float = 1.5, b: float = 0.75) -> dict[str, float]:
    tokenised = {d: tokens(t) for d, t in docs.items()}
    n = len(tokenised)
    avgdl = sum(len(t) for t in tokenised.values()) / n if n else 1.0
    df = Counter(term for t in tokenised.values() for term in set(t))
    out: dict[str, float] = {}
    for d, toks in tokenised.items():
        tf = Counter(toks)
        total = 0.0
        for q in tokens(query):
            if tf[q]:
                idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                total += idf * tf[q] / (tf[q] + k1 * (1 - b + b * len(toks) / avgdl))
        if total > 0:
            out[d] = total
    return out


def ranking(docs: Mapping[str, str], query: str, k1: float = 1.5, b: float = 0.75) -> list[str]:
    return [d for d, _ in sorted(scores(docs, query, k1, b).items(), key=lambda x: (-x[1], x[0]))]
