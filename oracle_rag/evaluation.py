"""Measure retrieval quality on a BEIR-layout test collection.

``oracle-rag eval --dataset DIR`` loads ``corpus.jsonl`` (``_id``, ``title``,
``text``), ``queries.jsonl`` (``_id``, ``text``) and ``qrels.tsv`` (or BEIR's
``qrels/test.tsv``: ``query-id``, ``corpus-id``, ``score``) and reports
nDCG@10 and Recall@100 for the three retrieval modes.

Why it goes through the product rather than a side path: the documents are
indexed by the same :class:`~oracle_rag.indexing.indexer.Indexer` and
:class:`~oracle_rag.indexing.worker.Worker` that index tasks (a :class:`DocumentSource`
backed by the loaded corpus; enqueue all, then ``Worker.drain()``), embedded
inside the database, and searched by :class:`~oracle_rag.search.retriever.Retriever`
as a developer (the least privileged role) under the real scope predicate.
A number printed here is therefore a number about the product, and the
semantic score doubles as an end-to-end exactness check against an
exact-cosine baseline.

On the embedded engine the collection goes into a scratch database in a
temporary data directory (the configured data directory's model file is
linked or copied there, never rebuilt), deleted afterwards. On Oracle it goes
into the configured schema, which must be a scratch schema with no worker of
its own running: the run refuses to start if DOCUMENT chunks are already
there, and deletes the ones it added when it finishes.

Metrics follow trec_eval (``ndcg_cut.10``, ``recall.100``): gain = the
graded judgement, discount 1/log2(rank + 1), the ideal ranking built from all
positive judgements of the query (retrieved or not); only queries with at
least one positive judgement are scored, and the mean is over those. A query
the retriever refuses (empty text) counts as retrieving nothing and scores 0,
as with ``trec_eval -c``; it is listed in ``details.queries_refused``.

Hybrid is checked against its own legs in the same run: ``details`` holds
semantic search ranking each record by its first window only
(``semantic_first_window``, the list a single-vector baseline has) and
``rrf_reference``, the plain RRF (k=60, top-100 lists, ties by ascending
id: :func:`plain_rrf`, not the product's code) of the keyword run with that
run and with semantic mode's run. With ``hybrid_semantic_chunk = FIRST``
hybrid fuses the first pair by construction, so hybrid and
``rrf_reference["keyword+semantic_first_window"]`` differ only where equal
fused scores are ordered differently (the product: best leg rank, then chunk
id; the reference: id).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from oracle_rag.callers.caller import Caller
from oracle_rag.config import Settings
from oracle_rag.embedding import ensure_model
from oracle_rag.engines import Filters
from oracle_rag.errors import EmbeddingError, InputError
from oracle_rag.indexing.worker import BatchResult
from oracle_rag.search.retriever import MODES
from oracle_rag.sources import Document, Source
from oracle_rag.system import RagSystem

log = logging.getLogger("oracle_rag.evaluation")

Progress = Callable[[str, int, int], None]

DOCUMENT_TYPE = "DOCUMENT"
NDCG_AT = 10
RECALL_AT = 100
REFERENCE_RRF_K = 60  # the baselines' plain RRF (SOURCE.md), not the configured rrf_k
MAX_ID_CHARS = 256  # RAG_CHUNK.SOURCE_ID is VARCHAR2(256 CHAR) on Oracle
# The evaluating identity: a developer with no tasks. Documents carry no
# owner and are not TASK rows, so the scope predicate lets every caller see
# them; searching as the least privileged role proves exactly that.
FIRST_WINDOW = "semantic_first_window"
EVAL_CALLER = Caller(employee_id=0, roles=("developer",), name="evaluation")


# -- metrics (pure) -----------------------------------------------------------
def ndcg_at_k(ranked: Sequence[str], judgements: Mapping[str, int], k: int) -> float:
    """trec_eval's ``ndcg_cut.k`` for one query.

    DCG = sum over the first ``k`` ranked ids of grade / log2(rank + 1)
    (rank from 1); the ideal DCG sorts every positive grade of the query,
    retrieved or not. Grades <= 0 count as non-relevant. Duplicate ids in
    ``ranked`` count once, at their first rank. A query with no positive
    judgement scores 0.
    """
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    dcg = 0.0
    seen: set[str] = set()
    rank = 0
    for doc in ranked:
        if doc in seen:
            continue
        seen.add(doc)
        rank += 1
        if rank > k:
            break
        grade = judgements.get(doc, 0)
        if grade > 0:
            dcg += grade / math.log2(rank + 1)
    ideal = sorted((g for g in judgements.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, 1))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], judgements: Mapping[str, int], k: int) -> float:
    """trec_eval's ``recall.k``: share of the positively judged ids in the first ``k``."""
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    relevant = {d for d, g in judgements.items() if g > 0}
    if not relevant:
        return 0.0
    top: list[str] = []
    for doc in ranked:
        if doc not in top:
            top.append(doc)
        if len(top) == k:
            break
    return len(relevant.intersection(top)) / len(relevant)


def score_runs(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 over the queries in ``runs`` (query id -> ranked doc ids)."""
    if not runs:
        raise InputError("no runs to score")
    ndcg = sum(ndcg_at_k(ranked, qrels.get(q, {}), NDCG_AT) for q, ranked in runs.items())
    recall = sum(recall_at_k(ranked, qrels.get(q, {}), RECALL_AT) for q, ranked in runs.items())
    return {f"ndcg@{NDCG_AT}": ndcg / len(runs), f"recall@{RECALL_AT}": recall / len(runs)}


# -- the dataset --------------------------------------------------------------
@dataclass
class Dataset:
    """A loaded BEIR collection. ``documents`` maps id -> chunk text, in file order."""

    documents: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    unknown_qrels: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def judged_queries(self) -> list[str]:
        """Query ids (file order) with at least one positive judgement: the scored set."""
        return [q for q in self.queries if any(g > 0 for g in self.qrels.get(q, {}).values())]


def document_text(title: str, text: str) -> str:
    """The chunk text of a document: ``title + " " + text``, as the baselines index it.

    An empty document becomes one space rather than an empty string, because
    Oracle stores '' as NULL and CONTENT is NOT NULL; a space has no tokens
    for either the model or the full-text index.
    """
    return " ".join(part for part in (title, text) if part) or " "


def _jsonl(path: Path, required: tuple[str, ...], limit: int | None) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        fh = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            f"{path}: file not found (a BEIR dataset needs corpus.jsonl, queries.jsonl "
            f"and qrels.tsv or qrels/test.tsv)"
        ) from None
    with fh:
        count = 0
        try:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise InputError(f"{path}:{lineno}: expected a JSON object")
                for key in required:
                    if key not in row:
                        raise InputError(f"{path}:{lineno}: missing field {key!r}")
                yield lineno, row
                count += 1
                if limit is not None and count >= limit:
                    return
        except UnicodeDecodeError:
            raise InputError(f"{path}: not UTF-8 text") from None


def _text_field(path: Path, lineno: int, row: dict[str, Any], key: str) -> str:
    value = row.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"{path}:{lineno}: field {key!r} must be a string")
    return value.strip()


def _id_field(path: Path, lineno: int, row: dict[str, Any], seen: Mapping[str, Any]) -> str:
    raw = row["_id"]
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise InputError(f"{path}:{lineno}: _id must be a string or an integer")
    ident = str(raw).strip()
    if not ident or len(ident) > MAX_ID_CHARS:
        raise InputError(f"{path}:{lineno}: _id must have 1 to {MAX_ID_CHARS} characters")
    if ident in seen:
        raise InputError(f"{path}:{lineno}: duplicate _id {ident!r}")
    return ident


def _qrels_path(dataset: Path) -> Path:
    for candidate in (dataset / "qrels.tsv", dataset / "qrels" / "test.tsv"):
        if candidate.is_file():
            return candidate
    raise InputError(f"{dataset / 'qrels.tsv'}: file not found (nor qrels/test.tsv)")


def load_dataset(dataset: Path, *, max_docs: int | None = None, max_queries: int | None = None) -> Dataset:
    """Read and check a BEIR-layout folder; errors name the file and the line.

    Judgements whose query or document is not among the loaded ones are
    dropped, counted in ``unknown_qrels`` and reported as warnings (expected
    with ``max_docs``/``max_queries``; a defect in the data otherwise).
    """
    dataset = Path(dataset)
    if not dataset.is_dir():
        raise InputError(f"{dataset}: not a directory")
    for name, value in (("max_docs", max_docs), ("max_queries", max_queries)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    corpus_path = dataset / "corpus.jsonl"
    documents: dict[str, str] = {}
    for lineno, row in _jsonl(corpus_path, ("_id",), max_docs):
        ident = _id_field(corpus_path, lineno, row, documents)
        documents[ident] = document_text(
            _text_field(corpus_path, lineno, row, "title"), _text_field(corpus_path, lineno, row, "text")
        )
    if not documents:
        raise InputError(f"{corpus_path}: no documents")
    queries_path = dataset / "queries.jsonl"
    queries: dict[str, str] = {}
    for lineno, row in _jsonl(queries_path, ("_id", "text"), max_queries):
        ident = _id_field(queries_path, lineno, row, queries)
        queries[ident] = _text_field(queries_path, lineno, row, "text")
    if not queries:
        raise InputError(f"{queries_path}: no queries")
    qrels, unknown, warnings = _load_qrels(_qrels_path(dataset), documents, queries)
    result = Dataset(documents, queries, qrels, unknown, warnings)
    if not result.judged_queries:
        raise InputError(f"{dataset}: no loaded query has a positive judgement in the qrels")
    return result


def _load_qrels(
    path: Path, documents: Mapping[str, str], queries: Mapping[str, str]
) -> tuple[dict[str, dict[str, int]], int, list[str]]:
    qrels: dict[str, dict[str, int]] = {}
    unknown_q: set[str] = set()
    unknown_d: set[str] = set()
    dropped = 0
    try:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 3:
                    raise InputError(
                        f"{path}:{lineno}: expected 3 columns (query-id, corpus-id, score), got {len(parts)}"
                    )
                qid, did, raw = parts
                try:
                    grade = int(raw)
                except ValueError:
                    if lineno == 1:  # the BEIR header line
                        continue
                    raise InputError(f"{path}:{lineno}: score {raw!r} is not an integer") from None
                if qid not in queries or did not in documents:
                    dropped += 1
                    if qid not in queries:
                        unknown_q.add(qid)
                    if did not in documents:
                        unknown_d.add(did)
                    continue
                judged = qrels.setdefault(qid, {})
                if did in judged:
                    raise InputError(
                        f"{path}:{lineno}: duplicate judgement for query {qid!r}, document {did!r}"
                    )
                judged[did] = grade
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    warnings = []
    if dropped:
        warnings.append(
            f"{path.name}: {dropped} judgement(s) ignored: {len(unknown_q)} query id(s) and "
            f"{len(unknown_d)} document id(s) not among the loaded ones"
        )
    return qrels, dropped, warnings


# -- the source the worker indexes ------------------------------------------------
class DocumentSource(Source):
    """The loaded corpus as a knowledge source: no owner, no project, visible to all."""

    SOURCE_TYPE = DOCUMENT_TYPE

    def __init__(self, documents: Mapping[str, str]) -> None:
        self._documents = documents

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        return {
            i: Document(DOCUMENT_TYPE, i, self._documents[i]) for i in map(str, ids) if i in self._documents
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return list(self._documents)


# -- the run --------------------------------------------------------------------
@contextmanager
def _scratch_system(settings: Settings, documents: Mapping[str, str]) -> Iterator[Any]:
    """A migrated RagSystem whose only source is the corpus, on a scratch database."""
    source = DocumentSource(documents)
    if settings.database_url:  # a server database: the configured (scratch) schema; else a scratch file
        rag = RagSystem(settings, sources=[source])
        try:
            rag.migrate()
            with rag.engine.connect() as conn:
                if rag.engine.chunk_ids(conn, DOCUMENT_TYPE):
                    raise InputError(
                        "the configured database already holds DOCUMENT chunks; point "
                        "database_url at a scratch schema for `oracle-rag eval`"
                    )
            yield rag
        finally:
            try:
                with rag.engine.begin() as conn:
                    rag.engine.delete_chunks(conn, DOCUMENT_TYPE, list(documents))
            finally:
                rag.close()
        return
    model = ensure_model(settings.data_path)  # the configured one; built only if it never was
    with tempfile.TemporaryDirectory(prefix="oracle-rag-eval-") as tmp:
        target = Path(tmp) / "models" / model.name
        target.parent.mkdir(parents=True)
        try:
            os.link(model, target)
        except OSError:  # another file system, or links not allowed
            shutil.copyfile(model, target)
        rag = RagSystem(settings.with_overrides(data_dir=tmp), sources=[source])
        try:
            rag.migrate()
            yield rag
        finally:
            rag.close()


def _index(rag: Any, total: int, progress: Progress | None) -> float:
    started = time.perf_counter()
    rag.backfill()  # enqueues every document id (the scratch index is empty)
    done = 0

    def on_batch(res: BatchResult) -> None:
        nonlocal done
        done += res.embedded + res.unchanged
        if progress:
            progress("index", min(done, total), total)

    outcome = rag.worker(on_batch=on_batch).drain()
    if outcome.failed_rows:
        first = outcome.errors[0] if outcome.errors else "unknown error"
        raise EmbeddingError(f"{outcome.failed_rows} document(s) could not be indexed; first: {first}")
    return time.perf_counter() - started


@contextmanager
def indexed_collection(
    settings: Settings, data: Dataset, progress: Progress | None = None
) -> Iterator[tuple[Any, float]]:
    """The corpus indexed through queue + worker on a scratch database: ``(RagSystem, seconds)``.

    What :func:`run_eval` searches; benchmarks use it to study variants
    (fusion parameters, fetch depth) on one index.
    """
    with _scratch_system(settings, data.documents) as rag:
        yield rag, _index(rag, len(data.documents), progress)


def _ranked(retriever: Any, text: str, mode: str, *, first_chunk: bool = False) -> list[str] | None:
    """The ranked document ids, or None when the retriever refuses the text (empty, too long)."""
    try:
        hits = retriever.search(
            text,
            RECALL_AT,
            EVAL_CALLER,
            mode,
            Filters(source_types=(DOCUMENT_TYPE,), first_chunk=first_chunk),
            max_chars=100_000,
        )
    except InputError:
        return None
    return [h.source_id for h in hits]


def _id_order(doc: str) -> tuple[int, int | str]:
    """Ascending document id, numerically when the id is a number (the baselines' tie order)."""
    return (0, int(doc)) if doc.isdigit() else (1, doc)


def plain_rrf(
    runs: Sequence[Sequence[str]], *, rrf_k: int = REFERENCE_RRF_K, cut: int = RECALL_AT
) -> list[str]:
    """Reciprocal Rank Fusion as the baselines define it, independent of the product's ``rrf``.

    Each id scores the sum of ``1 / (rrf_k + rank)`` (rank from 1) over the
    runs holding it; ids are ordered by score, ties by ascending id, and the
    list is cut to ``cut`` (bench/data/cranfield/SOURCE.md, "RRF (k=60)").
    """
    score: dict[str, float] = {}
    for run in runs:
        for rank, doc in enumerate(run, 1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(score, key=lambda d: (-score[d], _id_order(d)))[:cut]


def _chunk_count(rag: Any) -> int:
    with rag.engine.connect() as conn:
        return int(
            rag.engine.queue_stats(conn, rag.settings.max_attempts).chunks_by_type.get(DOCUMENT_TYPE, 0)
        )


def run_eval(
    settings: Settings,
    dataset: Path,
    *,
    max_docs: int | None = None,
    max_queries: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Index the collection, search every judged query in every mode, score the runs.

    Returns ``{"semantic": {"ndcg@10": x, "recall@100": y}, "keyword": {...},
    "hybrid": {...}, "documents": n, "queries": m, "details": {...}}``
    (``details.semantic_first_window`` and ``details.rrf_reference``: see the
    module docstring).
    """
    data = load_dataset(dataset, max_docs=max_docs, max_queries=max_queries)
    for warning in data.warnings:
        log.warning("%s", warning)
    judged = data.judged_queries
    scores: dict[str, dict[str, float]] = {}
    timings: dict[str, float] = {}
    refused: set[str] = set()
    runs: dict[str, dict[str, list[str]]] = {}
    with indexed_collection(settings, data, progress) as (rag, index_s):
        retriever = rag.retriever()
        # the three modes, then semantic ranking each record by its first window (FIRST_WINDOW)
        for name, mode, first in [(m, m, False) for m in MODES] + [(FIRST_WINDOW, "semantic", True)]:
            runs[name] = {}
            started = time.perf_counter()
            for n, qid in enumerate(judged, 1):
                ranked = _ranked(retriever, data.queries[qid], mode, first_chunk=first)
                if ranked is None:  # scored as retrieving nothing, like trec_eval -c
                    refused.add(qid)
                runs[name][qid] = ranked or []
                if progress:
                    progress(name, n, len(judged))
            timings[name] = (time.perf_counter() - started) * 1000 / len(judged)
            scores[name] = score_runs(runs[name], data.qrels)
        chunks = _chunk_count(rag)
    # Plain RRF of this run's own lists, as the baselines fuse theirs: hybrid
    # (hybrid_semantic_chunk = FIRST) fuses the first two by construction.
    reference = {
        leg: score_runs({q: plain_rrf([runs[leg][q], runs["keyword"][q]]) for q in judged}, data.qrels)
        for leg in (FIRST_WINDOW, "semantic")
    }
    result: dict[str, Any] = {m: scores[m] for m in MODES}
    result["documents"] = len(data.documents)
    result["queries"] = len(judged)
    result["details"] = {
        "engine": settings.engine_kind,
        "index_seconds": round(index_s, 3),
        "ms_per_query": {m: round(t, 3) for m, t in timings.items()},
        "queries_without_judgements": len(data.queries) - len(judged),
        "queries_refused": sorted(refused),
        "unknown_qrels": data.unknown_qrels,
        "warnings": data.warnings,
        "rrf_k": settings.rrf_k,
        "hybrid_depth": settings.hybrid_depth,
        "weights": {"semantic": settings.semantic_weight, "keyword": settings.keyword_weight},
        "bm25": {"k1": settings.bm25_k1, "b": settings.bm25_b},
        "chunking": {"window": settings.chunk_window, "overlap": settings.chunk_overlap},
        "chunks": chunks,
        "hybrid_semantic_chunk": settings.hybrid_semantic_chunk,
        FIRST_WINDOW: scores[FIRST_WINDOW],
        "rrf_reference": {
            "keyword+semantic_first_window": reference[FIRST_WINDOW],
            "keyword+semantic_nearest_chunk": reference["semantic"],
        },
    }
    return result


__all__ = [
    "DOCUMENT_TYPE",
    "EVAL_CALLER",
    "Dataset",
    "DocumentSource",
    "document_text",
    "indexed_collection",
    "load_dataset",
    "ndcg_at_k",
    "plain_rrf",
    "recall_at_k",
    "run_eval",
    "score_runs",
]
