"""Migration V6 (SQLite) / V5 (Oracle): chunks per record, facets, the where fragment.

Real SQLite files, the real model (through RagSystem), real searches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oracle_rag.callers.caller import Caller
from oracle_rag.engines import ChunkWrite, Filters, Where, content_hash, facets_json, facets_value
from oracle_rag.errors import InputError
from oracle_rag.migrations import discover
from oracle_rag.sources import Document, Source
from oracle_rag.sql_scripts import split_sqlite_script

MANAGER = Caller(employee_id=1, role="manager", name="m")


class NoteSource(Source):
    """A source over a dict: id -> (text, owner, facets)."""

    SOURCE_TYPE = "NOTE"

    def __init__(self) -> None:
        self.notes: dict[str, tuple[str, int | None, Mapping[str, Any]]] = {}

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        return {
            i: Document("NOTE", i, self.notes[i][0], owner_id=self.notes[i][1], facets=self.notes[i][2])
            for i in ids
            if i in self.notes
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return list(self.notes)


@pytest.fixture
def notes(make_settings):
    from oracle_rag.system import RagSystem

    source = NoteSource()
    system = RagSystem(make_settings(), sources=[source])
    system.migrate()
    yield system, source
    system.close()


def _index(system: Any, ids: Sequence[str]) -> Any:
    with system.engine.begin() as conn:
        return system.indexer.apply(conn, [("NOTE", i) for i in ids])


def _rows(system: Any) -> list[tuple[Any, ...]]:
    with system.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.exec_driver_sql(
                "SELECT SOURCE_ID, CHUNK_NO, FACETS, OWNER_ID FROM RAG_CHUNK ORDER BY SOURCE_ID, CHUNK_NO"
            )
        ]


# -- the migration on a database that already holds chunks ------------------------
def test_v6_keeps_every_chunk_its_id_and_the_id_high_water_mark(tmp_path: Path) -> None:
    import sqlean

    from oracle_rag.config import load_settings
    from oracle_rag.engines.sqlite.engine import SqliteEngine

    engine = SqliteEngine(load_settings(env={}, data_dir=str(tmp_path)))
    migrations = discover(engine.migrations_dir())
    v6 = next(m for m in migrations if m.path.name == "V6__chunks_per_record.sql")
    db = sqlean.connect(str(tmp_path / "old.db"))
    db.isolation_level = None
    db.execute("PRAGMA foreign_keys=ON")
    for m in migrations:
        if m.version < v6.version:
            for sql in split_sqlite_script(m.text):
                db.execute(sql)
    blob = b"\x00" * 1536
    for i in (1, 2, 3):
        db.execute(
            "INSERT INTO RAG_CHUNK (SOURCE_TYPE, SOURCE_ID, OWNER_ID, CONTENT, EMBEDDING, CONTENT_HASH) "
            "VALUES ('TASK', ?, 7, ?, ?, 'h')",
            (str(i), f"quokka number {i}", blob),
        )
    db.execute("DELETE FROM RAG_CHUNK WHERE SOURCE_ID = '3'")  # the high-water mark is 3, the max id 2
    log_before = db.execute("SELECT MAX(SEQ) FROM RAG_CHUNK_LOG").fetchone()[0]
    db.execute("BEGIN")
    for sql in split_sqlite_script(v6.text):
        db.execute(sql)
    db.execute("COMMIT")
    rows = db.execute(
        "SELECT CHUNK_ID, SOURCE_ID, CHUNK_NO, FACETS, TERM_COUNT, OWNER_ID FROM RAG_CHUNK ORDER BY CHUNK_ID"
    ).fetchall()
    assert rows == [(1, "1", 0, "{}", None, 7), (2, "2", 0, "{}", None, 7)]
    # the FTS5 index still answers (same rowids) and its triggers are back
    assert db.execute(
        "SELECT rowid FROM RAG_CHUNK_FTS WHERE RAG_CHUNK_FTS MATCH 'quokka' ORDER BY rowid"
    ).fetchall() == [(1,), (2,)]
    db.execute(
        "INSERT INTO RAG_CHUNK (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, CONTENT, EMBEDDING, "
        "CONTENT_HASH) VALUES ('TASK', '1', 1, 7, 'second window wombat', ?, 'h')",
        (blob,),
    )
    new_id = db.execute("SELECT CHUNK_ID FROM RAG_CHUNK WHERE CHUNK_NO = 1").fetchone()[0]
    assert new_id == 4  # never 3: AUTOINCREMENT's high-water mark survived the rebuild
    assert db.execute("SELECT rowid FROM RAG_CHUNK_FTS WHERE RAG_CHUNK_FTS MATCH 'wombat'").fetchall() == [
        (4,)
    ]
    assert (
        db.execute("SELECT MAX(SEQ) FROM RAG_CHUNK_LOG").fetchone()[0] > log_before
    )  # the log trigger is back
    with pytest.raises(sqlean.IntegrityError):  # (type, id, chunk_no) is the key
        db.execute(
            "INSERT INTO RAG_CHUNK (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, CONTENT, EMBEDDING, CONTENT_HASH) "
            "VALUES ('TASK', '1', 1, 'x', ?, 'h')",
            (blob,),
        )
    for bad in ("[1]", "not json"):
        with pytest.raises(sqlean.IntegrityError):
            db.execute("UPDATE RAG_CHUNK SET FACETS = ? WHERE CHUNK_ID = 1", (bad,))
    # postings go with their chunk
    db.execute("INSERT INTO RAG_CHUNK_TERM (TERM, CHUNK_ID, TF) VALUES ('quokka', 1, 1)")
    db.execute("DELETE FROM RAG_CHUNK WHERE CHUNK_ID = 1")
    assert db.execute("SELECT COUNT(*) FROM RAG_CHUNK_TERM").fetchone()[0] == 0
    db.close()


# -- facets: written by the indexer, read back by every search mode ------------------
def test_facets_travel_from_the_document_to_every_search_mode(notes) -> None:
    system, source = notes
    source.notes = {
        "1": ("the payment gateway times out", None, {"status": "open", "points": 3}),
        "2": ("the payment page is slow", None, {}),
    }
    assert _index(system, ["1", "2"]).embedded == 2
    assert _rows(system) == [("1", 0, '{"points":3,"status":"open"}', None), ("2", 0, "{}", None)]
    retriever = system.retriever()
    for mode in ("semantic", "keyword", "hybrid"):
        found = {h.source_id: h.facets for h in retriever.search("payment", 5, MANAGER, mode)}
        assert found == {"1": {"points": 3, "status": "open"}, "2": {}}, mode


def test_a_facet_change_alone_rewrites_the_record(notes) -> None:
    system, source = notes
    source.notes = {"1": ("the payment gateway times out", None, {"status": "open"})}
    _index(system, ["1"])
    assert _index(system, ["1"]).unchanged == 1
    source.notes["1"] = ("the payment gateway times out", None, {"status": "done"})
    res = _index(system, ["1"])
    assert res.unchanged == 0
    assert _rows(system) == [("1", 0, '{"status":"done"}', None)]


def test_facets_are_flat_and_canonical() -> None:
    assert facets_json({"b": 1, "a": "x", "c": None, "d": True}) == '{"a":"x","b":1,"c":null,"d":true}'
    assert facets_json(None) == facets_json({}) == "{}"
    for bad in ({"a": [1]}, {"a": {"b": 1}}, {"": 1}, {"a": float("nan")}):
        with pytest.raises((InputError, ValueError)):
            facets_json(bad)
    assert facets_value(None) == {} and facets_value('{"a":1}') == {"a": 1}
    from decimal import Decimal

    assert facets_value({"a": Decimal("2"), "b": Decimal("2.5")}) == {
        "a": 2,
        "b": 2.5,
    }  # Oracle's JSON numbers


def test_a_float_facet_has_one_canonical_form_on_both_sides() -> None:
    """N10: the source says 2.0, Oracle's JSON reads back Decimal('2'): the same text, so no re-scope."""
    from decimal import Decimal

    written = facets_json({"estimate": 2.0, "ratio": 0.1, "n": 3, "flag": True, "big": 1e20})
    assert written == '{"big":100000000000000000000,"estimate":2,"flag":true,"n":3,"ratio":0.1}'
    oracle_back = {
        "estimate": Decimal("2"),
        "ratio": Decimal("0.1"),
        "n": Decimal("3"),
        "flag": True,
        "big": Decimal("1E+20"),
    }
    assert facets_json(facets_value(oracle_back)) == written
    assert facets_json(facets_value(written)) == written  # SQLite reads its own text back
    assert facets_json({"estimate": Decimal("2.50")}) == '{"estimate":2.5}'
    with pytest.raises(InputError):
        facets_json({"a": float("inf")})


# -- several chunks of one record -----------------------------------------------------
def test_a_record_holds_several_chunks_and_trim_drops_the_extra_ones(notes) -> None:
    system, _ = notes
    facets = facets_json({"status": "open"})
    writes = [
        ChunkWrite(
            "NOTE",
            "9",
            f"window {n} of the record",
            content_hash("whole"),
            5,
            chunk_no=n,
            facets=facets,
        )
        for n in range(3)
    ]
    with system.engine.begin() as conn:
        assert system.engine.upsert_chunks(conn, writes) == 3
    assert [r[:2] for r in _rows(system)] == [("9", 0), ("9", 1), ("9", 2)]
    with system.engine.begin() as conn:
        assert system.engine.trim_chunks(conn, [("NOTE", "9", 1)]) == 2
        assert system.engine.chunk_ids(conn, "NOTE") == {"9"}
    assert [r[:2] for r in _rows(system)] == [("9", 0)]
    with system.engine.begin() as conn:
        system.engine.upsert_chunks(conn, writes)
        assert system.engine.delete_chunks(conn, "NOTE", ["9"]) == 3  # delete is per record
    assert _rows(system) == []


# -- the where fragment -------------------------------------------------------------
def test_where_fragment_narrows_all_three_modes_before_the_top_k(notes) -> None:
    system, source = notes
    source.notes = {
        str(i): (f"payment incident number {i}", None, {"status": "open" if i % 3 == 0 else "done"})
        for i in range(1, 13)
    }
    _index(system, list(source.notes))
    where = Where("json_extract(c.FACETS, '$.status') = :w_status", {"w_status": "open"})
    retriever = system.retriever()
    for mode in ("semantic", "keyword", "hybrid"):
        found = [h.source_id for h in retriever.search("payment incident", 4, MANAGER, mode, where=where)]
        assert sorted(found, key=int) == ["3", "6", "9", "12"], mode  # k=4 and exactly 4 are open
        narrowed = retriever.search(
            "payment incident",
            4,
            MANAGER,
            mode,
            Filters(source_types=("NOTE",)),
            where=Where("c.SOURCE_ID = :w_id", {"w_id": "5"}),
        )
        assert [h.source_id for h in narrowed] == ["5"], mode


def test_where_fragment_is_checked() -> None:
    with pytest.raises(InputError):
        Where("c.SOURCE_ID = :id", {"id": "1"})  # bind names must start with w_
    with pytest.raises(InputError):
        Where("1 = 1; DROP TABLE RAG_CHUNK")
    with pytest.raises(InputError):
        Where("  ")
