"""The one generator of the access predicate: the scope rule as SQL, for every form of the caller.

Every read statement (``engine_sql.SCOPE``, ``SCOPE_OF_IDS``), the guarded
aggregate views (``guarded_scope_sql``) and the Oracle VPD policies
(``oracle_vpd_sql``) take their predicate from :func:`scope_predicate`;
they differ only in how the caller is given (binds, the guarded session's
row, the application context) and how the group test finds the row's ACL
entries. So the rule is written once and a change of it cannot make two
paths, or Oracle's two walls, disagree.
"""

from __future__ import annotations

from typing import NamedTuple

# The access scope: ONE predicate over the chunk row for every read on
# both engines (search, answers, chat detail, citations). Callers with see-all
# (``see_all_roles``) read everything; everyone else reads, unless the
# chunk's source could not read its permission data (RAG_ACCESS_FAILURE:
# fail closed), the chunks that are public, that they own through the owner
# rule, or whose record carries one of their groups (RAG_CHUNK_ACL). The
# access columns are written from each source's declared policy
# (sources/access.py), so no source type or rule is named here.
# ``:access_groups`` is the caller's groups, an expanding bind padded to a
# power of two (records.padded_groups). The group test reads the caller's
# chunk ids from RAG_CHUNK_GROUP (V14: RAG_CHUNK_ACL joined to RAG_CHUNK on
# the record key; a table kept equal to that join by triggers on SQLite, read
# by its primary key, and a view of the join on Oracle), then one integer
# probe per row. Where it sits decides what Oracle can do with it:
# * "chunks": a non-correlated IN inside the rule's OR. SQLite reads the
#   subquery once per statement into an ephemeral index; Oracle does not
#   unnest a subquery under a disjunction (unless OR-expansion fires), so it
#   runs it as a FILTER, once per row (a RAG_CHUNK probe plus an ACL probe per
#   padded group), which is right only for a few rows;
# * "joined": the same sets as outer joins in the FROM clause
#   (:func:`scope_join`: the failed sources, and the caller's DISTINCT group
#   chunks) and the predicate tests the joined columns. An outer join is a
#   join whatever the optimizer picks (hash: the group chunks read once;
#   nested loops: probes it costed as cheaper), never a FILTER, and it keeps
#   one row per chunk (RAG_ACCESS_FAILURE's key is SOURCE_TYPE, the group
#   chunks are DISTINCT). Oracle's whole-table statements use it; the
#   documentation lists subqueries with set operators among those the
#   optimizer does not unnest, which is why the branches are not a UNION ALL
#   inside the predicate.
# Measured at 100k chunks, 1,000 groups, a caller in 20 (bench/access_scope.py):
# a structured count's CPU time over the owner-only scope's went from 1.37x
# (the join written in the statement, re-run by every statement) to 1.15x;
# a (SOURCE_TYPE, SOURCE_ID) row-value IN took ~5x the join's time and a
# correlated EXISTS ~55x.


class CallerSql(NamedTuple):
    """The caller as three SQL expressions: what the scope predicate compares the row with.

    ``groups`` is what follows ``PRINCIPAL IN``: an expanding bind or a
    parenthesised subquery. Binds in every read statement (``BINDS``); the
    guarded session's row in the aggregate views (``guarded_scope_sql``);
    the application context in the VPD policies (``oracle_vpd_sql``).
    """

    caller_id: str
    see_all: str
    groups: str


BINDS = CallerSql(":caller_id", ":see_all", ":access_groups")
# How the group test finds the row's ACL entries (the same rule each way):
# "chunks": one non-correlated IN over CHUNK_IDs (the caller's rows of RAG_CHUNK_GROUP, read once
#   per statement by SQLite): SCOPE, every statement on SQLite and Oracle's key-bounded ones;
# "joined": the columns of scope_join's outer joins (the failed source, the caller's group chunk):
#   SCOPE_JOINED, Oracle's statements over the whole table (no FILTER over the ACL);
# "probe": an EXISTS probe of RAG_CHUNK_ACL's primary key per row (SCOPE_OF_IDS);
# "records": a non-correlated row-value IN of (SOURCE_TYPE, SOURCE_ID): the VPD policy on RAG_CHUNK,
#   whose predicate must not read RAG_CHUNK itself (a policy predicate that reads its own table is a
#   circular policy, DIA-28108).
GROUP_TESTS = ("chunks", "joined", "probe", "records")


def scope_predicate(chunk: str = "c", caller: CallerSql = BINDS, *, group_test: str = "chunks") -> str:
    """The scope rule over the chunk row ``chunk``, the caller given as SQL expressions.

    The one generator of the access predicate: every read statement uses it
    with binds (``SCOPE``); the guarded aggregate views with the caller read
    from the guarded session (``guarded_scope_sql``); the Oracle VPD policies
    with the caller read from the application context (``oracle_vpd_sql``).
    ``chunk`` is the row's alias, or ``""`` for the row's own columns
    unqualified (a VPD predicate is the WHERE clause of a view over the one
    table, with no alias to name). ``group_test``: one of ``GROUP_TESTS``.
    """
    if group_test not in GROUP_TESTS:
        raise ValueError(f"group_test must be one of {GROUP_TESTS}")
    if group_test == "probe" and not chunk:
        raise ValueError("the per-row probe correlates on the row's alias: name it")
    if group_test == "joined" and not chunk:
        raise ValueError("the joined group test reads the joins of the row's alias: name it")
    row = f"{chunk}." if chunk else ""
    members = principal_in("scope_a.PRINCIPAL", caller.groups)
    if group_test == "joined":
        return (
            f"({caller.see_all} = 1 OR (scope_f.SOURCE_TYPE IS NULL AND ({row}ACCESS_PUBLIC = 1 "
            f"OR {row}ACCESS_OWNER = {caller.caller_id} OR scope_m.CHUNK_ID IS NOT NULL)))"
        )
    if group_test == "probe":
        group = (
            f"EXISTS (SELECT 1 FROM RAG_CHUNK_ACL scope_a WHERE {members} "
            f"AND scope_a.SOURCE_TYPE = {row}SOURCE_TYPE AND scope_a.SOURCE_ID = {row}SOURCE_ID)"
        )
    elif group_test == "records":
        group = (
            f"({row}SOURCE_TYPE, {row}SOURCE_ID) IN (SELECT scope_a.SOURCE_TYPE, scope_a.SOURCE_ID "
            f"FROM RAG_CHUNK_ACL scope_a WHERE {members})"
        )
    else:
        group = (
            f"{row}CHUNK_ID IN (SELECT scope_g.CHUNK_ID FROM RAG_CHUNK_GROUP scope_g "
            f"WHERE {principal_in('scope_g.PRINCIPAL', caller.groups)})"
        )
    return (
        f"({caller.see_all} = 1 OR ({row}SOURCE_TYPE NOT IN "
        f"(SELECT scope_f.SOURCE_TYPE FROM RAG_ACCESS_FAILURE scope_f) "
        f"AND ({row}ACCESS_PUBLIC = 1 OR {row}ACCESS_OWNER = {caller.caller_id} OR {group})))"
    )


def scope_join(chunk: str = "c", caller: CallerSql = BINDS, *, group_chunks: str | None = None) -> str:
    """The FROM-clause half of the joined group test: what ``scope_predicate(group_test="joined")`` reads.

    Follows the row's table in a FROM clause: the row's source among the
    failed ones (``scope_f``, at most one: SOURCE_TYPE is RAG_ACCESS_FAILURE's
    key) and the row's chunk among the caller's group chunks (``scope_m``,
    DISTINCT: a chunk in two of the caller's groups is one row), both outer
    joins, so the row stays once and the predicate decides. A see-all caller's
    group chunks are not read (``see_all = 0`` in the subquery).
    ``group_chunks`` names a query name holding :func:`group_chunks` instead
    of the inline subquery (a statement joining it more than once).
    """
    source = group_chunks or f"({group_chunk_ids(caller)})"
    return (
        f"LEFT JOIN RAG_ACCESS_FAILURE scope_f ON scope_f.SOURCE_TYPE = {chunk}.SOURCE_TYPE "
        f"LEFT JOIN {source} scope_m ON scope_m.CHUNK_ID = {chunk}.CHUNK_ID"
    )


def group_chunk_ids(caller: CallerSql = BINDS) -> str:
    """The caller's group chunks, each once (none for a see-all caller): the joined group test's set."""
    return (
        f"SELECT DISTINCT scope_g.CHUNK_ID FROM RAG_CHUNK_GROUP scope_g "
        f"WHERE {caller.see_all} = 0 AND {principal_in('scope_g.PRINCIPAL', caller.groups)}"
    )


def principal_in(principal: str, groups: str) -> str:
    """The group test's membership half: the principal ``principal`` is one of the caller's groups."""
    return f"{principal} IN {groups}"


def acl_predicate(caller: CallerSql) -> str:
    """The ACL rows a caller may read (the RAG_CHUNK_ACL policy): all with see-all, else its groups' rows."""
    return f"({caller.see_all} = 1 OR {principal_in('PRINCIPAL', caller.groups)})"
