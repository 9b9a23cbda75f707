"""Check a model's prose against what was computed, sentence by sentence, before it is shown.

A model adds fluency; it must never subtract correctness. Measured with a
small local model, the prose contradicted the SQL-computed first line ("there
are two tasks" under "1 task matches"), invented anchors (``[TASK #55]``,
``[TODO #572]``) and said a TODO task was completed. So every sentence the
model writes is checked against the :class:`Evidence` it was given, and a
sentence that fails is removed whole (never patched: a patched sentence is a
sentence nobody wrote). The checks:

* **numbers**: every number it states (digits, dates, or number words in
  English or Spanish) is a number of the computed result or of the records
  given to it; a number that counts records ("21 tasks", "veinte tareas",
  "no critical tasks") must be one of the computed counts;
* **records**: every anchor (``TYPE #id``, bracketed or not) and every
  "task 61"-style mention names a record given to the model;
* **facet values**: a sentence naming records may not say one of them has a
  value of a declared facet (status, priority, person ...) that none of them
  has, nor deny a value they have. Facets, their values and their words come
  from the sources' declarations (the caller's :class:`Vocabulary`), never
  from this module;
* **claims**: a sentence that names a record whose text the model was given
  must be supported by a passage of that text (its content words, numbers and
  people there, the same polarity, and a close meaning by the deployment's
  embedding model): :mod:`oracle_rag.answering.chat.support`. A valid anchor on a false
  claim ("[TASK #261] is the one blocking the SSO upgrade", when #261 says
  nothing of SSO) is removed;
* **fragments**: a sentence with no word outside its anchors and numbers (a
  lone "8", "[TASK #41].") or a single word and no anchor ("16 hours.") says
  nothing a reader can check;
* **citations** (topic answers): a sentence that states something carries a
  citation of a passage given to the model. One written without a citation is
  shown with the anchor of the given record that supports it (the claim check
  above, against each given record's text), and removed when none does;
* **topic** (topic answers): when some given records are about the question's
  topic (:func:`oracle_rag.answering.structured.relevance.holds`), a sentence
  names or is attributed to one of them only: "the recurring job ran twice
  [TICKETS #4063]" is true of #4063 and no answer to why webhooks arrive twice.

What a sentence is: text up to ``.``, ``!`` or ``?`` followed by a space, or
a line. A sentence that is only anchors belongs to the one before it.
Streamed answers are checked the same way as they arrive: a sentence is held
until it is complete, then shown or dropped (:class:`SentenceChecker`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from oracle_rag.answering.chat.mentions import REMOVED
from oracle_rag.answering.chat.support import Embedder, Support
from oracle_rag.answering.structured.lexicon import fold
from oracle_rag.answering.structured.vocabulary import Vocabulary, words

_ANCHOR = re.compile(r"(?<![\w.\-])([A-Za-z][A-Za-z0-9_.\-]*)\s*#\s*([A-Za-z0-9_\-]*[0-9][A-Za-z0-9_\-]*)")
# A bracketed anchor whose id has no digit ("[PROJECT #Plataforma Clientes]", measured with a 1.5B model) and
# an upper-case type before one ("PROJECT #Atlas"): they name a record too, so it must be a given one.
# The bracketed id is read from its first to its last non-space character, so that no run of spaces can be
# split between the id and the spaces around it (a lazy id between two \s* was cubic in such a run).
_WORD_ANCHOR = re.compile(
    r"\[\s*([A-Za-z][A-Za-z0-9_.\-]*)\s*#(?:\s*([^\[\]#\s](?:[^\[\]#]*[^\[\]#\s])?))?\s*\]"
    r"|(?<![\w.\-])([A-Z][A-Z0-9_]+)\s*#\s*([A-Za-z]\w*)"
)
# A link to a record's page or API (docs/chat.md): /chunk/task/42, /api/chunks/TASK/42 names TASK #42.
_LINK = re.compile(r"/(?:api/)?chunks?/([A-Za-z][A-Za-z0-9_.\-]*)/([A-Za-z0-9_\-]+)")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:([.,])(\d+))?(?![\w])")
_BOUNDARY = re.compile(r"(?<=[.!?])[ \t]+(?=\S)|\n+")
_ONLY_ANCHORS = re.compile(
    r"^[\s\[\](),;.]*(?:\[[^\[\]#]*#[^\[\]]*\][\s\[\](),;.]*)+$"
)  # an anchor's first "#" splits it
_DONT_KNOW = re.compile(
    r"\b(do(?:es)? not (?:know|say)|don'?t (?:know|say)|not (?:enough|contain|include|mention)"
    r"|no information|cannot (?:tell|say|answer|find)|can'?t (?:tell|say)|unclear|no (?:lo )?sé"
    r"|no (?:lo )?(?:contiene|menciona|indica)|no hay informaci[oó]n)\b",
    re.IGNORECASE,
)
_MARKER = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_LIST_MARKER = re.compile(
    r"\s*\d{1,3}[.)]\s*"
)  # a numbered list item's marker: formatting, not a number stated
_WORDS = re.compile(r"[^\W\d_]{2,}")  # a word of two letters or more (a fragment has at most one)
_TYPE_NUMBER = re.compile(
    r"\b([^\W\d_]+)[ \t]+(?:no\.?[ \t]*|number[ \t]+|n[uú]mero[ \t]+)?\d+\b", re.IGNORECASE
)
_NEGATION = {"not", "no", "isn", "isnt", "aren", "arent", "never", "nunca", "ni", "without", "sin"}

# Number words, EN and ES (folded). "one"/"uno"/"una"/"un" count only before a record word.
_UNITS_EN = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS_EN = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
}
_UNITS_ES = [
    "cero",
    "uno",
    "dos",
    "tres",
    "cuatro",
    "cinco",
    "seis",
    "siete",
    "ocho",
    "nueve",
    "diez",
    "once",
    "doce",
    "trece",
    "catorce",
    "quince",
    "dieciseis",
    "diecisiete",
    "dieciocho",
    "diecinueve",
    "veinte",
    "veintiuno",
    "veintidos",
    "veintitres",
    "veinticuatro",
    "veinticinco",
    "veintiseis",
    "veintisiete",
    "veintiocho",
    "veintinueve",
]
_TENS_ES = {
    "treinta": 30,
    "cuarenta": 40,
    "cincuenta": 50,
    "sesenta": 60,
    "setenta": 70,
    "ochenta": 80,
    "noventa": 90,
    "cien": 100,
    "ciento": 100,
}
NUMBER_WORDS: dict[str, int] = {
    **{w: i for i, w in enumerate(_UNITS_EN)},
    **_TENS_EN,
    **{w: i for i, w in enumerate(_UNITS_ES)},
    **_TENS_ES,
    "una": 1,
    "un": 1,
    "veintiun": 21,
    "veintiuna": 21,
    "couple": 2,
    "dozen": 12,
    "docena": 12,
}
_WEAK_ONE = {"one", "uno", "una", "un", "couple"}
_ZERO_WORDS = {"no", "zero", "none", "ningun", "ninguna", "ninguno", "nada", "cero"}


@dataclass(frozen=True)
class Evidence:
    """What the model was given: the numbers it may state, the records it may name and their facets.

    ``counts``: the computed counts (a number stated next to a record word must be one of them; empty
    means such numbers are checked against ``numbers`` only). ``records``: (TYPE, id) of every record
    given, with its facet values and title. ``vocab``: the caller's vocabulary (declared facets, values,
    words), or None to skip facet checks. ``cite``: a claim needs a citation (topic answers)."""

    numbers: frozenset[float]
    counts: frozenset[float] = frozenset()
    records: Mapping[tuple[str, str], tuple[dict[str, Any], str]] = field(default_factory=dict)
    vocab: Vocabulary | None = None
    cite: bool = False
    dates: frozenset[str] = frozenset()
    shown: frozenset[str] = (
        frozenset()
    )  # the computed part's lines (folded): a sentence repeating one adds nothing
    support: Support | None = (
        None  # the given records' texts: what a sentence naming one must be supported by
    )
    shown_anchors: Mapping[tuple[str, str], str] = field(default_factory=dict)  # key -> "[TICKETS #4001]"
    about: frozenset[tuple[str, str]] = frozenset()  # the given records about the topic (empty: any)

    @property
    def anchors(self) -> set[tuple[str, str]]:
        return set(self.records)


def numbers_in(text: str) -> set[float]:
    """Every number written in ``text`` with digits (``1,234``, ``6.5``, ``6,5``, date parts)."""
    out: set[float] = set()
    for m in _NUMBER.finditer(text):
        whole = m.group(1).replace(",", "")
        out.add(float(whole))
        if m.group(3) is not None:
            out.add(float(f"{whole}.{m.group(3)}"))
            out.add(float(m.group(3)))
    for d in _DATE.findall(text):
        out.update(float(p) for p in d.split("-"))
    return out


def stated_number(token: str) -> float:
    """The number a token of digits states: ``1,234`` is 1234, ``6.5`` and ``6,5`` are 6.5."""
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", token):
        return float(token.replace(",", ""))
    head, _, tail = token.replace(",", ".").partition(".")
    return float(f"{head}.{tail.split('.')[0]}") if tail else float(head)


def supported(value: float, token: str, numbers: frozenset[float]) -> bool:
    """Is ``value`` one of ``numbers``, or one of them rounded as written (6.51 or 6.5 for 6.507)?"""
    if value in numbers:
        return True
    decimals = len(token.replace(",", ".").partition(".")[2]) if re.search(r"[.,]\d{1,2}$", token) else 0
    return any(n != int(n) and round(n, decimals) == value for n in numbers)


def _line(text: str) -> str:
    return " ".join(fold(_MARKER.sub("", text.strip())).split()).rstrip(".")


def evidence_from(
    texts: Iterable[str],
    *,
    counts: Iterable[float] = (),
    records: Mapping[tuple[str, str], tuple[dict[str, Any], str]] | None = None,
    vocab: Vocabulary | None = None,
    cite: bool = False,
    shown: str = "",
    record_texts: Mapping[tuple[str, str], str] | None = None,
    embed: Embedder | None = None,
) -> Evidence:
    """Evidence from the texts the model was given (facts, records, query results) and the counts.

    ``record_texts``: each given record's text, by (TYPE, id), as the model read it: a sentence
    naming one of them must be supported by it (``embed`` compares meanings; None: words only)."""
    numbers: set[float] = set()
    dates: set[str] = set()
    for text in texts:
        numbers |= numbers_in(text)
        dates.update(_DATE.findall(text))
        # as a sentence's numbers are read: digits inside words ("p99", "v3", "2G") and number words
        for token in re.findall(r"\d+(?:[.,]\d+)*|[a-z]+", fold(text)):
            if token[0].isdigit():
                numbers.add(stated_number(token))
            elif token in NUMBER_WORDS:
                numbers.add(float(NUMBER_WORDS[token]))
    given = dict(records or {})
    for facets, _title in given.values():
        for value in facets.values():
            if isinstance(value, int | float) and not isinstance(value, bool):
                numbers.add(float(value))
            elif isinstance(value, str):
                numbers |= numbers_in(value)
                dates.update(_DATE.findall(value))
    lines = frozenset(_line(x) for x in shown.split("\n") if x.strip())
    support = None
    if record_texts:
        facts = {
            key: " ".join(_fact_words(facet, value, vocab) for facet, value in given[key][0].items())
            for key in record_texts
            if key in given
        }
        people = {
            fold(label)
            for facet, names in (vocab.labels.items() if vocab else ())
            if vocab is not None and vocab.facets.get(facet) is not None and vocab.facets[facet].person
            for label in names.values()
        }
        support = Support(
            dict(record_texts),
            facts,
            embed,
            frozenset(w for p in people for w in words(p)),
            frozenset(vocab.type_words) if vocab else frozenset(),
        )
    return Evidence(
        frozenset(numbers),
        frozenset(float(c) for c in counts),
        given,
        vocab,
        cite,
        frozenset(dates),
        lines,
        support,
    )


def _fact_words(facet: str, value: Any, vocab: Vocabulary | None) -> str:
    """A facet value as words a sentence may use ("SOLVED", "Olivia Brooks", "2026-03-14")."""
    if value is None:
        return ""
    return vocab.label(facet, value) if vocab is not None else str(value)


# -- sentences -----------------------------------------------------------------------------
def split_sentences(text: str) -> list[str]:
    """``text`` cut into sentences, each keeping the whitespace that follows it (joined back verbatim)."""
    parts: list[str] = []
    last = 0
    for m in _BOUNDARY.finditer(text):
        parts.append(text[last : m.end()])
        last = m.end()
    if last < len(text):
        parts.append(text[last:])
    merged: list[list[str]] = []  # joined once at the end: appending to a string per part is quadratic
    for part in parts:
        if merged and (
            (_ONLY_ANCHORS.match(part.strip() or "x") and part.strip())
            or (len(merged[-1]) == 1 and _LIST_MARKER.fullmatch(merged[-1][0]))
        ):
            merged[-1].append(part)  # anchors belong to the sentence before; "1. " to the list item after
        else:
            merged.append([part])
    return ["".join(group) for group in merged]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""  # "number", "count", "anchor", "facet", "claim", "fragment", "citation", "removed"
    cited: bool = False
    source: str = ""  # the anchor of the record that supports an uncited claim: shown with it


def with_source(sentence: str, verdict: Verdict) -> str:
    """``sentence`` as shown: an uncited claim gets its supporting record's anchor before its final
    punctuation ("... per file [TICKETS #4003]."); its words are never changed."""
    if not verdict.source:
        return sentence
    body = sentence.rstrip()
    end = len(body.rstrip(".!?;:"))
    return f"{body[:end]} {verdict.source}{body[end:]}{sentence[len(body) :]}"


def _key(source_type: str, source_id: str) -> tuple[str, str]:
    return source_type.upper(), source_id.rstrip(".:)!?")


# How a sentence names a record, and the (type, id) each match names.
_RECORD_FORMS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], tuple[str, str]]], ...] = (
    (_LINK, lambda m: (m.group(1), m.group(2))),
    (_ANCHOR, lambda m: (m.group(1), m.group(2))),
    (_WORD_ANCHOR, lambda m: (m.group(1) or m.group(3), (m.group(2) or "") if m.group(1) else m.group(4))),
)


def check_sentence(sentence: str, evidence: Evidence) -> Verdict:
    """Does ``sentence`` say only what ``evidence`` supports? (See the module docstring.)"""
    if REMOVED in sentence:
        return Verdict(False, "removed")
    if evidence.shown and _line(sentence) in evidence.shown:
        return Verdict(False, "repeat")  # the user already sees it, verbatim, above
    sentence = re.sub(r"^\s*\d{1,3}[.)]\s+", "", sentence)  # "3. [TASK #9] ...": the 3 is the list's
    named: list[tuple[str, str]] = []
    rest = sentence
    # Links first, then anchors, then word anchors: each form is taken out before the next looks.
    for pattern, parts in _RECORD_FORMS:
        for m in pattern.finditer(rest):
            key = _key(*parts(m))
            if key not in evidence.records:
                return Verdict(False, "anchor")
            named.append(key)
        rest = pattern.sub(" ", rest)
    wording = len(_WORDS.findall(rest))
    if (
        wording == 0 or wording == 1 and not named
    ):  # "8", "16 hours.", "[TASK #4]."; "Found [TASK #4]." is a citation
        return Verdict(False, "fragment")
    vocab = evidence.vocab
    folded = fold(rest)
    if vocab is not None:
        for m in re.finditer(r"\b([a-z]+)\s+(?:no\.?\s*|number\s+|numero\s+|n[º°o]\.?\s*)?(\d+)\b", folded):
            types = [
                t
                for t in vocab.type_words.get(m.group(1), ())
                if m.group(1) in {fold(t), fold(t) + "s", fold(t).rstrip("s")}
            ]
            if not types:
                continue
            keys = [(t.upper(), m.group(2)) for t in types if (t.upper(), m.group(2)) in evidence.records]
            if keys:
                named.extend(keys)
            elif float(m.group(2)) not in evidence.numbers:  # not a name the facts use ("Sprint 14")
                return Verdict(False, "anchor")
        folded = re.sub(
            r"\b([a-z]+)\s+(?:no\.?\s*|number\s+|numero\s+)?\d+\b",
            lambda m: " " if m.group(1) in vocab.type_words else m.group(0),
            folded,
        )
    for d in _DATE.findall(folded):
        if d not in evidence.dates:
            return Verdict(False, "number")
    body = _DATE.sub(" ", folded)
    reason = _numbers_ok(body, evidence)
    if reason:
        return Verdict(False, reason)
    if named and vocab is not None and not _facets_ok(body, named, evidence, vocab):
        return Verdict(False, "facet")
    support = evidence.support
    if named and support is not None and any(support.covers(k) for k in named):
        claim = (
            rest
            if vocab is None
            else _TYPE_NUMBER.sub(lambda m: " " if fold(m.group(1)) in vocab.type_words else m.group(0), rest)
        )
        if not support.check(claim, named).ok:
            return Verdict(False, "claim")
    if evidence.about and any(k not in evidence.about for k in named):
        return Verdict(False, "topic")
    if evidence.cite and not named and _claims(sentence):
        source = support.source(rest, evidence.about or None) if support is not None else None
        if source is None:
            return Verdict(False, "citation")
        return Verdict(
            True, cited=True, source=evidence.shown_anchors.get(source, f"[{source[0]} #{source[1]}]")
        )
    return Verdict(True, cited=bool(named))


def _record_word(word: str, evidence: Evidence) -> bool:
    vocab = evidence.vocab
    if vocab is not None:
        return word in vocab.type_words
    return word in {"task", "tasks", "record", "records", "tarea", "tareas", "registro", "registros"}


def _numbers_ok(text: str, evidence: Evidence) -> str:
    tokens = re.findall(r"\d+(?:[.,]\d+)*|[a-z]+", text)
    skip = 0
    for i, token in enumerate(tokens):
        if skip:
            skip -= 1
            continue
        after = tokens[i + 1 : i + 4]
        counts_records = any(_record_word(w, evidence) for w in after)
        value: float | None = None
        if token[0].isdigit():
            value = stated_number(token)
            if not supported(value, token, evidence.numbers):
                return "number"
        elif token in NUMBER_WORDS:
            if token in _WEAK_ONE and not counts_records:
                continue
            value = float(NUMBER_WORDS[token])
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
            if token in _TENS_EN and nxt in NUMBER_WORDS and NUMBER_WORDS[nxt] < 10:
                value += NUMBER_WORDS[nxt]
                skip = 1
            elif token in _TENS_ES and nxt == "y" and i + 2 < len(tokens) and tokens[i + 2] in NUMBER_WORDS:
                value += NUMBER_WORDS[tokens[i + 2]]
                skip = 2
            counts_records = any(_record_word(w, evidence) for w in tokens[i + 1 + skip : i + 4 + skip])
            if value not in evidence.numbers:
                return "number"
        elif token in _ZERO_WORDS and tokens[i + 1 : i + 2] and counts_records:
            value = 0.0
            if evidence.counts and value not in evidence.counts:
                return "count"
            continue
        else:
            continue
        if counts_records and evidence.counts and value not in evidence.counts:
            return "count"
    return ""


def _facets_ok(text: str, named: list[tuple[str, str]], evidence: Evidence, vocab: Vocabulary) -> bool:
    """No value of a declared facet is claimed for the named records unless one of them has it.

    A value's words that a named record's own text holds ("blocked" in "the upgrade is blocked
    because ...", a comment author's name) may be what the sentence repeats from that text: the
    claim check, not the facet, decides those."""
    named = list(dict.fromkeys(named))  # a record named a thousand times is checked once
    for key in named:
        title = evidence.records[key][1]
        if title:
            text = text.replace(fold(title), " ")
    support = evidence.support
    said = (
        frozenset().union(*(support.said(k) for k in named if support.covers(k))) if support else frozenset()
    )
    tokens = list(words(text))
    longest = vocab.max_phrase
    i = 0
    while i < len(tokens):
        for n in range(min(longest, len(tokens) - i), 0, -1):
            phrase = tuple(tokens[i : i + n])
            terms = [t for t in vocab.terms.get(phrase, ()) if t.kind in ("value", "null")]
            if not terms:
                continue
            if said and all(w[:5] in said for w in phrase):  # "bloqueada" where the text says "bloqueado"
                i += n - 1
                break
            negated = any(w in _NEGATION for w in tokens[max(0, i - 2) : i])
            for term in terms:
                holders = [evidence.records[k][0] for k in named if term.facet in evidence.records[k][0]]
                if not holders:
                    continue
                has = [
                    (facets.get(term.facet) is None)
                    if term.kind == "null"
                    else (_plain(facets.get(term.facet)) in {_plain(v) for v in term.values})
                    for facets in holders
                ]
                if negated and all(has):
                    return False
                if not negated and not any(has):
                    return False
            i += n - 1
            break
        i += 1
    return True


def _plain(value: Any) -> str:
    return str(value).upper() if value is not None else ""


def _claims(sentence: str) -> bool:
    """Does a sentence state something (rather than say the records do not tell)?"""
    if _DONT_KNOW.search(sentence):
        return False
    return len(re.findall(r"\w+", sentence)) >= 4


# -- whole answers and streams --------------------------------------------------------------
@dataclass
class Checked:
    """The outcome of checking one answer's prose."""

    sentences: int = 0
    removed: int = 0
    cited: int = 0  # kept sentences that cite a given record
    reasons: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"sentences": self.sentences, "removed": self.removed}

    def note(self, verdict: Verdict) -> None:
        self.sentences += 1
        if not verdict.ok:
            self.removed += 1
            self.reasons[verdict.reason] = self.reasons.get(verdict.reason, 0) + 1
        elif verdict.cited:
            self.cited += 1


def check_text(text: str, evidence: Evidence) -> tuple[str, Checked]:
    """The sentences of ``text`` that pass, joined verbatim, and the tally."""
    tally = Checked()
    kept: list[str] = []
    for sentence in split_sentences(text):
        if not sentence.strip():
            kept.append(sentence)
            continue
        verdict = check_sentence(sentence, evidence)
        tally.note(verdict)
        if verdict.ok:
            kept.append(with_source(sentence, verdict))
    return "".join(kept).strip(), tally


class SentenceChecker:
    """Check streamed pieces: yield each sentence once it is complete and has passed."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.tally = Checked()
        self.kept: list[str] = []

    def _emit(self, sentence: str) -> Iterator[str]:
        if not sentence.strip():
            return
        verdict = check_sentence(sentence, self.evidence)
        self.tally.note(verdict)
        if verdict.ok:
            shown = with_source(sentence, verdict)
            self.kept.append(shown)
            yield shown

    def feed(self, pieces: Iterable[str]) -> Iterator[str]:
        """Sentences as they complete. The held text is split again only when a piece ends a
        sentence (a boundary with text after it) or the held text has doubled since, so a reply
        that is one endless sentence costs linear time, however finely it is streamed."""
        buffer = ""
        scan = split = 0  # where a new boundary may start; the held length when last split
        for piece in pieces:
            buffer += piece
            body = piece.rstrip(" \t\n")
            if not body:
                continue  # spaces end no sentence: the next sentence's first character does
            boundary = _BOUNDARY.search(buffer, scan)
            scan = len(buffer) - (len(piece) - len(body)) - 1  # a boundary after this character is still open
            if (boundary is None or boundary.end() == len(buffer)) and len(buffer) < 2 * split:
                continue
            parts = split_sentences(buffer)
            # the last part may still grow, and a part starting with "[" (or not started) may still be
            # anchors only
            while len(parts) > 2 or (
                len(parts) == 2 and parts[1].strip() and not parts[1].lstrip().startswith("[")
            ):
                head = parts.pop(0)
                buffer = buffer[len(head) :]
                scan = max(0, scan - len(head))
                yield from self._emit(head)
            split = len(buffer)
        yield from (s for part in split_sentences(buffer) for s in self._emit(part))

    @property
    def text(self) -> str:
        return "".join(self.kept).strip()
