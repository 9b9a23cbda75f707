"""A model switch on Oracle: two models loaded under their own names, the fill, the flip, the rollback.

The second model is tests/generation_helpers.py's ``minilm-rotated`` (MiniLM with its outputs
permuted), loaded with ``DBMS_VECTOR.LOAD_ONNX_MODEL`` as MINILM_ROTATED beside the configured MiniLM.
While it fills, an edit is written by the MERGE with both ``VECTOR_EMBEDDING`` calls; the fill
(FILL_PICK under SKIP LOCKED, STORE_FILLED embedding in SQL) gives every other chunk its vector; the
flip builds RAG_CHUNK_VEC_2_IX first. Exact searches rank identically under either generation, and
every EMBEDDING_2 is the permuted EMBEDDING of its row: a statement comparing the two models' vectors
could not give either. Marked ``oracle`` (conftest.py); skipped without a database.
"""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa
from generation_helpers import ROTATED_NAME, register, rotate
from oracle_helpers import drop_model

from oracle_rag.callers.caller import Caller
from oracle_rag.embedding import ensure_model
from oracle_rag.errors import InputError
from oracle_rag.indexing import index_maintenance, model_switch

QUESTIONS = ["login timeout on the mobile app", "SSO with Azure AD", "slow dashboard queries"]
MANAGER = Caller(3, "manager")


def _rankings(rag):  # type: ignore[no-untyped-def]
    retriever = rag.retriever()
    return {
        q: [
            (h.source_type, h.source_id, round(h.score, 4))
            for h in retriever.search(q, top_k=8, caller=MANAGER, exact=True)
        ]
        for q in QUESTIONS
    }


def _models(engine) -> set[str]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return {r[0] for r in conn.execute(sa.text("SELECT MODEL_NAME FROM USER_MINING_MODELS"))}


def test_two_models_fill_flip_rollback_drop(oracle_system) -> None:  # type: ignore[no-untyped-def]
    rag = oracle_system
    register()
    ensure_model(rag.settings.data_path)  # the rotated file is built from MiniLM's, next to it
    drop_model(rag.engine, "MINILM_ROTATED")
    rag.backfill()
    rag.worker().drain()
    before = _rankings(rag)
    try:
        assert "minilm-rotated in slot 2" in model_switch.switch(rag.engine, rag.settings, ROTATED_NAME)
        assert {"MINILM_ROTATED", rag.engine.model} <= _models(rag.engine)  # two models loaded
        with pytest.raises(InputError, match="lacks vectors for"):
            model_switch.activate(rag.engine)
        with rag.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE TASK SET TITLE = 'Rotate the gateway signing keys' WHERE TASK_ID = 5")
            )
            rag.enqueue(conn, "TASK", 5)
        worker = rag.worker()
        assert worker.run_once().picked == 1  # the queue first: the edit gets both vectors in its MERGE
        with rag.engine.connect() as conn:
            stamps = conn.execute(
                sa.text(
                    "SELECT EMBEDDING_GEN, EMBEDDING_2_GEN FROM RAG_CHUNK "
                    "WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = '5'"
                )
            ).all()
        assert stamps and all(tuple(s) == (1, 2) for s in stamps)
        while not worker.run_once().idle:
            pass
        assert model_switch.switch_progress(rag.engine)["done"] is True
        before = _rankings(rag)  # task 5 changed: the reference is taken after the edit
        assert "RAG_CHUNK_VEC_2_IX" in model_switch.activate(rag.engine)
        with rag.engine.connect() as conn:
            assert (
                conn.execute(
                    sa.text("SELECT COUNT(*) FROM USER_INDEXES WHERE INDEX_NAME = 'RAG_CHUNK_VEC_2_IX'")
                ).scalar_one()
                == 1
            )
            rows = conn.execute(sa.text("SELECT EMBEDDING, EMBEDDING_2 FROM RAG_CHUNK")).all()
        # Index maintenance follows the active generation: slot 2's index is rebuilt and measured.
        status = index_maintenance.status(rag.engine, probes=5, top_k=5)
        assert set(status.indexes) == {"RAG_CHUNK_VEC_IX", "RAG_CHUNK_VEC_2_IX"}
        assert (
            status.searched == "RAG_CHUNK_VEC_2_IX" and status.last_rebuild is not None
        )  # recorded by activate
        assert status.probes > 0, status.reports
        assert index_maintenance.rebuild(rag.engine).startswith("rebuilt RAG_CHUNK_VEC_2_IX on ")
        assert index_maintenance.rebuild_if_due(rag.engine).endswith("not due")
        for first, second in rows:
            assert np.allclose(
                rotate(np.asarray(first, dtype=np.float32)), np.asarray(second, dtype=np.float32), atol=1e-5
            )
        assert _rankings(rag) == before
        assert "rolled back" in model_switch.rollback(rag.engine)
        assert _rankings(rag) == before
        assert "dropped minilm-rotated" in model_switch.drop(rag.engine, ROTATED_NAME)
        assert "MINILM_ROTATED" not in _models(rag.engine)
    finally:
        drop_model(rag.engine, "MINILM_ROTATED")
