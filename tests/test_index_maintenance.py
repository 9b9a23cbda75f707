"""``oracle-rag index rebuild|status`` without Oracle.

What can be decided here is decided here: which rebuild statement a server version and
index type get, how an INDEX_ACCURACY_QUERY report is read, what the status says, and that
the embedded engine (exact, in-process) has nothing to maintain. The Oracle runs are in
tests/oracle/test_oracle_fidelity.py.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from oracle_rag.cli import main
from oracle_rag.engines.oracle import index_sql as q
from oracle_rag.indexing import index_maintenance as im


def test_26ai_rebuilds_ivf_online_and_23ai_through_the_package() -> None:
    assert (
        im.rebuild_statement((23, 26, 0, 0, 0), "IVF_FLAT") == "ALTER INDEX RAG_CHUNK_VEC_IX REBUILD ONLINE"
    )
    assert im.rebuild_statement((23, 26, 3), None) == q.REBUILD_ONLINE.oracle
    assert im.rebuild_statement((23, 9, 0), "IVF_FLAT") == q.REBUILD_PACKAGE.oracle
    assert im.rebuild_statement((23, 4), None) == q.REBUILD_PACKAGE.oracle
    # HNSW: the online reorganisation is documented for IVF only
    assert im.rebuild_statement((23, 26, 1), "INMEMORY_NEIGHBOR_GRAPH_HNSW") == q.REBUILD_PACKAGE.oracle
    assert q.REBUILD_PACKAGE.oracle == "BEGIN DBMS_VECTOR.REBUILD_INDEX(idx_name => 'RAG_CHUNK_VEC_IX'); END;"


def test_every_plan_ends_with_the_package_fallback() -> None:
    """N7: a refused ALTER INDEX (ORA-52401, ORA-51850...) falls back to DBMS_VECTOR.REBUILD_INDEX."""
    for version, subtype, partitions in (
        ((23, 26, 0), "IVF_FLAT", None),
        ((23, 26, 3), None, 64),
        ((23, 9, 0), None, 64),
        ((23, 26, 1), "INMEMORY_NEIGHBOR_GRAPH_HNSW", None),
    ):
        plan = im.rebuild_plan(version, subtype, partitions)
        assert plan[-1] == ("DBMS_VECTOR.REBUILD_INDEX", q.REBUILD_PACKAGE)
        assert len(plan) == (2 if version[:2] >= (23, 26) and "HNSW" not in str(subtype) else 1)


def test_configured_partitions_survive_a_26ai_rebuild() -> None:
    """N8: REBUILD ONLINE recomputes NEIGHBOR PARTITIONS; from 23.26.1 the count is passed again."""
    assert im.rebuild_statement((23, 26, 3), "IVF_FLAT", 64) == (
        "ALTER INDEX RAG_CHUNK_VEC_IX REBUILD PARAMETERS (NEIGHBOR PARTITIONS 64)"
    )
    assert (
        im.rebuild_statement((23, 26, 0), "IVF_FLAT", 64) == q.REBUILD_ONLINE.oracle
    )  # no parameters before .1
    assert im.rebuild_statement((23, 26, 3), "IVF_FLAT", None) == q.REBUILD_ONLINE.oracle
    for bad in (0, -1, q.MAX_PARTITIONS + 1, 2.5):
        with pytest.raises(ValueError):
            q.rebuild_with_partitions(bad)  # type: ignore[arg-type]


def test_accuracy_report_is_read_from_oracles_sentence() -> None:
    status = im.IndexStatus("oracle", chunks=120, target_accuracy=90, top_k=10)
    for text in (
        "Accuracy achieved (100%) is 10% higher than the Target Accuracy requested (90%)",
        "Accuracy achieved (80%) is 10% lower than the Target Accuracy requested (90%)",
    ):
        match = im._ACHIEVED.search(text)  # noqa: SLF001
        assert match is not None
        status.accuracy.append(float(match.group(1)))
    status.probes = 2
    status.indexes = {"RAG_CHUNK_VEC_IX": {"type": "VECTOR", "subtype": "IVF_FLAT", "status": "VALID"}}
    lines = status.lines()
    assert lines[0] == "RAG_CHUNK_VEC_IX: VECTOR IVF_FLAT, VALID"
    assert "never" in lines[2] and "oracle-rag index rebuild" in lines[2]
    assert lines[3] == (
        "accuracy (DBMS_VECTOR.INDEX_ACCURACY_QUERY, top-10 over 2 stored vectors, target 90%): "
        "mean 90.0%, min 80%"
    )


def test_statements_bind_every_value() -> None:
    assert (
        ":qv" in q.ACCURACY_QUERY.oracle
        and ":k" in q.ACCURACY_QUERY.oracle
        and ":target" in q.ACCURACY_QUERY.oracle
    )
    assert "owner_name      => USER" in q.ACCURACY_QUERY.oracle
    assert "TEXT" not in q.INDEX_INFO.oracle  # the Oracle Text index is gone (V9): nothing to optimise
    assert "FOR UPDATE" not in q.ACCURACY_PROBES.oracle


def test_the_embedded_engine_has_nothing_to_maintain(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {"ORACLE_RAG_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    assert runner.invoke(main, ["migrate"], env=env).exit_code == 0
    for args in (["index", "rebuild"], ["index", "status"]):
        res = runner.invoke(main, args, env=env)
        assert res.exit_code == 0 and res.output.strip() == im.EMBEDDED, (args, res.output)
    res = runner.invoke(main, ["index", "status", "--probes", "5000"], env=env)
    assert res.exit_code == 2


def test_slot_2s_index_is_rebuilt_by_its_own_statements() -> None:
    """A generation in slot 2 is searched through RAG_CHUNK_VEC_2_IX: every rebuild path names it."""
    for version, subtype, partitions in (
        ((23, 26, 0), "IVF_FLAT", None),
        ((23, 26, 3), None, 64),
        ((23, 9, 0), None, None),
        ((23, 26, 1), "INMEMORY_NEIGHBOR_GRAPH_HNSW", None),
    ):
        plan = im.rebuild_plan(version, subtype, partitions, slot=2)
        assert plan[-1] == ("DBMS_VECTOR.REBUILD_INDEX", q.REBUILD_PACKAGE_2)
        for _, sql in plan:
            assert "RAG_CHUNK_VEC_2_IX" in (sql.oracle or "") and "RAG_CHUNK_VEC_IX" not in (sql.oracle or "")
    assert im.rebuild_statement((23, 26, 3), "IVF_FLAT", 64, slot=2) == (
        "ALTER INDEX RAG_CHUNK_VEC_2_IX REBUILD PARAMETERS (NEIGHBOR PARTITIONS 64)"
    )
    assert q.REBUILD_ONLINE_2.oracle == "ALTER INDEX RAG_CHUNK_VEC_2_IX REBUILD ONLINE"
    assert (q.rebuild_task(1), q.rebuild_task(2)) == (im.VECTOR_REBUILD, "VECTOR_REBUILD_2")
    assert "'RAG_CHUNK_VEC_IX', 'RAG_CHUNK_VEC_2_IX'" in q.INDEX_INFO.oracle  # status lists both
    assert (
        ":index_name" in q.ACCURACY_QUERY.oracle
        and "{embedding}_GEN = :generation_id" in q.ACCURACY_PROBES.oracle
    )


def test_status_marks_the_searched_index_when_both_exist() -> None:
    status = im.IndexStatus("oracle", chunks=10, searched="RAG_CHUNK_VEC_2_IX")
    status.indexes = {
        "RAG_CHUNK_VEC_IX": {"type": "VECTOR", "subtype": "IVF_FLAT", "status": "VALID"},
        "RAG_CHUNK_VEC_2_IX": {"type": "VECTOR", "subtype": "IVF_FLAT", "status": "VALID"},
    }
    assert status.lines()[:2] == [
        "RAG_CHUNK_VEC_2_IX: VECTOR IVF_FLAT, VALID (searched)",
        "RAG_CHUNK_VEC_IX: VECTOR IVF_FLAT, VALID",
    ]
    assert status.to_dict()["searched"] == "RAG_CHUNK_VEC_2_IX"


def test_the_searched_index_follows_activate_and_rollback(rag) -> None:  # type: ignore[no-untyped-def]
    """The index maintenance acts on comes from the active generation, read from the database."""
    from generation_helpers import ROTATED_NAME, register

    from oracle_rag.indexing import model_switch

    register()
    with rag.engine.connect() as conn:
        assert im.searched_index(rag.engine.active_generation(conn)) == "RAG_CHUNK_VEC_IX"
    model_switch.switch(rag.engine, rag.settings, ROTATED_NAME)
    model_switch.activate(rag.engine)  # no chunks yet: nothing missing
    with rag.engine.connect() as conn:
        assert im.searched_index(rag.engine.active_generation(conn)) == "RAG_CHUNK_VEC_2_IX"
    model_switch.rollback(rag.engine)
    with rag.engine.connect() as conn:
        assert im.searched_index(rag.engine.active_generation(conn)) == "RAG_CHUNK_VEC_IX"
