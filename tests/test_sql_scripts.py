"""Splitting SQL scripts into statements (SQL*Plus conventions for Oracle, sqlite3 for SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlean

from oracle_rag.sql_scripts import is_plsql, split_oracle_script, split_sqlite_script

SQL_ROOT = Path(__file__).resolve().parent.parent / "oracle_rag" / "sql"

ORACLE_SCRIPT = """\
-- A header comment; with a semicolon.
/* A block comment; also with one;
   spanning lines */
CREATE TABLE T (ID NUMBER PRIMARY KEY, NOTE VARCHAR2(100)); -- trailing comment; with ';'

INSERT INTO T (ID, NOTE) VALUES (1, 'a;b -- not a comment /* nor this */');
INSERT INTO T (ID, NOTE) VALUES (2, 'it''s; quoted'); INSERT INTO T (ID, NOTE) VALUES (3, q'[it's; q-quoted]');

CREATE OR REPLACE TRIGGER T_BI
BEFORE INSERT ON T
FOR EACH ROW
BEGIN
  -- a comment inside; the block
  IF :NEW.NOTE IS NULL THEN
    :NEW.NOTE := 'x;y';
  END IF;
END;
/

DECLARE
  n NUMBER;
BEGIN
  SELECT COUNT(*) INTO n FROM T; /* count; rows */
  DBMS_OUTPUT.PUT_LINE('n=' || n || ';');
END;
/
BEGIN
  NULL;
END;
   /
CREATE OR REPLACE PROCEDURE P AS
BEGIN
  NULL;
END P;
/
SELECT 1 FROM dual
;
UPDATE T SET NOTE = 'multi
line; string
/
still the string' WHERE ID = 1;
CREATE INDEX T_NOTE_IX ON T (NOTE)
/
SELECT "odd;name" FROM T
"""

ORACLE_EXPECTED = [
    "CREATE TABLE T (ID NUMBER PRIMARY KEY, NOTE VARCHAR2(100))",
    "INSERT INTO T (ID, NOTE) VALUES (1, 'a;b -- not a comment /* nor this */')",
    "INSERT INTO T (ID, NOTE) VALUES (2, 'it''s; quoted')",
    "INSERT INTO T (ID, NOTE) VALUES (3, q'[it's; q-quoted]')",
    "CREATE OR REPLACE TRIGGER T_BI\n"
    "BEFORE INSERT ON T\n"
    "FOR EACH ROW\n"
    "BEGIN\n"
    "  -- a comment inside; the block\n"
    "  IF :NEW.NOTE IS NULL THEN\n"
    "    :NEW.NOTE := 'x;y';\n"
    "  END IF;\n"
    "END;",
    "DECLARE\n"
    "  n NUMBER;\n"
    "BEGIN\n"
    "  SELECT COUNT(*) INTO n FROM T; /* count; rows */\n"
    "  DBMS_OUTPUT.PUT_LINE('n=' || n || ';');\n"
    "END;",
    "BEGIN\n  NULL;\nEND;",
    "CREATE OR REPLACE PROCEDURE P AS\nBEGIN\n  NULL;\nEND P;",
    "SELECT 1 FROM dual",
    "UPDATE T SET NOTE = 'multi\nline; string\n/\nstill the string' WHERE ID = 1",
    "CREATE INDEX T_NOTE_IX ON T (NOTE)",
    'SELECT "odd;name" FROM T',
]


def test_oracle_script_golden() -> None:
    assert split_oracle_script(ORACLE_SCRIPT) == ORACLE_EXPECTED


def test_oracle_crlf_is_normalised() -> None:
    assert split_oracle_script(ORACLE_SCRIPT.replace("\n", "\r\n")) == ORACLE_EXPECTED


def test_oracle_plain_statements_never_keep_their_terminator() -> None:
    for statement in ORACLE_EXPECTED:
        if not is_plsql(statement):
            assert not statement.endswith(";")
            assert not statement.endswith("/")


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("", []),
        ("-- only a comment;\n/* and another; */\n", []),
        ("/\n/\n", []),
        (
            "CREATE TABLE X (A NUMBER);\n/\nCREATE TABLE Y (B NUMBER);",
            ["CREATE TABLE X (A NUMBER)", "CREATE TABLE Y (B NUMBER)"],
        ),
        ("SELECT 1 FROM dual; SELECT 2 FROM dual;", ["SELECT 1 FROM dual", "SELECT 2 FROM dual"]),
        ("SELECT 1 FROM dual;;", ["SELECT 1 FROM dual"]),
        ("SELECT a\n/ b FROM t;", ["SELECT a\n/ b FROM t"]),  # division, not a terminator
        ("SELECT 1 FROM dual", ["SELECT 1 FROM dual"]),  # the last statement may omit ';'
        ("/* lead */\nBEGIN\n  NULL;\n  NULL;\nEND;\n/", ["BEGIN\n  NULL;\n  NULL;\nEND;"]),
        (
            "create or replace trigger t before insert on x for each row\nbegin\n  null;\nend;\n/",
            ["create or replace trigger t before insert on x for each row\nbegin\n  null;\nend;"],
        ),
        (
            "CREATE OR REPLACE EDITIONABLE PACKAGE BODY pk AS\n  PROCEDURE p IS BEGIN NULL; END;\nEND pk;\n/",
            ["CREATE OR REPLACE EDITIONABLE PACKAGE BODY pk AS\n  PROCEDURE p IS BEGIN NULL; END;\nEND pk;"],
        ),
        (
            "CREATE TYPE pt AS OBJECT (x NUMBER, y NUMBER);\n/",
            ["CREATE TYPE pt AS OBJECT (x NUMBER, y NUMBER);"],
        ),
        (
            "SELECT nq'{a;b}' FROM dual; SELECT Q'<c;d>' FROM dual;",
            ["SELECT nq'{a;b}' FROM dual", "SELECT Q'<c;d>' FROM dual"],
        ),
        ("SELECT seq'x;y' FROM dual;", ["SELECT seq'x;y' FROM dual"]),  # not a q-quote: an identifier
        (
            "INSERT INTO T VALUES ('');\nINSERT INTO T VALUES ('''');",
            ["INSERT INTO T VALUES ('')", "INSERT INTO T VALUES ('''')"],
        ),
    ],
)
def test_oracle_cases(script: str, expected: list[str]) -> None:
    assert split_oracle_script(script) == expected


def test_oracle_unterminated_plsql_block_is_refused() -> None:
    with pytest.raises(ValueError, match="'/'"):
        split_oracle_script("BEGIN\n  NULL;\nEND;\n")


@pytest.mark.parametrize(
    ("statement", "plsql"),
    [
        ("BEGIN NULL; END;", True),
        ("declare x number; begin null; end;", True),
        ("-- c\n/* d */\nCREATE OR REPLACE TRIGGER t BEFORE INSERT ON x BEGIN NULL; END;", True),
        ("CREATE FUNCTION f RETURN NUMBER IS BEGIN RETURN 1; END;", True),
        ("CREATE OR REPLACE NONEDITIONABLE PROCEDURE p AS BEGIN NULL; END;", True),
        ("CREATE TABLE BEGINNINGS (A NUMBER)", False),
        ("CREATE TABLE T (A NUMBER)", False),
        ("CREATE OR REPLACE VIEW V AS SELECT 1 X FROM dual", False),
        ("SELECT 'BEGIN' FROM dual", False),
    ],
)
def test_is_plsql(statement: str, plsql: bool) -> None:
    assert is_plsql(statement) is plsql


@pytest.mark.parametrize("path", sorted(SQL_ROOT.glob("oracle/**/*.sql")), ids=lambda p: p.name)
def test_shipped_oracle_scripts_split_cleanly(path: Path) -> None:
    text = path.read_text("utf-8")
    statements = split_oracle_script(text)
    # a retired version (migrations.py) runs nothing and says which text it replaces
    assert statements or "-- replaces checksum: " in text
    for sql in statements:
        assert sql == sql.strip()
        assert not sql.startswith("--")
        if not is_plsql(sql):
            assert not sql.endswith(";")


# -- SQLite ---------------------------------------------------------------------

SQLITE_SCRIPT = """\
-- header; comment
CREATE TABLE a (id INTEGER PRIMARY KEY, note TEXT); -- trailing; comment
CREATE TABLE b (id INTEGER);
CREATE TRIGGER a_ai AFTER INSERT ON a BEGIN
  INSERT INTO b (id) VALUES (new.id); -- inside; the trigger
  INSERT INTO b (id) VALUES (new.id + 1000);
END;
INSERT INTO a (id, note) VALUES (1, 'x;y'); INSERT INTO a (id, note) VALUES (2, 'it''s;');
/* a block; comment */
INSERT INTO a (id, note) VALUES (3, "q;q")
"""

SQLITE_EXPECTED = [
    "CREATE TABLE a (id INTEGER PRIMARY KEY, note TEXT);",
    "CREATE TABLE b (id INTEGER);",
    "CREATE TRIGGER a_ai AFTER INSERT ON a BEGIN\n"
    "  INSERT INTO b (id) VALUES (new.id); -- inside; the trigger\n"
    "  INSERT INTO b (id) VALUES (new.id + 1000);\n"
    "END;",
    "INSERT INTO a (id, note) VALUES (1, 'x;y');",
    "INSERT INTO a (id, note) VALUES (2, 'it''s;');",
    'INSERT INTO a (id, note) VALUES (3, "q;q")',
]


def test_sqlite_script_golden() -> None:
    assert split_sqlite_script(SQLITE_SCRIPT) == SQLITE_EXPECTED


def test_sqlite_statements_execute_one_by_one() -> None:
    conn = sqlean.connect(":memory:")
    try:
        for sql in split_sqlite_script(SQLITE_SCRIPT):
            conn.execute(sql)  # one statement per call, or sqlean refuses
        assert conn.execute("SELECT COUNT(*) FROM a").fetchone()[0] == 3
        assert conn.execute("SELECT COUNT(*) FROM b").fetchone()[0] == 6
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("", []),
        ("-- nothing; here\n/* nor; here */", []),
        (";;SELECT 1;", ["SELECT 1;"]),
        ("SELECT 1; /* tail */", ["SELECT 1;"]),
    ],
)
def test_sqlite_cases(script: str, expected: list[str]) -> None:
    assert split_sqlite_script(script) == expected


@pytest.mark.parametrize("path", sorted(SQL_ROOT.glob("sqlite/**/*.sql")), ids=lambda p: p.name)
def test_shipped_sqlite_scripts_split_into_complete_statements(path: Path) -> None:
    statements = split_sqlite_script(path.read_text("utf-8"))
    assert statements
    for sql in statements:
        assert sqlean.complete_statement(sql)
        assert not sql.startswith("--")


def test_splitting_does_not_load_the_stdlib_sqlite3() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from oracle_rag.sql_scripts import split_sqlite_script; "
        "split_sqlite_script('SELECT 1; SELECT 2;'); "
        "assert '_sqlite3' not in sys.modules, 'stdlib sqlite3 loaded'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
