"""A model switch on the demo while the page is used: all-MiniLM-L6-v2 -> multilingual-e5-small.

Setup (not timed): a data directory with 2,000 demo tasks seeded and indexed with MiniLM (shared with
``bench/chat_load.py``), the e5 file built (``ensure_model``), one API token of a manager. Then
``oracle-rag serve`` starts as a subprocess on 127.0.0.1 (waitress, its in-process worker) and:

- a client thread asks ``POST /api/chat`` a question every second (English and Spanish, in turn) for
  the whole run and checks each answer is a 200 with records (citations); a failed or empty one is
  counted with its phase (before, filling, after the flip);
- this process runs ``model_switch.switch`` (the e5 generation registered and loaded) and waits while
  the server's worker embeds every chunk with e5 behind the queue (progress from ``switch_progress``,
  the figure ``status``, ``/healthz`` and the page's banner show);
- it then runs ``model_switch.activate`` (the in-process index check, the flip in one transaction)
  and times it, and sends one question at once (the server's first answer after the flip, which
  builds its in-process index of the e5 vectors). The flip as search time is measured on this
  process's retriever: its first semantic search after the flip (the index built, the query embedded
  by e5) minus the median of the next ones (e5's steady state), with MiniLM's median before as the
  baseline of this run;
- ten Spanish questions about English tasks (the issue's two among them) are asked of the retriever
  before and after the flip: the rank of the first English task each is about (top 50), and how
  many are in the top 10.

Goals: 0 failed or empty answers; the flip costs searches < 1 s (the first search after it, minus
e5's median); after it the Spanish questions find their English tasks. Writes
``bench/results/model_switch.json``.

Run: ``.venv/bin/python bench/model_switch.py [--tasks 2000] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "model_switch.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chat_load import percentile, prepare, start_server  # noqa: E402  (bench/ is not a package)

TARGET = "multilingual-e5-small"
QUESTIONS = [
    "login timeout on the mobile app",
    "tareas sobre la sincronización sin conexión",
    "slow dashboard queries",
    "errores en la generación de facturas en PDF",
    "who works on the Kafka consumer lag alerts?",
    "alertas de monitorización",
]
# Spanish questions about English tasks: the English title words each is about. The first two are the
# issue's examples, where ~80 Spanish tasks about "el error de inicio de sesión en Android" share the
# words "inicio de sesión"; the others name topics only English tasks have.
CROSS = {
    "tareas sobre el inicio de sesión único con Azure": "SSO with Azure AD",
    "tiempo de espera del inicio de sesión en la aplicación móvil": "login timeout on the mobile app",
    "modo oscuro en la página de configuración": "dark mode in the settings page",
    "pruebas de integración inestables": "flaky integration tests",
    "retención del registro de auditoría": "audit log retention",
    "solicitudes de borrado de datos personales (RGPD)": "GDPR data deletion requests",
    "lógica de reintento de pagos": "payment retry logic",
    "manejo de zonas horarias en las fechas de vencimiento": "timezone handling in due dates",
    "alertas de retraso del consumidor de Kafka": "Kafka consumer lag alerts",
    "consultas lentas del panel": "slow dashboard queries",
}


class Client:
    """Asks a question every ``interval`` seconds; records (time, phase, latency, ok, records)."""

    def __init__(self, address: str, token: str, interval: float = 1.0) -> None:
        self.address, self.token, self.interval = address, token, interval
        self.phase = "before"
        self.samples: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self._n = 0
        self._lock = threading.Lock()

    def ask(self, question: str | None = None) -> dict[str, Any]:
        host, port = self.address.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        with self._lock:
            q = question or QUESTIONS[self._n % len(QUESTIONS)]
            self._n += 1
        started = time.perf_counter()
        try:
            conn.request(
                "POST",
                "/api/chat",
                json.dumps({"question": q}),
                {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
            )
            response = conn.getresponse()
            body = response.read()
            status = response.status
        except OSError as exc:
            body, status = str(exc).encode(), 0
        finally:
            conn.close()
        latency = time.perf_counter() - started
        records = len(json.loads(body).get("citations") or []) if status == 200 else 0
        sample = {
            "t": time.time(),
            "phase": self.phase,
            "question": q,
            "latency_s": round(latency, 4),
            "status": status,
            "records": records,
        }
        with self._lock:
            self.samples.append(sample)
        return sample

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            self.ask()
            self.stop.wait(max(0.0, self.interval - (time.perf_counter() - started)))


def cross_language(rag: Any) -> dict[str, int | None]:
    """For each Spanish question, the rank (1-based, top 50) of the first English task it is about."""
    from oracle_rag.callers.caller import Caller

    out: dict[str, int | None] = {}
    retriever = rag.retriever()
    for question, title in CROSS.items():
        hits = retriever.search(question, top_k=50, caller=Caller(3, "manager"))
        out[question] = next((i + 1 for i, h in enumerate(hits) if title.lower() in h.content.lower()), None)
    return out


def search_seconds(rag: Any, question: str) -> float:
    from oracle_rag.callers.caller import Caller

    started = time.perf_counter()
    found = rag.retriever().search(question, top_k=8, caller=Caller(3, "manager"))
    elapsed = time.perf_counter() - started
    if not found:
        raise SystemExit(f"no records for {question!r}")
    return elapsed


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = sorted(s["latency_s"] for s in samples)
    return {
        "questions": len(samples),
        "failed": sum(1 for s in samples if s["status"] != 200),
        "empty": sum(1 for s in samples if s["status"] == 200 and not s["records"]),
        "median_s": round(statistics.median(latencies), 4) if latencies else None,
        "p95_s": round(percentile(latencies, 95), 4) if latencies else None,
        "max_s": round(latencies[-1], 4) if latencies else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="reuse a prepared directory (default: a temp one)"
    )
    parser.add_argument("--before-seconds", type=float, default=20.0)
    parser.add_argument("--after-seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON result")
    args = parser.parse_args()

    from oracle_rag.config import load_settings
    from oracle_rag.embedding import catalog, ensure_model
    from oracle_rag.indexing import model_switch
    from oracle_rag.system import RagSystem

    e5 = catalog.get(TARGET)
    if not e5.source_installed() and args.data_dir is None:
        print(f"skipped: {TARGET} needs its weights ({e5.install})")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"skipped": f"{e5.source_package} not installed"}) + "\n")
        return
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="oracle-rag-switch-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    token = prepare(data_dir, args.tasks, 1)[0]
    started = time.perf_counter()
    ensure_model(data_dir, model=e5)
    print(f"e5 file ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    rag = RagSystem(load_settings(env={}, data_dir=str(data_dir)))
    cross_before = cross_language(rag)

    server, address = start_server(data_dir)
    client = Client(address, token)
    thread = threading.Thread(target=client.run, daemon=True)
    result: dict[str, Any] = {}
    try:
        thread.start()
        time.sleep(args.before_seconds)
        client.phase = "filling"
        started = time.perf_counter()
        print(model_switch.switch(rag.engine, rag.settings, TARGET), file=sys.stderr)
        load_s = time.perf_counter() - started
        fill_started = time.perf_counter()
        while True:
            progress = model_switch.switch_progress(rag.engine)
            assert progress is not None
            print(
                f"  {progress['embedded']}/{progress['chunks']} chunks embedded with {TARGET}",
                file=sys.stderr,
            )
            if progress["done"]:
                break
            time.sleep(5)
        fill_s = time.perf_counter() - fill_started
        searches_before = [search_seconds(rag, q) for q in QUESTIONS]  # this process's index of MiniLM, warm
        started = time.perf_counter()
        print(model_switch.activate(rag.engine), file=sys.stderr)
        activate_s = time.perf_counter() - started
        client.phase = "after"
        first = client.ask("login timeout on the mobile app")
        # The flip as search time in this process: its first semantic search builds the in-process index
        # of the e5 vectors; the next ones are the new model's steady state.
        first_search = search_seconds(rag, "login timeout on the mobile app")
        searches_after = [search_seconds(rag, q) for q in QUESTIONS]
        time.sleep(args.after_seconds)
        client.stop.set()
        thread.join()
        cross_after = cross_language(rag)
        samples = client.samples
        before = summary([s for s in samples if s["phase"] == "before"])
        baseline = before["median_s"] or 0.0
        result = {
            "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": platform.platform(),
            "tasks": args.tasks,
            "chunks": progress["chunks"],
            "from": "all-MiniLM-L6-v2",
            "to": TARGET,
            "switch_load_s": round(load_s, 2),
            "fill_s": round(fill_s, 1),
            "fill_chunks_per_s": round(progress["chunks"] / fill_s, 1) if fill_s else None,
            "activate_s": round(activate_s, 3),
            "search_median_before_s": round(statistics.median(searches_before), 4),
            "first_search_after_flip_s": round(first_search, 4),
            "search_median_after_s": round(statistics.median(searches_after), 4),
            "flip_cost_s": round(first_search - statistics.median(searches_after), 4),
            "first_chat_after_flip_s": first["latency_s"],
            "first_chat_records": first["records"],
            "first_chat_vs_chat_median_before": round(first["latency_s"] / baseline, 2) if baseline else None,
            "before": before,
            "filling": summary([s for s in samples if s["phase"] == "filling"]),
            "after": summary([s for s in samples if s["phase"] == "after"]),
            "failed_or_empty": sum(1 for s in samples if s["status"] != 200 or not s["records"]),
            "cross_language_rank_before": cross_before,
            "cross_language_rank_after": cross_after,
            "cross_language_top10_before": sum(1 for r in cross_before.values() if r is not None and r <= 10),
            "cross_language_top10_after": sum(1 for r in cross_after.values() if r is not None and r <= 10),
        }
    finally:
        client.stop.set()
        server.terminate()
        server.wait(timeout=60)
        rag.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)}, indent=2))
    print(f"before: {result['before']}\nfilling: {result['filling']}\nafter: {result['after']}")
    print(f"cross-language rank before: {cross_before}\nafter: {cross_after}")
    goals = result["failed_or_empty"] == 0 and result["flip_cost_s"] < 1.0
    print("goals met" if goals else "GOALS NOT MET")


if __name__ == "__main__":
    main()
