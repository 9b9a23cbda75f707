"""Every Oracle statement parses (sqlfluff, oracle dialect) and is the kind its name says (sqlglot).

Same discovery as the golden tests (``tests/statements_helpers.py``); the
migrations are checked statement by statement, as the runner sends them.
What is parsed is what the driver receives: expanding binds are expanded
(``IN (:ids_1, :ids_2, :ids_3)``), and the ``{placeholder}`` templates of
SQL-query sources are filled with a stand-in query and identifiers.

sqlfluff cannot parse a few Oracle constructs we use. For each one,
:data:`EXCEPTIONS` holds a precise regular expression of the documented
syntax (``/work/shared/oracle-reference.md`` and the Oracle SQL reference):
the statement must match it, and then the construct is replaced by a
parseable stand-in (or, when the construct is the whole statement, the match
is the check). A construct that differs from the documented syntax is
therefore not rewritten and fails the parse. ``docs/oracle-testing.md``
lists the exceptions and why; a test keeps that list in sync.

Then sqlglot (oracle dialect) classifies each statement it can parse (query,
DML, DDL, transaction control), and the class must match the statement's
name: a ``DELETE_*``/``INSERT_*``/``ENQUEUE``/``UPSERT_*``... name is DML,
``CREATE_*``/``DROP_*`` and migrations are DDL, ``*READ_ONLY`` is transaction
control, anything else reads. sqlglot is used only to classify, never to
rewrite SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from statements_helpers import ORACLE_URL, compiled, discover, expanding_binds

from oracle_rag.sql_scripts import is_plsql

DOCS = Path(__file__).resolve().parent.parent / "docs" / "oracle-testing.md"


@dataclass(frozen=True)
class ParserException:
    name: str
    construct: re.Pattern[str]
    stand_in: str | None  # replacement for each match; None: the construct is the whole statement
    reason: str
    head: str = ""  # whole statement (stand_in None): a statement starting like this must match fully;
    #                 otherwise: apply only to statements starting like this ("" = all)
    kind: str = ""  # whole statement: its class (sqlglot cannot read it either)


_IDENT = r"[A-Z][A-Z0-9_$#]*"
_FLAGS = re.IGNORECASE | re.DOTALL

EXCEPTIONS: tuple[ParserException, ...] = (
    ParserException(
        "CREATE VECTOR INDEX",
        re.compile(
            rf"CREATE\s+VECTOR\s+INDEX\s+{_IDENT}\s+ON\s+{_IDENT}\s*\(\s*{_IDENT}\s*\)"
            r"\s+ORGANIZATION\s+(?:NEIGHBOR\s+PARTITIONS|INMEMORY\s+NEIGHBOR\s+GRAPH)"
            r"\s+DISTANCE\s+(?:COSINE|DOT|EUCLIDEAN|EUCLIDEAN_SQUARED|MANHATTAN|HAMMING|JACCARD)"
            r"\s+WITH\s+TARGET\s+ACCURACY\s+(?:100|[1-9][0-9]?)"
            r"(?:\s+PARAMETERS\s*\(\s*TYPE\s+(?:IVF\s*,\s*NEIGHBOR\s+PARTITIONS\s+[1-9][0-9]{0,7}"
            r"|HNSW\s*,\s*(?:NEIGHBORS|M)\s+[1-9][0-9]{0,3}\s*,\s*EFCONSTRUCTION\s+[1-9][0-9]{0,4})\s*\))?",
            _FLAGS,
        ),
        None,
        "sqlfluff's Oracle dialect has no vector index DDL (Oracle AI Vector Search, 23ai).",
        r"CREATE\s+VECTOR\s+INDEX\b",
        "ddl",
    ),
    ParserException(
        "ALTER INDEX ... REBUILD ONLINE",
        re.compile(
            rf"ALTER\s+INDEX\s+{_IDENT}\s+REBUILD\s+(?:ONLINE(?:\s+PARALLEL\s+[1-9][0-9]?)?"
            r"|PARAMETERS\s*\(\s*NEIGHBOR\s+PARTITIONS\s+[1-9][0-9]{0,7}\s*\))",
            _FLAGS,
        ),
        None,
        "sqlfluff's Oracle dialect has no ALTER INDEX ... REBUILD; the 26ai online IVF reorganisation "
        "(AI Vector Search User's Guide, Rebuild IVF Indexes Online) and its 23.26.1 form with "
        "PARAMETERS (NEIGHBOR PARTITIONS n) are checked in their documented form.",
        r"ALTER\s+INDEX\b",
        "ddl",
    ),
    ParserException(
        "LOCK TABLE ... IN SHARE MODE NOWAIT",
        re.compile(rf"LOCK\s+TABLE\s+{_IDENT}(?:\s*,\s*{_IDENT})*\s+IN\s+SHARE\s+MODE\s+NOWAIT", _FLAGS),
        None,
        "sqlfluff's Oracle dialect has no LOCK TABLE (SQL Language Reference, LOCK TABLE: "
        "LOCK TABLE [schema.]table [, ...] IN lockmode MODE [NOWAIT | WAIT n]); the writers probe before migrate.",
        r"LOCK\s+TABLE\b",
        "dml",
    ),
    ParserException(
        "ALTER SESSION SET DDL_LOCK_TIMEOUT",
        re.compile(r"ALTER\s+SESSION\s+SET\s+DDL_LOCK_TIMEOUT\s*=\s*[0-9]{1,7}", _FLAGS),
        None,
        "sqlglot reads ALTER SESSION as an opaque command; DDL_LOCK_TIMEOUT is modifiable by ALTER SESSION, "
        "0 to 1,000,000 seconds (Database Reference, DDL_LOCK_TIMEOUT).",
        r"ALTER\s+SESSION\b",
        "ddl",
    ),
    ParserException(
        "SET TRANSACTION READ ONLY",
        re.compile(r"SET\s+TRANSACTION\s+READ\s+ONLY", _FLAGS),
        None,
        "sqlfluff's Oracle dialect has no SET TRANSACTION statement.",
        r"SET\s+TRANSACTION\b",
        "control",
    ),
    ParserException(
        "FETCH APPROX / FETCH EXACT",
        re.compile(
            r"((?:ORDER\s+BY\s+VECTOR_DISTANCE\([^;]*?\)"
            r"|VECTOR_DISTANCE\([^;]*?\)\s+AS\s+DISTANCE\b[^;]*?ORDER\s+BY\s+DISTANCE)\s+)"
            r"FETCH\s+(?:APPROX|APPROXIMATE|EXACT)\s+FIRST\s+"
            r"(:[a-z_]\w*|[1-9][0-9]*)\s+ROWS\s+ONLY(?:\s+WITH\s+TARGET\s+ACCURACY\s+[1-9][0-9]?)?",
            _FLAGS,
        ),
        r"\1FETCH FIRST \2 ROWS ONLY",
        "sqlfluff (and sqlglot) know FETCH FIRST but not the approximate/exact similarity-search "
        "row limit; the regex also requires VECTOR_DISTANCE as the only ORDER BY key, written out or as "
        "the select-list alias DISTANCE of a VECTOR_DISTANCE (langchain-oracledb's form).",
    ),
    ParserException(
        "VECTOR_EMBEDDING(model USING expr AS data)",
        re.compile(
            rf"VECTOR_EMBEDDING\(\s*{_IDENT}\s+USING\s+(:[a-z_]\w*|[a-z_]\w*\.[a-z_]\w*)\s+AS\s+data\s*\)",
            _FLAGS,
        ),
        r"VECTOR_EMBEDDING(\1)",
        "sqlfluff and sqlglot do not know the USING ... AS data clause of VECTOR_EMBEDDING.",
    ),
    ParserException(
        "GENERATED ... AS IDENTITY PRIMARY KEY",
        re.compile(
            r"\bNUMBER\s+GENERATED\s+(?:ALWAYS|BY\s+DEFAULT(?:\s+ON\s+NULL)?)\s+AS\s+IDENTITY\s+PRIMARY\s+KEY\b",
            _FLAGS,
        ),
        "NUMBER PRIMARY KEY",
        "sqlfluff parses an identity column but not one followed by an inline constraint.",
    ),
    ParserException(
        "DEFAULT ... ON CONVERSION ERROR",
        re.compile(
            r"(TO_NUMBER\(\s*SYS_CONTEXT\('USERENV',\s*'CLIENT_IDENTIFIER'\))\s+DEFAULT\s+NULL\s+ON\s+"
            r"CONVERSION\s+ERROR\s*\)",
            _FLAGS,
        ),
        r"\1)",
        "sqlfluff does not know the conversion-error clause of TO_NUMBER (Oracle 12.2+).",
    ),
    ParserException(
        "EXPLAIN PLAN FOR",
        re.compile(r"^EXPLAIN\s+PLAN\s+FOR\s+(?=SELECT\b)", _FLAGS),
        "",
        "sqlfluff's Oracle dialect has no EXPLAIN PLAN; the explained SELECT is parsed on its own.",
    ),
    ParserException(
        "PL/SQL named argument force =>",
        re.compile(
            rf"(DBMS_VECTOR\.DROP_ONNX_MODEL\(\s*model_name\s*=>\s*(?:{_IDENT}|:[a-z_]\w*),\s*)force(\s*=>\s*TRUE\s*\))",
            _FLAGS,
        ),
        r"\1p_force\2",
        "FORCE is a keyword to sqlfluff, so a named argument called force does not parse.",
    ),
    ParserException(
        "JSON_VALUE ... RETURNING NUMBER",
        re.compile(r"(JSON_VALUE\(\s*[\w.]+\s*,\s*'[^']*')\s+RETURNING\s+NUMBER\s*\)", _FLAGS),
        r"\1)",
        "sqlfluff does not know the RETURNING clause of JSON_VALUE (the facet predicates, Oracle 12.1+).",
    ),
    ParserException(
        "IS JSON",
        re.compile(rf"\b({_IDENT})\s+IS\s+JSON\b", _FLAGS),
        r"\1 IS NOT NULL",
        "sqlfluff does not know the IS JSON condition (used in CHECK constraints on CLOB columns).",
    ),
    ParserException(
        "trigger predicates INSERTING / UPDATING / DELETING",
        re.compile(
            r"(?<=\bIF\s)(?:NOT\s+)?(?:INSERTING|UPDATING|DELETING)\b"
            r"|(?<=\bOR\s\()(?:INSERTING|UPDATING|DELETING)\b",
            _FLAGS,
        ),
        "TRUE",
        "sqlfluff parses the trigger conditional predicates alone but not combined with other "
        "conditions (IF DELETING OR (UPDATING AND :OLD.X <> :NEW.X)).",
        r"CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+\w+\s+(?:BEFORE|AFTER)\s",
    ),
)

_QUERY_STAND_IN = "SELECT t.TASK_ID AS ID, t.DUE_DATE AS UPDATED_AT FROM TASK t"


def _fill_templates(sql: str) -> str:
    """``{query}`` (a source's own query) and ``{identifier}`` placeholders, as ``wrap()`` fills them."""
    sql = sql.replace("{query}", _QUERY_STAND_IN)
    return re.sub(r"\{([a-z_][a-z0-9_]*)\}", lambda m: m.group(1).upper(), sql)


@dataclass(frozen=True)
class Case:
    id: str
    name: str  # the constant / ORACLE_STATEMENTS key / migration file stem
    sql: str  # as sent (expanding binds expanded)
    migration: bool
    fragment: bool


def _cases() -> list[Case]:
    out: list[Case] = []
    for key, st in discover(include_pinned_elsewhere=True).statements.items():
        if st.is_script:
            out += [Case(f"{key}[{i + 1}]", st.name, part, True, False) for i, part in enumerate(st.parts)]
            continue
        sql = st.sql
        if st.is_fragment:  # a join follows the table (SCOPE_JOIN), a predicate the WHERE
            sql = f"SELECT 1 FROM RAG_CHUNK c {'' if re.match(r'LEFT JOIN ', sql) else 'WHERE '}{sql}"
        if expanding_binds(sql):
            sql = compiled(sql)
        out.append(Case(key, st.name, _fill_templates(sql), False, st.is_fragment))
    return out


CASES = _cases()


@lru_cache(maxsize=1)
def _linter():  # type: ignore[no-untyped-def]
    from sqlfluff.core import Linter

    return Linter(dialect="oracle")


@cache
def prepared(sql: str) -> tuple[str | None, tuple[str, ...]]:
    """(text for the parsers or None when an exception's regex is the whole check, exceptions applied)."""
    applied: list[str] = []
    text = sql.strip()
    for ex in EXCEPTIONS:
        if ex.stand_in is None:
            if re.match(ex.head, text, re.IGNORECASE):
                assert ex.construct.fullmatch(text), f"not the documented {ex.name} syntax:\n{text}"
                return None, (ex.name,)
            continue
        if ex.head and not re.match(ex.head, text, re.IGNORECASE):
            continue
        text, n = ex.construct.subn(ex.stand_in, text)
        if n:
            applied.append(ex.name)
    return text, tuple(applied)


def _unparsable(text: str) -> list[str]:
    parsed = _linter().parse_string(text)
    tree = parsed.tree
    assert tree is not None, "sqlfluff produced no parse tree"
    bad = [seg.raw for seg in tree.recursive_crawl("unparsable")]
    bad += [v.desc() for v in parsed.violations]  # parse_string runs no rules: these are lex/parse errors
    return bad


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_statement_parses_with_sqlfluff(case: Case) -> None:
    text, _ = prepared(case.sql)
    if text is None:
        return  # the construct's regex matched the whole statement
    bad = _unparsable(text)
    assert not bad, (
        f"{case.id} does not parse with sqlfluff (oracle); if this is a construct sqlfluff "
        f"cannot parse, add an exception with a precise regex: {bad[0][:200]!r}"
    )


# -- sqlglot: what kind of statement is it? ---------------------------------------------------

_DML_WORDS = {
    "INSERT",
    "UPDATE",
    "DELETE",
    "MERGE",
    "UPSERT",
    "ENQUEUE",
    "FAIL",
    "RETRY",
    "REVOKE",
    "TOUCH",
    "CLAIM",
    "RECORD",
    "ENSURE",
    "PROGRESS",
    "MARK",
    "SAVE",
    "STORE",
    "CLEAR",
    "RESET",
    "PURGE",
    "REMOVE",
    "SET",
    "LOCK",
}
_DDL_WORDS = {"CREATE", "DROP", "ALTER", "TRUNCATE", "DDL", "GRANT", "REBUILD", "OPTIMIZE"}


# Migration statements that change data rather than the schema, each with why.
DATA_MIGRATION_STATEMENTS = {
    "sql.oracle.V8__bm25_folds_accents[2]": "marks every record's BM25 analysis out of date (a new analyser)",
    "sql.oracle.V10__access[2]": "gives existing chunks the access rule the product applied before V10",
    "sql.oracle.V13__postings_carry_record[2]": "copies each record's length, scope and filter columns to its postings",
    "sql.oracle.V13__postings_carry_record[3]": "deletes the postings of records not analysed (never read)",
    "sql.oracle.V16__model_generations[2]": "registers the vectors already stored as generation 1",
    "sql.oracle.V16__model_generations[5]": "stamps the vectors already stored with generation 1",
}


def expected_kind(case: Case) -> str:
    """What the statement's name (or origin) says it is."""
    if case.migration:
        return "dml" if case.id in DATA_MIGRATION_STATEMENTS else "ddl"
    words = case.name.upper().split(".")[0].strip("_").split("_")
    if "READ" in words and "ONLY" in words:
        return "control"
    if _DDL_WORDS & set(words):
        return "ddl"
    if _DML_WORDS & set(words):
        return "dml"
    return "query"  # EXPLAIN_* too: its stand-in is the explained query


def sqlglot_kind(text: str) -> str | None:
    """sqlglot's reading of ``text`` as a class, or None when sqlglot cannot parse it.

    PL/SQL units are not SQL: sqlglot would split them at their semicolons.
    """
    if is_plsql(text):
        return None
    try:
        parsed = sqlglot.parse(text, read="oracle")
    except ParseError:
        return None
    assert len(parsed) == 1 and parsed[0] is not None, "one statement expected"
    node = parsed[0]
    if isinstance(node, exp.Query):
        return "query"
    if isinstance(node, exp.Insert | exp.Update | exp.Delete | exp.Merge):
        return "dml"
    if isinstance(node, exp.Create | exp.Drop | exp.Alter | exp.TruncateTable | exp.Grant | exp.Comment):
        return "ddl"
    if isinstance(node, exp.Set | exp.Transaction):
        return "control"
    if isinstance(node, exp.Command):  # opaque: sqlglot only knows the first keyword
        return None
    return type(node).__name__


_ANONYMOUS_BLOCK = re.compile(r"^\s*(DECLARE|BEGIN)\b", re.IGNORECASE)
# Anonymous PL/SQL blocks have no SQL class (sqlfluff parsed them above); everything else is classified.
GLOT_CASES = [c for c in CASES if not c.fragment and not _ANONYMOUS_BLOCK.match(c.sql)]

# What sqlglot 30 (oracle) cannot parse (measured; see docs/oracle-testing.md). For these the class
# comes from the leading keyword instead, so the check still runs.
SQLGLOT_LIMITS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"\bVECTOR\(\s*\d+\s*,\s*(?:FLOAT32|FLOAT64|INT8|BINARY)\s*\)", re.IGNORECASE),
        "VECTOR(n, format) column types",
    ),
    (re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\b", re.IGNORECASE), "trigger bodies (PL/SQL)"),
    (
        re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?PACKAGE\b", re.IGNORECASE),
        "package specs and bodies (PL/SQL)",
    ),
    (
        re.compile(r"^\s*ALTER\s+TABLE\s+\w+\s+MODIFY\s*\(", re.IGNORECASE),
        "ALTER TABLE ... MODIFY (column NOT NULL)",
    ),
    (
        re.compile(r"^\s*CREATE\s+INDEX\b[^;]*\)\s*COMPRESS\s+\d+\s*$", re.IGNORECASE),
        "CREATE INDEX ... COMPRESS n (prefix compression)",
    ),
    (re.compile(r"^\s*CREATE\s+INDEX\b[^;]*\)\s*ONLINE\s*$", re.IGNORECASE), "CREATE INDEX ... ONLINE"),
)
_HEADS = (
    (r"CREATE|DROP|ALTER|TRUNCATE|GRANT|REVOKE|COMMENT", "ddl"),
    (r"SELECT|WITH", "query"),
    (r"INSERT|UPDATE|DELETE|MERGE", "dml"),
    (r"SET\s+TRANSACTION", "control"),
)


def head_kind(text: str) -> str:
    for pattern, kind in _HEADS:
        if re.match(rf"\s*(?:{pattern})\b", text, re.IGNORECASE):
            return kind
    raise AssertionError(f"no class for {text[:60]!r}")


@pytest.mark.parametrize("case", GLOT_CASES, ids=[c.id for c in GLOT_CASES])
def test_statement_class_matches_its_name(case: Case) -> None:
    text, applied = prepared(case.sql)
    if text is None:
        whole = next(ex for ex in EXCEPTIONS if ex.name == applied[0])
        assert whole.kind == expected_kind(case), (
            f"{case.id}: named like {expected_kind(case)}, is {whole.kind}"
        )
        return
    if any(rx.search(text) for rx, _ in SQLGLOT_LIMITS):
        kind = head_kind(text)
    else:
        kind = sqlglot_kind(text)
        assert kind is not None, f"{case.id}: sqlglot cannot classify it; add the construct to SQLGLOT_LIMITS"
    assert kind == expected_kind(case), f"{case.id}: named like {expected_kind(case)} but it is {kind}"
    if kind != "control":  # sqlglot's class agrees with the leading keyword (a guard on the guard)
        assert head_kind(text) == kind


def test_sqlglot_classifies_most_statements() -> None:
    """The class check is mostly sqlglot's, not the keyword fallback's."""
    fallback = [
        c.id
        for c in GLOT_CASES
        if (t := prepared(c.sql)[0]) is not None and any(rx.search(t) for rx, _ in SQLGLOT_LIMITS)
    ]
    assert len(fallback) <= len(GLOT_CASES) // 5, fallback


def test_every_exception_is_used_and_documented() -> None:
    """An exception no statement needs is stale; each one is explained in docs/oracle-testing.md."""
    used: set[str] = set()
    for case in CASES:
        used.update(prepared(case.sql)[1])
    assert {ex.name for ex in EXCEPTIONS} == used, (
        f"unused exceptions: {sorted({e.name for e in EXCEPTIONS} - used)}"
    )
    doc = DOCS.read_text(encoding="utf-8")
    for ex in EXCEPTIONS:
        assert f"`{ex.name}`" in doc, f"docs/oracle-testing.md does not explain the exception `{ex.name}`"


@pytest.mark.parametrize(
    ("sql", "documented"),
    [
        (
            "CREATE VECTOR INDEX X ON T (E) ORGANIZATION NEIGHBOR PARTITIONS DISTANCE COSINE WITH TARGET ACCURACY 90",
            True,
        ),
        (
            "CREATE VECTOR INDEX X ON T (E) ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE COSINE "
            "WITH TARGET ACCURACY 95 PARAMETERS (TYPE HNSW, NEIGHBORS 32, EFCONSTRUCTION 200)",
            True,
        ),
        (
            "CREATE VECTOR INDEX X ON T (E) ORGANIZATION NEIGHBOR PARTITIONS DISTANCE COSINE WITH TARGET ACCURACY 90\n"
            "  PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS 64)",
            True,
        ),
        (
            "CREATE VECTOR INDEX X ON T (E) ORGANIZATION NEIGHBOUR PARTITIONS DISTANCE COSINE WITH TARGET ACCURACY 90",
            False,
        ),
        (
            "CREATE VECTOR INDEX X ON T (E) ORGANIZATION NEIGHBOR PARTITIONS DISTANCE COSINE WITH TARGET ACCURACY 190",
            False,
        ),
        ("CREATE VECTOR INDEX X ON T (E) ORGANIZATION NEIGHBOR PARTITIONS DISTANCE COSINE", False),
    ],
)
def test_vector_index_regex_is_precise(sql: str, documented: bool) -> None:
    """The whole-statement exception accepts the documented syntax and nothing looser."""
    if documented:
        assert prepared(sql) == (None, ("CREATE VECTOR INDEX",))
    else:
        with pytest.raises(AssertionError, match="not the documented"):
            prepared(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 FROM RAG_CHUNK c ORDER BY c.CHUNK_ID FETCH APPROX FIRST :k ROWS ONLY",  # not by distance
        "SELECT c.CHUNK_ID AS DISTANCE FROM RAG_CHUNK c ORDER BY DISTANCE FETCH APPROX FIRST :k ROWS ONLY",
        "SELECT VECTOR_EMBEDDING(M USING :q) FROM dual",  # AS data missing
        "SELECT 1 FROM RAG_CHUNK c ORDER BY VECTOR_DISTANCE(c.E, :v, COSINE) FETCH APROX FIRST 5 ROWS ONLY",
    ],
)
def test_undocumented_variants_are_not_rewritten(sql: str) -> None:
    """A near miss of a documented construct is not replaced, so sqlfluff rejects it."""
    text, applied = prepared(sql)
    assert text is not None and not applied
    assert _unparsable(text)


@pytest.mark.parametrize(
    "overrides",
    [{"vector_index_type": "HNSW", "vector_index_accuracy": 95}, {"vector_index_partitions": 64}],
    ids=["HNSW-95", "IVF-90-partitions-64"],
)
def test_vector_index_renders_in_documented_syntax_for_every_setting(tmp_path: Path, overrides: dict) -> None:
    """The migration's vector index, rendered for the other index settings, still matches the
    documented syntax (the default render is among the cases above)."""
    from oracle_rag.config import load_settings
    from oracle_rag.engines.oracle.engine import OracleEngine

    empty = tmp_path / "empty.toml"
    empty.write_text("")
    engine = OracleEngine(load_settings(env={}, config_file=empty, database_url=ORACLE_URL, **overrides))
    template = (engine.migrations_dir("rag") / "V1__rag_chunk.sql").read_text("utf-8")
    index = [s for s in engine.split_script(engine.render_migration(template)) if "VECTOR INDEX" in s]
    assert len(index) == 1
    assert prepared(index[0]) == (None, ("CREATE VECTOR INDEX",))
