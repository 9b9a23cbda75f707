"""Provision an Oracle database for oracle-rag: schema and embedding model, idempotently.

``oracle-rag model load`` and ``oracle-rag bootstrap`` call these functions;
deploy scripts (``local/bootstrap.sh``, Terraform's instructions) run
``bootstrap`` on every deploy, so every step is safe to repeat: migrations
skip applied versions, and the model load skips a model that
``USER_MINING_MODELS`` already lists (checked inside the PL/SQL block, see
:mod:`oracle_rag.engines.oracle.provision_sql`).

Two ways in:

* :func:`load_model_file` sends a local ONNX file as a BLOB
  (``DBMS_VECTOR.LOAD_ONNX_MODEL(model_name, model_data, metadata)``): no
  DIRECTORY object, works against any database the client can reach.
* :func:`load_model_url` asks the database to fetch a pre-authenticated
  Object Storage URL (``DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD``, credential
  NULL): nothing passes through the client. On Autonomous Database this is
  the normal path. A PAR URL is a bearer credential, so it is never echoed:
  outcomes, errors and logs name only its host.

The embedded SQLite engine has no model to load (it runs the ONNX file
in-process), so these functions refuse it with a ConfigurationError.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from oracle_rag.config import Settings
from oracle_rag.engines import Engine, engine_sql
from oracle_rag.engines.oracle import provision_sql as q
from oracle_rag.engines.oracle import vpd_sql as vpd
from oracle_rag.engines.statements import Sql
from oracle_rag.errors import ConfigurationError, DatabaseError, InputError, wrap_driver_error
from oracle_rag.indexing.index_maintenance import rebuild_if_due
from oracle_rag.migrations import migrate_all

log = logging.getLogger("oracle_rag.indexing.provision")

PAR_URL_ENV = "MINILM_ONNX_PAR_URL"
"""Environment variable ``oracle-rag bootstrap`` reads the model's PAR URL from."""

# DBMS_VECTOR accepts files up to 1 GB on 23ai (2 GB in the 26ai docs); refuse
# obviously wrong inputs before sending a byte.
MAX_MODEL_BYTES = 2 * 1024**3

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]{0,122}$")

# Oracle SQL reserved words (V$RESERVED_WORDS with RESERVED = 'Y'): an
# unquoted identifier may not be one of them.
_RESERVED = frozenset(
    """
ACCESS ADD ALL ALTER AND ANY AS ASC AUDIT BETWEEN BY CHAR CHECK CLUSTER COLUMN COMMENT
COMPRESS CONNECT CREATE CURRENT DATE DECIMAL DEFAULT DELETE DESC DISTINCT DROP ELSE
EXCLUSIVE EXISTS FILE FLOAT FOR FROM GRANT GROUP HAVING IDENTIFIED IMMEDIATE IN INCREMENT
INDEX INITIAL INSERT INTEGER INTERSECT INTO IS LEVEL LIKE LOCK LONG MAXEXTENTS MINUS
MLSLABEL MODE MODIFY NOAUDIT NOCOMPRESS NOT NOWAIT NULL NUMBER OF OFFLINE ON ONLINE OPTION
OR ORDER PCTFREE PRIOR PUBLIC RAW RENAME RESOURCE REVOKE ROW ROWID ROWNUM ROWS SELECT
SESSION SET SHARE SIZE SMALLINT START SUCCESSFUL SYNONYM SYSDATE TABLE THEN TO TRIGGER UID
UNION UNIQUE UPDATE USER VALIDATE VALUES VARCHAR VARCHAR2 VIEW WHENEVER WHERE WITH
""".split()
)

SQLITE_REFUSAL = "the embedded engine runs the model in-process; use `oracle-rag model build`"
SQLITE_VPD_REFUSAL = (
    "VPD is an Oracle feature: the embedded engine has none to provision (its scope is in every "
    "statement, and guarded SQL runs on a read-only connection; docs/access.md)"
)


def model_identifier(name: str) -> str:
    """``name`` as Oracle stores an unquoted identifier (upper case), or InputError.

    Letter first, then letters, digits, ``_``, ``$`` or ``#``; at most 123
    characters (Oracle's limit for a model name); not a reserved word. The
    one place a model name is checked before it reaches SQL (as a bind here,
    as an identifier in ``VECTOR_EMBEDDING`` via ``engine_sql.render``).
    """
    text = str(name).strip()
    if not _IDENT.match(text):
        raise InputError(
            "model name must be an unquoted Oracle identifier: a letter, then letters, digits, "
            "_ $ or #, at most 123 characters"
        )
    upper = text.upper()
    if upper in _RESERVED:
        raise InputError(f"model name {upper} is an Oracle reserved word")
    return upper


def par_url_host(url: str) -> str:
    """The host of a pre-authenticated https URL; InputError (without the URL) otherwise."""
    try:
        parts = urlsplit(str(url).strip())
        host = parts.hostname
    except ValueError:
        host, parts = None, None
    if parts is None or parts.scheme.lower() != "https" or not host:
        raise InputError("the model URL must be an https:// pre-authenticated request URL (not shown)")
    if parts.username or parts.password:
        raise InputError("the model URL must not carry user:password@ (a PAR URL needs none; not shown)")
    return host


def _require_oracle(engine: Engine, refusal: str = SQLITE_REFUSAL) -> None:
    if not engine.loads_models:
        raise ConfigurationError(refusal, key="database_url")


def _describe(outcome: str, name: str, source: str, *, replace: bool) -> str:
    if outcome == "LOADED":
        return f"loaded {name} ({source})"
    if outcome == "REPLACED":
        return f"replaced {name} ({source})"
    if outcome == "CONCURRENT":
        return f"{name} was loaded by another session meanwhile; skipped"
    if outcome == "SKIPPED" and not replace:
        return f"{name} already loaded; skipped (use --replace)"
    raise DatabaseError(f"loading model {name}: unexpected outcome {outcome!r}")


def _run_block(engine: Engine, sql: Sql, binds: Callable[[Any], Mapping[str, Any]], doing: str) -> str:
    """Run one provisioning block on a raw python-oracledb cursor; return ``:outcome``.

    Raw cursor because the BLOB and the OUT bind are driver objects. Driver
    errors are wrapped without their text: an ORA- message from
    LOAD_ONNX_MODEL_CLOUD can quote the URL.
    """
    import oracledb

    try:
        with engine.begin() as conn:
            raw = conn.connection.driver_connection
            cursor = raw.cursor()  # type: ignore[union-attr]
            try:
                outcome = cursor.var(oracledb.DB_TYPE_VARCHAR, 32)  # LOADED, REPLACED, SKIPPED, CONCURRENT
                cursor.execute(engine.text(sql), {**binds(raw), "outcome": outcome})
                value = outcome.getvalue()
            finally:
                cursor.close()
    except oracledb.Error as exc:
        raise wrap_driver_error(exc, doing) from None
    except DatabaseError as exc:  # connecting failed (already wrapped by the engine)
        raise DatabaseError(
            f"{doing}: {exc.message}", driver_class=exc.driver_class, vendor_code=exc.vendor_code
        ) from None
    return str(value or "")


def load_model_file(engine: Engine, path: Path, *, name: str | None = None, replace: bool = False) -> str:
    """Load a local ONNX file into Oracle as ``name`` (default: the configured model), once.

    Returns a one-line outcome such as ``loaded ALL_MINILM_L6_V2 (90.1 MB)``
    or ``ALL_MINILM_L6_V2 already loaded; skipped (use --replace)``.
    """
    _require_oracle(engine)
    model = model_identifier(name or engine.settings.embedding_model)
    path = Path(path)
    if not path.is_file():
        raise InputError(f"model file {path} does not exist")
    size = path.stat().st_size
    if size == 0 or size > MAX_MODEL_BYTES:
        raise InputError(f"model file {path} has {size} bytes; expected 1 byte to 2 GB")
    data = path.read_bytes()

    def binds(raw: Any) -> dict[str, Any]:
        import oracledb

        return {
            "model_name": model,
            "replace": 1 if replace else 0,
            "model_data": raw.createlob(oracledb.DB_TYPE_BLOB, data),
        }

    log.info("loading model %s from %s (%d bytes)", model, path.name, size)
    outcome = _run_block(engine, q.LOAD_MODEL_BLOB, binds, f"loading model {model} from {path.name}")
    return _describe(outcome, model, f"{size / 1e6:.1f} MB", replace=replace)


def load_model_url(engine: Engine, url: str, *, name: str | None = None, replace: bool = False) -> str:
    """Have Oracle fetch the model from a pre-authenticated URL (``LOAD_ONNX_MODEL_CLOUD``), once.

    The URL is a secret: only its host appears in the outcome, in errors and
    in logs.
    """
    _require_oracle(engine)
    host = par_url_host(url)
    model = model_identifier(name or engine.settings.embedding_model)

    def binds(_raw: Any) -> dict[str, Any]:
        return {"model_name": model, "replace": 1 if replace else 0, "uri": str(url).strip()}

    log.info("loading model %s from %s (pre-authenticated URL, not logged)", model, host)
    outcome = _run_block(engine, q.LOAD_MODEL_CLOUD, binds, f"loading model {model} from {host}")
    return _describe(outcome, model, f"from {host}", replace=replace)


def drop_model(engine: Engine, name: str) -> bool:
    """Drop model ``name`` if ``USER_MINING_MODELS`` lists it; True when something was dropped."""
    _require_oracle(engine)
    model = model_identifier(name)
    outcome = _run_block(engine, q.DROP_MODEL, lambda _raw: {"model_name": model}, f"dropping model {model}")
    return outcome == "DROPPED"


def model_present(engine: Engine, name: str) -> bool:
    """True when ``USER_MINING_MODELS`` lists ``name`` (Oracle only)."""
    _require_oracle(engine)
    model = model_identifier(name)
    with engine.connect() as conn:
        found = conn.execute(engine.statement(engine_sql.MODEL_EXISTS), {"model_name": model}).scalar_one()
    return bool(found)


def bootstrap(
    engine: Engine, settings: Settings, par_url: str | None, progress: Callable[[str], None] | None = None
) -> list[str]:
    """Bring a database up to date for the application; every re-run is a no-op.

    Applies pending migrations, then, when ``par_url`` is given (``oracle-rag
    bootstrap`` reads it from ``MINILM_ONNX_PAR_URL``), loads the model named
    ``settings.embedding_model`` from it unless it is already loaded. The
    same steps serve Oracle Database Free and Autonomous Database. Last, on
    Oracle, the vector index is rebuilt when chunks exist and it was never
    rebuilt with chunks, or the table has doubled since
    (:func:`oracle_rag.indexing.index_maintenance.rebuild_if_due`): V1 builds the IVF
    index on an empty table, and its centroids are fixed at build time. On
    the embedded engine there is no model to load: it migrates, and refuses a
    URL. Returns one line per step.
    """
    par_url = (par_url or "").strip() or None
    if par_url is not None:
        _require_oracle(engine)
        par_url_host(par_url)  # refuse a bad URL before changing anything
    lines = []
    for mset, report in migrate_all(engine, ("rag",), progress).items():
        lines.append(
            f"migrations ({mset}): applied {report.applied or 'none'}, resumed "
            f"{report.resumed or 'none'}, already applied {report.skipped or 'none'}"
        )
    if not engine.loads_models:
        lines.append("model: the embedded engine runs it in-process (built on first use)")
        return lines
    elif par_url is not None:
        lines.append("model: " + load_model_url(engine, par_url, name=settings.embedding_model))
    else:
        model = model_identifier(settings.embedding_model)
        if model_present(engine, model):
            lines.append(f"model: {model} present; {PAR_URL_ENV} not set, nothing to load")
        else:
            lines.append(
                f"model: {model} is NOT loaded and {PAR_URL_ENV} is not set; load it with "
                f"`oracle-rag model load --file FILE --name {model}` or set {PAR_URL_ENV}"
            )
    lines.append(rebuild_if_due(engine))  # IVF centroids from real data: once after the first backfill
    return lines


def _require_valid_package(engine: Engine, conn: Any) -> None:
    """The package and its body compiled (VALID): a compile error is only a driver warning (DPY-7000)."""
    rows = {str(r[0]): (str(r[1]), r[2]) for r in conn.execute(engine.statement(vpd.PACKAGE_STATUS))}
    bad = [
        f"{kind} {status}: {errors or 'no USER_ERRORS rows'}"
        for kind, (status, errors) in sorted(rows.items())
        if status != "VALID"
    ]
    missing = [kind for kind in ("PACKAGE", "PACKAGE BODY") if kind not in rows]
    if bad or missing:
        raise DatabaseError(
            "provisioning the VPD policy: RAG_ACCESS_CTX_PKG did not compile ("
            + "; ".join(bad + [f"{kind} missing" for kind in missing])
            + "); no policy was added",
            vendor_code="DPY-7000",
        )


def provision_vpd(engine: Engine) -> list[str]:
    """Oracle's second wall (engines/oracle/vpd_sql.py): the access context, its package, the VPD policies.

    Re-runnable (``CREATE OR REPLACE``; each policy is dropped first when it
    exists). Needs EXECUTE on DBMS_RLS and the CREATE ANY CONTEXT privilege
    for the application user: ``local/grant_vpd.sql``, run once as a DBA (docs/access.md).
    """
    _require_oracle(engine, SQLITE_VPD_REFUSAL)
    done = []
    try:
        with engine.begin() as conn:
            for sql, what in zip(
                vpd.PROVISION,
                (
                    "package RAG_ACCESS_CTX_PKG",
                    "package body RAG_ACCESS_CTX_PKG",
                    "context RAG_ACCESS_CTX (this schema's)",
                    "policy RAG_CHUNK_ACCESS",
                    "policy RAG_CHUNK_ACL_ACCESS",
                    "policy RAG_CHUNK_TERM_ACCESS",
                ),
                strict=True,
            ):
                conn.exec_driver_sql(engine.text(sql))
                done.append(f"created {what}")
                if sql is vpd.CREATE_PACKAGE_BODY:
                    _require_valid_package(engine, conn)
    except DatabaseError:
        raise
    except Exception as exc:
        raise wrap_driver_error(exc, "provisioning the VPD policy") from None
    if not engine.settings.access_vpd:
        done.append(
            "now set [access] vpd = true (access_vpd) and restart: until then this schema's own "
            "sessions have no access context and read no RAG_CHUNK row (migrate, bootstrap, the "
            "worker and index rebuild refuse to run)"
        )
    return done
