"""EmbeddingRuntime, vector validation, blobs and the SQLite function.

All inference is real (onnxruntime on the built model); the small broken
models below are real ONNX files too, made to fail in one specific way.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import sqlean
import sqlite_vec
from onnx import TensorProto, helper, numpy_helper

from oracle_rag.embedding import (
    MODEL_DIM,
    EmbeddingRuntime,
    embedding_errors,
    from_blob,
    last_error,
    register,
    to_blob,
    validate_vector,
)
from oracle_rag.embedding.build import IR_VERSION, OPSET, make_tokenizer_model
from oracle_rag.errors import EmbeddingError


@pytest.fixture(scope="module")
def runtime(model_path: Path) -> EmbeddingRuntime:
    return EmbeddingRuntime(model_path).load()


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def _constant_model(path: Path, values: np.ndarray, *, dynamic_input: bool = False) -> Path:
    """An 'augmented-looking' model (string 'input' -> 'embedding') returning ``values``."""
    nodes = [
        helper.make_node(
            "Constant", [], ["embedding"], value=numpy_helper.from_array(values.astype(np.float32))
        )
    ]
    shape: list[int | None] = [None] if dynamic_input else [1]
    graph = helper.make_graph(
        nodes,
        "const",
        [helper.make_tensor_value_info("input", TensorProto.STRING, shape)],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, list(values.shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    return _save(model, path)


# --------------------------------------------------------------------------- #
# embed / embed_batch
# --------------------------------------------------------------------------- #


def test_embed_returns_normalised_float32_vector(runtime: EmbeddingRuntime) -> None:
    vec = runtime.embed("Review the quarterly budget before Friday")
    assert vec.shape == (MODEL_DIM,)
    assert vec.dtype == np.float32
    assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5


def test_embed_is_deterministic_and_meaningful(runtime: EmbeddingRuntime) -> None:
    a = runtime.embed("The invoice is overdue")
    assert np.array_equal(a, runtime.embed("The invoice is overdue"))
    close = float(a @ runtime.embed("The bill has not been paid yet"))
    far = float(a @ runtime.embed("A cat sleeps on the warm windowsill"))
    assert close > far + 0.2


def test_embed_batch_equals_embed_one_by_one(runtime: EmbeddingRuntime) -> None:
    texts = ["alpha", "", "Hélène écrit", "deadline " * 400, "alpha", "x\ty\nz"]
    batch = runtime.embed_batch(texts)
    assert batch.shape == (len(texts), MODEL_DIM) and batch.dtype == np.float32
    for row, text in zip(batch, texts, strict=True):
        assert np.array_equal(row, runtime.embed(text))
    assert runtime.embed_batch([]).shape == (0, MODEL_DIM)


def test_sentence_pair_trap_graph_refuses_two_strings(runtime: EmbeddingRuntime) -> None:
    """Two strings in one call would be one sentence-pair embedding: the input shape forbids it."""
    with pytest.raises(Exception, match="(?i)dimension"):
        runtime.session.run(["embedding"], {"input": np.array(["a", "b"], dtype=object)})
    a, b = runtime.embed_batch(["meeting notes", "grocery list"])
    assert np.array_equal(a, runtime.embed("meeting notes"))
    assert float(a @ b) < 0.99


def test_embed_batch_rejects_a_bare_string(runtime: EmbeddingRuntime) -> None:
    with pytest.raises(EmbeddingError, match="sequence"):
        runtime.embed_batch("abc")


def test_embed_rejects_non_str(runtime: EmbeddingRuntime) -> None:
    with pytest.raises(EmbeddingError, match="str"):
        runtime.embed(b"bytes")  # type: ignore[arg-type]


def test_calls_counts_texts(runtime: EmbeddingRuntime) -> None:
    before = runtime.calls
    runtime.embed("one")
    runtime.embed_batch(["two", "three", "four"])
    assert runtime.calls - before == 4


def test_nul_is_removed_not_truncating(runtime: EmbeddingRuntime) -> None:
    """The op stops at NUL; we drop NUL like Hugging Face's normaliser does."""
    assert np.array_equal(runtime.embed("ab\x00cd"), runtime.embed("abcd"))
    assert not np.array_equal(runtime.embed("ab\x00cd"), runtime.embed("ab"))
    assert np.array_equal(runtime.embed("\x00deadline"), runtime.embed("deadline"))


def test_lone_surrogates_are_dropped(runtime: EmbeddingRuntime) -> None:
    assert np.array_equal(runtime.embed("ab\ud800cd"), runtime.embed("abcd"))


def test_thread_safe_concurrent_embedding(model_path: Path) -> None:
    rt = EmbeddingRuntime(model_path, threads=1)
    texts = [f"task {i}: fix the login page" for i in range(24)]
    expected = {t: EmbeddingRuntime(model_path, threads=1).embed(t) for t in texts[:3]}
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(k, len(texts), 4):
                results[i] = rt.embed(texts[i])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert rt.calls == len(texts)
    for i, text in enumerate(texts[:3]):
        assert np.array_equal(results[i], expected[text])


def test_runtime_never_imports_pytorch(model_path: Path) -> None:
    """onnxruntime_extensions' package __init__ pulls in transformers and torch
    when installed (~660 MB RSS); the runtime must only load its library."""
    code = (
        "import sys; from pathlib import Path; "
        "from oracle_rag.embedding import EmbeddingRuntime; "
        f"v = EmbeddingRuntime(Path({str(model_path)!r})).embed('x'); "
        "print(sorted(m for m in ('torch', 'transformers', 'onnxruntime_extensions', 'onnx') "
        "if m in sys.modules), v.shape)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[] (384,)"


def test_threads_default_to_cpu_count(model_path: Path) -> None:
    import os

    assert EmbeddingRuntime(model_path).threads == (os.cpu_count() or 1)
    with pytest.raises(EmbeddingError, match="threads"):
        EmbeddingRuntime(model_path, threads=0)


# --------------------------------------------------------------------------- #
# Broken model files
# --------------------------------------------------------------------------- #


def test_missing_model_file_is_reported_lazily(tmp_path: Path) -> None:
    rt = EmbeddingRuntime(tmp_path / "nope.onnx")  # constructing is free
    with pytest.raises(EmbeddingError, match="not found") as info:
        rt.embed("x")
    assert "nope.onnx" in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_corrupt_model_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(b"\x00\xffthis is not a protobuf" * 100)
    with pytest.raises(EmbeddingError, match="cannot load embedding model corrupt.onnx"):
        EmbeddingRuntime(path).embed("x")


def test_truncated_model_file(tmp_path: Path, model_path: Path) -> None:
    path = tmp_path / "truncated.onnx"
    with model_path.open("rb") as src:
        path.write_bytes(src.read(2_000_000))
    with pytest.raises(EmbeddingError, match="truncated.onnx"):
        EmbeddingRuntime(path).embed("x")


def test_model_without_the_augmented_interface(tmp_path: Path) -> None:
    path = _save(make_tokenizer_model(), tmp_path / "tokenizer-only.onnx")
    with pytest.raises(EmbeddingError, match="not an augmented embedding model"):
        EmbeddingRuntime(path).embed("x")


def test_onnxruntime_failure_during_run(tmp_path: Path) -> None:
    """A graph that fails only at run time (reshape 10 values to the input's shape)."""
    nodes = [
        helper.make_node("Shape", ["input"], ["shape"]),
        helper.make_node("Reshape", ["ten", "shape"], ["embedding"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fails",
        [helper.make_tensor_value_info("input", TensorProto.STRING, [None])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [None])],
        initializer=[numpy_helper.from_array(np.ones(10, dtype=np.float32), "ten")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    path = _save(model, tmp_path / "fails.onnx")
    with pytest.raises(EmbeddingError, match="onnxruntime failed .* fails.onnx") as info:
        EmbeddingRuntime(path).embed("x")
    assert "Traceback" not in str(info.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (np.full(MODEL_DIM, np.nan), "NaN"),
        (np.full(MODEL_DIM, np.inf), "infinite"),
        (np.zeros(MODEL_DIM), "zero norm"),
        (np.ones(10), "10 components"),
    ],
)
def test_runtime_validates_every_output(tmp_path: Path, values: np.ndarray, message: str) -> None:
    rt = EmbeddingRuntime(_constant_model(tmp_path / "const.onnx", values))
    with pytest.raises(EmbeddingError, match=message):
        rt.embed("x")
    assert rt.calls == 0


# --------------------------------------------------------------------------- #
# validate_vector / blobs
# --------------------------------------------------------------------------- #


def test_validate_vector_accepts_and_converts() -> None:
    vec = validate_vector([1, 2, 3], dim=3)
    assert vec.dtype == np.float32 and vec.tolist() == [1.0, 2.0, 3.0]
    assert validate_vector(np.ones((1, 4), dtype=np.float64), dim=4).shape == (4,)


@pytest.mark.parametrize(
    ("vec", "message"),
    [
        ([1.0, float("nan"), 0.0], "NaN at index 1"),
        ([1.0, 0.0, float("-inf")], "infinite at index 2"),
        ([0.0, 0.0, 0.0], "zero norm"),
        ([1.0, 2.0], "2 components, expected 3"),
        ([1.0, 2.0, 3.0, 4.0], "4 components, expected 3"),
        (np.ones((2, 3)), "shape"),
        (["a", "b", "c"], "non-numeric"),
        ([[1.0], [2.0, 3.0]], "array-like|non-numeric"),
    ],
)
def test_validate_vector_refuses(vec: object, message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        validate_vector(vec, dim=3)


def test_blob_round_trip_is_little_endian_float32(runtime: EmbeddingRuntime) -> None:
    vec = runtime.embed("blob")
    blob = runtime.to_blob(vec)
    assert isinstance(blob, bytes) and len(blob) == MODEL_DIM * 4
    assert blob == np.asarray(vec, dtype="<f4").tobytes()
    assert np.array_equal(runtime.from_blob(blob), vec)
    assert np.array_equal(from_blob(memoryview(to_blob(vec))), vec)


def test_blob_errors() -> None:
    with pytest.raises(EmbeddingError, match="1532 bytes, expected 1536"):
        from_blob(b"\x00" * 1532)
    with pytest.raises(EmbeddingError, match="zero norm"):
        from_blob(b"\x00" * 1536)
    with pytest.raises(EmbeddingError, match="bytes"):
        from_blob("text")  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError, match="NaN"):
        to_blob(np.full(MODEL_DIM, np.nan))


# --------------------------------------------------------------------------- #
# SQLite function
# --------------------------------------------------------------------------- #


@pytest.fixture()
def conn(runtime: EmbeddingRuntime) -> Iterator[Any]:
    connection = sqlean.connect(":memory:")
    connection.enable_load_extension(True)
    sqlite_vec.load(connection)
    connection.enable_load_extension(False)
    register(connection, runtime)
    yield connection
    connection.close()


def test_sqlite_vector_embedding_with_sqlite_vec(conn: Any, runtime: EmbeddingRuntime) -> None:
    (dist,) = conn.execute(
        "SELECT vec_distance_cosine(vector_embedding('a'), vector_embedding('a'))"
    ).fetchone()
    assert abs(dist) < 1e-6
    (blob, length) = conn.execute(
        "SELECT vector_embedding(?), vec_length(vector_embedding(?))", ("hello", "hello")
    ).fetchone()
    assert length == MODEL_DIM
    assert blob == runtime.to_blob(runtime.embed("hello"))
    (far,) = conn.execute(
        "SELECT vec_distance_cosine(vector_embedding('invoice overdue'), vector_embedding('cat nap'))"
    ).fetchone()
    assert far > 0.3


def test_sqlite_null_and_non_text_arguments(conn: Any, runtime: EmbeddingRuntime) -> None:
    assert conn.execute("SELECT vector_embedding(NULL)").fetchone() == (None,)
    (blob,) = conn.execute("SELECT vector_embedding(42)").fetchone()
    assert blob == runtime.to_blob(runtime.embed("42"))
    (blob,) = conn.execute("SELECT vector_embedding(CAST('abc' AS BLOB))").fetchone()
    assert blob == runtime.to_blob(runtime.embed("abc"))


def test_sqlite_function_is_deterministic(conn: Any) -> None:
    # SQLite only accepts deterministic functions in expression indexes.
    conn.execute("CREATE TABLE t (txt TEXT)")
    conn.execute("CREATE INDEX t_vec ON t (vector_embedding(txt))")


def test_sqlite_errors_surface_with_the_embedding_message(tmp_path: Path) -> None:
    connection = sqlean.connect(":memory:")
    register(connection, EmbeddingRuntime(tmp_path / "missing.onnx"))
    with pytest.raises(sqlean.OperationalError):
        connection.execute("SELECT vector_embedding('x')").fetchone()
    recorded = last_error()
    assert recorded is not None and "missing.onnx" in str(recorded)
    with pytest.raises(EmbeddingError, match="not found.*missing.onnx") as info:
        with embedding_errors():
            connection.execute("SELECT vector_embedding('x')").fetchone()
    assert isinstance(info.value.__cause__, sqlean.OperationalError)
    # Unrelated SQL errors pass through unchanged.
    with pytest.raises(sqlean.OperationalError, match="no such table"):
        with embedding_errors():
            connection.execute("SELECT * FROM nowhere")
    connection.close()


def test_sqlite_bad_blob_argument(conn: Any) -> None:
    with pytest.raises(EmbeddingError, match="not UTF-8"):
        with embedding_errors():
            conn.execute("SELECT vector_embedding(X'FFFE')").fetchone()
