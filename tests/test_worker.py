"""The worker: coalescing, hash skip, failures that lose nothing, parking, clean stops.

Embedding calls are counted with an instrumented wrapper around the real
runtime (``engine.set_runtime``); the broken model is a corrupt ONNX file
in a fresh data directory, fixed by putting the real file in its place.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from writepath_helpers import (
    CLI,
    chunk_content,
    cli_env,
    cli_settings_env,
    delete_task,
    index_mismatches,
    instrument,
    queue,
    queue_depth,
    run_cli,
    set_title,
    stored_chunks,
    wait_until,
)

from oracle_rag.cli import main
from oracle_rag.demo.seed import seed
from oracle_rag.engines import QueueRow
from oracle_rag.indexing.queue import enqueue, enqueue_many
from oracle_rag.indexing.worker import BatchResult, coalesce
from oracle_rag.system import RagSystem


def row(dirty_id, source_id, action, source_type="TASK"):
    return QueueRow(dirty_id, source_type, source_id, action, 0)


def test_coalesce_latest_row_decides():
    groups = coalesce(
        [
            row(5, "1", "DELETE"),
            row(2, "1", "UPSERT"),
            row(3, "2", "DELETE"),
            row(4, "2", "UPSERT"),
            row(6, "3", "UPSERT"),
            row(7, "3", "UPSERT", "SPRINT"),
        ]
    )
    assert groups == {
        ("TASK", "1"): ("DELETE", [5, 2]),
        ("TASK", "2"): ("UPSERT", [3, 4]),
        ("TASK", "3"): ("UPSERT", [6]),
        ("SPRINT", "3"): ("UPSERT", [7]),
    }


def test_coalesce_folds_the_case_of_types():
    groups = coalesce([row(1, "5", "UPSERT", "task"), row(2, "5", "DELETE", "TASK")])
    assert groups == {("task", "5"): ("DELETE", [1, 2])}


def test_lower_case_types_from_another_application_are_indexed(demo_rag):
    """The reference Java service writes 'task'; such rows index, never park."""
    rt = instrument(demo_rag)
    with demo_rag.engine.begin() as conn:
        set_title(conn, 12, "Renamed by the Java service", enqueue=False)
        conn.execute(
            sa.text(
                "INSERT INTO RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION) VALUES "
                "('task', '12', 'UPSERT'), ('Sprint', '4', 'DELETE')"
            )
        )
    res = demo_rag.worker().run_once()
    assert (res.failed_rows, res.embedded, res.deleted) == (0, 1, 1), res.errors
    assert rt.calls == 1
    assert chunk_content(demo_rag, "TASK", 12).startswith("[TASK #12] Renamed by the Java service\n")
    assert chunk_content(demo_rag, "SPRINT", 4) is None
    assert not [k for k in stored_chunks(demo_rag) if k[0] != k[0].upper()]  # no lower-case copies
    assert queue(demo_rag) == []


# --- coalescing end to end -------------------------------------------------------
def test_upsert_then_delete_resolves_to_delete(demo_rag):
    rt = instrument(demo_rag)
    with demo_rag.engine.begin() as conn:
        set_title(conn, 10, "Changed, then deleted")
    with demo_rag.engine.begin() as conn:
        delete_task(conn, 10)
    with demo_rag.engine.begin() as conn:  # a DELETE for an entity that still exists wins too
        enqueue(conn, "SPRINT", 3, "UPSERT")
        enqueue(conn, "SPRINT", 3, "DELETE")
    res = demo_rag.worker().run_once()
    assert (res.picked, res.keys, res.deleted, res.embedded) == (4, 2, 2, 0)
    assert rt.calls == 0
    assert chunk_content(demo_rag, "TASK", 10) is None and chunk_content(demo_rag, "SPRINT", 3) is None
    assert queue(demo_rag) == []


def test_delete_then_upsert_resolves_to_upsert(demo_rag):
    rt = instrument(demo_rag)
    with demo_rag.engine.begin() as conn:
        enqueue(conn, "TASK", 11, "DELETE")
        set_title(conn, 11, "Still here, renamed")
    res = demo_rag.worker().run_once()
    assert (res.picked, res.keys, res.deleted, res.embedded) == (2, 1, 0, 1)
    assert rt.calls == 1
    assert chunk_content(demo_rag, "TASK", 11).startswith("[TASK #11] Still here, renamed\n")


def test_hundred_updates_of_one_task_cost_one_embedding(demo_rag):
    rt = instrument(demo_rag)
    for n in range(100):
        with demo_rag.engine.begin() as conn:
            set_title(conn, 12, f"Revision {n}")
    res = demo_rag.worker().drain()  # 100 rows span several batches of 32
    assert res.picked == 100 and res.embedded == 1
    assert rt.calls == 1
    assert chunk_content(demo_rag, "TASK", 12).startswith("[TASK #12] Revision 99\n")
    assert queue(demo_rag) == []


def test_second_reindex_of_everything_makes_no_embedding_call(demo_rag):
    rt = instrument(demo_rag)
    report = demo_rag.backfill(all_entities=True)
    assert report.total == 354
    res = demo_rag.worker().drain()
    assert (res.picked, res.unchanged, res.embedded) == (354, 354, 0)
    assert rt.calls == 0
    assert index_mismatches(demo_rag) == []


# --- failures ----------------------------------------------------------------------
@pytest.fixture
def broken(make_settings, tmp_path, model_path):
    """A fresh data dir whose model file is corrupt; ``fix()`` puts the real model in place."""
    data = tmp_path / "broken"
    target = data / "models" / model_path.name
    target.parent.mkdir(parents=True)
    target.write_bytes(b"this is not an ONNX model")

    def fix():
        tmp = target.with_suffix(".tmp")
        try:
            os.link(model_path, tmp)
        except OSError:
            import shutil

            shutil.copyfile(model_path, tmp)
        os.replace(tmp, target)

    def make(**overrides):
        system = RagSystem(make_settings(data_dir=str(data), **overrides))
        system.migrate(demo=True)
        return system

    system = make()
    seed(system.engine, 4)
    with system.engine.begin() as conn:
        enqueue_many(conn, [("TASK", i, "UPSERT") for i in (1, 2, 3)] + [("SPRINT", 1, "UPSERT")])
    system.close()
    yield make, fix, data


def test_broken_model_keeps_every_row_with_attempts_and_a_safe_error(broken):
    make, fix, _ = broken
    system = make()
    res = system.worker().run_once()
    assert (res.picked, res.failed_rows, res.embedded) == (4, 4, 0)
    rows = queue(system)
    assert len(rows) == 4
    for _id, _t, _i, _a, attempts, error in rows:
        assert attempts == 1
        assert error.startswith("EMBEDDING: cannot load embedding model")
        assert "INSERT" not in error and "RAG_CHUNK" not in error and len(error) <= 1000
    with system.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM RAG_CHUNK")).scalar_one() == 0
    fix()
    res = system.worker().drain()
    assert (res.picked, res.embedded, res.failed_rows) == (4, 4, 0)
    assert queue(system) == []
    assert set(stored_chunks(system)) == {("TASK", "1"), ("TASK", "2"), ("TASK", "3"), ("SPRINT", "1")}
    system.close()


def test_rows_at_max_attempts_are_parked_listed_and_retried(broken):
    make, fix, data = broken
    system = make(max_attempts=2)
    res = system.worker().drain()  # fails, retries, parks: then nothing is pickable
    assert res.failed_rows == 8 and res.embedded == 0
    assert {r[4] for r in queue(system)} == {2}
    assert system.worker().run_once().idle  # parked rows are skipped by picks
    assert system.status()["failed_rows"] == 4 and system.status()["stalled_rows"] == 0

    runner = CliRunner()
    env = cli_settings_env(data, max_attempts=2)
    listed = runner.invoke(main, ["queue", "list", "--failed"], env=env)
    assert listed.exit_code == 0, listed.output
    lines = [ln for ln in listed.stdout.splitlines() if ln.strip()]
    assert len(lines) == 4 and all("attempts=2" in ln and "EMBEDDING" in ln for ln in lines)
    assert {ln.split("\t")[1] + "#" + ln.split("\t")[2] for ln in lines} == {
        "TASK#1",
        "TASK#2",
        "TASK#3",
        "SPRINT#1",
    }

    fix()
    assert system.worker().run_once().idle  # still parked until an operator says so
    retried = runner.invoke(main, ["queue", "retry"], env=env)
    assert retried.exit_code == 0 and "4 row(s) will be retried" in retried.stdout
    res = system.worker().drain()
    assert (res.picked, res.embedded) == (4, 4)
    assert queue(system) == []
    assert runner.invoke(main, ["queue", "list", "--failed"], env=env).stdout.strip() == ""
    system.close()


def test_one_failing_entity_does_not_block_its_batch(demo_rag):
    rt = instrument(demo_rag, fail_if=lambda text: "POISON" in text)
    with demo_rag.engine.begin() as conn:
        for task_id, title in [(20, "Fine one"), (21, "POISON pill"), (22, "Fine two"), (23, "Fine three")]:
            set_title(conn, task_id, title)
        enqueue(conn, "WIDGET", 1)  # no source registered for this type
    res = demo_rag.worker().run_once()
    assert res.picked == 5 and res.failed_rows == 2
    assert res.embedded == 3
    left = queue(demo_rag)
    assert sorted((r[1], r[2], r[4]) for r in left) == [("TASK", "21", 1), ("WIDGET", "1", 1)]
    assert "refused" in next(r[5] for r in left if r[2] == "21")
    assert "no source registered" in next(r[5] for r in left if r[1] == "WIDGET")
    for task_id, title in [(20, "Fine one"), (22, "Fine two"), (23, "Fine three")]:
        assert chunk_content(demo_rag, "TASK", task_id).startswith(f"[TASK #{task_id}] {title}\n")
    assert "POISON" not in chunk_content(demo_rag, "TASK", 21)
    rt.fail_if = None
    res = demo_rag.worker().run_once()
    assert res.embedded == 1 and res.failed_rows == 1  # the WIDGET row keeps failing
    assert "POISON" in chunk_content(demo_rag, "TASK", 21)


def test_delete_of_a_missing_entity_removes_its_chunk(demo_rag):
    with demo_rag.engine.begin() as conn:
        delete_task(conn, 30, enqueue=False)  # deleted behind the worker's back
        enqueue(conn, "TASK", 30, "UPSERT")  # e.g. from backfill --all: the entity is gone
        enqueue(conn, "TASK", 77777, "DELETE")  # never existed, no chunk: consumed quietly
        enqueue(conn, "PROJECT", 88888, "UPSERT")
    res = demo_rag.worker().run_once()
    assert res.failed_rows == 0 and res.deleted == 1 and res.picked == 3
    assert chunk_content(demo_rag, "TASK", 30) is None
    assert queue(demo_rag) == []


def test_run_loop_stops_on_event_and_reports_batches(demo_rag):
    with demo_rag.engine.begin() as conn:
        for t in (40, 41, 42):
            set_title(conn, t, f"Loop {t}")
    seen: list[BatchResult] = []
    stop = threading.Event()
    w = demo_rag.worker(on_batch=seen.append)
    thread = threading.Thread(target=w.run, args=(stop,), kwargs={"initial_delay": False})
    thread.start()
    wait_until(lambda: queue_depth(demo_rag) == 0, "the loop to drain the queue")
    stop.set()
    thread.join()
    assert sum(b.embedded for b in seen) == 3 and w.last_error is None and w.last_success is not None


# --- the CLI worker as a process -----------------------------------------------------
def test_worker_once_exits_zero_after_draining(demo_rag, data_dir, tmp_path):
    with demo_rag.engine.begin() as conn:
        set_title(conn, 50, "Drained by a process")
        delete_task(conn, 51)
    proc = run_cli(["worker", "--once"], cli_env(data_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "picked 2, embedded 1, unchanged 0, deleted 1, failed rows 0" in proc.stdout
    assert queue(demo_rag) == []
    assert chunk_content(demo_rag, "TASK", 50).startswith("[TASK #50] Drained by a process")


def test_worker_once_exits_one_when_rows_fail(broken, tmp_path):
    _make, _fix, data = broken
    proc = run_cli(["worker", "--once"], cli_env(data, max_attempts=1), cwd=tmp_path)
    assert proc.returncode == 1
    assert "failed rows 4" in proc.stdout
    assert "EMBEDDING" in proc.stderr  # logged, with the model's error, not a traceback
    assert "Traceback" not in proc.stderr


def test_sigterm_stops_after_the_current_batch(demo_rag, data_dir, tmp_path):
    new = {t: f"Term test {t}" for t in range(100, 140)}
    old = {t: chunk_content(demo_rag, "TASK", t) for t in new}
    with demo_rag.engine.begin() as conn:
        for t, title in new.items():
            set_title(conn, t, title)
    env = cli_env(data_dir, batch_size=4, worker_poll_ms=50, worker_initial_delay_ms=0)
    proc = subprocess.Popen(
        CLI + ["-v", "worker"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: queue_depth(demo_rag) < 40 or proc.poll() is not None, "the first batch")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopping after the current batch" in err
    remaining = {int(r[2]) for r in queue(demo_rag)}
    processed = set(new) - remaining
    assert remaining, "the worker drained everything: SIGTERM did not stop it early"
    assert len(processed) % 4 == 0  # whole batches only
    for t in new:
        content = chunk_content(demo_rag, "TASK", t)
        if t in processed:
            assert content.startswith(f"[TASK #{t}] {new[t]}\n")
        else:
            assert content == old[t]  # untouched: no half-applied batch
    assert {r[4] for r in queue(demo_rag)} == {0}


def test_cli_env_ignores_the_callers_settings(tmp_path):
    env = cli_env(Path("/x"), batch_size=3)
    assert env["ORACLE_RAG_DATA_DIR"] == "/x" and env["ORACLE_RAG_BATCH_SIZE"] == "3"
    assert not any(
        k.startswith("ORACLE_RAG_") and k not in ("ORACLE_RAG_DATA_DIR", "ORACLE_RAG_BATCH_SIZE") for k in env
    )
