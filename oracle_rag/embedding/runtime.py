"""Run the augmented embedding model with onnxruntime (no PyTorch).

The model file is the one :mod:`oracle_rag.embedding.build` writes, which is
also the file loaded into Oracle with ``DBMS_VECTOR.LOAD_ONNX_MODEL``; running
the same graph here keeps the SQLite engine's vectors equal to Oracle's.

The graph takes exactly one string per call (two strings would be read as a
sentence pair and yield one embedding), so :meth:`EmbeddingRuntime.embed_batch`
loops over its texts. Measured on 2 cores, batching through a padded encoder
gains at most ~20 % for short texts and loses for 256-token texts, while
changing the float results; the loop is both exact and simple.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oracle_rag.errors import EmbeddingError

from .build import INPUT_NAME, MODEL_DIM, OUTPUT_NAME
from .vectors import from_blob as _from_blob
from .vectors import to_blob as _to_blob
from .vectors import validate_vector

_SURROGATES = re.compile("[\ud800-\udfff]")


@functools.cache
def custom_ops_library_path() -> str:
    """Path of onnxruntime-extensions' custom-op library (it holds BertTokenizer).

    Found without importing the ``onnxruntime_extensions`` package: its
    ``__init__`` imports ``transformers`` and therefore PyTorch whenever they
    are installed, which costs ~660 MB of RSS and seconds of start-up for a
    path string. Falls back to ``get_library_path()`` if the layout changes.
    """
    spec = importlib.util.find_spec("onnxruntime_extensions")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError("the package onnxruntime-extensions is not installed")
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            candidate = Path(folder) / f"_extensions_pydll{suffix}"
            if candidate.is_file():
                return str(candidate)
    import onnxruntime_extensions  # pragma: no cover - unexpected wheel layout

    return str(onnxruntime_extensions.get_library_path())  # pragma: no cover


def prepare_text(text: str) -> str:
    """Make ``text`` safe to hand to the tokenizer op.

    * NUL (U+0000) is removed. The op reads its input as a C string and
      stops at the first NUL, so "a\\x00b" would embed as "a". Hugging Face's
      BERT normaliser drops NUL too, so removing it keeps parity with
      sentence-transformers ("ab\\x00cd" tokenises exactly like "abcd").
    * Lone surrogates (from ``surrogateescape`` decoding) are removed: they
      cannot be encoded as UTF-8 and onnxruntime would raise.

    Nothing else is changed, so the runtime sees what Oracle's
    ``VECTOR_EMBEDDING`` would see for the same text.
    """
    if "\x00" in text:
        text = text.replace("\x00", "")
    if _SURROGATES.search(text):
        text = _SURROGATES.sub("", text)
    return text


class EmbeddingRuntime:
    """Thread-safe, lazily loaded onnxruntime session for the augmented model.

    ``threads`` sets onnxruntime's intra-op threads (default: all CPUs, which
    is fastest for one text at a time). The session is created on first use,
    so constructing a runtime is free and a missing model is reported when it
    is needed, as an :class:`EmbeddingError`.

    ``calls`` counts texts embedded so far (tests use it to check caching).
    """

    dim: int = MODEL_DIM

    def __init__(self, model_path: Path, threads: int | None = None) -> None:
        self.model_path = Path(model_path)
        if threads is not None and threads < 1:
            raise EmbeddingError(f"threads must be >= 1, got {threads}")
        self.threads = threads if threads is not None else (os.cpu_count() or 1)
        self.calls = 0
        self._session: Any = None
        self._load_lock = threading.Lock()
        self._count_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmbeddingRuntime({self.model_path.name!r}, threads={self.threads})"

    # ------------------------------------------------------------------ #
    # Session
    # ------------------------------------------------------------------ #

    @property
    def session(self) -> Any:
        """The ``onnxruntime.InferenceSession``, created on first access."""
        session = self._session
        if session is None:
            with self._load_lock:
                if self._session is None:
                    self._session = self._create_session()
                session = self._session
        return session

    def load(self) -> EmbeddingRuntime:
        """Create the session now (e.g. at start-up, to fail early); returns self."""
        _ = self.session
        return self

    def _create_session(self) -> Any:
        path = self.model_path
        if not path.is_file():
            raise EmbeddingError(f"embedding model file not found: {path}")
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.register_custom_ops_library(custom_ops_library_path())
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        # No busy-waiting between parallel sections: the runtime shares the
        # CPU with the web server, SQLite and the worker, and spinning threads
        # halved throughput on a busy 2-core machine (docs/embedding.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only; warnings would go to stderr
        try:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(
                f"cannot load embedding model {path.name}: {_short(exc)}", path=str(path)
            ) from None
        inputs = session.get_inputs()
        outputs = [o.name for o in session.get_outputs()]
        if (
            len(inputs) != 1
            or inputs[0].name != INPUT_NAME
            or inputs[0].type != "tensor(string)"
            or OUTPUT_NAME not in outputs
        ):
            raise EmbeddingError(
                f"{path.name} is not an augmented embedding model "
                f"(expected one string input {INPUT_NAME!r} and an output {OUTPUT_NAME!r})"
            )
        return session

    # ------------------------------------------------------------------ #
    # Embedding
    # ------------------------------------------------------------------ #

    def embed(self, text: str) -> np.ndarray:
        """Embed one text: float32 ``[384]``, L2-normalised, validated."""
        if not isinstance(text, str):
            raise EmbeddingError(f"can only embed str, got {type(text).__name__}")
        session = self.session
        feed = {INPUT_NAME: np.array([prepare_text(text)], dtype=object)}
        try:
            (out,) = session.run([OUTPUT_NAME], feed)
        except Exception as exc:
            raise EmbeddingError(
                f"onnxruntime failed while embedding with {self.model_path.name}: {_short(exc)}"
            ) from None
        vec = validate_vector(out, self.dim)
        with self._count_lock:
            self.calls += 1
        return vec

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed several texts: float32 ``[n, 384]``, row i identical to ``embed(texts[i])``."""
        if isinstance(texts, str):
            raise EmbeddingError("embed_batch needs a sequence of texts, not one str")
        result = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            result[i] = self.embed(text)
        return result

    # ------------------------------------------------------------------ #
    # Blob encoding (sqlite-vec format)
    # ------------------------------------------------------------------ #

    @staticmethod
    def to_blob(vec: Any) -> bytes:
        """Validated float32 little-endian bytes, the format sqlite-vec reads."""
        return _to_blob(vec, MODEL_DIM)

    @staticmethod
    def from_blob(blob: bytes | bytearray | memoryview) -> np.ndarray:
        """Inverse of :meth:`to_blob`; validates length and values."""
        return _from_blob(blob, MODEL_DIM)


def _short(exc: BaseException) -> str:
    """Exception class and first message line, capped: enough to act on, no dump."""
    lines = str(exc).strip().splitlines()
    message = lines[0] if lines else ""
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
