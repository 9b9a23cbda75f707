"""Indexer.apply: RAG_CHUNK follows the rendered entities; unchanged text costs nothing."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa
from writepath_helpers import chunk_content, index_mismatches, instrument, set_title, stored_chunks

from oracle_rag.engines import content_hash, embed_text
from oracle_rag.errors import SourceLoadingError
from oracle_rag.sources import TaskSource


def apply(rag, upserts, deletes=()):
    with rag.engine.begin() as conn:
        return rag.indexer.apply(conn, upserts, deletes)


def test_unchanged_entities_make_no_embedding_call(demo_rag):
    rt = instrument(demo_rag)
    res = apply(demo_rag, [("TASK", str(i)) for i in range(1, 51)] + [("SPRINT", "1"), ("PROJECT", "2")])
    assert (res.embedded, res.unchanged, res.deleted) == (0, 52, 0)
    assert rt.calls == 0


def test_changed_text_is_embedded_once_and_stored_exactly(demo_rag):
    rt = instrument(demo_rag)
    with demo_rag.engine.begin() as conn:
        set_title(conn, 7, "Rewrite the billing export", enqueue=False)
    res = apply(demo_rag, [("TASK", "7"), ("TASK", "8")])
    assert (res.embedded, res.unchanged) == (1, 1)
    assert rt.calls == 1 and rt.texts[0].startswith("[TASK #7] Rewrite the billing export\n")
    with demo_rag.engine.connect() as conn:
        expected = TaskSource().load(conn, "7").content
    row = stored_chunks(demo_rag)[("TASK", "7")]
    assert row["content"] == expected and row["hash"] == content_hash(expected)


def test_owner_change_with_identical_text_still_moves_the_scope(demo_rag):
    # A namesake of task 1's assignee: the chunk text does not change, the owner does.
    with demo_rag.engine.begin() as conn:
        first, last, old_owner = conn.execute(
            sa.text(
                "SELECT e.FIRST_NAME, e.LAST_NAME, e.EMPLOYEE_ID FROM TASK t JOIN EMPLOYEE e "
                "ON e.EMPLOYEE_ID = t.ASSIGNEE_ID WHERE t.TASK_ID = 1"
            )
        ).one()
        conn.execute(
            sa.text("INSERT INTO EMPLOYEE VALUES (900, :f, :l, 'developer')"), {"f": first, "l": last}
        )
        conn.execute(sa.text("UPDATE TASK SET ASSIGNEE_ID = 900 WHERE TASK_ID = 1"))
    before = chunk_content(demo_rag, "TASK", 1)
    rt = instrument(demo_rag)
    res = apply(demo_rag, [("TASK", "1")])
    # same text: the scope columns are rewritten, nothing is embedded
    assert (res.embedded, res.rescoped, rt.calls) == (0, 1, 0)
    row = stored_chunks(demo_rag)[("TASK", "1")]
    assert row["content"] == before and row["owner_id"] == 900 != old_owner


def test_missing_entity_loses_its_chunk_and_unknown_ids_are_harmless(demo_rag):
    with demo_rag.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM TASK_COMMENT WHERE TASK_ID = 5"))
        conn.execute(sa.text("DELETE FROM TASK WHERE TASK_ID = 5"))
    res = apply(demo_rag, [("TASK", "5"), ("TASK", "99999"), ("TASK", "not-a-number")])
    assert res.deleted == 1 and res.embedded == 0
    assert chunk_content(demo_rag, "TASK", 5) is None
    res = apply(demo_rag, [], [("TASK", "5"), ("SPRINT", "4")])
    assert res.deleted == 1  # the sprint's chunk; task 5 had none left
    assert chunk_content(demo_rag, "SPRINT", 4) is None


def test_more_ids_than_one_in_list_holds(demo_rag):
    rt = instrument(demo_rag)
    res = apply(demo_rag, [("TASK", str(i)) for i in range(1, 1201)])
    assert (res.unchanged, res.embedded, res.deleted) == (300, 0, 0)
    assert rt.calls == 0


def test_unknown_source_type_is_a_source_error(demo_rag):
    with pytest.raises(SourceLoadingError):
        apply(demo_rag, [("WIDGET", "1")])


def test_work_is_part_of_the_callers_transaction(demo_rag):
    with demo_rag.engine.begin() as conn:
        set_title(conn, 9, "Temporary title", enqueue=False)
    with demo_rag.engine.connect() as conn:
        trans = conn.begin()
        assert demo_rag.indexer.apply(conn, [("TASK", "9")]).embedded == 1
        trans.rollback()
    assert "Temporary title" not in chunk_content(demo_rag, "TASK", 9)


def test_long_text_becomes_chunks_each_embedded_whole(demo_rag):
    long_description = "ñandú " * 1500  # 10,500 bytes of UTF-8, far past the model's 256 wordpieces
    with demo_rag.engine.begin() as conn:
        conn.execute(sa.text("UPDATE TASK SET DESCRIPTION = :d WHERE TASK_ID = 3"), {"d": long_description})
    apply(demo_rag, [("TASK", "3")])
    with demo_rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT CHUNK_NO, CONTENT, EMBEDDING, CONTENT_HASH FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' "
                "AND SOURCE_ID = '3' ORDER BY CHUNK_NO"
            )
        ).fetchall()
        rendered = TaskSource().load(conn, "3").content
    assert [r[0] for r in rows] == list(range(len(rows))) and len(rows) > 5
    assert len({r[3] for r in rows}) == 1  # one record hash on every chunk
    assert rows[0][1].startswith("[TASK #3]") and rendered.rstrip().endswith(rows[-1][1])
    runtime = demo_rag.engine.runtime()
    for _, content, blob, _ in rows:
        assert embed_text(content) == content  # every window fits the embedding input whole
        assert float(np.dot(np.frombuffer(blob, dtype="<f4"), runtime.embed(content))) > 0.99999


def test_demo_template_is_in_step(demo_rag):
    assert index_mismatches(demo_rag) == []
