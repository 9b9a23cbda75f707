"""Who is asking: the identity every read is scoped to.

A Caller is created by authentication (the web layer's ``caller_loader``,
an API token, the CLI's ``--as`` for operators, or a host application's own
login: ``Caller(employee_id, roles, groups)``), never from a request field.
Its roles decide whether it sees everything (``see_all_roles``, from the
``[access]`` configuration; manager and admin by default), its groups which
group-scoped records it reads; the engines turn both into the one scope
predicate (``engines.engine_sql.SCOPE``). Roles and groups come from the
deployment (oracle_rag/callers/access.py: EMPLOYEE.ROLE in the reference app, or the
declared ``roles_query`` / ``groups_query``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from oracle_rag.engines import Scope
from oracle_rag.engines.records import check_group
from oracle_rag.errors import AccessError, InputError

# The reference application's roles (EMPLOYEE.ROLE); a deployment may use any others.
ROLES = ("developer", "manager", "admin")
DEFAULT_SEE_ALL_ROLES = ("manager", "admin")
_ROLE_MAX = 64


def check_role(value: Any) -> str:
    """A role as compared: text of 1..64 characters without control characters, case as given."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value.strip()) > _ROLE_MAX
        or any(ord(ch) < 32 for ch in value)
    ):
        raise AccessError(f"a role must be 1 to {_ROLE_MAX} characters of text, got {value!r}")
    return value.strip()


def _texts(values: Any, check: Any) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str | int) and not isinstance(values, bool):
        values = (values,)
    return tuple(dict.fromkeys(check(v) for v in values))


class Caller:
    """An authenticated caller: ``employee_id``, ``roles``, ``groups`` and a display ``name``.

    Immutable and hashable. ``see_all_roles`` is the deployment's list of
    roles that read everything; the loaders fill it from the settings (a
    host building a Caller itself passes it, or gets the default manager/admin).
    ``role=`` is accepted for a single role (the reference app's one role).
    """

    __slots__ = ("employee_id", "groups", "name", "roles", "see_all_roles")
    employee_id: int
    roles: tuple[str, ...]
    groups: tuple[str, ...]
    name: str
    see_all_roles: tuple[str, ...]

    def __init__(
        self,
        employee_id: int,
        roles: Iterable[str] | str = (),
        groups: Iterable[Any] = (),
        name: str = "",
        *,
        role: str | None = None,
        see_all_roles: Iterable[str] = DEFAULT_SEE_ALL_ROLES,
    ) -> None:
        if not isinstance(employee_id, int) or isinstance(employee_id, bool):
            raise AccessError("caller employee_id must be an integer")
        if role is not None:
            if roles:
                raise AccessError("give roles or role, not both")
            roles = (role,)
        try:
            member_of = _texts(groups, check_group)
        except InputError as exc:
            raise AccessError(exc.message) from None
        object.__setattr__(self, "employee_id", employee_id)
        object.__setattr__(self, "roles", _texts(roles, check_role))
        object.__setattr__(self, "groups", member_of)
        object.__setattr__(self, "name", str(name or ""))
        object.__setattr__(self, "see_all_roles", _texts(see_all_roles, check_role))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Caller is immutable")

    def _key(self) -> tuple[Any, ...]:
        return (self.employee_id, self.roles, self.groups, self.name, self.see_all_roles)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Caller) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Caller(employee_id={self.employee_id}, roles={list(self.roles)}, "
            f"groups={len(self.groups)}, sees_all={self.sees_all})"
        )

    @property
    def role(self) -> str:
        """The first role ('' for none): what single-role displays show."""
        return self.roles[0] if self.roles else ""

    @property
    def sees_all(self) -> bool:
        return any(r in self.see_all_roles for r in self.roles)

    def scope(self) -> Scope:
        return Scope(caller_id=self.employee_id, see_all=self.sees_all, groups=self.groups)


def require_caller(caller: object) -> Caller:
    if not isinstance(caller, Caller):
        raise AccessError("no authenticated caller: every read needs one")
    return caller
