"""The facet indexes (answering/structured/facet_indexes.py): their DDL pinned, their expression the predicate's own.

Oracle uses a function-based index only for the indexed expression with the
same return type, so the test that matters here is textual: each index
expression, with the alias put back, is exactly what ``build_predicate``
writes for a condition on that facet. The plan itself is checked on Oracle
(``tests/oracle/test_oracle_keyword_facets.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oracle_rag.answering.structured.facet_indexes import (
    ALIAS_COLUMN,
    facet_index_ddl,
    index_expression,
    index_name,
)
from oracle_rag.answering.structured.predicates import build_predicate
from oracle_rag.answering.structured.understood import Condition
from oracle_rag.sources import reference_sources
from oracle_rag.sources.facets import Facet

GOLDEN = Path(__file__).resolve().parent / "golden" / "facet_indexes" / "reference_sources.sql"


def _reference_declarations() -> list:  # type: ignore[type-arg]
    return [s.declaration() for s in reference_sources()]


def test_reference_facet_index_ddl_matches_golden() -> None:
    text = "".join(f"-- {name}\n{ddl};\n" for name, ddl in facet_index_ddl(_reference_declarations()))
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.read_text(encoding="utf-8") == text, "regenerate with UPDATE_GOLDEN=1 and review the diff"


def _one_value(facet: Facet) -> object:
    return 7 if facet.numeric else "DONE"


@pytest.mark.parametrize("op", ["in", "not_in", "lt", "range"])
def test_every_index_expression_is_the_predicates_expression(op: str) -> None:
    facets = {f.name: f for d in _reference_declarations() for f in d.facets}
    assert facets, "the reference sources declare facets"
    for facet in facets.values():
        values = (_one_value(facet),) if op != "range" else (_one_value(facet), _one_value(facet))
        predicate = build_predicate([Condition(facet.name, op, values, facet.name, "x")], facets)
        expression = index_expression(facet).replace("FACETS", ALIAS_COLUMN, 1)
        oracle = predicate.sql.oracle or ""
        assert expression in oracle, (facet.name, oracle)
        # and no other spelling of the facet's path: every JSON_VALUE on it is the indexed one
        assert oracle.count(f"'$.{facet.name}'") == oracle.count(expression), oracle


def test_a_sql_source_facet_gets_its_index_and_names_do_not_collide() -> None:
    text = Facet("severity", "enum", "severity")
    number = Facet("severity", "number", "severity")
    assert index_name(text) == "RAG_CHUNK_FT_SEVERITY_IX" and index_name(number) == "RAG_CHUNK_FN_SEVERITY_IX"
    assert index_expression(number) == "JSON_VALUE(FACETS, '$.severity' RETURNING NUMBER)"
    from oracle_rag.sources.meanings import Declaration, Meanings

    both = [Declaration("TICKET", (text,), Meanings()), Declaration("CASE", (text, number), Meanings())]
    assert [name for name, _ in facet_index_ddl(both)] == [
        "RAG_CHUNK_FN_SEVERITY_IX",
        "RAG_CHUNK_FT_SEVERITY_IX",
    ]


def test_the_embedded_engine_creates_no_facet_index(make_settings) -> None:  # type: ignore[no-untyped-def]
    from oracle_rag.system import RagSystem

    rag = RagSystem(make_settings())
    try:
        rag.migrate()
        assert rag.ensure_facet_indexes() == []
        with rag.engine.connect() as conn:
            names = [
                r[0]
                for r in conn.exec_driver_sql(
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND name GLOB 'RAG_CHUNK_F[NT]_*'"
                )
            ]
        assert names == []
    finally:
        rag.close()
