"""The text check for untrusted SQL: lex, parse, resolve names by scope, refuse.

SQL written by a model can be wrong or steered by prompt injection, so
nothing here trusts it. The check accepts exactly one read-only query
(SELECT, WITH ... SELECT, or set operations of those) that reads only the
allow-listed views and the query's own visible WITH names, and calls only
allow-listed functions; everything else is a GuardrailError that says why.

How, in order:

1. ``lexer.tokenize`` splits the text the way the engine does (strings,
   quoted identifiers and comments in one pass; Oracle ``q'[...]'``), so a
   string holding ``/*`` or a comment holding ``'`` hides nothing.
2. Token checks: one statement (one trailing ``;`` tolerated), no bind
   parameters, no database links (``@``), no non-ASCII outside literals
   (look-alike letters), no forbidden keyword or package, no
   ``package.function(...)``, nesting of parentheses and CASE at most
   ``MAX_DEPTH``.
3. sqlglot parses the *lexed* text (comments dropped, literal contents made
   inert) in the engine's dialect, so sqlglot and the database agree on
   what is code. sqlglot is used to classify, never to rewrite: the text
   that passes is the text that runs.
4. Names are resolved by scope after normalising identifiers as the engine
   does (Oracle: unquoted upper case, quoted exact; SQLite: case-insensitive):
   a table reference is a WITH name only where that CTE is visible (its
   WITH clause or an enclosing one, CTEs defined earlier in the same
   clause, and itself only in the recursive arm of a recursive CTE). Every
   other reference must be an allow-listed view (or Oracle's DUAL);
   dictionary views, base tables, ``sqlite_*`` and table functions are
   refused.

On SQLite this is the second line: the executor's authorizer decides alone
(see ``sqlite_executor``). On Oracle it is the line that refuses dictionary
views every user can read; the read-only user's grants are the other.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from oracle_rag.answering.aggregate.lexer import (
    COMMENT,
    NUMBER,
    PARAM,
    PUNCT,
    QUOTED,
    SPACE,
    STRING,
    WORD,
    LexError,
    Token,
    tokenize,
)
from oracle_rag.errors import GuardrailError

MAX_SQL_CHARS = 10_000
MAX_DEPTH = 32  # parentheses and CASE ... END, nested

# Functions a reporting query needs (sqlglot also reports AND/OR as functions). Anything else (DBMS_*,
# UTL_*, user functions that might be autonomous transactions, load_extension, readfile,
# fts3_tokenizer, ...) is refused.
ALLOWED_FUNCTIONS = frozenset(
    """COUNT SUM AVG MIN MAX TOTAL ROUND TRUNC FLOOR CEIL CEILING ABS MOD SIGN POWER POW SQRT
    LOWER UPPER INITCAP LENGTH SUBSTR SUBSTRING TRIM LTRIM RTRIM REPLACE INSTR CONCAT DPIPE
    COALESCE NVL NVL2 NULLIF IFNULL IIF IF CASE CAST TRY_CAST DECODE GREATEST LEAST
    EXTRACT TO_CHAR TO_DATE TO_NUMBER TO_TIMESTAMP DATE DATETIME STRFTIME JULIANDAY
    CURRENTDATE CURRENTTIMESTAMP CURRENT_DATE CURRENT_TIMESTAMP SYSDATE ADD_MONTHS MONTHS_BETWEEN
    DATEDIFF DATEADD DATE_ADD DATE_SUB DATETRUNC TIMESTAMPTRUNC TSORDSTODATE STRTOTIME STRTODATE
    TIMETOSTR TSORDSTOTIME UNIXTOTIME
    GROUP_CONCAT GROUPCONCAT STRING_AGG LISTAGG MEDIAN STDDEV STDDEV_POP STDDEV_SAMP VARIANCE VAR_POP VAR_SAMP
    PERCENTILE_CONT PERCENTILECONT PERCENTILE_DISC PERCENTILEDISC
    ROW_NUMBER ROWNUMBER RANK DENSE_RANK DENSERANK NTILE LAG LEAD FIRST_VALUE FIRSTVALUE
    LAST_VALUE LASTVALUE COUNTIF COUNT_IF ANYVALUE ANY_VALUE
    TIME_TO_STR TS_OR_DS_TO_TIMESTAMP TS_OR_DS_TO_DATE STR_TO_TIME STR_TO_DATE UNIX_TO_TIME
    DATE_TRUNC TIMESTAMP_TRUNC
    LIKE GLOB EXISTS AND OR XOR""".split()
)

# sqlglot's name for a function it parses into a typed node → the name the engine runs (and its database check
# sees): sqlglot reads INSTR(x, y) as STR_POSITION. tests/test_aggregate_time_limit.py lists every
# SQLite function and checks that this check and the database's authorizer accept the same ones.
_ENGINE_NAMES = {"STR_POSITION": "INSTR"}

_FORBIDDEN_WORD = re.compile(
    r"(DBMS_\w*|UTL_\w*|SQLITE_\w+|INSERT|UPDATE|DELETE|MERGE|UPSERT|DROP|CREATE|ALTER|TRUNCATE|GRANT|REVOKE|"
    r"ATTACH|DETACH|PRAGMA|VACUUM|REINDEX|ANALYZE|EXPLAIN|COPY|INSTALL|LOAD|CALL|EXEC|EXECUTE|BEGIN|DECLARE|"
    r"COMMIT|ROLLBACK|SAVEPOINT|RELEASE|LOCK|SET|LOAD_EXTENSION|READFILE|WRITEFILE|EDIT|FTS3_TOKENIZER)",
    re.IGNORECASE,
)
# Oracle pseudo-columns that tell who and where the session is (not data of the views).
_ORACLE_SESSION_COLUMNS = frozenset({"USER", "UID", "SESSIONTIMEZONE", "DBTIMEZONE", "ORA_ROWSCN"})
_SAFE_LITERAL = re.compile(r"[A-Za-z0-9 _%:.,+\-]")
_FORBIDDEN_NODES: tuple[type, ...] = (
    exp.DML,
    exp.DDL,
    exp.Command,
    exp.Pragma,
    exp.Set,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Into,
    exp.Lock,
    exp.Copy,
    exp.Describe,
    exp.Attach,
    exp.Detach,
    exp.Analyze,
    exp.Version,
)
_QUERY = (exp.Select, exp.SetOperation)


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed the guard: the exact text to run and what it reads."""

    sql: str
    views: tuple[str, ...]
    ctes: tuple[str, ...] = ()


def _lex(sql: str, dialect: str) -> list[Token]:
    try:
        return tokenize(sql, dialect)
    except LexError as exc:
        raise GuardrailError(f"the SQL could not be read: {exc}") from None


def _strip_trailing_semicolon(sql: str, tokens: list[Token]) -> tuple[str, list[Token]]:
    code = [i for i, t in enumerate(tokens) if t.kind not in (COMMENT, SPACE)]
    if code and tokens[code[-1]].text == ";":
        last = tokens[code[-1]]
        return sql[: last.start], tokens[: code[-1]]
    return sql, tokens


def _check_tokens(tokens: list[Token]) -> None:
    depth = 0
    code = [t for t in tokens if t.kind not in (COMMENT, SPACE)]
    for i, tok in enumerate(code):
        if tok.kind == WORD and not tok.text.isascii():
            odd = next(ch for ch in tok.text if not ch.isascii())
            raise GuardrailError(
                f"non-ASCII character {unicodedata.name(odd, hex(ord(odd)))} outside a string "
                "literal (look-alike characters are refused)"
            )
        if tok.kind == PARAM:
            raise GuardrailError(f"bind parameters are not allowed ({tok.text[:20]})")
        if tok.text == ";":
            raise GuardrailError("more than one statement (';' inside the SQL)")
        if tok.text == "@":
            raise GuardrailError("database links ('@') are not allowed")
        if tok.kind == WORD and _FORBIDDEN_WORD.fullmatch(tok.text):
            raise GuardrailError(f"forbidden keyword or package: {tok.upper}")
        if (
            tok.text == "."
            and 0 < i < len(code) - 2
            and code[i + 2].text == "("
            and code[i - 1].kind in (WORD, QUOTED)
            and code[i + 1].kind in (WORD, QUOTED)
        ):
            raise GuardrailError("qualified function calls (package.function) are not allowed")
        if tok.text == "(" or tok.upper == "CASE":
            depth += 1
            if depth > MAX_DEPTH:
                raise GuardrailError(
                    f"depth limit: parentheses or CASE nested deeper than {MAX_DEPTH} levels"
                )
        elif tok.text == ")" or tok.upper == "END":
            depth -= 1


def _inert(tok: Token, dialect: str) -> str:
    """The token as sqlglot should see it: literals without quotes or markers inside, no comments."""
    if tok.kind in (COMMENT, SPACE):
        return " "
    if tok.kind == STRING:
        body = tok.text[tok.text.index("'") + 1 : -1]
        if tok.text[:1] in "qQnN" and dialect == "oracle" and tok.text.lstrip("nN")[:1] in "qQ":
            body = body[1:-1]  # the q-quote delimiters
        body = "".join(ch if _SAFE_LITERAL.match(ch) else "x" for ch in body.replace("''", "'"))
        return ("X'" if tok.text[:1] in "xX" else "'") + body + "'"
    if tok.kind == QUOTED:
        name = tok.identifier()
        if '"' in name or not name.isprintable() or not name.isascii():
            raise GuardrailError("a quoted identifier holds a quote, a control or a non-ASCII character")
        return f'"{name}"'
    return tok.text


def _parse(tokens: list[Token], dialect: str) -> Any:
    text = " ".join(_inert(t, dialect) for t in tokens if t.kind in (WORD, QUOTED, STRING, NUMBER, PUNCT))
    try:
        parsed = [p for p in sqlglot.parse(text, read=dialect) if p is not None]
    except sqlglot.errors.SqlglotError:
        raise GuardrailError("the SQL could not be parsed as a single query; refused") from None
    except RecursionError:
        raise GuardrailError("depth limit: the SQL is nested too deeply") from None
    if len(parsed) != 1:
        raise GuardrailError(f"exactly one statement is allowed, got {len(parsed)}")
    return parsed[0]


def _check_structure(tree: exp.Expression, dialect: str) -> None:
    if not isinstance(tree, _QUERY):
        raise GuardrailError(f"only SELECT queries are allowed, got {type(tree).__name__.upper()}")
    for node in tree.walk():
        if isinstance(node, exp.Select) and node.args.get("locks"):
            raise GuardrailError("SELECT ... FOR UPDATE is not allowed")
        if isinstance(node, _FORBIDDEN_NODES):
            raise GuardrailError(f"{type(node).__name__.upper()} is not allowed in a query")
        if isinstance(
            node, exp.Aliases
        ):  # sqlglot reads MATCH(a, b) as "match AS (a, b)": the engine, as a call
            raise GuardrailError(
                f"{node.this.sql(dialect=dialect)[:60]}(...) could not be read as a function call"
            )
        if isinstance(node, exp.In) and node.args.get("field") is not None:
            raise GuardrailError("IN <table name> is not allowed; use IN (SELECT ...)")
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Identifier):
                raise GuardrailError(
                    f"table functions are not allowed ({node.this.sql(dialect=dialect)[:60]})"
                )
            if node.args.get("db") or node.args.get("catalog"):
                raise GuardrailError(
                    f"schema-qualified tables are not allowed ({node.sql(dialect=dialect)[:60]})"
                )
        if (
            dialect == "oracle"
            and isinstance(node, exp.Column)
            and not node.table
            and node.name.upper() in _ORACLE_SESSION_COLUMNS
            and not node.this.quoted
        ):
            raise GuardrailError(f"session pseudo-column {node.name.upper()} is not allowed")
        if isinstance(node, exp.Func):
            name = node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name().upper()
            name = _ENGINE_NAMES.get(name, name)
            if name not in ALLOWED_FUNCTIONS:
                raise GuardrailError(f"function {name} is not in the allow-list")


def _self_visible(cte: exp.CTE, recursive: bool, dialect: str) -> bool:
    """May ``cte``'s recursive arm name the CTE itself (as the engine would resolve it)?"""
    if not isinstance(cte.this, exp.Union):
        return False
    if dialect == "oracle":  # recursive subquery factoring needs a column alias list
        alias = cte.args.get("alias")
        return bool(alias is not None and alias.columns)
    return recursive


def _resolve_tables(tree: exp.Expression, allowed: set[str], dialect: str) -> tuple[list[str], set[str]]:
    """Every table reference → a visible CTE or an allowed view; returns (views read, CTE names)."""
    views: list[str] = []
    ctes: set[str] = set()
    stack: list[tuple[exp.Expression, frozenset[str]]] = [(tree, frozenset())]
    while stack:
        node, visible = stack.pop()
        with_ = node.args.get("with_") if isinstance(node, exp.Expression) else None
        if isinstance(with_, exp.With):
            names = visible
            recursive = bool(with_.args.get("recursive"))
            for cte in with_.expressions:
                name = cte.alias
                ctes.add(name)
                if _self_visible(cte, recursive, dialect):
                    union = cte.this
                    stack.append((union.this, names))
                    for key, child in union.args.items():
                        if key != "this":
                            for c in child if isinstance(child, list) else [child]:
                                if isinstance(c, exp.Expression):
                                    stack.append((c, names | {name}))
                else:
                    stack.append((cte.this, names))
                names = names | {name}
            visible = names
        if isinstance(node, exp.Table):
            name = node.name
            if name in visible:
                continue
            upper = name.upper() if dialect == "sqlite" else name
            if upper in allowed or (dialect == "oracle" and name == "DUAL"):
                views.append(upper)
                continue
            raise GuardrailError(
                f"table or view {upper} is not in the allow-list ({', '.join(sorted(allowed))})"
            )
        for key, child in node.args.items():
            if key == "with_":
                continue
            for c in child if isinstance(child, list) else [child]:
                if isinstance(c, exp.Expression):
                    stack.append((c, visible))
    return views, ctes


def check_sql(sql: str, allowed_views: Iterable[str], dialect: str) -> CheckedQuery:
    """Accept one read-only query over ``allowed_views`` or raise GuardrailError."""
    if not isinstance(sql, str) or not sql.strip():
        raise GuardrailError("empty SQL")
    if len(sql) > MAX_SQL_CHARS:
        raise GuardrailError(f"size limit: SQL longer than {MAX_SQL_CHARS} characters")
    if "\x00" in sql:
        raise GuardrailError("SQL contains a NUL character")
    if dialect not in ("sqlite", "oracle"):
        raise GuardrailError(f"unknown SQL dialect {dialect}")
    allowed = {v.upper() for v in allowed_views}
    sql, tokens = _strip_trailing_semicolon(sql.strip(), _lex(sql.strip(), dialect))
    _check_tokens(tokens)
    tree = _parse(tokens, dialect)
    try:
        _check_structure(tree, dialect)
        tree = normalize_identifiers(tree, dialect=dialect)
        views, ctes = _resolve_tables(tree, allowed, dialect)
    except RecursionError:
        raise GuardrailError("depth limit: the SQL is nested too deeply") from None
    return CheckedQuery(sql.strip(), tuple(sorted(set(views) - {"DUAL"})), tuple(sorted(ctes)))
