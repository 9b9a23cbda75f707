"""The product under real faults — clear errors, the queue kept, visible, recovering.

Each fault is made for real, never by replacing our own code:

- a corrupt model file (garbage bytes where the ONNX file was);
- a missing model that cannot be rebuilt (its folder a read-only bind mount);
- a read-only database (the data directory a read-only bind mount: root
  ignores permission bits, so chmod would prove nothing in CI, which runs as
  root; the kernel's EROFS does not care who asks);
- a full disk (the data directory on a size-limited tmpfs, filled up);
- a language model that is down (a closed port) or too slow (the scripted
  OpenAI-protocol server delaying past ``llm_timeout_s``).

For each: the API answers a 5xx JSON error with a code and a message naming
the cause (never a traceback), the CLI exits non-zero with a one-line
``error: CODE: ...`` naming it, queue rows stay (with ATTEMPTS and
LAST_ERROR where the database can still record them), ``/healthz`` and
``oracle-rag status`` show it, and removing the fault brings everything back
without losing a change.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import llm_server
import pytest
import sqlalchemy as sa
import sqlean
from chat_helpers import DEV_A, bearer, issue_tokens, task_chunks_of
from llm_server import Reply, ScriptedLLM
from reliability_helpers import (
    ServeProcess,
    clean_env,
    fill_disk,
    readonly_bind,
    require_mounts,
    run_cli,
    tmpfs,
    wait_until,
    write_config,
)

from oracle_rag.answering.chat import LLMClient
from oracle_rag.config import load_settings
from oracle_rag.system import RagSystem
from oracle_rag.web import create_app

TRACEBACK = "Traceback (most recent call last)"


# -- helpers -------------------------------------------------------------------------
def change_tasks(rag, task_ids: list[int], marker: str) -> None:
    """The host application's write: new titles, enqueued in the same transaction."""
    with rag.engine.begin() as conn:
        for task_id in task_ids:
            conn.execute(
                sa.text("UPDATE TASK SET TITLE = :t WHERE TASK_ID = :i"),
                {"t": f"{marker} {task_id}", "i": task_id},
            )
            rag.enqueue(conn, "TASK", task_id)


def queue_rows(db: Path) -> list[tuple[str, int, str | None]]:
    """RAG_DIRTY read with a plain connection (not through the product)."""
    conn = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [
            (r[0], int(r[1]), r[2])
            for r in conn.execute("SELECT SOURCE_ID, ATTEMPTS, LAST_ERROR FROM RAG_DIRTY ORDER BY DIRTY_ID")
        ]
    finally:
        conn.close()


def chunk_contents(db: Path, task_ids: list[int]) -> dict[int, str]:
    conn = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT SOURCE_ID, CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK'").fetchall()
    finally:
        conn.close()
    wanted = {str(t) for t in task_ids}
    return {int(r[0]): r[1] for r in rows if r[0] in wanted}


def assert_api_error(response, status: int, code: str, *needles: str) -> dict:
    """A JSON error with the status, the code and a message naming the cause; never a traceback."""
    body = response.get_json() if hasattr(response, "get_json") else response.json()
    text = response.get_data(as_text=True) if hasattr(response, "get_data") else response.text
    status_code = response.status_code if hasattr(response, "status_code") else response.status
    assert status_code == status, text[:500]
    assert body["code"] == code and body["status"] == status, body
    for needle in needles:
        assert needle in body["error"], (needle, body)
    assert TRACEBACK not in text and "<html" not in text.lower()
    return body


def assert_cli_error(result, exit_code: int, *needles: str) -> str:
    """Exit code, and one ``error: CODE: ...`` line on stderr naming the cause."""
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert TRACEBACK not in result.stderr + result.stdout
    return lines[0]


def copy_data_dir(demo_template: Path, model_path: Path, target: Path, *, link_models: bool = False) -> Path:
    """A data directory holding a private copy of the indexed demo database and the model."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(demo_template, target / "oracle-rag.db")
    if link_models:  # the model stays outside (a tmpfs holds only the database)
        (target / "models").symlink_to(model_path.parent, target_is_directory=True)
    else:
        (target / "models").mkdir()
        os.link(model_path, target / "models" / model_path.name)
    return target


def settle_database(db: Path) -> None:
    """Checkpoint and drop the WAL, so the file alone holds everything (before mounts change)."""
    conn = sqlean.connect(str(db))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


# -- the model ---------------------------------------------------------------------------
def test_corrupt_model_fails_clearly_keeps_the_queue_and_recovers(demo_rag, model_path, tmp_path) -> None:
    rag = demo_rag
    tokens = issue_tokens(rag, (DEV_A,))
    own = [t.task_id for t in task_chunks_of(rag, DEV_A)[:3]]
    change_tasks(rag, own, "Corrupt-model change")
    model = rag.settings.model_path
    model.unlink()  # a hard link to the session's model: replace it, never write through it
    model.write_bytes(b"\x08\x07garbage, not an ONNX protobuf" * 4000)

    # the worker: every entity fails, rows stay with ATTEMPTS and the model's error
    result = rag.worker().run_once()
    assert result.failed_rows == 3 and len(result.errors) == 3
    rows = queue_rows(rag.engine.path)
    assert [r[1] for r in rows] == [1, 1, 1]
    assert all(r[2].startswith("EMBEDDING: cannot load embedding model all-MiniLM-L6-v2.onnx") for r in rows)

    # the API: 503 EMBEDDING naming the model; /healthz 503 with the model's error
    client = create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None}).test_client()
    assert_api_error(
        client.post("/api/chat", json={"question": "login timeout"}, headers=bearer(tokens[DEV_A])),
        503,
        "EMBEDDING",
        "cannot load embedding model",
    )
    health = client.get("/healthz")
    assert health.status_code == 503
    body = health.get_json()
    assert body["status"] == "unavailable" and body["database"] == {"ok": True}
    assert body["model"]["ok"] is False and body["model"]["error"] == "EMBEDDING"
    assert "cannot load embedding model" in body["model"]["message"]
    assert TRACEBACK not in health.get_data(as_text=True)

    # the CLI, as an operator runs it
    cfg = write_config(tmp_path / "cli.toml", rag.settings.data_path)
    status = run_cli(["status", "--json"], config=cfg)
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["queue_depth"] == 3 and info["last_error"].startswith(
        "EMBEDDING: cannot load embedding model"
    )
    assert_cli_error(run_cli(["model", "status"], config=cfg), 1, "EMBEDDING", "cannot load embedding model")
    assert_cli_error(run_cli(["ask", "login timeout", "--as", str(DEV_A)], config=cfg), 1, "EMBEDDING")
    drained = run_cli(["worker", "--once"], config=cfg)
    assert drained.returncode == 1 and "embedded 0" in drained.stdout
    assert "failed: EMBEDDING: cannot load embedding model" in drained.stderr  # the worker's log line
    parked = queue_rows(rag.engine.path)
    assert [r[1] for r in parked] == [rag.settings.max_attempts] * 3  # parked, not lost
    status = json.loads(run_cli(["status", "--json"], config=cfg).stdout)
    assert status["failed_rows"] == 3 and status["stalled_rows"] == 3
    assert "queue: 3 row(s) parked" in " ".join(client.get("/healthz").get_json()["degraded"])

    # the fix: put the model back, retry the parked rows, drain
    model.unlink()
    os.link(model_path, model)
    assert client.get("/healthz").status_code == 200
    assert run_cli(["queue", "retry"], config=cfg).returncode == 0
    done = run_cli(["worker", "--once"], config=cfg)
    assert done.returncode == 0 and "failed rows 0" in done.stdout, done.stderr
    assert queue_rows(rag.engine.path) == []
    assert all(f"Corrupt-model change {t}" in c for t, c in chunk_contents(rag.engine.path, own).items())
    ok = client.post("/api/chat", json={"question": "Corrupt-model change"}, headers=bearer(tokens[DEV_A]))
    assert ok.status_code == 200 and ok.get_json()["citations"]
    assert client.get("/healthz").get_json()["degraded"] == []


def test_missing_model_that_cannot_be_built_names_the_cause(demo_template, model_path, tmp_path) -> None:
    """No model file and a read-only model folder: the build fails with the reason, not a bare OSError."""
    require_mounts(tmp_path)
    data = copy_data_dir(demo_template, model_path, tmp_path / "data")
    models = data / "models"
    (models / model_path.name).unlink()
    rag = RagSystem(load_settings(env={}, data_dir=str(data)))
    try:
        tokens = issue_tokens(rag, (DEV_A,))
        own = [t.task_id for t in task_chunks_of(rag, DEV_A)[:2]]
        change_tasks(rag, own, "Missing-model change")
        client = create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None}).test_client()
        with readonly_bind(models):
            health = client.get("/healthz").get_json()
            assert health["status"] == "unavailable" and health["model"]["ok"] is False
            assert "oracle-rag model build" in health["model"]["fix"]
            assert_api_error(
                client.post("/api/chat", json={"question": "login"}, headers=bearer(tokens[DEV_A])),
                503,
                "EMBEDDING",
                "is missing and could not be built",
                "Read-only file system",
            )
            result = rag.worker().run_once()
            assert result.failed_rows == 2
            rows = queue_rows(data / "oracle-rag.db")
            assert [r[1] for r in rows] == [1, 1]
            assert all(
                "is missing and could not be built there (OSError: Read-only file system)" in r[2]
                for r in rows
            )
            cfg = write_config(tmp_path / "cli.toml", data)
            model_status = run_cli(["model", "status"], config=cfg)
            assert model_status.returncode == 1 and "present: False" in model_status.stdout
            assert "fix: run `oracle-rag model build`" in model_status.stdout
        # the fix: the model is back (restored from a backup, or the folder writable for a rebuild)
        os.link(model_path, models / model_path.name)
        assert rag.worker().drain().failed_rows == 0
        assert queue_rows(data / "oracle-rag.db") == []
        assert all(
            f"Missing-model change {t}" in c for t, c in chunk_contents(data / "oracle-rag.db", own).items()
        )
        assert (
            client.post(
                "/api/chat", json={"question": "Missing-model change"}, headers=bearer(tokens[DEV_A])
            ).status_code
            == 200
        )
        assert client.get("/healthz").status_code == 200
    finally:
        rag.close()


# -- the database ---------------------------------------------------------------------------
def test_read_only_database(demo_template, model_path, tmp_path) -> None:
    """The data directory mounted read-only: everything fails with the cause named; the fix needs no restart."""
    require_mounts(tmp_path)
    data = copy_data_dir(demo_template, model_path, tmp_path / "data")
    db = data / "oracle-rag.db"
    with RagSystem(load_settings(env={}, data_dir=str(data))) as rag:
        tokens = issue_tokens(rag, (DEV_A,))
        own = [t.task_id for t in task_chunks_of(rag, DEV_A)[:3]]
        change_tasks(rag, own, "Read-only change")
    settle_database(db)
    cfg = write_config(
        tmp_path / "serve.toml",
        data,
        worker_initial_delay_ms=0,
        worker_poll_ms=200,
        backfill_on_startup=False,
    )
    hint = "on a read-only file system"
    with readonly_bind(data):
        # the CLI: one line naming the cause, exit 1
        assert_cli_error(run_cli(["status"], config=cfg), 1, "DATABASE", "SQLITE_CANTOPEN", hint)
        assert_cli_error(run_cli(["worker", "--once"], config=cfg), 1, "DATABASE", hint)
        server = ServeProcess(cfg, clean_env(), tmp_path).start()
        try:
            health = server.get("/healthz")
            assert health.status == 503
            body = health.json()
            assert body["database"]["ok"] is False and body["database"]["error"] == "DATABASE"
            assert hint in body["database"]["message"] and TRACEBACK not in health.text
            assert_api_error(
                server.post("/api/chat", {"question": "login"}, bearer(tokens[DEV_A])), 503, "DATABASE", hint
            )
            wait_until(lambda: "worker batch failed: DATABASE" in server.log())
        except BaseException:
            server.stop()
            raise
    # the fix: the mount is read-write again; the running server recovers by itself
    try:
        wait_until(lambda: server.get("/healthz").status == 200, attempts=300)
        wait_until(lambda: not queue_rows(db), attempts=600)
        assert all(f"Read-only change {t}" in c for t, c in chunk_contents(db, own).items())
        answer = server.post("/api/chat", {"question": "Read-only change"}, bearer(tokens[DEV_A]))
        assert answer.status == 200 and answer.json()["citations"]
        assert server.get("/healthz").json()["degraded"] == []
    finally:
        assert server.stop() == 0
    assert TRACEBACK not in server.log()


def test_disk_full(demo_template, model_path, tmp_path) -> None:
    """The database on a full tmpfs: reads work, writes fail with SQLITE_FULL named; freeing space heals."""
    require_mounts(tmp_path)
    size = demo_template.stat().st_size + 3 * 1024 * 1024
    with tmpfs(tmp_path / "small-disk", size) as disk:
        data = copy_data_dir(demo_template, model_path, disk / "data", link_models=True)
        db = data / "oracle-rag.db"
        with RagSystem(load_settings(env={}, data_dir=str(data))) as rag:
            tokens = issue_tokens(rag, (DEV_A,))
            own = [t.task_id for t in task_chunks_of(rag, DEV_A)[:3]]
            change_tasks(rag, own, "Disk-full change")
        # One connection stays open for the whole test, so the WAL index (-shm) exists before the
        # disk fills (it is memory the server needs just to read); the WAL itself is truncated, so
        # every write needs new space.
        keeper = sqlean.connect(str(db))
        try:
            keeper.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            filler = fill_disk(disk)
            cfg = write_config(
                tmp_path / "serve.toml",
                data,
                worker_initial_delay_ms=0,
                worker_poll_ms=200,
                backfill_on_startup=False,
            )
            server = ServeProcess(cfg, clean_env(), tmp_path).start()
            try:
                # the worker cannot write: its error is on /healthz (still 200: reads work), in the log
                def worker_failed():
                    body = server.get("/healthz").json()
                    return body if any("SQLITE_FULL" in d for d in body["degraded"]) else None

                body = wait_until(worker_failed)
                assert body["status"] == "ok" and body["worker"]["running"] is True
                assert "the disk is full" in body["worker"]["last_error"]
                # the worker records its error, then logs it; the log line reaches us through a pipe
                assert wait_until(
                    lambda: (
                        "worker batch failed: DATABASE: sqlite queue transaction failed "
                        "[OperationalError, SQLITE_FULL]: the disk is full" in server.log()
                    )
                )
                # the rows are all still there; ATTEMPTS cannot be recorded on a full disk (and a
                # full disk is not the rows' fault: they are not pushed towards parking)
                assert [r[0] for r in queue_rows(db)] == [str(t) for t in own]
                # the API: a chat must store its turn: 503 naming the full disk
                assert_api_error(
                    server.post("/api/chat", {"question": "login timeout"}, bearer(tokens[DEV_A])),
                    503,
                    "DATABASE",
                    "SQLITE_FULL",
                    "the disk is full",
                )
                # the CLI: status reads fine, the worker fails with the cause
                status = run_cli(["status", "--json"], config=cfg)
                assert status.returncode == 0 and '"queue_depth": 3' in status.stdout
                assert_cli_error(
                    run_cli(["worker", "--once"], config=cfg), 1, "SQLITE_FULL", "the disk is full"
                )
                # the fix: free the space; the running server drains the queue and answers again
                filler.unlink()
                wait_until(lambda: not queue_rows(db))
                assert all(f"Disk-full change {t}" in c for t, c in chunk_contents(db, own).items())
                answer = server.post("/api/chat", {"question": "Disk-full change"}, bearer(tokens[DEV_A]))
                assert answer.status == 200 and answer.json()["citations"]
                wait_until(lambda: server.get("/healthz").json()["degraded"] == [])
            finally:
                assert server.stop() == 0
            assert TRACEBACK not in server.log()
        finally:
            keeper.close()


# -- the language model ---------------------------------------------------------------------
@pytest.fixture
def llm_port(monkeypatch):
    """A port where the scripted model can be started, stopped and started again."""
    with ScriptedLLM() as probe:
        port = int(probe.url.rsplit(":", 1)[1].split("/")[0])

    class FixedPortServer(llm_server._QuietServer):
        allow_reuse_address = True

        def __init__(self, _address, handler) -> None:
            super().__init__(("127.0.0.1", port), handler)

    monkeypatch.setattr(llm_server, "_QuietServer", FixedPortServer)
    return port


def test_llm_down_then_slow_then_back(demo_rag, llm_port, tmp_path, caplog) -> None:
    rag = demo_rag
    tokens = issue_tokens(rag, (DEV_A,))
    url = f"http://127.0.0.1:{llm_port}/v1"
    settings = rag.settings.with_overrides(llm_url=url, llm_model="m", llm_timeout_s=1.0, llm_max_retries=1)
    app = create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": LLMClient(settings)})
    client = app.test_client()
    who = bearer(tokens[DEV_A])
    question = {"question": "login timeout on the mobile app"}

    # down: nothing listens on the port
    with caplog.at_level(logging.WARNING, logger="oracle_rag"):
        assert_api_error(
            client.post("/api/chat", json=question, headers=who),
            502,
            "LLM",
            "could not be reached",
            "after 2 attempts",
        )
    assert "language model attempt 1 failed" in caplog.text and "could not be reached" in caplog.text
    assert_api_error(
        client.post("/api/chat/stream", json=question, headers=who), 502, "LLM", "could not be reached"
    )
    health = client.get("/healthz")
    assert health.status_code == 200  # every instance shares the model: no 503 for it
    body = health.get_json()
    assert body["llm"]["configured"] is True and body["llm"]["ok"] is False
    assert "could not be reached" in body["llm"]["last_error"]
    assert any(
        d.startswith("llm: last call failed: LLM: the language model endpoint could not be reached")
        for d in body["degraded"]
    )
    metrics = client.get("/metrics").get_data(as_text=True)
    assert (
        'oracle_rag_http_requests_total{endpoint="oracle_rag_api.chat",method="POST",status="502"} 1.0'
        in metrics
    )

    cfg = write_config(
        tmp_path / "cli.toml",
        rag.settings.data_path,
        llm_url=url,
        llm_model="m",
        llm_timeout_s=1.0,
        llm_max_retries=0,
    )
    assert_cli_error(
        run_cli(["ask", "invoice PDF generation", "--as", str(DEV_A)], config=cfg),
        1,
        "LLM",
        "could not be reached",
    )

    with ScriptedLLM() as llm:
        # slow: the answer comes after the budget
        llm.push(Reply("late [TASK #1]", delay_s=5.0))  # the budget allows no retry after 1 s
        assert_api_error(
            client.post("/api/chat", json=question, headers=who),
            504,
            "LLM",
            "did not answer within 1 s (llm_timeout_s)",
        )
        assert "did not answer within 1 s" in client.get("/healthz").get_json()["llm"]["last_error"]
        # rate limited, then fine: retried after Retry-After
        llm.push(Reply(status=429, retry_after="0"), Reply("Back to normal."))
        with caplog.at_level(logging.WARNING, logger="oracle_rag"):
            ok = client.post("/api/chat", json=question, headers=who)
        assert ok.status_code == 200 and ok.get_json()["answer"].startswith("Back to normal.")
        assert "is rate limiting requests" in caplog.text
        body = client.get("/healthz").get_json()
        assert body["llm"]["ok"] is True and body["llm"]["last_error"] is None and body["degraded"] == []
        llm.push("CLI answers too.")
        asked = run_cli(["ask", "invoice PDF generation", "--as", str(DEV_A)], config=cfg)
        assert asked.returncode == 0 and asked.stdout.startswith("CLI answers too."), asked.stderr


# -- docs/operations.md names only real signals -------------------------------------------------------
def test_operations_doc_names_real_signals(demo_rag) -> None:
    """Every metric, /healthz field and status field docs/operations.md tells operators to watch exists."""
    import re

    doc = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    tokens = issue_tokens(demo_rag, (DEV_A,))
    app = create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None})
    client = app.test_client()
    assert (
        client.post("/api/chat", json={"question": "login"}, headers=bearer(tokens[DEV_A])).status_code == 200
    )
    exposed = client.get("/metrics").get_data(as_text=True)
    named = {re.sub(r"_(count|bucket|sum)$", "", m) for m in re.findall(r"\boracle_rag_[a-z_]+[a-z]", doc)}
    assert len(named) >= 7
    missing = [
        m for m in named if not re.search(rf"^(# TYPE )?{m}(_total|_count|_bucket|_sum)?[{{ ]", exposed, re.M)
    ]
    # the LLM histogram has samples only after a model call: its TYPE line is enough
    assert not missing, f"metrics named in docs/operations.md but not exposed: {missing}"
    health = client.get("/healthz").get_json()
    for field in ("status", "database", "model", "queue", "degraded", "llm"):
        assert field in health and f"`{field}`" in doc
    for field in ("stalled_rows", "failed_rows", "oldest_age_s", "depth"):
        assert field in health["queue"] and f"`{field}`" in doc
    status = demo_rag.status()
    for field in ("queue_depth", "oldest_age_s", "stalled_rows", "failed_rows", "last_error"):
        assert field in status and f"`{field}`" in doc
    for line in (
        "worker batch failed: ",
        "language model attempt ",
        "re-index of ",
        "queue row(s) reached max attempts",
        "metrics: queue statistics unavailable",
    ):
        assert line in doc
        assert any(
            line.split(":")[0].strip() in p.read_text()
            for p in (Path(__file__).resolve().parent.parent / "oracle_rag").rglob("*.py")
        )
