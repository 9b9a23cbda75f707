"""Turn a user's question into plain search terms.

User text must never reach FTS5 or Oracle Text as query syntax (``NEAR``,
``-``, ``*``, ``{``, ``ABOUT(...)`` would change the meaning or raise), so
both engines take only the word terms extracted here and quote each one in
their own syntax. Stopwords are dropped because they add noise to BM25-like
scoring and, in Oracle Text, are not indexed at all.
"""

from __future__ import annotations

import re
import unicodedata

MAX_TERMS = 48
_WORD = re.compile(r"\w\w+", re.UNICODE)

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves also may might must shall could""".split()
)


def terms(text: str) -> list[str]:
    """Lower-cased, accent-folded word terms, stopwords removed, de-duplicated, capped."""
    folded = unicodedata.normalize("NFKD", text.replace("\x00", " "))
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch)).lower()
    seen: dict[str, None] = {}
    for word in _WORD.findall(folded):
        if word in STOPWORDS or word.isdigit() and len(word) > 18:
            continue
        seen.setdefault(word[:64], None)
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)


def fts5_match(text: str) -> str | None:
    """An FTS5 MATCH expression: every term double-quoted, OR-ed (``None`` when no terms)."""
    found = terms(text)
    if not found:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in found)


def oracle_text_query(text: str) -> str | None:
    """An Oracle Text CONTAINS query: each term in braces (escaped), joined by ACCUM."""
    found = [t for t in terms(text) if "}" not in t]
    if not found:
        return None
    return " ACCUM ".join("{" + t + "}" for t in found)
