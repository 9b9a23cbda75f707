"""Every knob in one place.

Settings come from, in order of precedence: explicit overrides passed in
code, environment variables ``ORACLE_RAG_<KEY>``, an optional TOML file
(``ORACLE_RAG_CONFIG``, else ``./oracle-rag.toml`` when present), then the
defaults of the reference design. Every value is validated at start-up so a
typo fails immediately with the key and the allowed range, not an hour later
inside the worker.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import ConfigurationError
from .hosts import allowed_hosts_problem
from .urlsafety import check_url

ENV_PREFIX = "ORACLE_RAG_"
_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]{0,122}$")


@dataclass(frozen=True)
class _Spec:
    kind: type
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], str | None] | None = None


def _allowed_hosts_problem(value: str) -> str | None:
    return allowed_hosts_problem(value)


def _identifier(value: Any) -> str | None:
    if not _IDENTIFIER.match(str(value)):
        return "an unquoted SQL identifier (letter first, then letters, digits, _ $ #; <= 123 chars)"
    return None


_SPECS: dict[str, _Spec] = {
    "database_url": _Spec(str),
    "data_dir": _Spec(str),
    "db_password_env": _Spec(str, check=lambda v: None if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", v) else "an environment variable name"),
    "pool_size": _Spec(int, 1, 64),
    "embedding_model": _Spec(str, check=_identifier),
    "embedding_dim": _Spec(int, 1, 65535),
    "embedding_threads": _Spec(int, 0, 256),
    "top_k": _Spec(int, 1, 100),
    "backfill_on_startup": _Spec(bool),
    "worker_poll_ms": _Spec(int, 50, 3_600_000),
    "worker_initial_delay_ms": _Spec(int, 0, 3_600_000),
    "batch_size": _Spec(int, 1, 1000),
    "max_attempts": _Spec(int, 1, 100),
    "vector_index_type": _Spec(str, choices=("IVF", "HNSW")),
    "vector_index_accuracy": _Spec(int, 1, 100),
    "vector_index_partitions": _Spec(int, 0, 10_000_000),
    "rrf_k": _Spec(int, 1, 10_000),
    "semantic_weight": _Spec(float, 0.0, 100.0),
    "keyword_weight": _Spec(float, 0.0, 100.0),
    "hybrid_fetch_factor": _Spec(int, 1, 50),
    "embedded_vector_cache": _Spec(bool),
    "llm_url": _Spec(str),
    "llm_model": _Spec(str),
    "llm_api_key": _Spec(str),
    "llm_api_key_env": _Spec(str),
    "llm_timeout_s": _Spec(float, 0.1, 600.0),
    "llm_max_tokens": _Spec(int, 1, 32_768),
    "llm_max_retries": _Spec(int, 0, 10),
    "history_token_budget": _Spec(int, 0, 100_000),
    "max_question_chars": _Spec(int, 1, 100_000),
    "aggregate_database_url": _Spec(str),
    "aggregate_db_password_env": _Spec(str, check=lambda v: None if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", v) else "an environment variable name"),
    "aggregate_timeout_s": _Spec(float, 0.1, 600.0),
    "aggregate_row_cap": _Spec(int, 1, 1_000_000),
    "aggregate_byte_cap": _Spec(int, 1_024, 100_000_000),
    "aggregate_prompt_chars": _Spec(int, 200, 1_000_000),
    "aggregate_retries": _Spec(int, 0, 10),
    "demo": _Spec(bool),
    "allowed_hosts": _Spec(str, check=lambda v: _allowed_hosts_problem(v)),
    "mcp_token_env": _Spec(str, check=lambda v: None if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", v) else "an environment variable name"),
    "tracing_exporter": _Spec(str, choices=("NONE", "CONSOLE", "OTLP")),
    "tracing_otlp_endpoint": _Spec(str),
    "tracing_service_name": _Spec(str),
    "tracing_capture_content": _Spec(bool),
}


@dataclass(frozen=True)
class Settings:
    """Validated configuration; build it with :func:`load_settings`."""

    database_url: str | None = None
    data_dir: str = ".oracle-rag"
    db_password_env: str = "ORACLE_RAG_DB_PASSWORD"
    pool_size: int = 5
    embedding_model: str = "ALL_MINILM_L12_V2"
    embedding_dim: int = 384
    embedding_threads: int = 0  # 0 = one per core
    top_k: int = 8
    backfill_on_startup: bool = True
    worker_poll_ms: int = 2000
    worker_initial_delay_ms: int = 5000
    batch_size: int = 32
    max_attempts: int = 5
    vector_index_type: str = "IVF"
    vector_index_accuracy: int = 90
    vector_index_partitions: int = 0  # 0 = let Oracle choose
    rrf_k: int = 60
    semantic_weight: float = 1.0
    keyword_weight: float = 1.0
    hybrid_fetch_factor: int = 4
    embedded_vector_cache: bool = True  # embedded engine: in-process vector index (engines/vector_cache.py)
    llm_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_api_key_env: str | None = None
    llm_timeout_s: float = 30.0
    llm_max_tokens: int = 512
    llm_max_retries: int = 2
    history_token_budget: int = 1500
    max_question_chars: int = 4000
    aggregate_database_url: str | None = None  # Oracle: the read-only user's URL (no password)
    aggregate_db_password_env: str = "ORACLE_RAG_RO_PASSWORD"
    aggregate_timeout_s: float = 10.0
    aggregate_row_cap: int = 1000
    aggregate_byte_cap: int = 1_000_000  # bytes of a guarded result fetched at most (the cap is reported)
    aggregate_prompt_chars: int = 8_000  # characters of a query result placed in the model's prompt
    aggregate_retries: int = 2
    demo: bool = False
    allowed_hosts: str = "localhost,127.0.0.1,::1"  # Host names the web server answers (DNS rebinding)
    mcp_token_env: str = "ORACLE_RAG_MCP_TOKEN"  # stdio MCP: the variable holding the caller's API token
    tracing_exporter: str = "NONE"  # OpenTelemetry traces: NONE, CONSOLE or OTLP (oracle_rag/tracing.py)
    tracing_otlp_endpoint: str | None = None  # OTLP/HTTP collector; unset: the OTEL_EXPORTER_OTLP_* variables
    tracing_service_name: str = "oracle-rag"
    tracing_capture_content: bool = False  # put questions, prompts, answers and SQL text in spans
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def engine_kind(self) -> str:
        """``sqlite`` when no database URL is set, else ``oracle``."""
        return "oracle" if self.database_url else "sqlite"

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def sqlite_path(self) -> Path:
        return self.data_path / "oracle-rag.db"

    @property
    def model_path(self) -> Path:
        return self.data_path / "models" / "all-MiniLM-L6-v2.onnx"

    def db_password(self) -> str | None:
        """The Oracle password from the environment variable named by configuration."""
        return os.environ.get(self.db_password_env)

    def llm_key(self) -> str | None:
        if self.llm_api_key_env:
            return os.environ.get(self.llm_api_key_env)
        return self.llm_api_key

    def with_overrides(self, **overrides: Any) -> Settings:
        return _validated(replace(self, **overrides), source="override")

    def redacted(self) -> dict[str, Any]:
        """Settings safe to print: secrets masked."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in {"llm_api_key"} and value:
                value = "***"
            if f.name == "sources":
                value = {name: sorted(opts) for name, opts in value.items()}
            out[f.name] = value
        return out


def _coerce(key: str, raw: Any, spec: _Spec, origin: str) -> Any:
    def bad(allowed: str) -> ConfigurationError:
        return ConfigurationError(f"{origin} {key}: invalid value, expected {allowed}", key=key)

    if spec.kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off"}:
            return False
        raise bad("a boolean (true/false)")
    if spec.kind in (int, float):
        try:
            if spec.kind is int:
                if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                    raise ValueError
                value: Any = int(str(raw).strip()) if not isinstance(raw, int | float) else int(raw)
            else:
                value = float(str(raw).strip()) if not isinstance(raw, int | float) else float(raw)
        except ValueError:
            rng = f" in [{spec.lo:g}, {spec.hi:g}]" if spec.lo is not None else ""
            raise bad(f"{'an integer' if spec.kind is int else 'a number'}{rng}") from None
        if value != value or (spec.lo is not None and value < spec.lo) or (
            spec.hi is not None and value > spec.hi
        ):
            raise bad(f"a value in [{spec.lo:g}, {spec.hi:g}]")
        return value
    value = str(raw)
    if spec.choices:
        upper = value.strip().upper()
        if upper not in spec.choices:
            raise bad("one of " + ", ".join(spec.choices))
        value = upper
    if spec.check:
        problem = spec.check(value)
        if problem:
            raise bad(problem)
    return value


def _validated(settings: Settings, source: str) -> Settings:
    for name, spec in _SPECS.items():
        value = getattr(settings, name)
        if value is not None:
            object.__setattr__(settings, name, _coerce(name, value, spec, source))
    if settings.database_url:
        check_url(settings.database_url, key="database_url", password_env=settings.db_password_env)
        if not settings.database_url.startswith("oracle+oracledb://"):
            raise ConfigurationError(
                "database_url: expected an oracle+oracledb:// URL (leave it unset for the embedded engine)",
                key="database_url",
            )
    if settings.aggregate_database_url:
        check_url(settings.aggregate_database_url, key="aggregate_database_url",
                  password_env=settings.aggregate_db_password_env)
    if settings.llm_url:
        check_url(settings.llm_url, key="llm_url", password_env="ORACLE_RAG_LLM_API_KEY")
    if settings.tracing_otlp_endpoint:
        check_url(settings.tracing_otlp_endpoint, key="tracing_otlp_endpoint",
                  password_env="OTEL_EXPORTER_OTLP_HEADERS")
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigurationError(f"config file not found: {path}", key="ORACLE_RAG_CONFIG") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"config file {path} is not valid TOML: {exc}", key="ORACLE_RAG_CONFIG") from None


# ORACLE_RAG_* variables that are read, but are not settings: the config file,
# the local/ scripts' own knobs, and the test suite's (ORACLE_RAG_TEST_*).
# Password variables are named by the *_env settings and added per call.
OTHER_ENV = ("ORACLE_RAG_CONFIG", "ORACLE_RAG_BIN", "ORACLE_RAG_MODEL_FILE")
_TEST_ENV_PREFIX = "ORACLE_RAG_TEST_"
_warned_env: set[str] = set()
log = logging.getLogger("oracle_rag.config")


def _warn_unknown_env(env: Mapping[str, str], values: Mapping[str, Any]) -> None:
    """Warn (once per process) about an ORACLE_RAG_* variable that nothing reads.

    Unlike a TOML key, an environment variable may belong to someone else, so
    it is a warning, not an error; but ``ORACLE_RAG_TOPK`` silently ignored
    costs an afternoon, so the warning names the closest valid variable.
    """
    settings_env = [ENV_PREFIX + key.upper() for key in _SPECS]
    known = {*settings_env, *OTHER_ENV}
    for key in ("db_password_env", "aggregate_db_password_env", "llm_api_key_env"):
        known.add(str(values.get(key) or getattr(Settings, key, "") or ""))
    for name in env:
        if not name.startswith(ENV_PREFIX) or name in known or name.startswith(_TEST_ENV_PREFIX):
            continue
        if name in _warned_env:
            continue
        _warned_env.add(name)
        # compare what follows the prefix: the shared prefix would make anything look close
        close = difflib.get_close_matches(name[len(ENV_PREFIX):], [k.upper() for k in _SPECS], n=1, cutoff=0.7)
        hint = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else "; see docs/configuration.md"
        log.warning("environment variable %s is not an oracle-rag setting and is ignored%s", name, hint)


def load_settings(
    env: Mapping[str, str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Settings:
    """Build validated settings from overrides, environment and TOML.

    Unknown keys in the TOML file are errors, because a misspelt key
    silently ignored is worse than a refusal. ``ORACLE_RAG_*`` environment
    variables that are not settings (``ORACLE_RAG_CONFIG``,
    ``ORACLE_RAG_DB_PASSWORD``, ``ORACLE_RAG_TEST_URL``...) are not read here.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    cfg_path: Path | None = None
    if config_file is not None:
        cfg_path = Path(config_file)
    elif env.get("ORACLE_RAG_CONFIG"):
        cfg_path = Path(env["ORACLE_RAG_CONFIG"])
    elif Path("oracle-rag.toml").is_file():
        cfg_path = Path("oracle-rag.toml")
    if cfg_path is not None:
        data = _read_toml(cfg_path)
        section = data.pop("oracle_rag", {})
        sources = data.pop("sources", {})
        data.update(section)
        for key, value in data.items():
            if key not in _SPECS:
                raise ConfigurationError(
                    f"{cfg_path}: unknown key {key!r}; known keys: {', '.join(sorted(_SPECS))}",
                    key=key,
                )
            values[key] = _coerce(key, value, _SPECS[key], str(cfg_path))
        if not isinstance(sources, dict) or any(not isinstance(v, dict) for v in sources.values()):
            raise ConfigurationError(f"{cfg_path}: [sources.NAME] must be tables", key="sources")
        values["sources"] = sources
    for key, spec in _SPECS.items():
        env_key = ENV_PREFIX + key.upper()
        if env_key in env and env[env_key] != "":
            values[key] = _coerce(env_key, env[env_key], spec, "environment")
    _warn_unknown_env(env, values)
    values.update({k: v for k, v in overrides.items() if v is not None})
    unknown = set(values) - {f.name for f in fields(Settings)}
    if unknown:
        raise ConfigurationError(f"unknown setting(s): {', '.join(sorted(unknown))}", key=sorted(unknown)[0])
    return _validated(Settings(**values), source="override")
