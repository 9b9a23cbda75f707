"""Where the model lives on disk, built on first use with its batched-embedding companions.

Separate from :mod:`.build` (which writes one model file) and
:mod:`.batch_model` (which derives the companions from it) so neither
imports the other's caller: this module is the one that uses both.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from oracle_rag.data_dir import prepare_data_dir
from oracle_rag.embedding.batch_model import batch_models_present
from oracle_rag.embedding.build import ProgressCallback
from oracle_rag.embedding.catalog import DEFAULT, EmbeddingModel
from oracle_rag.errors import EmbeddingError

log = logging.getLogger("oracle_rag.embedding")

_PROCESS_LOCK = threading.Lock()


@contextlib.contextmanager
def _build_lock(lock_path: Path) -> Iterator[None]:
    """Serialise builders across threads and (where fcntl exists) processes.

    The lock is only an optimisation that avoids building twice: correctness
    comes from the atomic replace, so where ``fcntl`` is missing (Windows) two
    processes may both build, and the last identical file wins.
    """
    with _PROCESS_LOCK:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def model_path_for(data_dir: Path, model: EmbeddingModel = DEFAULT) -> Path:
    """Where :func:`ensure_model` keeps a model: ``<data_dir>/models/<its file name>``."""
    return model.path_in(data_dir)


def ensure_model(
    data_dir: Path, progress: ProgressCallback | None = None, model: EmbeddingModel = DEFAULT
) -> Path:
    """Return the cached path of ``model`` (default all-MiniLM-L6-v2), building it first when missing.

    Also makes sure the batched-embedding companions (``<stem>.tokenizer.onnx``
    and ``<stem>.batch.onnx``, see :mod:`.batch_model`) sit next to it,
    deriving them from the augmented file when a cache predates them. They
    are an optimisation: if they cannot be written (read-only volume, a
    foreign model file), a warning is logged and the runtime embeds one text
    per call.

    Concurrent callers (threads or processes) wait on a lock file next to the
    model; the first one builds, the others find the finished file. A present
    file is trusted: it can only have been put there by an atomic replace.
    """
    prepare_data_dir(data_dir)
    path = model_path_for(data_dir, model)
    if _present(path) and (batch_models_present(path) or not model.batched):
        return path
    try:
        with _build_lock(path.with_name(path.name + ".lock")):
            if not _present(path):
                model.build(path, progress=progress)
            if model.batched and not batch_models_present(path):
                _build_batch_models_or_warn(path, model)
            return path
    except OSError as exc:  # a read-only or full volume: name the cause instead of a bare OSError
        if _present(path):
            return path
        raise EmbeddingError(
            f"embedding model {path} is missing and could not be built there "
            f"({type(exc).__name__}: {exc.strerror or 'no detail'})",
            path=str(path),
        ) from None


def _present(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _build_batch_models_or_warn(path: Path, model: EmbeddingModel) -> None:
    try:
        model.companions(path)
    except (EmbeddingError, OSError) as exc:
        log.warning(
            "batched embedding disabled: companions of %s not built (%s)",
            path.name,
            exc if isinstance(exc, EmbeddingError) else type(exc).__name__,
        )
