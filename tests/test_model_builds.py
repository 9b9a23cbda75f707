"""A cached model file of an earlier build format: kept under the generation whose vectors came from it,
rebuilt for a new generation, and never the graph a generation's queries or fills use unannounced.

The model is ``minilm-signed``: all-MiniLM-L6-v2 with the signs of some of its 384 outputs flipped,
built from the data directory's MiniLM file, a different pattern per build format. Its vectors rank
among themselves as MiniLM's do, and a vector of one build against the other's is noise: so a stored
vector of one build and a query (or fill) of the other would show. The real multilingual-e5-small
build is tested the same way in tests/test_embedding_e5.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from writepath_helpers import set_title

from oracle_rag.callers.caller import Caller
from oracle_rag.embedding import EmbeddingRuntime, catalog, ensure_model
from oracle_rag.embedding.batch_model import read_metadata
from oracle_rag.indexing import model_switch

NAME = "minilm-signed"
ADMIN = Caller(1, "admin")
DIM = 384


def signs(build_format: str) -> np.ndarray:
    seed = sum(build_format.encode())
    return np.random.default_rng(seed).choice([-1.0, 1.0], DIM).astype(np.float32)


def builder(build_format: str):  # noqa: ANN201 - a builder for the catalog entry
    def build(path: Path, progress: object = None) -> Path:
        import onnx
        from onnx import helper, numpy_helper

        from oracle_rag.embedding.build import DEFAULT_MODEL_FILENAME, OUTPUT_NAME, atomic_write

        model = onnx.load(str(path.parent / DEFAULT_MODEL_FILENAME))
        graph = model.graph
        inner = OUTPUT_NAME + "_unsigned"
        for node in graph.node:
            node.output[:] = [inner if o == OUTPUT_NAME else o for o in node.output]
        graph.initializer.append(numpy_helper.from_array(signs(build_format), "build_signs"))
        graph.node.append(helper.make_node("Mul", [inner, "build_signs"], [OUTPUT_NAME]))
        for entry in model.metadata_props:
            if entry.key == "oracle_rag.build_format":
                entry.value = build_format
        atomic_write(path, model.SerializeToString())
        return path

    return build


def declare(monkeypatch: pytest.MonkeyPatch, build_format: str) -> catalog.EmbeddingModel:
    """``minilm-signed`` as a version that builds ``build_format`` declares it."""
    spec = catalog.EmbeddingModel(
        name=NAME,
        title="all-MiniLM-L6-v2, output signs flipped per build (tests)",
        filename="minilm-signed.onnx",
        dim=DIM,
        query_prefix="",
        passage_prefix="",
        source_package="",
        source_module="onnx",
        install="",
        languages="English",
        batched=False,
        builder=builder(build_format),
        oracle_name="MINILM_SIGNED",
        build_format=build_format,
    )
    monkeypatch.setitem(catalog.MODELS, NAME, spec)
    return spec


def fill(rag) -> None:
    worker = rag.worker()
    while not worker.run_once().idle:
        pass


def stored(rag, source_id: str) -> tuple[str, np.ndarray]:
    with rag.engine.connect() as conn:
        content, vector = conn.execute(
            sa.text(
                "SELECT CONTENT, EMBEDDING_2 FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = :i"
            ),
            {"i": source_id},
        ).first()
    return content, np.frombuffer(vector, "<f4")


def generation(rag) -> object:
    with rag.engine.connect() as conn:
        return next(g for g in rag.engine.generations(conn) if g.model_name == NAME)


def test_a_new_generation_rebuilds_a_file_of_an_earlier_build(demo_rag, monkeypatch) -> None:
    rag = demo_rag
    old = declare(monkeypatch, "signed-1")
    path = old.path_in(rag.settings.data_path)
    ensure_model(rag.settings.data_path, model=old)
    old_print = catalog.fingerprint(path)
    new = declare(monkeypatch, "signed-2")
    assert new.stale_format(path) == "signed-1"

    model_switch.switch(rag.engine, rag.settings, NAME)  # no vector of it stored yet: rebuilt

    assert read_metadata(path)["oracle_rag.build_format"] == "signed-2"
    assert generation(rag).fingerprint == catalog.fingerprint(path) != old_print
    fill(rag)
    content, vector = stored(rag, "3")
    assert np.allclose(vector, EmbeddingRuntime(path).embed(content), atol=1e-5)


def test_a_live_generation_keeps_its_file_and_is_told_how_to_move(demo_rag, cli, monkeypatch, caplog) -> None:
    rag = demo_rag
    declare(monkeypatch, "signed-1")
    model_switch.switch(rag.engine, rag.settings, NAME)
    fill(rag)
    model_switch.activate(rag.engine)
    gen = generation(rag)
    path = catalog.get(NAME).path_in(rag.settings.data_path)
    old_runtime = EmbeddingRuntime(path).load()  # opened now: the file is replaced below
    before = rag.retriever().search("login timeout on the mobile app", top_k=8, caller=ADMIN, mode="semantic")

    declare(monkeypatch, "signed-2")  # this version builds another graph
    with caplog.at_level(logging.WARNING, logger="oracle_rag.embedding"):
        assert ensure_model(rag.settings.data_path, model=catalog.get(NAME)) == path
    assert catalog.fingerprint(path) == gen.fingerprint  # not replaced under its vectors
    assert "build signed-1, this version builds signed-2" in caplog.text
    assert f"`oracle-rag model drop {NAME}`, then `oracle-rag model switch --to {NAME}`" in caplog.text
    after = rag.retriever().search("login timeout on the mobile app", top_k=8, caller=ADMIN, mode="semantic")
    assert [(h.source_id, round(h.score, 5)) for h in after] == [
        (h.source_id, round(h.score, 5)) for h in before
    ]

    [line] = model_switch.earlier_builds(rag.engine, rag.settings)
    assert f"{NAME} (generation {gen.generation_id}) runs minilm-signed.onnx of build signed-1" in line
    assert "`oracle-rag model rollback`" in line
    listed = cli("model", "generations")
    assert listed.exit_code == 0 and line in listed.output
    status = cli("status")
    assert f"WARNING: {line}" in status.output

    # The way the line names: back to MiniLM, drop, switch again (a new generation, the new build).
    model_switch.rollback(rag.engine)
    model_switch.drop(rag.engine, NAME)
    model_switch.switch(rag.engine, rag.settings, NAME)
    assert read_metadata(path)["oracle_rag.build_format"] == "signed-2"
    assert generation(rag).fingerprint == catalog.fingerprint(path) != gen.fingerprint
    with rag.engine.begin() as conn:  # a live write embeds both generations
        set_title(conn, 3, "Login timeout on the mobile app, edited")
    fill(rag)
    # This process had the old file open: the fill and the live write used the rebuilt one.
    new_runtime = EmbeddingRuntime(path)
    for source_id in ("3", "4"):
        content, vector = stored(rag, source_id)
        assert np.allclose(vector, new_runtime.embed(content), atol=1e-5)
        assert not np.allclose(vector, old_runtime.embed(content), atol=1e-2)
    assert model_switch.earlier_builds(rag.engine, rag.settings) == []
