"""Which record types a question is about, and its words as conditions of each of them.

The parser (``understanding``) finds *slots* (a value the question names, with
every facet it may belong to: "critical" is a task's priority and a ticket's
severity) and *intents* (words whose facet depends on the type: "my", "open",
"finished", "unassigned", "overdue", "this week", "before 2026-04-01").
Here the types are chosen and each type's own declarations
(``sources/meanings.py``) turn them into conditions:

* a type named by its words ("tickets", "caso") is the target, even when a
  phrase does not apply to it: that phrase is then said in the answer
  ("overdue" for a type without a due date), never applied to another type;
* otherwise every type that declares the facets the question uses; types
  whose records no facet refers to (tasks, tickets) before their containers
  (sprints, projects), which are answered when named;
* "my" is the type's first person facet, "open"/"finished" its lifecycle
  facet against its done values, "overdue" and a date without a cue its due
  date; a date phrase next to a cue word ("opened before ...") is that date.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from oracle_rag.answering.structured.catalog import say
from oracle_rag.answering.structured.dates import OPEN_START, bound, window
from oracle_rag.answering.structured.lexicon import DUE_CUES, fold
from oracle_rag.answering.structured.understood import Condition
from oracle_rag.answering.structured.vocabulary import Term, Vocabulary
from oracle_rag.sources.facets import Facet
from oracle_rag.sources.meanings import Meanings

PERSON = "@person"  # the group "who has the most ..." asks for: each type's person facet


@dataclass
class Slot:
    """A phrase naming values: the terms it may mean (one per facet) and the intents it may mean instead."""

    terms: list[Term]
    lexical: list[str]
    negated: bool
    text: str
    at: int = 0  # where it starts in the question (conditions keep the question's order)
    cued: frozenset[str] = frozenset()  # facets named next to it ("state OPEN": the value, not "open")


class IntentKind(StrEnum):
    """What a phrase whose facet is the type's asks for (``concrete`` has a handler for each)."""

    OPEN = "open"
    FINISHED = "finished"
    MINE = "mine"
    NOBODY = "nobody"
    OVERDUE = "overdue"
    NO_DUE = "no_due"
    WINDOW = "window"  # "this week": Intent.window names it
    BOUND = "bound"  # "before 2026-04-01": Intent.op and Intent.day
    NUMBER = "number"  # "over 10000": Intent.op and Intent.numbers


@dataclass
class Intent:
    """A phrase whose facet is the type's: open, finished, mine, nobody, overdue, no_due, window, bound."""

    kind: IntentKind
    negated: bool
    text: str
    window: str = ""
    op: str = ""
    day: str = ""
    cues: tuple[str, ...] = ()  # folded words next to it (a date facet's cue names the date)
    at: int = 0
    numbers: tuple[float, ...] = ()  # a comparison's number(s) (kind "number", op gt|lt|ge|le|range)


@dataclass
class Targets:
    types: list[str]
    strong: bool  # named by the question's own words


@dataclass
class Concrete:
    conditions: list[Condition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _declares(vocab: Vocabulary, source_type: str, facets: list[str]) -> bool:
    return bool(set(facets) & set(vocab.types.get(source_type, ())))


def _intent_applies(vocab: Vocabulary, source_type: str, kind: str) -> bool:
    m = vocab.meaning(source_type)
    if kind in (IntentKind.OPEN, IntentKind.FINISHED):
        return m.lifecycle is not None and bool(m.done)
    if kind in (IntentKind.MINE, IntentKind.NOBODY):
        return m.mine is not None
    if kind in (IntentKind.OVERDUE, IntentKind.NO_DUE):
        return m.due is not None
    if kind in (IntentKind.WINDOW, IntentKind.BOUND):
        return any(f.kind == "date" for f in (vocab.facets[n] for n in vocab.types.get(source_type, ())))
    if kind == IntentKind.NUMBER:
        return any(f.kind == "number" for f in (vocab.facets[n] for n in vocab.types.get(source_type, ())))
    return True


def group_facet(vocab: Vocabulary, source_type: str, candidates: list[str]) -> str | None:
    """The facet of ``source_type`` a group by ``candidates`` means (PERSON: its "my" facet)."""
    names = vocab.types.get(source_type, ())
    for name in candidates:
        if name == PERSON:
            m = vocab.meaning(source_type)
            people = [n for n in names if vocab.facets[n].person]
            if m.mine or people:
                return m.mine or people[0]
        elif name in names:
            return name
    return None


def choose_targets(
    vocab: Vocabulary,
    strong: list[str],
    weak: list[str],
    slots: list[Slot],
    intents: list[Intent],
    group: list[str],
) -> Targets:
    def fits(t: str) -> bool:
        for s in slots:
            if not _declares(vocab, t, [term.facet for term in s.terms if term.applies_to(t)]) and not any(
                _intent_applies(vocab, t, k) for k in s.lexical
            ):
                return False
        return not group or group_facet(vocab, t, group) is not None

    types = list(vocab.types)
    candidates = [t for t in types if fits(t)]
    if strong:
        hit = [t for t in strong if t in candidates]
        return Targets(hit or strong, True)
    hit = [t for t in weak if t in candidates and all(_intent_applies(vocab, t, i.kind) for i in intents)]
    if hit:
        return Targets(hit[:1], False)
    if not candidates:
        scored = sorted(
            types,
            key=lambda t: (
                -sum(_declares(vocab, t, [x.facet for x in s.terms if x.applies_to(t)]) for s in slots)
            ),
        )
        candidates = scored[:1]
    applicable = [t for t in candidates if all(_intent_applies(vocab, t, i.kind) for i in intents)]
    candidates = applicable or candidates
    leaves = [t for t in candidates if t in vocab.leaf_types()]
    return Targets(leaves or candidates[:1], False)


def _date_facet(
    vocab: Vocabulary, source_type: str, intent: Intent, completion: bool, language: str = "en"
) -> tuple[Facet | None, str | None]:
    """The date facet a date phrase is about for ``source_type``, and a note when that needs saying."""
    m = vocab.meaning(source_type)
    dates = [vocab.facets[n] for n in vocab.types.get(source_type, ()) if vocab.facets[n].kind == "date"]
    for f in dates:
        cues = {fold(c) for c in f.cues} | (set(DUE_CUES) if f.name == m.due else set())
        if cues & set(intent.cues):
            return f, None
    plural = m.noun(2, language)
    if completion:
        return None, say(language, "no_completion_dates", plural=plural, text=intent.text)
    if m.due is not None:
        return vocab.facets[m.due], None
    if len(dates) == 1:
        return dates[0], None
    if dates:
        others = ", ".join(f.label_in(language) for f in dates[1:])
        return dates[0], say(
            language, "date_read_as", text=intent.text, label=dates[0].label_in(language), others=others
        )
    return None, say(language, "no_dates", plural=plural, text=intent.text)


def _number_facet(
    vocab: Vocabulary, source_type: str, intent: Intent, language: str
) -> tuple[Facet | None, str | None]:
    """The number facet a comparison is about: the one whose cue is next to it, else the only one."""
    numeric = [vocab.facets[n] for n in vocab.types.get(source_type, ()) if vocab.facets[n].kind == "number"]
    for f in numeric:
        if {w for c in f.cues for w in [fold(c), *fold(c).split()]} & set(intent.cues):
            return f, None
    if len(numeric) == 1:
        return numeric[0], None
    plural = vocab.meaning(source_type).noun(2, language)
    if numeric:
        names = ", ".join(f.label_in(language) for f in numeric)
        return None, say(language, "which_number", text=intent.text, names=names)
    return None, say(language, "no_numbers", plural=plural, text=intent.text)


def concrete(
    vocab: Vocabulary,
    source_type: str,
    slots: list[Slot],
    intents: list[Intent],
    caller_id: int | None,
    today: dt.date,
    language: str = "en",
) -> Concrete:
    """The conditions ``slots`` and ``intents`` mean for ``source_type``, and what could not be applied."""
    ctx = _Applying(vocab, source_type, vocab.meaning(source_type), caller_id, today, language)
    given: list[Slot | Intent] = [*slots, *intents]
    items = [_item(ctx, s) for s in sorted(given, key=lambda x: x.at)]
    ctx.completion = ctx.completion or any(
        isinstance(i, Intent) and i.kind == IntentKind.FINISHED and not i.negated for i in items
    )
    for i in items:
        if isinstance(i, Condition):
            ctx.out.conditions.append(i)
        elif i is not None and not _HANDLERS.get(i.kind, _applies_trivially)(ctx, i):
            why = say(language, _MISSING.get(i.kind, "missing"))
            ctx.note("not_applicable_why", text=i.text, plural=ctx.plural, why=why)
    return ctx.out


@dataclass
class _Applying:
    """One type's reading of a question's phrases: what was applied and noted so far."""

    vocab: Vocabulary
    source_type: str
    m: Meanings
    caller_id: int | None
    today: dt.date
    language: str
    completion: bool = False  # the question is about finished records: a date phrase is a completion date
    out: Concrete = field(default_factory=Concrete)

    @property
    def plural(self) -> str:
        return self.m.noun(2, self.language)

    def note(self, key: str, **values: Any) -> None:
        self.out.notes.append(say(self.language, key, **values))

    def lifecycle(self, finished: bool, text: str, key: str | None = None) -> bool:
        m = self.m
        if m.lifecycle is None or not m.done:
            return False
        self.out.conditions.append(
            Condition(m.lifecycle, "in" if finished else "not_in", tuple(m.done), key or m.lifecycle, text)
        )
        return True


def _item(ctx: _Applying, s: Slot | Intent) -> Condition | Intent | None:
    """A slot as this type's condition, or as the intent it means here (None: noted, not applicable)."""
    if isinstance(s, Intent):
        return s
    m = ctx.m
    names = ctx.vocab.types.get(ctx.source_type, ())
    own = [t for t in s.terms if t.facet in names and t.applies_to(ctx.source_type)]
    # several facets of this type hold the value (an owner and a reporter): the one named next to it
    term = next((t for t in own if t.facet in s.cued), own[0] if own else None)
    word = next((k for k in s.lexical if k in (IntentKind.OPEN, IntentKind.FINISHED)), None)
    if term is not None and word and term.facet == m.lifecycle and m.done and term.facet not in s.cued:
        # "open tickets" where OPEN is also a state: the lifecycle phrase ("not finished") wins
        return Intent(IntentKind(word), s.negated, s.text, at=s.at)
    if term is not None:
        facet = term.facet
        if m.lifecycle == facet and term.kind == "value" and set(term.values) <= set(m.done):
            ctx.completion = True
        if term.kind == "null":
            return Condition(facet, "not_null" if s.negated else "null", (), facet, s.text)
        return Condition(facet, "not_in" if s.negated else "in", term.values, facet, s.text)
    lexical = next((k for k in s.lexical if _intent_applies(ctx.vocab, ctx.source_type, k)), None)
    if lexical is not None:
        return Intent(IntentKind(lexical), s.negated, s.text, at=s.at)
    ctx.note("not_applicable", text=s.text, plural=ctx.plural)
    return None


# Each handler applies one kind of intent to a type; False: the type does not declare what it needs
# (the caller notes it with _MISSING's reason).


def _applies_trivially(ctx: _Applying, i: Intent) -> bool:
    return True


def _lifecycle_intent(ctx: _Applying, i: Intent) -> bool:
    return ctx.lifecycle((i.kind == IntentKind.FINISHED) != i.negated, i.text)


def _mine(ctx: _Applying, i: Intent) -> bool:
    if ctx.m.mine is None:
        return False
    if ctx.caller_id is not None:
        ctx.out.conditions.append(
            Condition(ctx.m.mine, "not_in" if i.negated else "in", (ctx.caller_id,), ctx.m.mine, i.text)
        )
    return True


def _nobody(ctx: _Applying, i: Intent) -> bool:
    if ctx.m.mine is None:
        return False
    ctx.out.conditions.append(
        Condition(ctx.m.mine, "not_null" if i.negated else "null", (), ctx.m.mine, i.text)
    )
    return True


def _overdue(ctx: _Applying, i: Intent) -> bool:
    if ctx.m.due is None:
        return False
    ctx.out.conditions.append(Condition(ctx.m.due, "lt", (ctx.today.isoformat(),), "overdue", i.text))
    ctx.lifecycle(False, i.text, "overdue")
    return True


def _no_due(ctx: _Applying, i: Intent) -> bool:
    if ctx.m.due is None:
        return False
    ctx.out.conditions.append(Condition(ctx.m.due, "null", (), ctx.m.due, i.text))
    return True


def _number(ctx: _Applying, i: Intent) -> bool:
    numeric, note = _number_facet(ctx.vocab, ctx.source_type, i, ctx.language)
    if note:
        ctx.out.notes.append(note)
    if numeric is not None:
        ctx.out.conditions.append(Condition(numeric.name, i.op, i.numbers, f"{numeric.name}:{i.op}", i.text))
    return True  # what could not be applied is in the note


def _dated(ctx: _Applying, i: Intent) -> bool:
    dated, note = _date_facet(ctx.vocab, ctx.source_type, i, ctx.completion, ctx.language)
    if note:
        ctx.out.notes.append(note)
    if dated is not None:
        ctx.out.conditions.append(_date_condition(dated.name, i, ctx.today))
    return True  # what could not be applied is in the note


_HANDLERS: dict[str, Callable[[_Applying, Intent], bool]] = {
    IntentKind.OPEN: _lifecycle_intent,
    IntentKind.FINISHED: _lifecycle_intent,
    IntentKind.MINE: _mine,
    IntentKind.NOBODY: _nobody,
    IntentKind.OVERDUE: _overdue,
    IntentKind.NO_DUE: _no_due,
    IntentKind.NUMBER: _number,
    IntentKind.WINDOW: _dated,
    IntentKind.BOUND: _dated,
}

# Why an intent does not apply to a type: the catalog key of what the type does not declare.
_MISSING: dict[str, str] = {
    IntentKind.OPEN: "missing_lifecycle",
    IntentKind.FINISHED: "missing_lifecycle",
    IntentKind.MINE: "missing_person",
    IntentKind.NOBODY: "missing_person",
    IntentKind.OVERDUE: "missing_due",
    IntentKind.NO_DUE: "missing_due",
}


def _date_condition(facet: str, i: Intent, today: dt.date) -> Condition:
    if i.kind == IntentKind.WINDOW:
        lo, hi = window(i.window, today)
        return Condition(facet, "range", (lo.isoformat(), hi.isoformat()), facet, i.text)
    op, first, last = bound(i.op, i.day)
    if op == "lt":
        return Condition(facet, "lt", (i.day,), f"{facet}:before", i.text)
    return Condition(
        facet, "range", (first, last), f"{facet}:{'before' if first == OPEN_START else 'after'}", i.text
    )


def describe_types(vocab: Vocabulary, counts: list[tuple[str, int]], language: str) -> str:
    """ "12 tasks and 7 tickets" / "12 tareas y 7 tickets"."""
    parts = [f"{n} {vocab.meaning(t).noun(n, language)}" for t, n in counts]
    joiner = say(language, "and")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + joiner + parts[-1]
