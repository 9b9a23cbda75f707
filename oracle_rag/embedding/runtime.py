"""Run the augmented embedding model with onnxruntime (no PyTorch).

The model file is the one :mod:`oracle_rag.embedding.build` writes, which is
also the file loaded into Oracle with ``DBMS_VECTOR.LOAD_ONNX_MODEL``; running
the same graph here keeps the SQLite engine's vectors equal to Oracle's.

The graph takes exactly one string per call (two strings would be read as a
sentence pair and yield one embedding). :meth:`EmbeddingRuntime.embed_batch`
therefore uses the companion graphs of :mod:`.batch_model`: the augmented
model's own tokenizer node, one text at a time, then its encoder on a
right-padded ``[batch, seq]`` tensor. Padding is masked out exactly, so the
vectors equal ``embed``'s up to float summation order (< 1e-6 per component,
measured on the reference fixture). Before the batched path is used, a probe
compares it with the augmented graph; if it differs, or the companions are
missing, ``embed_batch`` loops over ``embed`` as before.

:meth:`EmbeddingRuntime.prime` lets SQL benefit too: the SQLite engine embeds
a write batch with ``embed_batch`` and keeps the vectors in a small memo, and
the next ``embed`` of the same text (from ``vector_embedding()``) takes its
vector from there instead of running the model again.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.util
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oracle_rag.embedding.batch_model import (
    BATCH_INPUTS,
    BATCH_OUTPUT,
    TOKENIZER_OUTPUTS,
    batch_path_for,
    tokenizer_path_for,
)
from oracle_rag.embedding.build import INPUT_NAME, MODEL_DIM, OUTPUT_NAME
from oracle_rag.embedding.vectors import from_blob as _from_blob
from oracle_rag.embedding.vectors import to_blob as _to_blob
from oracle_rag.embedding.vectors import validate_vector
from oracle_rag.errors import EmbeddingError

_SURROGATES = re.compile("[\ud800-\udfff]")

log = logging.getLogger("oracle_rag.embedding")

SUB_BATCH = 32
"""Most texts per encoder run; texts are sorted by length first, so each run pads little."""

SUB_BATCH_TOKENS = 512
"""Most padded tokens per encoder run. Measured on 2 cores (docs/embedding.md):
runs beyond ~1000 tokens got slower per text (activations outgrow the caches),
so 60-token texts go 8 at a time and 256-token texts 2 at a time."""

MAX_PAD_RATIO = 1.3
"""A group's longest text is at most this many times its shortest: bounds padding."""

MEMO_SIZE = 512
"""Default bound of the primed-vector memo (entries, ~1.5 KB each)."""

PARITY_TOLERANCE = 1e-5
"""Largest per-component difference allowed between the batched and the single path."""

_PROBE_TEXTS = (
    "",
    "probe",
    "The batched encoder must give the same vector as the augmented graph, padding included.",
)


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

    ``calls`` counts texts run through the model so far (tests use it to
    check caching); a text primed with :meth:`prime` counts once, when it is
    primed, not again when ``embed`` takes it from the memo.

    ``memo_size`` bounds the primed-vector memo (oldest entries dropped);
    ``memo_hits`` counts the ``embed`` calls it answered.
    """

    dim: int = MODEL_DIM

    def __init__(self, model_path: Path, threads: int | None = None, memo_size: int = MEMO_SIZE) -> None:
        self.model_path = Path(model_path)
        if threads is not None and threads < 1:
            raise EmbeddingError(f"threads must be >= 1, got {threads}")
        if memo_size < 0:
            raise EmbeddingError(f"memo_size must be >= 0, got {memo_size}")
        self.threads = threads if threads is not None else (os.cpu_count() or 1)
        self.memo_size = memo_size
        self.calls = 0
        self.memo_hits = 0  # embeds answered from the primed memo (not counted in calls)
        self._session: Any = None
        self._load_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._batch: tuple[Any, Any] | None = None  # (tokenizer, encoder) sessions
        self._batch_status = "not loaded"
        self._batch_lock = threading.Lock()
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._memo_lock = threading.Lock()

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

    def _open(self, path: Path) -> Any:
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
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(
                f"cannot load embedding model {path.name}: {_short(exc)}", path=str(path)
            ) from None

    def _create_session(self) -> Any:
        path = self.model_path
        if not path.is_file():
            raise EmbeddingError(f"embedding model file not found: {path}")
        session = self._open(path)
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
        """Embed one text: float32 ``[384]``, L2-normalised, validated.

        A text primed with :meth:`prime` is taken (and removed) from the memo
        instead: its vector came from the batched path, equal to this one
        within :data:`PARITY_TOLERANCE`.
        """
        if not isinstance(text, str):
            raise EmbeddingError(f"can only embed str, got {type(text).__name__}")
        prepared = prepare_text(text)
        if self._memo:  # unlocked peek: the common case (nothing primed) takes no lock
            with self._memo_lock:
                primed = self._memo.pop(prepared, None)
                if primed is not None:
                    self.memo_hits += 1
            if primed is not None:
                return primed
        vec = self._embed_one(prepared)
        with self._count_lock:
            self.calls += 1
        return vec

    def _embed_one(self, prepared: str) -> np.ndarray:
        """The augmented graph on one prepared text; validated, not counted."""
        session = self.session
        feed = {INPUT_NAME: np.array([prepared], dtype=object)}
        try:
            (out,) = session.run([OUTPUT_NAME], feed)
        except Exception as exc:
            raise EmbeddingError(
                f"onnxruntime failed while embedding with {self.model_path.name}: {_short(exc)}"
            ) from None
        return validate_vector(out, self.dim)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed several texts: float32 ``[n, 384]``, row i equal to ``embed(texts[i])``.

        Uses the batched encoder when :meth:`batch_status` is ``"batched"``
        (rows then match ``embed`` within :data:`PARITY_TOLERANCE`), otherwise
        loops over ``embed`` (rows identical). Does not read the memo.
        """
        if isinstance(texts, str):
            raise EmbeddingError("embed_batch needs a sequence of texts, not one str")
        for text in texts:
            if not isinstance(text, str):
                raise EmbeddingError(f"can only embed str, got {type(text).__name__}")
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        sessions = self._batch_sessions()
        if sessions is None:
            result = np.empty((len(texts), self.dim), dtype=np.float32)
            for i, text in enumerate(texts):
                result[i] = self._embed_one(prepare_text(text))
                with self._count_lock:
                    self.calls += 1
            return result
        return self._embed_batched([prepare_text(t) for t in texts], sessions, count=True)

    # ------------------------------------------------------------------ #
    # The batched path
    # ------------------------------------------------------------------ #

    def batch_status(self) -> str:
        """``"batched"`` if ``embed_batch`` uses the batched encoder, else why not.

        Loads the companion sessions and runs the parity probe on first call.
        """
        self._batch_sessions()
        return self._batch_status

    def _batch_sessions(self) -> tuple[Any, Any] | None:
        if self._batch is not None or self._batch_status != "not loaded":
            return self._batch
        with self._batch_lock:
            if self._batch is None and self._batch_status == "not loaded":
                self._batch, self._batch_status = self._load_batch()
        return self._batch

    def _load_batch(self) -> tuple[tuple[Any, Any] | None, str]:
        tok_path, enc_path = tokenizer_path_for(self.model_path), batch_path_for(self.model_path)
        if not (tok_path.is_file() and enc_path.is_file()):
            return None, f"looping: no {tok_path.name} / {enc_path.name} next to the model"
        try:
            tokenizer, encoder = self._open(tok_path), self._open(enc_path)
            if [o.name for o in tokenizer.get_outputs()] != list(TOKENIZER_OUTPUTS) or [
                i.name for i in encoder.get_inputs()
            ] != list(BATCH_INPUTS):
                return None, "looping: the companion files have an unexpected interface"
            probe = [prepare_text(t) for t in _PROBE_TEXTS]
            batched = self._embed_batched(probe, (tokenizer, encoder), count=False)
            single = np.stack([self._embed_one(t) for t in probe])
        except EmbeddingError as exc:
            log.warning("batched embedding disabled: %s", exc.message)
            return None, f"looping: {exc.message}"
        diff = float(np.abs(batched - single).max())
        if not diff <= PARITY_TOLERANCE:
            log.warning("batched embedding disabled: probe differs from the augmented model by %.3g", diff)
            return None, f"looping: the batched probe differs from the augmented model by {diff:.3g}"
        return (tokenizer, encoder), "batched"

    def _embed_batched(
        self, prepared: Sequence[str], sessions: tuple[Any, Any], *, count: bool
    ) -> np.ndarray:
        """Tokenize each text, group by length, run the padded encoder, validate each row."""
        tokenizer, encoder = sessions
        try:
            tokens = [tokenizer.run(None, {INPUT_NAME: np.array([t], dtype=object)}) for t in prepared]
        except Exception as exc:
            raise EmbeddingError(f"onnxruntime failed while tokenizing: {_short(exc)}") from None
        order = sorted(range(len(tokens)), key=lambda i: len(tokens[i][0]))
        result = np.empty((len(prepared), self.dim), dtype=np.float32)
        for group in _groups(order, [len(t[0]) for t in tokens]):
            width = len(tokens[group[-1]][0])
            feed = {name: np.zeros((len(group), width), dtype=np.int64) for name in BATCH_INPUTS}
            for row, i in enumerate(group):
                for name, values in zip(BATCH_INPUTS, tokens[i], strict=True):
                    feed[name][row, : len(values)] = values
            try:
                (out,) = encoder.run([BATCH_OUTPUT], feed)
            except Exception as exc:
                raise EmbeddingError(
                    f"onnxruntime failed while embedding a batch with {self.model_path.name}: {_short(exc)}"
                ) from None
            if out.shape != (len(group), self.dim):
                raise EmbeddingError(f"batched encoder returned shape {out.shape}")
            for row, i in enumerate(group):
                try:
                    result[i] = validate_vector(out[row], self.dim)
                except EmbeddingError as exc:
                    raise EmbeddingError(f"text {i} of the batch: {exc.message}") from None
            if count:
                with self._count_lock:
                    self.calls += len(group)
        return result

    # ------------------------------------------------------------------ #
    # Priming (batched vectors for the SQL function)
    # ------------------------------------------------------------------ #

    def prime(self, texts: Sequence[str]) -> list[str]:
        """Embed ``texts`` in batches now; the next ``embed`` of each takes its vector.

        Returns the memo keys added (prepared texts), for :meth:`forget`.
        Only worth it on the batched path, so with the loop fallback nothing
        is primed. Duplicates and already-primed texts are embedded once; at
        most ``memo_size`` texts are primed (the rest embed one by one later).
        A failure primes nothing and is left to ``embed``, which then reports
        it for the very text that fails.
        """
        sessions = None if self.memo_size == 0 or not texts else self._batch_sessions()
        if sessions is None:
            return []
        with self._memo_lock:
            keys = list(dict.fromkeys(prepare_text(t) for t in texts if isinstance(t, str)))
            keys = [k for k in keys if k not in self._memo][: self.memo_size]
        if not keys:
            return []
        try:
            vectors = self._embed_batched(keys, sessions, count=True)
        except EmbeddingError as exc:
            log.info("priming %d texts failed, embedding them one by one: %s", len(keys), exc)
            return []
        with self._memo_lock:
            for key, vec in zip(keys, vectors, strict=True):
                self._memo[key] = vec.copy()
                self._memo.move_to_end(key)
            while len(self._memo) > self.memo_size:
                self._memo.popitem(last=False)
        return keys

    def forget(self, keys: Sequence[str]) -> None:
        """Drop primed vectors that were not used (e.g. the statement failed)."""
        with self._memo_lock:
            for key in keys:
                self._memo.pop(key, None)

    @contextlib.contextmanager
    def primed(self, texts: Sequence[str]) -> Iterator[None]:
        """``prime(texts)`` for the duration of the block, then forget what is left."""
        keys = self.prime(texts)
        try:
            yield
        finally:
            if keys:
                self.forget(keys)

    def memo_len(self) -> int:
        """Number of primed vectors waiting to be used."""
        with self._memo_lock:
            return len(self._memo)

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


def _groups(order: list[int], lengths: list[int]) -> Iterator[list[int]]:
    """Split indices sorted by token length into runs of at most SUB_BATCH texts and
    SUB_BATCH_TOKENS padded tokens (the longest text sets the width), whose longest
    text is at most MAX_PAD_RATIO times the shortest."""
    group: list[int] = []
    for i in order:
        if group and (
            len(group) >= SUB_BATCH
            or (len(group) + 1) * lengths[i] > SUB_BATCH_TOKENS
            or lengths[i] > MAX_PAD_RATIO * lengths[group[0]]
        ):
            yield group
            group = []
        group.append(i)
    if group:
        yield group


def _short(exc: BaseException) -> str:
    """Exception class and first message line, capped: enough to act on, no dump."""
    lines = str(exc).strip().splitlines()
    message = lines[0] if lines else ""
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
