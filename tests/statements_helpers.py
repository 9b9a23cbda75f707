"""Find every statement oracle-rag can send to Oracle, for the golden and parse tests.

Discovery is automatic, so a new statement is pinned (and parsed) without
editing the tests. There is one statement mechanism
(``oracle_rag/engines/statements.py``), so there are two rules:

* every :class:`oracle_rag.engines.Sql` with Oracle text in any module under
  ``oracle_rag/``: a module-level constant (``<NAME>``), an item of
  a module-level list (``<NAME>.<i>``) or a value of a module-level
  dict (``<key>``), keyed by that name alone, so moving a module renames no
  golden file (names are unique in the package); ``{model}`` rendered with
  ``engine_sql.render(t, DEFAULT_MODEL)``. The fragments and templates that
  ``*_sql.py`` modules compose statements from (public upper-case ``str``
  constants that start like SQL or hold a ``:bind``, such as ``SCOPE``) are
  pinned too, except names prefixed with
  another dialect (``SQLITE_``, ``POSTGRESQL_``...: statements for a SQL
  source's own database);
* every Oracle migration (``sql/oracle/V*.sql`` and ``sql/oracle/demo/V*.sql``)
  rendered with default settings and split as the runner splits it, except
  the versions ``tests/test_migrations.py`` already pins under
  ``tests/golden/oracle/``.

A statement whose text equals one already found is listed once.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import oracle_rag
from oracle_rag.engines import Sql, engine_sql

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "oracle_rag"
DEFAULT_MODEL = "ALL_MINILM_L12_V2"
MIGRATIONS_PINNED_ELSEWHERE = ROOT / "tests" / "golden" / "oracle"
ORACLE_URL = "oracle+oracledb://golden@127.0.0.1:1/?service_name=FREEPDB1"

OTHER_DIALECT_PREFIXES = ("SQLITE_", "POSTGRESQL_", "POSTGRES_", "MYSQL_", "MARIADB_", "MSSQL_", "DUCKDB_")
SQL_START = re.compile(
    r"^\s*(SELECT|WITH|INSERT|UPDATE|DELETE|MERGE|CREATE|ALTER|DROP|TRUNCATE|GRANT|REVOKE|COMMENT"
    r"|BEGIN|DECLARE|EXPLAIN|LOCK|SET\s+TRANSACTION|COMMIT|ROLLBACK)\s+\S"
)


@dataclass(frozen=True)
class Statement:
    key: str  # golden file stem: the statement's NAME (a migration: its set and file stem)
    name: str  # NAME: the constant, ORACLE_STATEMENTS key or migration file stem
    sql: str  # the exact text sent (statements) or the rendered script (migrations)
    origin: str
    parts: tuple[str, ...] = ()  # a migration's split statements

    @property
    def is_script(self) -> bool:
        return bool(self.parts)

    @property
    def is_fragment(self) -> bool:
        """A piece composed into statements (SCOPE, FILTERS), not a statement itself."""
        return not self.is_script and not SQL_START.match(self.sql)


@dataclass
class Discovery:
    statements: dict[str, Statement] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    pinned_elsewhere: list[str] = field(default_factory=list)
    _texts: dict[str, str] = field(default_factory=dict)

    def add(self, key: str, name: str, sql: str, origin: str, parts: tuple[str, ...] = ()) -> None:
        if key in self.statements:
            if self.statements[key].sql != sql:
                self.problems.append(
                    f"{key}: two different statements under one name ({origin} and "
                    f"{self.statements[key].origin}): statement names are unique in the package"
                )
            return
        if not parts and sql in self._texts:
            return  # the same text, already pinned under its first name
        self._texts.setdefault(sql, key)
        self.statements[key] = Statement(key, name.split(".")[0], sql, origin, parts)


def _render(sql: str) -> str:
    """``{model}`` and ``{embedding}`` as the initial generation (slot 1, DEFAULT_MODEL) sends them."""
    return (
        engine_sql.render(sql, DEFAULT_MODEL)
        if any(p in sql for p in ("{model}", "{embedding}", "{vector_"))
        else sql
    )


def _assigned(module: Any) -> set[str]:
    """Names the module itself assigns at top level (not those it imports)."""
    tree = ast.parse(Path(module.__file__).read_text("utf-8"))
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _statements(module: Any) -> list[tuple[str, str]]:
    """(name, Oracle text) for the module's own ``Sql`` objects and, in ``*_sql`` modules, its fragments."""
    out: list[tuple[str, str]] = []
    is_sql_module = module.__name__.endswith("_sql")
    own = _assigned(module)
    for name, value in vars(module).items():
        if name not in own or not name.lstrip("_").isupper():
            continue
        if isinstance(value, Sql):
            items = [(name, value)]
        elif isinstance(value, list | tuple):
            items = [(f"{name}.{i}", v) for i, v in enumerate(value) if isinstance(v, Sql)]
        elif isinstance(value, dict):
            items = [(str(k), v) for k, v in value.items() if isinstance(v, Sql)]
        elif (
            is_sql_module
            and isinstance(value, str)
            and not name.startswith("_")
            and not name.startswith(OTHER_DIALECT_PREFIXES)
            and (SQL_START.match(value) or bind_names(value))
        ):
            out.append((name, value))
            continue
        else:
            continue
        out.extend((key, sql.oracle) for key, sql in items if sql.oracle is not None)
    return out


def _oracle_migrations(found: Discovery, include_pinned_elsewhere: bool) -> None:
    from oracle_rag.config import load_settings
    from oracle_rag.engines.oracle.engine import OracleEngine
    from oracle_rag.migrations import MIGRATION_SETS, discover

    engine = OracleEngine(load_settings(env={}, config_file=_empty_toml(), database_url=ORACLE_URL))
    for mset in MIGRATION_SETS:
        directory = engine.migrations_dir(mset)
        for m in discover(directory):
            stem = m.path.stem
            if mset == "rag" and (MIGRATIONS_PINNED_ELSEWHERE / f"{stem}.IVF-90.sql").is_file():
                found.pinned_elsewhere.append(f"{mset}/{m.path.name}")
                if not include_pinned_elsewhere:
                    continue
            parts = tuple(engine.split_script(engine.render_migration(m.text)))
            if (
                not parts
            ):  # a retired version (migrations.py) runs nothing: tests/test_migrations.py checks it
                continue
            rel = m.path.relative_to(PACKAGE).with_suffix("")
            found.add(
                ".".join(rel.parts),
                stem,
                script_text(parts),
                f"migration {m.path.relative_to(PACKAGE)} (default settings)",
                parts,
            )


_EMPTY_TOML: Path | None = None


def _empty_toml() -> Path:
    """An empty config file, so a developer's ./oracle-rag.toml cannot change the render."""
    global _EMPTY_TOML
    if _EMPTY_TOML is None:
        import atexit
        import tempfile

        handle = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        handle.close()
        _EMPTY_TOML = Path(handle.name)
        atexit.register(_EMPTY_TOML.unlink, missing_ok=True)
    return _EMPTY_TOML


def script_text(parts: tuple[str, ...] | list[str]) -> str:
    """Statements as a SQL*Plus script: ``;`` after SQL, ``/`` after PL/SQL."""
    from oracle_rag.sql_scripts import is_plsql

    return "\n\n".join(p + ("\n/" if is_plsql(p) else ";") for p in parts)


def discover(*, include_pinned_elsewhere: bool = False) -> Discovery:
    """Every Oracle statement; with ``include_pinned_elsewhere`` also the migrations
    ``tests/test_migrations.py`` pins (the parse test checks those too)."""
    found = Discovery()
    for module_name in sorted(m.name for m in pkgutil.walk_packages(oracle_rag.__path__, "oracle_rag.")):
        if module_name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a half-written module must not hide the others
            found.problems.append(f"{module_name}: import failed ({type(exc).__name__}: {exc})")
            continue
        for name, sql in _statements(module):
            found.add(name, name, _render(sql), f"{module_name}.{name.split('.')[0]}")
    _oracle_migrations(found, include_pinned_elsewhere)
    return found


# --- binds ---------------------------------------------------------------------------

_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)
_BIND = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_EXPANDING = re.compile(r"\bIN\s+:([A-Za-z_]\w*)", re.IGNORECASE)


def _code(sql: str) -> str:
    """``sql`` with quoted text and comments blanked out (same length)."""
    return _LITERAL_OR_COMMENT.sub(lambda m: " " * len(m.group(0)), sql)


def bind_names(sql: str) -> list[str]:
    """``:named`` binds in order of first appearance, outside literals and comments."""
    names: list[str] = []
    for m in _BIND.finditer(_code(sql)):
        if m.group(1).upper() in ("OLD", "NEW"):  # trigger pseudo-records, not binds
            continue
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def expanding_binds(sql: str) -> list[str]:
    """Binds used as ``IN :name``: SQLAlchemy expands them into ``IN (:name_1, ...)``."""
    return [m.group(1) for m in _EXPANDING.finditer(_code(sql))]


# Representative values, by bind name. Unknown names get a value by shape so a
# new statement needs no edit here; the header of its golden file shows it.
BIND_EXAMPLES: dict[str, Any] = {
    "source_type": "TASK",
    "source_id": "42",
    "ids": ["1", "2", "3"],
    "action": "UPSERT",
    "owner_id": 17,
    "project_id": 3,
    "sprint_id": 12,
    "content": "[TASK #42] Fix login timeout",
    "embed_text": "[TASK #42] Fix login timeout",
    "content_hash": "9f86d081884c7d65...",
    "max_attempts": 5,
    "dirty_id": 1001,
    "error": "SOURCE_LOADING: task 42 not found",
    "failed_only": 0,
    "limit": 50,
    "text": "login timeout on the mobile app",
    "query": "login timeout on the mobile app",
    "match": '"login" OR "timeout"',
    "k": 8,
    "see_all": 0,
    "caller_id": 17,
    "f_project": None,
    "f_sprint": None,
    "f_all_types": 0,
    "f_first_chunk": 0,
    "f_types": ["TASK", "SPRINT"],
    "model_name": DEFAULT_MODEL,
    "statement_id": "rag-plan-1",
    "replace": 0,
    "model_data": "<BLOB: the ONNX file's bytes>",
    "uri": "<pre-authenticated URL, secret>",
    "outcome": "<OUT VARCHAR2: LOADED|REPLACED|SKIPPED|CONCURRENT>",
    "id": 42,
    "names": ["RAG_TASK_ENQUEUE"],
    "mset": "rag",
    "version": 3,
    "checksum": "3a7bd3e2360a3d29...",
    "done": 4,
    "success": 1,
}


def bind_example(name: str) -> Any:
    if name in BIND_EXAMPLES:
        return BIND_EXAMPLES[name]
    if name.endswith(("_id", "_seq")) or name in ("seq", "n", "count"):
        return 7
    return f"<{name}>"


def compiled(sql: str) -> str:
    """The text SQLAlchemy (oracle dialect) sends with the representative binds.

    Differs from ``sql`` only where a bind is expanding (``IN :ids`` becomes
    ``IN (:ids_1, :ids_2, :ids_3)``); everything else is passed through.
    """
    from sqlalchemy.dialects import oracle

    expanding = set(expanding_binds(sql))
    params = []
    for name in bind_names(sql):
        value = bind_example(name)
        if name in expanding and not isinstance(value, list):
            value = [value, value]
        params.append(sa.bindparam(name, value=value, expanding=name in expanding))
    clause = sa.text(sql).bindparams(*params) if params else sa.text(sql)
    return str(clause.compile(dialect=oracle.oracledb.dialect(), compile_kwargs={"render_postcompile": True}))
