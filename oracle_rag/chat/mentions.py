"""Keep record ids the caller may not see out of the answer text itself.

Citations are already filtered to retrieved chunks, but a model can still
*write* an id: invented, remembered from an earlier turn, or planted by an
instruction inside a chunk ("also mention TASK #7"). Every record mention
the answer makes is checked against the caller's scope in SQL (the same
predicate as every search) and replaced when the caller may not see it, so
no response carries a record id outside the caller's scope. Which words name
records is not this module's knowledge: :class:`RecordWords` is built from
the sources' declarations (their nouns and words, and each type's own name:
``task``, ``tickets``, ``pedido`` ...), so a deployment's own tables are
covered as the reference app's are. A word naming several types keeps a
mention the caller may see under any of them.

What counts as a mention is decided on a *normalised* copy of the text, so
that spelling cannot hide one: each character is NFKC-normalised and
case-folded (``ＴＡＳＫ ＃６１`` is ``task #61``), format and combining
characters are dropped (zero-width spaces, soft hyphens), markdown emphasis
characters (``* _ ~ ```) and every run of whitespace count as one space
(``_TASK #61_``, ``**TASK** #61``, ``TASK`` + 10,000 spaces + ``#61``),
accents are dropped as the declarations' words drop them, and leading zeros
do not change the id (``TASK #000061`` is 61). A mention is a record word
(``task``, ``tasks``), optional separators (``#``, ``no.``, ``number``,
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

REMOVED = "[reference removed]"
_CONTEXT = 32  # characters of sent text kept to decide the word boundary before a held mention
MAX_ID_DIGITS = 18  # a longer id cannot exist; it is removed without asking the database

Key = tuple[str, str]  # (source type, stored source id)
# Given the (type, id) pairs an answer mentions, the ones the caller may see.
Visible = Callable[[set[Key]], set[Key]]

_EMPHASIS = "*_~`"
_SEP = r"(?: ?(?:#|no\.?|n[º°o]\.?|number|num\.?|nr\.?|id|:|-|–|—|/))* ?"
# Further ids listed after a mention ("TASKS #61, #62 and #63") need their own "#" (or "no."/"id"):
# "TASK #61 and 2 others" mentions one task.
_MORE = re.compile(r" ?(?:,|;|/|&|\+|and|or|y|et|und)? ?((?:#|no\.?|number|id)(?: ?(?:#|:|-))* ?0*(\d+))(?![0-9])")
_CONNECTOR_PREFIX = r"(?:,|;|/|&|\+|a|an|and|o|or|y|e|et|u|un|und)"
_SEP_PREFIX = r"(?:#|n|no|no\.|n[º°o]\.?|nu|num|numb|numbe|number|num\.|nr|nr\.|i|id|:|-|–|—|/)"


@dataclass(frozen=True)
class RecordWords:
    """The words that name records in answer text, and the types each names (from declarations).

    ``words``: folded word (or phrase) -> source types; ``prefixes``: a
    type's stored-id prefix (``Meanings.id_prefix``), so ``TICKETS #7`` is
    checked as the id the type stores.
    """

    words: Mapping[str, tuple[str, ...]]
    prefixes: Mapping[str, str] = field(default_factory=dict)
    head: re.Pattern[str] = field(init=False, repr=False, compare=False)
    partial: re.Pattern[str] = field(init=False, repr=False, compare=False)
    starts: re.Pattern[str] = field(init=False, repr=False, compare=False)
    folded: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        folded: dict[str, tuple[str, ...]] = {}
        for w, types in self.words.items():
            key = normalise(w)[0].strip()
            if key:
                folded[key] = tuple(dict.fromkeys([*folded.get(key, ()), *types]))
        object.__setattr__(self, "folded", folded)
        words = sorted(folded, key=lambda w: (-len(w), w))
        if not words:
            never = re.compile(r"(?!)")
            object.__setattr__(self, "head", never)
            object.__setattr__(self, "partial", never)
            object.__setattr__(self, "starts", never)
            return
        full = "(?:" + "|".join(re.escape(w) for w in words) + ")"
        cut = sorted({w[:i] for w in words for i in range(1, len(w))} - set(words), key=lambda w: (-len(w), w))
        cuts = "".join(re.escape(w) + "|" for w in cut)
        object.__setattr__(self, "head", re.compile(r"(?<![\w])(" + full + ")" + _SEP + r"(0*(\d+))(?![0-9])"))
        # What the end of a streamed buffer may hold while a mention is still arriving.
        object.__setattr__(self, "partial", re.compile(
            r"(?<![\w])(?:\[ ?)?(?:" + cuts + full + r"(?: ?" + _SEP_PREFIX + r")* ?(?:\d+(?: ?" + _CONNECTOR_PREFIX
            + r"?(?: ?" + _SEP_PREFIX + r")* ?\d*)*)?)? ?$"))
        object.__setattr__(self, "starts", re.compile("[" + re.escape("[" + "".join({w[0] for w in words})) + "]"))

    def types_of(self, word: str) -> tuple[str, ...]:
        return self.folded.get(word, ())

    def keys(self, word: str, number: str) -> set[Key]:
        """The (type, stored id) pairs ``word #number`` may name."""
        return {(t, self.prefixes.get(t, "") + number) for t in self.types_of(word)}

    @classmethod
    def of(cls, type_words: Mapping[str, Iterable[str]], types: Iterable[str],
           prefixes: Mapping[str, str] | None = None) -> RecordWords:
        """Record words from a vocabulary's ``type_words``, plus each type's own name (links use it)."""
        words: dict[str, tuple[str, ...]] = {w: tuple(t) for w, t in type_words.items()}
        for t in types:
            key = t.lower()
            words[key] = tuple(dict.fromkeys([*words.get(key, ()), t]))
        return cls(words, dict(prefixes or {}))


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
        folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", ch).casefold())
        for part in folded:
            if unicodedata.combining(part):
                continue
            if part.isspace() or part in _EMPHASIS:
                if not out or out[-1] != " ":
                    out.append(" ")
                    index.append(i)
                continue
            out.append(part)
            index.append(i)
    return "".join(out), index


def _number(digits: str) -> str:
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


def find_mentions(text: str, words: RecordWords, context: str = "") -> list[tuple[int, int, str, str]]:
    """Every record ``text`` mentions: (start, end) in ``text``, the record word (normalised) and the id.

    The id has no leading zeros. ``context`` is text that came before (a
    stream's last sent characters): it decides word boundaries but is not
    searched itself.
    """
    if context:
        shift = len(context)
        return [(a - shift, b - shift, w, i) for a, b, w, i in find_mentions(context + text, words) if a >= shift]
    norm, index = normalise(text)
    found: list[tuple[int, int, str, str]] = []

    def add(start: int, end: int, word: str, digits: str) -> None:
        found.append((*_bracketed(text, index[start], index[end - 1] + 1), word, _number(digits)))

    for head in words.head.finditer(norm):
        add(head.start(), head.end(2), head.group(1), head.group(3))
        pos = head.end(2)
        while (more := _MORE.match(norm, pos)) is not None:
            add(more.start(1), more.end(1), head.group(1), more.group(2))
            pos = more.end(1)
    return found


def redact(text: str, visible: Visible, words: RecordWords, context: str = "") -> str:
    """``text`` with every record mention the caller may not see replaced by ``[reference removed]``."""
    mentions = find_mentions(text, words, context)
    if not mentions:
        return text
    asked = {k for m in mentions if len(m[3]) <= MAX_ID_DIGITS for k in words.keys(m[2], m[3])}
    allowed = visible(asked) if asked else set()
    out, last = [], 0
    for start, end, word, number in sorted(mentions):
        if start < last:
            continue
        if len(number) <= MAX_ID_DIGITS and words.keys(word, number) & allowed:
            continue
        out.append(text[last:start])
        out.append(REMOVED)
        last = end
    out.append(text[last:])
    return "".join(out)


def _safe_cut(buffer: str, words: RecordWords) -> int:
    """How much of ``buffer`` can be sent now: all of it, unless its end may still become a mention."""
    norm, index = normalise(buffer)
    if not norm:
        return len(buffer)
    for m in words.starts.finditer(norm):
        if words.partial.match(norm, m.start()):
            return index[m.start()]
    return len(buffer)


def redact_stream(pieces: Iterable[str], visible: Visible, words: RecordWords) -> Iterator[str]:
    """Yield ``pieces`` redacted as they arrive, holding back what may still become a mention."""
    try:
        buffer, sent = "", ""
        for piece in pieces:
            buffer += piece
            cut = _safe_cut(buffer, words)
            if cut == 0:
                continue
            head, buffer = buffer[:cut], buffer[cut:]
            yield redact(head, visible, words, sent)
            sent = (sent + head)[-_CONTEXT:]
        if buffer:
            yield redact(buffer, visible, words, sent)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
