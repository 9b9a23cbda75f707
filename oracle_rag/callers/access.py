"""Callers' roles and groups, as a deployment declares them (docs/access.md).

Who a caller is comes from authentication; what they may read comes from
here:

* roles: the declared ``[access] roles_query`` (``SELECT employee_id, role``),
  else the reference application's ``EMPLOYEE.ROLE`` when that table exists,
  else none;
* groups: the declared ``[access] groups_query`` (``SELECT employee_id,
  group``), else none;
* see-all: any role in ``see_all_roles`` (manager and admin by default).

The two queries run on the read-only, time-limited session SQL-query sources
use (sources/connections.py ``read_session``) and are kept for ``refresh``
(an injected clock decides, so a test controls time). A query that fails
leaves its callers with no roles or groups from it (fail closed: a member
removed from a team must not keep the team's records while the query is
broken); the failure is logged, counted and shown by ``oracle-rag status``.

A deployment without an EMPLOYEE table accepts any employee id (its host
authenticated it); with one, an id missing there is NOT_FOUND, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from oracle_rag.callers.caller import DEFAULT_SEE_ALL_ROLES, Caller, check_role
from oracle_rag.callers.people import people_for
from oracle_rag.config import Settings, duration_seconds
from oracle_rag.engines import Engine
from oracle_rag.engines.per_engine import PerEngine
from oracle_rag.engines.records import check_group
from oracle_rag.engines.statements import Sql, for_connection
from oracle_rag.errors import AccessError, InputError, NotFoundError, RagError
from oracle_rag.sources.connections import read_session
from oracle_rag.sources.sql_query import check_query

log = logging.getLogger("oracle_rag.callers.access")

_LOAD_EMPLOYEE = Sql.both(
    "SELECT EMPLOYEE_ID, FIRST_NAME, LAST_NAME, ROLE FROM EMPLOYEE WHERE EMPLOYEE_ID = :id"
)
QUERY_TIMEOUT_S = 30.0


@dataclass
class DirectoryState:
    """What ``oracle-rag status`` shows about the roles and groups queries."""

    declared: dict[str, bool] = field(default_factory=dict)
    loaded_at: float | None = None
    members: int = 0
    failures: int = 0
    last_error: str | None = None
    skipped_rows: dict[str, int] = field(default_factory=dict)  # per query, in its last read: rows not read


class CallerDirectory:
    """Roles and groups per employee id for one deployment (thread-safe; one per Engine)."""

    def __init__(
        self, settings: Settings | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.see_all_roles: tuple[str, ...] = DEFAULT_SEE_ALL_ROLES
        self.roles_query: str | None = None
        self.groups_query: str | None = None
        self.refresh_s = 300.0
        if settings is not None:
            self.see_all_roles = tuple(check_role(r) for r in settings.see_all_roles.split(","))
            if settings.access_roles_query:
                self.roles_query = check_query(settings.access_roles_query, key="access.roles_query")
            if settings.access_groups_query:
                self.groups_query = check_query(settings.access_groups_query, key="access.groups_query")
            self.refresh_s = duration_seconds(settings.access_refresh) or 300.0
        # reference_app = OFF: an EMPLOYEE table is the host's own, not the reference application's
        self.reads_employee = settings is None or settings.reference_app != "OFF"
        self.clock = clock
        self._lock = threading.Lock()
        self._roles: dict[int, tuple[str, ...]] = {}
        self._groups: dict[int, tuple[str, ...]] = {}
        self._loaded_at: float | None = None
        self._has_employee: bool | None = None
        self.state = DirectoryState(
            declared={
                "roles_query": self.roles_query is not None,
                "groups_query": self.groups_query is not None,
            }
        )

    @property
    def declared(self) -> bool:
        return self.roles_query is not None or self.groups_query is not None

    # -- building callers --------------------------------------------------------------
    def caller(
        self, employee_id: int, roles: Iterable[str] = (), groups: Iterable[Any] = (), name: str = ""
    ) -> Caller:
        """A Caller a host built from its own login, with this deployment's see-all roles."""
        return Caller(employee_id, tuple(roles), tuple(groups), name, see_all_roles=self.see_all_roles)

    def load(self, conn: sa.Connection, employee_id: int) -> Caller:
        """The caller ``employee_id`` with the declared (or EMPLOYEE) roles and the declared groups."""
        if not isinstance(employee_id, int) or isinstance(employee_id, bool):
            raise AccessError("caller employee_id must be an integer")
        name = ""
        roles: tuple[str, ...] = ()
        if self._employee_table(conn):
            row = conn.execute(for_connection(conn, _LOAD_EMPLOYEE), {"id": employee_id}).first()
            if row is None:
                raise NotFoundError(f"employee {employee_id} not found")
            name = f"{row[1]} {row[2]}"
            roles = (str(row[3]),) if row[3] is not None else ()
        if self.declared:
            self.refresh(conn.engine)
            with self._lock:
                if self.roles_query is not None:
                    roles = self._roles.get(employee_id, ())
                groups = self._groups.get(employee_id, ())
        else:
            groups = ()
        return Caller(employee_id, roles, groups, name, see_all_roles=self.see_all_roles)

    def roles_declared(self, conn: sa.Connection) -> bool:
        """Does the deployment give roles (the roles query, or the reference app's EMPLOYEE.ROLE)?"""
        return self.roles_query is not None or self._employee_table(conn)

    def _employee_table(self, conn: sa.Connection) -> bool:
        if not self.reads_employee:
            return False
        if self._has_employee:
            return True
        found = bool(sa.inspect(conn).has_table("employee"))
        self._has_employee = found or None  # a table that appears later (demo seeding) is found then
        return found

    # -- the declared queries ----------------------------------------------------------
    def refresh(self, engine: sa.Engine, *, force: bool = False) -> None:
        """Read the queries again when ``refresh`` has passed since the last read (or ``force``)."""
        now = self.clock()
        with self._lock:
            if not force and self._loaded_at is not None and now - self._loaded_at < self.refresh_s:
                return
            self._loaded_at = now
        roles = self._read(engine, self.roles_query, "roles_query", check_role)
        groups = self._read(engine, self.groups_query, "groups_query", check_group)
        with self._lock:
            self._roles = roles
            self._groups = groups
            self.state.loaded_at = now
            self.state.members = len(set(roles) | set(groups))

    def _read(
        self, engine: sa.Engine, query: str | None, key: str, check: Callable[[Any], str]
    ) -> dict[int, tuple[str, ...]]:
        """The query's values per employee id; {} when the query itself fails (fail closed).

        A row that cannot be read (an id that is not an integer, a value ``check`` refuses) is no
        grant: it is skipped and reported (log, ``oracle-rag status``), and every other row counts,
        so one bad membership row is not an outage for every caller. Values are kept in a dict per
        member (ordered, each once) so a member with tens of thousands of groups costs linear time.
        """
        if query is None:
            return {}
        out: dict[int, dict[str, None]] = {}
        skipped, first_problem = 0, ""
        try:
            with read_session(engine, source=f"access.{key}", timeout_s=QUERY_TIMEOUT_S) as conn:
                for number, row in enumerate(conn.exec_driver_sql(query), 1):
                    if len(row) < 2 or row[0] is None or row[1] is None:
                        continue
                    try:
                        member, value = _member_id(row[0]), check(row[1])
                    except (InputError, AccessError, ValueError, TypeError, OverflowError) as exc:
                        skipped += 1
                        if not first_problem:
                            detail = exc.message if isinstance(exc, RagError) else type(exc).__name__
                            first_problem = f"row {number} is not (employee id, value): {detail}"
                        continue
                    out.setdefault(member, {})[value] = None
        except (RagError, sa.exc.SQLAlchemyError) as exc:
            message = exc.message if isinstance(exc, RagError) else type(exc).__name__
            with self._lock:
                self.state.failures += 1
                self.state.last_error = f"{key}: {message}"
                self.state.skipped_rows[key] = 0
            log.warning(
                "access %s failed (callers get no %s from it until it succeeds): %s",
                key,
                key.split("_")[0],
                message,
            )
            return {}
        with self._lock:
            self.state.skipped_rows[key] = skipped
            self.state.last_error = None
            if skipped:
                self.state.last_error = (
                    f"{key}: {skipped} row(s) skipped (not a grant); first: {first_problem}"
                )
        if skipped:
            log.warning(
                "access %s: %d row(s) skipped, not grants (first: %s); every other row counts",
                key,
                skipped,
                first_problem,
            )
        return {k: tuple(v) for k, v in out.items()}


def _member_id(value: Any) -> int:
    """An employee id from a membership row: an integer, or text or a whole number that is one."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not an employee id")
    if isinstance(value, float | Decimal) and value != int(value):
        raise ValueError("not a whole number")
    return int(value)


_DIRECTORIES: PerEngine[CallerDirectory] = PerEngine(lambda engine: CallerDirectory(engine.settings))
_DEFAULT = CallerDirectory()


def directory_for(engine: Engine | None) -> CallerDirectory:
    """The deployment's directory: one per Engine (its settings), or the reference app's default."""
    return _DEFAULT if engine is None else _DIRECTORIES.get(engine)


def access_status(engine: Engine) -> dict[str, Any]:
    """What ``oracle-rag status`` says about callers' roles and groups in this process.

    A process that has not read the declared queries yet (the ``status`` command itself) reads them
    now, so skipped rows and a failing query show where an operator looks.
    """
    directory = directory_for(engine)
    if directory.declared and directory.state.loaded_at is None:
        directory.refresh(engine.sa_engine)
    state = directory.state
    return {
        "see_all_roles": list(directory.see_all_roles),
        "roles_from": "roles_query" if directory.roles_query else "EMPLOYEE.ROLE (when the table exists)",
        "groups_query": directory.groups_query is not None,
        "query_failures": state.failures,
        "skipped_rows": dict(state.skipped_rows),
        "last_error": state.last_error,
    }


def load_caller(conn: sa.Connection, employee_id: int, engine: Engine | None = None) -> Caller:
    """The caller ``employee_id`` as the deployment declares it (``engine`` brings the settings).

    Without ``engine``: the reference app's EMPLOYEE row and the default see-all roles. With it, a
    caller EMPLOYEE does not name is named by the deployment's people (oracle_rag/callers/people.py).
    """
    caller = directory_for(engine).load(conn, int(employee_id))
    if engine is None or caller.name:
        return caller
    name = people_for(engine).name(caller.employee_id)
    if not name:
        return caller
    return Caller(caller.employee_id, caller.roles, caller.groups, name, see_all_roles=caller.see_all_roles)
