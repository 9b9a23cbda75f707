"""Query text to full-text syntax: only quoted word terms ever reach FTS5 or Oracle Text."""

from __future__ import annotations

import re

import pytest
import sqlean
from hypothesis import given, settings
from hypothesis import strategies as st

from oracle_rag.keywords import MAX_TERMS, STOPWORDS, fts5_match, oracle_text_query, terms

OPERATOR_SOUP = [
    'invoice NEAR(payment, 2)', "login AND timeout OR NOT mobile", "invoic*", "^payment", "-payment",
    '"unbalanced quote', '{CONTENT}: invoice', "CONTENT : invoice", "(invoice OR", "ABOUT(invoices)",
    "100% done_ish", "back\\slash", "a\x00b invoice", "''; DROP TABLE RAG_CHUNK; --", "xx:yy:zz",
]


def test_terms_lowercase_fold_accents_drop_stopwords_and_duplicates():
    assert terms("The Invoice PDF and the INVOICE pdf") == ["invoice", "pdf"]
    assert terms("Migración de facturación") == ["migracion", "de", "facturacion"]
    assert terms("a I x 7 of to") == []  # single characters and stopwords only


def test_terms_keep_digits_but_drop_absurd_numbers():
    assert terms("error 500 on build 20260105") == ["error", "500", "build", "20260105"]
    assert terms("1234567890123456789") == []  # a 19-digit run is noise, not a term


def test_terms_are_capped_and_cut():
    many = " ".join(f"word{i}" for i in range(200))
    assert len(terms(many)) == MAX_TERMS
    assert terms("x" * 500) == ["x" * 64]


def test_nul_separates_words():
    assert terms("invoice\x00payment") == ["invoice", "payment"]


def test_stopwords_are_lowercase_words():
    assert all(w == w.lower() and w.isalpha() for w in STOPWORDS)
    assert {"the", "and", "or", "not"} <= STOPWORDS


@pytest.mark.parametrize("text", OPERATOR_SOUP)
def test_operators_become_plain_quoted_terms(text):
    match = fts5_match(text)
    assert match is not None
    for part in match.split(" OR "):
        assert re.fullmatch(r'"\w+"', part), part
    assert "*" not in match and "NEAR" not in match and "^" not in match and ":" not in match
    oracle = oracle_text_query(text)
    assert oracle is not None
    for part in oracle.split(" ACCUM "):
        assert re.fullmatch(r"\{\w+\}", part), part


def test_examples_of_exact_output():
    assert fts5_match('invoic* NEAR "payment"') == '"invoic" OR "near" OR "payment"'
    assert oracle_text_query("ABOUT(invoice) % ") == "{invoice}"
    assert oracle_text_query("invoice}") == "{invoice}"
    assert fts5_match("the and or") is None
    assert oracle_text_query("   ") is None


@pytest.fixture(scope="module")
def fts_db():
    """A real FTS5 table with the product's tokenizer settings (V2 migration)."""
    db = sqlean.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
    db.executemany("INSERT INTO t (body) VALUES (?)", [
        ("Fix invoice PDF generation",), ("payment retry logic",), ("near the invoice",),
        ("Corregir la facturación",), ("invoices archive",),
    ])
    yield db
    db.close()


def _search(db, text):
    match = fts5_match(text)
    if match is None:
        return []
    return [r[0] for r in db.execute("SELECT body FROM t WHERE t MATCH ? ORDER BY rowid", (match,))]


def test_prefix_star_is_not_a_prefix_query(fts_db):
    # Were `*` passed through, "invoic*" would match "invoice" and "invoices".
    assert _search(fts_db, "invoic*") == []
    assert _search(fts_db, "invoice") == ["Fix invoice PDF generation", "near the invoice"]


def test_operator_words_are_searched_as_words(fts_db):
    assert _search(fts_db, "NEAR") == ["near the invoice"]
    assert _search(fts_db, "payment NOT retry") == ["payment retry logic"]


def test_accents_fold_like_the_index(fts_db):
    assert _search(fts_db, "FACTURACIÓN") == ["Corregir la facturación"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_valid_fts5(text):
    """Whatever the user types, FTS5 parses the expression (no syntax error)."""
    db = sqlean.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
        db.execute("INSERT INTO t (body) VALUES ('some body text')")
        match = fts5_match(text)
        if match is not None:
            db.execute("SELECT count(*) FROM t WHERE t MATCH ?", (match,)).fetchone()
    finally:
        db.close()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_oracle_text_query_is_only_braced_terms(text):
    query = oracle_text_query(text)
    if query is not None:
        assert re.fullmatch(r"\{[^{}]+\}( ACCUM \{[^{}]+\})*", query)
        assert len(query.split(" ACCUM ")) <= MAX_TERMS
