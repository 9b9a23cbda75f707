"""What a source's records mean to a question: the declarations every source makes.

The structured answerer (``oracle_rag.answering.structured``) knows nothing about any
particular application: which words name a source's records ("task",
"ticket", "caso"), which facet "my" means, which enum facet is the record's
state and which of its values mean finished, which date "overdue" is about,
which facets a list shows, and how a record is cited all come from here.
Reference sources declare them as class attributes (``sources/reference.py``),
a SQL-query source from its configuration (``sources/sql_query.py``).

A :class:`Declaration` is what the answerer is given per source type: the
facets (``sources/facets.py``), these :class:`Meanings`, and a function that
names the ids of ``ref`` facets (employees, projects...).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from oracle_rag.errors import ConfigurationError
from oracle_rag.sources.facets import Facet

Labels = Callable[[sa.Connection], dict[str, dict[Any, str]]]


def fold_word(text: str) -> str:
    """Lower case without accents (how every declared word is compared)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold().strip()


@dataclass(frozen=True)
class Meanings:
    """The meaning declarations of one source type.

    ``nouns``: how answers name one and several records, per language
    (``{"en": ("task", "tasks"), "es": ("tarea", "tareas")}``); their words
    name the type in questions. ``words``: further words naming the records
    (EN/ES, singular and plural: "bug", "caso"); a word another source names
    itself by (its nouns) means that source. ``mine``: the person facet that
    "my", "mine", "I", "mis", "tengo" mean (the caller's employee id).
    ``lifecycle``: the enum facet that is the record's state, ``done`` its
    values meaning finished ("open", "still open", "pending", "sin terminar"
    mean none of these). ``due``: the date facet "overdue" and "due this
    week" are about (only that one). ``display``: the facets a list shows per
    record (empty: enums, people and the due date). ``anchor``: the type as
    citations name it (``[TASK #42]``, ``[TICKETS #1042]``). ``bare_ids``: a
    bare "#42" may mean this type's record 42. ``id_prefix``: what the stored
    SOURCE_ID puts before the row id (a SQL source stores ``tickets#1042``).
    ``value_words``: other words (any language) for this type's enum values,
    ``{"REJECTED": ("rechazado", ...)}``; they mean the value only for this
    type, only when its data (or its facet's declaration) has the value, and
    never where the phrase is another value's own text in this type.
    ``labels_es``: a facet's label in Spanish answers (``{"stage": "etapa"}``).
    """

    nouns: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    words: tuple[str, ...] = ()
    mine: str | None = None
    lifecycle: str | None = None
    done: tuple[str, ...] = ()
    due: str | None = None
    display: tuple[str, ...] = ()
    anchor: str = ""
    bare_ids: bool = True
    id_prefix: str = ""
    value_words: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    labels_es: Mapping[str, str] = field(default_factory=dict)

    def noun(self, n: int, language: str) -> str:
        forms = self.nouns.get(language) or self.nouns.get("en")
        if not forms:
            return "record" if n == 1 else "records"
        return forms[0] if n == 1 else forms[1]

    def own_words(self) -> tuple[str, ...]:
        """The words of its nouns (the words a source names itself by), folded."""
        return tuple(dict.fromkeys(fold_word(w) for forms in self.nouns.values() for w in forms))

    def all_words(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.own_words(), *(fold_word(w) for w in self.words)]))

    def stored_id(self, row_id: str) -> str:
        return f"{self.id_prefix}{row_id}"

    def shown_id(self, source_id: str) -> str:
        if self.id_prefix and source_id.startswith(self.id_prefix):
            return source_id[len(self.id_prefix) :]
        return source_id


@dataclass(frozen=True)
class Declaration:
    """One source type as the answerer sees it: facets, meanings, names of ref values."""

    source_type: str
    facets: tuple[Facet, ...]
    meanings: Meanings
    labels: Labels | None = None

    def facet(self, name: str | None) -> Facet | None:
        return next((f for f in self.facets if f.name == name), None)

    @property
    def date_facets(self) -> tuple[Facet, ...]:
        return tuple(f for f in self.facets if f.kind == "date")

    @property
    def person_facets(self) -> tuple[Facet, ...]:
        return tuple(f for f in self.facets if f.person)

    @property
    def anchor(self) -> str:
        return self.meanings.anchor or self.source_type.upper()


def anchor_parts(source_type: str, source_id: str) -> tuple[str, str]:
    """The type and id an anchor shows: a SQL source's row ``tickets#1042`` is ``TICKETS #1042``.

    A SQL-query source stores ``<name>#<row id>`` as SOURCE_ID (sources/sql_query.py); the anchor
    names the type as the source names it, upper-cased, and the row id. Other ids are shown as stored.
    """
    prefix = f"{source_type}#"
    if source_id.startswith(prefix) and len(source_id) > len(prefix):
        return source_type.upper(), source_id[len(prefix) :]
    return source_type, source_id


def anchor_of(source_type: str, source_id: str) -> str:
    """``[TASK #42]``, ``[TICKETS #1042]``: how answers cite a record (and models are asked to)."""
    shown_type, shown_id = anchor_parts(source_type, source_id)
    return f"[{shown_type} #{shown_id}]"


def check_meanings(
    source_type: str, facets: Iterable[Facet], meanings: Meanings, key: str = "sources"
) -> None:
    """Every facet a meaning names exists with the right kind (ConfigurationError naming the key)."""
    by_name = {f.name: f for f in facets}

    def need(option: str, name: str | None, kinds: tuple[str, ...]) -> None:
        if name is None:
            return
        facet = by_name.get(name)
        if facet is None or facet.kind not in kinds:
            raise ConfigurationError(
                f"{key}.{option}: {name!r} is not a {' or '.join(kinds)} facet of {source_type}",
                key=f"{key}.{option}",
            )

    need("person_facets", meanings.mine, ("ref",))
    need("lifecycle", meanings.lifecycle, ("enum",))
    need("due_facet", meanings.due, ("date",))
    for name in meanings.display:
        need("display", name, ("enum", "ref", "date", "number"))
    if meanings.done and meanings.lifecycle is None:
        raise ConfigurationError(
            f"{key}.done_values: needs lifecycle (the facet the values belong to)", key=f"{key}.done_values"
        )
