"""RAG_CHUNK_GROUP (V14) is exactly RAG_CHUNK_ACL joined to RAG_CHUNK, whatever writes either table.

The scope predicate's group test reads the caller's chunk ids from it
(engine_sql.scope_predicate); on SQLite it is a table kept by triggers, so a
row it missed or kept would show or hide a record wrongly. Each step below
changes access (ACL rows, a group column, an owner), the number of chunks of
a record, or deletes records, through the product's own sync and through raw
writes; after each, the table must equal the join and a structured count
(the statement every count answer runs) must equal the declared policy
computed in plain Python (test_access_declared._expected).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from test_access_declared import DOCS, _caller, _exec, _expected, helpdesk  # noqa: F401

from oracle_rag.answering.structured import answers_sql
from oracle_rag.system import RagSystem

JOIN = """SELECT a.PRINCIPAL, c.CHUNK_ID FROM RAG_CHUNK_ACL a
JOIN RAG_CHUNK c ON c.SOURCE_TYPE = a.SOURCE_TYPE AND c.SOURCE_ID = a.SOURCE_ID"""
LONG = " ".join(
    f"Paragraph {i} of the long runbook: restart the concentrator, check the tunnel, "
    "read the logs, call the network team, and write down what happened."
    for i in range(120)
)


def _table_equals_join(rag: RagSystem) -> set[tuple[str, int]]:
    with rag.engine.connect() as conn:
        table = set(conn.execute(sa.text("SELECT PRINCIPAL, CHUNK_ID FROM RAG_CHUNK_GROUP")))
        join = set(conn.execute(sa.text(JOIN)))
    assert table == join
    return table


def _counts_follow_the_policy(rag: RagSystem) -> None:
    for employee_id in (101, 102, 103, 104, 105, 999):
        caller = _caller(rag, employee_id)
        with rag.engine.connect() as conn:
            counted = conn.execute(
                rag.engine.statement(answers_sql.COUNT_RECORDS), caller.scope().binds()
            ).scalar_one()
        if caller.sees_all:  # every record still at its source (_expected lists the fixture's first rows)
            with rag.engine.connect() as conn:
                expected = sum(
                    conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                    for t in ("ticket", "doc", "notice")
                )
        else:
            expected = len(_expected(rag, caller))
        assert counted == expected, employee_id


@pytest.fixture
def desk(helpdesk: RagSystem) -> Iterator[RagSystem]:  # noqa: F811 - the shared fixture, renamed
    yield helpdesk


def test_the_chunk_group_table_follows_every_access_and_chunk_change(desk: RagSystem) -> None:
    first = _table_equals_join(desk)
    assert any(p == "ops" for p, _ in first)  # the fixture has group rows to follow
    _counts_follow_the_policy(desk)

    # Access changes through the sync: a ticket's team, ACL rows added and removed (a re-scope, no rewrite).
    _exec(
        desk,
        "UPDATE ticket SET team = 'net' WHERE id = 3",
        "INSERT INTO doc_acl VALUES (11, 'ops')",
        "DELETE FROM doc_acl WHERE doc_id = 10 AND grp = 'ops'",
        "UPDATE ticket SET owner_id = 104 WHERE id = 2",
    )
    desk.sql_sources().sync()
    _table_equals_join(desk)
    _counts_follow_the_policy(desk)

    # A record grows to several chunks and shrinks back: chunks written and deleted under an ACL.
    _exec(desk, "UPDATE doc SET body = :b WHERE id = 11", b=LONG)
    desk.sql_sources().sync()
    with desk.engine.connect() as conn:
        chunks = conn.execute(
            sa.text("SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_ID = 'docs#11'")
        ).scalar_one()
    assert chunks > 1
    assert len([1 for p, _ in _table_equals_join(desk) if p == "ops"]) >= chunks
    _counts_follow_the_policy(desk)
    _exec(desk, "UPDATE doc SET body = 'Short again. Helpdesk record.' WHERE id = 11")
    desk.sql_sources().sync()
    _table_equals_join(desk)

    # Records deleted at the source, then a whole source dropped.
    _exec(desk, "DELETE FROM doc WHERE id = 10", "DELETE FROM ticket WHERE id = 1")
    desk.sql_sources().sync()
    _table_equals_join(desk)
    _counts_follow_the_policy(desk)
    assert desk.sql_sources().drop("docs") == len(DOCS) - 1
    assert not any(p for p, c in _table_equals_join(desk) if p == "finance")


def test_raw_updates_of_either_table_keep_it_equal_to_the_join(desk: RagSystem) -> None:
    """Writes the product does not make today (keys updated in place) must not break the mirror either."""
    _exec(desk, "UPDATE RAG_CHUNK_ACL SET PRINCIPAL = 'legal' WHERE PRINCIPAL = 'finance'")
    assert any(p == "legal" for p, _ in _table_equals_join(desk))
    _exec(
        desk,
        "UPDATE RAG_CHUNK_ACL SET SOURCE_ID = 'docs#12' WHERE SOURCE_ID = 'docs#10' AND PRINCIPAL = 'net'",
    )
    _table_equals_join(desk)
    _exec(desk, "UPDATE RAG_CHUNK SET SOURCE_ID = 'docs#99' WHERE SOURCE_ID = 'docs#12'")
    _table_equals_join(desk)
    _exec(desk, "UPDATE RAG_CHUNK SET SOURCE_ID = 'docs#12' WHERE SOURCE_ID = 'docs#99'")
    _table_equals_join(desk)
    _exec(
        desk,
        "INSERT INTO RAG_CHUNK (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, CONTENT, EMBEDDING, CONTENT_HASH) "
        "SELECT SOURCE_TYPE, SOURCE_ID, 7, CONTENT, EMBEDDING, CONTENT_HASH FROM RAG_CHUNK "
        "WHERE SOURCE_ID = 'docs#11' AND CHUNK_NO = 0",
    )  # a chunk added under an ACL left as it is
    assert len([1 for p, _ in _table_equals_join(desk) if p == "legal"]) == 2
    _exec(desk, "DELETE FROM RAG_CHUNK WHERE SOURCE_ID = 'docs#11' AND CHUNK_NO = 7")
    _table_equals_join(desk)
    _exec(desk, "DELETE FROM RAG_CHUNK_ACL WHERE SOURCE_TYPE = 'docs'")
    assert not any(p in ("legal", "finance") for p, _ in _table_equals_join(desk))
