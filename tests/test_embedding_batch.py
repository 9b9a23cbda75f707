"""The batched embedding path: companion graphs, parity with ``embed``, priming.

Everything runs the real model. The companions are derived from the
session's augmented file in a module-scoped folder; the "broken" companions
below are the real batch graph with a few real ONNX nodes appended, so that
the batched path fails (or disagrees) in one specific, observable way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
import sqlean
from onnx import TensorProto, helper, numpy_helper

import oracle_rag.embedding.runtime as runtime_module
from oracle_rag.embedding import (
    DEFAULT_MODEL_FILENAME,
    EmbeddingRuntime,
    ensure_model,
    prepare_text,
    register,
)
from oracle_rag.embedding.batch_model import (
    BATCH_OUTPUT,
    batch_path_for,
    build_batch_models,
    tokenizer_path_for,
)
from oracle_rag.embedding.build import make_tokenizer_model
from oracle_rag.errors import EmbeddingError

FIXTURES = Path(__file__).parent / "fixtures" / "minilm-l6-reference"
TOLERANCE = 1e-5


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


@pytest.fixture(scope="module")
def cache(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding only the augmented file, as caches made before the batch path."""
    d = tmp_path_factory.mktemp("batch-cache")
    _link(model_path, d / "models" / DEFAULT_MODEL_FILENAME)
    return d


@pytest.fixture(scope="module")
def main_model(cache: Path, model_path: Path) -> Path:
    before = _sha256(model_path)
    path = ensure_model(cache)
    assert _sha256(path) == before  # the file Oracle loads is untouched
    return path


@pytest.fixture(scope="module")
def rt(main_model: Path) -> EmbeddingRuntime:
    runtime = EmbeddingRuntime(main_model)
    assert runtime.batch_status() == "batched"
    return runtime


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], np.ndarray]:
    rows = [json.loads(line) for line in (FIXTURES / "texts.jsonl").open(encoding="utf-8")]
    return [r["text"] for r in rows], np.load(FIXTURES / "embeddings.npy")


# --------------------------------------------------------------------------- #
# Companion files
# --------------------------------------------------------------------------- #


def test_ensure_model_adds_small_companions_to_an_old_cache(main_model: Path) -> None:
    tok, enc = tokenizer_path_for(main_model), batch_path_for(main_model)
    assert tok.name == "all-MiniLM-L6-v2.tokenizer.onnx" and enc.name == "all-MiniLM-L6-v2.batch.onnx"
    # The weights stay in the augmented file (external data), so the companions are small.
    assert tok.stat().st_size < 400_000 and enc.stat().st_size < 200_000
    batch = onnx.load(str(enc), load_external_data=False)
    locations = {e.value for t in batch.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {main_model.name}
    assert [i.name for i in batch.graph.input] == ["input_ids", "token_type_ids", "attention_mask"]
    assert [o.name for o in batch.graph.output] == [BATCH_OUTPUT]


def test_companions_are_deterministic_and_carry_the_same_tokenizer_node(
    main_model: Path, tmp_path: Path
) -> None:
    copy = tmp_path / DEFAULT_MODEL_FILENAME
    _link(main_model, copy)
    build_batch_models(copy)
    for path_for in (tokenizer_path_for, batch_path_for):
        assert path_for(copy).read_bytes() == path_for(main_model).read_bytes()
    augmented = onnx.load(str(main_model))
    (node,) = [n for n in augmented.graph.node if n.op_type == "BertTokenizer"]
    (tok_node,) = onnx.load(str(tokenizer_path_for(main_model))).graph.node
    assert tok_node.SerializeToString() == node.SerializeToString()
    attrs = {a.name: helper.get_attribute_value(a) for a in tok_node.attribute}
    assert attrs["strip_accents"] == 1 and attrs["max_length"] == 256


def test_no_companions_from_a_foreign_model(tmp_path: Path) -> None:
    path = tmp_path / "foreign.onnx"
    onnx.save(make_tokenizer_model(), str(path))
    with pytest.raises(EmbeddingError, match="not an augmented model"):
        build_batch_models(path)
    assert not tokenizer_path_for(path).exists() and not batch_path_for(path).exists()


# --------------------------------------------------------------------------- #
# Parity and shape of the result
# --------------------------------------------------------------------------- #


def test_batch_equals_single_on_the_whole_reference_fixture(
    rt: EmbeddingRuntime, reference: tuple[list[str], np.ndarray]
) -> None:
    texts, ref = reference
    extra = ["ab\x00cd", "abcd", "deadline " * 2000, "deadline " * 300, "lone \udc80 surrogate", "😀🎉"]
    batch = rt.embed_batch(texts + extra)
    single = np.stack([rt.embed(t) for t in texts + extra])
    assert batch.shape == (len(texts) + len(extra), 384) and batch.dtype == np.float32
    assert float(np.abs(batch - single).max()) <= TOLERANCE
    assert float((batch * single).sum(axis=1).min()) >= 0.99999
    assert float((batch[: len(texts)] * ref).sum(axis=1).min()) >= 0.9999
    n = len(texts)
    assert np.array_equal(batch[n], batch[n + 1])  # NUL removed, as in embed
    assert float(np.abs(batch[n + 2] - batch[n + 3]).max()) <= TOLERANCE  # > 512 tokens: cut at 256
    assert "" in texts  # the empty string is part of the fixture


def test_rows_follow_input_order_and_sub_batches_do_not_matter(
    rt: EmbeddingRuntime, reference: tuple[list[str], np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = reference[0][:40]
    shuffled = list(reversed(texts))
    default = rt.embed_batch(texts)
    assert np.array_equal(rt.embed_batch(shuffled), default[::-1])
    monkeypatch.setattr(runtime_module, "SUB_BATCH", 3)
    monkeypatch.setattr(runtime_module, "SUB_BATCH_TOKENS", 10_000)
    monkeypatch.setattr(runtime_module, "MAX_PAD_RATIO", 100.0)  # heavy padding: same vectors
    assert float(np.abs(rt.embed_batch(texts) - default).max()) <= TOLERANCE


def test_groups_respect_all_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_module, "SUB_BATCH", 4)
    monkeypatch.setattr(runtime_module, "SUB_BATCH_TOKENS", 100)
    monkeypatch.setattr(runtime_module, "MAX_PAD_RATIO", 1.5)
    lengths = [5, 60, 10, 30, 7, 7, 8, 9, 200, 3, 6, 6, 6, 6, 6]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups = list(runtime_module._groups(order, lengths))
    assert [i for g in groups for i in g] == order
    for g in groups:
        widths = [lengths[i] for i in g]
        assert len(g) <= 4
        assert len(g) == 1 or len(g) * max(widths) <= 100
        assert max(widths) <= 1.5 * min(widths)
    assert [lengths[i] for i in groups[0]] == [3]  # 5 > 1.5 x 3: a new group
    assert [lengths[i] for i in groups[1]] == [5, 6, 6, 6]  # four at most
    assert groups[-1] == [8]  # longer than the token budget: alone


def test_empty_and_wrong_inputs(rt: EmbeddingRuntime) -> None:
    before = rt.calls
    out = rt.embed_batch([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    with pytest.raises(EmbeddingError, match="not one str"):
        rt.embed_batch("text")
    with pytest.raises(EmbeddingError, match="can only embed str"):
        rt.embed_batch(["ok", 3])  # type: ignore[list-item]
    assert rt.calls == before


def test_calls_count_texts_on_the_batched_path(rt: EmbeddingRuntime) -> None:
    before = rt.calls
    rt.embed_batch(["one", "two", "three"])
    assert rt.calls - before == 3


# --------------------------------------------------------------------------- #
# Broken companions: validation, probe, missing files
# --------------------------------------------------------------------------- #


def _patched_cache(main_model: Path, folder: Path, extra_nodes: list, extra_inits: list) -> Path:
    """A cache whose batch graph ends in ``extra_nodes`` (reading 'pre', writing the output)."""
    model = folder / DEFAULT_MODEL_FILENAME
    _link(main_model, model)
    shutil.copyfile(tokenizer_path_for(main_model), tokenizer_path_for(model))
    batch = onnx.load(str(batch_path_for(main_model)), load_external_data=False)
    for node in batch.graph.node:
        node.output[:] = ["pre" if o == BATCH_OUTPUT else o for o in node.output]
    batch.graph.node.extend(extra_nodes)
    batch.graph.initializer.extend(extra_inits)
    batch_path_for(model).write_bytes(batch.SerializeToString())
    return model


def test_non_finite_batch_output_raises_and_primes_nothing(
    main_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts of 40 tokens or more get divided by zero; the probe texts are shorter."""
    consts = [
        numpy_helper.from_array(np.array([1], dtype=np.int64), "t/one"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "t/two"),
        numpy_helper.from_array(np.array([40], dtype=np.int64), "t/limit"),
    ]
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["t/shape"]),
        helper.make_node("Slice", ["t/shape", "t/one", "t/two"], ["t/seq"]),
        helper.make_node("Less", ["t/seq", "t/limit"], ["t/short"]),
        helper.make_node("Cast", ["t/short"], ["t/den"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["pre", "t/den"], [BATCH_OUTPUT]),
    ]
    rt = EmbeddingRuntime(_patched_cache(main_model, tmp_path, nodes, consts))
    assert rt.batch_status() == "batched"
    long_text = "the nightly backup job failed again " * 10
    ok = rt.embed_batch(["short text"])
    assert float(np.abs(ok[0] - rt.embed("short text")).max()) <= TOLERANCE
    before = rt.calls
    monkeypatch.setattr(runtime_module, "SUB_BATCH", 1)  # one text per run: only the long one fails
    with pytest.raises(EmbeddingError, match="text 1 of the batch: vector has 384 non-finite"):
        rt.embed_batch(["short", long_text])
    assert rt.calls == before + 1  # "short" succeeded in its own run before the failure
    assert rt.prime([long_text]) == [] and rt.memo_len() == 0
    assert rt.calls == before + 1
    assert rt.embed(long_text).shape == (384,)  # the augmented graph still embeds it


def test_probe_disagreement_falls_back_to_the_exact_loop(main_model: Path, tmp_path: Path) -> None:
    nodes = [helper.make_node("Mul", ["pre", "t/scale"], [BATCH_OUTPUT])]
    consts = [numpy_helper.from_array(np.array(1.001, dtype=np.float32), "t/scale")]
    rt = EmbeddingRuntime(_patched_cache(main_model, tmp_path, nodes, consts))
    assert rt.batch_status().startswith("looping: the batched probe differs")
    texts = ["alpha", "a longer text about sprint planning"]
    assert np.array_equal(rt.embed_batch(texts), np.stack([rt.embed(t) for t in texts]))
    assert rt.prime(texts) == []


def test_missing_companions_loop(main_model: Path, tmp_path: Path) -> None:
    model = tmp_path / DEFAULT_MODEL_FILENAME
    _link(main_model, model)
    rt = EmbeddingRuntime(model)
    assert rt.batch_status().startswith("looping: no all-MiniLM-L6-v2.tokenizer.onnx")
    before = rt.calls
    texts = ["x", "y y y"]
    assert np.array_equal(rt.embed_batch(texts), np.stack([rt.embed(t) for t in texts]))
    assert rt.calls - before == 4


# --------------------------------------------------------------------------- #
# Priming and the SQL function
# --------------------------------------------------------------------------- #


def test_prime_counts_each_text_once_and_embed_consumes_it(main_model: Path) -> None:
    rt = EmbeddingRuntime(main_model)
    texts = ["first primed text", "second primed text", "first primed text", "nul\x00here"]
    keys = rt.prime(texts)
    assert keys == ["first primed text", "second primed text", "nulhere"]
    assert rt.calls == 3 and rt.memo_len() == 3
    vec = rt.embed("first primed text")
    assert rt.calls == 3 and rt.memo_hits == 1 and rt.memo_len() == 2
    assert float(np.abs(vec - rt.embed("first primed text")).max()) <= TOLERANCE  # 2nd: the model
    assert rt.calls == 4
    rt.embed("nulhere")  # the key is the prepared text
    assert rt.memo_hits == 2
    rt.forget(keys)
    assert rt.memo_len() == 0


def test_memo_is_bounded_and_primed_forgets_leftovers(main_model: Path) -> None:
    rt = EmbeddingRuntime(main_model, memo_size=4)
    with rt.primed([f"text number {i}" for i in range(10)]):
        assert rt.memo_len() == 4 and rt.calls == 4  # the rest embed one by one later
        rt.embed("text number 0")
        assert rt.memo_len() == 3
    assert rt.memo_len() == 0
    for i in range(3):
        rt.prime([f"round {i} a", f"round {i} b", f"round {i} c"])
        assert rt.memo_len() <= 4
    with pytest.raises(EmbeddingError):
        EmbeddingRuntime(main_model, memo_size=-1)


def test_sql_function_takes_primed_vectors(main_model: Path) -> None:
    rt = EmbeddingRuntime(main_model)
    conn = sqlean.connect(":memory:")
    register(conn, rt)
    text = "Rewrite the billing export"
    rt.prime([text])
    assert rt.calls == 1
    (blob,) = conn.execute("SELECT vector_embedding(?)", (text,)).fetchone()
    assert rt.calls == 1 and rt.memo_hits == 1
    (again,) = conn.execute("SELECT vector_embedding(?)", (text,)).fetchone()
    assert rt.calls == 2  # consumed: the second call runs the augmented graph
    assert float(np.abs(rt.from_blob(blob) - rt.from_blob(again)).max()) <= TOLERANCE
    conn.close()


def test_concurrent_priming_and_embedding_keep_vectors_apart(main_model: Path) -> None:
    rt = EmbeddingRuntime(main_model, threads=1)
    texts_a = [f"worker text {i} about the release" for i in range(12)]
    texts_b = [f"web query {i}" for i in range(12)]
    expected = {t: rt.embed(t) for t in texts_a + texts_b}
    errors: list[str] = []

    def worker() -> None:
        for _ in range(3):
            with rt.primed(texts_a):
                for t in texts_a:
                    if float(np.abs(rt.embed(t) - expected[t]).max()) > TOLERANCE:
                        errors.append(t)

    def web() -> None:
        for _ in range(3):
            for t in texts_b + texts_a[:3]:
                if float(np.abs(rt.embed(t) - expected[t]).max()) > TOLERANCE:
                    errors.append(t)

    threads = [threading.Thread(target=worker), threading.Thread(target=web)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and rt.memo_len() == 0 and rt.memo_hits > 0


def test_embedded_engine_indexes_through_the_batched_path(rag) -> None:
    from oracle_rag.demo.seed import seed

    rt = rag.engine.runtime()
    assert rt.batch_status() == "batched"
    seed(rag.engine, 20)
    rag.backfill()
    before_calls, before_hits = rt.calls, rt.memo_hits
    res = rag.worker().drain()
    assert res.embedded > 20
    assert rt.calls - before_calls == res.embedded  # each text embedded once
    assert rt.memo_hits - before_hits == res.embedded  # ...by the batched path
    assert rt.memo_len() == 0
    with rag.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT CONTENT, EMBEDDING FROM RAG_CHUNK").fetchall()
    assert len(rows) == res.embedded
    for content, blob in rows[:10]:
        single = rt.embed(prepare_text(content))
        assert float(np.abs(rt.from_blob(blob) - single).max()) <= TOLERANCE
