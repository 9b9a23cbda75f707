"""What a question can name: the declared facets, their values from the data, and their names.

Built from the sources' declarations (``Source.facets``), the values the
index holds for enum facets, the names of ref facets' ids
(``Source.labels``: employees, projects, sprints) and the EN/ES synonym
table. Every phrase is accent- and case-folded; :attr:`Vocabulary.terms`
maps a phrase (a tuple of folded words) to what it may mean.

Names: a full name always counts; a first or last name alone counts too (for
people), and when two people share it the phrase means either of them. A
project's first word counts alone when no other name starts with it
("Atlas" for Atlas Billing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from oracle_rag.answering.structured import lexicon as lx
from oracle_rag.answering.structured.lexicon import STOPWORDS, fold
from oracle_rag.sources.facets import SYNONYMS, Facet
from oracle_rag.sources.meanings import Declaration, Meanings, anchor_of

Phrase = tuple[str, ...]


def words(text: str) -> Phrase:
    """A label or value as folded words ("IN_PROGRESS" -> ("in", "progress"))."""
    return tuple(w for w in _split(fold(text)) if w)


def _split(text: str) -> list[str]:
    out, current = [], []
    for ch in text:
        if ch.isalnum():
            current.append(ch)
        elif current:
            out.append("".join(current))
            current = []
    if current:
        out.append("".join(current))
    return out


@dataclass(frozen=True)
class Term:
    """One meaning of a phrase: facet ``facet`` has one of ``values``.

    ``kind``: ``value`` (an enum value or a full name), ``partial`` (a first
    name, a last name or a project's first word), ``null`` (no value: "backlog").
    """

    facet: str
    values: tuple[Any, ...]
    kind: str = "value"
    lang: str | None = None
    types: frozenset[str] = frozenset()  # the source types it means this for (empty: every type)

    def applies_to(self, source_type: str) -> bool:
        return not self.types or source_type in self.types


@dataclass
class Vocabulary:
    """The facets of every source type, their values and names, and the phrase table."""

    facets: dict[str, Facet] = field(default_factory=dict)
    types: dict[str, tuple[str, ...]] = field(default_factory=dict)
    labels: dict[str, dict[Any, str]] = field(default_factory=dict)
    values: dict[str, set[Any]] = field(default_factory=dict)
    terms: dict[Phrase, list[Term]] = field(default_factory=dict)
    type_words: dict[str, list[str]] = field(default_factory=dict)  # folded word -> source types it names
    meanings: dict[str, Meanings] = field(default_factory=dict)

    def meaning(self, source_type: str | None) -> Meanings:
        return self.meanings.get(source_type or "", Meanings())

    def anchor_of(self, source_type: str, source_id: str) -> str:
        """``[TASK #42]``, ``[TICKETS #1042]``: the type as its source names it and the row id."""
        m = self.meanings.get(source_type)
        if m is None:
            return anchor_of(source_type, source_id)
        return f"[{m.anchor or source_type.upper()} #{m.shown_id(source_id)}]"

    def leaf_types(self) -> list[str]:
        """Types whose records no facet refers to (the records a question is about, not their containers)."""
        referred = {f.refers_to for f in self.facets.values() if f.refers_to}
        return [t for t in self.types if t not in referred]

    @property
    def max_phrase(self) -> int:
        return max((len(p) for p in self.terms), default=1)

    def label(self, facet: str, value: Any) -> str:
        if value is None:
            return "none"
        names = self.labels.get(facet, {})
        if value in names:
            return names[value]
        try:
            return names.get(int(value), str(value))
        except (TypeError, ValueError):
            return str(value)

    def types_with(self, facet_names: Iterable[str]) -> list[str]:
        """Source types that declare every one of ``facet_names``, in declaration order."""
        wanted = set(facet_names)
        return [t for t, names in self.types.items() if wanted <= set(names)]

    def facets_of(self, source_type: str) -> list[Facet]:
        return [self.facets[n] for n in self.types.get(source_type, ())]

    def cue_facets(self, word: str) -> list[Facet]:
        return [f for f in self.facets.values() if word in {fold(c) for c in f.cues}]

    def _add(self, phrase: Phrase, term: Term) -> None:
        if not phrase:
            return
        bucket = self.terms.setdefault(phrase, [])
        for i, known in enumerate(bucket):
            if (known.facet, known.values, known.kind) == (term.facet, term.values, term.kind):
                if known.types and term.types:  # the same meaning for one more type
                    bucket[i] = replace(known, types=known.types | term.types)
                elif known.types:
                    bucket[i] = term
                return
        bucket.append(term)


def build_vocabulary(
    declared: Iterable[Declaration],
    values: Mapping[str, Iterable[Any]],
    labels: Mapping[str, Mapping[Any, str]],
    type_values: Mapping[str, Mapping[str, Iterable[Any]]] | None = None,
) -> Vocabulary:
    """The vocabulary of the ``declared`` source types, with the data's values and names.

    A word names the types whose nouns it is (a SQL source ``tickets`` owns
    "ticket"); only when no type owns it, the types that list it in ``words``.
    ``type_values``: the enum values each type's records hold (``{type: {facet:
    values}}``); a value's words mean it only for the types that hold it
    (without it, every type declaring the facet holds ``values``).
    """
    vocab = Vocabulary()
    declared = list(declared)
    for d in declared:
        names = []
        for facet in d.facets:
            known = vocab.facets.setdefault(facet.name, facet)
            names.append(known.name)
        vocab.types[d.source_type] = tuple(names)
        vocab.meanings[d.source_type] = d.meanings
    own: dict[str, list[str]] = {}
    extra: dict[str, list[str]] = {}
    for d in declared:
        for w in d.meanings.own_words():
            own.setdefault(w, []).append(d.source_type)
        for w in d.meanings.all_words():
            extra.setdefault(w, []).append(d.source_type)
    for w, found in extra.items():
        vocab.type_words[w] = list(dict.fromkeys(own.get(w) or found))
    for name, facet in vocab.facets.items():
        vocab.values[name] = {v for v in values.get(name, ()) if v is not None} | set(facet.values)
        vocab.labels[name] = dict(labels.get(name, {}))
        if facet.kind == "ref":
            vocab.values[name] |= set(vocab.labels[name])
            _add_names(vocab, facet)
        for item in facet.none_words:
            vocab._add(words(item), Term(name, (), "null"))
    for d in declared:
        for facet in d.facets:
            if facet.kind != "enum":
                continue
            if type_values is None:
                held = set(vocab.values[facet.name])
            else:
                held = {v for v in type_values.get(d.source_type, {}).get(facet.name, ()) if v is not None}
                vocab.values[facet.name] |= held
            _add_enum(vocab, d, facet, held | set(facet.values))
    return vocab


def inflections(word: str) -> tuple[str, ...]:
    """Plural and gender forms of one EN/ES word: rechazado -> rechazados, rechazada, rechazadas."""
    if len(word) < 4 or not word.isalpha():
        return ()
    out = [word + "s", word + "es"] if word[-1] not in "aeiou" else [word + "s"]
    if word[-1] in "oa":
        other = word[:-1] + ("a" if word[-1] == "o" else "o")
        out += [other, other + "s"]
    if word.endswith("s"):
        out.append(word[:-1])
        if word.endswith("es"):
            out.append(word[:-2])
    return tuple(w for w in out if len(w) >= 4 and w not in _RESERVED)


# Words an inflected form must never become: filler, and the single words of the lexicon's phrases.
_RESERVED = (
    frozenset(STOPWORDS)
    | lx.RECORD_WORDS
    | {
        p[0]
        for group in (
            lx.COUNT,
            lx.NEGATION,
            lx.CALLER,
            lx.OVERDUE,
            lx.NO_DUE_DATE,
            lx.MOST,
            lx.FEWEST,
            lx.OPEN,
            lx.FINISHED,
            lx.NOBODY,
            lx.BEFORE,
            lx.AFTER,
            lx.GROUP_LEAD,
            lx.WHO,
            *lx.WINDOWS.values(),
        )
        for p in group
        if len(p) == 1
    }
)


def _add_enum(vocab: Vocabulary, d: Declaration, facet: Facet, held: set[Any]) -> None:
    """A type's words for its values: own text first, then its declared words, then the common table.

    Each is kept only where no earlier kind already gives the phrase another value of this facet in this
    type (the orders' own URGENT wins over the table's "urgent" for CRITICAL), and every word is also
    matched in its plural and other gender (*rechazados*, *urgentes*)."""
    types = frozenset({d.source_type})
    taken: dict[Phrase, Any] = {}
    by_text = {str(v).upper(): v for v in held}
    layers: list[list[tuple[Phrase, Any]]] = [[(words(str(v)), v) for v in sorted(held, key=str)], [], []]
    for value, items in d.meanings.value_words.items():
        if str(value).upper() in by_text:
            layers[1] += [(words(item), by_text[str(value).upper()]) for item in items]
    for text, value in sorted(by_text.items()):
        layers[2] += [(words(item), value) for items in SYNONYMS.get(text, {}).values() for item in items]
    for layer in layers:
        fresh = [(p, v) for p, v in layer if p and taken.setdefault(p, v) == v]
        for phrase, value in fresh:
            vocab._add(phrase, Term(facet.name, (value,), types=types))
    for layer in layers:
        for phrase, value in layer:
            if len(phrase) != 1:
                continue
            for form in inflections(phrase[0]):
                known = vocab.terms.get((form,), [])
                if form in vocab.type_words or any(
                    (t.facet, t.values) != (facet.name, (value,)) and t.applies_to(d.source_type)
                    for t in known
                ):
                    continue  # a form that already means something else keeps that meaning
                if taken.setdefault((form,), value) == value:
                    vocab._add((form,), Term(facet.name, (value,), types=types))


def _add_names(vocab: Vocabulary, facet: Facet) -> None:
    names = vocab.labels[facet.name]
    partial: dict[Phrase, list[Any]] = {}
    for value, label in names.items():
        full = words(label)
        if not full:
            continue
        vocab._add(full, Term(facet.name, (value,)))
        if len(full) < 2:
            continue
        parts = [full[:1], full[-1:]] if facet.person else [full[:1]]
        for part in parts:
            if part[0] in STOPWORDS or part[0].isdigit() or len(part[0]) < 3:
                continue
            partial.setdefault(part, []).append(value)
    heads = [words(label)[:1] for label in names.values()]
    for part, ids in partial.items():
        if not facet.person and (len(ids) > 1 or heads.count(part) > 1 or len(part[0]) < 4):
            continue  # a project's first word counts alone only when it is its alone
        vocab._add(part, Term(facet.name, tuple(dict.fromkeys(ids)), "partial"))
