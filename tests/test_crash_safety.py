"""Issue 10 item 1: SIGKILL the worker at random points; nothing is lost or half-done.

A real ``oracle-rag worker`` process (small batches, short poll) drains
3,000 queued changes on the embedded engine: upserts of existing entities
(mostly unchanged text), title and comment changes made between kills, and
deletes. It is killed with SIGKILL 20 times (seeded RNG) and restarted
each time: a quarter of the kills come after a random delay (start-up
included), the rest after a random share of the queued rows was processed
plus a random few milliseconds, so they land inside batches whatever the
machine's speed. Each batch is one transaction, so a
kill rolls back the batch in flight with its queue rows intact. At the end,
after one clean ``worker --once``, every entity's chunk must equal its
current rendered text and hash, no deleted entity may keep a chunk, and the
queue must be empty with nothing parked.
"""

from __future__ import annotations

import random
import signal
import subprocess
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

from oracle_rag.queue import enqueue_many

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
            conn.execute(sa.text("INSERT INTO TASK_COMMENT (TASK_ID, AUTHOR_ID, BODY) VALUES (:t, 9, :b)"),
                         {"t": arg, "b": f"Comment from round {round_no}"})
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
        proc = subprocess.Popen(CLI + ["worker"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        depth_before = queue_depth(demo_rag)
        if rng.random() < 0.25:  # anywhere, start-up included
            time.sleep(rng.uniform(0.1, 3.0))
        else:  # in the middle of the work, however fast the machine is today
            target = depth_before - rng.randint(1, max(1, int(depth_before * 0.6)))
            wait_until(lambda p=proc, d=target: queue_depth(demo_rag) <= d or p.poll() is not None,
                       "the restarted worker to make progress", step=0.005)
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

    print(f"\ncrash safety: {KILLS} SIGKILLs ({kills_mid_work} while rows were being processed), "
          f"{enqueued} rows enqueued, {queue_depth(demo_rag)} left before the final drain, "
          f"{len(touched)} entities changed, {len(deleted)} deleted")
    assert enqueued == TOTAL_ROWS
    assert kills_mid_work >= KILLS // 4, "too few kills landed while the worker was busy"

    final = run_cli(["worker", "--once"], env, cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    assert "failed rows 0" in final.stdout
    assert queue(demo_rag) == []  # nothing lost in the queue, nothing parked
    assert index_mismatches(demo_rag) == []  # every chunk equals its entity's current text and hash
    with demo_rag.engine.connect() as conn:
        stale = conn.execute(sa.text("SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID IN "
                                     "(" + ",".join(f"'{d}'" for d in sorted(deleted)) + ")")).scalar_one()
    assert stale == 0
    alive = sorted(k for k in touched if k[1] not in deleted)
    assert embedding_matches_content(demo_rag, rng.sample(alive, min(25, len(alive)))) == []
