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

SNIPPET_CHARS = 240

_BRACKETS = re.compile(r"\[([^\[\]\n]{1,300})\]")
# TYPE #id inside a bracket; several may share one ("[TASK #1, TASK #2]", "[TASK #1 and SPRINT #3]").
_ANCHOR = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)\s*#\s*([^\s,;\[\]]+)")


@dataclass(frozen=True)
class Citation:
    source_type: str
    source_id: str
    snippet: str

    @property
    def anchor(self) -> str:
        return f"[{self.source_type} #{self.source_id}]"

    def to_dict(self) -> dict[str, str]:
        return {"source_type": self.source_type, "source_id": self.source_id, "snippet": self.snippet}


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


def snippet(content: str, limit: int = SNIPPET_CHARS) -> str:
    """The chunk text on one line, cut at ``limit`` characters."""
    flat = " ".join(content.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "\u2026"


def citation_for(chunk: Any) -> Citation:
    return Citation(chunk.source_type, chunk.source_id, snippet(chunk.content))


def select_citations(answer: str, retrieved: Sequence[Any]) -> list[Citation]:
    """Citations for the anchors in ``answer`` that name a retrieved chunk, in order of mention."""
    by_key = {(c.source_type.upper(), str(c.source_id)): c for c in retrieved}
    out: list[Citation] = []
    used: set[tuple[str, str]] = set()
    for source_type, source_id in parse_anchors(answer):
        # "[TASK #42.]": try the id as written, then without trailing punctuation
        for key in ((source_type, source_id), (source_type, source_id.rstrip(".:)!?"))):
            if key in by_key and key not in used:
                used.add(key)
                out.append(citation_for(by_key[key]))
                break
    return out
