"""Keep task ids the caller may not see out of the answer text itself.

Citations are already filtered to retrieved chunks, but a model can still
*write* an id: invented, remembered from an earlier turn, or planted by an
instruction inside a chunk ("also mention TASK #7"). Every task mention the
answer makes is checked against the caller's scope in SQL (the same
predicate as every search) and replaced when the caller may not see it, so
no response carries a task id outside the caller's scope. Sprints and
projects are organisational (visible to everyone) and are left alone.

What counts as a mention is decided on a *normalised* copy of the text, so
that spelling cannot hide one: each character is NFKC-normalised and
case-folded (``ＴＡＳＫ ＃６１`` is ``task #61``), format and combining
characters are dropped (zero-width spaces, soft hyphens), markdown emphasis
characters (``* _ ~ ```) and every run of whitespace count as one space
(``_TASK #61_``, ``**TASK** #61``, ``TASK`` + 10,000 spaces + ``#61``),
and leading zeros do not change the id (``TASK #000061`` is 61). A mention
is ``task`` or ``tasks``, optional separators (``#``, ``no.``, ``number``,
``id``, ``:``, ``-``, ``/``), an id, and possibly more ids listed after it
(``TASKS #61, #62 and #63``). The ``/`` makes a link to a record a mention
too: ``/chunk/task/61`` (the page) and ``/api/chunks/TASK/61`` (the API)
carry the id as surely as ``TASK #61`` and become ``/chunk/[reference
removed]``. The match is mapped back to the original characters, which are
replaced.

Streaming answers are filtered as they flow: text is held back while the
end of what has arrived could still become a mention, however the pieces
are split and however long a run of whitespace or zeros is inside it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator

REMOVED = "[reference removed]"
_CONTEXT = 32  # characters of sent text kept to decide the word boundary before a held mention
MAX_ID_DIGITS = 18  # a longer id cannot exist; it is removed without asking the database

Visible = Callable[[set[str]], set[str]]

_EMPHASIS = "*_~`"
_SEP = r"(?: ?(?:#|no\.?|n[º°o]\.?|number|num\.?|nr\.?|id|:|-|–|—|/))* ?"
_HEAD = re.compile(r"(?<![\w])tasks?" + _SEP + r"(0*(\d+))(?![0-9])")
# Further ids listed after a mention ("TASKS #61, #62 and #63") need their own "#" (or "no."/"id"):
# "TASK #61 and 2 others" mentions one task.
_MORE = re.compile(r" ?(?:,|;|/|&|\+|and|or|y|et|und)? ?((?:#|no\.?|number|id)(?: ?(?:#|:|-))* ?0*(\d+))(?![0-9])")
_CONNECTOR_PREFIX = r"(?:,|;|/|&|\+|a|an|and|o|or|y|e|et|u|un|und)"
_SEP_PREFIX = r"(?:#|n|no|no\.|n[º°o]\.?|nu|num|numb|numbe|number|num\.|nr|nr\.|i|id|:|-|–|—|/)"
# What the end of a streamed buffer may hold while a mention is still arriving.
_PARTIAL = re.compile(
    r"(?<![\w])(?:\[ ?)?(?:t|ta|tas|tasks?(?: ?" + _SEP_PREFIX + r")* ?(?:\d+(?: ?" + _CONNECTOR_PREFIX + r"?(?: ?"
    + _SEP_PREFIX + r")* ?\d*)*)?)? ?$")


def normalise(text: str) -> tuple[str, list[int]]:
    """The normalised text and, for each of its characters, the index of the original character."""
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        if ch.isspace() or ch in _EMPHASIS:
            if not out or out[-1] != " ":
                out.append(" ")
                index.append(i)
            continue
        if unicodedata.category(ch) in ("Cf", "Mn", "Me", "Cc"):
            continue
        folded = unicodedata.normalize("NFKC", ch).casefold()
        for part in folded:
            if part.isspace() or part in _EMPHASIS:
                if not out or out[-1] != " ":
                    out.append(" ")
                    index.append(i)
                continue
            out.append(part)
            index.append(i)
    return "".join(out), index


def _task_id(digits: str) -> str:
    return digits.lstrip("0") or "0"


def _bracketed(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a mention's span to its enclosing ``[ ... ]`` when it is the whole bracket."""
    i, j = start, end
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    while j < len(text) and text[j] in " \t":
        j += 1
    if i > 0 and j < len(text) and text[i - 1] == "[" and text[j] == "]":
        return i - 1, j + 1
    return start, end


def find_mentions(text: str, context: str = "") -> list[tuple[int, int, str]]:
    """Every task id ``text`` mentions: (start, end) in ``text`` and the id without leading zeros.

    ``context`` is text that came before (a stream's last sent characters):
    it decides word boundaries but is not searched itself.
    """
    if context:
        shift = len(context)
        return [(a - shift, b - shift, i) for a, b, i in find_mentions(context + text) if a >= shift]
    norm, index = normalise(text)
    found: list[tuple[int, int, str]] = []

    def add(start: int, end: int, digits: str) -> None:
        found.append((*_bracketed(text, index[start], index[end - 1] + 1), _task_id(digits)))

    for head in _HEAD.finditer(norm):
        add(head.start(), head.end(1), head.group(2))
        pos = head.end(1)
        while (more := _MORE.match(norm, pos)) is not None:
            add(more.start(1), more.end(1), more.group(2))
            pos = more.end(1)
    return found


def redact(text: str, visible: Visible, context: str = "") -> str:
    """``text`` with every task mention the caller may not see replaced by ``[reference removed]``."""
    mentions = find_mentions(text, context)
    if not mentions:
        return text
    ids = {m[2] for m in mentions if len(m[2]) <= MAX_ID_DIGITS}
    allowed = visible(ids) if ids else set()
    out, last = [], 0
    for start, end, task_id in sorted(mentions):
        if start < last:
            continue
        if task_id in allowed:
            continue
        out.append(text[last:start])
        out.append(REMOVED)
        last = end
    out.append(text[last:])
    return "".join(out)


def _safe_cut(buffer: str) -> int:
    """How much of ``buffer`` can be sent now: all of it, unless its end may still become a mention."""
    norm, index = normalise(buffer)
    if not norm:
        return len(buffer)
    candidates = [m.start() for m in re.finditer(r"[\[t]", norm)]
    for p in candidates:
        if _PARTIAL.match(norm, p):
            return index[p]
    return len(buffer)


def redact_stream(pieces: Iterable[str], visible: Visible) -> Iterator[str]:
    """Yield ``pieces`` redacted as they arrive, holding back what may still become a mention."""
    try:
        buffer, sent = "", ""
        for piece in pieces:
            buffer += piece
            cut = _safe_cut(buffer)
            if cut == 0:
                continue
            head, buffer = buffer[:cut], buffer[cut:]
            yield redact(head, visible, sent)
            sent = (sent + head)[-_CONTEXT:]
        if buffer:
            yield redact(buffer, visible, sent)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
