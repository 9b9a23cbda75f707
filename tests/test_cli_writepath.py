"""The write path's CLI: status (the operator's stall signal) and the trigger commands."""

from __future__ import annotations

import json

import sqlalchemy as sa
import sqlean
from click.testing import CliRunner
from writepath_helpers import cli_env, cli_settings_env, queue, run_cli

from oracle_rag.cli import main
from oracle_rag.indexing.queue import enqueue


def test_status_shows_depth_age_stalled_chunks_and_model(demo_rag, cli):
    with demo_rag.engine.begin() as conn:
        enqueue(conn, "WIDGET", 1)  # nothing can index it: it fails on every pick
    for _ in range(3):
        assert demo_rag.worker().run_once().failed_rows == 1
    with demo_rag.engine.begin() as conn:
        enqueue(conn, "TASK", 1)
        enqueue(conn, "TASK", 2, "DELETE")
    result = cli("status")
    assert result.exit_code == 0, result.output
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines["engine"] == "sqlite"
    assert lines["model"] == "all-MiniLM-L6-v2 (in-process)"
    assert lines["queue_depth"] == "3"
    assert float(lines["oldest_age_s"]) >= 0
    assert lines["stalled_rows"] == "1"  # ATTEMPTS >= 3
    assert lines["failed_rows"] == "0"  # not yet at max_attempts (5)
    with demo_rag.engine.connect() as conn:  # a long task's thread makes a second chunk: count them
        chunks = dict(
            conn.execute(
                sa.text(
                    "SELECT SOURCE_TYPE, COUNT(*) FROM RAG_CHUNK GROUP BY SOURCE_TYPE ORDER BY SOURCE_TYPE"
                )
            ).all()
        )
    assert set(chunks) == {"PROJECT", "SPRINT", "TASK"} and chunks["TASK"] >= 300
    assert lines["chunks"] == str(chunks)

    as_json = json.loads(cli("status", "--json").stdout)
    assert as_json["queue_depth"] == 3 and as_json["stalled_rows"] == 1
    assert as_json["chunks"] == chunks
    parked = json.loads(cli("status", "--json", max_attempts=3).stdout)
    assert parked["failed_rows"] == 1


def test_status_of_an_empty_queue(rag, data_dir, tmp_path):
    proc = run_cli(["status"], cli_env(data_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "queue_depth: 0" in proc.stdout and "oldest_age_s: None" in proc.stdout
    assert "chunks: {}" in proc.stdout


def test_triggers_install_status_uninstall(rag, cli):
    with rag.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO PROJECT (PROJECT_ID, NAME, STATUS) VALUES (1, 'P', 'ACTIVE')"))
    assert "0 of 13 enqueue trigger(s) installed" in cli("triggers", "status").stdout
    result = cli("triggers", "install")
    assert result.exit_code == 0 and result.stdout.startswith("installed 13 trigger(s): RAG_EMPLOYEE_AU")
    assert "13 of 13" in cli("triggers", "status").stdout

    db = sqlean.connect(str(rag.engine.path))
    db.execute("UPDATE PROJECT SET STATUS = 'CLOSED' WHERE PROJECT_ID = 1")
    db.commit()
    assert [r[1:4] for r in queue(rag)] == [("PROJECT", "1", "UPSERT")]

    result = cli("triggers", "uninstall")
    assert result.exit_code == 0 and result.stdout.startswith("removed 13 trigger(s)")
    db.execute("UPDATE PROJECT SET STATUS = 'ACTIVE' WHERE PROJECT_ID = 1")
    db.commit()
    db.close()
    assert len(queue(rag)) == 1
    assert cli("triggers", "uninstall").stdout.strip() == "removed 0 trigger(s)"


def test_triggers_install_before_migrate_is_a_clean_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["triggers", "install"], env=cli_settings_env(empty))
    # no database at all: refused before anything is created
    assert result.exit_code == 2 and result.stderr.startswith("error: CONFIGURATION: no database: ")
    assert list(empty.iterdir()) == []
    # the product schema without the reference application's
    assert CliRunner().invoke(main, ["migrate"], env=cli_settings_env(empty)).exit_code == 0
    result = CliRunner().invoke(main, ["triggers", "install"], env=cli_settings_env(empty))
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "error: MISSING_TABLE: the enqueue triggers watch the reference application's"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    assert "oracle-rag migrate --demo" in result.stderr
    assert "Traceback" not in result.output


def test_triggers_commands_are_documented():
    result = CliRunner().invoke(main, ["triggers", "--help"])
    assert result.exit_code == 0
    for sub in ("install", "uninstall", "status"):
        assert sub in result.stdout
