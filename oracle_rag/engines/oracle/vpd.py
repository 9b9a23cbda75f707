"""The VPD access context on the Oracle engine's pooled connections (``access_vpd``).

``oracle-rag provision --vpd`` (engines/oracle/vpd_sql.py) puts a VPD policy
on RAG_CHUNK and RAG_CHUNK_ACL that reads the caller from the application
context ``RAG_ACCESS_CTX``, and a session with no context reads nothing. So
with ``access_vpd = true`` every pooled connection of the schema owner is
given a context by the schema-owned package, through three hooks:

* pool ``checkout``: ``SET_SYSTEM``: the product's own work (the writer,
  the worker, the source refresh, the statements that apply ``SCOPE``
  themselves) reads every row, as without VPD;
* ``before_cursor_execute``: a statement that carries the scope binds
  (``:caller_id``, ``:see_all``, ``:access_groups``: every read of
  ``engine_sql.SCOPE``) first sets ``SET_CALLER`` with that caller's id,
  see-all and groups (a JSON array, the padding removed), so the database
  applies the same rule a second time; the context stays the caller's for
  the rest of that checkout (what else runs on the connection then is
  the caller's too) and is set again only when the scope changes;
* pool ``checkin``: ``CLEAR_CALLER``: a connection goes back to the pool
  with no caller in it (and the next checkout sets ``SET_SYSTEM``).

The context calls run on a separate DBAPI cursor of the same connection,
before the statement's own cursor executes. Not run against Oracle here:
tests/test_oracle_golden.py pins the calls :func:`context_call` makes
(docs/oracle-reference.md says what was verified where).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from oracle_rag.engines.oracle import vpd_sql as vpd
from oracle_rag.engines.records import NO_GROUP
from oracle_rag.errors import ConfigurationError

log = logging.getLogger("oracle_rag.engines.oracle.vpd")

# connection_record.info key: which context the session holds now ("system", or the caller's key).
_INFO_KEY = "rag_access_ctx"
SYSTEM = ("system",)
_EXPANDED = re.compile(r"access_groups_\d+")


def context_call(parameters: Any) -> tuple[Any, dict[str, Any]] | None:
    """The context a statement with these binds needs: ``(key, SET_CALLER binds)``, or None (not scoped).

    ``key`` identifies the caller (id, see-all, groups) so an unchanged scope
    is not set twice on one checkout.
    """
    if not isinstance(parameters, Mapping) or "see_all" not in parameters or "caller_id" not in parameters:
        return None
    raw = parameters.get("access_groups")
    if raw is None:  # after SQLAlchemy expanded the list: access_groups_1, access_groups_2, ...
        raw = [v for k, v in parameters.items() if _EXPANDED.fullmatch(str(k))]
    groups = sorted({str(g) for g in raw if g != NO_GROUP})
    see_all = 1 if parameters["see_all"] in (1, True) else 0
    caller_id = parameters["caller_id"]
    binds = {
        "caller_id": caller_id,
        "see_all": see_all,
        "groups": json.dumps(groups, ensure_ascii=False, separators=(",", ":")),
    }
    return (caller_id, see_all, tuple(groups)), binds


def _call(dbapi_connection: Any, text: str, binds: Mapping[str, Any] | None = None) -> None:
    cursor = dbapi_connection.cursor()
    try:
        if binds and "groups" in binds and type(cursor).__module__.split(".")[0] == "oracledb":
            import oracledb  # SET_CALLER's p_groups is a CLOB: a str bind stops at 32,767 bytes in PL/SQL

            cursor.setinputsizes(groups=oracledb.DB_TYPE_CLOB)
        cursor.execute(text, dict(binds or {}))
    finally:
        cursor.close()


NOT_PROVISIONED = (
    "access_vpd is set but this schema has no RAG_ACCESS_CTX_PKG yet: sessions run without an access "
    "context until `oracle-rag provision --vpd` creates it (no policy exists before it does)"
)
# How Oracle says a called package does not exist (or is invalid): PLS-00201 "identifier ... must be
# declared" under ORA-06550, ORA-04067 "not executed, ... does not exist", ORA-04063 "has errors".
_MISSING_PACKAGE = re.compile(r"PLS-00201|ORA-04067|ORA-04063")
# connection_record.info value: this checkout found no package (no context calls until the next checkout).
NO_PACKAGE = ("no package",)


CONTEXT_TAKEN = (
    "the application context RAG_ACCESS_CTX is bound to another schema's package (ORA-01031 from "
    "this schema's SET_SYSTEM: one namespace per database, and another schema ran `provision --vpd`); "
    "a DBA must DROP CONTEXT RAG_ACCESS_CTX, then run `oracle-rag provision --vpd` here again "
    "(docs/access.md)"
)


def context_taken(exc: BaseException) -> bool:
    """True when SET_SYSTEM was refused ORA-01031: the namespace names another schema's package."""
    return "ORA-01031" in str(getattr(exc, "orig", None) or exc)


def package_missing(exc: BaseException) -> bool:
    """True when a context call failed because RAG_ACCESS_CTX_PKG does not exist (or does not compile)."""
    text = str(getattr(exc, "orig", None) or exc)
    return bool(_MISSING_PACKAGE.search(text)) and "RAG_ACCESS_CTX_PKG" in text.upper()


def install_vpd_context(engine: sa.Engine, render: Any) -> None:
    """Register the checkout / scoped-statement / checkin hooks on ``engine`` (``render``: Sql -> text)."""
    set_system, set_caller, clear = render(vpd.SET_SYSTEM), render(vpd.SET_CALLER), render(vpd.CLEAR_CALLER)
    told: list[bool] = []  # the missing package is logged once per engine, not per checkout

    @sa.event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        # access_vpd is set before `provision --vpd` (docs/access.md): until the package exists there is
        # no policy either, so a session without a context reads as without VPD. Each checkout tries
        # again, so the first one after provisioning has the context; the product's own work refuses a
        # session that has policies but no context (OracleEngine.require_system_access).
        try:
            _call(dbapi_connection, set_system)
        except Exception as exc:
            if context_taken(exc):
                raise ConfigurationError(CONTEXT_TAKEN, key="access_vpd") from None
            if not package_missing(exc):
                raise
            if not told:
                told.append(True)
                log.warning(NOT_PROVISIONED)
            record.info[_INFO_KEY] = NO_PACKAGE
            return
        record.info[_INFO_KEY] = SYSTEM

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _on_statement(
        conn: sa.Connection, _cursor: Any, _statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        # The binds by name (the driver-level ``parameters`` are positional on SQLite).
        compiled = getattr(context, "compiled_parameters", None)
        call = None if executemany else context_call(compiled[0] if compiled else parameters)
        if call is None:
            return
        key, binds = call
        info = conn.connection.info  # the pool entry's info: lives as long as the DBAPI connection
        if info.get(_INFO_KEY) not in (key, NO_PACKAGE):
            _call(conn.connection.dbapi_connection, set_caller, binds)
            info[_INFO_KEY] = key

    @sa.event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_connection: Any, record: Any) -> None:
        held = record.info.pop(_INFO_KEY, None)
        # None: the connection was invalidated (closed, nothing to clear); no package: nothing was set
        if dbapi_connection is not None and held != NO_PACKAGE:
            _call(dbapi_connection, clear)
