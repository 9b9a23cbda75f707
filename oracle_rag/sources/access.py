"""Who may read a source's records: the access policy a source declares.

A policy is a set of rules, OR-combined:

* ``owner``: the record's owner (the owner column / ``Document.owner_id``);
* ``group``: any member of one of the record's groups (a ``group_column``,
  an ``acl_query`` of ``(row id, group)`` pairs, or ``Document.groups``);
* ``public``: everyone.

A record the rules give nobody (no owner, no group) is ``missing``: hidden
(only see-all callers read it; the default for a source that declares a
policy: fail closed) or public. A source that declares nothing keeps the
rule the product always had (:data:`LEGACY`): its owner, everyone when it
has none.

The policy is applied when a record is written: :func:`record_access` turns
it into the chunk's access columns (engines/records.py ``RecordAccess``), and
one generated predicate (``engines.engine_sql.SCOPE``) reads them on every
path. So a policy change needs no query change, and a change of owner or
groups re-scopes a record without embedding it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oracle_rag.engines.records import RecordAccess, check_group
from oracle_rag.errors import ConfigurationError
from oracle_rag.sources.options import Option

RULES = ("owner", "group", "public")
MISSING = ("hidden", "public")


def check_rules(rules: Iterable[str], key: str) -> tuple[str, ...]:
    out = tuple(rules)
    if not out:
        raise ConfigurationError("an access policy needs at least one of owner, group, public", key=key)
    for rule in out:
        if rule not in RULES:
            raise ConfigurationError(
                f"{key}: unknown rule {rule!r}; expected any of {', '.join(RULES)}", key=key
            )
    return out


def check_missing(missing: str, key: str) -> str:
    if missing not in MISSING:
        raise ConfigurationError(f"{key}: expected hidden or public, got {missing!r}", key=key)
    return missing


@dataclass(frozen=True)
class AccessPolicy:
    """What a source declares: rules (OR-combined) and what a record without owner/group data gets."""

    rules: tuple[str, ...] = ("owner",)
    missing: str = "hidden"

    def __post_init__(self) -> None:
        check_rules(self.rules, "access")
        check_missing(self.missing, "missing_access")

    @property
    def uses_groups(self) -> bool:
        return "group" in self.rules

    def describe(self) -> str:
        rules = " or ".join(self.rules)
        return rules if "public" in self.rules else f"{rules}; without data: {self.missing}"


# The rule of a source that declares none (what every source but TASK had before access was declared).
LEGACY = AccessPolicy(("owner",), "public")
# The reference sources: a task is its assignee's (unassigned: see-all only); sprints and projects
# are everyone's.
OWNER_ONLY = AccessPolicy(("owner",), "hidden")
PUBLIC = AccessPolicy(("public",), "public")


def record_access(policy: AccessPolicy, owner_id: int | None, groups: Iterable[Any] = ()) -> RecordAccess:
    """The access columns of a record with this owner and these groups under ``policy``."""
    if "public" in policy.rules:
        return RecordAccess(owner=None, public=True, groups=())
    owner = owner_id if "owner" in policy.rules else None
    members = tuple(sorted({check_group(g) for g in groups})) if policy.uses_groups else ()
    if owner is None and not members:
        return RecordAccess(owner=None, public=policy.missing == "public", groups=())
    return RecordAccess(owner=owner, public=False, groups=members)


@dataclass(frozen=True)
class SourceAccess:
    """A SQL-query source's access options, validated (``[sources.NAME]`` keys, docs/access.md)."""

    policy: AccessPolicy
    group_column: str | None = None
    acl_query: str | None = None

    def definition(self) -> list[Any]:
        """What goes into the source's definition hash (only when a policy is declared)."""
        return [list(self.policy.rules), self.policy.missing, self.group_column, self.acl_query]


def _rules(value: Any, key: str) -> tuple[str, ...]:
    raw = [value] if isinstance(value, str) else value
    if not isinstance(raw, Sequence) or not raw or not all(isinstance(r, str) for r in raw):
        raise ConfigurationError(f"{key}: a list of owner, group, public", key=key)
    return check_rules(dict.fromkeys(r.strip().lower() for r in raw), key)


def _missing(value: Any, key: str) -> str:
    return check_missing(str(value).strip().lower(), key)


# The access options of a SQL-query source (docs/access.md), part of its
# schema (sql_query.SQL_SOURCE_OPTIONS).
ACCESS_OPTIONS: tuple[Option, ...] = (
    Option(
        "access",
        "custom",
        "who may read a row: its owner, members of its groups, everyone (OR-combined)",
        shown_default="`owner` once any access option is given; else the owner, everyone without one",
        accepts="`owner`, `group`, `public`, or a list of them",
        reader=_rules,
    ),
    Option(
        "group_column",
        "text",
        "the row's group, for the group rule",
        accepts="a column label",
        message="a column label",
    ),
    Option(
        "acl_query",
        "text",
        "each row's groups, for the group rule with many groups per row",
        accepts="a `SELECT` returning (row id, group) pairs",
        message="a SELECT returning (row id, group) pairs",
    ),
    Option(
        "missing_access",
        "custom",
        "what a row with no owner and no group gets",
        shown_default="`hidden`",
        accepts="`hidden` (see-all callers only) or `public`",
        reader=_missing,
    ),
)
ACCESS_OPTION_KEYS = tuple(o.key for o in ACCESS_OPTIONS)


def source_access(given: Mapping[str, Any], prefix: str) -> SourceAccess | None:
    """The access options of a ``[sources.NAME]`` table as read (``read_options`` with
    :data:`ACCESS_OPTIONS`); None when it declares none (LEGACY applies)."""
    declared = {k: given[k] for k in ACCESS_OPTION_KEYS if given.get(k) is not None}
    if not declared:
        return None
    policy = AccessPolicy(declared.get("access", ("owner",)), declared.get("missing_access", "hidden"))
    group_column = declared.get("group_column")
    acl_query = declared.get("acl_query")
    if group_column is not None and acl_query is not None:
        raise ConfigurationError(
            f"{prefix}: give group_column or acl_query, not both", key=f"{prefix}.acl_query"
        )
    if policy.uses_groups and group_column is None and acl_query is None:
        raise ConfigurationError(
            f"{prefix}.access: the group rule needs group_column or acl_query", key=f"{prefix}.access"
        )
    if not policy.uses_groups and (group_column is not None or acl_query is not None):
        which = "group_column" if group_column is not None else "acl_query"
        raise ConfigurationError(
            f'{prefix}.{which}: only meaningful with "group" in access', key=f"{prefix}.{which}"
        )
    return SourceAccess(policy, group_column.strip() if group_column else None, acl_query)
