"""Whether a record is about a question's topic, and whether a question's best evidence is weak.

A topic ranks records, but ranking always returns something: the most
similar records exist even when none is about the topic. What the product
says must not depend on that, so "about" is a floor, and the floor is the
share of the topic's words a record holds (:func:`coverage`): its content
words (folded, filler removed, three letters or more) compared by their first
five letters, so "invoices" holds "invoice" and "facturas" holds "factura".

A two-word topic needs both words ("SSO upgrade": a record about an upgrade
of something else holds half of it). The floor, :data:`ABOUT`, is measured on the help desk of ``bench/data/
helpdesk`` (``bench/relevance_floor.py`` prints it): the best of the first
:data:`EVIDENCE_DEPTH` retrieved records holds at least half of the topic's
words for each of the 55 questions a record answers in the question's
language, and less than half for 9 of the 10 questions nothing answers (a
floor of 0.6 starts calling answered questions unanswered). Word coverage does
not depend on the embedding model (a distance floor would move with it) and
says why in one line. What it cannot see: a question in one language about
records written only in another (median 0.41 there; the keyword leg's limit
too). The EN/ES word map of the lexicon (``crossing``) lifts that to 0.55; it is used for an open
question whose own words found nothing (:func:`translated`: its topic's words in the other language
search the records written there, which must hold the topic through the map and its names), never for
a filter or a list's relevance.
An open question's evidence must also hold the proper names the question gives its topic
(:func:`names`): the same problem at another customer does not answer it (with the names, the
floor says so for all 10 questions nothing answers, and for no more answered ones).
Across languages the embedding model vouches instead (:func:`other_language_similarity`): a first record in
the other language as similar to the question as the model's ``about_similarity`` (declared per
model, since each model's similarities sit in their own range) is evidence; records in the
question's own language stay judged by their words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from oracle_rag.answering.structured.lexicon import EN_ES, RECORD_WORDS, STOPWORDS, fold_latin
from oracle_rag.answering.structured.understanding import language_of
from oracle_rag.answering.structured.vocabulary import words

ABOUT = 0.5  # the share of the topic's words a record about it holds
EVIDENCE_DEPTH = 5  # how many of the first retrieved records may hold the evidence
STEM = 5
_WORD = re.compile(r"\w+")
# month and day names: capitalised in English, but not names of what a record is about
_CALENDAR = frozenset(
    w[:STEM]
    for w in (
        "january february march april may june july august september october november december "
        "monday tuesday wednesday thursday friday saturday sunday"
    ).split()
)


def _equivalents() -> dict[str, frozenset[str]]:
    """Each stem of :data:`~oracle_rag.answering.structured.lexicon.EN_ES` and the stems of its
    other-language words."""
    table: dict[str, set[str]] = {}
    for en, es in EN_ES:
        a, b = en[:STEM], es[:STEM]
        if a != b:
            table.setdefault(a, set()).add(b)
            table.setdefault(b, set()).add(a)
    return {stem: frozenset(others) for stem, others in table.items()}


EQUIVALENTS = _equivalents()


def topic_stems(topic: str) -> frozenset[str]:
    """The topic's content words, by their first :data:`STEM` letters. Words that ask for a part of a
    record ("what is its *goal*", "*when* does it start") rank the part to show, but say nothing of what
    the records are about."""
    return frozenset(
        w[:STEM] for w in words(topic) if w not in STOPWORDS and w not in RECORD_WORDS and len(w) > 2
    )


def restricts(topic: str) -> bool:
    """Whether ``topic`` names anything records can be about (else it only ranks them)."""
    return bool(topic_stems(topic))


def coverage(stems: frozenset[str], text: str, crossing: bool = False) -> float:
    """The share of ``stems`` that ``text`` holds (1.0 for an empty topic: nothing to miss); with
    ``crossing``, a stem is also held by its other-language word (:data:`EQUIVALENTS`)."""
    if not stems:
        return 1.0
    have = {w[:STEM] for w in words(text)}
    other = EQUIVALENTS if crossing else {}
    return sum(1 for s in stems if s in have or not other.get(s, frozenset()).isdisjoint(have)) / len(stems)


def holds(stems: frozenset[str], text: str, crossing: bool = False) -> bool:
    """``text`` holds :data:`ABOUT` of the topic's words, and both of a two-word topic ("SSO upgrade": a
    record about an upgrade of something else holds half of it). ``crossing``: see :func:`coverage`
    (used only on records written in the other language that a search of the topic's translated words
    found, for an open question: mixed with records in the question's language, the extractive answer
    ranks sentences by the question's own words and cites the wrong record first;
    ``bench/relevance_floor.py --crossing`` measures the map alone)."""
    need = len(stems) if len(stems) == 2 else math.ceil(ABOUT * len(stems))
    # a word that starts with a stem contains it: texts without enough stems are not split into words
    plain = fold_latin(text)
    other = EQUIVALENTS if crossing else {}
    if sum(stem in plain or any(o in plain for o in other.get(stem, ())) for stem in stems) < need:
        return False
    share = coverage(stems, text, crossing)
    return share >= ABOUT and (len(stems) != 2 or share == 1.0)


def is_about(topic: str, text: str, crossing: bool = False) -> bool:
    return holds(topic_stems(topic), text, crossing)


def other_language(text: str, language: str) -> bool:
    """Whether ``text`` is written in the other language than ``language`` ("en" or "es"), by its
    function words as a question's language is read."""
    return language_of(list(words(text))) != language


def other_language_similarity(
    texts: Sequence[str], similarity: Sequence[float | None], language: str
) -> float | None:
    """The best similarity to the question (``similarity``: the model's cosine per record, None when it
    is not among the question's nearest) of the first :data:`EVIDENCE_DEPTH` records written in the other
    language than the question, whose words cannot hold the topic's; None when there is none. Over the
    model's ``about_similarity`` the model vouches for that record. Only there: a record in the
    question's own language is judged by its words, which do not move with the model."""
    found = [
        sim
        for text, sim in zip(list(texts)[:EVIDENCE_DEPTH], similarity, strict=False)
        if sim is not None and other_language(text, language)
    ]
    return max(found, default=None)


def names(topic: str, question: str) -> frozenset[str]:
    """The proper names of ``topic`` by their stems ("Northwind", "Ironbridge Rail", "CFDI"): its words
    written with a capital letter in ``question`` other than its first word, less month and day names (a
    record may write the date another way). A question typed in capitals or in title case names nothing."""
    written = _WORD.findall(question)
    if not written or 2 * sum(w[0].isupper() for w in written) > len(written):
        return frozenset()
    first = written[0]
    return frozenset(
        fold_latin(w)[:STEM]
        for w in _WORD.findall(topic)
        if w[0].isupper() and w != first and len(w) > 2 and fold_latin(w)[:STEM] not in _CALENDAR
    )


def _translations() -> dict[str, tuple[str, ...]]:
    """Each stem of :data:`~oracle_rag.answering.structured.lexicon.EN_ES` and its other-language words."""
    table: dict[str, list[str]] = {}
    for en, es in EN_ES:
        if en[:STEM] != es[:STEM]:
            table.setdefault(en[:STEM], []).append(es)
            table.setdefault(es[:STEM], []).append(en)
    return {stem: tuple(dict.fromkeys(others)) for stem, others in table.items()}


TRANSLATIONS = _translations()


def translated(topic: str) -> str:
    """The topic's words the lexicon's EN/ES map holds, in the other language ("login timeout mobile
    app" -> "sesion espera movil aplicacion"); empty when it holds none. What a keyword search for
    records written in the other language is given, for an open question only: the map never reaches
    a filter or a list's relevance."""
    return " ".join(dict.fromkeys(o for s in sorted(topic_stems(topic)) for o in TRANSLATIONS.get(s, ())))


def weak_evidence(
    topic: str, texts: Iterable[str], crossing: bool = False, named: frozenset[str] = frozenset()
) -> bool:
    """No record among the first :data:`EVIDENCE_DEPTH` holds the topic (:func:`holds`) and each of the
    names it is ``named`` by (:func:`names`): records about API rate limiting at other customers do not
    answer "what did we decide about the rate limiting problem of Northwind?"."""
    stems = topic_stems(topic)
    if not stems:
        return False
    return not any(holds(stems, t, crossing) and holds_names(named, t) for t in list(texts)[:EVIDENCE_DEPTH])


def holds_names(named: frozenset[str], text: str) -> bool:
    """``text`` holds every name of ``named`` (:func:`names`)."""
    return not named or named <= {w[:STEM] for w in words(text)}
