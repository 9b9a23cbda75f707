"""The first line of defence for untrusted SQL: parse, classify, refuse.

SQL written by a model can be wrong or steered by prompt injection, so
nothing here trusts it. This module accepts exactly one read-only query
(SELECT, WITH ... SELECT, or set operations of those) that reads only the
allow-listed views and calls only allow-listed functions, and refuses
everything else with a GuardrailError that says why. It never rewrites the
SQL (sqlglot can classify Oracle SQL but not regenerate it faithfully); the
text that passes is the text that runs. The database-level defences (a
read-only user or connection, an authorizer, timeouts, row caps) still
apply after this, in the executors.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from ..errors import GuardrailError

MAX_SQL_CHARS = 10_000

# Functions a reporting query needs (sqlglot also reports AND/OR as functions). Anything else (DBMS_*, UTL_*, user
# functions that might be autonomous transactions, load_extension, readfile,
# fts3_tokenizer, ...) is refused.
ALLOWED_FUNCTIONS = frozenset(
    """COUNT SUM AVG MIN MAX TOTAL ROUND TRUNC FLOOR CEIL CEILING ABS MOD SIGN POWER SQRT
    LOWER UPPER INITCAP LENGTH SUBSTR SUBSTRING TRIM LTRIM RTRIM REPLACE INSTR CONCAT DPIPE
    COALESCE NVL NVL2 NULLIF IFNULL IIF IF CASE CAST TRY_CAST DECODE GREATEST LEAST
    EXTRACT TO_CHAR TO_DATE TO_NUMBER TO_TIMESTAMP DATE DATETIME STRFTIME JULIANDAY
    CURRENTDATE CURRENTTIMESTAMP CURRENT_DATE CURRENT_TIMESTAMP SYSDATE ADD_MONTHS MONTHS_BETWEEN
    DATEDIFF DATEADD DATE_ADD DATE_SUB DATETRUNC TIMESTAMPTRUNC TSORDSTODATE STRTOTIME STRTODATE
    TIMETOSTR TSORDSTOTIME UNIXTOTIME
    GROUP_CONCAT GROUPCONCAT LISTAGG MEDIAN STDDEV STDDEV_POP STDDEV_SAMP VARIANCE VAR_POP VAR_SAMP
    PERCENTILE_CONT PERCENTILECONT PERCENTILE_DISC PERCENTILEDISC
    ROW_NUMBER ROWNUMBER RANK DENSE_RANK DENSERANK NTILE LAG LEAD FIRST_VALUE FIRSTVALUE
    LAST_VALUE LASTVALUE COUNTIF COUNT_IF ANYVALUE ANY_VALUE
    TIME_TO_STR TS_OR_DS_TO_TIMESTAMP TS_OR_DS_TO_DATE STR_TO_TIME STR_TO_DATE UNIX_TO_TIME
    DATE_TRUNC TIMESTAMP_TRUNC
    LIKE GLOB EXISTS AND OR XOR""".split()
)

_STRING = re.compile(r"'(?:[^']|'')*'")
_LINE_COMMENT = re.compile(r"--[^\n]*")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_FORBIDDEN_WORDS = re.compile(
    r"\b(DBMS_\w*|UTL_\w*|SYS\.\w+|INSERT|UPDATE|DELETE|MERGE|DROP|CREATE|ALTER|TRUNCATE|GRANT|REVOKE|"
    r"ATTACH|DETACH|PRAGMA|VACUUM|REINDEX|ANALYZE|COPY|INSTALL|LOAD|CALL|EXEC|EXECUTE|BEGIN|DECLARE|"
    r"COMMIT|ROLLBACK|SAVEPOINT|LOCK|SET|REPLACE\s+INTO|LOAD_EXTENSION|READFILE|WRITEFILE|EDIT|"
    r"FTS3_TOKENIZER|SQLITE_\w+)\b",
    re.IGNORECASE,
)
_DOTTED_CALL = re.compile(r"\b\w+\s*\.\s*\w+\s*\(")


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed the guard: the exact text to run and what it reads."""

    sql: str
    views: tuple[str, ...]
    ctes: tuple[str, ...] = ()


def _code_only(sql: str) -> str:
    """The SQL with string literals blanked and comments removed (for textual checks)."""
    text = _BLOCK_COMMENT.sub(" ", sql)
    text = _LINE_COMMENT.sub(" ", text)
    return _STRING.sub("''", text)


def _strip_trailing_semicolon(sql: str) -> str:
    code = _code_only(sql).rstrip()
    if code.endswith(";"):
        # remove the last ';' of the original text (it is outside strings/comments)
        idx = sql.rstrip().rfind(";")
        sql = sql[:idx] + sql[idx + 1 :]
    return sql.strip()


def check_sql(sql: str, allowed_views: Iterable[str], dialect: str) -> CheckedQuery:
    """Accept one read-only query over ``allowed_views`` or raise GuardrailError."""
    if not isinstance(sql, str) or not sql.strip():
        raise GuardrailError("empty SQL")
    if len(sql) > MAX_SQL_CHARS:
        raise GuardrailError(f"SQL longer than {MAX_SQL_CHARS} characters")
    if "\x00" in sql:
        raise GuardrailError("SQL contains a NUL character")
    allowed = {v.upper() for v in allowed_views}
    sql = _strip_trailing_semicolon(sql)
    code = _code_only(sql)
    if any(ord(ch) > 127 for ch in code):
        odd = next(ch for ch in code if ord(ch) > 127)
        raise GuardrailError(
            f"non-ASCII character {unicodedata.name(odd, hex(ord(odd)))} outside a string literal "
            "(look-alike characters are refused)"
        )
    if ";" in code:
        raise GuardrailError("more than one statement (';' inside the SQL)")
    if "@" in code:
        raise GuardrailError("database links ('@') are not allowed")
    match = _FORBIDDEN_WORDS.search(code)
    if match:
        raise GuardrailError(f"forbidden keyword or package: {match.group(1).upper()}")
    dotted = _DOTTED_CALL.search(code)
    if dotted:
        raise GuardrailError("qualified function calls (package.function) are not allowed")
    try:
        parsed = sqlglot.parse(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        raise GuardrailError("the SQL could not be parsed as a single query; refused") from None
    except RecursionError:
        raise GuardrailError("depth limit: the SQL is nested too deeply") from None
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise GuardrailError(f"exactly one statement is allowed, got {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.Union | exp.Intersect | exp.Except):
        raise GuardrailError(f"only SELECT queries are allowed, got {type(tree).__name__.upper()}")
    for node in tree.walk():
        if isinstance(node, exp.Select) and node.args.get("locks"):
            raise GuardrailError("SELECT ... FOR UPDATE is not allowed")
        if isinstance(node, exp.Into):
            raise GuardrailError("SELECT ... INTO is not allowed")
        if isinstance(node, exp.Command):
            raise GuardrailError("commands are not allowed")
    ctes = {c.alias_or_name.upper() for c in tree.find_all(exp.CTE)}
    views: list[str] = []
    for table in tree.find_all(exp.Table):
        name = table.name.upper()
        if table.args.get("db") or table.args.get("catalog"):
            raise GuardrailError(f"schema-qualified tables are not allowed ({table.sql(dialect=dialect)})")
        if name in ctes:
            continue
        if name == "DUAL" and dialect == "oracle":
            continue
        if name not in allowed:
            raise GuardrailError(f"table or view {name} is not in the allow-list ({', '.join(sorted(allowed))})")
        views.append(name)
    for func in tree.find_all(exp.Func):
        name = func.name.upper() if isinstance(func, exp.Anonymous) else func.sql_name().upper()
        if name not in ALLOWED_FUNCTIONS:
            raise GuardrailError(f"function {name} is not in the allow-list")
    return CheckedQuery(sql, tuple(sorted(set(views))), tuple(sorted(ctes)))
