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
too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .lexicon import RECORD_WORDS, STOPWORDS, fold_latin
from .vocabulary import words

ABOUT = 0.5  # the share of the topic's words a record about it holds
EVIDENCE_DEPTH = 5  # how many of the first retrieved records may hold the evidence
STEM = 5


def topic_stems(topic: str) -> frozenset[str]:
    """The topic's content words, by their first :data:`STEM` letters. Words that ask for a part of a
    record ("what is its *goal*", "*when* does it start") rank the part to show, but say nothing of what
    the records are about."""
    return frozenset(w[:STEM] for w in words(topic)
                     if w not in STOPWORDS and w not in RECORD_WORDS and len(w) > 2)


def restricts(topic: str) -> bool:
    """Whether ``topic`` names anything records can be about (else it only ranks them)."""
    return bool(topic_stems(topic))


def coverage(stems: frozenset[str], text: str) -> float:
    """The share of ``stems`` that ``text`` holds (1.0 for an empty topic: nothing to miss)."""
    if not stems:
        return 1.0
    have = {w[:STEM] for w in words(text)}
    return len(stems & have) / len(stems)


def holds(stems: frozenset[str], text: str) -> bool:
    """``text`` holds :data:`ABOUT` of the topic's words, and both of a two-word topic ("SSO upgrade": a
    record about an upgrade of something else holds half of it)."""
    need = len(stems) if len(stems) == 2 else math.ceil(ABOUT * len(stems))
    # a word that starts with a stem contains it: texts without enough stems are not split into words
    plain = fold_latin(text)
    if sum(stem in plain for stem in stems) < need:
        return False
    share = coverage(stems, text)
    return share >= ABOUT and (len(stems) != 2 or share == 1.0)


def is_about(topic: str, text: str) -> bool:
    return holds(topic_stems(topic), text)


def weak_evidence(topic: str, texts: Iterable[str]) -> bool:
    """No record among the first :data:`EVIDENCE_DEPTH` holds the topic (:func:`holds`)."""
    stems = topic_stems(topic)
    if not stems:
        return False
    return not any(holds(stems, t) for t in list(texts)[:EVIDENCE_DEPTH])
