"""Who is asking: the identity every read is scoped to.

A Caller is created by authentication (the web layer's ``caller_loader``,
an API token, or the CLI's ``--as`` for operators), never from a request
field. Its role decides the scope predicate the engines put in SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from .engines import Scope
from .engines.statements import Sql, for_connection
from .errors import AccessError, NotFoundError

ROLES = ("developer", "manager", "admin")
_LOAD_EMPLOYEE = Sql.both("SELECT EMPLOYEE_ID, FIRST_NAME, LAST_NAME, ROLE FROM EMPLOYEE WHERE EMPLOYEE_ID = :id")


@dataclass(frozen=True)
class Caller:
    employee_id: int
    role: str
    name: str = ""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise AccessError(f"unknown role {self.role!r}; expected one of {', '.join(ROLES)}")
        if not isinstance(self.employee_id, int) or isinstance(self.employee_id, bool):
            raise AccessError("caller employee_id must be an integer")

    @property
    def sees_all(self) -> bool:
        return self.role in ("manager", "admin")

    def scope(self) -> Scope:
        return Scope(caller_id=self.employee_id, see_all=self.sees_all)


def require_caller(caller: object) -> Caller:
    if not isinstance(caller, Caller):
        raise AccessError("no authenticated caller: every read needs one")
    return caller


def load_caller(conn: sa.Connection, employee_id: int) -> Caller:
    """The reference application's employee as a Caller (role from EMPLOYEE.ROLE)."""
    row = conn.execute(for_connection(conn, _LOAD_EMPLOYEE), {"id": int(employee_id)}).first()
    if row is None:
        raise NotFoundError(f"employee {int(employee_id)} not found")
    return Caller(int(row[0]), str(row[3]), f"{row[1]} {row[2]}")
