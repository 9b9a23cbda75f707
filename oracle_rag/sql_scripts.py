"""Split SQL scripts into the statements a driver can execute one by one.

Oracle scripts follow SQL*Plus conventions: a plain statement ends with ``;``
(which must be removed before sending it through python-oracledb) or with a
line holding only ``/``, and a PL/SQL unit (anonymous block, CREATE
PROCEDURE/FUNCTION/PACKAGE/TRIGGER/TYPE) ends with a line holding only ``/``
and keeps its own semicolons. SQLite scripts are split with
``complete_statement`` (from ``sqlean``, the one SQLite binding the product
loads), which understands trigger bodies. Quotes (including Oracle's
``q'[...]'``), quoted identifiers and comments are respected in both, and
several statements may share a line.
"""

from __future__ import annotations

import re

_PLSQL_HEAD = re.compile(
    r"\s*(DECLARE|BEGIN|CREATE\s+(OR\s+REPLACE\s+)?(EDITIONABLE\s+|NONEDITIONABLE\s+)?"
    r"(PROCEDURE|FUNCTION|PACKAGE|TRIGGER|TYPE\s+BODY|TYPE))\b",
    re.IGNORECASE,
)
# A SQL*Plus terminator: a line holding only "/" (spaces allowed).
_SLASH_LINE = re.compile(r"[ \t]*/[ \t]*(?:\n|$)")
_Q_CLOSE = {"[": "]", "{": "}", "(": ")", "<": ">"}


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$#"


def _q_quote_prefix(text: str, i: int) -> bool:
    """True when the ``q`` at ``i`` starts an Oracle q-quote (``q'`` or ``nq'``)."""
    if i == 0 or not _is_ident_char(text[i - 1]):
        return True
    return text[i - 1] in "nN" and (i == 1 or not _is_ident_char(text[i - 2]))


def skip_literal(text: str, i: int) -> int | None:
    """If a comment, string or quoted identifier starts at ``i``, the index after it."""
    n = len(text)
    ch = text[i]
    nxt = text[i + 1] if i + 1 < n else ""
    if ch == "-" and nxt == "-":
        j = text.find("\n", i)
        return n if j < 0 else j
    if ch == "/" and nxt == "*":
        j = text.find("*/", i + 2)
        return n if j < 0 else j + 2
    if ch in "qQ" and nxt == "'" and i + 2 < n and not text[i + 2].isspace() and _q_quote_prefix(text, i):
        close = _Q_CLOSE.get(text[i + 2], text[i + 2]) + "'"
        j = text.find(close, i + 3)
        return n if j < 0 else j + 2
    if ch in "'\"":
        j = i + 1
        while True:
            j = text.find(ch, j)
            if j < 0:
                return n
            if text.startswith(ch * 2, j):  # '' (or "") stands for one quote
                j += 2
                continue
            return j + 1
    return None


def skip_gap(text: str, pos: int, *, slash_lines: bool) -> int:
    """Skip whitespace, comments (and stray ``/`` lines) before a statement."""
    n = len(text)
    while pos < n:
        if text[pos].isspace():
            pos += 1
        elif text.startswith("--", pos) or text.startswith("/*", pos):
            pos = skip_literal(text, pos) or n
        elif slash_lines and (m := _SLASH_LINE.match(text, pos)):
            pos = m.end()
        else:
            break
    return pos


def is_plsql(statement: str) -> bool:
    """True when ``statement`` is a PL/SQL unit (SQL*Plus ends it with ``/``, not ``;``)."""
    return bool(_PLSQL_HEAD.match(statement, skip_gap(statement, 0, slash_lines=False)))


def split_oracle_script(script: str) -> list[str]:
    """Split an Oracle (SQL*Plus style) script into executable statements."""
    text = script.replace("\r\n", "\n")
    n = len(text)
    statements: list[str] = []
    pos = 0
    while True:
        pos = skip_gap(text, pos, slash_lines=True)
        if pos >= n:
            return statements
        plsql = bool(_PLSQL_HEAD.match(text, pos))
        end = nxt = -1
        i = pos
        while i < n:
            if i > pos and text[i - 1] == "\n" and (m := _SLASH_LINE.match(text, i)):
                end, nxt = i, m.end()
                break
            if text[i] == ";" and not plsql:
                end, nxt = i, i + 1
                break
            skipped = skip_literal(text, i)
            i = skipped if skipped is not None else i + 1
        if end < 0:
            if plsql:
                raise ValueError("PL/SQL block is not terminated by a line holding only '/'")
            end = nxt = n
        body = text[pos:end].strip()
        if body:
            statements.append(body)
        pos = nxt


def split_sqlite_script(script: str) -> list[str]:
    """Split a SQLite script; trigger bodies stay whole, each statement keeps its ``;``."""
    import sqlean  # never the stdlib sqlite3: one SQLite binding per process

    text = script.replace("\r\n", "\n")
    n = len(text)
    statements: list[str] = []
    start = 0
    i = 0
    while i < n:
        skipped = skip_literal(text, i)
        if skipped is not None:
            i = skipped
            continue
        if text[i] == ";" and sqlean.complete_statement(text[start : i + 1]):
            body = text[skip_gap(text, start, slash_lines=False) : i + 1].strip()
            if body != ";":
                statements.append(body)
            start = i + 1
        i += 1
    rest = text[skip_gap(text, start, slash_lines=False) :].strip()
    if rest:
        statements.append(rest)
    return statements
