"""BM25 (oracle_rag/text/bm25.py): the formula, the analyser, and a ranking that depends only on what
the caller may see.

The leak property (hypothesis): adding records the caller cannot see, whatever
their text, changes neither the set nor the order of the caller's results,
in all three modes, through the in-process index and through the SQL path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from bm25_reference import ranking as reference_ranking
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from model_helpers import link_model

from oracle_rag.callers.caller import Caller
from oracle_rag.errors import InputError
from oracle_rag.sources import Document, Source
from oracle_rag.text import bm25


def test_analyser_is_bm25s_default() -> None:
    assert bm25.analyze("The Payment-gateway IS down, a 2nd time: ÉTÉ x_y 1") == [
        "payment",
        "gateway",
        "down",
        "2nd",
        "time",
        "ete",
        "x_y",
    ]
    assert bm25.query_terms("flow flow of the flow past cones") == {"flow": 3, "past": 1, "cones": 1}
    analysis = bm25.analyze_record("Flow past cones; flow again")
    assert analysis.length == 5 and dict(analysis.terms) == {"again": 1, "cones": 1, "flow": 2, "past": 1}
    assert len(bm25.analyze("x" * 300)[0]) == bm25.MAX_TERM_CHARS


def test_the_analyser_folds_accents_whatever_the_normal_form() -> None:
    """N6: "sincronizacion" and "sincronización" (composed or decomposed) are one term."""
    import unicodedata

    word = "sincronización"
    assert bm25.analyze(word) == bm25.analyze("SINCRONIZACION") == ["sincronizacion"]
    assert bm25.analyze(unicodedata.normalize("NFD", word)) == [
        "sincronizacion"
    ]  # o + U+0301 does not split it
    assert bm25.analyze("ﬁle Ærø Straße") == ["file", "ærø", "straße"]  # NFKD spells ligatures out
    assert bm25.fold("Año ENERGÍA") == "ano energia"


def test_score_by_hand() -> None:
    # 3 records; "flow" in 2 of them. idf = ln(1 + (3 - 2 + .5) / (2 + .5)) = ln(1.6)
    stats = bm25.Stats(3, 12)  # avgdl 4
    postings = [(1, "flow", 2, 4), (2, "flow", 1, 8)]
    got = bm25.score(stats, {"flow": 1}, postings, bm25.Bm25Params(1.5, 0.75))
    idf = math.log(1.6)
    assert got[1] == pytest.approx(idf * 2 / (2 + 1.5 * (0.25 + 0.75 * 1)))
    assert got[2] == pytest.approx(idf * 1 / (1 + 1.5 * (0.25 + 0.75 * 2)))
    # a query token repeated counts once per occurrence
    twice = bm25.score(stats, {"flow": 2}, postings, bm25.Bm25Params())
    assert twice[1] == pytest.approx(2 * got[1])
    assert bm25.top({5: 1.0, 3: 1.0, 9: 2.0}, 2) == [(9, 2.0), (3, 1.0)]  # ties by id


@pytest.mark.parametrize("k1, b", [(-0.1, 0.5), (3.1, 0.5), (1.0, -0.01), (1.0, 1.5)])
def test_parameters_are_validated(k1: float, b: float, make_settings) -> None:
    with pytest.raises(InputError):
        bm25.Bm25Params(k1, b)
    from oracle_rag.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="bm25_"):
        make_settings(bm25_k1=k1, bm25_b=b)


# -- the product against the reference ------------------------------------------------
class NoteSource(Source):
    SOURCE_TYPE = "NOTE"

    def __init__(self) -> None:
        self.notes: dict[str, tuple[str, int | None]] = {}

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        return {
            i: Document("NOTE", i, self.notes[i][0], owner_id=self.notes[i][1])
            for i in ids
            if i in self.notes
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return list(self.notes)


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory, model_path) -> Any:

    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    data = tmp_path_factory.mktemp("bm25") / "data"
    link_model(model_path, data)
    source = NoteSource()
    system = RagSystem(load_settings(env={}, data_dir=str(data)), sources=[source])
    system.migrate()
    sql_path = RagSystem(
        load_settings(env={}, data_dir=str(data), embedded_term_index=False), sources=[source]
    )
    yield system, sql_path, source
    sql_path.close()
    system.close()


@pytest.fixture(scope="module")
def oracle_form(notes) -> Any:
    """The keyword statement exactly as Oracle runs it: N and the average length scanned in it."""
    from oracle_rag.system import RagSystem

    system, _, source = notes
    rag = RagSystem(system.settings.with_overrides(embedded_term_index=False), sources=[source])
    rag.engine.keyword_stats_cached = False
    yield rag
    rag.close()


def _reset(system: Any, source: NoteSource, notes: dict[str, tuple[str, int | None]]) -> None:
    with system.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM RAG_CHUNK")
    source.notes = dict(notes)
    with system.engine.begin() as conn:
        system.indexer.apply(conn, [("NOTE", i) for i in notes])


CRANFIELD_LIKE = {
    "1": "experimental investigation of the aerodynamics of a wing in a slipstream",
    "2": "simple shear flow past a flat plate in an incompressible fluid of small viscosity",
    "3": "the boundary layer in simple shear flow past a flat plate",
    "4": "approximate solutions of the incompressible laminar boundary layer equations for a plate in shear flow",
    "5": "one-dimensional transient heat conduction into a double-layer slab subjected to a linear heat input",
    "6": "flow flow flow: the laminar boundary layer of a cone in supersonic flow",
}


@pytest.mark.parametrize(
    "query", ["shear flow past a plate", "boundary layer of the cone", "heat slab", "laminar flow flow"]
)
def test_keyword_ranking_equals_the_reference(notes, oracle_form, query: str) -> None:
    system, sql_path, source = notes
    _reset(system, source, {i: (t, None) for i, t in CRANFIELD_LIKE.items()})
    expected = reference_ranking(CRANFIELD_LIKE, query)
    manager = Caller(1, "manager")
    # the in-process index, BM25 in SQL with cached statistics, and the statement Oracle runs
    for rag in (system, sql_path, oracle_form):
        got = [h.source_id for h in rag.retriever().search(query, 10, manager, "keyword")]
        assert got == expected


def test_the_cached_statistics_follow_every_write(notes, oracle_form) -> None:
    """The SQL form's per-scope N and average length are re-read once the change log moves."""
    from bm25_reference import scores

    system, sql_path, source = notes
    first = {i: t for i, t in CRANFIELD_LIKE.items() if i in ("1", "2", "3")}
    _reset(system, source, {i: (t, None) for i, t in first.items()})
    manager = Caller(1, "manager")
    query = "shear flow past a plate"

    def check(docs: dict[str, str]) -> None:
        expected = scores(docs, query)
        for rag in (sql_path, oracle_form):
            got = {h.source_id: h.score for h in rag.retriever().search(query, 10, manager, "keyword")}
            assert got.keys() == expected.keys()
            for key, value in got.items():
                assert value == pytest.approx(expected[key], rel=1e-9), key

    check(first)
    check(first)  # answered from the cache
    source.notes["4"] = (CRANFIELD_LIKE["4"], None)  # N, the average length and df all change
    with system.engine.begin() as conn:
        system.indexer.apply(conn, [("NOTE", "4")])
    check(first | {"4": CRANFIELD_LIKE["4"]})
    with system.engine.begin() as conn:
        system.indexer.delete(conn, "NOTE", "1")
    check({i: t for i, t in CRANFIELD_LIKE.items() if i in ("2", "3", "4")})


# -- max-score pruning in the SQL form (engine_sql.keyword_top) -----------------
def _probed_terms(rag: Any, query: str, k: int, caller: Caller) -> list[str]:
    """The query terms the SQL statement reads only by key probes of the records found through the others."""
    from oracle_rag.engines import Filters, engine_sql
    from oracle_rag.engines.records import search_binds
    from oracle_rag.engines.statements import stmt

    terms = bm25.query_terms(query)
    text = engine_sql.keyword_top(len(terms)).sqlite or ""
    sql = text[: text.index("), found AS")] + ")\nSELECT w.TERM FROM term_bound w WHERE w.ESSENTIAL = 0"
    params = rag.engine.bm25_params()
    binds = {
        **search_binds(caller.scope(), Filters()),
        **engine_sql.keyword_binds(terms),
        "k": k,
        "k1": params.k1,
        "b": params.b,
    }
    with rag.engine.connect() as conn:
        return sorted(str(r[0]) for r in conn.execute(stmt(sql, ("f_types",)), binds))


ME, OTHER = 7, 8
FILLER = ["refund", "invoice", "export", "retry", "gateway", "quokka", "payment", "timeout"]


def test_a_common_term_is_probed_not_scanned_and_the_ranking_is_unchanged(notes, oracle_form) -> None:
    """'ledger' is in every record: below the seed's k-th score, its postings are read for the candidates only."""
    from bm25_reference import scores

    system, sql_path, source = notes
    docs = {
        str(i): " ".join(["ledger"] * (1 + i % 3) + ["wombat"] * (i % 2) + FILLER[: 1 + i % 7])
        for i in range(40)
    }
    _reset(system, source, {i: (t, None) for i, t in docs.items()})
    manager, query, k = Caller(1, "manager"), "wombat ledger refund", 4
    assert _probed_terms(sql_path, query, k, manager) == ["ledger", "refund"]
    expected = scores(docs, query)
    found = {
        name: [(h.source_id, round(h.score, 9)) for h in rag.retriever().search(query, k, manager, "keyword")]
        for name, rag in (("index", system), ("sql", sql_path), ("oracle_form", oracle_form))
    }
    assert found["sql"] == found["oracle_form"] == found["index"]
    assert len(found["sql"]) == k
    assert [s for _, s in found["sql"]] == sorted((round(v, 9) for v in expected.values()), reverse=True)[:k]
    for hit in sql_path.retriever().search(query, k, manager, "keyword"):
        assert hit.score == pytest.approx(expected[hit.source_id], rel=1e-9)
    # with k above every seed the bound is 0: nothing is probed, the same ranking
    assert _probed_terms(sql_path, query, 41, manager) == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(
        st.tuples(
            st.lists(
                st.sampled_from(["ledger"] * 4 + ["refund"] * 2 + FILLER + ["wombat"]), min_size=1, max_size=7
            ),
            st.sampled_from([None, ME, OTHER]),
        ),
        min_size=5,
        max_size=30,
    ),
    query=st.lists(
        st.sampled_from(["ledger", "refund", "wombat", "quokka", "retry"]), min_size=1, max_size=4
    ),
    k=st.integers(1, 6),
)
def test_pruned_sql_ranks_as_the_index(notes, oracle_form, docs, query, k) -> None:
    """Whatever is pruned, both SQL forms return the in-process index's top k (which scores every record)."""
    system, sql_path, source = notes
    _reset(
        system,
        source,
        {str(i): (" ".join(["ledger", *words]), owner) for i, (words, owner) in enumerate(docs)},
    )
    developer, text = Caller(ME, "developer"), " ".join(query)
    found = {
        name: [
            (h.source_id, round(h.score, 9)) for h in rag.retriever().search(text, k, developer, "keyword")
        ]
        for name, rag in (("index", system), ("sql", sql_path), ("oracle_form", oracle_form))
    }
    assert found["sql"] == found["oracle_form"] == found["index"]


# -- the leak property -------------------------------------------------------------------
WORDS = [
    "payment",
    "gateway",
    "timeout",
    "invoice",
    "export",
    "wombat",
    "quokka",
    "refund",
    "ledger",
    "retry",
]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


def _results(rag: Any, query: str, caller: Caller) -> dict[str, list[tuple[str, str]]]:
    retriever = rag.retriever()
    return {
        mode: [(h.source_type, h.source_id) for h in retriever.search(query, 5, caller, mode)]
        for mode in ("semantic", "keyword", "hybrid")
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mine=st.lists(text, min_size=1, max_size=4),
    org=st.lists(text, max_size=3),
    hidden=st.lists(text, min_size=1, max_size=5),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
)
def test_records_the_caller_cannot_see_change_nothing(notes, oracle_form, mine, org, hidden, query) -> None:
    # Two visible records of the very same text tie for every query, in an order a reset may change
    # (chunk ids are renumbered): the property is about others' records, so visible texts differ.
    assume(len(set(mine + org)) == len(mine) + len(org))
    system, sql_path, source = notes
    visible = {f"m{i}": (t, ME) for i, t in enumerate(mine)} | {f"o{i}": (t, None) for i, t in enumerate(org)}
    developer = Caller(ME, "developer")
    forms = {"index": system, "sql": sql_path, "oracle_form": oracle_form}
    _reset(system, source, visible)
    before = {name: _results(rag, query, developer) for name, rag in forms.items()}
    assert before["index"] == before["sql"] == before["oracle_form"]
    # the same visible records plus others' records (a TASK-like owner scope: NOTE rows owned by OTHER)
    _reset(system, source, visible | {f"h{i}": (t, OTHER) for i, t in enumerate(hidden)})
    after = {name: _results(rag, query, developer) for name, rag in forms.items()}
    assert after == before


# -- accent folding, and re-analysis without embedding (N6) ----------------------------
ACCENTED = {
    "1": "La sincronización del calendario falla cada noche",
    "2": "energía solar para el almacén",
    "3": "plain english about synchronisation",
}


@pytest.mark.parametrize(
    "query, expected", [("sincronizacion", ["1"]), ("SINCRONIZACIÓN", ["1"]), ("energia almacen", ["2"])]
)
def test_keyword_search_folds_accents_on_both_paths(
    notes, oracle_form, query: str, expected: list[str]
) -> None:
    system, sql_path, source = notes
    _reset(system, source, {i: (t, None) for i, t in ACCENTED.items()})
    for rag in (system, sql_path, oracle_form):
        assert [
            h.source_id for h in rag.retriever().search(query, 5, Caller(1, "manager"), "keyword")
        ] == expected


def _postings(system: Any) -> tuple[set[tuple[str, str, int]], set[tuple[str, int | None]]]:
    with system.engine.connect() as conn:
        terms = {
            (str(r[0]), str(r[1]), int(r[2]))
            for r in conn.exec_driver_sql(
                "SELECT c.SOURCE_ID, t.TERM, t.TF FROM RAG_CHUNK_TERM t JOIN RAG_CHUNK c ON c.CHUNK_ID = t.CHUNK_ID"
            )
        }
        counts = {
            (str(r[0]), r[1])
            for r in conn.exec_driver_sql("SELECT SOURCE_ID, TERM_COUNT FROM RAG_CHUNK WHERE CHUNK_NO = 0")
        }
    return terms, counts


def test_the_analyser_migration_reanalyses_from_stored_chunks_without_embedding(notes) -> None:
    """The migration resets every analysis; the step after it rewrites the postings from CONTENT."""
    from pathlib import Path

    from writepath_helpers import instrument

    from oracle_rag.migrations import MigrationRunner

    system, sql_path, source = notes
    sentences = [
        f"Párrafo {n}: la sincronización número {n} del módulo {n % 7} terminó con energía {n * 3}."
        for n in range(120)
    ]
    records = {i: (t, None) for i, t in ACCENTED.items()} | {"long": (" ".join(sentences), None)}
    _reset(system, source, records)
    with system.engine.connect() as conn:
        chunks = conn.exec_driver_sql("SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_ID = 'long'").scalar()
    assert chunks and chunks > 2  # the long record is several overlapping chunks
    expected = _postings(system)
    assert ("long", "sincronizacion", 120) in expected[0]
    # what the migration does, statement by statement (later migrations leave the analysis alone)
    runner = MigrationRunner(system.engine)
    newest = next(m for m in runner.migrations if "folds_accents" in Path(m.path).name)
    with system.engine.begin() as conn:
        for sql in runner.statements(newest):
            conn.exec_driver_sql(sql)
    terms, counts = _postings(system)
    assert not terms and {c for _, c in counts} == {None}
    assert system.retriever().search("sincronizacion", 5, Caller(1, "manager"), "keyword") == []
    rt = instrument(system)
    system.migrate()  # nothing pending: the analysis step alone
    assert rt.calls == 0
    assert _postings(system) == expected
    for rag in (system, sql_path):
        found = [
            h.source_id for h in rag.retriever().search("sincronizacion", 5, Caller(1, "manager"), "keyword")
        ]
        assert sorted(found) == ["1", "long"]
