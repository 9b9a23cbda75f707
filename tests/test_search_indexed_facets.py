"""A search narrowed by an indexed facet: any source that declares the facet indexed, on every leg.

Real SQLite files, the real model (through RagSystem), real searches: two sources of our own
declare a facet named like an indexed facet column, one indexed and one not, and the filter
keeps exactly the indexed source's records with that value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import sqlalchemy as sa

from oracle_rag.callers.caller import Caller
from oracle_rag.engines import Filters
from oracle_rag.engines.indexed_columns import INDEXED_COLUMNS, INDEXED_FACETS, by_facet, indexed_values
from oracle_rag.errors import ConfigurationError, InputError
from oracle_rag.sources import Document, Source
from oracle_rag.sources.facets import Facet

MANAGER = Caller(employee_id=1, role="manager", name="m")
FACET = INDEXED_FACETS[0]  # the first indexed facet column's facet, whatever its name
COLUMN = INDEXED_COLUMNS[0].column


class Notes(Source):
    """A source over a dict: id -> (text, facets)."""

    def __init__(self, source_type: str, indexed: bool, notes: Mapping[str, tuple[str, Mapping[str, Any]]]):
        self.SOURCE_TYPE = source_type
        self.facets = (Facet(FACET, "ref", "group", indexed=indexed),)
        self.notes = dict(notes)

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        return {
            i: Document(self.SOURCE_TYPE, i, self.notes[i][0], facets=self.notes[i][1])
            for i in ids
            if i in self.notes
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return list(self.notes)


TEXTS = ["quokka burrow survey", "quokka island census", "quokka diet notes", "quokka photos"]


@pytest.fixture
def system(make_settings):
    from oracle_rag.system import RagSystem

    indexed = Notes("NOTE", True, {str(i): (t, {FACET: 1 + i % 2}) for i, t in enumerate(TEXTS)})
    plain = Notes("MEMO", False, {str(i): (t, {FACET: 1 + i % 2}) for i, t in enumerate(TEXTS)})
    rag = RagSystem(make_settings(), sources=[indexed, plain])
    rag.migrate()
    with rag.engine.begin() as conn:
        rag.indexer.apply(conn, [(s.SOURCE_TYPE, i) for s in (indexed, plain) for i in s.notes])
    yield rag
    rag.close()


def test_the_indexer_writes_only_a_facet_declared_indexed_to_its_column(system) -> None:
    with system.engine.connect() as conn:
        rows = conn.exec_driver_sql(f"SELECT SOURCE_TYPE, SOURCE_ID, {COLUMN} FROM RAG_CHUNK").fetchall()
    stored = {(t, i): v for t, i, v in rows}
    assert stored == {
        **{("NOTE", str(i)): 1 + i % 2 for i in range(len(TEXTS))},
        **{("MEMO", str(i)): None for i in range(len(TEXTS))},
    }


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_a_filter_keeps_the_indexed_records_with_the_value(system, mode: str) -> None:
    retriever = system.retriever()
    everything = retriever.search("quokka", 20, MANAGER, mode)
    assert {h.source_type for h in everything} == {"NOTE", "MEMO"}
    for value in (1, 2):
        found = retriever.search("quokka", 20, MANAGER, mode, Filters(facets={FACET: value}))
        assert sorted(h.source_id for h in found) == [str(i) for i in range(len(TEXTS)) if 1 + i % 2 == value]
        assert {h.source_type for h in found} == {"NOTE"}
        assert all(h.indexed[FACET] == value for h in found)
    assert retriever.search("quokka", 20, MANAGER, mode, Filters(facets={FACET: 3})) == []


def test_facets_by_keyword_or_by_mapping_are_one_filter() -> None:
    by_name = Filters(source_types=("NOTE",), **{FACET: 2})
    assert by_name == Filters(source_types=("NOTE",), facets={FACET: 2})
    assert by_name.indexed == tuple(2 if f == FACET else None for f in INDEXED_FACETS)
    assert Filters(**{FACET: None}) == Filters()  # None: no filter
    assert dataclasses.replace(by_name, first_chunk=True).facets == by_name.facets
    bind = INDEXED_COLUMNS[0].filter_bind
    assert by_name.binds()[bind] == 2 and Filters().binds()[bind] is None


def test_only_an_indexed_facet_narrows_a_search() -> None:
    with pytest.raises(InputError, match="indexed facet"):
        Filters(status="OPEN")
    with pytest.raises(ConfigurationError):
        Facet("status", "enum", "status", indexed=True)  # no column holds it
    with pytest.raises(ConfigurationError):
        Facet(FACET, "enum", "group", indexed=True)  # a column holds integers


def test_an_indexed_value_must_be_an_integer() -> None:
    assert indexed_values({FACET: 2.0}, (FACET,))[0] == 2
    assert indexed_values({FACET: 2}, ())[0] is None  # not declared indexed: not written
    with pytest.raises(InputError):
        indexed_values({FACET: "two"}, (FACET,))
    with pytest.raises(InputError):
        indexed_values({FACET: 2.5}, (FACET,))
    assert list(by_facet(indexed_values({}, (FACET,)))) == list(INDEXED_FACETS)


def test_the_statements_list_the_indexed_columns_where_their_rows_are_read() -> None:
    """Rows are read by position (records.ROW_INDEXED, the caches' rows, the record view): wherever a
    statement lists an indexed column after OWNER_ID, it lists all of them, in INDEXED_COLUMNS order."""
    import re

    from oracle_rag.answering.chat import chat_sql
    from oracle_rag.engines import Sql, engine_sql

    names = "|".join(c.column for c in INDEXED_COLUMNS)
    started = re.compile(rf"OWNER_ID, (\w+\.)?({names})\b")
    full = re.compile(r"OWNER_ID, " + ", ".join(rf"(\w+\.)?{c.column}" for c in INDEXED_COLUMNS) + r"\b")
    texts = [
        (name, text)
        for module in (engine_sql, chat_sql)
        for name, value in vars(module).items()
        if isinstance(value, Sql)
        for text in (value.oracle, value.sqlite)
        if text
    ]
    lists = [(name, text) for name, text in texts if started.search(text)]
    assert len({name for name, _ in lists}) >= 8  # the search statements, chunk state, caches, record view
    for name, text in lists:
        assert len(started.findall(text)) == len(full.findall(text)), name
