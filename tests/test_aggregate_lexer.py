"""The lexer splits untrusted SQL the way each engine does (one pass, literals and comments together)."""

from __future__ import annotations

import pytest

from oracle_rag.answering.aggregate.lexer import (
    COMMENT,
    PARAM,
    QUOTED,
    STRING,
    WORD,
    LexError,
    code_tokens,
    tokenize,
)


def kinds(sql, dialect):
    return [(t.kind, t.text) for t in code_tokens(tokenize(sql, dialect))]


@pytest.mark.parametrize("dialect", ["sqlite", "oracle"])
def test_a_string_holding_comment_markers_is_one_string(dialect):
    toks = kinds("SELECT '/*', x, '*/' FROM t", dialect)
    assert (STRING, "'/*'") in toks and (WORD, "x") in toks and (STRING, "'*/'") in toks


@pytest.mark.parametrize("dialect", ["sqlite", "oracle"])
def test_a_comment_holding_a_quote_hides_nothing_after_it(dialect):
    all_tokens = tokenize("SELECT 1 /* ' */, secret -- '\nFROM t", dialect)
    assert [t.text for t in all_tokens if t.kind == COMMENT] == ["/* ' */", "-- '"]
    assert (WORD, "secret") in kinds("SELECT 1 /* ' */, secret -- '\nFROM t", dialect)


def test_doubled_quotes_escape_inside_strings_and_identifiers():
    assert kinds("SELECT 'it''s', \"a\"\"b\" FROM t", "sqlite")[1:4] == [
        (STRING, "'it''s'"),
        ("punct", ","),
        (QUOTED, '"a""b"'),
    ]
    assert code_tokens(tokenize('"a""b"', "sqlite"))[0].identifier() == 'a"b'


def test_sqlite_brackets_backticks_blobs_and_parameters():
    toks = kinds("SELECT [x y], `z`, x'00ff', ?1, :a, @b, $c FROM t", "sqlite")
    assert (QUOTED, "[x y]") in toks and (QUOTED, "`z`") in toks and (STRING, "x'00ff'") in toks
    assert [t for k, t in toks if k == PARAM] == ["?1", ":a", "@b", "$c"]


def test_sqlite_block_comment_may_run_to_the_end_but_oracle_refuses_it():
    assert tokenize("SELECT 1 /* open", "sqlite")[-1].kind == COMMENT
    with pytest.raises(LexError):
        tokenize("SELECT 1 /* open", "oracle")


@pytest.mark.parametrize(
    ("literal", "rest"),
    [
        ("q'[ ' ]'", "x"),
        ("Q'{ -- }'", "x"),
        ("q'< /* >'", "x"),
        ("q'( ) ' )'", "x"),
        ("q'! a !'", "x"),
        ("nq'[ ' ]'", "x"),
        ("N'it''s'", "x"),
    ],
)
def test_oracle_alternative_quoting(literal, rest):
    toks = kinds(f"SELECT {literal}, {rest} FROM dual", "oracle")
    assert toks[1] == (STRING, literal) and (WORD, rest) in toks


def test_oracle_identifiers_keep_dollar_and_hash_and_links_are_punctuation():
    toks = kinds("SELECT * FROM V$SESSION, t@remote", "oracle")
    assert (WORD, "V$SESSION") in toks and ("punct", "@") in toks


@pytest.mark.parametrize("sql", ["SELECT 'open", 'SELECT "open', "SELECT [open", "SELECT 1 \\ 2", "SELECT #"])
def test_what_cannot_be_placed_is_an_error(sql):
    with pytest.raises(LexError):
        tokenize(sql, "sqlite")


def test_non_ascii_is_an_identifier_character_in_sqlite_and_an_error_in_oracle():
    assert kinds("SELECT ＳＥＬＥＣＴ", "sqlite")[1] == (WORD, "ＳＥＬＥＣＴ")
    with pytest.raises(LexError):
        tokenize("SELECT ＳＥＬＥＣＴ", "oracle")
