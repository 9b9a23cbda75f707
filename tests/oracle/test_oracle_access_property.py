"""The access property on Oracle: every read path returns exactly what a plain Python model of the policy allows.

The same properties as tests/test_access_property.py (embedded engine), from the
same shared world, model and checks (tests/access_property_helpers.py): Hypothesis
draws a policy per source (rules owner/group/public, missing hidden/public), an
owner and groups per record, which sources' permission data failed, and callers
(ids, roles, groups); each example re-scopes the records (``Engine.write_access``,
no embedding) and, for each caller, checks semantic, keyword and hybrid search
(sets), the structured count (exactly) and list (as a set), and the record detail
view (found, or NOT_FOUND with the one message a missing record gets).

On Oracle every one of those paths is SQL (no in-process index): the semantic
leg's APPROX statement with its EXACT re-run (k = 100 > the 24 records, so the
re-run always decides), the BM25 statement over RAG_CHUNK_TERM, the structured
statements and GET_CHUNK, each with the generated scope predicate and the
caller's groups as binds. The records are embedded once per test, in the
database (VECTOR_EMBEDDING with the session's loaded model), on the schema the
``oracle_system`` fixture migrated (``migrate --demo``: its seeded reference
rows are not indexed, so RAG_CHUNK holds exactly the synthetic records, which
the fixture asserts before any count is trusted). Fewer examples than the
embedded test: each example sends some 35 statements per caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from access_property_helpers import RECORDS, WORLD, check_every_path, write_synthetic_records
from hypothesis import HealthCheck, given, settings

EXAMPLES = settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture
def indexed(oracle_system: Any) -> Iterator[Any]:
    """The fixture's RagSystem with the synthetic records written, and nothing else in RAG_CHUNK."""
    with oracle_system.engine.begin() as conn:
        write_synthetic_records(oracle_system, conn)
    with oracle_system.engine.connect() as conn:
        chunks = {
            (str(r[0]), str(r[1]))
            for r in conn.execute(sa.text("SELECT SOURCE_TYPE, SOURCE_ID FROM RAG_CHUNK WHERE CHUNK_NO = 0"))
        }
    assert chunks == set(RECORDS), (
        "RAG_CHUNK holds records other than the synthetic ones: counts would be off"
    )
    yield oracle_system


@EXAMPLES
@given(**WORLD)
def test_every_path_returns_exactly_what_the_policy_allows_on_oracle(
    indexed: Any, pols, data, failed, who
) -> None:
    check_every_path(indexed, pols, data, failed, who)
