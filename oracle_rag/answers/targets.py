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
from dataclasses import dataclass, field

from ..sources.facets import Facet
from .dates import OPEN_START, bound, window
from .lexicon import DUE_CUES, fold
from .understood import Condition
from .vocabulary import Term, Vocabulary

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


@dataclass
class Intent:
    """A phrase whose facet is the type's: open, finished, mine, nobody, overdue, no_due, window, bound."""

    kind: str
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
    if kind in ("open", "finished"):
        return m.lifecycle is not None and bool(m.done)
    if kind in ("mine", "nobody"):
        return m.mine is not None
    if kind in ("overdue", "no_due"):
        return m.due is not None
    if kind in ("window", "bound"):
        return any(f.kind == "date" for f in (vocab.facets[n] for n in vocab.types.get(source_type, ())))
    if kind == "number":
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


def choose_targets(vocab: Vocabulary, strong: list[str], weak: list[str], slots: list[Slot],
                   intents: list[Intent], group: list[str]) -> Targets:
    def fits(t: str) -> bool:
        for s in slots:
            if not _declares(vocab, t, [term.facet for term in s.terms if term.applies_to(t)]) and not any(
                    _intent_applies(vocab, t, k) for k in s.lexical):
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
        scored = sorted(types, key=lambda t: -sum(_declares(vocab, t, [x.facet for x in s.terms if x.applies_to(t)])
                                                  for s in slots))
        candidates = scored[:1]
    applicable = [t for t in candidates if all(_intent_applies(vocab, t, i.kind) for i in intents)]
    candidates = applicable or candidates
    leaves = [t for t in candidates if t in vocab.leaf_types()]
    return Targets(leaves or candidates[:1], False)


def _date_facet(vocab: Vocabulary, source_type: str, intent: Intent,
                completion: bool, language: str = "en") -> tuple[Facet | None, str | None]:
    """The date facet a date phrase is about for ``source_type``, and a note when that needs saying."""
    m = vocab.meaning(source_type)
    dates = [vocab.facets[n] for n in vocab.types.get(source_type, ()) if vocab.facets[n].kind == "date"]
    for f in dates:
        cues = {fold(c) for c in f.cues} | (set(DUE_CUES) if f.name == m.due else set())
        if cues & set(intent.cues):
            return f, None
    plural = m.noun(2, language)
    es = language == "es"
    if completion:
        return None, (f"no hay fechas de finalización para {plural}: \u201c{intent.text}\u201d no se aplicó" if es
                      else f"no completion dates are recorded for {plural}: \u201c{intent.text}\u201d was not applied")
    if m.due is not None:
        return vocab.facets[m.due], None
    if len(dates) == 1:
        return dates[0], None
    if dates:
        others = ", ".join(f.label_in(language) for f in dates[1:])
        if es:
            return dates[0], (f"\u201c{intent.text}\u201d leído como {dates[0].label_in(language)} "
                              f"(otras fechas: {others})")
        return dates[0], f"\u201c{intent.text}\u201d read as {dates[0].label} (also dated: {others})"
    if es:
        return None, f"{plural} no tienen fechas: \u201c{intent.text}\u201d no se aplicó"
    return None, f"{plural} have no dates: \u201c{intent.text}\u201d was not applied"


def _number_facet(vocab: Vocabulary, source_type: str, intent: Intent,
                  language: str) -> tuple[Facet | None, str | None]:
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
        return None, (f"\u201c{intent.text}\u201d: ¿qué número? ({names}); no se aplicó" if language == "es" else
                      f"\u201c{intent.text}\u201d: which number? ({names}); not applied")
    return None, (f"{plural} no tienen números: \u201c{intent.text}\u201d no se aplicó" if language == "es" else
                  f"{plural} have no numbers: \u201c{intent.text}\u201d was not applied")


def concrete(vocab: Vocabulary, source_type: str, slots: list[Slot], intents: list[Intent],
             caller_id: int | None, today: dt.date, language: str = "en") -> Concrete:
    """The conditions ``slots`` and ``intents`` mean for ``source_type``, and what could not be applied."""
    out = Concrete()
    m = vocab.meaning(source_type)
    names = vocab.types.get(source_type, ())
    plural = m.noun(2, language)
    es = language == "es"
    completion = False

    def lifecycle(kind: str, negated: bool, text: str, key: str | None = None) -> bool:
        if m.lifecycle is None or not m.done:
            return False
        finished = (kind == "finished") != negated
        out.conditions.append(Condition(m.lifecycle, "in" if finished else "not_in", tuple(m.done),
                                        key or m.lifecycle, text))
        return True

    items: list[Condition | Intent] = []
    given: list[Slot | Intent] = [*slots, *intents]
    for s in sorted(given, key=lambda x: x.at):
        if isinstance(s, Intent):
            items.append(s)
            continue
        own = [t for t in s.terms if t.facet in names and t.applies_to(source_type)]
        # several facets of this type hold the value (an owner and a reporter): the one named next to it
        term = next((t for t in own if t.facet in s.cued), own[0] if own else None)
        word = next((k for k in s.lexical if k in ("open", "finished")), None)
        if term is not None and word and term.facet == m.lifecycle and m.done and term.facet not in s.cued:
            # "open tickets" where OPEN is also a state: the lifecycle phrase ("not finished") wins
            items.append(Intent(word, s.negated, s.text, at=s.at))
            continue
        if term is not None:
            facet = term.facet
            if m.lifecycle == facet and term.kind == "value" and set(term.values) <= set(m.done):
                completion = True
            if term.kind == "null":
                items.append(Condition(facet, "not_null" if s.negated else "null", (), facet, s.text))
            else:
                items.append(Condition(facet, "not_in" if s.negated else "in", term.values, facet, s.text))
            continue
        lexical = next((k for k in s.lexical if _intent_applies(vocab, source_type, k)), None)
        if lexical is not None:
            items.append(Intent(lexical, s.negated, s.text, at=s.at))
            continue
        out.notes.append(f"\u201c{s.text}\u201d no se aplica a {plural}: no se aplicó" if es else
                         f"\u201c{s.text}\u201d does not apply to {plural}: not applied")
    completion = completion or any(isinstance(i, Intent) and i.kind == "finished" and not i.negated for i in items)
    for i in items:
        if isinstance(i, Condition):
            out.conditions.append(i)
            continue
        applied = True
        if i.kind in ("open", "finished"):
            applied = lifecycle(i.kind, i.negated, i.text)
        elif i.kind in ("mine", "nobody"):
            if m.mine is None:
                applied = False
            elif i.kind == "mine":
                if caller_id is not None:
                    out.conditions.append(Condition(m.mine, "not_in" if i.negated else "in", (caller_id,), m.mine,
                                                    i.text))
            else:
                out.conditions.append(Condition(m.mine, "not_null" if i.negated else "null", (), m.mine, i.text))
        elif i.kind == "overdue":
            if m.due is None:
                applied = False
            else:
                out.conditions.append(Condition(m.due, "lt", (today.isoformat(),), "overdue", i.text))
                lifecycle("open", False, i.text, "overdue")
        elif i.kind == "no_due":
            if m.due is None:
                applied = False
            else:
                out.conditions.append(Condition(m.due, "null", (), m.due, i.text))
        elif i.kind == "number":
            numeric, note = _number_facet(vocab, source_type, i, language)
            if note:
                out.notes.append(note)
            if numeric is not None:
                out.conditions.append(Condition(numeric.name, i.op, i.numbers, f"{numeric.name}:{i.op}", i.text))
            continue
        elif i.kind in ("window", "bound"):
            dated, note = _date_facet(vocab, source_type, i, completion, language)
            if note:
                out.notes.append(note)
            if dated is not None:
                out.conditions.append(_date_condition(dated.name, i, today))
            continue
        if not applied:
            out.notes.append(f"\u201c{i.text}\u201d no se aplica a {plural} ({_missing(i.kind, language)}): no se aplicó"
                             if es else
                             f"\u201c{i.text}\u201d does not apply to {plural} ({_missing(i.kind)}): not applied")
    return out


def _date_condition(facet: str, i: Intent, today: dt.date) -> Condition:
    if i.kind == "window":
        lo, hi = window(i.window, today)
        return Condition(facet, "range", (lo.isoformat(), hi.isoformat()), facet, i.text)
    op, first, last = bound(i.op, i.day)
    if op == "lt":
        return Condition(facet, "lt", (i.day,), f"{facet}:before", i.text)
    return Condition(facet, "range", (first, last), f"{facet}:{'before' if first == OPEN_START else 'after'}", i.text)


def _missing(kind: str, language: str = "en") -> str:
    if language == "es":
        return {"open": "no se declara un ciclo de vida", "finished": "no se declara un ciclo de vida",
                "mine": "no se declara una persona", "nobody": "no se declara una persona",
                "overdue": "no se declara una fecha de vencimiento",
                "no_due": "no se declara una fecha de vencimiento"}.get(kind, "no declarado")
    return {"open": "no lifecycle is declared", "finished": "no lifecycle is declared",
            "mine": "no person facet is declared", "nobody": "no person facet is declared",
            "overdue": "no due date is declared", "no_due": "no due date is declared"}.get(kind, "not declared")


def describe_types(vocab: Vocabulary, counts: list[tuple[str, int]], language: str) -> str:
    """ "12 tasks and 7 tickets" / "12 tareas y 7 tickets"."""
    parts = [f"{n} {vocab.meaning(t).noun(n, language)}" for t, n in counts]
    joiner = " y " if language == "es" else " and "
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + joiner + parts[-1]

