"""`oracle-rag serve` (a real process), `oracle-rag ask`, and `oracle-rag demo` (run_demo)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
import sqlalchemy as sa
from chat_helpers import DEV_A, DEV_B, bearer, issue_tokens, task_chunks_of
from click.testing import CliRunner

from oracle_rag.cli import main
from oracle_rag.errors import ConfigurationError

ROOT = Path(__file__).resolve().parent.parent


def _config(tmp_path: Path, data_dir: Path, extra: str = "") -> Path:
    cfg = tmp_path / "oracle-rag.toml"
    cfg.write_text(f'data_dir = "{data_dir}"\n{extra}')
    return cfg


def _lines(stream, out: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        out.put(line)
    out.put(None)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (a local URL)
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def _post(url: str, payload: dict, headers: dict[str, str]) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (a local URL)
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_serve_runs_api_and_worker_and_stops_on_sigterm(demo_rag, tmp_path: Path) -> None:
    tokens = issue_tokens(demo_rag, (DEV_A,))
    cfg = _config(
        tmp_path, demo_rag.settings.data_path, "worker_initial_delay_ms = 0\nworker_poll_ms = 100\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORACLE_RAG_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oracle_rag.cli", "--config", str(cfg), "serve", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    try:
        url = None
        seen = []
        while url is None:
            line = lines.get(timeout=120)
            assert line is not None, f"serve exited early: {''.join(seen)}"
            seen.append(line)
            if line.startswith("serving on "):
                url = line.split()[2]
        assert url.startswith("http://127.0.0.1:")  # loopback by default
        # A new user learns the answers are extractive, and how to change that
        assert any(
            line.startswith("answerer: extractive (no language model configured; set ORACLE_RAG_LLM_URL")
            for line in seen
        ), seen
        status, health = _get(url + "healthz")
        assert status == 200 and health["worker"]["in_process"] is True
        status, answer = _post(url + "api/chat", {"question": "login timeout"}, bearer(tokens[DEV_A]))
        assert status == 200 and answer["citations"]
        # the worker thread inside `serve` indexes a change made by the host application
        task = task_chunks_of(demo_rag, DEV_A)[0]
        with demo_rag.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE TASK SET TITLE = 'Indexed by serve' WHERE TASK_ID = :i"), {"i": task.task_id}
            )
            demo_rag.enqueue(conn, "TASK", task.task_id)
        stop_waiting = threading.Event()
        for _ in range(3000):  # polls the database; the bound (5 min) only guards against a hang
            with demo_rag.engine.connect() as conn:
                content = conn.execute(
                    sa.text("SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = :i"),
                    {"i": str(task.task_id)},
                ).scalar_one()
            if "Indexed by serve" in content:
                break
            stop_waiting.wait(0.1)
        assert "Indexed by serve" in content
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    rest = []
    while (line := lines.get(timeout=120)) is not None:  # the process has exited: a hang guard
        rest.append(line)
    assert proc.returncode == 0, "".join(rest)
    assert "stopped" in "".join(rest)


def test_ask_prints_answer_and_citations(demo_rag, tmp_path: Path) -> None:
    cfg = _config(tmp_path, demo_rag.settings.data_path)
    runner = CliRunner()
    own = task_chunks_of(demo_rag, DEV_A)[0]
    result = runner.invoke(
        main, ["--config", str(cfg), "ask", own.title, "--as", str(DEV_A), "--mode", "keyword"]
    )
    assert result.exit_code == 0, result.output
    # the header is in the question's language (the task's title may be Spanish)
    assert result.stdout.startswith(
        ("No language model is configured", "No hay un modelo de lenguaje configurado")
    )
    assert "Citations:\n" in result.stdout and f"[TASK #{own.task_id}]" in result.stdout
    saved = runner.invoke(
        main, ["--config", str(cfg), "ask", "invoices", "--as", str(DEV_A), "--save", "--json"]
    )
    body = json.loads(saved.stdout)
    assert set(body) == {
        "answer",
        "citations",
        "conversation_id",
        "message_id",
        "retrieval",
        "answerer",
        "route",
        "aggregate",
        "structured",
        "checked",
    }
    follow = runner.invoke(
        main,
        [
            "--config",
            str(cfg),
            "ask",
            "and payments?",
            "--as",
            str(DEV_A),
            "--conversation",
            body["conversation_id"],
            "--json",
        ],
    )
    assert follow.exit_code == 0 and json.loads(follow.stdout)["conversation_id"] == body["conversation_id"]
    foreign = runner.invoke(
        main,
        ["--config", str(cfg), "ask", "more", "--as", str(DEV_B), "--conversation", body["conversation_id"]],
    )
    assert foreign.exit_code == 2 and "conversation not found" in foreign.stderr
    empty = runner.invoke(main, ["--config", str(cfg), "ask", "  ", "--as", str(DEV_A)])
    assert empty.exit_code == 2


def test_demo_refuses_a_database_url(tmp_path: Path) -> None:
    from oracle_rag.demo.run import run_demo

    cfg = _config(
        tmp_path, tmp_path / "d", 'database_url = "oracle+oracledb://app@127.0.0.1:1521/?service_name=X"\n'
    )
    with pytest.raises(ConfigurationError, match="embedded engine only"):
        run_demo(str(cfg), 0, 10, install_signals=False)


def test_demo_prepares_and_serves(data_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from oracle_rag.demo.run import DEMO_EMPLOYEES, run_demo

    # the worker thread waits 3 s, so the server is seen answering before anything is indexed
    cfg = _config(tmp_path, data_dir, "worker_initial_delay_ms = 3000\n")
    ready: queue.Queue = queue.Queue()

    def run_once(first: bool, while_running=None) -> dict:
        stop = threading.Event()
        thread = threading.Thread(
            target=run_demo,
            args=(str(cfg), 0, 12),
            kwargs={"stop": stop, "on_ready": ready.put, "install_signals": False},
            daemon=True,
        )
        thread.start()
        url = ready.get(timeout=300)
        try:
            status, health = _get(url + "healthz")
            assert status == 200
            if first:  # serving at once, with the indexing progress reported
                assert health["indexing"]["pending"] > 0 and health["indexing"]["done"] is False, health
            for _ in range(1500):  # polls /healthz; the bound (5 min) only guards against a hang
                if health["indexing"]["done"]:
                    break
                threading.Event().wait(0.2)
                health = _get(url + "healthz")[1]
            assert health["indexing"]["done"] and health["indexing"]["indexed"] > 12, health
            status, listed = _get(url + "api/demo/identities")
            assert status == 200 and listed["demo"] is True
            idents = listed["identities"]
            assert [i["employee_id"] for i in idents] == list(DEMO_EMPLOYEES)
            assert {i["role"] for i in idents} == {"admin", "manager", "developer"}
            dev = next(i for i in idents if i["role"] == "developer")
            status, answer = _post(url + "api/chat", {"question": "sprint goal"}, bearer(dev["token"]))
            assert status == 200 and answer["citations"]
            with urllib.request.urlopen(url, timeout=30) as page:  # noqa: S310 (a local URL)
                assert "Demo mode" in page.read().decode()
            if while_running:
                while_running(url)
            return {i["employee_id"]: i["token"] for i in idents}
        finally:
            stop.set()
            thread.join(60)
            assert not thread.is_alive()

    first = run_once(True)
    err = capfd.readouterr().err
    assert "seeded 40 employees" in err and "demo tokens" in err
    assert "queued entities in the background; the page shows the progress" in err
    assert "\nindex: " in err and " queue rows in " in err  # the terminal's progress, as plain lines here
    assert err.index("oracle-rag demo is running") < err.index(" queue rows in ")  # served before indexed
    assert "answerer: extractive (no language model configured" in err
    assert all(token in err for token in first.values())  # printed for the user

    def second_demo_on_the_same_port(url: str) -> None:
        # Refused before anything changes, naming the process that holds the port (this one)
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with pytest.raises(ConfigurationError, match=rf"port {port} .* in use \(held by pid {os.getpid()}\b"):
            run_demo(str(cfg), port, 12, install_signals=False)

    second = run_once(False, second_demo_on_the_same_port)  # re-runnable: data kept, tokens re-issued
    err = capfd.readouterr().err
    assert "demo data already present" in err and "in the background" not in err
    from oracle_rag.callers.tokens import verify_token
    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    with RagSystem(load_settings(env={}, config_file=cfg)) as rag, rag.engine.connect() as conn:
        assert all(verify_token(conn, rag.engine, t) is None for t in first.values())
        # the refused third demo did not rotate them: the running page's tokens stay valid
        assert all(verify_token(conn, rag.engine, t) == e for e, t in second.items())


def test_a_port_in_use_is_one_line_before_anything_changes(tmp_path: Path) -> None:
    import socket

    cfg = _config(tmp_path, tmp_path / "data")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        for command in (
            ["demo", "--port", str(port)],
            ["serve", "--port", str(port)],
            ["mcp", "--http", "--port", str(port)],
        ):
            if command[0] == "serve":  # serve and mcp need a database: give them a migrated one
                assert CliRunner().invoke(main, ["--config", str(cfg), "migrate"]).exit_code == 0
            result = CliRunner().invoke(main, ["--config", str(cfg), *command])
            assert result.exit_code == 2, result.output
            lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("data_dir ")]
            assert len(lines) == 1 and lines[0].startswith("error: CONFIGURATION: port "), result.stderr
            assert f"in use (held by pid {os.getpid()} " in lines[0]
            if command[0] == "demo":  # checked before the model, the schema, the seed or the tokens
                assert not (tmp_path / "data").exists()


def test_read_commands_need_an_existing_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A desktop MCP client starts `oracle-rag mcp` in a directory of its own
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORACLE_RAG_DATA_DIR", raising=False)
    monkeypatch.delenv("ORACLE_RAG_CONFIG", raising=False)
    for command in (
        ["mcp"],
        ["search", "x", "--as", "1"],
        ["ask", "x", "--as", "1"],
        ["token", "list"],
        ["serve", "--port", "0"],
        ["status"],
    ):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 2, (command, result.output)
        assert (
            result.stderr.count("\n") == 1
            and "error: CONFIGURATION: no database: oracle-rag.db is not in "
            f"data_dir {tmp_path / '.oracle-rag'} (the setting '.oracle-rag' is relative to the working directory)"
            in result.stderr
        ), result.stderr
        assert not (tmp_path / ".oracle-rag").exists()  # nothing created where it was started
    (tmp_path / ".oracle-rag").mkdir()
    (tmp_path / ".oracle-rag" / "oracle-rag.db").write_bytes(b"")  # what earlier versions left behind
    result = CliRunner().invoke(main, ["mcp"])
    assert (
        result.exit_code == 2
        and "oracle-rag.db in data_dir" in result.stderr
        and "is empty (no schema)" in result.stderr
    ), result.stderr
