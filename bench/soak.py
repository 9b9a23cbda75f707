"""Soak: mixed writes and chat requests against `oracle-rag serve` for a long while (default 10 minutes).

Setup (not timed, shared with ``bench/chat_load.py``): a data directory with
the model, 2,000 demo tasks seeded and indexed, one API token per chat
client. Then `oracle-rag serve` starts as a subprocess on 127.0.0.1
(waitress, the in-process worker thread with its default polling, the
extractive answerer) and, for ``--seconds``:

- a writer thread changes tasks the way the host application does (SQL
  updates of titles and descriptions, new comments) and enqueues each in the
  same transaction, every ``--write-interval`` seconds, each write carrying a
  unique marker;
- ``--clients`` chat threads send ``POST /api/chat`` back to back;
- a lag sampler polls RAG_CHUNK until each write's marker is in its chunk:
  the queue lag of a write is the chunk's UPDATED_AT minus the moment the
  write's transaction committed (both on this machine's clock, UTC);
- a memory sampler reads the server process's RSS every ``--sample-every``
  seconds (psutil).

After the load it waits (bounded, ``--drain-seconds``) for the last writes
to be indexed, stops the server and writes ``bench/results/soak.json``:
memory at start and end and its slope, lag percentiles, chat latency and
errors. Goals: flat memory (end within 10 % of start after warm-up and a
slope under 1 % of the start per minute), lag p99 < 10 s, 0 errors.

Run: ``.venv/bin/python bench/soak.py [--seconds 600] [--data-dir DIR]``.
Everything runs on 127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import platform
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "soak.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chat_load import QUESTIONS, percentile, prepare, start_server  # noqa: E402  (bench/ is not a package)


@dataclass
class Write:
    task_id: int
    marker: str
    kind: str
    committed_at: float  # time.time() just before COMMIT
    lag_s: float | None = None


@dataclass
class Shared:
    stop: threading.Event = field(default_factory=threading.Event)
    writes: list[Write] = field(default_factory=list)
    pending: queue.Queue[Write] = field(default_factory=queue.Queue)
    chat: list[tuple[float, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)
    queue_depth: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)


def writer(rag: Any, shared: Shared, interval: float, seed: int) -> None:
    """Host-application writes, each enqueued in its own transaction, on distinct tasks."""
    import sqlalchemy as sa

    rng = random.Random(seed)
    run = os.urandom(4).hex()  # markers unique across runs: a re-used data directory holds older ones
    with rag.engine.connect() as conn:
        task_ids = [int(r[0]) for r in conn.execute(sa.text("SELECT TASK_ID FROM TASK"))]
        authors = [int(r[0]) for r in conn.execute(sa.text("SELECT EMPLOYEE_ID FROM EMPLOYEE"))]
    rng.shuffle(task_ids)
    n = 0
    while not shared.stop.is_set():
        task_id = task_ids[n % len(task_ids)]
        marker = f"soak{run}n{n:06d}"
        kind = rng.choices(["title", "description", "comment"], weights=[7, 2, 1])[0]
        try:
            with rag.engine.begin() as conn:
                if kind == "title":
                    conn.execute(
                        sa.text("UPDATE TASK SET TITLE = :t WHERE TASK_ID = :i"),
                        {"t": f"Soak change {marker}", "i": task_id},
                    )
                elif kind == "description":
                    conn.execute(
                        sa.text("UPDATE TASK SET DESCRIPTION = :d WHERE TASK_ID = :i"),
                        {"d": f"Rewritten during the soak ({marker}).", "i": task_id},
                    )
                else:
                    conn.execute(
                        sa.text("INSERT INTO TASK_COMMENT (TASK_ID, AUTHOR_ID, BODY) VALUES (:t, :a, :b)"),
                        {"t": task_id, "a": rng.choice(authors), "b": f"Soak comment {marker}"},
                    )
                rag.enqueue(conn, "TASK", task_id)
                committed_at = time.time()  # the commit happens as the block exits
            write = Write(task_id, marker, kind, committed_at)
            with shared.lock:
                shared.writes.append(write)
            shared.pending.put(write)
        except Exception as exc:  # a failed write is an error of the run, not a crash of the bench
            shared.error(f"write: {type(exc).__name__}: {str(exc)[:120]}")
        n += 1
        shared.stop.wait(interval)


def lag_sampler(rag: Any, shared: Shared, poll: float, until: threading.Event) -> None:
    """Resolve each write's lag when its marker shows up in its chunk (UPDATED_AT - commit time)."""
    import sqlalchemy as sa

    waiting: list[Write] = []
    while True:
        while True:
            try:
                waiting.append(shared.pending.get_nowait())
            except queue.Empty:
                break
        if waiting:
            ids = sorted({w.task_id for w in waiting})
            try:
                with rag.engine.connect() as conn:
                    rows = conn.execute(
                        sa.text(
                            "SELECT SOURCE_ID, CONTENT, UPDATED_AT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' "
                            "AND SOURCE_ID IN :ids"
                        ).bindparams(sa.bindparam("ids", expanding=True)),
                        {"ids": [str(i) for i in ids]},
                    ).fetchall()
                    depth = conn.execute(sa.text("SELECT COUNT(*) FROM RAG_DIRTY")).scalar_one()
                shared.queue_depth.append(int(depth))
            except Exception as exc:
                shared.error(f"lag sampler: {type(exc).__name__}")
                rows = []
            chunks = {int(r[0]): (r[1], r[2]) for r in rows}
            still: list[Write] = []
            for w in waiting:
                content, updated = chunks.get(w.task_id, ("", None))
                if w.marker in content and updated:
                    stamp = dt.datetime.fromisoformat(str(updated)).replace(tzinfo=dt.UTC).timestamp()
                    w.lag_s = max(0.0, stamp - w.committed_at)
                else:
                    still.append(w)
            waiting = still
        if until.is_set() and not waiting and shared.pending.empty():
            return
        if until.is_set() and shared.stop.is_set() and getattr(until, "give_up", False):
            return
        time.sleep(poll)


def chat_client(address: str, token: str, index: int, shared: Shared) -> None:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    n = index
    while not shared.stop.is_set():
        body = json.dumps({"question": QUESTIONS[n % len(QUESTIONS)]})
        n += 1
        started = time.perf_counter()
        try:
            conn.request("POST", "/api/chat", body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            shared.error(f"chat transport: {type(exc).__name__}")
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            shared.stop.wait(0.5)
            continue
        elapsed = time.perf_counter() - started
        with shared.lock:
            shared.chat.append((elapsed, response.status))
        if response.status != 200:
            shared.error(f"chat HTTP {response.status}: {data[:120]!r}")
    conn.close()


def rss_sampler(pid: int, shared: Shared, every: float) -> None:
    import psutil

    process = psutil.Process(pid)
    started = time.monotonic()
    while not shared.stop.is_set():
        try:
            shared.rss.append((time.monotonic() - started, int(process.memory_info().rss)))
        except psutil.Error:
            shared.error("server process gone")
            return
        shared.stop.wait(every)


def slope_per_minute(points: list[tuple[float, int]]) -> float:
    """Least-squares slope of RSS over time, in bytes per minute."""
    if len(points) < 3:
        return float("nan")
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")


def memory_report(samples: list[tuple[float, int]], warmup_s: float) -> dict[str, Any]:
    mib = 1024 * 1024
    steady = [s for s in samples if s[0] >= warmup_s] or samples
    third = max(1, len(steady) // 3)
    start = statistics.median(v for _, v in steady[:third])
    end = statistics.median(v for _, v in steady[-third:])
    slope = slope_per_minute(steady)
    return {
        "samples": len(samples),
        "warmup_s": warmup_s,
        "start_mib": round(start / mib, 1),
        "end_mib": round(end / mib, 1),
        "max_mib": round(max(v for _, v in samples) / mib, 1),
        "growth_pct": round(100 * (end - start) / start, 2),
        "slope_mib_per_min": round(slope / mib, 3),
        "series_mib": [[round(t, 1), round(v / mib, 1)] for t, v in samples],
        "flat": bool(end <= start * 1.10 and slope <= 0.01 * start),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="length of the load phase")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--write-interval", type=float, default=0.5, help="seconds between writes")
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument(
        "--drain-seconds", type=float, default=60.0, help="wait at most this long for the last writes"
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="keep the prepared data here (re-used)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="oracle-rag-soak-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tokens = prepare(data_dir, args.tasks, args.clients)
    setup_s = time.perf_counter() - t0
    proc, address = start_server(data_dir, "backfill_on_startup = false\n", name="soak.toml")
    shared = Shared()
    rag = RagSystem(load_settings(env={}, data_dir=str(data_dir)))
    lag_done = threading.Event()
    try:
        host, port = address.rsplit(":", 1)
        for token in tokens[:2]:  # warm-up: model session, pool, page cache
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            conn.request(
                "POST",
                "/api/chat",
                body=json.dumps({"question": "warm-up"}),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            )
            conn.getresponse().read()
            conn.close()
        threads = [
            threading.Thread(target=rss_sampler, args=(proc.pid, shared, args.sample_every), daemon=True),
            threading.Thread(target=writer, args=(rag, shared, args.write_interval, args.seed), daemon=True),
            threading.Thread(target=lag_sampler, args=(rag, shared, 0.25, lag_done), daemon=True),
        ]
        threads += [
            threading.Thread(target=chat_client, args=(address, token, i, shared), daemon=True)
            for i, token in enumerate(tokens)
        ]
        load_start = time.perf_counter()
        for t in threads:
            t.start()
        shared.stop.wait(args.seconds)
        shared.stop.set()
        wall = time.perf_counter() - load_start
        for t in threads[1:2] + threads[3:]:
            t.join(120)
        lag_done.set()  # the sampler now finishes the writes still waiting, bounded below
        threads[2].join(args.drain_seconds)
        if threads[2].is_alive():
            lag_done.give_up = True  # type: ignore[attr-defined]
            threads[2].join(10)
        load_avg = os.getloadavg()
        server_alive = proc.poll() is None
    finally:
        shared.stop.set()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        rag.close()

    lags = sorted(w.lag_s for w in shared.writes if w.lag_s is not None)
    unresolved = sum(1 for w in shared.writes if w.lag_s is None)
    latencies = sorted(e for e, s in shared.chat if s == 200)
    errors = (
        list(shared.errors)
        + ([f"{unresolved} write(s) never indexed"] if unresolved else [])
        + ([] if server_alive else ["the server process died"])
    )
    memory = memory_report(shared.rss, warmup_s=min(60.0, args.seconds / 4))
    lag_p99 = percentile(lags, 0.99)
    report: dict[str, Any] = {
        "benchmark": "soak",
        "seconds": round(wall, 1),
        "requested_seconds": args.seconds,
        "full_length": args.seconds >= 600,
        "tasks": args.tasks,
        "clients": args.clients,
        "answerer": "extractive",
        "writes": {
            "count": len(shared.writes),
            "per_s": round(len(shared.writes) / wall, 2),
            "kinds": {
                k: sum(1 for w in shared.writes if w.kind == k) for k in ("title", "description", "comment")
            },
        },
        "queue_lag_s": {
            "samples": len(lags),
            "unresolved": unresolved,
            "p50": round(percentile(lags, 0.5), 3),
            "p90": round(percentile(lags, 0.9), 3),
            "p99": round(lag_p99, 3),
            "max": round(lags[-1], 3) if lags else None,
            "max_queue_depth_seen": max(shared.queue_depth, default=0),
        },
        "chat": {
            "requests": len(shared.chat),
            "ok": len(latencies),
            "per_s": round(len(latencies) / wall, 2),
            "latency_ms": {
                "p50": round(percentile(latencies, 0.5) * 1000, 1),
                "p99": round(percentile(latencies, 0.99) * 1000, 1),
                "max": round(latencies[-1] * 1000, 1) if latencies else None,
            },
        },
        "memory": memory,
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:10],
        "goals": {
            "memory_flat": memory["flat"],
            "lag_p99_under_10s": bool(lags) and lag_p99 < 10.0,
            "zero_errors": not errors,
        },
        "setup_s": round(setup_s, 1),
        "server": {"wsgi": "waitress", "threads": 8, "worker_thread": True, "worker_poll_ms": 2000},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_after": [round(x, 2) for x in load_avg],
        },
    }
    report["goal_met"] = all(report["goals"].values())
    printable = {k: v for k, v in report.items() if k != "memory"} | {
        "memory": {k: v for k, v in memory.items() if k != "series_mib"}
    }
    print(json.dumps(printable, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
