"""Role-scoped semantic, keyword and hybrid retrieval: the read path's entry point.

The scope predicate is part of every search statement (engines/*_sql.py),
applied before the top-k, so a developer's search returns k rows whenever
k are visible and can never return a row they may not see, whatever the
query or the model says. Hybrid search fuses the two legs (search/fusion.py:
Reciprocal Rank Fusion, or their scores standardised and combined:
``hybrid_fusion``); each leg fetches more than k so fusion has room to reorder.
On the embedded engine the legs come from the in-process indexes (the same
scope as masks) and SQL re-checks the k records shown (search/hybrid.py).
"""

from __future__ import annotations

import re
import time
from typing import Any

from oracle_rag.callers.caller import Caller, require_caller
from oracle_rag.config import Settings
from oracle_rag.engines import Filters, Hit, SemanticHits, Where, embed_text
from oracle_rag.engines.roles import CandidateIndex, Searcher
from oracle_rag.errors import InputError
from oracle_rag.search.hybrid import SemanticLeg, hybrid, leg_span
from oracle_rag.search.results import MAX_K, RetrievedChunk, SearchStats, ranked

MODES = ("semantic", "keyword", "hybrid")


_SURROGATE = re.compile("[\ud800-\udfff]")


def validate_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer in [1, {MAX_K}], got {k!r}")
    return k


def clean_query(query: Any, max_chars: int) -> str:
    if not isinstance(query, str):
        raise InputError("query must be a string")
    # The limit counts the question as sent, spaces around it included: what the API's schema
    # declares (maxLength), so a request its contract refuses is refused here too.
    if len(query) > max_chars:
        raise InputError(f"query is {len(query)} characters; the limit is {max_chars} (max_question_chars)")
    text = query.replace("\x00", " ").strip()
    # A lone surrogate cannot be stored or embedded as UTF-8 (JSON "\\ud800", surrogateescape argv).
    if _SURROGATE.search(text):
        raise InputError("query is not valid Unicode text (it holds a lone surrogate)")
    if not text:
        raise InputError("query is empty")
    return text


class Retriever:
    def __init__(self, engine: Searcher, settings: Settings) -> None:
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
                with leg_span("semantic", k) as leg:
                    result = ranked(
                        self.engine.semantic_search(conn, sem_text, k, scope, filters, exact, where),
                        "semantic",
                    )
                    leg.set_attribute("oracle_rag.search.hits", len(result))
                legs = {"semantic": len(result)}
            elif mode == "keyword":
                with leg_span("keyword", k) as leg:
                    result = ranked(
                        self.engine.keyword_search(conn, text, k, scope, filters, where), "keyword"
                    )
                    leg.set_attribute("oracle_rag.search.hits", len(result))
                legs = {"keyword": len(result)}
            else:

                def checked(n: int, leg_filters: Filters) -> list[Hit]:
                    return self.engine.semantic_search(
                        conn, sem_text, n, scope, leg_filters, exact, where, text=False
                    )

                def proposed(index: CandidateIndex, n: int, leg_filters: Filters) -> SemanticHits | None:
                    return index.propose_semantic(conn, sem_text, n, scope, leg_filters)

                semantic = SemanticLeg(checked, proposed)
                result, raw = hybrid(
                    self.engine, conn, self.settings, semantic, text, k, scope, filters, where
                )
                legs = {leg: len(h) for leg, h in raw.items()}
        self.last_stats = SearchStats(mode, k, (time.perf_counter() - started) * 1000, legs)
        return result
