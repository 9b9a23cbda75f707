"""Split SQL scripts into the statements a driver can execute one by one.

Oracle scripts follow SQL*Plus conventions: a plain statement ends with ``;``
(which must be removed before sending it through python-oracledb), and a
PL/SQL unit (anonymous block, CREATE PROCEDURE/FUNCTION/PACKAGE/TRIGGER/TYPE)
ends with a line holding only ``/`` and keeps its own semicolons. SQLite
scripts are split with :func:`sqlite3.complete_statement`, which understands
trigger bodies. Quotes and comments are respected in both.
"""

from __future__ import annotations

import re

_PLSQL_START = re.compile(
    r"^\s*(DECLARE|BEGIN|CREATE\s+(OR\s+REPLACE\s+)?(EDITIONABLE\s+|NONEDITIONABLE\s+)?"
    r"(PROCEDURE|FUNCTION|PACKAGE|TRIGGER|TYPE\s+BODY|TYPE))\b",
    re.IGNORECASE,
)


def _strip_comments_head(text: str) -> str:
    """Drop leading blank lines and ``--`` comment lines (to classify a statement)."""
    lines = text.splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines)


def _ends_outside_quotes(text: str) -> bool:
    """True when ``text`` ends with ``;`` that is not inside a quote or comment."""
    in_single = in_double = in_block = False
    i = 0
    last_semicolon = -2
    while i < len(text):
        ch = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if in_block:
            if ch == "*" and nxt == "/":
                in_block = False
                i += 1
        elif in_single:
            if ch == "'":
                in_single = False
        elif in_double:
            if ch == '"':
                in_double = False
        elif ch == "-" and nxt == "-":
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif ch == "/" and nxt == "*":
            in_block = True
            i += 1
        elif ch == "'":
            in_single = True
        elif ch == '"':
            in_double = True
        elif ch == ";":
            last_semicolon = i
        elif not ch.isspace():
            last_semicolon = -2
        i += 1
    return last_semicolon >= 0 and not (in_single or in_double or in_block)


def split_oracle_script(script: str) -> list[str]:
    """Split an Oracle (SQL*Plus style) script into executable statements."""
    statements: list[str] = []
    buf: list[str] = []
    plsql = False
    for line in script.splitlines():
        if not buf:
            if not line.strip() or line.lstrip().startswith("--"):
                continue
            plsql = bool(_PLSQL_START.match(line))
        if plsql:
            if line.strip() == "/":
                text = "\n".join(buf).strip()
                if text:
                    statements.append(text)
                buf = []
                continue
            buf.append(line)
            continue
        buf.append(line)
        joined = "\n".join(buf)
        if _ends_outside_quotes(joined):
            text = joined.rstrip()
            text = text[: text.rfind(";")].rstrip()
            body = _strip_comments_head(text)
            if body.strip():
                statements.append(body)
            buf = []
    rest = _strip_comments_head("\n".join(buf)).strip()
    if rest and rest != "/":
        if plsql:
            raise ValueError("PL/SQL block is not terminated by a line holding only '/'")
        statements.append(rest)
    return statements


def split_sqlite_script(script: str) -> list[str]:
    """Split a SQLite script; trigger bodies stay whole."""
    import sqlite3

    statements: list[str] = []
    buf: list[str] = []
    for line in script.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buf.append(line)
        joined = "\n".join(buf)
        if sqlite3.complete_statement(joined):
            body = _strip_comments_head(joined).strip()
            if body and body != ";":
                statements.append(body)
            buf = []
    rest = _strip_comments_head("\n".join(buf)).strip()
    if rest:
        statements.append(rest)
    return statements
