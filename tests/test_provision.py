"""Model provisioning and bootstrap: refusals, name validation, the PAR URL secret, the PL/SQL.

The Oracle-side behaviour (load, skip, replace against a real database) is in
``tests/oracle/test_oracle_only.py``; here everything runs for real without
Oracle: the embedded engine, the CLI, an Oracle engine pointed at a closed
port (connection refused), and the shell script with a stand-in binary.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from oracle_rag.cli import main
from oracle_rag.config import load_settings
from oracle_rag.engines.oracle import provision_sql as q
from oracle_rag.engines.oracle.engine import OracleEngine
from oracle_rag.engines.sqlite.engine import SqliteEngine
from oracle_rag.errors import ConfigurationError, DatabaseError, InputError
from oracle_rag.indexing import provision
from oracle_rag.migrations import MigrationRunner, discover
from oracle_rag.sql_scripts import is_plsql, split_oracle_script

ORACLE_STATEMENTS = {
    "LOAD_MODEL_BLOB": q.LOAD_MODEL_BLOB.oracle or "",
    "LOAD_MODEL_CLOUD": q.LOAD_MODEL_CLOUD.oracle or "",
    "DROP_MODEL": q.DROP_MODEL.oracle or "",
}

ROOT = Path(__file__).resolve().parent.parent
LOAD_MODEL_SQL = ROOT / "oracle_rag" / "sql" / "oracle" / "load_model.sql"
TOKEN = "Zx9SECRETparTOKEN-4f1c2b"
PAR_URL = (
    f"https://objectstorage.eu-frankfurt-1.oraclecloud.com/p/{TOKEN}/n/ns1/b/models/o/all-MiniLM-L6-v2.onnx"
)
PAR_HOST = "objectstorage.eu-frankfurt-1.oraclecloud.com"
# A port nothing listens on: the driver gets "connection refused" at once.
CLOSED_ORACLE_URL = "oracle+oracledb://rag_app@127.0.0.1:1/?service_name=FREEPDB1"


@pytest.fixture
def empty_config(tmp_path: Path) -> Path:
    path = tmp_path / "empty.toml"
    path.write_text("")
    return path


@pytest.fixture
def sqlite_engine(tmp_path: Path, empty_config: Path):
    engine = SqliteEngine(load_settings(env={}, config_file=empty_config, data_dir=str(tmp_path / "data")))
    yield engine
    engine.dispose()


@pytest.fixture
def closed_oracle(empty_config: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ORACLE_RAG_TEST_PROVISION_PW", "not-a-real-password")
    engine = OracleEngine(
        load_settings(
            env={},
            config_file=empty_config,
            database_url=CLOSED_ORACLE_URL,
            db_password_env="ORACLE_RAG_TEST_PROVISION_PW",
        )
    )
    yield engine
    engine.dispose()


def _cli(args: list[str], tmp_path: Path, empty_config: Path, **env: str):
    base = {
        "ORACLE_RAG_DATABASE_URL": "",
        "ORACLE_RAG_DATA_DIR": str(tmp_path / "data"),
        "MINILM_ONNX_PAR_URL": "",
        "ORACLE_RAG_EMBEDDING_MODEL": "",
    }
    return CliRunner().invoke(main, ["--config", str(empty_config), *args], env={**base, **env})


# -- the model name -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("ALL_MINILM_L6_V2", "ALL_MINILM_L6_V2"),
        ("all_minilm_l12_v2", "ALL_MINILM_L12_V2"),
        ("Doc$Model#2", "DOC$MODEL#2"),
        ("M" * 123, "M" * 123),
    ],
)
def test_model_identifier_accepts_unquoted_identifiers(given: str, stored: str) -> None:
    assert provision.model_identifier(given) == stored


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "1MODEL",
        "_MODEL",
        "my model",
        "MODEL;DROP",
        'MODEL"',
        "MODEL'",
        "schema.model",
        "M" * 124,
        "MODEL\nX",
        "select",
        "Table",
        "modèle",
    ],
)
def test_model_identifier_refuses_everything_else(bad: str) -> None:
    with pytest.raises(InputError):
        provision.model_identifier(bad)


def test_cli_refuses_a_bad_name_before_connecting(tmp_path: Path, empty_config: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")
    res = _cli(
        ["model", "load", "--file", str(model), "--name", "x; DROP TABLE RAG_CHUNK"],
        tmp_path,
        empty_config,
        ORACLE_RAG_DATABASE_URL=CLOSED_ORACLE_URL,
    )
    assert res.exit_code == 2 and "unquoted Oracle identifier" in res.output


# -- the embedded engine has no model to load -----------------------------------------------------


def test_sqlite_engine_refuses_model_loads(sqlite_engine: SqliteEngine, tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")
    for call in (
        lambda: provision.load_model_file(sqlite_engine, model),
        lambda: provision.load_model_url(sqlite_engine, PAR_URL),
    ):
        with pytest.raises(ConfigurationError) as err:
            call()
        assert err.value.message == (
            "the embedded engine runs the model in-process; use `oracle-rag model build`"
        )
        assert TOKEN not in str(err.value)
    assert not sqlite_engine.path.exists(), "the refusal must come before touching the database"


def test_cli_model_load_on_sqlite_exits_2(tmp_path: Path, empty_config: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")
    assert _cli(["migrate"], tmp_path, empty_config).exit_code == 0  # a database to refuse the load on
    res = _cli(["model", "load", "--file", str(model)], tmp_path, empty_config)
    assert res.exit_code == 2
    assert "the embedded engine runs the model in-process; use `oracle-rag model build`" in res.output
    res = _cli(["model", "load", "--url", PAR_URL], tmp_path, empty_config)
    assert res.exit_code == 2 and TOKEN not in res.output


def test_bootstrap_on_sqlite_migrates_and_is_a_noop_the_second_time(sqlite_engine: SqliteEngine) -> None:
    versions = [m.version for m in discover(sqlite_engine.migrations_dir("rag"))]
    first = provision.bootstrap(sqlite_engine, sqlite_engine.settings, None)
    assert first[0] == f"migrations (rag): applied {versions}, resumed none, already applied none"
    assert first[1].startswith("model: the embedded engine runs it in-process")
    second = provision.bootstrap(sqlite_engine, sqlite_engine.settings, "")
    assert second[0] == f"migrations (rag): applied none, resumed none, already applied {versions}"
    assert MigrationRunner(sqlite_engine).pending() == []


def test_bootstrap_on_sqlite_refuses_a_par_url_before_migrating(sqlite_engine: SqliteEngine) -> None:
    with pytest.raises(ConfigurationError) as err:
        provision.bootstrap(sqlite_engine, sqlite_engine.settings, PAR_URL)
    assert TOKEN not in str(err.value)
    assert not sqlite_engine.path.exists()


def test_cli_bootstrap_on_sqlite(tmp_path: Path, empty_config: Path) -> None:
    res = _cli(["bootstrap"], tmp_path, empty_config)
    assert res.exit_code == 0, res.output
    assert "migrations (rag): applied [1, 2" in res.output
    res = _cli(["bootstrap"], tmp_path, empty_config)
    assert res.exit_code == 0 and "applied none" in res.output
    res = _cli(["bootstrap"], tmp_path, empty_config, MINILM_ONNX_PAR_URL=PAR_URL)
    assert res.exit_code == 2 and "in-process" in res.output and TOKEN not in res.output


# -- the PAR URL is a secret --------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        PAR_URL.replace("https://", "http://"),
        PAR_URL.replace("https://", "https://user:pw@"),
        f"objectstorage.example.com/p/{TOKEN}/o/m.onnx",
        f"file:///tmp/{TOKEN}.onnx",
        "https://",
    ],
)
def test_bad_urls_are_refused_without_echo(closed_oracle: OracleEngine, bad: str) -> None:
    with pytest.raises(InputError) as err:
        provision.load_model_url(closed_oracle, bad)
    assert TOKEN not in str(err.value) and "pw@" not in str(err.value)


def test_par_url_host() -> None:
    assert provision.par_url_host(PAR_URL) == PAR_HOST


def test_database_failure_names_only_the_host(
    closed_oracle: OracleEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(DatabaseError) as err:
        provision.load_model_url(closed_oracle, PAR_URL, name="all_minilm_l6_v2")
    message = str(err.value)
    assert message.startswith(f"DATABASE: loading model ALL_MINILM_L6_V2 from {PAR_HOST}")
    assert err.value.vendor_code and err.value.vendor_code.startswith("DPY-")
    assert TOKEN not in message and "/p/" not in message
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert caplog.records, "the load is logged (host only)"
    assert all(TOKEN not in r.getMessage() for r in caplog.records)


def test_cli_never_prints_the_url(tmp_path: Path, empty_config: Path) -> None:
    env = {"ORACLE_RAG_DATABASE_URL": CLOSED_ORACLE_URL, "ORACLE_RAG_DB_PASSWORD": "not-a-real-password"}
    res = _cli(["-v", "model", "load", "--url", PAR_URL], tmp_path, empty_config, **env)
    assert res.exit_code == 1 and PAR_HOST in res.output and TOKEN not in res.output
    res = _cli(["-v", "bootstrap"], tmp_path, empty_config, MINILM_ONNX_PAR_URL=PAR_URL, **env)
    assert res.exit_code == 1 and TOKEN not in res.output


def test_file_checks_come_before_connecting(closed_oracle: OracleEngine, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        provision.load_model_file(closed_oracle, tmp_path / "missing.onnx")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="0 bytes"):
        provision.load_model_file(closed_oracle, empty)
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07onnx")
    with pytest.raises(DatabaseError, match="loading model ALL_MINILM_L12_V2 from m.onnx"):
        provision.load_model_file(closed_oracle, model)


@pytest.mark.parametrize(
    ("outcome", "replace", "line"),
    [
        ("LOADED", False, "loaded M (90.1 MB)"),
        ("REPLACED", True, "replaced M (90.1 MB)"),
        ("SKIPPED", False, "M already loaded; skipped (use --replace)"),
        ("CONCURRENT", False, "M was loaded by another session meanwhile; skipped"),
    ],
)
def test_outcome_lines(outcome: str, replace: bool, line: str) -> None:
    assert provision._describe(outcome, "M", "90.1 MB", replace=replace) == line


def test_unexpected_outcome_is_an_error() -> None:
    with pytest.raises(DatabaseError):
        provision._describe("", "M", "x", replace=False)
    with pytest.raises(DatabaseError):
        provision._describe("SKIPPED", "M", "x", replace=True)


# -- the PL/SQL ---------------------------------------------------------------------------------

_BIND = re.compile(r"(?<![:\w]):([a-z_]\w*)")


@pytest.mark.parametrize(
    ("block", "load", "binds"),
    [
        (
            q.LOAD_MODEL_BLOB.oracle,
            "DBMS_VECTOR.LOAD_ONNX_MODEL(",
            {"model_name", "replace", "model_data", "outcome"},
        ),
        (
            q.LOAD_MODEL_CLOUD.oracle,
            "DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD(",
            {"model_name", "replace", "uri", "outcome"},
        ),
    ],
)
def test_load_blocks(block: str, load: str, binds: set[str]) -> None:
    """One PL/SQL unit: a row lock on RAG_MAINTENANCE (no DBMS_LOCK, no SYS grant), existence check,
    then (only if missing or replacing) drop and load in an autonomous transaction, a concurrent
    load counted as success; every value a bind."""
    assert is_plsql(block)
    assert split_oracle_script(block + "\n/\n") == [block]
    code = re.sub(r"'(?:[^']|'')*'|--[^\n]*", "''", block)
    assert set(_BIND.findall(code)) == binds
    assert "DBMS_LOCK" not in block  # EXECUTE ON SYS.DBMS_LOCK cannot be granted by SYSTEM or ADB's ADMIN
    ensure = block.index("PROCEDURE ensure_lock_row IS\n    PRAGMA AUTONOMOUS_TRANSACTION;")
    loader = block.index("PROCEDURE load IS\n    PRAGMA AUTONOMOUS_TRANSACTION;")
    body = block.index("\nBEGIN\n  BEGIN\n    ensure_lock_row;")
    lock = block.index(
        f"'SELECT TASK FROM RAG_MAINTENANCE WHERE TASK = ''{q.LOCK_TASK}'' FOR UPDATE WAIT {q.LOCK_WAIT_S}'"
    )
    check = block.index("SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name")
    skip = block.index("IF l_found > 0 AND NOT c_replace THEN\n    l_outcome := 'SKIPPED';\n  ELSE")
    drop = block.index("DBMS_VECTOR.DROP_ONNX_MODEL(model_name => c_name, force => TRUE)")
    assert ensure < loader < drop < block.index(load) < body < lock < check < skip
    assert (
        block.count(f"''{q.LOCK_TASK}''") == 3
    )  # insert, lock, record: dynamic SQL, compiles before migrate
    assert "WHEN e_no_table THEN" in block and "PRAGMA EXCEPTION_INIT(e_no_table, -942);" in block
    assert "WHEN DUP_VAL_ON_INDEX THEN\n      ROLLBACK;" in block
    assert "credential => NULL" in block if "CLOUD" in load else "model_data => c_data" in block
    handler = block[block.index("      load;") :]
    assert "USER_MINING_MODELS" in handler and "RAISE;" in handler and "'CONCURRENT'" in handler
    assert block.rstrip().endswith(":outcome := l_outcome;\nEND;")  # the caller's commit releases the lock
    assert set(re.findall(r"'([A-Z]+)'", code.replace("''", ""))) <= set(q.OUTCOMES)
    assert f"JSON('{q.METADATA}')" in block
    assert json.loads(q.METADATA) == {
        "function": "embedding",
        "embeddingOutput": "embedding",
        "input": {"input": ["DATA"]},
    }


def test_drop_model_checks_before_dropping() -> None:
    """force => TRUE drops an invalid model, not a missing one (ORA-40284): look it up first."""
    block = q.DROP_MODEL.oracle or ""
    check = block.index("SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name")
    guard = block.index(
        "IF l_found > 0 THEN\n    DBMS_VECTOR.DROP_ONNX_MODEL(model_name => c_name, force => TRUE);"
    )
    assert check < guard and is_plsql(block)
    code = re.sub(r"'(?:[^']|'')*'|--[^\n]*", "''", block)
    assert set(_BIND.findall(code)) == {"model_name", "outcome"}


def test_drop_model_refuses_sqlite_and_bad_names(
    sqlite_engine: SqliteEngine, closed_oracle: OracleEngine
) -> None:
    with pytest.raises(ConfigurationError):
        provision.drop_model(sqlite_engine, "ALL_MINILM_L6_V2")
    with pytest.raises(InputError):
        provision.drop_model(closed_oracle, "x; drop table t")


def test_blocks_are_pinned_by_golden_files() -> None:
    """The exact PL/SQL is reviewed text: tests/test_oracle_golden.py regenerates these files."""
    golden = ROOT / "tests" / "golden" / "oracle_statements"
    for name, block in ORACLE_STATEMENTS.items():
        text = (golden / f"{name}.sql").read_text("utf-8")
        assert text.split("\n\n", 1)[1] == block + "\n"


def test_model_name_is_bound_never_formatted() -> None:
    for block in ORACLE_STATEMENTS.values():
        assert "ALL_MINILM" not in block and "{" not in block.replace(q.METADATA, "")
        assert block.count(":model_name") == 1  # bound once, into a constant


# -- the DBA script -----------------------------------------------------------------------------


def test_load_model_sql_is_not_a_migration(closed_oracle: OracleEngine) -> None:
    names = [m.path.name for m in MigrationRunner(closed_oracle).migrations]
    assert "load_model.sql" not in names
    assert all(re.fullmatch(r"V\d+__\w+\.sql", n) for n in names)


def test_load_model_sql_is_guarded_and_quiet() -> None:
    text = LOAD_MODEL_SQL.read_text("utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    # substitution variables only in the code, after VERIFY OFF (else SQL*Plus echoes the URL)
    assert set(re.findall(r"&(\w+)", code)) == {"model_name", "par_url", "onnx_dir", "onnx_file"}
    assert "&" not in "\n".join(line for line in text.splitlines() if line.lstrip().startswith("--"))
    assert code.index("SET VERIFY OFF") < code.index("&par_url")
    assert "DBMS_ASSERT.SIMPLE_SQL_NAME(UPPER(TRIM('&model_name')))" in code
    check = code.index("SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name")
    loader = code.index("PROCEDURE load IS")
    assert (
        loader
        < code.index("DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD(")
        < code.index("DBMS_VECTOR.LOAD_ONNX_MODEL(")
        < check
    )
    assert check < code.index("      load;\n")
    assert "credential => NULL" in code
    assert code.count(f"JSON('{q.METADATA}')") == 2
    assert "'loaded ' || c_name || ' from the pre-authenticated URL'" in code  # never the URL itself
    assert "PUT_LINE(c_uri" not in code and "|| c_uri" not in code
    # the same row lock as the product's load blocks; the load in its own transaction
    assert "DBMS_LOCK" not in code
    lock = text.index("'SELECT TASK FROM RAG_MAINTENANCE WHERE TASK = ''MODEL_LOAD'' FOR UPDATE WAIT 900'")
    assert lock < text.index("SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name")
    assert code.count("PRAGMA AUTONOMOUS_TRANSACTION;") == 2 and "WHEN e_no_table THEN" in code
    assert code.rstrip().endswith("COMMIT;\nEND;\n/")
    assert text.rstrip().endswith("END;\n/")


# -- local/bootstrap.sh --------------------------------------------------------------------------


def test_bootstrap_script_passes_the_url_in_the_environment(tmp_path: Path) -> None:
    fake = tmp_path / "oracle-rag"
    fake.write_text('#!/bin/sh\nprintf "%s|%s\\n" "$*" "${MINILM_ONNX_PAR_URL:+url-in-env}" >> "$CAPTURE"\n')
    fake.chmod(0o755)
    capture = tmp_path / "calls"
    env = {
        "PATH": os.environ["PATH"],
        "ORACLE_RAG_BIN": str(fake),
        "CAPTURE": str(capture),
        "ORACLE_RAG_DATABASE_URL": CLOSED_ORACLE_URL,
        "MINILM_ONNX_PAR_URL": PAR_URL,
    }
    res = subprocess.run(
        ["bash", str(ROOT / "local" / "bootstrap.sh")], env=env, capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stderr
    assert capture.read_text().splitlines() == ["bootstrap|url-in-env"]
    assert TOKEN not in res.stdout + res.stderr
    res = subprocess.run(
        ["bash", str(ROOT / "local" / "bootstrap.sh")],
        env={**env, "MINILM_ONNX_PAR_URL": PAR_URL.replace("https", "http")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2 and TOKEN not in res.stdout + res.stderr
