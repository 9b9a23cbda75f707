"""Issue 23, property: on every read path, what a caller gets equals a plain Python model of the declared policy.

Hypothesis draws, per example: a policy per source (rules owner/group/public,
missing hidden/public), an owner and groups per record, which sources'
permission data failed, and callers (ids, roles, groups). The records are
embedded once per module; each example only re-scopes them
(``Engine.write_access``: no embedding), as an owner, group or ACL change does.

Paths checked on the embedded engine (its in-process vector cache and term
index on, so their masks are exercised, and SQL re-checks them): semantic,
keyword and hybrid search (sets), the structured count (exactly) and list
(as a set), and the record detail view (found, or NOT_FOUND with the one
message a missing record gets). The model below never calls the product's
predicate or ``record_access``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_helpers import link_model

from oracle_rag.answers import answers_sql
from oracle_rag.caller import Caller
from oracle_rag.chat.chunks import chunk_detail
from oracle_rag.config import load_settings
from oracle_rag.engines import RecordAccess
from oracle_rag.errors import NotFoundError
from oracle_rag.record_writes import plan_of, record_write, write_records
from oracle_rag.sources.access import AccessPolicy, record_access
from oracle_rag.system import RagSystem

TYPES = ("ALPHA", "BETA", "GAMMA")
PER_TYPE = 8
GROUPS = ("g1", "g2", "g3", "g4")
RECORDS = [(t, str(i)) for t in TYPES for i in range(1, PER_TYPE + 1)]
WORDS = ["invoice", "printer", "network", "budget", "laptop", "vpn", "mailbox", "contract"]
EXAMPLES = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, model_path) -> Iterator[RagSystem]:
    data = tmp_path_factory.mktemp("access-property")
    link_model(model_path, data)
    rag = RagSystem(load_settings(env={}, data_dir=str(data)))
    rag.migrate()
    with rag.engine.begin() as conn:
        write_synthetic_records(rag, conn)
    yield rag
    rag.close()


def write_synthetic_records(rag: RagSystem, conn: sa.Connection) -> None:
    """Every record of :data:`RECORDS`, indexed (the servers' property test writes the same ones)."""
    plan = plan_of(rag.engine.settings)
    write_records(rag.engine, conn, [
        record_write(plan, t, i, f"[{t} #{i}] zebra {WORDS[int(i) % len(WORDS)]} record {t.lower()} {i}")
        for t, i in RECORDS])


policies = st.builds(
    AccessPolicy,
    st.lists(st.sampled_from(("owner", "group", "public")), min_size=1, max_size=3, unique=True).map(tuple),
    st.sampled_from(("hidden", "public")))
record_data = st.tuples(st.one_of(st.none(), st.integers(1, 5)), st.frozensets(st.sampled_from(GROUPS), max_size=3))
callers = st.builds(
    lambda i, roles, groups: Caller(i, tuple(roles), tuple(sorted(groups)), see_all_roles=("lead",)),
    st.integers(1, 6), st.frozensets(st.sampled_from(("dev", "lead", "ops")), max_size=2),
    st.frozensets(st.sampled_from(GROUPS), max_size=3))


def allowed(policy: AccessPolicy, owner: int | None, groups: frozenset[str], failed: bool, caller: Caller) -> bool:
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


def _apply(rag: RagSystem, pols: dict[str, AccessPolicy], data: dict[tuple[str, str], tuple], failed: set[str]) -> None:
    with rag.engine.begin() as conn:
        rag.engine.write_access(conn, [(t, i, record_access(pols[t], *data[(t, i)])) for t, i in RECORDS])
        for t in TYPES:
            rag.engine.set_access_failure(conn, t, "2026-03-01T00:00:00Z" if t in failed else None)


def _count_and_list(rag: RagSystem, caller: Caller) -> tuple[int, set[tuple[str, str]]]:
    binds = {**caller.scope().binds(), "limit": 1000}
    with rag.engine.connect() as conn:
        count = conn.execute(rag.engine.statement(answers_sql.COUNT_RECORDS), binds).scalar_one()
        rows = conn.execute(rag.engine.statement(answers_sql.LIST_RECORDS), binds).fetchall()
    return int(count), {(str(r[0]), str(r[1])) for r in rows}


@EXAMPLES
@given(pols=st.fixed_dictionaries({t: policies for t in TYPES}),
       data=st.fixed_dictionaries({k: record_data for k in RECORDS}),
       failed=st.frozensets(st.sampled_from(TYPES), max_size=2),
       who=st.lists(callers, min_size=1, max_size=3))
def test_every_path_returns_exactly_what_the_policy_allows(indexed: RagSystem, pols, data, failed, who) -> None:
    rag = indexed
    _apply(rag, pols, data, set(failed))
    retriever = rag.retriever()
    for caller in who:
        want = {k for k in RECORDS if allowed(pols[k[0]], *data[k], k[0] in failed, caller)}
        for mode in ("semantic", "keyword", "hybrid"):
            got = {(h.source_type, h.source_id) for h in retriever.search("zebra record", 100, caller, mode)}
            assert got == want, (mode, caller)
        count, listed = _count_and_list(rag, caller)
        assert count == len(want) and listed == want
        with rag.engine.connect() as conn:
            for key in RECORDS:
                if key in want:
                    assert chunk_detail(conn, rag.engine, caller, *key).source_id == key[1]
                else:
                    with pytest.raises(NotFoundError, match="^NOT_FOUND: record not found$"):
                        chunk_detail(conn, rag.engine, caller, *key)
            with pytest.raises(NotFoundError, match="^NOT_FOUND: record not found$"):
                chunk_detail(conn, rag.engine, caller, "ALPHA", "999")  # missing reads the same


def test_rescoping_is_not_embedding(indexed: RagSystem) -> None:
    calls = indexed.engine.runtime().calls
    with indexed.engine.begin() as conn:
        indexed.engine.write_access(conn, [(t, i, RecordAccess(groups=("g1",))) for t, i in RECORDS])
    assert indexed.engine.runtime().calls == calls
    with indexed.engine.connect() as conn:
        n = conn.execute(sa.text("SELECT COUNT(*) FROM RAG_CHUNK_ACL WHERE PRINCIPAL = 'g1'")).scalar_one()
    assert n == len(RECORDS)
