"""How `oracle-rag search` names what it prints: the score of each mode, a record's status.

The score means different things by mode (a cosine distance, lower is
closer; a keyword relevance, higher is better; an RRF sum, higher is better),
so every line carries the score's name and the header says which way is
better. The type filter is checked against the types that exist, so a typo
(``--type BUG``) is an error naming the valid ones, not an empty result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from oracle_rag.errors import InputError
from oracle_rag.search.results import RetrievedChunk

SCORES: dict[str, tuple[str, str]] = {
    "semantic": ("distance", "cosine distance to the question, lower is closer"),
    "keyword": ("relevance", "keyword relevance (BM25 on SQLite, Oracle Text SCORE), higher is better"),
    "hybrid": ("fused", "the semantic and keyword legs fused (hybrid_fusion), higher is better"),
}

_STATUS_LINE = re.compile(r"^Status: ([^|\n]+)", re.MULTILINE)  # up to "|" or the line's end (stripped)
_STATUS_TITLE = re.compile(r"\(([A-Z][A-Z_ ]*)\)\s*$")


def record_status(content: str) -> str:
    """The status the rendered record states (``Status: X`` or ``... (X)`` in its title), else ``-``."""
    found = _STATUS_LINE.search(content)
    if found:
        return found.group(1).strip()
    first = content.splitlines()[0] if content else ""
    title = _STATUS_TITLE.search(first)
    return title.group(1).strip() if title else "-"


def resolve_types(requested: Iterable[str], known: Iterable[str]) -> tuple[str, ...]:
    """``requested`` in the spelling of ``known`` (case ignored); an unknown one is an InputError."""
    by_fold = {t.casefold(): t for t in known}
    out = []
    for name in requested:
        match = by_fold.get(name.casefold())
        if match is None:
            valid = ", ".join(sorted(by_fold.values())) or "(none indexed yet)"
            raise InputError(f"unknown source type {name!r} for --type; valid types: {valid}")
        out.append(match)
    return tuple(out)


def header(mode: str, caller_label: str, count: int) -> str:
    name, meaning = SCORES[mode]
    return f"{mode} search as {caller_label}: {count} result(s); {name} = {meaning}"


def lines(results: Sequence[RetrievedChunk], mode: str) -> list[str]:
    name = SCORES[mode][0]
    out = []
    for r in results:
        first = r.content.splitlines()[0] if r.content else ""
        title = first[len(r.anchor) :].strip() if first.startswith(r.anchor) else first
        out.append(
            f"{r.rank:>3}. {r.anchor:<16} {name}={r.score:.4f} status={record_status(r.content)} "
            f"legs={','.join(r.legs)}  {title[:90]}"
        )
    return out
