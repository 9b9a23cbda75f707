"""The augmented ONNX file: graph layout, traps, reproducibility, caching.

These tests read the graph itself (not only its outputs) because the traps
they guard against -- tokenizer attributes, the vocabulary source, the input
shape -- are silent: a wrong setting still produces plausible vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest

from oracle_rag.embedding import (
    DEFAULT_MODEL_FILENAME,
    MODEL_DIM,
    EmbeddingRuntime,
    build_model,
    ensure_model,
    model_path_for,
)
from oracle_rag.embedding.build import (
    BUILD_FORMAT,
    CUSTOM_DOMAIN,
    IR_VERSION,
    OPSET,
    read_vocab,
    weights_dir,
)
from oracle_rag.errors import EmbeddingError

FIXTURES = Path(__file__).parent / "fixtures" / "minilm-l6-reference"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def model_proto(model_path: Path) -> onnx.ModelProto:
    return onnx.load(str(model_path))


def _tokenizer_attrs(model: onnx.ModelProto) -> dict[str, object]:
    (node,) = [n for n in model.graph.node if n.op_type == "BertTokenizer"]
    assert node.domain == CUSTOM_DOMAIN
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_graph_interface_is_one_string_in_one_vector_out(model_proto: onnx.ModelProto) -> None:
    (inp,) = model_proto.graph.input
    assert inp.name == "input"
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.STRING
    # Exactly one string: two would be tokenised as a sentence pair.
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim] == [1]
    (out,) = model_proto.graph.output
    assert out.name == "embedding"
    assert out.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [MODEL_DIM]


def test_opsets_and_ir_version_are_pinned(model_proto: onnx.ModelProto) -> None:
    opsets = {o.domain: o.version for o in model_proto.opset_import}
    assert opsets == {"": OPSET, CUSTOM_DOMAIN: 1}
    assert model_proto.ir_version == IR_VERSION
    used_domains = {n.domain for n in model_proto.graph.node}
    assert used_domains == {"", CUSTOM_DOMAIN}
    onnx.checker.check_model(model_proto)


def test_tokenizer_op_attributes_avoid_the_known_traps(model_proto: onnx.ModelProto) -> None:
    attrs = _tokenizer_attrs(model_proto)
    assert attrs["strip_accents"] == 1
    assert attrs["do_lower_case"] == 1
    assert attrs["max_length"] == 256
    # Vocabulary from vocab.txt, byte for byte (tokenizer.json is not used).
    vocab = attrs["vocab_file"]
    assert isinstance(vocab, bytes)
    assert vocab.decode("utf-8") == read_vocab(weights_dir() / "vocab.txt")
    assert len(vocab.decode("utf-8").split("\n")) == 30522


def test_tokenizer_json_really_carries_the_128_trap() -> None:
    """Documents why vocab.txt is used: tokenizer.json truncates and pads at 128."""
    cfg = json.loads((weights_dir() / "tokenizer.json").read_text(encoding="utf-8"))
    assert cfg["truncation"]["max_length"] == 128
    assert cfg["padding"]["strategy"] == {"Fixed": 128}


def test_metadata_records_provenance_without_timestamps(model_proto: onnx.ModelProto) -> None:
    meta = {p.key: p.value for p in model_proto.metadata_props}
    assert meta["oracle_rag.build_format"] == BUILD_FORMAT
    assert meta["oracle_rag.max_length"] == "256"
    assert meta["oracle_rag.dimension"] == "384"
    assert meta["oracle_rag.safetensors_sha256"] == _sha256(weights_dir() / "model.safetensors")
    assert model_proto.producer_version == BUILD_FORMAT
    # Only inputs of the build are recorded: no build time, host or path.
    assert set(meta) == {
        "oracle_rag.build_format",
        "oracle_rag.model",
        "oracle_rag.source_package",
        "oracle_rag.safetensors_sha256",
        "oracle_rag.vocab_sha256",
        "oracle_rag.max_length",
        "oracle_rag.dimension",
        "oracle_rag.pooling",
        "oracle_rag.normalized",
    }
    blob = json.dumps(meta) + model_proto.doc_string + model_proto.producer_name
    assert os.uname().nodename not in blob
    assert str(weights_dir()) not in blob


def test_build_is_reproducible_and_reports_progress(model_path: Path, tmp_path: Path) -> None:
    steps: list[tuple[str, float]] = []
    first = build_model(tmp_path / "a" / "m.onnx", progress=lambda s, f: steps.append((s, f)))
    second = build_model(tmp_path / "b" / "m.onnx")
    assert _sha256(first) == _sha256(second)
    if "ORACLE_RAG_TEST_MODEL" not in os.environ:
        assert _sha256(first) == _sha256(model_path)
    fractions = [f for _, f in steps]
    assert fractions == sorted(fractions)
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(isinstance(s, str) and s for s, _ in steps)
    # Atomic write: no temp files left behind, file readable by others.
    assert sorted(p.name for p in first.parent.iterdir()) == ["m.onnx"]
    assert first.stat().st_mode & 0o044 == 0o044


def test_max_length_is_configurable_and_128_would_cut_long_texts(tmp_path: Path) -> None:
    """A 128-token model disagrees with the reference on long rows: the parity
    test (which needs >= 0.9999 on every row) would catch the tokenizer.json trap."""
    short = build_model(tmp_path / "m128.onnx", max_length=128)
    assert _tokenizer_attrs(onnx.load(str(short)))["max_length"] == 128
    rows = [json.loads(line) for line in (FIXTURES / "texts.jsonl").open(encoding="utf-8")]
    ref = np.load(FIXTURES / "embeddings.npy")
    runtime = EmbeddingRuntime(short)
    long_ids = {"a-071", "a-086", "a-098", "a-111", "a-117"}  # all > 128 tokens
    cos = [float(runtime.embed(r["text"]) @ ref[i]) for i, r in enumerate(rows) if r["id"] in long_ids]
    assert max(cos) < 0.999


@pytest.mark.parametrize("bad", [0, 2, 513, 1000])
def test_max_length_out_of_range_is_refused(tmp_path: Path, bad: int) -> None:
    with pytest.raises(EmbeddingError, match="max_length"):
        build_model(tmp_path / "m.onnx", max_length=bad)


def test_read_vocab_refuses_files_that_would_shift_token_ids(tmp_path: Path) -> None:
    base = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]
    ok = tmp_path / "ok.txt"
    ok.write_text("\n".join(base) + "\n", encoding="utf-8")
    assert read_vocab(ok) == "\n".join(base)
    for name, lines in {
        "empty": [*base[:3], "", *base[3:]],
        "dup": [*base, "a"],
        "padded": [*base, " b"],
        "nounk": [t for t in base if t != "[UNK]"],
    }.items():
        path = tmp_path / f"{name}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(EmbeddingError):
            read_vocab(path)
    with pytest.raises(EmbeddingError, match="cannot read"):
        read_vocab(tmp_path / "missing.txt")


def test_ensure_model_builds_once_and_then_reuses(tmp_path: Path) -> None:
    calls: list[str] = []
    path = ensure_model(tmp_path, progress=lambda s, f: calls.append(s))
    assert path == tmp_path / "models" / DEFAULT_MODEL_FILENAME == model_path_for(tmp_path)
    assert path.is_file() and calls
    mtime = path.stat().st_mtime_ns
    calls.clear()
    assert ensure_model(tmp_path, progress=lambda s, f: calls.append(s)) == path
    assert calls == []
    assert path.stat().st_mtime_ns == mtime


_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from oracle_rag.embedding import ensure_model
    built = []
    ensure_model(Path(sys.argv[1]), progress=lambda s, f: built.append(s))
    print("built" if built else "reused")
    """
)


def test_concurrent_processes_build_one_intact_file(tmp_path: Path, model_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        results.append(out.strip())
    assert sorted(results) == ["built", "reused"]
    models = tmp_path / "models"
    assert not [p.name for p in models.iterdir() if p.name.endswith(".tmp")]
    if "ORACLE_RAG_TEST_MODEL" not in os.environ:
        assert _sha256(models / DEFAULT_MODEL_FILENAME) == _sha256(model_path)
    vec = EmbeddingRuntime(models / DEFAULT_MODEL_FILENAME).embed("intact")
    assert vec.shape == (MODEL_DIM,)


def test_graph_ops_truncate_on_their_own_like_the_tokenizer_attribute(
    tmp_path: Path, model_path: Path
) -> None:
    """Oracle's runtime may ignore the BertTokenizer op's max_length, so the graph cuts
    again after it. A model whose tokenizer op does *not* truncate must give the same vectors, also for a
    4000-byte text (far over 512 word pieces, which would overflow the position table)."""
    from onnx import helper

    from oracle_rag.embedding.build import _load_weights, build_model_proto
    from oracle_rag.engines import embed_text

    vocab = read_vocab(weights_dir() / "vocab.txt")
    proto = build_model_proto(_load_weights(weights_dir()), vocab, tokenizer_truncates=False)
    (node,) = [n for n in proto.graph.node if n.op_type == "BertTokenizer"]
    assert "max_length" not in {a.name for a in node.attribute}
    ops = [n.op_type for n in proto.graph.node]
    first_encoder_op = ops.index("Gather")
    assert ops[:first_encoder_op].count("Slice") == 6 and "Concat" in ops[:first_encoder_op]
    path = tmp_path / "graph-cut.onnx"
    path.write_bytes(proto.SerializeToString())
    graph_cut, standard = EmbeddingRuntime(path), EmbeddingRuntime(model_path)
    long_text = embed_text("sincronización, " * 400)
    assert 3900 < len(long_text.encode("utf-8")) <= 4000
    for text in ("Fix login timeout on the mobile app", "deadline " * 2000, long_text, "a"):
        assert np.array_equal(graph_cut.embed(text), standard.embed(text)), text[:40]
    # and the shipped graph carries both cuts, with the explicit ones right after the tokenizer
    shipped = onnx.load(str(model_path))
    assert _tokenizer_attrs(shipped)["max_length"] == 256
    names = [n.output[0] for n in shipped.graph.node]
    assert names.index("trunc/input_ids") < names.index("input_ids")
    assert (
        helper.get_attribute_value(
            next(n for n in shipped.graph.node if n.output[0] == "trunc/input_ids").attribute[0]
        )
        == 0
    )
