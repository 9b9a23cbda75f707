"""Citations: the anchors a model wrote, kept only when they name a retrieved chunk.

A model can cite an id it invented, or one it was told about inside a
chunk ("see TASK #7"). Neither is evidence, and TASK #7 may be a task the
caller must not see. So the answer's anchors are parsed, and a citation is
returned only for a chunk that was retrieved for this caller in this turn;
its snippet comes from that chunk, never from the model.

Decision for an answer that cites nothing: no citations are returned. The
answer then has no verifiable support, and listing the retrieved chunks as
if they backed it would suggest a support the model did not claim. Clients
show such an answer as uncited (the chat page does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oracle_rag.sources.meanings import anchor_of, anchor_parts

SNIPPET_CHARS = 240

_BRACKETS = re.compile(r"\[([^\[\]\n]{1,300})\]")
# TYPE #id inside a bracket; several may share one ("[TASK #1, TASK #2]", "[TASK #1 and SPRINT #3]").
# TYPE is a product type or a SQL source's name (letter, then letters, digits, _ . -).
_ANCHOR = re.compile(r"(?<![\w.\-])([A-Za-z][A-Za-z0-9_.\-]*)\s*#\s*([^\s,;\[\]]+)")


@dataclass(frozen=True)
class Citation:
    source_type: str
    source_id: str
    snippet: str

    @property
    def anchor(self) -> str:
        return anchor_of(self.source_type, self.source_id)

    def to_dict(self) -> dict[str, str]:
        return {
            "source_type": self.source_type,
            "source_id": self.source_id,
            "anchor": self.anchor,
            "snippet": self.snippet,
        }


def parse_anchors(text: str) -> list[tuple[str, str]]:
    """``[TASK #42]``, ``[Task #42, SPRINT #3]``… as (TYPE, id) pairs, first mention first."""
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for group in _BRACKETS.finditer(text):
        for match in _ANCHOR.finditer(group.group(1)):
            key = (match.group(1).upper(), match.group(2))
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


_WORD = re.compile(r"\w{3,}", re.UNICODE)
# Words too common in questions to say where a record matches.
_STOPWORDS = frozenset(
    "the and for are was were with what which who whom whose when where why how this that these those "
    "from into onto have has had not but all any can could should would will about there their them they "
    "you your our its it's show list tell give me my".split()
)


def _terms(query: str) -> list[str]:
    return [
        w for w in dict.fromkeys(m.group(0).casefold() for m in _WORD.finditer(query)) if w not in _STOPWORDS
    ]


def snippet(content: str, limit: int = SNIPPET_CHARS, query: str = "", anchor: str = "") -> str:
    """The chunk text on one line, at most ``limit`` characters, around the part matching ``query``.

    A cut from the start often stops before the line that matched (a task's
    description comes after six header lines), so the window is placed where
    the most distinct query words fall, a third of it before the first of
    them. A leading ``anchor`` is dropped: clients show it as the link next
    to the snippet, and repeating it wastes the space. Elided ends are
    marked with an ellipsis.
    """
    flat = " ".join(content.split())
    if anchor and flat.startswith(anchor):
        flat = flat[len(anchor) :].lstrip()
    if len(flat) <= limit:
        return flat
    start = _best_window(flat, limit, _terms(query))
    left = start > 0
    room = limit - (1 if left else 0)
    piece = flat[start : start + room]
    right = start + room < len(flat)
    if right:  # end on a word boundary, leaving room for the ellipsis
        piece = piece[: room - 1]
        cut = piece.rfind(" ")
        piece = (piece[:cut] if cut > room // 2 else piece).rstrip()
    return ("\u2026" if left else "") + piece + ("\u2026" if right else "")


def _best_window(flat: str, limit: int, terms: list[str]) -> int:
    """Start of the ``limit``-wide window holding the most distinct ``terms`` (0 when none match)."""
    if not terms:
        return 0
    low = flat.casefold()
    # at word starts: "out" must not match inside "routine"; "time" still matches "times"
    hits = sorted((m.start(), term) for term in terms for m in re.finditer(rf"\b{re.escape(term)}", low))
    if not hits:
        return 0
    best_start, best_count = 0, -1
    for pos, _ in hits:
        start = max(0, min(pos - limit // 3, len(flat) - limit))
        count = len({t for p, t in hits if start <= p and p + len(t) <= start + limit})
        if count > best_count:
            best_start, best_count = start, count
    if best_start > 0:  # begin on a word
        space = flat.rfind(" ", 0, best_start + 1)
        best_start = space + 1 if space >= 0 and best_start - space < 20 else best_start
    return best_start


def citation_for(chunk: Any, query: str = "") -> Citation:
    anchor = anchor_of(chunk.source_type, str(chunk.source_id))
    return Citation(chunk.source_type, chunk.source_id, snippet(chunk.content, query=query, anchor=anchor))


def select_citations(answer: str, retrieved: Sequence[Any], query: str = "") -> list[Citation]:
    """Citations for the anchors in ``answer`` that name a retrieved chunk, in order of mention.

    Snippets are centred on ``query`` (the question), when given."""
    by_key: dict[tuple[str, str], Any] = {}
    for c in retrieved:  # as shown ([TICKETS #1042]) and as stored ([tickets #tickets#1042])
        shown_type, shown_id = anchor_parts(c.source_type, str(c.source_id))
        by_key.setdefault((shown_type.upper(), shown_id), c)
        by_key.setdefault((c.source_type.upper(), str(c.source_id)), c)
    out: list[Citation] = []
    used: set[tuple[str, str]] = set()
    for source_type, source_id in parse_anchors(answer):
        # "[TASK #42.]": try the id as written, then without trailing punctuation
        for key in ((source_type, source_id), (source_type, source_id.rstrip(".:)!?"))):
            if key in by_key and key not in used:
                used.add(key)
                out.append(citation_for(by_key[key], query))
                break
    return out
