"""The access property, shared by every engine: the world, the plain model, the checks.

What tests/test_access_property.py (embedded engine), tests/oracle/test_oracle_access_property.py
(Oracle) and tests/test_access_property_servers.py (the servers) have in common:

* the records (:data:`RECORDS`: a few of each synthetic type, every one holding "zebra record",
  written once with :func:`write_synthetic_records`);
* Hypothesis's draws (:data:`WORLD`): a policy per source (rules owner/group/public, missing
  hidden/public), an owner and groups per record, which sources' permission data failed, and
  callers (ids, roles, groups; the role "lead" sees all);
* the model, :func:`allowed`: the declared policy read literally, never the product's predicate
  or ``record_access``;
* :func:`apply_access`: an example re-scopes the records (``Engine.write_access``: no embedding)
  as an owner, group or ACL change does;
* :func:`check_every_path`: through the library, the paths every engine has (semantic, keyword
  and hybrid search as sets, the structured count exactly and list as a set, the record detail
  view found or NOT_FOUND with the one message a missing record gets).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from hypothesis import strategies as st

from oracle_rag.answering.chat.chunks import chunk_detail
from oracle_rag.answering.structured import answers_sql
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import NotFoundError
from oracle_rag.indexing.record_writes import record_write, write_records
from oracle_rag.sources.access import AccessPolicy, record_access
from oracle_rag.system import RagSystem
from oracle_rag.text.chunking import plan_of

TYPES = ("ALPHA", "BETA", "GAMMA")
PER_TYPE = 8
GROUPS = ("g1", "g2", "g3", "g4")
RECORDS = [(t, str(i)) for t in TYPES for i in range(1, PER_TYPE + 1)]
WORDS = ["invoice", "printer", "network", "budget", "laptop", "vpn", "mailbox", "contract"]
QUERY = "zebra record"  # every record holds both words: each search path can return every visible one
NOT_FOUND = "^NOT_FOUND: record not found$"


def write_synthetic_records(rag: RagSystem, conn: sa.Connection) -> None:
    """Every record of :data:`RECORDS`, indexed (embedded in the write, as the worker writes them)."""
    plan = plan_of(rag.engine.settings)
    write_records(
        rag.engine,
        conn,
        [
            record_write(plan, t, i, f"[{t} #{i}] zebra {WORDS[int(i) % len(WORDS)]} record {t.lower()} {i}")
            for t, i in RECORDS
        ],
    )


policies = st.builds(
    AccessPolicy,
    st.lists(st.sampled_from(("owner", "group", "public")), min_size=1, max_size=3, unique=True).map(tuple),
    st.sampled_from(("hidden", "public")),
)
record_data = st.tuples(
    st.one_of(st.none(), st.integers(1, 5)), st.frozensets(st.sampled_from(GROUPS), max_size=3)
)
callers = st.builds(
    lambda i, roles, groups: Caller(i, tuple(roles), tuple(sorted(groups)), see_all_roles=("lead",)),
    st.integers(1, 6),
    st.frozensets(st.sampled_from(("dev", "lead", "ops")), max_size=2),
    st.frozensets(st.sampled_from(GROUPS), max_size=3),
)

# One example's world, as ``@given(**WORLD)`` arguments.
WORLD = {
    "pols": st.fixed_dictionaries({t: policies for t in TYPES}),
    "data": st.fixed_dictionaries({k: record_data for k in RECORDS}),
    "failed": st.frozensets(st.sampled_from(TYPES), max_size=2),
    "who": st.lists(callers, min_size=1, max_size=3),
}


def allowed(
    policy: AccessPolicy, owner: int | None, groups: frozenset[str], failed: bool, caller: Caller
) -> bool:
    """The declared policy, read literally."""
    if "lead" in caller.roles:
        return True
    if failed:
        return False
    if "public" in policy.rules:
        return True
    if "owner" in policy.rules and owner is not None and owner == caller.employee_id:
        return True
    if "group" in policy.rules and groups & set(caller.groups):
        return True
    has_data = ("owner" in policy.rules and owner is not None) or ("group" in policy.rules and bool(groups))
    return not has_data and policy.missing == "public"


def wanted(
    pols: dict[str, AccessPolicy],
    data: dict[tuple[str, str], tuple],
    failed: frozenset[str] | set[str],
    caller: Caller,
) -> set[tuple[str, str]]:
    """The records of :data:`RECORDS` the model lets ``caller`` see."""
    return {k for k in RECORDS if allowed(pols[k[0]], *data[k], k[0] in failed, caller)}


def apply_access(
    rag: RagSystem, pols: dict[str, AccessPolicy], data: dict[tuple[str, str], tuple], failed: set[str]
) -> None:
    """Re-scope every record to the example's policies and data, and mark the failed sources."""
    with rag.engine.begin() as conn:
        rag.engine.write_access(conn, [(t, i, record_access(pols[t], *data[(t, i)])) for t, i in RECORDS])
        for t in TYPES:
            rag.engine.set_access_failure(conn, t, "2026-03-01T00:00:00Z" if t in failed else None)


def count_and_list(rag: RagSystem, caller: Caller) -> tuple[int, set[tuple[str, str]]]:
    """The structured answerer's count and list statements, as the caller."""
    binds = {**caller.scope().binds(), "limit": 1000}
    with rag.engine.connect() as conn:
        count = conn.execute(rag.engine.statement(answers_sql.COUNT_RECORDS), binds).scalar_one()
        rows = conn.execute(rag.engine.statement(answers_sql.LIST_RECORDS), binds).fetchall()
    return int(count), {(str(r[0]), str(r[1])) for r in rows}


def check_every_path(
    rag: RagSystem,
    pols: dict[str, AccessPolicy],
    data: dict[tuple[str, str], tuple],
    failed: frozenset[str],
    who: list[Caller],
) -> None:
    """Apply one example's world, then for each caller every library path returns exactly the model's set."""
    apply_access(rag, pols, data, set(failed))
    retriever = rag.retriever()
    for caller in who:
        want = wanted(pols, data, failed, caller)
        for mode in ("semantic", "keyword", "hybrid"):
            got = {(h.source_type, h.source_id) for h in retriever.search(QUERY, 100, caller, mode)}
            assert got == want, (mode, caller)
        count, listed = count_and_list(rag, caller)
        assert count == len(want) and listed == want, caller
        with rag.engine.connect() as conn:
            for key in RECORDS:
                if key in want:
                    assert chunk_detail(conn, rag.engine, caller, *key).source_id == key[1]
                else:
                    with pytest.raises(NotFoundError, match=NOT_FOUND):
                        chunk_detail(conn, rag.engine, caller, *key)
            with pytest.raises(NotFoundError, match=NOT_FOUND):
                chunk_detail(conn, rag.engine, caller, "ALPHA", "999")  # missing reads the same
