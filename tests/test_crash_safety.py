"""SIGKILL the worker at random points; nothing is lost or half-done.

A real ``oracle-rag worker`` process (small batches, short poll) drains
3,000 queued changes on the embedded engine: upserts of existing entities
(mostly unchanged text), title and comment changes made between kills, and
deletes. It is killed with SIGKILL 20 times (seeded RNG) and restarted
each time: a quarter of the kills come after a random delay (start-up
included), the rest after a random share of the queued rows was processed
plus a random few milliseconds, so they land inside batches whatever the
machine's speed. A batch's rows are deleted in the transaction that writes
its chunks, so a kill leaves the batch in flight with its queue rows intact. At the end,
after one clean ``worker --once``, every entity's chunk must equal its
current rendered text and hash, no deleted entity may keep a chunk, and the
queue must be empty with nothing parked.

the embedded engine's worker embeds a batch before it takes the
write lock. ``test_kills_between_embedding_and_writing`` kills it exactly
there (its write transaction just begun, the vectors in memory, nothing
written) several times, with the application changing entities in between.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa
from writepath_helpers import (
    CLI,
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

from oracle_rag.indexing.queue import enqueue_many

TOTAL_ROWS = 3000
KILLS = 20


def all_keys(conn):
    tasks = [("TASK", r[0]) for r in conn.execute(sa.text("SELECT TASK_ID FROM TASK"))]
    return tasks + [("SPRINT", s) for s in range(1, 49)] + [("PROJECT", p) for p in range(1, 7)]


def changes(conn, rng, round_no, rows, touched, deleted):
    """One round of application writes, each with its queue row, shuffled among filler rows.

    ``rows`` queue rows in all: 10 title changes, a new comment and a task
    delete (which need an embedding or a chunk delete), the rest UPSERTs of
    random entities (unchanged text: a hash comparison), including stale
    rows for tasks deleted earlier.
    """
    tasks = [r[0] for r in conn.execute(sa.text("SELECT TASK_ID FROM TASK"))]
    keys = all_keys(conn) + [("TASK", int(d)) for d in deleted]
    ops = [("title", t) for t in rng.sample(tasks, 10)] + [("comment", rng.choice(tasks))]
    ops += [("delete", rng.choice([t for t in tasks if t not in {o[1] for o in ops}]))]
    ops += [("filler", rng.choice(keys)) for _ in range(rows - len(ops))]
    rng.shuffle(ops)
    for op, arg in ops:
        if op == "title":
            set_title(conn, arg, f"Round {round_no} change to task {arg}")
            touched.add(("TASK", str(arg)))
        elif op == "comment":
            conn.execute(
                sa.text("INSERT INTO TASK_COMMENT (TASK_ID, AUTHOR_ID, BODY) VALUES (:t, 9, :b)"),
                {"t": arg, "b": f"Comment from round {round_no}"},
            )
            enqueue_many(conn, [("TASK", arg, "UPSERT")])
            touched.add(("TASK", str(arg)))
        elif op == "delete":
            delete_task(conn, arg)
            deleted.add(str(arg))
        else:
            enqueue_many(conn, [(arg[0], arg[1], "UPSERT")])


@pytest.mark.slow
def test_random_sigkills_lose_nothing(demo_rag, data_dir, tmp_path):
    rng = random.Random(1010)
    env = cli_env(data_dir, batch_size=4, worker_poll_ms=50, worker_initial_delay_ms=0, embedding_threads=1)
    touched: set[tuple[str, str]] = set()
    deleted: set[str] = set()
    per_round = (TOTAL_ROWS - 1000) // KILLS
    with demo_rag.engine.begin() as conn:
        changes(conn, rng, 0, 1000, touched, deleted)
    enqueued = queue_depth(demo_rag)

    kills_mid_work = 0
    for round_no in range(1, KILLS + 1):
        proc = subprocess.Popen(
            CLI + ["worker"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        depth_before = queue_depth(demo_rag)
        if rng.random() < 0.25:  # anywhere, start-up included
            time.sleep(rng.uniform(0.1, 3.0))
        else:  # in the middle of the work, however fast the machine is today
            target = depth_before - rng.randint(1, max(1, int(depth_before * 0.6)))
            wait_until(
                lambda p=proc, d=target: queue_depth(demo_rag) <= d or p.poll() is not None,
                "the restarted worker to make progress",
                step=0.005,
            )
            time.sleep(rng.uniform(0.0, 0.05))
        busy = proc.poll() is None and queue_depth(demo_rag) > 0
        proc.send_signal(signal.SIGKILL)
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, err
        assert "Traceback" not in err
        kills_mid_work += busy and queue_depth(demo_rag) < depth_before
        with demo_rag.engine.begin() as conn:  # the application keeps writing while no worker runs
            changes(conn, rng, round_no, per_round, touched, deleted)
        enqueued += per_round

    print(
        f"\ncrash safety: {KILLS} SIGKILLs ({kills_mid_work} while rows were being processed), "
        f"{enqueued} rows enqueued, {queue_depth(demo_rag)} left before the final drain, "
        f"{len(touched)} entities changed, {len(deleted)} deleted"
    )
    assert enqueued == TOTAL_ROWS
    assert kills_mid_work >= KILLS // 4, "too few kills landed while the worker was busy"

    final = run_cli(["worker", "--once"], env, cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    assert "failed rows 0" in final.stdout
    assert queue(demo_rag) == []  # nothing lost in the queue, nothing parked
    assert index_mismatches(demo_rag) == []  # every chunk equals its entity's current text and hash
    with demo_rag.engine.connect() as conn:
        stale = conn.execute(
            sa.text(
                "SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID IN "
                "(" + ",".join(f"'{d}'" for d in sorted(deleted)) + ")"
            )
        ).scalar_one()
    assert stale == 0
    alive = sorted(k for k in touched if k[1] not in deleted)
    assert embedding_matches_content(demo_rag, rng.sample(alive, min(25, len(alive)))) == []


# A worker that SIGKILLs itself when it opens the write transaction of the
# ``target``-th batch that embedded something: after BEGIN IMMEDIATE, before any
# write. The listener runs after the engine's own "begin" listener (registered
# first), so the lock is held when the process dies.
KILL_BETWEEN_EMBEDDING_AND_WRITING = r"""
import os, signal, sys
import sqlalchemy as sa
from oracle_rag.config import load_settings
from oracle_rag.system import RagSystem

target = int(sys.argv[1])
rag = RagSystem(load_settings())
state = {"embedded": 0, "writes": 0}

class Watch:
    def __init__(self, inner):
        self.inner = inner
    def embed(self, text):
        vec = self.inner.embed(text)
        state["embedded"] += 1
        return vec
    def __getattr__(self, name):
        return getattr(self.inner, name)

rag.engine.set_runtime(Watch(rag.engine.runtime()))

@sa.event.listens_for(rag.engine.sa_engine, "begin")
def _begin(conn):
    if conn.get_execution_options().get("sqlite_begin") == "IMMEDIATE" and state["embedded"]:
        state["writes"] += 1
        state["embedded"] = 0
        if state["writes"] == target:
            print("killing between embedding and writing", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

rag.worker().drain()
print("drained without a kill", flush=True)
"""


def test_kills_between_embedding_and_writing(demo_rag, data_dir, tmp_path):
    rng = random.Random(2525)
    env = cli_env(data_dir, batch_size=4, embedding_threads=1)
    touched: set[tuple[str, str]] = set()
    deleted: set[str] = set()
    with demo_rag.engine.begin() as conn:
        for t in range(101, 121):
            set_title(conn, t, f"Kill round 0 task {t}")
            touched.add(("TASK", str(t)))
    for round_no in range(1, 7):
        depth = queue_depth(demo_rag)
        proc = subprocess.run(
            [sys.executable, "-c", KILL_BETWEEN_EMBEDDING_AND_WRITING, str(rng.choice([1, 2]))],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
        assert "killing between embedding and writing" in proc.stdout and "Traceback" not in proc.stderr
        assert 0 < queue_depth(demo_rag) <= depth  # the killed batch left work queued
        with demo_rag.engine.begin() as conn:  # the application changes entities, some of them in flight
            queued = sorted({int(r[2]) for r in queue(demo_rag) if r[1] == "TASK"})
            for t in rng.sample(queued, min(2, len(queued))) + [200 + round_no]:
                set_title(conn, t, f"Kill round {round_no} task {t}")
                touched.add(("TASK", str(t)))
            victim = 300 - round_no
            delete_task(conn, victim)
            deleted.add(str(victim))

    final = run_cli(["worker", "--once"], env, cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    assert "failed rows 0" in final.stdout
    assert queue(demo_rag) == []  # nothing lost, nothing parked
    assert index_mismatches(demo_rag) == []  # nothing stale: every record equals its entity's current text
    with demo_rag.engine.connect() as conn:
        assert (
            conn.execute(
                sa.text(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM RAG_CHUNK GROUP BY SOURCE_TYPE, SOURCE_ID, CHUNK_NO "
                    "HAVING COUNT(*) > 1)"
                )
            ).scalar_one()
            == 0
        )  # nothing duplicated
        left = conn.execute(
            sa.text(
                "SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID IN "
                "(" + ",".join(f"'{d}'" for d in sorted(deleted)) + ")"
            )
        ).scalar_one()
    assert left == 0
    assert embedding_matches_content(demo_rag, sorted(k for k in touched if k[1] not in deleted)) == []
