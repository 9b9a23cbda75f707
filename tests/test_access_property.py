"""The access property: on every read path, what a caller gets equals a plain Python model of the declared policy.

Hypothesis draws, per example: a policy per source (rules owner/group/public,
missing hidden/public), an owner and groups per record, which sources'
permission data failed, and callers (ids, roles, groups). The records are
embedded once per module; each example only re-scopes them
(``Engine.write_access``: no embedding), as an owner, group or ACL change does.

Paths checked on the embedded engine (its in-process vector cache and term
index on, so their masks are exercised, and SQL re-checks them): semantic,
keyword and hybrid search (sets), the structured count (exactly) and list
(as a set), and the record detail view (found, or NOT_FOUND with the one
message a missing record gets). The world, the model and the checks are
tests/access_property_helpers.py's, shared with the Oracle suite's
tests/oracle/test_oracle_access_property.py; the model never calls the
product's predicate or ``record_access``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from access_property_helpers import RECORDS, WORLD, check_every_path, write_synthetic_records
from hypothesis import HealthCheck, given, settings
from model_helpers import link_model

from oracle_rag.config import load_settings
from oracle_rag.engines import RecordAccess
from oracle_rag.system import RagSystem

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


@EXAMPLES
@given(**WORLD)
def test_every_path_returns_exactly_what_the_policy_allows(
    indexed: RagSystem, pols, data, failed, who
) -> None:
    check_every_path(indexed, pols, data, failed, who)


def test_rescoping_is_not_embedding(indexed: RagSystem) -> None:
    calls = indexed.engine.runtime().calls
    with indexed.engine.begin() as conn:
        indexed.engine.write_access(conn, [(t, i, RecordAccess(groups=("g1",))) for t, i in RECORDS])
    assert indexed.engine.runtime().calls == calls
    with indexed.engine.connect() as conn:
        n = conn.execute(sa.text("SELECT COUNT(*) FROM RAG_CHUNK_ACL WHERE PRINCIPAL = 'g1'")).scalar_one()
    assert n == len(RECORDS)
