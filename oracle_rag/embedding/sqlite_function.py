"""``vector_embedding(text)`` as a SQLite scalar function.

It mirrors Oracle's ``VECTOR_EMBEDDING(model USING text AS data)`` so that the
SQLite engine can embed inside SQL too, e.g.::

    SELECT id FROM chunks
    ORDER BY vec_distance_cosine(embedding, vector_embedding(:q)) LIMIT 8

The result is a float32 little-endian BLOB, the format sqlite-vec reads.

Batched writes: the function embeds one text per call, as SQL evaluates it
row by row. It goes through ``runtime.embed``, which first consults the
runtime's primed memo (exact match on the prepared text, see
:meth:`~oracle_rag.embedding.EmbeddingRuntime.prime`): the SQLite engine
primes it with a whole write batch, embedded by the batched encoder, just
before executing the upsert, so the statement stays the same as Oracle's
while the model runs once per batch. Going through ``embed`` (rather than
reading the memo here) keeps wrappers that count or time ``embed`` correct.

Error messages: Python's ``sqlite3`` module (and ``sqlean``, which shares its
code) replaces any exception raised in a user function with the fixed text
"user-defined function raised exception", so the :class:`EmbeddingError`
message cannot travel inside the SQLite error. It is kept per thread instead:
wrap statements in :func:`embedding_errors` to get the ``EmbeddingError``
itself raised (chained to the SQLite error), or call :func:`last_error`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np

from oracle_rag.errors import EmbeddingError
from oracle_rag.tracing import child_span

FUNCTION_NAME = "vector_embedding"
# A query's embedding inside a traced request (GenAI semantic conventions); indexing runs untraced.
EMBED_SPAN = "embeddings all-MiniLM-L6-v2"
EMBED_ATTRIBUTES = {
    "gen_ai.operation.name": "embeddings",
    "gen_ai.request.model": "all-MiniLM-L6-v2",
    "gen_ai.provider.name": "onnxruntime",
}

_UDF_FAILED = "user-defined function raised exception"
_state = threading.local()


def last_error() -> EmbeddingError | None:
    """The last error raised by ``vector_embedding`` in this thread, if any."""
    return getattr(_state, "error", None)


def clear_last_error() -> None:
    """Forget the error recorded by :func:`last_error` for this thread."""
    _state.error = None


@contextlib.contextmanager
def embedding_errors() -> Iterator[None]:
    """Turn a failed ``vector_embedding`` call into its :class:`EmbeddingError`.

    Other database errors pass through unchanged.
    """
    clear_last_error()
    try:
        yield
    except Exception as exc:
        recorded = last_error()
        if recorded is not None and _UDF_FAILED in str(exc):
            clear_last_error()
            raise recorded from exc
        raise


class SupportsEmbedding(Protocol):
    """What :func:`register` needs: an :class:`EmbeddingRuntime` or a lazy proxy to one."""

    def embed(self, text: str) -> np.ndarray: ...

    def to_blob(self, vec: Any) -> bytes: ...


def _make_udf(runtime: SupportsEmbedding) -> Any:
    def vector_embedding(value: Any) -> bytes | None:
        # SQL NULL in, NULL out, as for SQLite's built-in functions.
        if value is None:
            return None
        try:
            if isinstance(value, bytes):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    raise EmbeddingError("vector_embedding() got a BLOB that is not UTF-8 text") from None
            elif not isinstance(value, str):
                value = str(value)
            with child_span(EMBED_SPAN, EMBED_ATTRIBUTES):
                return runtime.to_blob(runtime.embed(value))
        except EmbeddingError as exc:
            _state.error = exc
            raise
        except Exception as exc:  # never let a bare traceback escape into SQLite
            _state.error = EmbeddingError(f"vector_embedding() failed: {type(exc).__name__}")
            raise _state.error from exc

    return vector_embedding


def _make_named_udf(lookup: Callable[[str], SupportsEmbedding]) -> Any:
    def vector_embedding(model: Any, value: Any) -> bytes | None:
        try:
            runtime = lookup(str(model))
        except EmbeddingError as exc:
            _state.error = exc
            raise
        except Exception as exc:  # an unknown model name (InputError), a missing file
            _state.error = EmbeddingError(f"vector_embedding(): model {str(model)[:64]!r}: {exc}")
            raise _state.error from exc
        return _make_udf(runtime)(value)

    return vector_embedding


def register(
    dbapi_connection: Any,
    runtime: SupportsEmbedding,
    lookup: Callable[[str], SupportsEmbedding] | None = None,
) -> None:
    """Register ``vector_embedding(text) -> BLOB`` on a sqlean/sqlite3 connection.

    With ``lookup`` (a model name -> its runtime) also
    ``vector_embedding(model, text)``: the product's statements name the
    model generation whose vectors they write or compare with
    (engines/generations.py); the one-argument form is all-MiniLM-L6-v2.

    Declared deterministic (same text, same vector), which lets SQLite use it
    in indexes on expressions and evaluate it once per distinct argument in a
    statement where possible. Call it from SQLAlchemy's ``connect`` event.
    ``runtime`` is normally an :class:`~oracle_rag.embedding.EmbeddingRuntime`;
    anything with its ``embed`` and ``to_blob`` methods works, so a proxy
    can defer loading the model until SQL first needs it.
    """
    dbapi_connection.create_function(FUNCTION_NAME, 1, _make_udf(runtime), deterministic=True)
    if lookup is not None:
        dbapi_connection.create_function(FUNCTION_NAME, 2, _make_named_udf(lookup), deterministic=True)
