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
from types import UnionType
from typing import Any, get_args, get_type_hints
from urllib.parse import urlsplit

from oracle_rag.errors import ConfigurationError
from oracle_rag.hosts import allowed_hosts_problem
from oracle_rag.urlsafety import check_url

ENV_PREFIX = "ORACLE_RAG_"
_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]{0,122}$")


@dataclass(frozen=True)
class Setting:
    """One setting's declaration: its type (from the annotation), bounds, choices, check, default, help."""

    name: str
    kind: type
    default: Any
    help: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], str | None] | None = None


def setting(
    default: Any,
    lo: float | None = None,
    hi: float | None = None,
    *,
    choices: tuple[str, ...] | None = None,
    check: Callable[[Any], str | None] | None = None,
    help: str,
) -> Any:  # noqa: A002 - the word the docs use
    """A :class:`Settings` field declared with everything about it, once (see :data:`SETTINGS`)."""
    return field(
        default=default,
        metadata={"setting": {"lo": lo, "hi": hi, "choices": choices, "check": check, "help": help}},
    )


def _identifier(value: Any) -> str | None:
    if not _IDENTIFIER.match(str(value)):
        return "an unquoted SQL identifier (letter first, then letters, digits, _ $ #; <= 123 chars)"
    return None


def _env_var_name(value: Any) -> str | None:
    return None if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(value)) else "an environment variable name"


def _roles_list(value: Any) -> str | None:
    roles = [r.strip() for r in str(value).split(",")]
    if any(not r or len(r) > 64 for r in roles):
        return "comma-separated role names (1 to 64 characters each)"
    return None


# Public-key signature algorithms only: ``none`` and the HMAC family (a shared secret, which a
# verifier holding a public key must never take as one) are refused by configuration.
JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_CLAIM_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_:/-]{0,63}(\.[A-Za-z_][A-Za-z0-9_:/-]{0,63}){0,4}$")


def _algorithms(value: Any) -> str | None:
    names = [a.strip() for a in str(value).split(",")]
    if not names or any(a not in JWT_ALGORITHMS for a in names):
        return "comma-separated JWT algorithms among " + ", ".join(JWT_ALGORITHMS) + " (never none or HS*)"
    return None


def _claim_path(value: Any) -> str | None:
    return (
        None
        if _CLAIM_PATH.match(str(value))
        else "a claim name, or names joined by dots (realm_access.roles)"
    )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:(s|m|h|d)\s*)?$", re.IGNORECASE)
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


def duration_seconds(value: Any) -> float | None:
    """``30s`` / ``5m`` / ``1h`` / ``30d`` / a bare number of seconds, in seconds; None if unreadable."""
    match = _DURATION.match(str(value))
    if match is None:
        return None
    return float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "s").lower()]


def _duration(value: Any, lo: float, hi: float) -> str | None:
    seconds = duration_seconds(value)
    if seconds is None or not lo <= seconds <= hi:
        return f"a duration between {lo:g}s and {hi:g}s written as 30s, 5m, 1h, 30d or seconds"
    return None


@dataclass(frozen=True)
class Settings:
    """Validated configuration; build it with :func:`load_settings`.

    Each field is declared once, here, with its bounds, choices, check,
    default and help (:func:`setting`); :data:`SETTINGS` is that declaration
    as data, which validation, the TOML and environment readers and the docs
    test use. ``sources`` is the ``[sources.NAME]`` tables (docs/sql-sources.md).
    """

    database_url: str | None = setting(None, help="unset: the embedded SQLite engine; set: Oracle")
    data_dir: str = setting(".oracle-rag", help="embedded database file and the built ONNX model")
    db_password_env: str = setting(
        "ORACLE_RAG_DB_PASSWORD", check=_env_var_name, help="where the Oracle password is read from"
    )
    pool_size: int = setting(5, 1, 64, help="connection pool size per process")
    embedding_model: str = setting(
        "ALL_MINILM_L12_V2", check=_identifier, help="model name in VECTOR_EMBEDDING (Oracle)"
    )
    embedding_dim: int = setting(384, 1, 65_535, help="every vector is checked against it")
    embedding_threads: int = setting(0, 0, 256, help="onnxruntime threads (0 = one per core)")
    top_k: int = setting(8, 1, 100, help="chunks retrieved per question")
    list_limit: int = setting(
        20,
        1,
        100,
        help="records a filter answer cites before it states the exact total and cuts (docs/answers.md)",
    )
    backfill_on_startup: bool = setting(
        True, help="serve enqueues entities without a chunk, in the background"
    )
    worker_poll_ms: int = setting(2000, 50, 3_600_000, help="worker sleep when the queue is empty")
    worker_initial_delay_ms: int = setting(5000, 0, 3_600_000, help="worker delay after start")
    batch_size: int = setting(32, 1, 1000, help="queue rows per transaction")
    max_attempts: int = setting(5, 1, 100, help="failures before a queue row is parked")
    vector_index_type: str = setting(
        "IVF", choices=("IVF", "HNSW"), help="Oracle vector index organisation (migration V1)"
    )
    vector_index_accuracy: int = setting(90, 1, 100, help="WITH TARGET ACCURACY")
    vector_index_partitions: int = setting(
        0, 0, 10_000_000, help="IVF NEIGHBOR PARTITIONS (0 = Oracle decides)"
    )
    rrf_k: int = setting(60, 1, 10_000, help="Reciprocal Rank Fusion constant")
    semantic_weight: float = setting(1.0, 0.0, 100.0, help="RRF weight of the vector leg")
    keyword_weight: float = setting(1.0, 0.0, 100.0, help="RRF weight of the keyword leg")
    hybrid_fusion: str = setting(
        "RRF",
        choices=("RRF", "ZSCORE"),
        help="how hybrid fuses its legs: RRF = Reciprocal Rank Fusion (rrf_k, semantic_weight, "
        "keyword_weight); ZSCORE = each leg's scores standardised over the records it returned, then "
        "hybrid_alpha * semantic + (1 - hybrid_alpha) * keyword (ranks better on Cranfield and the help "
        "desk; its scores on the embedded engine agree with SQL's to about 1e-6, not exactly). "
        "See docs/retrieval.md",
    )
    hybrid_alpha: float = setting(
        0.6, 0.0, 1.0, help="ZSCORE fusion: the semantic leg's share (the keyword leg has the rest)"
    )
    hybrid_depth: int = setting(
        100,
        1,
        400,
        help="each hybrid leg fetches its top `max(k, hybrid_depth)` records (capped at 400) for Reciprocal "
        "Rank Fusion",
    )
    hybrid_semantic_chunk: str = setting(
        "FIRST",
        choices=("FIRST", "NEAREST"),
        help="which chunk ranks a record in hybrid's semantic leg: FIRST = its first window, as a "
        "single-vector retriever and the RRF baseline rank it; NEAREST = its nearest chunk, as semantic mode "
        "does (see docs/retrieval.md)",
    )
    embedded_vector_cache: bool = setting(
        True,
        help="embedded engine: semantic search through an in-process exact vector index (4 B × 384 per "
        "chunk: 154 MB at 100k chunks, loaded on the first search), SQL re-checks scope; false = the SQL "
        "scan (see docs/retrieval.md)",
    )
    embedded_term_index: bool = setting(
        True,
        help="embedded engine: keyword search through an in-process BM25 index of RAG_CHUNK_TERM (loaded on "
        "the first keyword search), SQL re-checks the results; `false` = BM25 in SQL (see docs/retrieval.md)",
    )
    bm25_k1: float = setting(
        1.5, 0.0, 3.0, help="BM25 term-frequency saturation (keyword leg; see docs/retrieval.md)"
    )
    bm25_b: float = setting(0.75, 0.0, 1.0, help="BM25 length normalisation")
    chunk_window: int = setting(
        254,
        32,
        254,
        help="wordpieces per chunk of a long record (the model reads 256 including `[CLS]`/`[SEP]`)",
    )
    chunk_overlap: int = setting(
        32, 0, 127, help="wordpieces shared by consecutive chunks of a record, at most `chunk_window / 2`"
    )
    llm_url: str | None = setting(None, help="OpenAI-compatible endpoint; unset = extractive answers")
    llm_model: str | None = setting(None, help="model name sent to the endpoint")
    llm_api_key: str | None = setting(None, help="API key (never logged)")
    llm_api_key_env: str | None = setting(None, help="read the key from this variable instead")
    llm_timeout_s: float = setting(
        300.0,
        0.1,
        600.0,
        help="per LLM call (fits a small model on CPU; a structured answer streams before it)",
    )
    llm_passages: int = setting(
        4, 1, 50, help="records or chunks given to the model per answer (small models do better with few)"
    )
    llm_max_tokens: int = setting(512, 1, 16_384, help="answer length")
    llm_max_retries: int = setting(2, 0, 10, help="retries on timeout, 429, 5xx (with backoff)")
    history_token_budget: int = setting(1500, 0, 100_000, help="earlier turns included in the prompt")
    max_question_chars: int = setting(4000, 1, 16_000, help="longer questions are refused")
    aggregate_database_url: str | None = setting(
        None, help="the read-only user for model-written SQL (Oracle only)"
    )
    aggregate_db_password_env: str = setting(
        "ORACLE_RAG_RO_PASSWORD", check=_env_var_name, help="its password"
    )
    aggregate_timeout_s: float = setting(10.0, 0.1, 600.0, help="guarded query timeout")
    aggregate_row_cap: int = setting(1000, 1, 1_000_000, help="rows fetched at most (the cap is reported)")
    aggregate_byte_cap: int = setting(
        1_000_000,
        1024,
        100_000_000,
        help="bytes of result values fetched at most (UTF-8; the cap is reported)",
    )
    aggregate_prompt_chars: int = setting(
        8_000,
        200,
        1_000_000,
        help="characters of a query result placed in the model's prompt (the cut is said)",
    )
    aggregate_retries: int = setting(2, 0, 10, help="corrections asked of the model after a refusal")
    feedback_per_minute: int = setting(
        20,
        1,
        10_000,
        help="ratings (POST /api/feedback, /v1/feedback) one caller may send in any minute; more are refused "
        "with 429",
    )
    demo: bool = setting(False, help="demo mode (employee picker on the page)")
    allowed_hosts: str = setting(
        "localhost,127.0.0.1,::1",
        check=allowed_hosts_problem,
        help="the Host names the web server answers (others: 400 HOST_NOT_ALLOWED; defeats DNS rebinding); "
        "/healthz is exempt",
    )
    metrics_token_env: str | None = setting(
        None,
        check=_env_var_name,
        help="/metrics: unset = loopback peers only; set = only requests with Authorization: Bearer <that "
        "variable's value>",
    )
    mcp_token_env: str = setting(
        "ORACLE_RAG_MCP_TOKEN",
        check=_env_var_name,
        help="oracle-rag mcp on stdio: the variable holding the caller's API token (docs/mcp.md)",
    )
    tracing_exporter: str = setting(
        "NONE",
        choices=("NONE", "CONSOLE", "OTLP"),
        help="OpenTelemetry traces for serve and mcp (docs/tracing.md); console writes to stderr",
    )
    tracing_otlp_endpoint: str | None = setting(
        None, help="OTLP/HTTP collector (http://collector:4318); unset: the OTEL_EXPORTER_OTLP_* variables"
    )
    tracing_service_name: str = setting("oracle-rag", help="the service.name resource attribute")
    tracing_capture_content: bool = setting(
        False, help="also put questions, prompts, answers and guarded SQL text in spans"
    )
    see_all_roles: str = setting(
        "manager,admin",
        check=lambda v: _roles_list(v),
        help="[access] roles that read every record (comma-separated; TOML: a list); docs/access.md",
    )
    access_roles_query: str | None = setting(
        None,
        help="[access] roles_query: SELECT (employee id, role) pairs, read on the read-only session SQL "
        "sources use; unset: EMPLOYEE.ROLE when that table exists",
    )
    access_groups_query: str | None = setting(
        None,
        help="[access] groups_query: SELECT (employee id, group) pairs, read like roles_query; unset: "
        "callers have no groups",
    )
    access_refresh: str = setting(
        "5m",
        check=lambda v: _duration(v, 1.0, 86_400.0),
        help="[access] refresh: how long roles and groups read by the queries are kept before being "
        "read again",
    )
    access_vpd: bool = setting(
        False,
        help="[access] vpd: Oracle: set the VPD access context on every pooled connection (set it before "
        "`oracle-rag provision --vpd`); docs/access.md",
    )
    audit_questions: bool = setting(
        False,
        help="[access] also store the question text in the audit trail (oracle-rag audit), and the guarded "
        "SQL with its literals (otherwise they are placeholders)",
    )
    audit_retention: str = setting(
        "30d",
        check=lambda v: _duration(v, 3600.0, 3650 * 86_400.0),
        help="[access] audit rows older than this are pruned by the background services",
    )
    reference_app: str = setting(
        "AUTO",
        choices=("AUTO", "ON", "OFF"),
        help="the reference application's sources (TASK, SPRINT, PROJECT) and people (EMPLOYEE): AUTO = "
        "where its tables exist; ON = always; OFF = never (a database whose own tables have those names)",
    )
    people_query: str | None = setting(
        None,
        help="[people] query: SELECT (person id, name) or (person id, first name, last name), read on the "
        "read-only session: the names of every person facet's ids (docs/access.md); unset: EMPLOYEE's names "
        "where the reference application's tables exist, else ids are shown",
    )
    people_refresh: str = setting(
        "5m",
        check=lambda v: _duration(v, 1.0, 86_400.0),
        help="[people] refresh: how long the names read by the query are kept before being read again",
    )
    auth_issuer: str | None = setting(
        None,
        help="[auth] issuer: the identity provider's issuer, compared exactly with a JWT's `iss`; set: "
        "Bearer JWTs from it are callers on /api, /v1 and MCP's HTTP (docs/identity.md); unset: API "
        "tokens only",
    )
    auth_audience: str | None = setting(
        None,
        help="[auth] audience: the `aud` a JWT must name exactly (one of its values); required with issuer",
    )
    auth_jwks_url: str | None = setting(
        None,
        help="[auth] jwks_url: the issuer's JSON Web Key Set (https; http only on a loopback host), cached "
        "and fetched again on an unknown key id",
    )
    auth_jwks_file: str | None = setting(
        None,
        help="[auth] jwks_file: the key set read from a file instead of jwks_url (read again like the URL)",
    )
    auth_jwks_refresh: str = setting(
        "1h",
        check=lambda v: _duration(v, 60.0, 86_400.0),
        help="[auth] jwks_refresh: how long the key set is kept before it is read again (an unknown key id "
        "reads it sooner, at most every 30s)",
    )
    auth_algorithms: str = setting(
        "RS256,ES256",
        check=lambda v: _algorithms(v),
        help="[auth] algorithms: the signature algorithms accepted (comma-separated; TOML: a list); "
        "public-key algorithms only, never none or HS*",
    )
    auth_leeway: str = setting(
        "60s",
        check=lambda v: _duration(v, 0.0, 300.0),
        help="[auth] leeway: clock skew allowed on `exp` and `nbf` (0s to 5m)",
    )
    auth_id_claim: str = setting(
        "sub",
        check=lambda v: _claim_path(v),
        help="[auth] id_claim: the claim holding the caller's id (dots reach into "
        "objects: `ext.employee_id`)",
    )
    auth_subject_query: str | None = setting(
        None,
        help="[auth] subject_query: SELECT (id claim value, employee id), read on the read-only session like "
        "the [access] queries, when the provider's id is not the application's; unset: the claim is the "
        "employee id",
    )
    auth_roles_claim: str | None = setting(
        None,
        check=lambda v: _claim_path(v),
        help="[auth] roles_claim: a claim holding the caller's roles (a list or one "
        "string; `realm_access.roles`)",
    )
    auth_groups_claim: str | None = setting(
        None, check=lambda v: _claim_path(v), help="[auth] groups_claim: a claim holding the caller's groups"
    )
    auth_prefer: str = setting(
        "ACCESS",
        choices=("ACCESS", "TOKEN"),
        help="[auth] prefer: where a claim and an [access] source both give roles (or groups), which is "
        "used: ACCESS = the [access] queries (or EMPLOYEE.ROLE), TOKEN = the claims",
    )
    auth_resource: str | None = setting(
        None,
        help="[auth] resource: the MCP server's public URL (https://rag.example.com/mcp), named in its OAuth "
        "protected resource metadata; unset: the address `oracle-rag mcp --http` listens on",
    )
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


def _declared() -> dict[str, Setting]:
    hints = get_type_hints(Settings)
    out: dict[str, Setting] = {}
    for f in fields(Settings):
        spec = f.metadata.get("setting")
        if spec is None:
            continue
        kind = hints[f.name]
        if isinstance(kind, UnionType):  # ``str | None``: the value's type is the one that is not None
            kind = next(t for t in get_args(kind) if t is not type(None))
        out[f.name] = Setting(f.name, kind, f.default, **spec)
    return out


# Every setting, as declared in :class:`Settings`.
SETTINGS: dict[str, Setting] = _declared()


def _coerce(key: str, raw: Any, spec: Setting, origin: str) -> Any:
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
        if (
            value != value
            or (spec.lo is not None and value < spec.lo)
            or (spec.hi is not None and value > spec.hi)
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
    for name, spec in SETTINGS.items():
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
        check_url(
            settings.aggregate_database_url,
            key="aggregate_database_url",
            password_env=settings.aggregate_db_password_env,
        )
    if settings.llm_url:
        check_url(settings.llm_url, key="llm_url", password_env="ORACLE_RAG_LLM_API_KEY", allow_user=False)
    if settings.chunk_overlap * 2 > settings.chunk_window:
        raise ConfigurationError(
            f"{source} chunk_overlap: invalid value, expected at most half of chunk_window "
            f"({settings.chunk_window // 2})",
            key="chunk_overlap",
        )
    if settings.auth_issuer:
        _check_auth(settings)
    if settings.tracing_otlp_endpoint:
        check_url(
            settings.tracing_otlp_endpoint,
            key="tracing_otlp_endpoint",
            password_env="OTEL_EXPORTER_OTLP_HEADERS",
            allow_user=False,
        )
    return settings


def _check_auth(settings: Settings) -> None:
    """An issuer needs an audience and exactly one key set; the key set's URL is https (http on loopback)."""
    if not settings.auth_audience:
        raise ConfigurationError(
            "auth.audience: required with auth.issuer (the `aud` tokens must name)", key="auth_audience"
        )
    if bool(settings.auth_jwks_url) == bool(settings.auth_jwks_file):
        raise ConfigurationError(
            "auth: give jwks_url or jwks_file (one of them) with issuer", key="auth_jwks_url"
        )
    if settings.auth_jwks_url:
        url = check_url(settings.auth_jwks_url, key="auth_jwks_url", allow_user=False)
        parsed = urlsplit(url)
        loopback = (parsed.hostname or "") in ("localhost", "127.0.0.1", "::1")
        if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
            raise ConfigurationError(
                "auth.jwks_url: an https:// URL (http:// only on a loopback host)", key="auth_jwks_url"
            )
    if settings.auth_resource and urlsplit(settings.auth_resource).scheme not in ("http", "https"):
        raise ConfigurationError(
            "auth.resource: the MCP server's URL (https://host/mcp)", key="auth_resource"
        )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigurationError(f"config file not found: {path}", key="ORACLE_RAG_CONFIG") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f"config file {path} is not valid TOML: {exc}", key="ORACLE_RAG_CONFIG"
        ) from None


# ORACLE_RAG_* variables that are read, but are not settings: the config file,
# the local/ scripts' own knobs, and the test suite's (ORACLE_RAG_TEST_*).
# Variables named by the *_env settings (passwords, keys, the MCP and metrics
# tokens) are added per call.
OTHER_ENV = ("ORACLE_RAG_CONFIG", "ORACLE_RAG_BIN", "ORACLE_RAG_MODEL_FILE")
_TEST_ENV_PREFIX = "ORACLE_RAG_TEST_"
_warned_env: set[str] = set()
log = logging.getLogger("oracle_rag.config")


# The [access] table's keys and the settings they set (docs/access.md).
ACCESS_KEYS = {
    "see_all_roles": "see_all_roles",
    "roles_query": "access_roles_query",
    "groups_query": "access_groups_query",
    "refresh": "access_refresh",
    "vpd": "access_vpd",
    "audit_questions": "audit_questions",
    "audit_retention": "audit_retention",
}


# The [people] table's keys and the settings they set (docs/access.md).
PEOPLE_KEYS = {"query": "people_query", "refresh": "people_refresh"}

# The [auth] table's keys and the settings they set (docs/identity.md).
AUTH_KEYS = {
    key: f"auth_{key}"
    for key in (
        "issuer",
        "audience",
        "jwks_url",
        "jwks_file",
        "jwks_refresh",
        "algorithms",
        "leeway",
        "id_claim",
        "subject_query",
        "roles_claim",
        "groups_claim",
        "prefer",
        "resource",
    )
}
# Keys whose TOML value may be a list of names (joined by commas, as the environment spells them).
_LIST_KEYS = {"see_all_roles", "algorithms"}


def _access_table(
    table: Any, path: Path, name: str = "access", keys: Mapping[str, str] = ACCESS_KEYS
) -> dict[str, Any]:
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: [{name}] must be a table", key=name)
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in keys:
            raise ConfigurationError(
                f"{path}: [{name}] unknown key {key!r}; known keys: {', '.join(keys)}", key=f"{name}.{key}"
            )
        if key in _LIST_KEYS and isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise ConfigurationError(f"{path}: [{name}] {key}: a list of names", key=f"{name}.{key}")
            value = ",".join(value)
        out[keys[key]] = value
    return out


def _warn_unknown_env(env: Mapping[str, str], values: Mapping[str, Any]) -> None:
    """Warn (once per process) about an ORACLE_RAG_* variable that nothing reads.

    Unlike a TOML key, an environment variable may belong to someone else, so
    it is a warning, not an error; but ``ORACLE_RAG_TOPK`` silently ignored
    costs an afternoon, so the warning names the closest valid variable.
    """
    settings_env = [ENV_PREFIX + key.upper() for key in SETTINGS]
    known = {*settings_env, *OTHER_ENV}
    for key in SETTINGS:
        if key.endswith("_env"):  # names a variable that is read (a password, a key, a token)
            known.add(str(values.get(key) or getattr(Settings, key, "") or ""))
    for name in env:
        if not name.startswith(ENV_PREFIX) or name in known or name.startswith(_TEST_ENV_PREFIX):
            continue
        if name in _warned_env:
            continue
        _warned_env.add(name)
        # compare what follows the prefix: the shared prefix would make anything look close
        close = difflib.get_close_matches(
            name[len(ENV_PREFIX) :], [k.upper() for k in SETTINGS], n=1, cutoff=0.7
        )
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
        data.update(_access_table(data.pop("access", None), cfg_path))
        data.update(_access_table(data.pop("people", None), cfg_path, "people", PEOPLE_KEYS))
        data.update(_access_table(data.pop("auth", None), cfg_path, "auth", AUTH_KEYS))
        for key, value in data.items():
            if key not in SETTINGS:
                raise ConfigurationError(
                    f"{cfg_path}: unknown key {key!r}; known keys: {', '.join(sorted(SETTINGS))}",
                    key=key,
                )
            values[key] = _coerce(key, value, SETTINGS[key], str(cfg_path))
        if not isinstance(sources, dict) or any(not isinstance(v, dict) for v in sources.values()):
            raise ConfigurationError(f"{cfg_path}: [sources.NAME] must be tables", key="sources")
        values["sources"] = sources
    for key, spec in SETTINGS.items():
        env_key = ENV_PREFIX + key.upper()
        if env_key in env and env[env_key] != "":
            values[key] = _coerce(env_key, env[env_key], spec, "environment")
    _warn_unknown_env(env, values)
    values.update({k: v for k, v in overrides.items() if v is not None})
    unknown = set(values) - {f.name for f in fields(Settings)}
    if unknown:
        raise ConfigurationError(f"unknown setting(s): {', '.join(sorted(unknown))}", key=sorted(unknown)[0])
    return _validated(Settings(**values), source="override")
