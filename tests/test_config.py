"""Configuration: defaults, environment, TOML, precedence and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracle_rag.config import Settings, load_settings
from oracle_rag.errors import ConfigurationError

ORACLE_URL = "oracle+oracledb://scott@db.example.com:1521/?service_name=FREEPDB1"


@pytest.fixture(autouse=True)
def _no_stray_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in an empty directory so a developer's ./oracle-rag.toml is never read."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)


def _toml(tmp_path: Path, text: str, name: str = "oracle-rag.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _refused(key: str, **kwargs) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        load_settings(**kwargs)
    err = info.value
    assert err.code == "CONFIGURATION"
    assert key in str(err), f"{key!r} not named in {str(err)!r}"
    return err


# -- defaults --------------------------------------------------------------


def test_defaults_match_the_reference_design() -> None:
    s = load_settings(env={})
    assert s.embedding_model == "ALL_MINILM_L12_V2"
    assert s.embedding_dim == 384
    assert s.top_k == 8
    assert s.backfill_on_startup is True
    assert s.worker_poll_ms == 2000
    assert s.worker_initial_delay_ms == 5000
    assert s.batch_size == 32
    assert s.max_attempts == 5
    assert s.vector_index_type == "IVF"
    assert s.vector_index_accuracy == 90
    assert s.database_url is None
    assert s.engine_kind == "sqlite"
    assert s.db_password_env == "ORACLE_RAG_DB_PASSWORD"
    assert s.llm_url is None and s.llm_api_key is None


def test_load_settings_equals_dataclass_defaults() -> None:
    assert load_settings(env={}) == Settings()


def test_paths_follow_data_dir(tmp_path: Path) -> None:
    s = load_settings(env={}, data_dir=str(tmp_path / "data"))
    assert s.data_path == tmp_path / "data"
    assert s.sqlite_path == tmp_path / "data" / "oracle-rag.db"
    assert s.model_path.parent == tmp_path / "data" / "models"


# -- environment -------------------------------------------------------------


def test_env_override() -> None:
    s = load_settings(env={"ORACLE_RAG_TOP_K": "12"})
    assert s.top_k == 12
    assert isinstance(s.top_k, int)


@pytest.mark.parametrize(
    ("name", "raw", "attr", "value"),
    [
        ("ORACLE_RAG_BACKFILL_ON_STARTUP", "false", "backfill_on_startup", False),
        ("ORACLE_RAG_BACKFILL_ON_STARTUP", "0", "backfill_on_startup", False),
        ("ORACLE_RAG_BACKFILL_ON_STARTUP", "Yes", "backfill_on_startup", True),
        ("ORACLE_RAG_BACKFILL_ON_STARTUP", " on ", "backfill_on_startup", True),
        ("ORACLE_RAG_WORKER_POLL_MS", "250", "worker_poll_ms", 250),
        ("ORACLE_RAG_BATCH_SIZE", " 64 ", "batch_size", 64),
        ("ORACLE_RAG_SEMANTIC_WEIGHT", "0.5", "semantic_weight", 0.5),
        ("ORACLE_RAG_VECTOR_INDEX_TYPE", "hnsw", "vector_index_type", "HNSW"),
        ("ORACLE_RAG_EMBEDDING_MODEL", "MY_MODEL$1", "embedding_model", "MY_MODEL$1"),
        ("ORACLE_RAG_DATABASE_URL", ORACLE_URL, "database_url", ORACLE_URL),
    ],
)
def test_env_values_are_coerced(name: str, raw: str, attr: str, value: object) -> None:
    assert getattr(load_settings(env={name: raw}), attr) == value


def test_empty_env_value_means_unset() -> None:
    assert load_settings(env={"ORACLE_RAG_TOP_K": ""}).top_k == 8


def test_database_url_selects_oracle() -> None:
    assert load_settings(env={"ORACLE_RAG_DATABASE_URL": ORACLE_URL}).engine_kind == "oracle"


def test_non_setting_env_variables_are_ignored() -> None:
    s = load_settings(env={"ORACLE_RAG_DB_PASSWORD": "x", "ORACLE_RAG_TEST_URL": "y", "HOME": "/"})
    assert s == Settings()


# -- TOML ----------------------------------------------------------------------


def test_toml_overrides_defaults(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "top_k = 20\nbatch_size = 100\nvector_index_type = 'hnsw'\n")
    s = load_settings(env={}, config_file=cfg)
    assert (s.top_k, s.batch_size, s.vector_index_type) == (20, 100, "HNSW")
    assert s.max_attempts == 5  # untouched keys keep their defaults


def test_toml_section_and_sources(tmp_path: Path) -> None:
    cfg = _toml(
        tmp_path,
        "[oracle_rag]\ntop_k = 3\n\n[sources.tickets]\nquery = 'SELECT 1 FROM dual'\n",
    )
    s = load_settings(env={}, config_file=cfg)
    assert s.top_k == 3
    assert s.sources == {"tickets": {"query": "SELECT 1 FROM dual"}}


def test_toml_from_oracle_rag_config_env(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "top_k = 21\n", name="elsewhere.toml")
    assert load_settings(env={"ORACLE_RAG_CONFIG": str(cfg)}).top_k == 21


def test_toml_from_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toml(tmp_path, "top_k = 22\n")
    monkeypatch.chdir(tmp_path)
    assert load_settings(env={}).top_k == 22


def test_precedence_override_env_toml_default(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "top_k = 20\nbatch_size = 100\nmax_attempts = 7\n")
    env = {"ORACLE_RAG_TOP_K": "12", "ORACLE_RAG_BATCH_SIZE": "50"}
    s = load_settings(env=env, config_file=cfg)
    assert s.top_k == 12  # env beats TOML
    assert s.batch_size == 50  # env beats TOML
    assert s.max_attempts == 7  # TOML beats default
    assert s.worker_poll_ms == 2000  # default
    s = load_settings(env=env, config_file=cfg, top_k=30)
    assert s.top_k == 30  # an explicit override beats everything
    assert load_settings(env=env, config_file=cfg, top_k=None).top_k == 12  # None = not given


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    _refused("nope.toml", env={}, config_file=tmp_path / "nope.toml")


def test_invalid_toml_is_refused(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "top_k = = 3\n")
    _refused("not valid TOML", env={}, config_file=cfg)


def test_unknown_toml_key_is_refused_by_name(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "top_k = 3\ntop_kk = 4\n")
    err = _refused("top_kk", env={}, config_file=cfg)
    assert err.details["key"] == "top_kk"


def test_unknown_key_in_section_is_refused(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "[oracle_rag]\nbatchsize = 4\n")
    assert _refused("batchsize", env={}, config_file=cfg).details["key"] == "batchsize"


def test_sources_must_be_tables(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "[sources]\ntickets = 3\n")
    _refused("sources", env={}, config_file=cfg)


def test_unknown_override_is_refused() -> None:
    _refused("nonsense", env={}, nonsense=1)


# -- validation names the key and the range --------------------------------------


@pytest.mark.parametrize(
    ("env", "key", "allowed"),
    [
        ({"ORACLE_RAG_TOP_K": "0"}, "ORACLE_RAG_TOP_K", "[1, 100]"),
        ({"ORACLE_RAG_TOP_K": "101"}, "ORACLE_RAG_TOP_K", "[1, 100]"),
        ({"ORACLE_RAG_TOP_K": "abc"}, "ORACLE_RAG_TOP_K", "[1, 100]"),
        ({"ORACLE_RAG_TOP_K": "2.5"}, "ORACLE_RAG_TOP_K", "integer"),
        ({"ORACLE_RAG_BATCH_SIZE": "1001"}, "ORACLE_RAG_BATCH_SIZE", "[1, 1000]"),
        ({"ORACLE_RAG_BATCH_SIZE": "-1"}, "ORACLE_RAG_BATCH_SIZE", "[1, 1000]"),
        ({"ORACLE_RAG_WORKER_POLL_MS": "10"}, "ORACLE_RAG_WORKER_POLL_MS", "[50, 3.6e+06]"),
        ({"ORACLE_RAG_MAX_ATTEMPTS": "0"}, "ORACLE_RAG_MAX_ATTEMPTS", "[1, 100]"),
        ({"ORACLE_RAG_BACKFILL_ON_STARTUP": "maybe"}, "ORACLE_RAG_BACKFILL_ON_STARTUP", "boolean"),
        ({"ORACLE_RAG_BACKFILL_ON_STARTUP": "2"}, "ORACLE_RAG_BACKFILL_ON_STARTUP", "boolean"),
        ({"ORACLE_RAG_SEMANTIC_WEIGHT": "nan"}, "ORACLE_RAG_SEMANTIC_WEIGHT", "[0, 100]"),
        ({"ORACLE_RAG_LLM_TIMEOUT_S": "inf"}, "ORACLE_RAG_LLM_TIMEOUT_S", "[0.1, 600]"),
        ({"ORACLE_RAG_VECTOR_INDEX_TYPE": "FLAT"}, "ORACLE_RAG_VECTOR_INDEX_TYPE", "IVF, HNSW"),
        ({"ORACLE_RAG_VECTOR_INDEX_ACCURACY": "0"}, "ORACLE_RAG_VECTOR_INDEX_ACCURACY", "[1, 100]"),
        ({"ORACLE_RAG_VECTOR_INDEX_ACCURACY": "101"}, "ORACLE_RAG_VECTOR_INDEX_ACCURACY", "[1, 100]"),
        ({"ORACLE_RAG_EMBEDDING_MODEL": "bad-name; DROP"}, "ORACLE_RAG_EMBEDDING_MODEL", "identifier"),
        ({"ORACLE_RAG_DB_PASSWORD_ENV": "not a name"}, "ORACLE_RAG_DB_PASSWORD_ENV", "variable"),
    ],
)
def test_invalid_env_value_names_key_and_range(env: dict[str, str], key: str, allowed: str) -> None:
    err = _refused(key, env=env)
    assert allowed in str(err)
    assert err.details["key"] == key


@pytest.mark.parametrize(
    ("line", "key", "allowed"),
    [
        ("batch_size = 1001", "batch_size", "[1, 1000]"),
        ("top_k = 0", "top_k", "[1, 100]"),
        ("top_k = 'abc'", "top_k", "[1, 100]"),
        ("top_k = true", "top_k", "integer"),
        ("top_k = 2.5", "top_k", "integer"),
        ("backfill_on_startup = 'sometimes'", "backfill_on_startup", "boolean"),
        ("vector_index_type = 'FLAT'", "vector_index_type", "IVF, HNSW"),
        ("vector_index_accuracy = 150", "vector_index_accuracy", "[1, 100]"),
    ],
)
def test_invalid_toml_value_names_key_and_range(tmp_path: Path, line: str, key: str, allowed: str) -> None:
    cfg = _toml(tmp_path, line + "\n")
    err = _refused(key, env={}, config_file=cfg)
    assert allowed in str(err)
    assert str(cfg) in str(err)  # says which file
    assert err.details["key"] == key


def test_toml_whole_float_is_accepted_for_int(tmp_path: Path) -> None:
    assert load_settings(env={}, config_file=_toml(tmp_path, "top_k = 12.0\n")).top_k == 12


def test_invalid_override_names_key() -> None:
    err = _refused("batch_size", env={}, batch_size=5000)
    assert "[1, 1000]" in str(err)


def test_with_overrides_validates() -> None:
    s = load_settings(env={})
    assert s.with_overrides(top_k=9).top_k == 9
    with pytest.raises(ConfigurationError) as info:
        s.with_overrides(vector_index_accuracy=0)
    assert "vector_index_accuracy" in str(info.value)


def test_error_messages_do_not_echo_values() -> None:
    err = _refused("ORACLE_RAG_TOP_K", env={"ORACLE_RAG_TOP_K": "zz-distinct-value"})
    assert "zz-distinct-value" not in str(err)


# -- database and LLM URLs -------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://scott@h:5432/db",
        "sqlite:///tmp/x.db",
        "oracle://scott@h:1521/?service_name=x",
        "oracle+cx_oracle://scott@h:1521/?service_name=x",
        "mysql+pymysql://scott@h/db",
    ],
)
def test_non_oracle_database_url_is_refused(url: str) -> None:
    err = _refused("database_url", env={"ORACLE_RAG_DATABASE_URL": url})
    assert "oracle+oracledb://" in str(err)
    assert err.details["key"] == "database_url"


def test_llm_url_without_secret_is_accepted() -> None:
    s = load_settings(env={"ORACLE_RAG_LLM_URL": "http://127.0.0.1:11434/v1"})
    assert s.llm_url == "http://127.0.0.1:11434/v1"


# -- secrets -----------------------------------------------------------------------


def test_redacted_masks_llm_key() -> None:
    s = load_settings(env={"ORACLE_RAG_LLM_API_KEY": "sk-S3cr3t-Pw!"})
    assert s.llm_api_key == "sk-S3cr3t-Pw!"
    assert s.llm_key() == "sk-S3cr3t-Pw!"
    shown = s.redacted()
    assert shown["llm_api_key"] == "***"
    assert "S3cr3t" not in repr(shown)
    assert shown["top_k"] == 8


def test_redacted_without_key_and_with_sources(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, "[sources.tickets]\nquery = 'SELECT 1 FROM dual'\nowner_column = 'X'\n")
    shown = load_settings(env={}, config_file=cfg).redacted()
    assert shown["llm_api_key"] is None
    assert shown["sources"] == {"tickets": ["owner_column", "query"]}


def test_llm_key_from_named_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "from-env")
    s = load_settings(env={"ORACLE_RAG_LLM_API_KEY_ENV": "MY_LLM_KEY", "ORACLE_RAG_LLM_API_KEY": "inline"})
    assert s.llm_key() == "from-env"


def test_db_password_from_named_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_DB_PW", "pw")
    s = load_settings(env={"ORACLE_RAG_DB_PASSWORD_ENV": "MY_DB_PW"})
    assert s.db_password() == "pw"


# -- a newcomer's configuration mistakes, each one line naming the fix ----------
@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    import oracle_rag.config as config

    monkeypatch.setattr(config, "_warned_env", set())


def test_unknown_env_variable_warns_with_the_closest_key(fresh_warnings, caplog) -> None:
    import logging

    with caplog.at_level(logging.WARNING, logger="oracle_rag.config"):
        settings = load_settings(env={"ORACLE_RAG_TOPK": "3", "ORACLE_RAG_ZZZ_QQQ": "1"})
        load_settings(env={"ORACLE_RAG_TOPK": "3"})  # once per process, not once per call
    assert settings.top_k == 8  # ignored, as the warning says
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "environment variable ORACLE_RAG_TOPK is not an oracle-rag setting and is ignored; "
        "did you mean ORACLE_RAG_TOP_K?",
        "environment variable ORACLE_RAG_ZZZ_QQQ is not an oracle-rag setting and is ignored; "
        "see docs/configuration.md",
    ]


def test_variables_that_are_read_do_not_warn(fresh_warnings, caplog) -> None:
    import logging

    env = {
        "ORACLE_RAG_TOP_K": "3",
        "ORACLE_RAG_CONFIG": "",
        "ORACLE_RAG_DB_PASSWORD": "pw",
        "ORACLE_RAG_RO_PASSWORD": "pw",
        "ORACLE_RAG_TEST_URL": "x",
        "ORACLE_RAG_MY_KEY": "k",
        "ORACLE_RAG_LLM_API_KEY_ENV": "ORACLE_RAG_MY_KEY",
        "ORACLE_RAG_BIN": "b",
        "OTHER_TOPK": "1",
        # `oracle-rag mcp` reads its token from ORACLE_RAG_MCP_TOKEN; metrics from the one named
        "ORACLE_RAG_MCP_TOKEN": "orag_x",
        "ORACLE_RAG_METRICS_TOKEN_ENV": "ORACLE_RAG_SCRAPE",
        "ORACLE_RAG_SCRAPE": "s",
    }
    with caplog.at_level(logging.WARNING, logger="oracle_rag.config"):
        assert load_settings(env=env).top_k == 3
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def _cli(args: list[str], env: dict[str, str], cwd: Path):
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if not k.startswith("ORACLE_RAG_")}
    return subprocess.run(
        [sys.executable, "-m", "oracle_rag.cli", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        cwd=cwd,
        timeout=300,
    )


@pytest.mark.parametrize("kind", ["file", "missing parent", "proc"])
def test_bad_data_dir_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    target = {
        "file": a_file,
        "missing parent": tmp_path / "no" / "such" / "data",
        "proc": Path("/proc/oracle-rag-data"),
    }[kind]
    res = _cli(["migrate"], {"ORACLE_RAG_DATA_DIR": str(target)}, tmp_path)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"error: CONFIGURATION: data_dir {target}") and "ORACLE_RAG_DATA_DIR" in line
    assert {"file": "is a file", "missing parent": "mkdir -p", "proc": "cannot be created"}[kind] in line
    assert not (tmp_path / "no").exists()


def test_oracle_user_without_password_variable_names_it(tmp_path: Path) -> None:
    env = {
        "ORACLE_RAG_DATABASE_URL": "oracle+oracledb://rag_app@127.0.0.1:9/?service_name=FREEPDB1",
        "ORACLE_RAG_DB_PASSWORD_ENV": "MY_RAG_PW",
    }
    res = _cli(["status"], env, tmp_path)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "DPY-4001" not in res.stderr
    assert "environment variable MY_RAG_PW (db_password_env) is not set" in res.stderr
