"""Helpers shared by the write-path tests (enqueue, worker, indexer, crash, concurrency).

Also a small command line for the multi-process tests: ``python
tests/writepath_helpers.py worker ...`` runs the library's Worker loop in a
process of its own with an instrumented runtime that appends the SHA-256 of
every text it embeds to ``LOG.embeds`` (and one line per batch to ``LOG``),
so a test can count work done twice across processes; ``writer ...``
changes entities through the ORM models for a while.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from oracle_rag.engines import content_hash
from oracle_rag.errors import EmbeddingError

REPO = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).with_name("oracle-rag")
# The installed console script, as an operator runs it.
CLI = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "oracle_rag.cli"]


# --- an instrumented runtime (what the brief allows instead of mocks) --------
class CountingRuntime:
    """Wraps the real EmbeddingRuntime: counts texts, can refuse some, can log them.

    ``fail_if(text)`` returning true raises :class:`EmbeddingError` for that
    text, the way a broken model would, without touching the real model.
    """

    def __init__(
        self, inner: Any, fail_if: Callable[[str], bool] | None = None, log_path: Path | None = None
    ) -> None:
        self.inner = inner
        self.fail_if = fail_if
        self.calls = 0
        self.texts: list[str] = []
        self._log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115
        self._lock = threading.Lock()

    def embed(self, text: str) -> Any:
        if self.fail_if is not None and self.fail_if(text):
            raise EmbeddingError("test runtime refused this text")
        vec = self.inner.embed(text)
        with self._lock:
            self.calls += 1
            self.texts.append(text)
            if self._log is not None:
                self._log.write(hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")
        return vec

    def to_blob(self, vec: Any) -> bytes:
        return self.inner.to_blob(vec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def instrument(rag: Any, **kwargs: Any) -> CountingRuntime:
    """Put a CountingRuntime around the engine's real runtime and return it."""
    rt = CountingRuntime(rag.engine.runtime(), **kwargs)
    rag.engine.set_runtime(rt)
    return rt


# --- reading the state back ---------------------------------------------------
def expected_chunks(rag: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Every entity rendered now by the registered sources: what RAG_CHUNK must hold per record.

    ``content`` is the record's whole text (what its chunks, in order, cover);
    ``hash`` the record hash every chunk carries; ``chunks`` their number.
    """
    from oracle_rag.engines.indexed_columns import by_facet, indexed_values
    from oracle_rag.indexing.record_writes import record_write
    from oracle_rag.text.chunking import plan_of

    plan = plan_of(rag.settings)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    with rag.engine.connect() as conn:
        for source in rag.sources:
            docs = source.load_many(conn, source.all_ids(conn))
            for doc in docs.values():
                record = record_write(plan, doc.source_type, doc.source_id, doc.content)
                out[(doc.source_type, doc.source_id)] = {
                    "content": doc.content,
                    "hash": record.record_hash,
                    "owner_id": doc.owner_id,
                    **by_facet(indexed_values(doc.facets, source.indexed_facets())),
                    "chunks": len(record.chunks),
                    "parts": [c.content for c in record.chunks],
                }
    return out


def stored_chunks(rag: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """RAG_CHUNK per record: chunk 0's columns, ``content`` the whole text when it is one chunk,
    ``parts`` every chunk's text in order."""
    with rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT SOURCE_TYPE, SOURCE_ID, CONTENT, CONTENT_HASH, OWNER_ID, PROJECT_ID, SPRINT_ID, "
                "length(EMBEDDING), CHUNK_NO FROM RAG_CHUNK ORDER BY SOURCE_TYPE, SOURCE_ID, CHUNK_NO"
            )
        ).fetchall()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r[0], str(r[1]))
        if key not in out:
            out[key] = {
                "content": r[2],
                "hash": r[3],
                "owner_id": r[4],
                "project_id": r[5],
                "sprint_id": r[6],
                "embedding_bytes": r[7],
                "chunks": 0,
                "parts": [],
                "hashes": set(),
                "owners": set(),
            }
        rec = out[key]
        rec["chunks"] += 1
        rec["parts"].append(r[2])
        rec["hashes"].add(r[3])
        rec["owners"].add(r[4])
        if r[7] != 1536:
            rec["embedding_bytes"] = r[7]
    return out


def index_mismatches(rag: Any) -> list[str]:
    """Differences between RAG_CHUNK and the current entities (empty when in step)."""
    want, have = expected_chunks(rag), stored_chunks(rag)
    problems = [f"missing chunk {k}" for k in sorted(set(want) - set(have))]
    problems += [f"chunk of a deleted entity {k}" for k in sorted(set(have) - set(want))]
    for key in sorted(set(want) & set(have)):
        w, h = want[key], have[key]
        for col in ("hash", "owner_id", "project_id", "sprint_id", "chunks", "parts"):
            if w[col] != h[col]:
                problems.append(f"{key} {col}: stored {h[col]!r} != expected {w[col]!r}")
        if len(h["hashes"]) != 1 or len(h["owners"]) != 1:
            problems.append(f"{key}: chunks of one record disagree on hash or owner")
        if h["chunks"] == 1 and h["hash"] != content_hash(h["content"]):
            problems.append(f"{key}: CONTENT_HASH is not sha256(CONTENT)")
        if h["embedding_bytes"] != 1536:
            problems.append(f"{key}: embedding has {h['embedding_bytes']} bytes")
    return problems + postings_out_of_step(rag)


def postings_out_of_step(rag: Any) -> list[str]:
    """Postings whose carried record columns differ from their chunk 0 (or of a chunk with no analysis).

    The keyword statement reads only RAG_CHUNK_TERM (engine_sql.POSTING_COLUMNS), so every write
    path must keep them equal to the record's chunk 0 (SQLite's ``IS NOT``: NULL-safe).
    """
    from oracle_rag.engines.engine_sql import POSTING_COLUMNS

    differs = " OR ".join(f"t.{col} IS NOT c.{col}" for col in POSTING_COLUMNS)
    with rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT c.SOURCE_TYPE, c.SOURCE_ID, t.TERM FROM RAG_CHUNK_TERM t "
                "LEFT JOIN RAG_CHUNK c ON c.CHUNK_ID = t.CHUNK_ID "
                f"WHERE c.CHUNK_ID IS NULL OR c.CHUNK_NO <> 0 OR c.TERM_COUNT IS NULL OR {differs} "
                "ORDER BY 1, 2, 3"
            )
        ).fetchall()
    return [f"({r[0]}, {r[1]}) posting {r[2]!r} out of step with its chunk 0" for r in rows]


def embedding_matches_content(rag: Any, keys: list[tuple[str, str]]) -> list[str]:
    """Check the stored vectors of ``keys`` equal a fresh embedding of their CONTENT."""
    import numpy as np

    from oracle_rag.engines import embed_text

    rt = rag.engine.runtime()
    problems = []
    with rag.engine.connect() as conn:
        for t, i in keys:
            content, blob = conn.execute(
                sa.text(
                    "SELECT CONTENT, EMBEDDING FROM RAG_CHUNK WHERE SOURCE_TYPE = :t AND SOURCE_ID = :i "
                    "AND CHUNK_NO = 0"
                ),
                {"t": t, "i": i},
            ).one()
            stored = np.frombuffer(blob, dtype="<f4")
            fresh = rt.embed(embed_text(content))
            if float(np.dot(stored, fresh)) < 0.99999:
                problems.append(f"{(t, i)}: stored embedding is not the embedding of its content")
    return problems


def queue(rag: Any) -> list[tuple[int, str, str, str, int, str | None]]:
    with rag.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.text(  # type: ignore[misc]
                    "SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, LAST_ERROR FROM RAG_DIRTY "
                    "ORDER BY DIRTY_ID"
                )
            ).fetchall()
        ]


def queue_depth(rag: Any) -> int:
    with rag.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT COUNT(*) FROM RAG_DIRTY")).scalar_one())


def chunk_content(rag: Any, source_type: str, source_id: Any) -> str | None:
    with rag.engine.connect() as conn:
        return conn.execute(
            sa.text(
                "SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = :t AND SOURCE_ID = :i AND CHUNK_NO = 0"
            ),
            {"t": source_type, "i": str(source_id)},
        ).scalar()


# --- writing like a host application ------------------------------------------
def set_title(conn: sa.Connection, task_id: int, title: str, *, enqueue: bool = True) -> None:
    from oracle_rag.indexing.queue import enqueue as enq

    conn.execute(sa.text("UPDATE TASK SET TITLE = :t WHERE TASK_ID = :i"), {"t": title, "i": task_id})
    if enqueue:
        enq(conn, "TASK", task_id, "UPSERT")


def delete_task(conn: sa.Connection, task_id: int, *, enqueue: bool = True) -> None:
    from oracle_rag.indexing.queue import enqueue as enq

    conn.execute(sa.text("DELETE FROM TASK_COMMENT WHERE TASK_ID = :i"), {"i": task_id})
    conn.execute(sa.text("DELETE FROM TASK WHERE TASK_ID = :i"), {"i": task_id})
    if enqueue:
        enq(conn, "TASK", task_id, "DELETE")


# --- the CLI as a subprocess --------------------------------------------------
def cli_env(data_dir: Path, **settings: Any) -> dict[str, str]:
    """An environment for ``oracle-rag`` on ``data_dir``: no inherited ORACLE_RAG_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORACLE_RAG_")}
    env["ORACLE_RAG_DATA_DIR"] = str(data_dir)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for key, value in settings.items():
        env[f"ORACLE_RAG_{key.upper()}"] = str(value)
    return env


def cli_settings_env(data_dir: Path, **settings: Any) -> dict[str, str | None]:
    """The same, as overrides for click's CliRunner (None unsets a variable)."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ORACLE_RAG_")}
    env["ORACLE_RAG_DATA_DIR"] = str(data_dir)
    for key, value in settings.items():
        env[f"ORACLE_RAG_{key.upper()}"] = str(value)
    return env


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``oracle-rag ARGS``; the timeout only guards against a hang."""
    return subprocess.run(CLI + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def wait_until(predicate: Callable[[], bool], what: str, limit_s: float = 300, step: float = 0.02) -> None:
    """Poll ``predicate``; the limit only guards against a hang, it asserts no speed."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(step)


# --- a worker process with an instrumented runtime ------------------------------
def _worker_main(args: argparse.Namespace) -> None:
    import logging
    import signal

    from oracle_rag.config import load_settings
    from oracle_rag.indexing.worker import install_signal_handlers
    from oracle_rag.system import RagSystem

    logging.basicConfig(level=logging.WARNING)
    settings = load_settings(
        env={},
        data_dir=args.data_dir,
        batch_size=args.batch_size,
        worker_poll_ms=args.poll_ms,
        worker_initial_delay_ms=0,
    )
    rag = RagSystem(settings)
    log = open(args.log, "a", buffering=1)  # noqa: SIM115
    instrument(rag, log_path=Path(args.log + ".embeds"))
    stop = threading.Event()
    install_signal_handlers(stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    w = rag.worker(on_batch=lambda r: log.write(f"batch {r.picked} {r.embedded} {r.failed_rows}\n"))
    if args.once:
        w.drain()
    else:
        w.run(stop, initial_delay=False)
    rag.close()


def _writer_main(args: argparse.Namespace) -> None:
    """Change entities through the ORM (hooks enqueue) for ``--seconds`` and at least
    ``--min-writes`` changes; every text is new.

    The minimum makes the amount of concurrent work independent of how loaded
    the machine is (a busy CI host writes slower, it does not write less).

    No change ever brings an entity back to an earlier text (titles, bodies
    and names carry a counter), so embedding the same text twice can only
    mean work done twice by the workers.
    """
    import json
    import random

    from sqlalchemy.orm import sessionmaker

    from oracle_rag.config import load_settings
    from oracle_rag.demo.models import Project, Sprint, Task, TaskComment, track_reference_models
    from oracle_rag.system import RagSystem

    rng = random.Random(args.seed)
    rag = RagSystem(load_settings(env={}, data_dir=args.data_dir))
    # BEGIN IMMEDIATE: a transaction that reads and then writes must take
    # the write lock up front on SQLite (WAL), or the upgrade fails with
    # SQLITE_BUSY instead of waiting when a worker committed in between.
    factory = sessionmaker(rag.engine.sa_engine.execution_options(sqlite_begin="IMMEDIATE"))
    track_reference_models(factory)
    counts: dict[str, int] = {}
    n = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline or n < args.min_writes:
        n += 1
        action = rng.choices(
            ["title", "comment", "edit_comment", "delete", "insert", "sprint", "project"],
            [40, 20, 10, 5, 10, 3, 2],
        )[0]
        with factory.begin() as s:
            task_ids = list(s.scalars(sa.select(Task.task_id)))
            if not task_ids:
                action = "insert"
            if action == "title":
                s.get(Task, rng.choice(task_ids)).title = f"Concurrent change {n}"
            elif action == "comment":
                s.add(
                    TaskComment(task_id=rng.choice(task_ids), author_id=rng.randint(9, 40), body=f"note {n}")
                )
            elif action == "edit_comment":
                comment = s.scalars(sa.select(TaskComment).order_by(sa.func.random()).limit(1)).first()
                if comment is not None:
                    comment.body = f"edited {n}"
            elif action == "delete":
                s.delete(s.get(Task, rng.choice(task_ids)))
            elif action == "insert":
                s.add(
                    Task(
                        title=f"New task {n}",
                        status="TODO",
                        priority="LOW",
                        project_id=rng.randint(1, 6),
                        sprint_id=None,
                        assignee_id=rng.randint(9, 40),
                    )
                )
            elif action == "sprint":
                s.get(Sprint, rng.randint(1, 48)).name = f"Sprint renamed {n}"
            else:
                s.get(Project, rng.randint(1, 6)).description = f"Description {n}"
        counts[action] = counts.get(action, 0) + 1
        time.sleep(rng.uniform(0, args.pause))
    Path(args.out).write_text(json.dumps({"writes": n, "by_action": counts}))
    rag.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="writepath_helpers")
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="run an instrumented worker")
    w.add_argument("--data-dir", required=True)
    w.add_argument("--log", required=True)
    w.add_argument("--batch-size", type=int, default=8)
    w.add_argument("--poll-ms", type=int, default=50)
    w.add_argument("--once", action="store_true")
    wr = sub.add_parser("writer", help="change entities through the ORM for a while")
    wr.add_argument("--data-dir", required=True)
    wr.add_argument("--seconds", type=float, default=20)
    wr.add_argument("--min-writes", type=int, default=0)
    wr.add_argument("--seed", type=int, default=7)
    wr.add_argument("--pause", type=float, default=0.05)
    wr.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "worker":
        _worker_main(args)
    else:
        _writer_main(args)


if __name__ == "__main__":
    main()
