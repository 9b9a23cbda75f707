"""The Oracle suite provisions through the files and commands a user runs (runs here, no database).

the suite used to re-type ``local/init/01_users.sh``, ``load_model.sql`` and the
grant/synonym scripts, so the files users run were never exercised. These checks keep the
fixtures honest without Oracle:

* every user-facing database file in the repository is listed in ``oracle_helpers.USER_FILES``
  and actually called by a fixture or an Oracle test (``run_user_file(..., "<file>")``), and the
  init script reaches the container the way compose.dev.yml mounts it;
* the session runs the README's commands (``oracle-rag migrate``, ``oracle-rag model load``)
  through the CLI, and the fixtures carry no grant, user or synonym SQL of their own;
* each file parses with ``tests/sqlplus.py`` (the reader the fixtures execute them with) into the
  statements SQL*Plus would send, stops on errors, and substitutes what it must.
"""

from __future__ import annotations

import ast
from pathlib import Path

import oracle_helpers as oh
import pytest
import sqlplus

ROOT = Path(__file__).resolve().parent.parent
ORACLE_TESTS = sorted((ROOT / "tests" / "oracle").glob("*.py"))
HARNESS = [ROOT / "tests" / "oracle_helpers.py", ROOT / "tests" / "oracle" / "conftest.py"]


def _calls(paths: list[Path], name: str) -> list[ast.Call]:
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == name
            ):
                out.append(node)
    return out


def _literal_args(call: ast.Call) -> list[object]:
    out = []
    for arg in call.args:
        try:
            out.append(ast.literal_eval(arg))
        except ValueError:  # a name or a call: not a literal
            continue
    return out


def test_every_user_facing_database_file_is_listed() -> None:
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "local").glob("*.sql")}
    found |= {str(p.relative_to(ROOT)) for p in (ROOT / "local").glob("*.sh")}
    found |= {str(p.relative_to(ROOT)) for p in (ROOT / "local" / "init").iterdir() if p.is_file()}
    found |= {
        str(p.relative_to(ROOT))
        for p in (ROOT / "oracle_rag" / "sql" / "oracle").glob("*.sql")
        if not p.name.startswith("V")
    }  # migrations run through `oracle-rag migrate`
    assert found == set(oh.USER_FILES), "a new user-facing file must be run by the Oracle suite"
    assert {who.split(" ")[0] for who in oh.USER_FILES.values()} <= {"SYS", "APP"}


@pytest.mark.parametrize("name", [n for n in oh.USER_FILES if n.endswith(".sql")])
def test_each_sql_file_is_run_by_the_suite(name: str) -> None:
    called = {
        a
        for call in _calls(HARNESS + ORACLE_TESTS, "run_user_file")
        for a in _literal_args(call)
        if isinstance(a, str)
    }
    assert name in called, f"no fixture or Oracle test calls run_user_file(..., {name!r})"


@pytest.mark.parametrize("name", [n for n in oh.USER_FILES if n.endswith(".sh") and "/init/" not in n])
def test_each_deploy_script_is_run_by_the_suite(name: str) -> None:
    called = {
        a for call in _calls(ORACLE_TESTS, "user_file") for a in _literal_args(call) if isinstance(a, str)
    }
    assert name in called, f"no Oracle test runs user_file({name!r})"


def test_the_init_script_runs_in_the_container_as_compose_mounts_it() -> None:
    service = oh.compose_service()
    assert service["binds"][oh.INIT_DIR] == "./local/init"
    assert oh.MODEL_MOUNT in service["binds"]
    assert service["environment"] == sorted(
        ["ORACLE_PASSWORD", "APP_USER", "APP_USER_PASSWORD", "RAG_RO_USER", "RAG_RO_PASSWORD"]
    )
    mounts = [ast.unparse(c) for c in _calls([ROOT / "tests" / "oracle_helpers.py"], "with_volume_mapping")]
    assert "container.with_volume_mapping(str(ROOT / 'local' / 'init'), INIT_DIR, 'ro')" in mounts
    assert "container.with_volume_mapping(str(model_path), MODEL_MOUNT, 'ro')" in mounts
    images = [ast.unparse(c) for c in _calls([ROOT / "tests" / "oracle_helpers.py"], "ComposeOracle")]
    assert images and all(c.startswith("ComposeOracle(service['image']") for c in images)


def test_the_session_runs_the_readme_commands() -> None:
    commands = [a for call in _calls(HARNESS, "cli") for a in _literal_args(call) if isinstance(a, list)]
    assert ["migrate"] in commands and ["migrate", "--demo"] in commands
    assert _calls([ROOT / "tests" / "oracle_helpers.py"], "cli_model_load")
    readme = (ROOT / "local" / "README.md").read_text("utf-8")
    assert "oracle-rag migrate\n" in readme and "oracle-rag model load --file " in readme
    source = (ROOT / "tests" / "oracle_helpers.py").read_text("utf-8")
    assert 'cli(target, ["model", "load", "--file", str(model_path), "--name", name])' in source


def test_the_fixtures_carry_no_provisioning_sql_of_their_own() -> None:
    """Grants, users and synonyms come from the user's files, never from strings in the harness."""
    for path in HARNESS:
        tree = ast.parse(path.read_text("utf-8"))
        docstrings = {
            id(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        }
        strings = [
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
        ]
        strings += [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)]
        for text in strings:
            upper = text.upper()
            assert not any(
                w in upper
                for w in ("GRANT ", "CREATE USER", "SYNONYM ", "ALTER USER", "DBMS_LOCK", "LOAD_ONNX_MODEL")
            ), (path.name, text[:80])


# -- the files parse into what SQL*Plus would send ----------------------------------------------


def test_grant_and_synonym_files_parse() -> None:
    grants = sqlplus.parse((ROOT / "local" / "grant_readonly.sql").read_text("utf-8"))
    assert grants.exit_on_sqlerror and len(grants.statements) == len(oh.RO_VIEWS)
    assert {s.split()[3] for s in grants.statements} == set(oh.RO_VIEWS)
    synonyms = sqlplus.parse((ROOT / "local" / "readonly_synonyms.sql").read_text("utf-8"))
    assert synonyms.exit_on_sqlerror
    assert synonyms.statements == [
        f"CREATE OR REPLACE SYNONYM {oh.RO_USER}.{v} FOR {oh.APP_USER}.{v}" for v in oh.RO_VIEWS
    ]


def test_load_model_sql_parses_with_its_defines() -> None:
    text = (ROOT / "oracle_rag" / "sql" / "oracle" / "load_model.sql").read_text("utf-8")
    with pytest.raises(ValueError, match="&model_name is not defined"):
        sqlplus.parse(text)  # SQL*Plus would prompt: the caller must DEFINE them
    script = sqlplus.parse(
        text,
        {
            "model_name": "ALL_MINILM_L6_V2",
            "par_url": "",
            "onnx_dir": "ONNX_MODELS",
            "onnx_file": "all-MiniLM-L6-v2.onnx",
        },
    )
    assert script.exit_on_sqlerror and script.serveroutput and len(script.statements) == 1
    (block,) = script.statements
    assert block.startswith("DECLARE") and block.endswith("END;") and "&" not in block
    assert "UPPER(TRIM('ONNX_MODELS'))" in block and "TRIM('')" in block


def test_users_script_heredoc_is_one_container_switch_and_one_block() -> None:
    args, sql = sqlplus.heredoc_sql(
        (ROOT / "local" / "init" / "01_users.sh").read_text("utf-8"),
        {"app_user": "RAG_APP", "ro_user": "RAG_RO", "app_pw": "Pw&1", "ro_pw": "Pw2"},
    )
    assert args == ["-s", "/", "as", "sysdba"]  # as SYS: SYSTEM cannot grant on SYS's packages
    script = sqlplus.parse(sql)
    assert script.exit_on_sqlerror
    assert script.statements[0] == "ALTER SESSION SET CONTAINER=FREEPDB1"
    assert len(script.statements) == 2 and script.statements[1].startswith("DECLARE")
    assert "'Pw&1'" in script.statements[1]  # SET DEFINE OFF: an & in a password is not substituted
    assert "DBMS_LOCK" not in sql and "GRANT EXECUTE ON SYS.DBMS_VECTOR" in sql


def test_the_runner_refuses_what_sqlplus_would_not_do_the_same_way() -> None:
    with pytest.raises(ValueError, match="WHENEVER SQLERROR"):
        sqlplus.run(object(), "GRANT READ ON RAG_V_TASK TO RAG_RO;\n")
    with pytest.raises(ValueError, match="not supported"):
        sqlplus.parse("WHENEVER SQLERROR EXIT FAILURE\nCONNECT rag_app\n")
    with pytest.raises(ValueError, match="ends inside a statement"):
        sqlplus.parse("WHENEVER SQLERROR EXIT FAILURE\nBEGIN\n  NULL;\nEND;\n")
    script = sqlplus.parse(
        "WHENEVER SQLERROR EXIT FAILURE\nSELECT 1\nFROM dual;\nEXIT\nSELECT 2 FROM dual;\n"
    )
    assert script.statements == ["SELECT 1\nFROM dual"]  # nothing after EXIT runs
