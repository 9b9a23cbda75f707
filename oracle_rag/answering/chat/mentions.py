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

The cost is linear in the text whatever it holds: no pattern here can match
one run of characters in more than one way (a list of thirty ids costs what
thirty words cost), and what may still be arriving is found by one scan that
remembers, per state of a mention being read, only the earliest place it
started, so a stream costs what its text costs however it is split.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

REMOVED = "[reference removed]"
MAX_ID_DIGITS = 18  # a longer id cannot exist; it is removed without asking the database

Key = tuple[str, str]  # (source type, stored source id)
# Given the (type, id) pairs an answer mentions, the ones the caller may see.
Visible = Callable[[set[Key]], set[Key]]

_EMPHASIS = "*_~`"
# Separators between a record word and its id. Each alternative spells different text ("no" only
# through ``n[º°o]``), so a run of them can be read one way only: the cost stays linear.
_SEP = r"(?: ?(?:#|n[º°o]\.?|number|num\.?|nr\.?|id|:|-|–|—|/))* ?"
# Further ids listed after a mention ("TASKS #61, #62 and #63") need their own "#" (or "no."/"id"):
# "TASK #61 and 2 others" mentions one task.
_MORE = re.compile(
    r" ?(?:,|;|/|&|\+|and|or|y|et|und)? ?((?:#|no\.?|number|id)(?: ?(?:#|:|-))* ?0*(\d+))(?![0-9])"
)
# What a mention still arriving may hold after its record word, as tokens: separators, and after the
# first digit also connectors. Each set holds every prefix of its tokens ("n", "nu" ... "number"),
# so the token being written is always one of them.
_SEP_PARTS = frozenset(
    {
        "#",
        "n",
        "no",
        "no.",
        "nº",
        "nº.",
        "n°",
        "n°.",
        "nu",
        "num",
        "numb",
        "numbe",
        "number",
        "num.",
        "nr",
        "nr.",
        "i",
        "id",
        ":",
        "-",
        "–",
        "—",
        "/",
    }
)
_TAIL_PARTS = _SEP_PARTS | {",", ";", "&", "+", "a", "an", "and", "o", "or", "y", "e", "et", "u", "un", "und"}


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
    folded: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    beginnings: frozenset[str] = field(init=False, repr=False, compare=False)  # every prefix of a folded word

    def __post_init__(self) -> None:
        folded: dict[str, tuple[str, ...]] = {}
        for w, types in self.words.items():
            key = normalise(w)[0].strip()
            if key:
                folded[key] = tuple(dict.fromkeys([*folded.get(key, ()), *types]))
        object.__setattr__(self, "folded", folded)
        object.__setattr__(self, "beginnings", frozenset(w[:i] for w in folded for i in range(1, len(w) + 1)))
        if not folded:
            object.__setattr__(self, "head", re.compile(r"(?!)"))
            return
        words = sorted(folded, key=lambda w: (-len(w), w))
        full = "(?:" + "|".join(re.escape(w) for w in words) + ")"
        object.__setattr__(
            self, "head", re.compile(r"(?<![\w])(" + full + ")" + _SEP + r"(0*(\d+))(?![0-9])")
        )

    def types_of(self, word: str) -> tuple[str, ...]:
        return self.folded.get(word, ())

    def keys(self, word: str, number: str) -> set[Key]:
        """The (type, stored id) pairs ``word #number`` may name."""
        return {(t, self.prefixes.get(t, "") + number) for t in self.types_of(word)}

    @classmethod
    def of(
        cls,
        type_words: Mapping[str, Iterable[str]],
        types: Iterable[str],
        prefixes: Mapping[str, str] | None = None,
    ) -> RecordWords:
        """Record words from a vocabulary's ``type_words``, plus each type's own name (links use it)."""
        words: dict[str, tuple[str, ...]] = {w: tuple(t) for w, t in type_words.items()}
        for t in types:
            key = t.lower()
            words[key] = tuple(dict.fromkeys([*words.get(key, ()), t]))
        return cls(words, dict(prefixes or {}))


@lru_cache(maxsize=4096)
def _fold(ch: str) -> str:
    """One character as mentions are read: ``" "`` for whitespace and emphasis, ``""`` for format,
    combining and control characters, else NFKC-normalised and case-folded without accents (possibly
    several characters, whitespace among them again ``" "``)."""
    if ch.isspace() or ch in _EMPHASIS:
        return " "
    if unicodedata.category(ch) in ("Cf", "Mn", "Me", "Cc"):
        return ""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", ch).casefold())
    return "".join(
        " " if p.isspace() or p in _EMPHASIS else p for p in folded if not unicodedata.combining(p)
    )


def normalise(text: str) -> tuple[str, list[int]]:
    """The normalised text and, for each of its characters, the index of the original character."""
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        for part in _fold(ch):
            if part == " " and out and out[-1] == " ":
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
    stream's last sent character): it decides the word boundary before
    ``text`` but is not searched itself. A mention of ``text`` whose bracket
    is in ``context`` is cut at the start of ``text``, never dropped.
    """
    shift = len(context)
    whole = context + text
    norm, index = normalise(whole)
    found: list[tuple[int, int, str, str]] = []

    def add(start: int, end: int, word: str, digits: str) -> None:
        a, b = _bracketed(whole, index[start], index[end - 1] + 1)
        found.append((max(a, shift) - shift, b - shift, word, _number(digits)))

    for head in words.head.finditer(norm):
        if index[head.start()] < shift:
            # it began before ``text`` (whose boundary the context alone cannot tell): not text's, nor
            # its list
            continue
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


_State = tuple[str, str]  # (where in a mention, the word or token read so far)


class _Arriving:
    """Where a record mention may still be arriving at the end of a stream: one linear scan.

    A candidate starts at ``[``, or at a record word's first character unless a word character
    comes just before. It lives while the text after it is the start of a mention: ``[`` and a
    space; a part of a record word (which may end in one space); or a whole record word followed by
    separators (``#``, ``no.``, ``id`` ...) and, from the first digit on, digits, connectors
    (``,``, ``and``, ``y`` ...), separators and spaces in any order. Candidates in the same state
    have the same future, so each state keeps only its earliest start: the work per character is
    bounded by the number of states (the words' prefixes and the tokens), whatever the text holds.
    """

    def __init__(self, words: RecordWords) -> None:
        self.words = words
        self.live: dict[_State, int] = {}  # state -> earliest start (index of the original character)
        self.offset = 0  # original characters read
        self.last = " "  # the last normalised character (a stream starts after a boundary)
        self.word = False  # a whole record word was read since ``read_out()`` (no mention without one)

    def feed(self, text: str) -> None:
        words = self.words
        live, last, offset = self.live, self.last, self.offset
        for i, ch in enumerate(text, offset):
            for c in _fold(ch):
                if c == " " and last == " ":
                    continue
                if live:
                    moved: dict[_State, int] = {}
                    for state, start in live.items():
                        for nxt in self._step(state, c):
                            if moved.get(nxt, i) >= start:
                                moved[nxt] = start
                    live = moved
                if c == "[":  # whatever precedes it: a bracket around a mention is taken with it
                    live.setdefault(("[", ""), i)
                elif c in words.beginnings and not (last.isalnum() or last == "_"):  # (?<!\w): a word starts
                    live.setdefault(("w", c), i)
                    self.word = self.word or c in words.folded
                last = c
        self.live, self.last, self.offset = live, last, offset + len(text)

    def read_out(self) -> bool:
        """Whether the text up to ``earliest()`` may hold a mention: a whole record word was read since
        the last call, or a candidate was still live then (its word may lie before the cut)."""
        word, self.word = self.word, bool(self.live)
        return word

    def earliest(self) -> int:
        """The index of the first original character that may still belong to a mention (or the end)."""
        return min(self.live.values(), default=self.offset)

    def _step(self, state: _State, c: str) -> set[_State]:
        kind, read = state
        out: set[_State] = set()
        if kind == "[":  # "[" or "[ ", a record word may follow
            if c == " " and not read:
                out.add(("[", " "))
            if c in self.words.beginnings:
                out.add(("w", c))
                self.word = self.word or c in self.words.folded
        elif kind == "w":  # part of a record word, or a whole one
            if read + c in self.words.beginnings:
                out.add(("w", read + c))
                self.word = self.word or read + c in self.words.folded
            if read in self.words.folded:
                out |= self._step(("sep", ""), c)
            elif c == " ":
                out.add(("end", ""))  # "ta " may still end the text, nothing may follow
        elif kind == "sep":  # separators before the first digit
            if read + c in _SEP_PARTS:
                out.add(("sep", read + c))
            if c in _SEP_PARTS:
                out.add(("sep", c))
            if c == " ":
                out.add(("sep", ""))
            elif c.isdecimal():
                out.add(("ids", ""))
        elif kind == "ids":  # digits, connectors, separators, in any order
            if read + c in _TAIL_PARTS:
                out.add(("ids", read + c))
            if c in _TAIL_PARTS:
                out.add(("ids", c))
            if c == " " or c.isdecimal():
                out.add(("ids", ""))
        return out


def redact_stream(pieces: Iterable[str], visible: Visible, words: RecordWords) -> Iterator[str]:
    """Yield ``pieces`` redacted as they arrive, holding back what may still become a mention."""
    try:
        arriving = _Arriving(words)
        held: list[str] = []  # the pieces not yet sent, from ``start`` (an index in the whole stream)
        start, sent = (
            0,
            "",
        )  # the last sent character that reads as something: the word boundary before a mention
        for piece in pieces:
            held.append(piece)
            arriving.feed(piece)
            cut = arriving.earliest() - start
            if cut == 0:
                continue
            buffer = "".join(held)
            head = buffer[:cut]
            held = [buffer[cut:]] if cut < len(buffer) else []
            start += cut
            yield redact(head, visible, words, sent) if arriving.read_out() else head
            sent = next((ch for ch in reversed(head) if _fold(ch)), sent)
        if held:
            yield redact("".join(held), visible, words, sent)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
