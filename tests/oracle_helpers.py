"""One Oracle database for the integration suites (tests/oracle, tests/conformance).

Where the database comes from, in order:

1. ``ORACLE_RAG_TEST_URL`` (``oracle+oracledb://user@host:port/?service_name=...``,
   no password in it) with the password in ``ORACLE_RAG_TEST_PASSWORD``. Use a
   dedicated, throwaway application user (never SYS/SYSTEM: a vector index
   cannot live in the SYSTEM tablespace, ORA-51963). Optional:
   ``ORACLE_RAG_TEST_RO_URL`` + ``ORACLE_RAG_TEST_RO_PASSWORD`` for a read-only user.
2. Otherwise, when a Docker engine answers, testcontainers starts
   ``gvenzl/oracle-free:23.26.3-faststart`` (the regular flavour: Oracle Text
   is in it, the ``-slim`` images remove it) with an application user
   ``RAG_TEST`` and a read-only user ``RAG_TEST_RO``, once per test session.
3. Otherwise every Oracle test is skipped with one line saying why. With
   ``ORACLE_RAG_TEST_ORACLE=1`` (CI that must test Oracle) that is a failure
   instead; with ``ORACLE_RAG_TEST_ORACLE=0`` no container is tried.

The Docker check is a socket test plus a 5-second ping, so a machine without
Docker skips at once. The tests reset the schema by dropping the product's
tables (RAG_*, the reference application's five tables): the reset refuses a
schema that holds any other table.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

IMAGE = "gvenzl/oracle-free:23.26.3-faststart"
APP_USER = "RAG_TEST"
RO_USER = "RAG_TEST_RO"
PASSWORD_ENV = "ORACLE_RAG_TEST_PASSWORD"
RO_PASSWORD_ENV = "ORACLE_RAG_TEST_RO_PASSWORD"
DEFAULT_MODEL_NAME = "ALL_MINILM_L6_V2"
DEMO_TABLES = ("TASK_COMMENT", "TASK", "SPRINT", "PROJECT", "EMPLOYEE")
RO_VIEWS = ("RAG_V_TASK", "RAG_V_SPRINT", "RAG_V_PROJECT", "RAG_V_EMPLOYEE")


@dataclass
class OracleTarget:
    url: str  # never holds a password
    password_env: str
    source: str
    ro_url: str | None = None
    ro_password_env: str | None = None
    model_name: str = DEFAULT_MODEL_NAME
    model_outcome: str = ""
    created_ro_user: bool = False

    @property
    def user(self) -> str:
        match = re.match(r"^[a-z+]+://([^@/:]+)@", self.url)
        return (match.group(1) if match else "").upper()

    def settings(self, data_dir: Path, **overrides: Any) -> Any:
        from oracle_rag.config import load_settings

        data_dir.mkdir(parents=True, exist_ok=True)
        config = data_dir / "empty.toml"
        config.write_text("")
        values = {"database_url": self.url, "db_password_env": self.password_env,
                  "embedding_model": self.model_name, "data_dir": str(data_dir)}
        values.update(overrides)
        return load_settings(env={}, config_file=config, **values)


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"target": None, "container": None}


def _docker_unreachable() -> str | None:
    """Why no Docker engine can be used, or None when one answers a ping."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not os.path.exists(host[len("unix://"):]):
        return f"no Docker engine (no socket at {host[len('unix://'):]})"
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:  # any failure means: no usable engine
        return f"no Docker engine ({type(exc).__name__})"
    return None


def unavailable_reason() -> str | None:
    if os.environ.get("ORACLE_RAG_TEST_URL"):
        return None
    if os.environ.get("ORACLE_RAG_TEST_ORACLE") == "0":
        return "ORACLE_RAG_TEST_URL is not set and ORACLE_RAG_TEST_ORACLE=0 disables testcontainers"
    docker = _docker_unreachable()
    if docker:
        return f"ORACLE_RAG_TEST_URL is not set and {docker}"
    return None


def _reason() -> str | None:
    """``unavailable_reason()``, computed once per session."""
    if "checked" not in _STATE:
        _STATE["checked"] = True
        reason = unavailable_reason()
        _STATE["reason"] = f"Oracle tests skipped: {reason}" if reason else None
    return _STATE["reason"]


def mark_oracle_items_unavailable(items: list[pytest.Item]) -> None:
    """At collection: skip every ``oracle`` item with the one reason when no Oracle is available.

    A skip marker (rather than a skip inside a fixture) lets pytest fold the report into one
    line per file, and no fixture (model build, container) runs for a skipped test. With
    ORACLE_RAG_TEST_ORACLE=1 nothing is skipped: the fixture fails instead.
    """
    oracle_items = [i for i in items if i.get_closest_marker("oracle")]
    if not oracle_items or os.environ.get("ORACLE_RAG_TEST_ORACLE") == "1":
        return
    reason = _reason()
    if reason:
        for item in oracle_items:
            item.add_marker(pytest.mark.skip(reason=reason))


def fold_skip_report(report: pytest.TestReport) -> None:
    """Report every "no Oracle" skip at one location, so ``-rs`` prints it on one line."""
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and "Oracle tests skipped:" in str(longrepr[2]):
        report.longrepr = (str(Path(__file__)), None, longrepr[2])  # type: ignore[assignment]


def require_oracle(request: pytest.FixtureRequest) -> OracleTarget:
    """The session's Oracle target (started and provisioned once), or skip with the reason."""
    with _LOCK:
        if _STATE["target"] is None and not _STATE.get("failed") and _reason() is None:
            try:
                _STATE["target"] = _provision(request)
            except Exception as exc:
                _STATE["reason"] = f"Oracle test database could not be prepared: {type(exc).__name__}: {exc}"
                _STATE["failed"] = True
        if _STATE["target"] is None:
            if _STATE.get("failed"):
                pytest.fail(_STATE["reason"], pytrace=False)
            if os.environ.get("ORACLE_RAG_TEST_ORACLE") == "1":
                pytest.fail("ORACLE_RAG_TEST_ORACLE=1 requires Oracle, but " +
                            _STATE["reason"].removeprefix("Oracle tests skipped: "), pytrace=False)
            pytest.skip(_STATE["reason"])
        return _STATE["target"]


def _provision(request: pytest.FixtureRequest) -> OracleTarget:
    target = _from_environment() if os.environ.get("ORACLE_RAG_TEST_URL") else _start_container(request)
    if target.user in ("SYS", "SYSTEM"):
        raise RuntimeError("use an application user, not SYS/SYSTEM (a vector index fails there: ORA-51963)")
    model_path: Path = request.getfixturevalue("model_path")
    target.model_outcome = load_model(target, model_path, target.model_name)
    return target


def _from_environment() -> OracleTarget:
    from oracle_rag.urlsafety import url_has_secret

    url = os.environ["ORACLE_RAG_TEST_URL"]
    if url_has_secret(url):
        raise RuntimeError(f"ORACLE_RAG_TEST_URL must not carry a password: put it in {PASSWORD_ENV}")
    ro_url = os.environ.get("ORACLE_RAG_TEST_RO_URL") or None
    return OracleTarget(url=url, password_env=PASSWORD_ENV, source="ORACLE_RAG_TEST_URL",
                        ro_url=ro_url, ro_password_env=RO_PASSWORD_ENV if ro_url else None,
                        model_name=os.environ.get("ORACLE_RAG_TEST_MODEL_NAME", DEFAULT_MODEL_NAME))


def _password() -> str:
    return "Rt" + secrets.token_hex(12)  # letters and digits only: no quoting questions anywhere


def _start_container(request: pytest.FixtureRequest) -> OracleTarget:
    try:
        from testcontainers.community.oracle import OracleDbContainer  # testcontainers >= 4.15
    except ImportError:  # pragma: no cover - older testcontainers
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from testcontainers.oracle import OracleDbContainer
    import oracledb

    system_pw, app_pw, ro_pw = _password(), _password(), _password()
    container = OracleDbContainer(IMAGE, oracle_password=system_pw, username=APP_USER, password=app_pw)
    container.start()  # waits for "DATABASE IS READY TO USE!"
    _STATE["container"] = container
    request.config.add_cleanup(container.stop)
    host, port = container.get_container_host_ip(), int(container.get_exposed_port(1521))
    dsn = f"{host}:{port}/FREEPDB1"
    # Grants on SYS's packages as SYS (SYSDBA): SYSTEM cannot grant EXECUTE on them in
    # gvenzl/oracle-free (ORA-01031), and a failed grant must fail the setup, not be swallowed.
    with oracledb.connect(user="sys", password=system_pw, dsn=dsn, mode=oracledb.AUTH_MODE_SYSDBA) as conn, \
            conn.cursor() as cur:
        for sql in (f"GRANT CREATE MINING MODEL TO {APP_USER}", f"GRANT CTXAPP TO {APP_USER}",
                    f"GRANT EXECUTE ON CTXSYS.CTX_DDL TO {APP_USER}", f"GRANT EXECUTE ON SYS.DBMS_VECTOR TO {APP_USER}"):
            cur.execute(sql)
        cur.execute(f'CREATE USER {RO_USER} IDENTIFIED BY "{ro_pw}" DEFAULT TABLESPACE USERS QUOTA 0 ON USERS')
        cur.execute(f"GRANT CREATE SESSION TO {RO_USER}")
        cur.execute(f"ALTER USER {RO_USER} READ ONLY")
        for view in RO_VIEWS:  # local/readonly_synonyms.sql, as SYS (CREATE ANY SYNONYM)
            cur.execute(f"CREATE OR REPLACE SYNONYM {RO_USER}.{view} FOR {APP_USER}.{view}")
    os.environ[PASSWORD_ENV] = app_pw
    os.environ[RO_PASSWORD_ENV] = ro_pw
    base = f"oracle+oracledb://{{user}}@{host}:{port}/?service_name=FREEPDB1"
    return OracleTarget(url=base.format(user=APP_USER), password_env=PASSWORD_ENV, source=f"testcontainers {IMAGE}",
                        ro_url=base.format(user=RO_USER), ro_password_env=RO_PASSWORD_ENV,
                        model_name=os.environ.get("ORACLE_RAG_TEST_MODEL_NAME", DEFAULT_MODEL_NAME),
                        created_ro_user=True)


def new_system(target: OracleTarget, tmp_path: Path, **overrides: Any) -> Any:
    """A RagSystem on the target, with its own data directory under ``tmp_path``."""
    from oracle_rag.system import RagSystem

    return RagSystem(target.settings(tmp_path / "data", **overrides))


def load_model(target: OracleTarget, model_path: Path, name: str, *, replace: bool = False) -> str:
    """Load our ONNX build into the target under ``name`` with the product's provisioning code."""
    from oracle_rag import provision
    from oracle_rag.engines.oracle import OracleEngine

    engine = OracleEngine(target.settings(Path(tempfile.mkdtemp(prefix="oracle-rag-test-"))))
    try:
        return provision.load_model_file(engine, model_path, name=name, replace=replace)
    finally:
        engine.dispose()


def drop_model(engine: Any, name: str) -> None:
    """Drop a model if it exists (test clean-up), with the product's DROP_MODEL block: a missing
    model is not an error (force => TRUE alone raises ORA-40284 for one)."""
    from oracle_rag import provision

    provision.drop_model(engine, name)


def reset_schema(engine: Any) -> None:
    """Drop the product's and the reference application's objects, so migrate starts from nothing.

    Refuses a schema with any other table: the suite must run as a throwaway user.
    """
    with engine.connect() as conn:
        # VECTOR$ (IVF centroids), DR$ (Oracle Text), DM$ (mining models), SYS_ (IOT overflow...):
        # generated with their owner, dropped with it, never ours to drop or to object to.
        tables = [r[0] for r in conn.exec_driver_sql(
            "SELECT TABLE_NAME FROM USER_TABLES WHERE NESTED = 'NO' AND SECONDARY = 'N'")
            if "$" not in r[0] and not r[0].startswith("SYS_")]
        views = [r[0] for r in conn.exec_driver_sql("SELECT VIEW_NAME FROM USER_VIEWS WHERE VIEW_NAME LIKE 'RAG\\_%' ESCAPE '\\'")]
    ours = [t for t in tables if t.startswith("RAG_") or t in DEMO_TABLES]
    foreign = sorted(set(tables) - set(ours))
    if foreign:
        raise RuntimeError(f"the test schema holds tables that are not oracle-rag's ({foreign[:5]}); "
                           f"refusing to reset it: use a dedicated test user")
    with engine.begin() as conn:
        for view in views:
            conn.exec_driver_sql(f'DROP VIEW "{view}"')
        for table in sorted(ours):  # CASCADE CONSTRAINTS: any order works
            conn.exec_driver_sql(f'DROP TABLE "{table}" CASCADE CONSTRAINTS PURGE')


def clear_rows(engine: Any) -> None:
    """Empty the queue, the chunks and the reference tables (DELETE: TRUNCATE would mark
    the vector index unusable)."""
    with engine.begin() as conn:
        for table in ("RAG_DIRTY", "RAG_CHUNK", *DEMO_TABLES):
            conn.exec_driver_sql(f"DELETE FROM {table}")


def readonly_system(oracle_system: Any, oracle_target: OracleTarget, data_dir: Path) -> Any:
    """A RagSystem whose guarded path connects as the read-only user, after granting it the views.

    Skips when the test target has no read-only user. The grants mirror
    local/grant_readonly.sql, run as the owner of the views.
    """
    import pytest

    if not oracle_target.ro_url or not oracle_target.ro_password_env:
        pytest.skip("no read-only user: set ORACLE_RAG_TEST_RO_URL and ORACLE_RAG_TEST_RO_PASSWORD")
    ro_user = re.match(r"^[a-z+]+://([^@/:]+)@", oracle_target.ro_url).group(1).upper()  # type: ignore[union-attr]
    with oracle_system.engine.begin() as conn:
        for view in RO_VIEWS:
            conn.exec_driver_sql(f"GRANT READ ON {view} TO {ro_user}")
    return new_system(oracle_target, data_dir, aggregate_database_url=oracle_target.ro_url,
                      aggregate_db_password_env=oracle_target.ro_password_env, aggregate_timeout_s=5.0)
