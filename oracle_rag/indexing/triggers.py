"""Optional database triggers that enqueue re-index rows (off by default).

The recommended write path is :func:`oracle_rag.indexing.queue.enqueue` (or the ORM
hook of :mod:`oracle_rag.demo.models`) in the application's own
transaction. Applications that also write to the reference tables from
elsewhere (another service, a batch job, a SQL console) can install
triggers that add the same RAG_DIRTY rows inside the writing transaction.
Both at once is harmless: duplicate rows coalesce in the worker.

The trigger scripts live in ``sql/<engine>/triggers/``. They are not
migrations: the migration runner only reads ``V<n>__*.sql`` files directly
in the set's folder, never a subfolder, and these are installed and removed
on demand (``oracle-rag triggers install|uninstall``). Scripts are split
with the engine's own ``split_script`` (Oracle: ``CREATE OR REPLACE
TRIGGER`` blocks ended by a ``/`` line; SQLite: one statement per ``;``
with trigger bodies kept whole). Both scripts are idempotent.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from oracle_rag.engines import Engine
from oracle_rag.engines.base import SQL_ROOT
from oracle_rag.engines.statements import Sql
from oracle_rag.errors import DatabaseError, MissingTableError, wrap_driver_error
from oracle_rag.sources.reference import reference_app_present
from oracle_rag.sql_scripts import split_oracle_script

FOLDER = "triggers"
INSTALL_SCRIPT = "enqueue_triggers.sql"
UNINSTALL_SCRIPT = "drop_enqueue_triggers.sql"

# Which of our triggers exist, and whether each compiled (USER_OBJECTS.STATUS VALID) and
# fires (USER_TRIGGERS.STATUS ENABLED). A trigger that exists but is INVALID makes every
# write to its table fail with ORA-04098, so only VALID and ENABLED counts as installed.
LIST_TRIGGERS = Sql(
    oracle="""SELECT t.TRIGGER_NAME, o.STATUS AS OBJECT_STATUS, t.STATUS AS TRIGGER_STATUS
FROM USER_TRIGGERS t
JOIN USER_OBJECTS o ON o.OBJECT_NAME = t.TRIGGER_NAME AND o.OBJECT_TYPE = 'TRIGGER'
WHERE t.TRIGGER_NAME IN :names
ORDER BY t.TRIGGER_NAME""",
    sqlite=(
        "SELECT UPPER(name), 'VALID', 'ENABLED' FROM sqlite_master "
        "WHERE type = 'trigger' AND UPPER(name) IN :names ORDER BY 1"
    ),
    expanding=("names",),
)

# python-oracledb raises nothing when CREATE TRIGGER compiles with errors: the trigger is
# created INVALID and the cursor carries a DPY-7000 warning ("creation succeeded with
# compilation errors"); the errors are in USER_ERRORS (python-oracledb user guide,
# "PL/SQL Compilation Warnings"). Each CREATE is checked both ways.
TRIGGER_ERRORS = Sql(
    oracle="""SELECT LINE, POSITION, TEXT
FROM USER_ERRORS
WHERE TYPE = 'TRIGGER' AND NAME = :name AND ATTRIBUTE = 'ERROR'
ORDER BY SEQUENCE"""
)
COMPILE_WARNING = "DPY-7000"

_CREATE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+([A-Za-z][A-Za-z0-9_$#]*)", re.I | re.M)
_DROP = re.compile(r"^\s*DROP\s+TRIGGER\s+(?:IF\s+EXISTS\s+)?([A-Za-z][A-Za-z0-9_$#]*)", re.I)

_INSTALL_HINT = (
    "; the RAG tables and the reference application's tables must exist first "
    "(`oracle-rag migrate --demo`), and on Oracle the user needs CREATE TRIGGER"
)


def _script(engine: Engine, script: str) -> str:
    return (engine.trigger_scripts_dir() / script).read_text("utf-8")


def install_statements(engine: Engine) -> list[str]:
    """The statements ``install`` runs, as the engine's splitter cuts them."""
    return engine.split_script(_script(engine, INSTALL_SCRIPT))


def uninstall_statements(engine: Engine) -> list[str]:
    return engine.split_script(_script(engine, UNINSTALL_SCRIPT))


def trigger_names(engine: Engine) -> list[str]:
    """The triggers the install script creates (upper case, in script order)."""
    return [m.group(1).upper() for m in _CREATE.finditer(_script(engine, INSTALL_SCRIPT))]


def states(engine: Engine) -> dict[str, tuple[str, str]]:
    """Each of our triggers that exists: (object status VALID|INVALID, ENABLED|DISABLED)."""
    with engine.connect() as conn:
        rows = conn.execute(engine.statement(LIST_TRIGGERS), {"names": trigger_names(engine)})
        return {str(r[0]).upper(): (str(r[1]).upper(), str(r[2]).upper()) for r in rows}


def installed(engine: Engine) -> list[str]:
    """Our triggers that exist, compiled and fire (VALID and ENABLED), sorted."""
    return sorted(name for name, state in states(engine).items() if state == ("VALID", "ENABLED"))


def broken(engine: Engine) -> dict[str, tuple[str, str]]:
    """Our triggers that exist but are INVALID or DISABLED (an INVALID one blocks writes: ORA-04098)."""
    return {name: state for name, state in states(engine).items() if state != ("VALID", "ENABLED")}


def compile_failure(name: str, warning_code: str | None, errors: list[tuple[Any, Any, Any]]) -> str | None:
    """Why ``CREATE TRIGGER name`` did not compile, or None when it did.

    ``warning_code`` is the cursor's warning (``DPY-7000`` for compilation
    errors), ``errors`` the USER_ERRORS rows (line, position, text). Either one
    is enough: the warning is what the driver reports, the rows say where.
    """
    if warning_code != COMPILE_WARNING and not errors:
        return None
    where = "; ".join(
        f"line {line}, position {pos}: {' '.join(str(text).split())}" for line, pos, text in errors[:3]
    )
    return f"trigger {name} did not compile ({where or warning_code})"


NO_REFERENCE_APP = (
    "the enqueue triggers watch the reference application's tables (TASK, TASK_COMMENT, SPRINT, "
    "PROJECT, EMPLOYEE), which this database does not have; SQL-query sources need no triggers "
    "(`oracle-rag sources sync`, and the worker refreshes them); the reference schema is created by "
    "`oracle-rag migrate --demo` (`oracle-rag demo seed` also fills it)"
)


def install(engine: Engine) -> list[str]:
    """Create (or replace) the enqueue triggers; returns the triggers now installed.

    Refused in one line (MissingTableError) where the reference application's tables are missing."""
    with engine.connect() as conn:
        if not reference_app_present(conn):
            raise MissingTableError(NO_REFERENCE_APP)
    _run(engine, install_statements(engine), "installing the enqueue triggers", _INSTALL_HINT)
    return installed(engine)


def uninstall(engine: Engine) -> list[str]:
    """Drop the enqueue triggers; returns the ones that were installed before."""
    before = installed(engine)
    _run(engine, uninstall_statements(engine), "removing the enqueue triggers", "")
    return before


def _run(engine: Engine, statements: list[str], doing: str, hint: str) -> None:
    # SQLite: one transaction, so a failure leaves the previous triggers in
    # place. Oracle commits each DDL; CREATE OR REPLACE makes a re-run safe.
    with engine.begin() as conn:
        for i, sql in enumerate(statements, 1):
            try:
                if engine.ddl_compile_warnings:
                    _run_oracle_ddl(engine, conn, sql)
                else:
                    conn.exec_driver_sql(sql)
            except DatabaseError as exc:
                raise DatabaseError(
                    f"{doing} (statement {i} of {len(statements)}): {exc.message}",
                    driver_class=exc.driver_class,
                    vendor_code=exc.vendor_code,
                ) from None
            except Exception as exc:  # the driver's error (raw cursor) or SQLAlchemy's wrapper of it
                if (
                    not isinstance(exc, sa.exc.DBAPIError)
                    and type(exc).__module__.split(".")[0] != "oracledb"
                ):
                    raise
                wrapped = wrap_driver_error(exc, f"{doing} (statement {i} of {len(statements)})")
                raise DatabaseError(
                    wrapped.message + hint, driver_class=wrapped.driver_class, vendor_code=wrapped.vendor_code
                ) from None


def _run_oracle_ddl(engine: Engine, conn: sa.Connection, sql: str) -> None:
    """One DDL statement on a raw cursor; a CREATE TRIGGER that did not compile is dropped and raised.

    A raw cursor, because only it exposes ``cursor.warning``. An INVALID
    trigger must not stay: every write to its table would fail (ORA-04098).
    """
    created = _CREATE.match(sql)
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql)
        if created is None:
            return
        name = created.group(1).upper()
        warning = getattr(cursor, "warning", None)
        cursor.execute(engine.text(TRIGGER_ERRORS), {"name": name})
        problem = compile_failure(name, getattr(warning, "full_code", None), list(cursor.fetchall()))
        if problem is None:
            return
        cursor.execute(
            engine.text(SCRIPT_STATEMENTS[f"DROP_{name}"])
        )  # the uninstall script's own DROP TRIGGER IF EXISTS
    finally:
        cursor.close()
    raise DatabaseError(
        f"{problem}; dropped it, since an invalid trigger makes every write to its table fail (ORA-04098)",
        vendor_code=COMPILE_WARNING,
    )


def _oracle_script_statements() -> dict[str, Sql]:
    out: dict[str, Sql] = {}
    for script, pattern, prefix in ((INSTALL_SCRIPT, _CREATE, "CREATE"), (UNINSTALL_SCRIPT, _DROP, "DROP")):
        for sql in split_oracle_script((SQL_ROOT / "oracle" / FOLDER / script).read_text("utf-8")):
            match = pattern.match(sql)
            if match is None:  # pragma: no cover - guarded by tests/test_triggers.py
                raise ValueError(f"unexpected statement in oracle/{FOLDER}/{script}: {sql[:40]!r}")
            out[f"{prefix}_{match.group(1).upper()}"] = Sql(oracle=sql)
    return out


# The Oracle scripts' statements, each as the runner sends it (pinned by the golden tests).
SCRIPT_STATEMENTS: dict[str, Sql] = _oracle_script_statements()
