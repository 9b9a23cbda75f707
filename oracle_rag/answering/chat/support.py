"""Is a sentence that names a record supported by a sentence of that record's text?

Anchors and numbers being right is not enough: "Valeria Torres' [TASK #261] task is the one
blocking the SSO upgrade" names a record the model was given, with no number to get wrong, and
#261 says nothing of SSO. So a sentence that names a record whose text the model was given must
be supported by one passage of that text (a sentence, a short comment, two sentences read together:
:func:`oracle_rag.answering.chat.passages.candidates`, the units the extractive answer quotes), together with
what holds for the whole record (its title, header lines such as ``Assignee: Ana Ruiz`` and its
facet values). A passage supports the sentence when

* its **numbers** are there (each number the sentence states is in the passage or the record's
  whole-record facts);
* the **people** it names are there (a name of a person the records know: a comment's author or a
  person facet's value) — in the passage's text or as its author, so "Jonas found the root cause"
  is not supported by Priya's comment;
* its **denials** agree: a sentence that denies ("not", "never", "without", "nunca") is supported
  only by a passage that denies one of the same words, and a passage that denies the word after its
  negation ("does not stop", "without user impact") does not support a sentence asserting it;
* its **technical words** are the record's: a word written like the name of a thing ("SSO",
  "ADFS", "v3"), unless it starts the sentence, appears somewhere in the record's text;
* its **content words** are there: the share of its words (accent- and case-folded, compared by
  their first five characters, stop words and the words that name records left out) found in the
  passage and the record's facts is at least ``MIN_COVERAGE``;
* and the two **mean the same**: the embedding similarity of the sentence and the passage (the
  deployment's model, when one is given) reaches ``MIN_SIMILARITY``, or the content words alone are
  near complete (``SURE_COVERAGE``). What holds for the whole record (its title, headers, people)
  supports a sentence only with near-complete words: "Peter Novak explained the refund was
  rejected" is not supported by Peter Novak being the ticket's requester and its title saying
  "rejected". At most ``MAX_EMBEDDED`` sentences of an answer are compared by the model (a reply of
  many near-misses costs bounded work; one more that would need it is not supported).

A sentence naming several records must be supported by each of them: "[TICKETS #4001] and [KB
#201] say ..." is read as a claim about both. A sentence with fewer than ``MIN_CLAIM`` content
words and no number makes no claim about the record ("Start with [TASK #41].") and is not checked
here. The thresholds were measured on bench/checker.py's labelled sentences (the tuning part; the
held-out part is reported apart).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oracle_rag.answering.chat.passages import STEM, Sentence, candidates, cues, split_record
from oracle_rag.answering.structured.lexicon import fold
from oracle_rag.answering.structured.vocabulary import words

Embedder = Callable[[Sequence[str]], Any]  # texts -> L2-normalised vectors (None: no model)
Key = tuple[str, str]

MIN_COVERAGE = 0.75
SURE_COVERAGE = 0.9
MIN_SIMILARITY = 0.5
MIN_CLAIM = 2  # content words a sentence needs to claim something about a record
DENIED = 3  # words after a negation that it denies
MAX_EMBEDDED = 24  # sentences of one answer compared by meaning (each is one run of the embedding model)

_WORD = re.compile(r"\w+(?:[.\-/]\w+)*")
_NUMBER = re.compile(r"\d+(?:[.,:/\-]\d+)*")  # "6.5", "1,234", "08:12", a date: one number each
_TOKEN = re.compile(r"[^\W\d_]+")  # a word of letters, as written (names are capitalised)
_CLAUSE = re.compile(r"[,;:.!?()]+")
_AUTHOR = re.compile(
    r"^-[ \t]+([^\s:()][^:()\n]{1,59}?)(?:[ \t]+\([^)\n]{1,40}\))?:[ \t]"
)  # a comment's author
# A word written like a name of a thing: a capital after its first letter, or letters and digits ("SSO",
# "ADFS", "v3", "iOS"); one that starts a sentence or is only capitalised ("Lumen", "Refunds") is not.
_TERM = re.compile(r"^[^\W\d_]+[A-Z]|^[A-Z]{2}|[^\W\d_]\d|\d[^\W\d_]")
_HEADER = re.compile(r"^[A-Z][\w ]{0,24}:\s*\S")
# Words that say where a claim comes from, not what it claims (EN, ES; folded).
_META = frozenset(
    {
        "according",
        "mention",
        "mentions",
        "mentioned",
        "state",
        "states",
        "stated",
        "note",
        "notes",
        "noted",
        "describe",
        "describes",
        "described",
        "explain",
        "explains",
        "indicate",
        "indicates",
        "indicated",
        "record",
        "records",
        "comment",
        "comments",
        "wrote",
        "write",
        "writes",
        "reply",
        "replied",
        "ticket",
        "tickets",
        "task",
        "tasks",
        "article",
        "articles",
        "kb",
        "segun",
        "indica",
        "indico",
        "menciona",
        "menciono",
        "explica",
        "explico",
        "dice",
        "dijo",
        "comenta",
        "comento",
        "comentario",
        "registro",
        "registros",
        "tarea",
        "tareas",
        "articulo",
        "articulos",
        "escribio",
        "see",
        "details",
        "more",
        "information",
    }
)
_NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "nothing",
        "none",
        "cannot",
        "nor",
        "neither",
        "without",
        "nunca",
        "ni",
        "nada",
        "ningun",
        "ninguna",
        "ninguno",
        "tampoco",
        "sin",
    }
)
_CONTRACTED = frozenset(
    {
        "isn",
        "aren",
        "wasn",
        "weren",
        "doesn",
        "don",
        "didn",
        "won",
        "couldn",
        "shouldn",
        "hasn",
        "haven",
        "wouldn",
    }
)  # "isn't": the word before the "'t"
_NEGATED_T = re.compile(
    r"\b(?:isn|aren|wasn|weren|doesn|don|didn|won|can|couldn|shouldn|hasn|haven|wouldn)['’]t\b"
)


@dataclass(frozen=True)
class Finding:
    """How well the best passage of a record supports a sentence (for the bench and tests)."""

    ok: bool
    reason: str = ""  # "words", "number", "name", "negation", "term", "meaning" when not ok
    coverage: float = 0.0
    similarity: float = 0.0
    passage: str = ""


@dataclass
class _Passage:
    text: str  # folded
    stems: frozenset[str]  # its words' stems, its authors' names among them
    numbers: frozenset[str]
    people: frozenset[str]  # folded name tokens: in its text or its author
    denials: tuple[tuple[str, ...], ...]  # what each negation in it denies (the stems after it, in order)
    shown: str


@dataclass
class _Record:
    passages: list[_Passage]  # the last one is what holds for the whole record (title, headers, facets)
    terms: frozenset[str]  # folded words of its whole text
    said: frozenset[str]  # the first five letters of each of its words, as facet values are compared
    vectors: Any = None  # the passages' embeddings, computed once when first needed


@dataclass
class Support:
    """The records' texts the model was given, split once, and the embedder to compare meanings."""

    texts: Mapping[Key, str]
    facts: Mapping[Key, str] = field(default_factory=dict)  # facet values as words, per record
    embed: Embedder | None = None
    names: frozenset[str] = frozenset()  # folded name tokens of the people the records know
    record_words: frozenset[str] = frozenset()  # folded words that name records ("ticket", "tarea")
    _split: dict[Key, _Record] = field(default_factory=dict, init=False, repr=False)
    _claims: dict[str, Any] = field(default_factory=dict, init=False, repr=False)  # claim -> its embedding

    def __post_init__(self) -> None:
        known = set(self.names)
        for key in self.texts:
            content = self.texts[key]
            known |= {
                w
                for line in content.split("\n")
                if (m := _AUTHOR.match(line.strip()))
                for w in _TOKEN.findall(fold(m.group(1)))
            }
        self.names = frozenset(w for w in known if len(w) >= 3)

    def covers(self, key: Key) -> bool:
        return key in self.texts

    def said(self, key: Key) -> frozenset[str]:
        """The first five letters of every word of a record's text (facet words it says are not claims)."""
        return self._record(key).said

    def _record(self, key: Key) -> _Record:
        found = self._split.get(key)
        if found is None:
            content = self.texts[key]
            title, sentences = split_record(content)
            headers = [
                line.strip()
                for line in content.strip().split("\n")[1:]
                if _HEADER.match(line.strip()) and len(line.split()) <= 12
            ]
            about = " ".join(x for x in [title, *headers, self.facts.get(key, "")] if x)
            units = [unit for _, unit in candidates([(title, sentences)])] + [(Sentence(about),)]
            passages = [_passage(unit, about) for unit in units]
            terms = frozenset(w for p in passages for w in _WORD.findall(p.text))
            found = _Record(passages, terms, frozenset(w[:STEM] for w in words(content)))
            self._split[key] = found
        return found

    def check(self, sentence: str, keys: Iterable[Key]) -> Finding:
        """Is ``sentence`` (its anchors already taken out) supported by each of the records ``keys``?"""
        claim = _Claim.of(sentence, self)
        if len(claim.stems) < MIN_CLAIM and not claim.numbers:
            return Finding(True)
        worst: Finding | None = None
        for key in dict.fromkeys(keys):
            if key not in self.texts:
                continue
            found = self._best(claim, key)
            if not found.ok:
                return found
            worst = found if worst is None or found.coverage < worst.coverage else worst
        return worst or Finding(True)

    def source(self, sentence: str, among: Iterable[Key] | None = None) -> Key | None:
        """The given record that supports ``sentence``, a claim the model wrote without citing one;
        None when it claims too little to be checked or no record supports it.

        A small model often writes the right sentence and no anchor. Removing it threw away prose
        the records support; the sentence is shown with the anchor of the record that supports it
        (the closest in meaning, then in words, when several do), and still removed when none does.
        ``among``: the records it may be attributed to (None: any given one)."""
        claim = _Claim.of(sentence, self)
        if len(claim.stems) < MIN_CLAIM and not claim.numbers:
            return None
        allowed = None if among is None else set(among)
        found = [
            (f.similarity, f.coverage, -n, key)
            for n, key in enumerate(self.texts)
            if (allowed is None or key in allowed) and (f := self._best(claim, key)).ok
        ]
        return max(found)[3] if found else None

    def _best(self, claim: _Claim, key: Key) -> Finding:
        record = self._record(key)
        if not claim.terms <= record.terms:
            return Finding(False, "term")
        about = record.passages[-1]
        best = Finding(False, "words")
        eligible: list[tuple[int, float]] = []
        for n, passage in enumerate(record.passages):
            have = passage.stems | about.stems
            coverage = len(claim.stems & have) / len(claim.stems) if claim.stems else 1.0
            reason = _fails(claim, passage, about)
            if reason:
                if best.reason == "words" or coverage > best.coverage:
                    best = Finding(False, reason, round(coverage, 4), 0.0, passage.shown)
                continue
            if coverage < MIN_COVERAGE:
                if best.reason == "words" and coverage >= best.coverage:
                    best = Finding(False, "words", round(coverage, 4), 0.0, passage.shown)
                continue
            if coverage >= SURE_COVERAGE:
                return Finding(True, "", round(coverage, 4), 0.0, passage.shown)
            if (
                passage is not about
            ):  # the record's facts alone (its people, its title) support only what they say
                eligible.append((n, coverage))
        if not eligible:
            return best
        similarities = self._similarities(claim.text, record, [n for n, _ in eligible])
        if similarities is None:  # no model to compare meanings: the words decide
            n, coverage = max(eligible, key=lambda e: e[1])
            return Finding(True, "", round(coverage, 4), 0.0, record.passages[n].shown)
        n, coverage = max(eligible, key=lambda e: similarities.get(e[0], 0.0))
        similarity = similarities.get(n, 0.0)
        ok = similarity >= MIN_SIMILARITY
        return Finding(
            ok, "" if ok else "meaning", round(coverage, 4), round(similarity, 4), record.passages[n].shown
        )

    def _similarities(self, claim: str, record: _Record, wanted: list[int]) -> dict[int, float] | None:
        """Cosine similarity of the claim and each wanted passage; None when no model can embed them."""
        if self.embed is None:
            return None
        if record.vectors is None:
            found = self.embed([p.shown for p in record.passages])
            record.vectors = np.zeros((0, 0)) if found is None else np.asarray(found, dtype=np.float32)
        if record.vectors.shape[0] != len(record.passages):
            return None
        mine = self._claims.get(claim)
        if mine is None:
            if len(self._claims) >= MAX_EMBEDDED:  # a reply of many near-misses: bounded work, not supported
                return {}
            mine = self.embed([claim])
            if mine is None:
                return None
            self._claims[claim] = mine
        vector = np.asarray(mine, dtype=np.float32)[0]
        return {n: float(record.vectors[n] @ vector) for n in wanted}


@dataclass(frozen=True)
class _Claim:
    text: str
    stems: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]
    terms: frozenset[
        str
    ]  # folded technical words and names of things ("SSO", "v3"): in the record or not said
    denials: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, sentence: str, support: Support) -> _Claim:
        folded = fold(sentence)
        numbers = frozenset(_number(t) for t in _NUMBER.findall(folded))
        names = frozenset(
            fold(w) for w in _TOKEN.findall(sentence) if w[:1].isupper() and fold(w) in support.names
        )
        skip = cues().stopwords | _META | support.record_words
        stems = frozenset(
            _stem(w)
            for w in _WORD.findall(folded)
            if w not in skip
            and len(w) > 1
            and not w[0].isdigit()
            and w not in _NEGATIONS
            and w not in _CONTRACTED
        )
        written = _WORD.findall(sentence)
        terms = frozenset(
            fold(w)
            for w in written[1:]
            if _TERM.search(w) and fold(w) not in support.names and fold(w) not in skip
        )
        return cls(" ".join(sentence.split()), stems, numbers, names, terms, _denials(folded))


def _passage(unit: tuple[Sentence, ...], about: str) -> _Passage:
    text = fold(" ".join(s.text for s in unit))
    authors = " ".join(fold(s.author) for s in unit if s.author)
    return _Passage(
        text,
        frozenset(_stems(text + " " + authors)),
        frozenset(_number(t) for t in _NUMBER.findall(text)),
        frozenset(_TOKEN.findall(text + " " + authors)),
        _denials(text),
        " ".join(s.text for s in unit),
    )


def _fails(claim: _Claim, passage: _Passage, about: _Passage) -> str:
    """Why ``passage`` (with what holds for its whole record) cannot support ``claim``, or ""."""
    if not claim.numbers <= passage.numbers | about.numbers:
        return "number"
    if not claim.names <= passage.people:
        return "name"
    for denied in claim.denials:  # the claim denies: so must the passage, about the same thing
        if denied and not any(set(denied) & set(other) for other in passage.denials):
            return "negation"
    for denied in passage.denials:  # the passage denies what the claim asserts
        if denied and denied[0] in claim.stems and not any(denied[0] in other for other in claim.denials):
            return "negation"
    return ""


def _stem(word: str) -> str:
    """A word as compared: its first STEM characters, a plural "s" dropped first ("stops" meets "stop")."""
    return (word[:-1] if len(word) > 3 and word.endswith("s") else word)[:STEM]


def _stems(folded: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(folded) if len(w) > 1}


def _denials(folded: str) -> tuple[tuple[str, ...], ...]:
    """What each negation of a text denies: the stems of up to DENIED words after it, in its clause.

    A claim that denies needs a passage denying one of the same words; a passage denying the first
    word after its negation ("does not stop", "without user impact", "cannot be changed") cannot
    support a claim that asserts that word."""
    out = []
    for clause in _CLAUSE.split(_NEGATED_T.sub(" not ", folded)):
        found = _WORD.findall(clause)
        for i, w in enumerate(found):
            if w in _NEGATIONS:  # a bounded window: "not not not ..." costs what its words cost
                after = [
                    x
                    for x in found[i + 1 : i + 1 + 4 * DENIED]
                    if x not in _NEGATIONS and x not in cues().stopwords
                ][:DENIED]
                out.append(tuple(_stem(x) for x in after))
    return tuple(out)


def _number(token: str) -> str:
    """A number as compared: "6,5" and "6.5" alike, "1,234" as 1234, leading zeros dropped."""
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", token):
        token = token.replace(",", "")
    token = token.replace(",", ".")
    head, _, tail = token.partition(".")
    tail = tail.rstrip("0")
    return (head.lstrip("0") or "0") + ("." + tail if tail else "")
