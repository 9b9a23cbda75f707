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
from oracle_rag.embedding.batch_model import batch_models_present, batch_path_for, tokenizer_path_for
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
    data_dir: Path,
    progress: ProgressCallback | None = None,
    model: EmbeddingModel = DEFAULT,
    *,
    replace_stale: bool = False,
) -> Path:
    """Return the cached path of ``model`` (default all-MiniLM-L6-v2), building it first when missing.

    Also makes sure the batched-embedding companions (``<stem>.tokenizer.onnx``
    and ``<stem>.batch.onnx``, see :mod:`.batch_model`) sit next to it,
    deriving them from the augmented file when a cache predates them. They
    are an optimisation: if they cannot be written (read-only volume, a
    foreign model file), a warning is logged and the runtime embeds one text
    per call.

    A cached file of an earlier build format (``EmbeddingModel.stale_format``:
    its graph computes other vectors) is kept by default, with a warning:
    a model generation's vectors may have come from it, and a query must be
    embedded by the graph that embedded them, so it is never replaced under
    them. ``replace_stale`` is for a caller that knows no stored vector came
    from it (``model switch`` starting a generation): the file and its
    companions are rebuilt.

    Concurrent callers (threads or processes) wait on a lock file next to the
    model; the first one builds, the others find the finished file. A present
    file is trusted: it can only have been put there by an atomic replace.
    """
    prepare_data_dir(data_dir)
    path = model_path_for(data_dir, model)
    stale = model.stale_format(path) if _present(path) else None
    if stale is not None and not replace_stale:
        _warn_stale(path, model, stale)
    elif stale is None and _present(path) and (batch_models_present(path) or not model.batched):
        return path
    try:
        with _build_lock(path.with_name(path.name + ".lock")):
            if replace_stale and _present(path) and model.stale_format(path) is not None:
                _remove_companions(path)
                model.build(path, progress=progress)
            if not _present(path):
                model.build(path, progress=progress)
            if model.batched and not batch_models_present(path):
                _build_batch_models_or_warn(path, model)
            return path
    except OSError as exc:  # a read-only or full volume: name the cause instead of a bare OSError
        if _present(path) and not (replace_stale and model.stale_format(path) is not None):
            return path
        what = "is of an earlier build" if _present(path) else "is missing"
        raise EmbeddingError(
            f"embedding model {path} {what} and could not be built there "
            f"({type(exc).__name__}: {exc.strerror or 'no detail'})",
            path=str(path),
        ) from None


_WARNED: set[tuple[Path, str]] = set()


def _warn_stale(path: Path, model: EmbeddingModel, found: str) -> None:
    """One log line per file and process: which build is kept, and the command that moves to this one."""
    key = (path, found)
    if key in _WARNED:
        return
    _WARNED.add(key)
    log.warning(
        "%s is build %s, this version builds %s (other vectors); kept, since a model generation's "
        "vectors may come from it: %s",
        path.name,
        found,
        model.build_format,
        rebuild_hint(model.name),
    )


def rebuild_hint(name: str, *, active: bool = True) -> str:
    """The commands that move generation ``name`` to this version's build, without a pause in searches.

    A generation cannot change its file, so the new build is a new generation:
    drop the old one once it is not the active one, then switch to the model
    again (``model switch`` rebuilds the file for the new generation).
    """
    then = f"`oracle-rag model drop {name}`, then `oracle-rag model switch --to {name}`"
    if not active:
        return f"run {then} and `oracle-rag model activate` once it is filled"
    return (
        f"to take the new build, make another generation active first (`oracle-rag model rollback`, or "
        f"`oracle-rag model switch --to OTHER` and `oracle-rag model activate`), then {then}"
    )


def _remove_companions(path: Path) -> None:
    """Delete the batched companions derived from the file about to be rebuilt (they read its bytes)."""
    for companion in (tokenizer_path_for(path), batch_path_for(path)):
        companion.unlink(missing_ok=True)


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
