"""Checks and byte encodings for embedding vectors.

Every vector that leaves the embedding runtime goes through
:func:`validate_vector`, because a NaN or a zero vector stored in an index
silently poisons similarity search: cosine distance to it is NaN or
undefined, and such rows either vanish from or float to the top of results.
It is cheaper to refuse them where they are made.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oracle_rag.errors import EmbeddingError

DEFAULT_DIM = 384

_LE_FLOAT32 = np.dtype("<f4")


def validate_vector(vec: Any, dim: int = DEFAULT_DIM) -> np.ndarray:
    """Return ``vec`` as a 1-D float32 array, or raise :class:`EmbeddingError`.

    Accepts any array-like of exactly ``dim`` numbers (a ``[1, dim]`` array is
    flattened, as some graphs keep the batch axis). Refused, with the reason
    in the message: non-numeric data, a wrong number of components, NaN or
    infinite components, and a zero norm.
    """
    try:
        arr = np.asarray(vec)
    except Exception as exc:  # ragged sequences and the like
        raise EmbeddingError(f"vector is not array-like: {type(exc).__name__}") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise EmbeddingError(f"vector has non-numeric dtype {arr.dtype}")
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 1:
        raise EmbeddingError(f"vector must be 1-D with {dim} components, got shape {arr.shape}")
    if arr.shape[0] != dim:
        raise EmbeddingError(f"vector has {arr.shape[0]} components, expected {dim}")
    arr = arr.astype(np.float32, copy=False)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        kind = "NaN" if np.isnan(arr[bad]) else "infinite"
        count = int((~finite).sum())
        raise EmbeddingError(f"vector has {count} non-finite component(s); first is {kind} at index {bad}")
    norm = float(np.linalg.norm(arr.astype(np.float64)))
    if norm == 0.0:
        raise EmbeddingError("vector has zero norm")
    return arr


def to_blob(vec: Any, dim: int = DEFAULT_DIM) -> bytes:
    """Encode a vector as little-endian float32 bytes (sqlite-vec's BLOB format).

    The vector is validated first, so nothing invalid is ever stored.
    """
    return validate_vector(vec, dim).astype(_LE_FLOAT32, copy=False).tobytes()


def from_blob(blob: bytes | bytearray | memoryview, dim: int = DEFAULT_DIM) -> np.ndarray:
    """Decode little-endian float32 bytes into a validated float32 array (a copy)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise EmbeddingError(f"vector blob must be bytes, got {type(blob).__name__}")
    size = len(memoryview(blob).cast("B"))
    if size != dim * 4:
        raise EmbeddingError(f"vector blob has {size} bytes, expected {dim * 4} ({dim} float32)")
    arr = np.frombuffer(blob, dtype=_LE_FLOAT32).astype(np.float32)
    return validate_vector(arr, dim)
