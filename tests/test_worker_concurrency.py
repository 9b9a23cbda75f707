"""Workers and writers on one embedded database: every row once, no work twice, no writer starved.

On SQLite a worker holds the worker slot (a file lock) from its pick to its
commit, so two processes never take the same row, and an entity whose text
was embedded by one process is a hash match for the other. It embeds with
no transaction open and takes the write lock (``BEGIN IMMEDIATE``) only to
write: the in-process tests below write from inside the model's ``embed``
call, where the old design held the lock (those writes then waited out the
busy timeout and failed).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa
from writepath_helpers import (
    CLI,
    REPO,
    CountingRuntime,
    chunk_content,
    cli_env,
    delete_task,
    embedding_matches_content,
    index_mismatches,
    queue,
    queue_depth,
    run_cli,
    set_title,
    wait_until,
)

from oracle_rag.answering.chat.conversations import ConversationStore, new_conversation_id
from oracle_rag.callers.tokens import create_token
from oracle_rag.indexing.queue import enqueue, enqueue_many
from oracle_rag.indexing.worker import Worker

HELPER = Path(__file__).with_name("writepath_helpers.py")
RESULTS = REPO / "bench" / "results" / "concurrency.json"


class HookedRuntime(CountingRuntime):
    """The real runtime; ``hook(text)`` runs inside every ``embed`` call, after the model."""

    def __init__(self, inner, hook):
        super().__init__(inner)
        self.hook = hook

    def embed(self, text):
        vec = super().embed(text)
        self.hook(text)
        return vec


def hook_embedding(rag, hook):
    rt = HookedRuntime(rag.engine.runtime(), hook)
    rag.engine.set_runtime(rt)
    return rt


def small_batches(rag, batch_size):
    return Worker(rag.engine, rag.indexer, dataclasses.replace(rag.settings, batch_size=batch_size))


def change_titles(rag, task_ids, prefix):
    with rag.engine.begin() as conn:
        for t in task_ids:
            set_title(conn, t, f"{prefix} {t}")


def test_writers_complete_while_the_worker_embeds(demo_rag):
    """One product write (token, enqueue, chat turn) from inside every embedding of a
    sustained drain; each must succeed. Holding the write lock while embedding would make each
    one wait for the batch that is waiting for it: SQLITE_BUSY after the busy timeout."""
    change_titles(demo_rag, range(1, 41), "Writers meanwhile")
    store = ConversationStore(demo_rag.engine)
    conversation = new_conversation_id()
    writes: list[str] = []
    failures: list[str] = []

    def write(_text):
        n = len(writes) + len(failures)
        try:
            if n % 3 == 0:
                create_token(demo_rag.engine, 1, label=f"during indexing {n}")
            elif n % 3 == 1:
                with demo_rag.engine.begin() as conn:
                    enqueue(conn, "PROJECT", 1 + n % 6)
            else:
                store.append_turn(conversation, 1, f"question {n}", f"answer {n}", [], new=n == 2)
            writes.append(str(n))
        except Exception as exc:  # collected, asserted below
            failures.append(f"write {n}: {exc}")

    rt = hook_embedding(demo_rag, write)
    res = small_batches(demo_rag, 8).drain()
    assert failures == []
    assert res.embedded >= 40 and len(writes) == rt.calls >= 40
    assert res.failed_rows == 0 and queue(demo_rag) == []
    assert index_mismatches(demo_rag) == []
    with demo_rag.engine.connect() as conn:
        assert conn.execute(
            sa.text("SELECT COUNT(*) FROM RAG_API_TOKEN WHERE LABEL LIKE 'during indexing %'")
        ).scalar_one() == sum(1 for w in writes if int(w) % 3 == 0)


def test_an_entity_changed_while_its_batch_embeds_is_redone(demo_rag):
    change_titles(demo_rag, [5, 6], "Before")
    changed = []

    def change(text):
        if "Before 5" in text and not changed:
            with demo_rag.engine.begin() as conn:  # the application commits while the worker embeds
                set_title(conn, 5, "After 5")
            changed.append(5)

    hook_embedding(demo_rag, change)
    first = demo_rag.worker().run_once()
    assert changed == [5] and first.embedded == 2 and first.deferred_rows == 0
    assert chunk_content(demo_rag, "TASK", 5).startswith(
        "[TASK #5] Before 5"
    )  # what was read and embedded...
    assert [(r[1], r[2]) for r in queue(demo_rag)] == [("TASK", "5")]  # ...and the change's own row, kept
    demo_rag.worker().drain()
    assert chunk_content(demo_rag, "TASK", 5).startswith("[TASK #5] After 5")
    assert queue(demo_rag) == [] and index_mismatches(demo_rag) == []


def test_a_record_written_by_someone_else_meanwhile_is_left_for_the_next_batch(demo_rag):
    """The re-check in the write transaction: a record whose stored state changed since the plan
    (here another writer indexed it directly) is not overwritten; its rows stay and are redone."""
    change_titles(demo_rag, [7, 8], "Raced")
    done = []

    def race(text):
        if "Raced 7" in text and not done:
            done.append(7)  # first: the direct re-index below embeds through this runtime too
            with demo_rag.engine.begin() as conn:
                demo_rag.indexer.reindex(conn, "TASK", "7")

    rt = hook_embedding(demo_rag, race)
    first = demo_rag.worker().run_once()
    assert (first.picked, first.deferred_rows, first.embedded, first.failed_rows) == (
        2,
        1,
        1,
        0,
    )  # task 8 only
    assert [(r[1], r[2]) for r in queue(demo_rag)] == [("TASK", "7")]
    calls = rt.calls
    second = demo_rag.worker().run_once()
    assert (second.picked, second.unchanged, second.embedded) == (1, 1, 0)  # already in step: no embedding
    assert rt.calls == calls
    assert queue(demo_rag) == [] and index_mismatches(demo_rag) == []


def test_two_workers_in_one_process_never_prepare_the_same_rows(demo_rag):
    """The worker slot: a second worker started while the first embeds waits for its commit,
    then takes the rows the first did not."""
    change_titles(demo_rag, range(41, 49), "Slot")
    second: list = []
    threads: list[threading.Thread] = []

    def start_second(_text):
        if not threads:
            th = threading.Thread(target=lambda: second.append(small_batches(demo_rag, 4).run_once()))
            threads.append(th)
            th.start()

    rt = hook_embedding(demo_rag, start_second)
    first = small_batches(demo_rag, 4).run_once()
    threads[0].join()
    assert (first.picked, second[0].picked) == (4, 4)
    assert first.embedded + second[0].embedded == 8 and rt.calls == 8  # no text embedded twice
    assert queue(demo_rag) == [] and index_mismatches(demo_rag) == []


_SUMMARY = re.compile(r"picked (\d+), embedded (\d+), unchanged (\d+), deleted (\d+), failed rows (\d+)")


def test_two_worker_processes_drain_2000_rows_exactly_once(demo_rag, data_dir, tmp_path):
    """2000 rows over the 354 indexed entities: 60 changed, 20 deleted, the rest unchanged.

    Cheap on purpose: only the 60 changed tasks need an embedding, so the
    test measures the queue, not the model.
    """
    rng = random.Random(2000)
    changed = set(rng.sample(range(1, 281), 60))
    deleted = set(range(281, 301))
    with demo_rag.engine.begin() as conn:
        for t in changed:
            set_title(conn, t, f"Two workers {t}", enqueue=False)
        for t in deleted:
            delete_task(conn, t, enqueue=False)
    keys = (
        [("TASK", t) for t in range(1, 301)]
        + [("SPRINT", s) for s in range(1, 49)]
        + [("PROJECT", p) for p in range(1, 7)]
    )
    rows = [
        (t, i, "DELETE" if t == "TASK" and i in deleted and rng.random() < 0.5 else "UPSERT")
        for t, i in (rng.choice(keys) for _ in range(2000 - len(changed) - len(deleted)))
    ]
    rows += [("TASK", t, "UPSERT") for t in changed] + [("TASK", t, "DELETE") for t in deleted]
    rng.shuffle(rows)
    with demo_rag.engine.begin() as conn:
        enqueue_many(conn, rows)
    assert queue_depth(demo_rag) == 2000

    env = cli_env(data_dir, batch_size=16, embedding_threads=1)
    procs = [
        subprocess.Popen(
            CLI + ["worker", "--once"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    summaries = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        summaries.append([int(x) for x in _SUMMARY.search(out).groups()])
    picked = [s[0] for s in summaries]
    embedded = [s[1] for s in summaries]
    duplicates = sum(embedded) - len(changed)
    print(f"\ntwo workers: picked {picked}, embedded {embedded}, duplicate embeddings {duplicates}")
    assert sum(picked) == 2000  # every row taken exactly once across both processes
    # How the rows split is up to SQLite's lock, which is not fair: the process
    # that commits a batch usually wins the next BEGIN IMMEDIATE too, so one
    # process may take every batch while the other waits (docs/write-path.md).
    assert duplicates == 0
    assert sum(s[3] for s in summaries) == len(deleted)
    assert sum(s[4] for s in summaries) == 0
    assert queue(demo_rag) == []
    assert index_mismatches(demo_rag) == []


@pytest.mark.slow
def test_three_workers_and_a_writer_for_20_seconds(demo_rag, data_dir, tmp_path):
    """The index ends in step and no embedding is done twice."""
    with demo_rag.engine.connect() as conn:
        seq_start = (
            conn.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'RAG_DIRTY'")).scalar() or 0
        )
    env = cli_env(data_dir)
    workers = []
    for n in range(3):
        log = tmp_path / f"worker{n}.log"
        workers.append(
            (
                log,
                subprocess.Popen(
                    [
                        sys.executable,
                        str(HELPER),
                        "worker",
                        "--data-dir",
                        str(data_dir),
                        "--log",
                        str(log),
                        "--batch-size",
                        "8",
                        "--poll-ms",
                        "50",
                    ],
                    env=env,
                    cwd=tmp_path,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        )
    writer_out = tmp_path / "writer.json"
    started = time.monotonic()
    writer = subprocess.run(
        [
            sys.executable,
            str(HELPER),
            "writer",
            "--data-dir",
            str(data_dir),
            "--seconds",
            "20",
            "--min-writes",
            "60",
            "--out",
            str(writer_out),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert writer.returncode == 0, writer.stderr
    wait_until(lambda: queue_depth(demo_rag) == 0, "the workers to drain the queue")
    elapsed = time.monotonic() - started
    for _log, proc in workers:
        proc.send_signal(signal.SIGTERM)
    for _log, proc in workers:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "Traceback" not in err

    final = run_cli(["worker", "--once"], env, cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    assert "picked 0," in final.stdout

    with demo_rag.engine.connect() as conn:
        seq_end = conn.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'RAG_DIRTY'")).scalar()
    rows_enqueued = seq_end - seq_start
    per_worker = []
    all_embeds: list[str] = []
    for log, _proc in workers:
        batches = [line.split() for line in log.read_text().splitlines()]
        embeds = Path(str(log) + ".embeds").read_text().split() if Path(str(log) + ".embeds").exists() else []
        all_embeds += embeds
        per_worker.append(
            {
                "batches": len(batches),
                "rows": sum(int(b[1]) for b in batches),
                "embeddings": len(embeds),
                "failed_rows": sum(int(b[3]) for b in batches),
            }
        )
    duplicates = sum(c - 1 for c in Counter(all_embeds).values())
    writes = json.loads(writer_out.read_text())
    result = {
        "workers": 3,
        "writer_seconds": 20,
        "elapsed_s": round(elapsed, 1),
        "writes": writes["writes"],
        "writes_by_action": writes["by_action"],
        "queue_rows_enqueued": rows_enqueued,
        "queue_rows_processed": sum(w["rows"] for w in per_worker),
        "embeddings": len(all_embeds),
        "distinct_texts_embedded": len(set(all_embeds)),
        "duplicate_embeddings": duplicates,
        "per_worker": per_worker,
        "engine": "sqlite",
    }
    print("\nconcurrency:", json.dumps(result))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")

    assert writes["writes"] > 50
    assert all(w["rows"] > 0 for w in per_worker), per_worker
    assert result["queue_rows_processed"] == rows_enqueued  # every row exactly once
    assert sum(w["failed_rows"] for w in per_worker) == 0
    assert queue(demo_rag) == []
    assert index_mismatches(demo_rag) == []
    assert duplicates == 0
    with demo_rag.engine.connect() as conn:
        recent = [
            (r[0], str(r[1]))
            for r in conn.execute(
                sa.text("SELECT SOURCE_TYPE, SOURCE_ID FROM RAG_CHUNK ORDER BY UPDATED_AT DESC LIMIT 15")
            )
        ]
    assert embedding_matches_content(demo_rag, recent) == []
