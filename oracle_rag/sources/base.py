"""What a knowledge source is: a type of entity the index mirrors.

A source knows how to load entities by id (in batches, on the worker's own
connection so it reads the state its transaction sees), how to list every
id (for backfill), and how to render an entity to the exact chunk text that
gets hashed and embedded. Rendering is pure so it can be golden-tested.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

import sqlalchemy as sa

from oracle_rag.errors import ConfigurationError
from oracle_rag.sources.access import LEGACY, AccessPolicy
from oracle_rag.sources.facets import Facet
from oracle_rag.sources.meanings import Declaration, Meanings

T = TypeVar("T")


@dataclass(frozen=True)
class Document:
    """A rendered entity: its text, its owner and its facet values.

    ``facets`` is a flat mapping (name -> text, number, boolean or None) the
    indexer writes to FACETS on every chunk of the record, in the same upsert
    (and the values of the source's indexed facets to their columns,
    :meth:`Source.indexed_facets`).
    ``groups`` are the record's groups for a source whose access policy has
    the ``group`` rule (sources/access.py).
    """

    source_type: str
    source_id: str
    content: str
    owner_id: int | None = None
    facets: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[str, ...] = ()


class Source(ABC):
    """One source type (TASK, SPRINT, PROJECT, a SQL-query source, ...)."""

    SOURCE_TYPE: str
    # What questions can filter and count this source's records by (sources/facets.py).
    facets: tuple[Facet, ...] = ()
    # What questions mean by this source's words: record words, "my", lifecycle, due date, display
    # (sources/meanings.py; docs/answers.md).
    meanings: Meanings = Meanings()

    def declaration(self) -> Declaration:
        """The facets and meanings the structured answerer is given for this source type."""
        return Declaration(self.SOURCE_TYPE, tuple(self.facets), self.meanings, self.labels)

    def indexed_facets(self) -> tuple[str, ...]:
        """The facets whose values also go to the chunk table's indexed columns (``Facet.indexed``)."""
        return tuple(f.name for f in self.facets if f.indexed)

    # Who may read its records (sources/access.py); LEGACY: the owner, everyone when there is none.
    access: AccessPolicy = LEGACY

    def labels(self, conn: sa.Connection) -> dict[str, dict[Any, str]]:
        """Names for the values of this source's ``ref`` facets (employee id -> name ...).

        Only organisational names belong here (people, projects, sprints):
        they are shown to every caller, like the sprint and project records.
        """
        return {}

    @abstractmethod
    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        """Render the entities that exist; missing ids are simply absent."""

    @abstractmethod
    def all_ids(self, conn: sa.Connection) -> list[str]:
        """Every entity id, for backfill."""

    def load(self, conn: sa.Connection, source_id: str) -> Document | None:
        return self.load_many(conn, [str(source_id)]).get(str(source_id))


class SourceRegistry:
    """The sources a worker and backfill know about, by SOURCE_TYPE."""

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self._sources: dict[str, Source] = {}
        for source in sources:
            self.add(source)

    def add(self, source: Source) -> None:
        if source.SOURCE_TYPE.casefold() in {t.casefold() for t in self._sources}:
            raise ConfigurationError(f"source type {source.SOURCE_TYPE!r} registered twice", key="sources")
        self._sources[source.SOURCE_TYPE] = source

    def settle(self, *, force: bool = False) -> bool:
        """Look again for sources registered only where their tables exist (none here: always settled)."""
        return True

    def get(self, source_type: str) -> Source | None:
        """The source of a type, matched ignoring case.

        Queue rows are written by other applications too (the reference Java
        service writes ``'task'``); types differ from one another by more than
        case (``add`` refuses that), so folding case cannot pick the wrong one.
        """
        found = self._sources.get(source_type)
        if found is None:
            folded = source_type.casefold()
            found = next((s for t, s in self._sources.items() if t.casefold() == folded), None)
        return found

    def canonical(self, source_type: str) -> str:
        """The registered spelling of ``source_type`` (itself when unknown)."""
        source = self.get(source_type)
        return source.SOURCE_TYPE if source is not None else source_type

    def types(self) -> list[str]:
        return list(self._sources)

    def __iter__(self) -> Iterator[Source]:
        return iter(self._sources.values())


def fmt_date(value: Any) -> str:
    """Dates render as YYYY-MM-DD on both engines (Oracle returns datetime, SQLite text)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, dt.datetime | dt.date):
        return value.strftime("%Y-%m-%d")
    return str(value)[:10]


def iso_or_none(value: Any) -> str | None:
    """A stored timestamp as ISO-8601 text: Oracle returns datetime, SQLite text."""
    if value is None:
        return None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)


def fmt_number(value: Any) -> str:
    """8.0 -> '8', 2.5 -> '2.5' (Oracle NUMBER arrives as int, float or Decimal)."""
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def text_or_dash(value: Any) -> str:
    if value is None:
        return "-"
    text = str(value).strip()
    return text if text else "-"


def as_int(value: Any) -> int | None:
    return None if value is None else int(value)


def chunked(ids: Sequence[T], size: int = 500) -> Iterable[list[T]]:
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])
