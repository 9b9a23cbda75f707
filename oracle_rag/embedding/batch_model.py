"""Companion graphs for batched embedding, derived from the augmented model file.

The augmented graph (:mod:`.build`) takes exactly one string per call, which
is what Oracle needs and what it loads; it cannot be changed. To embed many
texts at once, two small companion files sit next to it::

    all-MiniLM-L6-v2.tokenizer.onnx   string[1] -> input_ids, token_type_ids,
                                      attention_mask (int64 [n])
    all-MiniLM-L6-v2.batch.onnx       input_ids, token_type_ids, attention_mask
                                      (int64 [batch, seq], right-padded)
                                      -> embeddings float32 [batch, 384]

Both are derived from the augmented file itself, not rebuilt from the
weights package, so they cannot drift from it:

* the tokenizer graph holds the augmented model's ``BertTokenizer`` node,
  copied byte for byte (same vocabulary, ``strip_accents``, ``max_length``);
* the batch graph is emitted by the same :func:`.build.encoder_pooling` code
  as the augmented graph, and its initializers are *external data pointing
  into the augmented file* (offset and length of each tensor's bytes). It is
  therefore about 200 KB, builds in a fraction of a second, and runs the
  very weights Oracle runs.

The offsets are read from the augmented file's protobuf wire format (a few
lines of varint parsing, below): the ``onnx`` API does not expose where a
tensor's bytes sit in the file. If the augmented file is replaced by one with
a different layout, the offsets go stale; the runtime's probe
(:meth:`.runtime.EmbeddingRuntime.batch_status`) then sees the vectors differ
and falls back to one text per call.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oracle_rag.embedding.build import (
    BUILD_FORMAT,
    CUSTOM_DOMAIN,
    INPUT_NAME,
    IR_VERSION,
    MODEL_DIM,
    OPSET,
    GraphBuilder,
    add_constants,
    atomic_write,
    encoder_pooling,
)
from oracle_rag.errors import EmbeddingError

TOKENIZER_SUFFIX = ".tokenizer.onnx"
BATCH_SUFFIX = ".batch.onnx"
BATCH_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
BATCH_OUTPUT = "embeddings"
TOKENIZER_OUTPUTS = ("tok/input_ids", "tok/token_type_ids", "tok/attention_mask")

# ONNX TensorProto.DataType values the augmented graphs' initializers use (uint8 and int32: the
# multilingual model's packed word table and its nibble arithmetic).
_DTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("<f4"),
    2: np.dtype("u1"),
    6: np.dtype("<i4"),
    7: np.dtype("<i8"),
}
_TOKENIZER_OPS = (b"BertTokenizer", b"SentencepieceTokenizer")


def tokenizer_path_for(model_path: Path) -> Path:
    """``all-MiniLM-L6-v2.onnx`` -> ``all-MiniLM-L6-v2.tokenizer.onnx`` (same folder)."""
    model_path = Path(model_path)
    return model_path.with_name(model_path.stem + TOKENIZER_SUFFIX)


def batch_path_for(model_path: Path) -> Path:
    """``all-MiniLM-L6-v2.onnx`` -> ``all-MiniLM-L6-v2.batch.onnx`` (same folder)."""
    model_path = Path(model_path)
    return model_path.with_name(model_path.stem + BATCH_SUFFIX)


def batch_models_present(model_path: Path) -> bool:
    """Whether both companion files exist (non-empty) next to ``model_path``."""
    return all(
        p.is_file() and p.stat().st_size > 0
        for p in (tokenizer_path_for(model_path), batch_path_for(model_path))
    )


# --------------------------------------------------------------------------- #
# Reading the augmented file's layout (protobuf wire format)
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class _Tensor:
    data_type: int
    dims: tuple[int, ...]
    offset: int  # of the raw bytes, from the start of the file
    length: int


@dataclass(frozen=True)
class Layout:
    initializers: dict[str, _Tensor]
    tokenizer_node: bytes  # serialized NodeProto
    metadata: dict[str, str]


def _varint(buf: bytes | mmap.mmap, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise EmbeddingError("augmented model file is truncated")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes | mmap.mmap, start: int, end: int) -> Any:
    """Yield (field number, wire type, value or (start, end) for length-delimited)."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield field, wire, value
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise EmbeddingError("augmented model file is truncated")
            yield field, wire, (pos, pos + size)
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise EmbeddingError(f"augmented model file has an unknown wire type {wire}")


def read_metadata(path: Path) -> dict[str, str]:
    """The metadata properties of the ONNX file at ``path``, without reading its graph.

    Walks only the top-level fields of ModelProto (metadata_props = 14;
    the graph, field 7, is skipped by its length), over a memory map: a few
    pages of a 150 MB file. An unreadable or foreign file gives what it holds
    (often nothing).
    """
    metadata: dict[str, str] = {}
    with Path(path).open("rb") as handle:
        if handle.seek(0, 2) == 0:
            return metadata
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            for field, wire, value in _fields(buf, 0, len(buf)):
                if field == 14 and wire == 2:
                    entry = {
                        f: bytes(buf[s:e]).decode("utf-8") for f, w, (s, e) in _fields(buf, *value) if w == 2
                    }
                    metadata[entry.get(1, "")] = entry.get(2, "")
    return metadata


def read_layout(buf: bytes) -> Layout:
    """Where each initializer's bytes are, the tokenizer node and the metadata.

    Field numbers from onnx.proto: ModelProto.graph = 7, metadata_props = 14;
    GraphProto.node = 1, initializer = 5; NodeProto.op_type = 4;
    TensorProto.dims = 1, data_type = 2, name = 8, raw_data = 9;
    StringStringEntryProto.key = 1, value = 2.
    """
    tensors: dict[str, _Tensor] = {}
    tokenizer = b""
    metadata: dict[str, str] = {}
    for field, wire, value in _fields(buf, 0, len(buf)):
        if field == 14 and wire == 2:
            entry = {f: bytes(buf[s:e]).decode("utf-8") for f, w, (s, e) in _fields(buf, *value) if w == 2}
            metadata[entry.get(1, "")] = entry.get(2, "")
        if field != 7 or wire != 2:
            continue
        for gfield, gwire, gvalue in _fields(buf, *value):
            if gwire != 2:
                continue
            if gfield == 1:
                for nfield, nwire, nvalue in _fields(buf, *gvalue):
                    if nfield == 4 and nwire == 2 and buf[nvalue[0] : nvalue[1]] in _TOKENIZER_OPS:
                        tokenizer = bytes(buf[gvalue[0] : gvalue[1]])
            elif gfield == 5:
                name, dims, dtype, raw = "", [], 0, None
                for tfield, twire, tvalue in _fields(buf, *gvalue):
                    if tfield == 1 and twire == 0:
                        dims.append(tvalue)
                    elif tfield == 1 and twire == 2:  # packed dims
                        pos, end = tvalue
                        while pos < end:
                            dim, pos = _varint(buf, pos)
                            dims.append(dim)
                    elif tfield == 2 and twire == 0:
                        dtype = tvalue
                    elif tfield == 8 and twire == 2:
                        name = bytes(buf[tvalue[0] : tvalue[1]]).decode("utf-8")
                    elif tfield == 9 and twire == 2:
                        raw = tvalue
                if raw is not None:
                    tensors[name] = _Tensor(dtype, tuple(dims), raw[0], raw[1] - raw[0])
    return Layout(tensors, tokenizer, metadata)


# --------------------------------------------------------------------------- #
# Building the two graphs
# --------------------------------------------------------------------------- #


_INLINE_MAX_BYTES = 1024
"""Tensors up to this size are copied inline: onnxruntime's shape inference
must read small constants (ReduceSum axes, Reshape shapes) at load time and
cannot take them from external data."""


class ExternalGraphBuilder(GraphBuilder):
    """A graph builder whose constants are the augmented file's tensors.

    Large ones become references into that file (location, offset, length);
    small ones are copied from its bytes.
    """

    def __init__(self, buf: bytes, layout: Layout, location: str) -> None:
        super().__init__()
        self._buf = buf
        self._layout = layout
        self._location = location

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import TensorProto

        found = self._layout.initializers.get(name)
        value = np.ascontiguousarray(value)  # as GraphBuilder.const: 0-d becomes [1]
        if found is None or found.dims != tuple(value.shape) or _DTYPES.get(found.data_type) != value.dtype:
            raise EmbeddingError(f"the augmented model's tensor {name} is missing or has another shape")
        if name in self._names:
            raise ValueError(f"duplicate tensor name {name}")
        self._names.add(name)
        tensor = TensorProto()
        tensor.name = name
        tensor.data_type = found.data_type
        tensor.dims.extend(found.dims)
        if found.length <= _INLINE_MAX_BYTES:
            tensor.raw_data = self._buf[found.offset : found.offset + found.length]
            self.initializers.append(tensor)
            return name
        tensor.data_location = TensorProto.EXTERNAL
        for key, val in (
            ("location", self._location),
            ("offset", str(found.offset)),
            ("length", str(found.length)),
        ):
            entry = tensor.external_data.add()
            entry.key = key
            entry.value = val
        self.initializers.append(tensor)
        return name


def weights_view(buf: bytes, layout: Layout) -> dict[str, np.ndarray]:
    """The augmented file's tensors as zero-copy arrays, keyed like the safetensors.

    Linear weights are stored transposed (``<prefix>.weight_t``); the encoder
    code transposes ``<prefix>.weight`` itself, so it gets the view's ``.T``.
    """
    weights: dict[str, np.ndarray] = {}
    for name, t in layout.initializers.items():
        dtype = _DTYPES.get(t.data_type)
        if dtype is None:
            continue
        arr = np.frombuffer(buf, dtype=dtype, count=t.length // dtype.itemsize, offset=t.offset)
        arr = arr.reshape(t.dims)
        if name.endswith(".weight_t"):
            weights[name.removesuffix("_t")] = arr.T
        else:
            weights[name] = arr
    return weights


def _batch_model_proto(buf: bytes, layout: Layout, location: str) -> Any:
    from onnx import TensorProto, helper

    g = ExternalGraphBuilder(buf, layout, location)
    add_constants(g)
    encoder_pooling(g, *BATCH_INPUTS, weights_view(buf, layout), BATCH_OUTPUT)
    batch_axes: list[str | int | None] = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "all_minilm_l6_v2_batched_encoder",
        [helper.make_tensor_value_info(n, TensorProto.INT64, batch_axes) for n in BATCH_INPUTS],
        [helper.make_tensor_value_info(BATCH_OUTPUT, TensorProto.FLOAT, ["batch", MODEL_DIM])],
        initializer=g.initializers,
    )
    return companion_model(
        graph,
        f"all-MiniLM-L6-v2 batched encoder + mean pooling + L2; weights are external data in {location}",
        _fingerprint(layout, location),
    )


def _tokenizer_model_proto(layout: Layout, location: str) -> Any:
    from onnx import NodeProto, TensorProto, helper

    node = NodeProto.FromString(layout.tokenizer_node)
    if list(node.input) != [INPUT_NAME] or tuple(node.output) != TOKENIZER_OUTPUTS:
        raise EmbeddingError("the augmented model's tokenizer node has unexpected inputs or outputs")
    graph = helper.make_graph(
        [node],
        "bert_tokenizer_of_augmented_model",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.STRING, [1])],
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["n"]) for n in TOKENIZER_OUTPUTS],
    )
    return companion_model(
        graph,
        f"the BertTokenizer node of {location}, alone: one string in, token ids out",
        _fingerprint(layout, location),
        tokenizer=True,
    )


def _fingerprint(layout: Layout, location: str) -> dict[str, str]:
    """What ties a companion to its augmented file: that file's build format, name and vocabulary."""
    return derived_metadata(layout, location, BUILD_FORMAT, "oracle_rag.vocab_sha256")


def derived_metadata(layout: Layout, location: str, build_format: str, source_key: str) -> dict[str, str]:
    """A companion's metadata: the build format, the file it is derived from, its ``max_length``
    and ``source_key`` (the hash that names what the augmented file was built from), copied."""
    return {
        "oracle_rag.build_format": build_format,
        "oracle_rag.derived_from": location,
        "oracle_rag.max_length": layout.metadata.get("oracle_rag.max_length", ""),
        source_key: layout.metadata.get(source_key, ""),
    }


def companion_model(graph: Any, doc: str, metadata: dict[str, str], *, tokenizer: bool = False) -> Any:
    """A companion graph as a model: the augmented file's opset and IR version, the build format
    of ``metadata`` as producer version, ``doc`` and the metadata (sorted by key, so the
    serialized bytes are deterministic). A tokenizer graph also imports the custom-op domain."""
    from onnx import helper

    opsets = [helper.make_opsetid("", OPSET)]
    if tokenizer:
        opsets.append(helper.make_opsetid(CUSTOM_DOMAIN, 1))
    model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="oracle-rag",
        producer_version=metadata["oracle_rag.build_format"],
        ir_version=IR_VERSION,
    )
    model.doc_string = doc
    for key, value in sorted(metadata.items()):
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = value
    return model


def without_weights(model: Any) -> Any:
    """A copy whose initializers are graph inputs of the same type, for the checker.

    The checker would open the external data itself, and refuses a data file
    with several hard links (a cache linked into many data directories).
    onnxruntime reads such files fine; it loads the real file at run time.
    """
    from onnx import helper

    copy = type(model)()
    copy.CopyFrom(model)
    inputs = [
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in copy.graph.initializer
    ]
    del copy.graph.initializer[:]
    copy.graph.input.extend(inputs)
    return copy


def build_batch_models(model_path: Path) -> tuple[Path, Path]:
    """Write the tokenizer and batch companions of the augmented file ``model_path``.

    Returns (tokenizer path, batch path). Deterministic: the same augmented
    file gives the same bytes. Raises :class:`EmbeddingError` when the file
    is not an augmented model of this build format (e.g. Oracle's prebuilt
    L12 bundle), since the encoder code would not match its tensors.
    """
    return write_companions(
        model_path, BUILD_FORMAT, "an augmented model", _tokenizer_model_proto, _batch_model_proto
    )


def write_companions(
    model_path: Path,
    build_format: str,
    kind: str,
    tokenizer_model: Callable[[Layout, str], Any],
    batch_model: Callable[[bytes, Layout, str], Any],
) -> tuple[Path, Path]:
    """Read ``model_path``, derive both companions with the two builders, check and write them.

    The one sequence every model's companions follow; ``kind`` names the file
    expected (of ``build_format``) in the error when it is something else.
    """
    import onnx

    model_path = Path(model_path)
    try:
        buf = model_path.read_bytes()
    except OSError as exc:
        raise EmbeddingError(f"cannot read {model_path.name}: {exc.strerror}") from None
    layout = read_layout(buf)
    if layout.metadata.get("oracle_rag.build_format") != build_format or not layout.tokenizer_node:
        raise EmbeddingError(
            f"{model_path.name} is not {kind} of build format {build_format}; "
            "no batched encoder can be derived from it"
        )
    location = model_path.name
    tokenizer = tokenizer_model(layout, location)
    batch = batch_model(buf, layout, location)
    del buf
    try:
        onnx.checker.check_model(tokenizer)
        onnx.checker.check_model(without_weights(batch))
    except onnx.checker.ValidationError as exc:
        raise EmbeddingError(f"derived batch model failed the ONNX checker: {str(exc)[:200]}") from None
    tok_path, batch_path = tokenizer_path_for(model_path), batch_path_for(model_path)
    atomic_write(tok_path, tokenizer.SerializeToString(deterministic=True))
    atomic_write(batch_path, batch.SerializeToString(deterministic=True))
    return tok_path, batch_path
