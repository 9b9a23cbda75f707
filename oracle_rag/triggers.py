"""Optional database triggers that enqueue re-index rows (off by default).

The recommended write path is :func:`oracle_rag.queue.enqueue` (or the ORM
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
from pathlib import Path

import sqlalchemy as sa

from .engines import Engine
from .engines._common import stmt
from .engines.base import SQL_ROOT
from .errors import DatabaseError, wrap_driver_error
from .scripts import split_oracle_script

FOLDER = "triggers"
INSTALL_SCRIPT = "enqueue_triggers.sql"
UNINSTALL_SCRIPT = "drop_enqueue_triggers.sql"

# Which of our triggers exist (names from the install script, upper case).
ORACLE_LIST_TRIGGERS = (
    "SELECT TRIGGER_NAME FROM USER_TRIGGERS WHERE TRIGGER_NAME IN :names ORDER BY TRIGGER_NAME"
)
SQLITE_LIST_TRIGGERS = (
    "SELECT UPPER(name) FROM sqlite_master WHERE type = 'trigger' AND UPPER(name) IN :names ORDER BY 1"
)
_LIST = {"oracle": ORACLE_LIST_TRIGGERS, "sqlite": SQLITE_LIST_TRIGGERS}

_CREATE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+([A-Za-z][A-Za-z0-9_$#]*)", re.I | re.M)
_DROP = re.compile(r"^\s*DROP\s+TRIGGER\s+(?:IF\s+EXISTS\s+)?([A-Za-z][A-Za-z0-9_$#]*)", re.I)

_INSTALL_HINT = ("; the RAG tables and the reference application's tables must exist first "
                 "(`oracle-rag migrate --demo`), and on Oracle the user needs CREATE TRIGGER")


def script_path(engine_name: str, script: str) -> Path:
    return SQL_ROOT / engine_name / FOLDER / script


def _script(engine: Engine, script: str) -> str:
    return script_path(engine.name, script).read_text("utf-8")


def install_statements(engine: Engine) -> list[str]:
    """The statements ``install`` runs, as the engine's splitter cuts them."""
    return engine.split_script(_script(engine, INSTALL_SCRIPT))


def uninstall_statements(engine: Engine) -> list[str]:
    return engine.split_script(_script(engine, UNINSTALL_SCRIPT))


def trigger_names(engine: Engine) -> list[str]:
    """The triggers the install script creates (upper case, in script order)."""
    return [m.group(1).upper() for m in _CREATE.finditer(_script(engine, INSTALL_SCRIPT))]


def installed(engine: Engine) -> list[str]:
    """Which of our triggers exist now (sorted)."""
    with engine.connect() as conn:
        rows = conn.execute(stmt(_LIST[engine.name], ("names",)), {"names": trigger_names(engine)})
        return [str(r[0]).upper() for r in rows]


def install(engine: Engine) -> list[str]:
    """Create (or replace) the enqueue triggers; returns the triggers now installed."""
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
                conn.exec_driver_sql(sql)
            except sa.exc.DBAPIError as exc:
                wrapped = wrap_driver_error(exc, f"{doing} (statement {i} of {len(statements)})")
                raise DatabaseError(wrapped.message + hint, driver_class=wrapped.driver_class,
                                    vendor_code=wrapped.vendor_code) from None


def _oracle_statements() -> dict[str, str]:
    out = {"LIST_TRIGGERS": ORACLE_LIST_TRIGGERS}
    for script, pattern, prefix in ((INSTALL_SCRIPT, _CREATE, "CREATE"), (UNINSTALL_SCRIPT, _DROP, "DROP")):
        for sql in split_oracle_script(script_path("oracle", script).read_text("utf-8")):
            match = pattern.match(sql)
            if match is None:  # pragma: no cover - guarded by tests/test_triggers.py
                raise ValueError(f"unexpected statement in oracle/{FOLDER}/{script}: {sql[:40]!r}")
            out[f"{prefix}_{match.group(1).upper()}"] = sql
    return out


# Every statement sent to Oracle by this module (pinned by the golden tests).
ORACLE_STATEMENTS: dict[str, str] = _oracle_statements()
