"""The chunk table's indexed facet columns: where a source's integer facet can also be stored.

Facets live in ``RAG_CHUNK.FACETS`` (a JSON object). A few integer facets
are also worth a column of their own: a search narrowed by one of them
(``Filters``) compares that column next to the scope predicate, through the
column's own index, in every leg's statement, and the embedded engine's
in-process indexes mask on it without reading JSON. ``RAG_CHUNK`` has two
such columns; the reference sources store their project and sprint in them
(a facet declared ``indexed``, sources/reference_facets.py), and any source may store
a facet of the same name there.

This module is the one place the generic code learns them from: the
indexer writes, the engines read and filter, the retriever returns them by
facet name, always in this order (the statements list them in this order
after ``OWNER_ID``, engines/engine_sql.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from oracle_rag.errors import InputError


@dataclass(frozen=True)
class IndexedColumn:
    """One indexed facet column.

    ``facet``: the facet whose value it holds, also the chunk writes' bind
    (``:facet``); ``column``: its name in ``RAG_CHUNK`` and ``RAG_CHUNK_TERM``;
    ``filter_bind``: the bind the search statements compare it with (NULL: no
    filter).
    """

    facet: str
    column: str
    filter_bind: str


INDEXED_COLUMNS = (
    IndexedColumn("project_id", "PROJECT_ID", "f_project"),
    IndexedColumn("sprint_id", "SPRINT_ID", "f_sprint"),
)
INDEXED_FACETS = tuple(c.facet for c in INDEXED_COLUMNS)
NO_VALUES: tuple[None, ...] = (None,) * len(INDEXED_COLUMNS)


def indexed_values(facets: Mapping[str, Any], indexed: Sequence[str]) -> tuple[int | None, ...]:
    """The indexed columns' values of a record: its value of each facet in ``indexed`` (a source's
    facets declared indexed), None for a column no such facet holds or a record without the value."""
    return tuple(_integer(facets.get(c.facet)) if c.facet in indexed else None for c in INDEXED_COLUMNS)


def by_facet(values: Sequence[int | None]) -> dict[str, int | None]:
    """The columns' values (in :data:`INDEXED_COLUMNS` order) by facet name."""
    return {c.facet: v for c, v in zip(INDEXED_COLUMNS, values, strict=True)}


def _integer(value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    raise InputError(f"an indexed facet holds integers, got {type(value).__name__}")
