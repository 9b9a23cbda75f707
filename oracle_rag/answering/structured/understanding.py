"""Query understanding: a question to lookups, facet conditions, a count and a topic.

Deterministic and model-free, run before retrieval. In order:

1. id mentions ("task 42", "#42", "TASK-42", "tarea 42", "sprint 7", "project 3")
   and ISO dates after "before"/"after";
2. words, accent- and case-folded; "per <facet>", "por <faceta>", "who ... most";
3. the longest phrase at each position among the vocabulary (facet values,
   names, synonyms) and the intent words (counts, negation, "my", due dates);
   a value that needs its cue ("active" of a sprint) counts only near it;
4. negation ("not done", "no bloqueadas"), "my"/"mis"/"tengo" as the caller,
   "overdue", "due this week", "unassigned";
5. a value that is not known after a cue ("project Atlas Biling") becomes a
   notice with the closest known name, never a silent guess;
6. what is left, minus filler words, is the topic that ranks the records.

The result names facets only through the vocabulary, so a predicate built
from it can only use declared facet names (``answers.predicates``).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from oracle_rag.answering.structured import lexicon as lx
from oracle_rag.answering.structured.attachment import Role, attach, topic_records
from oracle_rag.answering.structured.dates import BOUND_OPS, DATE_BOUND
from oracle_rag.answering.structured.lexicon import fold
from oracle_rag.answering.structured.numbers import AGGREGATE_WORDS, Comparison, comparisons
from oracle_rag.answering.structured.targets import (
    PERSON,
    Intent,
    IntentKind,
    Slot,
    Targets,
    choose_targets,
    concrete,
    group_facet,
)
from oracle_rag.answering.structured.typos import Corrector
from oracle_rag.answering.structured.understood import Condition, Notice, Understanding
from oracle_rag.answering.structured.vocabulary import Phrase, Term, Vocabulary

__all__ = ["Condition", "Notice", "QueryParser", "Understanding"]

# An id after a record word: "42", "#42", "-42", "no. 42", "número 42". Each whitespace run is read one
# way only (a marker or a dash is followed by its own run; no two runs can split the same spaces), so a
# record word followed by thousands of spaces costs one pass, not one per way of cutting the spaces.
_NUMBER = r"\s*(?:(?:#|n[o\u00ba\u00b0]\.?|num(?:ero)?\.?|n[u\u00fa]mero)\s*)?(?:-\s*)?(\d{1,9})\b"
_BARE = re.compile(r"(?<![\w#])#\s?(\d{1,9})\b")
_WORD = re.compile(r"[^\W_]+")
_QUOTED = re.compile(
    r"[\"'\u2018\u2019\u201c\u201d\u00ab\u00bb]([^\"'\u2018\u2019\u201c\u201d\u00ab\u00bb]{2,60})"
    r"[\"'\u2018\u2019\u201c\u201d\u00ab\u00bb]"
)
CUE_DISTANCE = 3


@dataclass
class _Token:
    text: str
    word: str
    start: int
    end: int
    used: str | None = None
    typed: str = ""  # the word as typed, when read as another (a typo)

    @property
    def capitalised(self) -> bool:
        return self.text[:1].isupper()


@dataclass
class _Match:
    start: int  # token index
    end: int  # exclusive
    meanings: list[Any]


@dataclass
class _Reading:
    """One question as the parser's steps read it: the words, what each is used as, the language, the
    slots and intents found so far. Made per call and never kept (the parser is shared by threads)."""

    question: str
    out: Understanding
    caller_id: int | None
    today: dt.date
    language: str = "en"
    tokens: list[_Token] = field(default_factory=list)
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # characters claimed: (start, end, by)
    mentions: list[tuple[list[str], str, int, int]] = field(default_factory=list)  # record ids
    named: list[str] = field(default_factory=list)  # types named by their words
    named_facets: frozenset[str] = frozenset()
    slots: list[Slot] = field(default_factory=list)
    intents: list[Intent] = field(default_factory=list)


def _lexicon_table() -> dict[Phrase, list[Any]]:
    table: dict[Phrase, list[Any]] = {}
    groups: list[tuple[str, tuple[Phrase, ...]]] = [
        ("count", lx.COUNT),
        ("negation", lx.NEGATION),
        ("caller", lx.CALLER),
        ("overdue", lx.OVERDUE),
        ("no_due", lx.NO_DUE_DATE),
        ("most", lx.MOST),
        ("fewest", lx.FEWEST),
        ("open", lx.OPEN),
        ("finished", lx.FINISHED),
        ("nobody", lx.NOBODY),
        ("advice", lx.ADVICE),
    ]
    groups += [(f"window:{name}", items) for name, items in lx.WINDOWS.items()]
    for name, items in groups:
        for phrase in items:
            table.setdefault(phrase, []).append(name)
    return table


_LEXICON = _lexicon_table()
# Intents that describe records ("open tickets") and so are filters only where they describe the records
# asked for.
_DESCRIBING = ("open", "finished", "nobody", "overdue")
# Intents a value phrase may mean instead, for a type without that value ("closed" of tickets).
_LEXICAL_SLOTS = ("open", "finished", "nobody")


def language_of(words: list[str]) -> str:
    es = sum(1 for w in words if w in lx.SPANISH)
    en = sum(1 for w in words if w in lx.ENGLISH)
    return "es" if es > en else "en"


class QueryParser:
    """Turns questions into :class:`Understanding` with one :class:`Vocabulary`."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.table: dict[Phrase, list[Any]] = {p: list(m) for p, m in _LEXICON.items()}
        for phrase, terms in vocab.terms.items():
            self.table.setdefault(phrase, []).extend(terms)
        self.max_len = max((len(p) for p in self.table), default=1)
        self.cues: dict[str, list[str]] = {}
        for facet in vocab.facets.values():
            for cue in facet.cues:
                self.cues.setdefault(fold(cue), []).append(facet.name)
        self.date_cues = {
            fold(c) for f in vocab.facets.values() if f.kind == "date" for c in f.cues
        } | lx.DUE_CUES
        self.long_cues = {tuple(c.split()) for c in self.cues if " " in c} - set(self.table)
        self.long_cues_max = max((len(c) for c in self.long_cues), default=0)
        self.number_cues = {
            w
            for f in vocab.facets.values()
            if f.kind == "number"
            for c in f.cues
            for w in [fold(c), *fold(c).split()]
        }
        known = (
            {w for phrase in self.table for w in phrase}
            | set(vocab.type_words)
            | set(self.cues)
            | set(lx.STOPWORDS)
            | set(lx.SPANISH)
            | set(lx.ENGLISH)
            | set(lx.OTHER_AGGREGATE)
            | set(lx.RECORD_WORDS)
        )
        candidates = {w for phrase in self.table for w in phrase} | set(vocab.type_words) | set(self.cues)
        meaning: dict[str, set[Any]] = {}
        for phrase, found in self.table.items():
            for w in phrase:
                meaning.setdefault(w, set()).update(
                    (m.facet, m.values) if isinstance(m, Term) else m for m in found
                )
        self.corrector = Corrector(known, candidates, {w: frozenset(m) for w, m in meaning.items() if m})
        # words that only ever name someone or something (a first or last name, a project's word):
        # an ordinary word is often one letter from one ("names": James, "trace": Grace, "clerk": Clark)
        self.name_words = frozenset(
            w
            for w, found in meaning.items()
            if found
            and all(isinstance(m, tuple) and self.vocab.facets[m[0]].kind == "ref" for m in found)
            and w not in vocab.type_words
            and w not in self.cues
        )
        self._id_patterns: list[tuple[list[str], re.Pattern[str]]] = []
        for word, types in sorted(vocab.type_words.items(), key=lambda kv: -len(kv[0])):
            self._id_patterns.append((types, re.compile(rf"\b{re.escape(word)}{_NUMBER}", re.IGNORECASE)))
        self._bare_types = [t for t in vocab.types if vocab.meaning(t).bare_ids]

    # -- the steps -----------------------------------------------------------------------
    def parse(
        self,
        question: str,
        caller_id: int | None = None,
        today: dt.date | None = None,
        drop: tuple[str, ...] = (),
    ) -> Understanding:
        """One question's reading, step by step. Everything learnt about the question lives in a
        :class:`_Reading` made here and passed through the steps: one parser serves every thread of a
        server (it is cached per scope), so it holds nothing of any one question."""
        r = _Reading(
            question, Understanding(question, dropped=tuple(drop)), caller_id, today or dt.date.today()
        )
        numbers, bounds = self._claim_spans(r)
        self._tokenise(r)
        self._dates_and_numbers(r, bounds, numbers)
        self._aggregate_of_numbers(r.tokens, r.out)
        self._named_types(r)
        group = self._group_by(r)
        matches = self._phrases(r.tokens)
        if self._uncorrect(r.tokens, matches, r.out):
            matches = self._phrases(r.tokens)
        self._interpret(r, matches)
        strong, weak = self._types(r.tokens)
        targets = choose_targets(self.vocab, strong, weak, r.slots, r.intents, group)
        conditions, notes = self._conditions(r, targets.types)
        first = targets.types[0] if targets.types else None
        self._mentions_to_lookups(r.tokens, r.mentions, strong, r.out, conditions.setdefault(first or "", []))
        self._notices(r)
        self._conclude(r, targets, group, conditions, notes)
        return r.out

    def _claim_spans(self, r: _Reading) -> tuple[list[Comparison], list[tuple[int, str, str, str]]]:
        """Number comparisons, record ids and dates, found in the text before it is split into words: their
        characters are claimed, so their words are neither values nor topic."""
        numbers = [c for c in comparisons(r.question) if self.number_cues]
        r.spans += [(c.start, c.end, "number") for c in numbers]
        r.mentions = self._mentions(r.question, r.spans)
        return numbers, self._date_bounds(r.question, r.spans)

    def _tokenise(self, r: _Reading) -> None:
        """The words, folded, those inside a claimed span marked; the language; multi-word cues joined;
        one typo per unknown word read as the known word it is close to."""
        r.tokens = [
            _Token(m.group(0), fold(m.group(0)), m.start(), m.end()) for m in _WORD.finditer(r.question)
        ]
        owner = [-1] * len(
            r.question
        )  # per character, the last span claiming it (linear, not tokens x spans)
        for k, (start, end, _why) in enumerate(r.spans):
            owner[start:end] = [k] * (end - start)
        for tok in r.tokens:
            if (k := max(owner[tok.start : tok.end], default=-1)) >= 0:
                tok.used = r.spans[k][2]  # the last span listed that overlaps the word
        r.out.language = r.language = language_of([t.word for t in r.tokens])
        r.tokens = self._join_cues(r.tokens, r.question)
        self._correct(r.tokens, r.out)

    def _dates_and_numbers(
        self, r: _Reading, bounds: list[tuple[int, str, str, str]], numbers: list[Comparison]
    ) -> None:
        for b_start, op, day, text in bounds:
            r.intents.append(
                Intent(
                    IntentKind.BOUND,
                    False,
                    text,
                    op=op,
                    day=day,
                    cues=self._near_cues(r.tokens, b_start),
                    at=b_start,
                )
            )
        for c in numbers:
            r.intents.append(
                Intent(
                    IntentKind.NUMBER,
                    False,
                    c.text,
                    op=c.op,
                    numbers=c.values,
                    cues=self._number_cues(r.tokens, c.start, c.end),
                    at=c.start,
                )
            )

    def _named_types(self, r: _Reading) -> None:
        """The types the question names by their words, and their facets (a value of one of those is
        preferred to the same value of another type's facet)."""
        r.named = [t for tok in r.tokens for t in self.vocab.type_words.get(tok.word, [])]
        r.named_facets = frozenset(f for t in r.named for f in self.vocab.types.get(t, ()))
        r.out.other_aggregate = r.out.other_aggregate or any(
            t.word in lx.OTHER_AGGREGATE and t.used is None for t in r.tokens
        )

    def _conditions(self, r: _Reading, types: list[str]) -> tuple[dict[str, list[Condition]], list[str]]:
        """Each target type's conditions from the slots and intents, and what could not be applied."""
        conditions: dict[str, list[Condition]] = {}
        notes: list[str] = []
        for t in types:
            made = concrete(self.vocab, t, r.slots, r.intents, r.caller_id, r.today, r.language)
            conditions[t] = made.conditions
            notes += [n for n in made.notes if n not in notes]
        return conditions, notes

    def _conclude(
        self,
        r: _Reading,
        targets: Targets,
        group: list[str],
        conditions: dict[str, list[Condition]],
        notes: list[str],
    ) -> None:
        """What is asked of which types, the group, and the words left over as the topic."""
        out, tokens = r.out, r.tokens
        first = targets.types[0] if targets.types else None
        out.per_type = {
            t: self._merge([c for c in conds if c.key not in out.dropped])
            for t, conds in conditions.items()
            if t
        }
        if group:
            out.group_by = group_facet(self.vocab, first, group) if first else None
            if out.group_by is None:
                out.superlative = None
        if out.group_by and len(targets.types) > 1:
            keep = [t for t in targets.types if group_facet(self.vocab, t, group) == out.group_by]
            targets.types = keep or targets.types[:1]
        asked = out.count or out.group_by or out.has_conditions or out.advice or (notes and targets.strong)
        out.targets = list(targets.types) if asked else []
        out.target_type = out.targets[0] if out.targets else None
        out.conditions = out.per_type.get(out.target_type or "", [])
        out.notes = notes if out.targets else []
        if out.targets and (out.count or out.has_conditions) and not out.lookups:
            out.notes += [n for n in self._unknown_values(tokens, out) if n not in out.notes]
        out.topic = " ".join(
            t.text
            for t in tokens
            if t.used is None
            and t.word not in lx.NOT_TOPIC
            and t.word not in self.vocab.type_words
            and t.word not in self.cues
        )
        roles = self._roles(r, [])
        out.asked_types = list(
            dict.fromkeys(
                kind
                for i, t in enumerate(tokens)
                if t.used == "type" and roles[i] is Role.RECORD and t.word not in self.cues
                for kind in self.vocab.type_words[t.word]
            )
        )

    def _unknown_values(self, tokens: list[_Token], out: Understanding) -> list[str]:
        """Not silent: a word that reads like a value of the records named ("rechazados" in "mis pedidos
        rechazados", "rejected orders") but is no known value is said, not dropped: the word right before
        the record word in English, right after it (or after its "de") in Spanish, when it is no
        known word."""
        notes = []
        step = 1 if out.language == "es" else -1
        for i, t in enumerate(tokens):
            j = i + step
            if (
                step == 1
                and j + 1 < len(tokens)
                and tokens[j].word in ("de", "del")
                and tokens[j].used is None
            ):
                j += 1  # "pedidos de mobiliario"
            if t.used != "type" or not 0 <= j < len(tokens):
                continue
            w = tokens[j]
            if (
                w.used is not None
                or len(w.word) < 4
                or not w.word.isalpha()
                or w.word in self.corrector.known
            ):
                continue
            plural = self.vocab.meaning(out.target_type).noun(2, out.language)
            w.used = "unknown"  # said, and neither a filter nor a topic that would narrow the list
            notes.append(
                f"“{w.text}” no es un valor conocido de {plural}: no se aplicó como filtro"
                if out.language == "es"
                else f"“{w.text}” is not a known value of {plural}: not applied as a filter"
            )
        return notes

    def _correct(self, tokens: list[_Token], out: Understanding) -> None:
        """One typo per unknown word of five letters or more, when one known word is that close."""
        for i, t in enumerate(tokens):
            if t.used is not None:
                continue
            before = tokens[i - 1].word if i else ""
            after = tokens[i + 1].word if i + 1 < len(tokens) else ""

            def fits(word: str, before: str = before, after: str = after) -> bool:
                return (before, word) in self.table or (word, after) in self.table

            fixed = self.corrector.correct(t.word, fits)
            if fixed in self.name_words and not (fits(fixed) or (t.capitalised and i > 0)):
                # a lowercase word one letter from a name is a word of the topic ("product names"), not
                # a misspelt name: read as one only when written as a name or completing one
                continue
            if fixed is not None:
                t.word, t.typed = fixed, t.word
                out.read_as.append(fixed)

    def _uncorrect(self, tokens: list[_Token], matches: list[_Match], out: Understanding) -> bool:
        """A corrected word that is part of no phrase was not a typo of one: it is read as written."""
        inside = {i for m in matches for i in range(m.start, m.end)}
        undone = False
        for i, t in enumerate(tokens):
            if (
                t.typed
                and i not in inside
                and t.used is None
                and t.word not in self.vocab.type_words
                and t.word not in self.cues
            ):
                out.read_as.remove(t.word)
                t.word, t.typed = t.typed, ""
                undone = True
        return undone

    def _join_cues(self, tokens: list[_Token], question: str) -> list[_Token]:
        """A cue of several words ("fecha limite", "needed by", "story points") becomes one token, so it
        names its facet like a one-word cue does (a phrase that is also a value or a lexicon phrase stays
        as it is)."""
        if not self.long_cues:
            return tokens
        out: list[_Token] = []
        i = 0
        while i < len(tokens):
            for n in range(min(self.long_cues_max, len(tokens) - i), 1, -1):
                window = tokens[i : i + n]
                phrase = tuple(t.word for t in window)
                if phrase in self.long_cues and all(t.used is None for t in window):
                    out.append(
                        _Token(
                            question[window[0].start : window[-1].end],
                            " ".join(phrase),
                            window[0].start,
                            window[-1].end,
                        )
                    )
                    i += n
                    break
            else:
                out.append(tokens[i])
                i += 1
        return out

    def _number_cues(self, tokens: list[_Token], start: int, end: int) -> tuple[str, ...]:
        """Number facets' cue words next to a comparison ("amount above 5k", "more than 3 story points");
        they name the facet, so they are neither a topic nor an aggregate word."""
        near = [t for t in tokens if t.end <= start][-2:] + [t for t in tokens if t.start >= end][:2]
        found = []
        for t in near:
            if t.word in self.number_cues and t.used is None:
                t.used = "cue"
                found.append(t.word)
        return tuple(found)

    def _aggregate_of_numbers(self, tokens: list[_Token], out: Understanding) -> None:
        """ "total amount of approved orders", "the largest estimate of any task", "el promedio de horas": a
        sum, average, maximum or minimum of a measure (a number facet's cue, or a measure word) is the
        aggregate path's (guarded SQL), never a list that pretends to answer it; ``out.measure``
        says which."""
        measures = self.number_cues | lx.MEASURES
        for i, t in enumerate(tokens):
            if t.word in AGGREGATE_WORDS and any(x.word in self.number_cues for x in tokens[i + 1 : i + 4]):
                out.other_aggregate = True
            for name, phrases in lx.AGGREGATE_WORDS.items():
                for phrase in phrases:
                    n = len(phrase)
                    if (
                        phrase[:1] == (t.word,)
                        and tuple(x.word for x in tokens[i : i + n]) == phrase
                        and t.used is None
                        and any(x.word in measures for x in tokens[i + n : i + n + 3])
                    ):
                        out.other_aggregate = True
                        out.measure = out.measure or name

    def _near_cues(self, tokens: list[_Token], start: int) -> tuple[str, ...]:
        """Date cue words just before a character position ("opened before ...", "vence esta semana")."""
        before = [t for t in tokens if t.end <= start][-3:]
        return tuple(t.word for t in before if t.word in self.date_cues)

    def _mentions(
        self, text: str, spans: list[tuple[int, int, str]]
    ) -> list[tuple[list[str], str, int, int]]:
        found: list[tuple[list[str], str, int, int]] = []
        patterns = [*self._id_patterns, (self._bare_types, _BARE)]
        taken = bytearray(len(text))  # the characters claimed so far: one test per match, not one per span
        for s, e, _ in spans:
            taken[s:e] = b"\x01" * (e - s)
        for types, pattern in patterns:
            if not types:
                continue
            for m in pattern.finditer(text):
                if 1 in taken[m.start() : m.end()]:
                    continue
                spans.append((m.start(), m.end(), "id"))
                taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
                found.append((types, str(int(m.group(1))), m.start(), m.end()))
        found.sort(key=lambda f: f[2])
        return found

    def _date_bounds(self, text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, str, str, str]]:
        """ISO dates after before/after words: (start, op of dates.BOUND_OPS, day, text)."""
        out = []
        for m in DATE_BOUND.finditer(text):
            try:
                day = dt.date.fromisoformat(m.group(2))
            except ValueError:
                continue
            lead = fold(m.group(1)).split()[0]
            spans.append((m.start(), m.end(), "date"))
            out.append((m.start(), BOUND_OPS.get(lead, "ge"), day.isoformat(), m.group(0)))
        return out

    def _group_facets(self, word: str) -> list[str]:
        return [n for n in self.cues.get(word, []) if not self.vocab.facets[n].cue_required]

    def _group_by(self, r: _Reading) -> list[str]:
        """ "per project", "por estado", "each developer"; "who has the most", "which sprint has the most".

        The facets the group may be (a cue may name a facet of several types: "owner"), those of the
        types the question names first; :data:`PERSON` for "who"."""
        tokens, out = r.tokens, r.out

        def ranked(facets: list[str]) -> list[str]:
            return sorted(facets, key=lambda f: f not in r.named_facets)

        free = [i for i, t in enumerate(tokens) if t.used is None]
        words = [tokens[i].word for i in free]
        for lead in sorted(lx.GROUP_LEAD, key=len, reverse=True):
            n = len(lead)
            for j in range(len(words) - n):
                if tuple(words[j : j + n]) != lead:
                    continue
                facets = self._group_facets(words[j + n])
                if not facets or tokens[free[j + n]].used is not None:
                    continue
                if not self._describes_records(r, free[j], free[j + n] + 1):
                    continue  # "how do I require two-factor authentication for every user": the topic's
                for k in range(j, j + n + 1):
                    tokens[free[k]].used = "group"
                out.group_by = "group"
                return ranked(facets)
        superlative = None
        for i, t in enumerate(tokens):
            if t.used is None and (t.word,) in lx.MOST:
                superlative, at = "most", i
            elif t.used is None and (t.word,) in lx.FEWEST and t.word != "menos":
                superlative, at = "fewest", i
        if superlative is None:
            return []
        for i, t in enumerate(tokens):
            if t.used is not None:
                continue
            if (t.word,) in lx.WHO and i < at:
                out.group_by, out.superlative = "group", superlative
                t.used = tokens[at].used = "group"
                return [PERSON]
            facets = self._group_facets(t.word)
            if facets and i < at:
                out.group_by, out.superlative = "group", superlative
                t.used = tokens[at].used = "group"
                return ranked(facets)
        return []

    def _phrases(self, tokens: list[_Token]) -> list[_Match]:
        """Longest phrase first at each position, over the words nothing has claimed."""
        matches: list[_Match] = []
        i = 0
        while i < len(tokens):
            if tokens[i].used is not None:
                i += 1
                continue
            found = None
            for n in range(min(self.max_len, len(tokens) - i), 0, -1):
                window = tokens[i : i + n]
                if any(t.used is not None for t in window):
                    continue
                meanings = self.table.get(tuple(t.word for t in window))
                if meanings:
                    found = _Match(i, i + n, meanings)
                    break
            if found is None:
                i += 1
                continue
            matches.append(found)
            i = found.end
        return matches

    def _cue_distance(self, tokens: list[_Token], match: _Match, facet: str) -> int:
        """Words from the match to its nearest cue of ``facet``; past CUE_DISTANCE only "far" (10**6) is
        said, so only the words that near are read (every word, per match, was quadratic)."""
        best = 10**6
        for j in range(max(0, match.start - CUE_DISTANCE), min(len(tokens), match.end + CUE_DISTANCE)):
            t = tokens[j]
            if facet in self.cues.get(t.word, []) and t.used in (None, "cue", "type"):
                best = min(
                    best, match.start - j if j < match.start else j - (match.end - 1) if j >= match.end else 0
                )
        return best

    def _resolve(self, r: _Reading, match: _Match, anchor: int | None = None) -> list[Any]:
        """The meanings that survive: a cue-needing value only near its cue, and then it wins. The record
        word a value describes counts as near ("which sprint of Atlas Billing is active")."""
        tokens = r.tokens
        lexical = [m for m in match.meanings if isinstance(m, str)]
        terms = [m for m in match.meanings if isinstance(m, Term)]
        near = []
        plain = []
        if len(match.meanings) and match.end - match.start == 1:
            word = tokens[match.start].word
            terms = [t for t in terms if word not in lx.FALSE_FRIENDS.get(r.language, ())]
        for term in terms:
            facet = self.vocab.facets[term.facet]
            if facet.cue_required:
                distance = self._cue_distance(tokens, match, term.facet)
                if anchor is not None and term.facet in self.cues.get(tokens[anchor].word, []):
                    distance = min(distance, 1)
                if distance <= CUE_DISTANCE:
                    near.append((distance, term))
            else:
                plain.append(term)
        if near:
            near.sort(key=lambda x: x[0])
            return [near[0][1]]
        if "caller" in lexical and plain and all(t.kind == "partial" for t in plain):
            first = tokens[match.start]
            return plain[:1] if (first.capitalised and match.start > 0) else ["caller"]
        if plain:
            preferred = [t for t in plain if t.facet in r.named_facets]
            return (
                preferred
                + [t for t in plain if t not in preferred]
                + [x for x in lexical if x in _LEXICAL_SLOTS]
            )
        return lexical[:1]

    def _negated(self, tokens: list[_Token], start: int) -> bool:
        j = start - 1
        gap = 0
        while j >= 0 and gap <= 3:
            t = tokens[j]
            if t.used == "negation":
                return True
            if t.used is None and (t.word,) in lx.NEGATION:
                t.used = "negation"
                return True
            if t.used is None and t.word in lx.NEGATION_GAP:
                j -= 1
                gap += 1
                continue
            if t.used == "type":
                j -= 1
                gap += 1
                continue
            return False
        return False

    def _interpret(self, r: _Reading, matches: list[_Match]) -> None:
        """Each phrase as a slot (values), an intent (open, mine, a window ...) or a count word."""
        tokens, out, slots, intents = r.tokens, r.out, r.slots, r.intents
        roles = self._roles(r, matches)
        for match in matches:
            attached = attach(roles, match.start, match.end)
            meanings = self._resolve(r, match, attached.anchor)
            text = " ".join(t.text for t in tokens[match.start : match.end])
            if not meanings:
                continue
            meaning = meanings[0]
            used = "value"
            at = tokens[match.start].start
            if isinstance(meaning, Term):
                if meaning.kind == "partial" and self._misspelt(tokens, match, meaning, out):
                    continue
                terms = [m for m in meanings if isinstance(m, Term)]
                cued = frozenset(x.facet for x in terms if self._cue_distance(tokens, match, x.facet) <= 2)
                if not (
                    attached.records or cued or any(self.vocab.facets[x.facet].kind == "ref" for x in terms)
                ):
                    # a value word of the topic ("what is blocking the SSO upgrade"): left to the topic
                    continue
                negated = self._negated(tokens, match.start)
                slots.append(
                    Slot(terms, [m for m in meanings if isinstance(m, str)], negated, text, at, cued)
                )
            elif meaning == "count":
                out.count = True
                used = "count"
            elif meaning in _DESCRIBING and not attached.records:
                continue  # "why was the pending refund rejected": the topic's word, not the records'
            elif meaning in ("caller", "open", "finished", "nobody"):
                kind = IntentKind.MINE if meaning == "caller" else IntentKind(meaning)
                intents.append(Intent(kind, self._negated(tokens, match.start), text, at=at))
            elif meaning in ("overdue", "no_due"):
                intents.append(Intent(IntentKind(meaning), False, text, at=at))
            elif isinstance(meaning, str) and meaning.startswith("window:"):
                start = tokens[match.start].start
                cues = self._near_cues(tokens, start) + tuple(
                    t.word for t in tokens[match.end : match.end + 1] if t.word in self.date_cues
                )
                intents.append(
                    Intent(IntentKind.WINDOW, False, text, window=meaning.split(":", 1)[1], cues=cues, at=at)
                )
            elif meaning == "advice":
                out.advice = True
                intents.append(Intent(IntentKind.OPEN, False, text, at=at))
            else:
                continue  # negation, most, fewest: claimed by the value after it, or by a group
            for t in tokens[match.start : match.end]:
                t.used = used

    def _roles(self, r: _Reading, matches: list[_Match]) -> list[Role]:
        """Each word's role for :func:`attachment.attach`, before any phrase is interpreted."""
        roles = []
        in_match: dict[int, _Match] = {i: m for m in matches for i in range(m.start, m.end)}
        for i, t in enumerate(r.tokens):
            match = in_match.get(i)
            if match is not None:
                kinds = set(match.meanings)
                roles.append(
                    Role.ANCHOR
                    if kinds & {"count", "caller"}
                    else Role.FILLER
                    if kinds & {"negation", "most", "fewest"}
                    else Role.VALUE
                )
            elif t.used == "count":
                roles.append(Role.ANCHOR)
            elif t.used is not None and t.used not in ("type", "cue"):
                roles.append(Role.VALUE)
            elif t.word in self.vocab.type_words:
                roles.append(Role.RECORD)
            elif t.word in lx.ASKED_RECORDS and (
                t.word not in lx.ALSO_CONJUNCTION or i == 0 or fold(t.text) != t.text.casefold()
            ):
                roles.append(Role.ANCHOR)  # "qué" (or "que" opening the question), not "dijo que"
            elif t.word in lx.DETERMINERS:
                roles.append(Role.DETERMINER)
            elif t.word in lx.TOPIC_LINKS:
                roles.append(Role.LINK)
            elif t.word in lx.AUXILIARIES:
                roles.append(Role.AUXILIARY)
            elif t.word in self.cues:
                roles.append(Role.VALUE)
            elif (
                t.word in lx.STOPWORDS
                or t.word in lx.COPULAS
                or t.word in lx.CONNECTIVES
                or (t.word,) in lx.NEGATION
            ):
                roles.append(Role.FILLER)
            else:
                roles.append(Role.TOPIC)
        return topic_records(roles)

    def _misspelt(self, tokens: list[_Token], match: _Match, term: Term, out: Understanding) -> bool:
        """ "Atlas Biling", "Ana Peres": a known first word followed by an unknown capitalised one."""
        nxt = match.end
        if nxt >= len(tokens):
            return False
        t = tokens[nxt]
        if (
            t.used is not None
            or not t.capitalised
            or t.word in lx.STOPWORDS
            or t.word in self.vocab.type_words
            or t.word in self.cues
        ):
            return False
        text = " ".join(x.text for x in tokens[match.start : nxt + 1])
        facet, suggestion = self._closest([term.facet], text)
        out.notices.append(Notice(facet, text, suggestion))
        for x in tokens[match.start : nxt + 1]:
            x.used = "notice"
        return True

    def _types(self, tokens: list[_Token]) -> tuple[list[str], list[str]]:
        """The types the question names: by a word that is only a record word (strong), or by a word that
        also names a facet ("sprint" in "the current sprint": weak) unless the question asks for it by its
        word ("which sprint ...", "how many sprints": strong)."""
        strong: list[str] = []
        weak: list[str] = []
        for i, t in enumerate(tokens):
            kinds = self.vocab.type_words.get(t.word, [])
            if kinds and t.used in (None, "cue"):
                asked = i > 0 and (tokens[i - 1].word in lx.ASKED_RECORDS or tokens[i - 1].used == "count")
                (weak if t.word in self.cues and not asked else strong).extend(kinds)
                if t.used is None:
                    t.used = "type"
        return list(dict.fromkeys(strong)), list(dict.fromkeys(weak))

    def _mentions_to_lookups(
        self,
        tokens: list[_Token],
        mentions: list[tuple[list[str], str, int, int]],
        strong: list[str],
        out: Understanding,
        conditions: list[Condition],
    ) -> None:
        """Record ids are lookups; the id of a record others refer to (a sprint, a project) is a lookup of
        it, unless the question is about the records in it ("what is blocked in sprint 7"): a filter."""
        refers = {f.refers_to: f.name for f in self.vocab.facets.values() if f.refers_to}
        other = [c for c in conditions if self.vocab.facets[c.facet].refers_to is None]
        leaves = set(self.vocab.leaf_types())
        signals = bool(other or out.count or out.group_by or any(t in leaves for t in strong))
        record_words = any(t.word in lx.RECORD_WORDS for t in tokens)
        for group, (types, row_id, start, _end) in enumerate(mentions):
            facet = refers.get(types[0]) if len(types) == 1 else None
            if facet is None:
                for t in types:
                    out.lookups.append((t, self.vocab.meaning(t).stored_id(row_id)))
                    out.lookup_groups.append(group)
                continue
            before = [t for t in tokens if t.end <= start]
            within = bool(before) and before[-1].word in lx.WITHIN
            if signals or (within and not record_words):
                if int(row_id) in self.vocab.values.get(facet, set()):
                    conditions.append(
                        Condition(facet, "in", (int(row_id),), facet, f"{types[0].lower()} {row_id}")
                    )
                else:
                    out.notices.append(Notice(facet, f"{types[0].title()} {row_id}", None))
            else:
                out.lookups.append((types[0], self.vocab.meaning(types[0]).stored_id(row_id)))
                out.lookup_groups.append(group)
        if out.lookups or signals:
            return
        # a record others refer to, named (not by id) with nothing else asked: the record itself
        named = [c for c in conditions if self.vocab.facets[c.facet].refers_to and c.op == "in"]
        if (
            named
            and len(named) == 1
            and not [t for t in strong if t != self.vocab.facets[named[0].facet].refers_to]
        ):
            cond = named[0]
            first = next((t for t in tokens if t.text in cond.text.split()), None)
            before = [t for t in tokens if first is not None and t.end <= first.start]
            within = bool(before) and before[-1].word in lx.WITHIN
            if record_words or not within:
                refers_to = self.vocab.facets[cond.facet].refers_to
                assert refers_to is not None
                for v in cond.values:
                    out.lookups.append((refers_to, self.vocab.meaning(refers_to).stored_id(str(v))))
                    out.lookup_groups.append(len(out.lookup_groups))
                conditions.remove(cond)

    def _describes_records(self, r: _Reading, start: int, end: int) -> bool:
        """Whether the words ``r.tokens[start:end]`` describe the records asked for (as they stand now)."""
        return attach(self._roles(r, self._phrases(r.tokens)), start, end).records

    def _notices(self, r: _Reading) -> None:
        """Capitalised or quoted words after (or before) a facet's cue that name nothing known, where
        they describe the records asked for ("tasks in project Atlas Biling"; not "why were Irish
        customers charged VAT": a topic)."""
        question, tokens, out = r.question, r.tokens, r.out
        quoted = [(m.start(1), m.end(1)) for m in _QUOTED.finditer(question)]
        for i, t in enumerate(tokens):
            if t.used not in (None, "type", "cue"):
                continue
            facets = [n for n in self.cues.get(t.word, []) if self.vocab.labels.get(n)]
            facets += [
                n
                for n in self.cues.get(t.word, [])
                if self.vocab.facets[n].kind == "enum"
                and not self.vocab.facets[n].cue_required
                and n not in facets
            ]
            if not facets:
                continue
            for side in (1, -1):
                phrase = self._unknown_phrase(tokens, i, side, quoted)
                if not phrase or not self._describes_records(r, min(i, *phrase), max(i, *phrase) + 1):
                    continue
                text = " ".join(tokens[k].text for k in sorted(phrase))
                facet, suggestion = self._closest(facets, text)
                for k in phrase:
                    tokens[k].used = "notice"
                t.used = "notice"
                out.notices.append(Notice(facet, text, suggestion))
                break
        self._stray_names(tokens, out)

    def _unknown_phrase(
        self, tokens: list[_Token], i: int, side: int, quoted: list[tuple[int, int]]
    ) -> list[int]:
        picked: list[int] = []
        k = i + side
        while 0 <= k < len(tokens) and len(picked) < 4:
            t = tokens[k]
            if t.used is not None:
                break
            inside_quotes = any(s <= t.start and t.end <= e for s, e in quoted)
            if not (t.capitalised or inside_quotes) or (t.word in lx.STOPWORDS and not inside_quotes):
                break
            if t.word in self.vocab.type_words or t.word in self.cues:
                break
            picked.append(k)
            k += side
        if picked and side == -1 and min(picked) == 0 and len(picked) == 1:
            return []  # the first word of a sentence is capitalised anyway
        return picked

    def _closest(self, facets: list[str], text: str) -> tuple[str, str | None]:
        folded = fold(text)
        best: tuple[float, str, str | None] = (0.0, facets[0], None)
        for name in facets:
            names = self.vocab.labels.get(name) or {v: str(v) for v in self.vocab.values.get(name, ())}
            for label in names.values():
                score = difflib.SequenceMatcher(None, folded, fold(label)).ratio()
                if score > best[0]:
                    best = (score, name, label)
        return (best[1], best[2]) if best[0] >= 0.6 else (facets[0], None)

    def _stray_names(self, tokens: list[_Token], out: Understanding) -> None:
        """A capitalised name that is almost a known person's or project's ("Ana Peres")."""
        run: list[int] = []
        for i, t in enumerate(tokens + [_Token("", "", 0, 0, "end")]):
            if (
                t.used is None
                and t.capitalised
                and t.word not in lx.STOPWORDS
                and i > 0
                and t.word not in self.vocab.type_words
                and t.word not in self.cues
            ):
                run.append(i)
                continue
            if run:
                text = " ".join(tokens[k].text for k in run)
                for name in [n for n, labels in self.vocab.labels.items() if labels]:
                    facet, suggestion = self._closest([name], text)
                    if (
                        suggestion
                        and difflib.SequenceMatcher(None, fold(text), fold(suggestion)).ratio() >= 0.8
                    ):
                        out.notices.append(Notice(facet, text, suggestion))
                        for k in run:
                            tokens[k].used = "notice"
                        break
                run = []

    def _merge(self, conditions: list[Condition]) -> list[Condition]:
        """One condition per (facet, key): values of a facet OR-ed, negated ones removed."""
        out: list[Condition] = []
        by_key: dict[tuple[str, str, str], Condition] = {}
        for c in conditions:
            op = c.op
            slot = (c.facet, c.key, "neg" if op == "not_in" else "pos" if op == "in" else op)
            prior = by_key.get(slot)
            if prior is None:
                by_key[slot] = c
                out.append(c)
                continue
            if op in ("in", "not_in"):
                merged = Condition(
                    c.facet,
                    op,
                    tuple(dict.fromkeys(prior.values + c.values)),
                    c.key,
                    f"{prior.text}, {c.text}",
                )
                out[out.index(prior)] = merged
                by_key[slot] = merged
        final = []
        for c in out:
            if c.op == "in":
                neg = by_key.get((c.facet, c.key, "neg"))
                if neg is not None:
                    kept = tuple(v for v in c.values if v not in neg.values)
                    if kept:
                        final.append(Condition(c.facet, "in", kept, c.key, c.text))
                    continue
            final.append(c)
        return final
