"""Indexing throughput on the embedded engine vs the raw model, and the cost of a no-op re-run.

1. Seed the demo data set (2000 tasks + 48 sprints + 6 projects) into a fresh
   database with an empty RAG_CHUNK.
2. ``backfill`` + worker batches until the queue is empty. After every
   worker batch, the very texts that batch embedded are embedded again
   with ``EmbeddingRuntime.embed`` (same runtime, same session) and timed:
   the two measurements are paired batch by batch, so the machine's load
   (2 shared cores here) hits both nearly alike. ratio = indexing chunks/s
   divided by raw texts/s (goal >= 0.9).
3. Re-run with nothing changed: ``backfill --all`` + drain. Reports the
   time and the embedding calls (goal: 0 calls, >= 50x faster than step 2).
4. Reassignment: ``--reassign`` tasks (default 200) move to a namesake of
   their assignee (a new employee with the same name, so the rendered text is
   unchanged and only the owner differs), enqueued in the same transaction;
   drain. Reports the embedding calls (goal: 0: the scope columns are
   rewritten, nothing is re-embedded) and checks every chunk of those tasks
   now carries the new owner.

Run: ``.venv/bin/python bench/indexing.py`` (a few minutes on 2 busy cores).
Writes ``bench/results/indexing.json``. ``--profile`` adds a cProfile of the
indexing step (top functions by own time) to the output.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "indexing.json"
sys.path.insert(0, str(ROOT))


class Counting:
    """The engine's runtime, counting calls and keeping the texts of the current batch."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.batch: list[str] = []

    def embed(self, text: str) -> Any:
        self.calls += 1
        self.batch.append(text)
        return self.inner.embed(text)

    def to_blob(self, vec: Any) -> bytes:
        return self.inner.to_blob(vec)

    def primed(self, texts: Any) -> Any:
        """The engine embeds each write batch ahead with embed_batch; embed then reads the memo."""
        return self.inner.primed(texts)


def reassign(rag: Any, count: int, counting: Counting) -> dict[str, Any]:
    """Move ``count`` tasks to namesakes of their assignees; drain; count embedding calls."""
    import sqlalchemy as sa

    with rag.engine.begin() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT t.TASK_ID, e.FIRST_NAME, e.LAST_NAME FROM TASK t JOIN EMPLOYEE e ON e.EMPLOYEE_ID = t.ASSIGNEE_ID "
                "ORDER BY t.TASK_ID"
            )
        ).fetchall()[:count]
        base = int(conn.execute(sa.text("SELECT MAX(EMPLOYEE_ID) FROM EMPLOYEE")).scalar_one())
        for n, (task_id, first, last) in enumerate(rows, 1):
            conn.execute(
                sa.text(
                    "INSERT INTO EMPLOYEE (EMPLOYEE_ID, FIRST_NAME, LAST_NAME, ROLE) "
                    "VALUES (:e, :f, :l, 'developer')"
                ),
                {"e": base + n, "f": first, "l": last},
            )
            conn.execute(
                sa.text("UPDATE TASK SET ASSIGNEE_ID = :e WHERE TASK_ID = :t"), {"e": base + n, "t": task_id}
            )
            rag.enqueue(conn, "TASK", task_id)
    counting.calls = 0
    t0 = time.perf_counter()
    drained = rag.worker().drain()
    seconds = time.perf_counter() - t0
    with rag.engine.connect() as conn:
        owners = dict(
            conn.execute(
                sa.text(
                    "SELECT CAST(SOURCE_ID AS INTEGER), MIN(OWNER_ID) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' "
                    "GROUP BY SOURCE_ID HAVING MIN(OWNER_ID) = MAX(OWNER_ID)"
                )
            ).fetchall()
        )
    moved = sum(1 for n, (task_id, _, _) in enumerate(rows, 1) if owners.get(int(task_id)) == base + n)
    return {
        "tasks": len(rows),
        "rows_picked": drained.picked,
        "embedding_calls": counting.calls,
        "chunks_with_new_owner": moved,
        "drain_s": round(seconds, 3),
        "goal_embedding_calls": 0,
    }


def run(
    tasks: int, data_dir: Path, batch_size: int, threads: int, profile: bool, reassign_count: int = 200
) -> dict[str, Any]:
    from oracle_rag.config import load_settings
    from oracle_rag.demo.seed import seed
    from oracle_rag.embedding import ensure_model
    from oracle_rag.system import RagSystem

    ensure_model(data_dir)
    settings = load_settings(env={}, data_dir=str(data_dir), batch_size=batch_size, embedding_threads=threads)
    rag = RagSystem(settings)
    rag.migrate(demo=True)
    seed(rag.engine, tasks)
    runtime = rag.engine.runtime()
    runtime.load()
    runtime.embed("warm-up")
    counting = Counting(runtime)
    rag.engine.set_runtime(counting)
    load_start = os.getloadavg()

    # -- first run: empty index --------------------------------------------------
    t0 = time.perf_counter()
    report = rag.backfill()
    backfill_s = time.perf_counter() - t0
    worker = rag.worker()
    index_s = raw_s = raw_batch_s = 0.0
    chunks = batches = 0
    profiler = cProfile.Profile() if profile else None
    while True:
        counting.batch = []
        t0 = time.perf_counter()
        if profiler:
            profiler.enable()
        res = worker.run_once()
        if profiler:
            profiler.disable()
        index_s += time.perf_counter() - t0
        if res.idle:
            break
        if res.failed_rows:
            raise SystemExit(f"indexing failed: {res.errors[:3]}")
        batches += 1
        chunks += res.embedded
        texts = list(counting.batch)
        t0 = time.perf_counter()
        for text in texts:  # the same texts, the same session: the raw model's cost
            runtime.embed(text)
        raw_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        runtime.embed_batch(texts)  # the batched path alone on the same texts
        raw_batch_s += time.perf_counter() - t0
    first_total_s = backfill_s + index_s
    calls_first = counting.calls

    # -- second run: nothing changed -------------------------------------------------
    counting.calls = 0
    t0 = time.perf_counter()
    report_all = rag.backfill(all_entities=True)
    rerun_backfill_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    drained = worker.drain()
    rerun_drain_s = time.perf_counter() - t0
    rerun_total_s = rerun_backfill_s + rerun_drain_s
    with rag.engine.connect() as conn:
        stats = rag.engine.queue_stats(conn, settings.max_attempts)
    reassigned = reassign(rag, reassign_count, counting)
    rag.close()

    chunks_per_s = chunks / first_total_s
    raw_per_s = calls_first / raw_s
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "load_average": {
            "start": [round(x, 2) for x in load_start],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
        "settings": {
            "tasks": tasks,
            "batch_size": batch_size,
            "embedding_threads": threads or os.cpu_count(),
        },
        "first_run": {
            "entities_enqueued": report.total,
            "chunks": chunks,
            "chunks_by_type": stats.chunks_by_type,
            "embedding_calls": calls_first,
            "worker_batches": batches,
            "backfill_s": round(backfill_s, 3),
            "worker_s": round(index_s, 3),
            "total_s": round(first_total_s, 3),
            "chunks_per_s": round(chunks_per_s, 2),
        },
        "raw_model": {
            "texts": calls_first,
            "seconds": round(raw_s, 3),
            "texts_per_s": round(raw_per_s, 2),
            "method": "EmbeddingRuntime.embed on the texts each worker batch embedded, "
            "timed right after that batch (paired, same session)",
        },
        "ratio_to_raw": round(chunks_per_s / raw_per_s, 3),
        "raw_batched": {
            "texts_per_s": round(calls_first / raw_batch_s, 2),
            "batch_status": runtime.batch_status(),
            "method": "EmbeddingRuntime.embed_batch on the same texts, timed right after each batch",
        },
        "ratio_to_raw_batched": round(chunks_per_s / (calls_first / raw_batch_s), 3),
        "goal_ratio": 0.9,
        "overhead_s": round(first_total_s - raw_s, 3),
        "rerun_nothing_changed": {
            "entities_enqueued": report_all.total,
            "rows_picked": drained.picked,
            "unchanged": drained.unchanged,
            "embedding_calls": counting.calls,
            "backfill_s": round(rerun_backfill_s, 3),
            "drain_s": round(rerun_drain_s, 3),
            "total_s": round(rerun_total_s, 3),
            "speedup_vs_first_run": round(first_total_s / rerun_total_s, 1),
        },
        "goal_rerun": {"embedding_calls": 0, "speedup": 50},
        "reassignment": reassigned,
    }
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        result["profile_top_tottime"] = out.getvalue().splitlines()[:40]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime threads (0 = one per core)")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a temporary directory")
    parser.add_argument("--profile", action="store_true", help="cProfile the indexing step")
    parser.add_argument("--reassign", type=int, default=200, help="tasks moved to a namesake in step 4")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oracle-rag-bench-") as tmp:
        data_dir = args.data_dir or Path(tmp)
        model = os.environ.get("ORACLE_RAG_TEST_MODEL")  # reuse a built model when given
        target = data_dir / "models" / "all-MiniLM-L6-v2.onnx"
        if model and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(model, target)
        result = run(args.tasks, data_dir, args.batch_size, args.threads, args.profile, args.reassign)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    first, rerun = result["first_run"], result["rerun_nothing_changed"]
    print(
        f"\nindexing: {first['chunks']} chunks in {first['total_s']} s = {first['chunks_per_s']}/s; "
        f"raw model {result['raw_model']['texts_per_s']}/s; ratio {result['ratio_to_raw']} (goal >= 0.9)\n"
        f"re-run, nothing changed: {rerun['total_s']} s, {rerun['embedding_calls']} embedding calls, "
        f"{rerun['speedup_vs_first_run']}x faster (goal 0 calls, >= 50x)\n"
        f"reassignment of {result['reassignment']['tasks']} tasks: {result['reassignment']['embedding_calls']} "
        f"embedding calls (goal 0), {result['reassignment']['chunks_with_new_owner']} with the new owner",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
