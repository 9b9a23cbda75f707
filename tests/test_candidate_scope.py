"""The scope of candidate re-checks and the in-process group masks (issue 23's cost of the predicate).

The re-checks of a few candidate ids use ``engine_sql.SCOPE_OF_IDS`` (the
ACL probed per candidate); the property test (tests/test_access_property.py)
holds every search entry point to the declared policy, so these tests pin
what that does not: the two predicate texts are the same rule, the group
masks follow membership changes, and the keyword statistics are cached per
group set.
"""

from __future__ import annotations

import json

import numpy as np
import sqlalchemy as sa

from oracle_rag.bm25 import analyze_record
from oracle_rag.engines import ChunkWrite, Filters, Scope, content_hash, engine_sql
from oracle_rag.engines.access_mask import NULL, AccessSlots
from oracle_rag.engines.records import RecordAccess, search_binds

DOCS = {
    "1": ("alpha beta", RecordAccess(owner=5)),
    "2": ("alpha gamma", RecordAccess(groups=("ops",))),
    "3": ("alpha delta", RecordAccess(groups=("net", "ops"))),
    "4": ("alpha omega", RecordAccess(public=True)),
    "5": ("alpha kappa", RecordAccess(owner=6, groups=("fin",))),
}


def _fill(rag) -> None:
    engine = rag.engine
    with engine.begin() as conn:
        engine.upsert_chunks(conn, [ChunkWrite("DOC", i, t, content_hash(t), analysis=analyze_record(t), access=a)
                                    for i, (t, a) in DOCS.items()])


SCOPES = [Scope(5, False), Scope(5, False, ("ops",)), Scope(6, False, ("net", "fin")), Scope(7, False, ("none",)),
          Scope(7, True)]


def test_scope_of_ids_is_the_scope_rule(rag):
    """Per candidate id, the probing form lets through exactly what SCOPE does, for every caller."""
    _fill(rag)
    engine = rag.engine
    by_ids = sa.text("SELECT c.SOURCE_ID FROM RAG_CHUNK c WHERE c.CHUNK_ID IN :ids AND "
                     + engine_sql.SCOPE_OF_IDS + " ORDER BY c.SOURCE_ID").bindparams(
        sa.bindparam("ids", expanding=True), sa.bindparam("access_groups", expanding=True))
    whole = sa.text("SELECT c.SOURCE_ID FROM RAG_CHUNK c WHERE " + engine_sql.SCOPE
                    + " ORDER BY c.SOURCE_ID").bindparams(sa.bindparam("access_groups", expanding=True))
    with engine.connect() as conn:
        ids = [int(r[0]) for r in conn.execute(sa.text("SELECT CHUNK_ID FROM RAG_CHUNK"))]
        seen = {}
        for scope in SCOPES:
            binds = search_binds(scope, Filters(), ids=ids)
            got = [r[0] for r in conn.execute(by_ids, binds)]
            assert got == [r[0] for r in conn.execute(whole, scope.binds())]
            seen[scope] = got
    assert seen[SCOPES[0]] == ["1", "4"]
    assert seen[SCOPES[1]] == ["1", "2", "3", "4"]
    assert seen[SCOPES[2]] == ["3", "4", "5"]
    assert seen[SCOPES[3]] == ["4"]
    assert seen[SCOPES[4]] == ["1", "2", "3", "4", "5"]


def test_keyword_statistics_are_cached_per_group_set(rag):
    """N and the total length of the visible set depend on the caller's groups, not only on the id."""
    _fill(rag)
    engine = rag.engine
    with engine.connect() as conn:
        alone, member = Scope(5, False), Scope(5, False, ("ops",))
        assert engine.keyword_stats(conn, alone, Filters(), None).n == 2
        assert engine.keyword_stats(conn, member, Filters(), None).n == 4
        assert engine.keyword_stats(conn, alone, Filters(), None).n == 2


def test_group_masks_follow_membership_changes():
    slots = AccessSlots()
    slots.grow(4)
    slots.set(0, int(NULL), 0, json.dumps(["ops"]))
    slots.set(1, int(NULL), 0, json.dumps(["net"]))
    types, codes = np.zeros(4, dtype=np.int32), {"DOC": 0}
    ops = Scope(9, False, ("ops", "ops"))

    def visible(scope: Scope) -> list[int]:
        return [int(i) for i in np.flatnonzero(slots.visible(4, scope, types, codes, ()))]

    assert visible(ops) == [0]  # the group's slots, now kept as an array
    slots.set(2, int(NULL), 0, json.dumps(["ops", "net"]))
    assert visible(ops) == [0, 2]
    slots.clear(0)
    assert visible(ops) == [2]
    slots.set(2, 9, 0, None)  # re-scoped: owned by the caller, no group
    assert visible(ops) == [2] and visible(Scope(8, False, ("ops",))) == []
    assert visible(Scope(8, False, ("net",))) == [1]
    slots.set(3, int(NULL), 0, json.dumps(["ops"]))
    assert visible(Scope(8, False, ("ops", "net"))) == [1, 3]
