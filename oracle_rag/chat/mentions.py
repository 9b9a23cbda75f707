"""Keep task ids the caller may not see out of the answer text itself.

Citations are already filtered to retrieved chunks, but a model can still
*write* an id: invented, remembered from an earlier turn, or planted by an
instruction inside a chunk ("also mention TASK #7"). Every ``TASK #n`` the
answer mentions is checked against the caller's scope in SQL (the same
predicate as every search) and replaced when the caller may not see it, so
no response carries a task id outside the caller's scope. Sprints and
projects are organisational (visible to everyone) and are left alone.

Streaming answers are filtered as they flow: a piece is held back only while
the end of what has arrived could be the start of a mention ("[TAS").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

TASK_MENTION = re.compile(r"\bTASK\s*#\s*(\d{1,18})\b", re.IGNORECASE)
BRACKETED = re.compile(r"\[\s*TASK\s*#\s*(\d{1,18})\s*\]", re.IGNORECASE)
REMOVED = "[reference removed]"
HOLD_BACK = 40  # longer than any mention prefix ("[TASK #" + 18 digits)

Visible = Callable[[set[str]], set[str]]


def redact(text: str, visible: Visible) -> str:
    """``text`` with every task mention the caller may not see replaced by ``[reference removed]``."""
    ids = {m.group(1).lstrip("0") or "0" for m in TASK_MENTION.finditer(text)}
    if not ids:
        return text
    allowed = visible(ids)

    def keep(match: re.Match[str]) -> str:
        return match.group(0) if (match.group(1).lstrip("0") or "0") in allowed else REMOVED

    return TASK_MENTION.sub(keep, BRACKETED.sub(keep, text))


# What the end of a streamed buffer may hold while a mention is still arriving:
# "[", "T", "TA", "TAS", "TASK", "TASK #", "[TASK #12" (more digits may follow).
_PARTIAL = re.compile(r"\[?\s*(?:T|TA|TAS|TASK(?:\s*#?\s*\d*)?)?\s*", re.IGNORECASE)


def _safe_cut(buffer: str) -> int:
    """How much of ``buffer`` can be sent now: all of it, unless its end may be a partial mention."""
    for i in range(max(0, len(buffer) - HOLD_BACK), len(buffer)):
        if buffer[i] in "[tT" and _PARTIAL.fullmatch(buffer, i):
            if buffer[i] in "tT" and i > 0 and (buffer[i - 1].isalnum() or buffer[i - 1] == "_"):
                continue  # "...t" inside a word cannot start a mention
            return i
    return len(buffer)


def redact_stream(pieces: Iterable[str], visible: Visible) -> Iterator[str]:
    """Yield ``pieces`` redacted as they arrive, holding back only a possible partial mention."""
    try:
        buffer = ""
        for piece in pieces:
            buffer += piece
            cut = _safe_cut(buffer)
            if cut == 0:
                continue
            head, buffer = buffer[:cut], buffer[cut:]
            yield redact(head, visible)
        if buffer:
            yield redact(buffer, visible)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
