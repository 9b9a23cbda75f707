"""Chat API under load: N concurrent clients against `oracle-rag serve` for D seconds.

Setup (not timed): a data directory with the embedding model, the demo data
set (2,000 tasks by default) seeded and fully indexed, and one API token per
client (developers and managers, so both scope paths run). Then `oracle-rag
serve` starts as a subprocess on 127.0.0.1 (waitress, worker thread on, no
language model: the extractive answerer), and each client thread sends
`POST /api/chat` back to back on its own keep-alive connection, each
question a fresh conversation (so every request also writes two messages).

Reported: requests/s, latency p50/p90/p99/max, errors (non-200 or
transport failures). Goal: 0 errors and p99 < 10 x p50. The client runs on
the same machine as the server, so the two share the cores: the numbers
are a floor for this machine, not a capacity plan. The load average is
recorded with the results.

Run: ``.venv/bin/python bench/chat_load.py`` (setup ~1 min the first time;
``--data-dir DIR`` keeps the prepared database for re-runs). Writes
``bench/results/chat_load.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "chat_load.json"
sys.path.insert(0, str(ROOT))

QUESTIONS = [
    "Which tasks are blocked on the billing API change?",
    "login timeout on the mobile app",
    "¿Qué pasa con la generación de facturas en PDF?",
    "What is the status of the payment retry logic?",
    "tasks about Kubernetes liveness probes",
    "Who is working on SSO with Azure AD?",
    "slow dashboard queries performance regression",
    "GDPR data deletion requests due this sprint",
    "sincronización sin conexión en Android",
    "flaky integration tests in the data platform",
    "What is the goal of the current Nova Mobile sprint?",
    "currency rounding in invoices",
    "push notification delivery problems on iOS",
    "accessibility of the navigation menu",
    "Kafka consumer lag alerts",
    "Which project rebuilds invoicing and reconciliation?",
    "las alertas de monitorización",
    "caching of exchange rates",
    "audit log retention policy",
    "dark mode in the settings page",
]


def prepare(data_dir: Path, tasks: int, clients: int) -> list[str]:
    """Model, schema, seeded and indexed data; returns one token per client."""
    from oracle_rag.callers.tokens import create_token
    from oracle_rag.config import load_settings
    from oracle_rag.demo.seed import seed
    from oracle_rag.embedding import ensure_model
    from oracle_rag.system import RagSystem

    settings = load_settings(env={}, data_dir=str(data_dir))
    ensure_model(settings.data_path)
    with RagSystem(settings) as rag:
        rag.migrate(demo=True)
        if seed(rag.engine, tasks) is not None:
            print(f"seeded {tasks} tasks", file=sys.stderr)
        rag.backfill()
        started = time.perf_counter()
        result = rag.worker().drain()
        if result.picked:
            print(
                f"indexed {result.embedded} chunks in {time.perf_counter() - started:.1f} s", file=sys.stderr
            )
        # Bulk indexing leaves a large WAL; checkpoint it now so that the first write under
        # load does not pay for copying the whole index (setup is not what is measured).
        with rag.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        employees = [3, 4, 5] + list(range(9, 9 + clients))  # managers and developers
        return [
            create_token(rag.engine, employees[i % len(employees)], expires_days=1, label="bench").token
            for i in range(clients)
        ]


def start_server(
    data_dir: Path, config: str = "", *flags: str, name: str = "bench.toml"
) -> tuple[subprocess.Popen[str], str]:
    """`oracle-rag serve` on a free port of 127.0.0.1 for ``data_dir``; returns the process and its host:port.

    ``config`` is added to the TOML file (``name``, in ``data_dir``) after ``data_dir``, and
    ``flags`` to the command. A server that exits before its "serving on" line, or does not
    print it within 180 s, stops the bench with the end of its stderr.
    """
    cfg = data_dir / name
    cfg.write_text(f'data_dir = "{data_dir}"\n' + config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORACLE_RAG_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oracle_rag.cli", "--config", str(cfg), "serve", "--port", "0", *flags],
        cwd=data_dir,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    ready: queue.Queue[str | None] = queue.Queue()
    log_tail: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, ""):
            log_tail.append(line)
            del log_tail[:-200]
            ready.put(line)
        ready.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            line = ready.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            raise SystemExit("the server exited during start-up:\n" + "".join(log_tail))
        if line.startswith("serving on "):
            return proc, line.split()[2].split("//", 1)[1].rstrip("/")
    proc.kill()
    raise SystemExit("the server did not start within 180 s")


def client(
    address: str, token: str, index: int, deadline: float, out: list[tuple[float, int]], errors: list[str]
) -> None:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    n = index
    while time.perf_counter() < deadline:
        body = json.dumps({"question": QUESTIONS[n % len(QUESTIONS)]})
        n += 1
        started = time.perf_counter()
        try:
            conn.request("POST", "/api/chat", body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            continue
        elapsed = time.perf_counter() - started
        out.append((elapsed, status))
        if status != 200:
            errors.append(f"HTTP {status}: {data[:120]!r}")
    conn.close()


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--data-dir", type=Path, default=None, help="keep the prepared data here (re-used)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="oracle-rag-chat-load-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tokens = prepare(data_dir, args.tasks, args.clients)
    setup_s = time.perf_counter() - t0
    proc, address = start_server(data_dir)
    try:
        # one warm-up request per client: model session, connections, page cache
        warm: list[tuple[float, int]] = []
        warm_errors: list[str] = []
        for token in tokens[:2]:
            client(address, token, 0, time.perf_counter() + 0.001, warm, warm_errors)
        results: list[list[tuple[float, int]]] = [[] for _ in tokens]
        errors: list[list[str]] = [[] for _ in tokens]
        load_start = time.perf_counter()
        deadline = load_start + args.duration
        threads = [
            threading.Thread(target=client, args=(address, token, i, deadline, results[i], errors[i]))
            for i, token in enumerate(tokens)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - load_start
        load_avg = os.getloadavg()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()

    latencies = sorted(e for per in results for e, s in per if s == 200)
    all_errors = [e for per in errors for e in per]
    total = sum(len(per) for per in results)
    p50, p90, p99 = (percentile(latencies, q) for q in (0.50, 0.90, 0.99))
    report: dict[str, Any] = {
        "benchmark": "chat_load",
        "clients": args.clients,
        "duration_s": round(wall, 2),
        "tasks": args.tasks,
        "answerer": "extractive",
        "requests": total,
        "ok": len(latencies),
        "errors": len(all_errors),
        "error_samples": sorted(set(all_errors))[:5],
        "requests_per_s": round(len(latencies) / wall, 2),
        "latency_ms": {
            "p50": round(p50 * 1000, 1),
            "p90": round(p90 * 1000, 1),
            "p99": round(p99 * 1000, 1),
            "max": round(latencies[-1] * 1000, 1) if latencies else None,
            "mean": round(sum(latencies) / len(latencies) * 1000, 1) if latencies else None,
        },
        "p99_over_p50": round(p99 / p50, 2) if latencies else None,
        "goal_met": bool(latencies) and not all_errors and p99 < 10 * p50,
        "setup_s": round(setup_s, 1),
        "server": {"wsgi": "waitress", "threads": 8, "worker_thread": True},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_after": [round(x, 2) for x in load_avg],
        },
    }
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
