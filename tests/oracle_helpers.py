"""One Oracle database for the integration suites (tests/oracle, tests/conformance).

Where the database comes from, in order:

1. ``ORACLE_RAG_TEST_URL`` (``oracle+oracledb://user@host:port/?service_name=...``,
   no password in it) with the password in ``ORACLE_RAG_TEST_PASSWORD``. Use a
   dedicated, throwaway application user (never SYS/SYSTEM: a vector index
   cannot live in the SYSTEM tablespace, ORA-51963). Optional:
   ``ORACLE_RAG_TEST_RO_URL`` + ``ORACLE_RAG_TEST_RO_PASSWORD`` for a read-only user.
2. Otherwise, when a Docker engine answers, testcontainers starts the
   service of ``compose.dev.yml`` as a user would (local/README.md): its
   image, its environment variables, ``local/init`` mounted as
   ``/container-entrypoint-initdb.d`` (so the image itself runs
   ``local/init/01_users.sh`` as SYS on first start) and the model file
   mounted where compose mounts it. Users are the documented defaults,
   ``RAG_APP`` and ``RAG_RO``, so ``local/readonly_synonyms.sql`` and
   ``local/grant_readonly.sql`` run unedited. Once per test session.

Then, in either case, the session does what README/local/README.md tell a
user to do: ``oracle-rag model load --file ... --name ...`` (the CLI), and
with a SYS password (the container's, or ``ORACLE_RAG_TEST_SYS_PASSWORD``)
``local/readonly_synonyms.sql`` as SYS. ``local/grant_readonly.sql`` runs as
the application user when a test needs the read-only user
(:func:`readonly_system`). Files run through ``tests/sqlplus.py``, a reader
of the SQL*Plus subset they use; :data:`USER_FILES` lists each file with the
user it runs as, and ``tests/test_oracle_harness.py`` (not skipped) checks
that every user-facing file is listed and called.
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

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "compose.dev.yml"
APP_USER = "RAG_APP"  # the documented names: the user-facing scripts run unedited
RO_USER = "RAG_RO"
PASSWORD_ENV = "ORACLE_RAG_TEST_PASSWORD"
RO_PASSWORD_ENV = "ORACLE_RAG_TEST_RO_PASSWORD"
SYS_PASSWORD_ENV = "ORACLE_RAG_TEST_SYS_PASSWORD"

# Every file a user runs against the database, and as whom. tests/test_oracle_harness.py checks
# that each one is called by the fixtures or a test, and that every such file in the repository
# is listed here.
USER_FILES = {
    "local/init/01_users.sh": "SYS (by the image, as /container-entrypoint-initdb.d/01_users.sh)",
    "local/bootstrap.sh": "APP (runs `oracle-rag bootstrap` as the application user)",
    "local/readonly_synonyms.sql": "SYS",
    "local/grant_readonly.sql": "APP",
    "local/grant_vpd.sql": "SYS",
    "oracle_rag/sql/oracle/load_model.sql": "APP",
}
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
    sys_password_env: str | None = None  # SYS's password, when the suite may act as SYS
    host_gateway: str | None = None  # the address the database reaches this machine at (container case)

    @property
    def user(self) -> str:
        match = re.match(r"^[a-z+]+://([^@/:]+)@", self.url)
        return (match.group(1) if match else "").upper()

    @property
    def dsn(self) -> str:
        import sqlalchemy as sa

        url = sa.engine.make_url(self.url)
        return f"{url.host}:{url.port or 1521}/{url.query['service_name']}"

    def cli_env(self, data_dir: Path) -> dict[str, str]:
        """The environment local/README.md step 4 exports, for running the CLI."""
        return {
            "ORACLE_RAG_DATABASE_URL": self.url,
            "ORACLE_RAG_DB_PASSWORD_ENV": self.password_env,
            "ORACLE_RAG_EMBEDDING_MODEL": self.model_name,
            "ORACLE_RAG_DATA_DIR": str(data_dir),
        }

    def connect_app(self) -> Any:
        """A plain python-oracledb connection as the application user (what SQL*Plus would open)."""
        import oracledb

        return oracledb.connect(user=self.user, password=os.environ[self.password_env], dsn=self.dsn)

    def connect_sys(self, *, root: bool = False) -> Any:
        """SYS AS SYSDBA in the PDB (or the CDB root), or skip when the suite has no SYS password.

        python-oracledb's thin mode connects as SYSDBA with credentials and a connect
        string (``mode=oracledb.AUTH_MODE_SYSDBA``; no bequeath connection).
        """
        import oracledb

        if not self.sys_password_env or not os.environ.get(self.sys_password_env):
            pytest.skip(f"no SYS password: set {SYS_PASSWORD_ENV} to run what the docs run as SYS")
        dsn = self.dsn.rsplit("/", 1)[0] + "/FREE" if root else self.dsn
        return oracledb.connect(
            user="sys", password=os.environ[self.sys_password_env], dsn=dsn, mode=oracledb.AUTH_MODE_SYSDBA
        )

    def settings(self, data_dir: Path, **overrides: Any) -> Any:
        from oracle_rag.config import load_settings

        data_dir.mkdir(parents=True, exist_ok=True)
        config = data_dir / "empty.toml"
        config.write_text("")
        values = {
            "database_url": self.url,
            "db_password_env": self.password_env,
            "embedding_model": self.model_name,
            "data_dir": str(data_dir),
        }
        values.update(overrides)
        return load_settings(env={}, config_file=config, **values)


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"target": None, "container": None}


def _docker_unreachable() -> str | None:
    """Why no Docker engine can be used, or None when one answers a ping."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not os.path.exists(host[len("unix://") :]):
        return f"no Docker engine (no socket at {host[len('unix://') :]})"
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
                pytest.fail(
                    "ORACLE_RAG_TEST_ORACLE=1 requires Oracle, but "
                    + _STATE["reason"].removeprefix("Oracle tests skipped: "),
                    pytrace=False,
                )
            pytest.skip(_STATE["reason"])
        return _STATE["target"]


def _provision(request: pytest.FixtureRequest) -> OracleTarget:
    model_path: Path = request.getfixturevalue("model_path")
    target = (
        _from_environment()
        if os.environ.get("ORACLE_RAG_TEST_URL")
        else _start_container(request, model_path)
    )
    if target.user in ("SYS", "SYSTEM"):
        raise RuntimeError("use an application user, not SYS/SYSTEM (a vector index fails there: ORA-51963)")
    if target.sys_password_env and os.environ.get(target.sys_password_env) and target.ro_url:
        run_user_file(target, "local/readonly_synonyms.sql")  # "run ONCE as a DBA (SYS in FREEPDB1)"
    cli(target, ["migrate"])  # local/README.md step 5, then step 6
    target.model_outcome = cli_model_load(target, model_path, target.model_name)
    return target


def user_file(name: str) -> Path:
    if name not in USER_FILES:
        raise KeyError(f"{name} is not a user-facing file of USER_FILES")
    return ROOT / name


def run_user_file(target: OracleTarget, name: str, defines: dict[str, str] | None = None) -> Any:
    """Run one of :data:`USER_FILES` as the user its documentation names (SYS or the app user).

    The grant and synonym files name RAG_APP and RAG_RO and tell a user who renamed them to
    replace the names; a target with other user names gets exactly that edit.
    """
    import sqlplus

    text = user_file(name).read_text("utf-8")
    ro = re.match(r"^[a-z+]+://([^@/:]+)@", target.ro_url or "")
    for documented, actual in ((APP_USER, target.user), (RO_USER, ro.group(1).upper() if ro else RO_USER)):
        if actual != documented:
            text = re.sub(rf"\b{documented}\b", actual, text)
    conn = target.connect_sys() if USER_FILES[name] == "SYS" else target.connect_app()
    try:
        return sqlplus.run(conn, text, defines)
    finally:
        conn.close()


def cli(target: OracleTarget, args: list[str], data_dir: Path | None = None) -> str:
    """Run an ``oracle-rag`` command with the environment the README exports; its output, or raise."""
    from click.testing import CliRunner

    from oracle_rag.cli import main

    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="oracle-rag-cli-"))
    res = CliRunner().invoke(main, args, env=target.cli_env(data_dir))
    if res.exit_code != 0:
        raise RuntimeError(f"oracle-rag {' '.join(args[:2])} failed ({res.exit_code}): {res.output.strip()}")
    return res.output.strip()


def cli_model_load(target: OracleTarget, model_path: Path, name: str) -> str:
    """``oracle-rag model load --file FILE --name NAME`` (local/README.md step 6); its output."""
    return cli(target, ["model", "load", "--file", str(model_path), "--name", name])


def _from_environment() -> OracleTarget:
    from oracle_rag.urlsafety import url_has_secret

    url = os.environ["ORACLE_RAG_TEST_URL"]
    if url_has_secret(url):
        raise RuntimeError(f"ORACLE_RAG_TEST_URL must not carry a password: put it in {PASSWORD_ENV}")
    ro_url = os.environ.get("ORACLE_RAG_TEST_RO_URL") or None
    return OracleTarget(
        url=url,
        password_env=PASSWORD_ENV,
        source="ORACLE_RAG_TEST_URL",
        ro_url=ro_url,
        ro_password_env=RO_PASSWORD_ENV if ro_url else None,
        model_name=os.environ.get("ORACLE_RAG_TEST_MODEL_NAME", DEFAULT_MODEL_NAME),
        sys_password_env=SYS_PASSWORD_ENV if os.environ.get(SYS_PASSWORD_ENV) else None,
    )


def _password() -> str:
    return "Rt" + secrets.token_hex(12)  # letters and digits only: no quoting questions anywhere


def compose_service() -> dict[str, Any]:
    """The ``oracle`` service of compose.dev.yml: image, environment variable names, bind mounts.

    Returns ``{"image": ..., "environment": [names], "binds": {container path: host source}}``
    with host sources as compose writes them (``./local/init``, ``${ORACLE_RAG_MODEL_FILE:-...}``).
    """
    import yaml

    service = yaml.safe_load(COMPOSE_FILE.read_text("utf-8"))["services"]["oracle"]
    binds = {v["target"]: v["source"] for v in service["volumes"] if v.get("type") == "bind"}
    return {"image": service["image"], "environment": sorted(service["environment"]), "binds": binds}


INIT_DIR = "/container-entrypoint-initdb.d"
MODEL_MOUNT = "/opt/oracle/models/all-MiniLM-L6-v2.onnx"


def _start_container(request: pytest.FixtureRequest, model_path: Path) -> OracleTarget:
    """compose.dev.yml's service under testcontainers: same image, variables and mounts."""
    try:
        from testcontainers.community.oracle import OracleDbContainer  # testcontainers >= 4.15
    except ImportError:  # pragma: no cover - older testcontainers
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from testcontainers.oracle import OracleDbContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    service = compose_service()
    if service["binds"].get(INIT_DIR) != "./local/init" or MODEL_MOUNT not in service["binds"]:
        raise RuntimeError(
            "compose.dev.yml no longer mounts ./local/init and the model file as the suite expects"
        )
    sys_pw, app_pw, ro_pw = _password(), _password(), _password()
    env = {
        "ORACLE_PASSWORD": sys_pw,
        "APP_USER": APP_USER,
        "APP_USER_PASSWORD": app_pw,
        "RAG_RO_USER": RO_USER,
        "RAG_RO_PASSWORD": ro_pw,
    }
    if sorted(env) != service["environment"]:
        raise RuntimeError(
            f"compose.dev.yml's variables {service['environment']} are not the suite's {sorted(env)}"
        )

    class ComposeOracle(OracleDbContainer):  # type: ignore[misc]
        def _connect(self) -> None:  # a failed init script stops the container: fail, do not wait
            wait_for_logs(self, "DATABASE IS READY TO USE!", raise_on_exit=True)

    container = ComposeOracle(service["image"], oracle_password=sys_pw, username=APP_USER, password=app_pw)
    container.with_envs(RAG_RO_USER=RO_USER, RAG_RO_PASSWORD=ro_pw)
    container.with_volume_mapping(str(ROOT / "local" / "init"), INIT_DIR, "ro")
    container.with_volume_mapping(str(model_path), MODEL_MOUNT, "ro")
    container.start()  # the image runs local/init/01_users.sh, then prints DATABASE IS READY TO USE!
    _STATE["container"] = container
    request.config.add_cleanup(container.stop)
    host, port = container.get_container_host_ip(), int(container.get_exposed_port(1521))
    os.environ[PASSWORD_ENV] = app_pw
    os.environ[RO_PASSWORD_ENV] = ro_pw
    os.environ[SYS_PASSWORD_ENV] = sys_pw
    networks = container.get_wrapped_container().attrs["NetworkSettings"]["Networks"]
    gateway = next((n.get("Gateway") for n in networks.values() if n.get("Gateway")), None)
    base = f"oracle+oracledb://{{user}}@{host}:{port}/?service_name=FREEPDB1"
    return OracleTarget(
        url=base.format(user=APP_USER),
        password_env=PASSWORD_ENV,
        source=f"compose.dev.yml ({service['image']}) under testcontainers",
        ro_url=base.format(user=RO_USER),
        ro_password_env=RO_PASSWORD_ENV,
        model_name=os.environ.get("ORACLE_RAG_TEST_MODEL_NAME", DEFAULT_MODEL_NAME),
        created_ro_user=True,
        sys_password_env=SYS_PASSWORD_ENV,
        host_gateway=gateway,
    )


def new_system(target: OracleTarget, tmp_path: Path, **overrides: Any) -> Any:
    """A RagSystem on the target, with its own data directory under ``tmp_path``."""
    from oracle_rag.system import RagSystem

    return RagSystem(target.settings(tmp_path / "data", **overrides))


def load_model(target: OracleTarget, model_path: Path, name: str, *, replace: bool = False) -> str:
    """Load our ONNX build into the target under ``name`` with the product's provisioning code
    (what ``oracle-rag model load`` calls), in an engine of its own: concurrent deploys in tests."""
    from oracle_rag.engines.oracle.engine import OracleEngine
    from oracle_rag.indexing import provision

    engine = OracleEngine(target.settings(Path(tempfile.mkdtemp(prefix="oracle-rag-test-"))))
    try:
        return provision.load_model_file(engine, model_path, name=name, replace=replace)
    finally:
        engine.dispose()


def drop_model(engine: Any, name: str) -> None:
    """Drop a model if it exists (test clean-up), with the product's DROP_MODEL block: a missing
    model is not an error (force => TRUE alone raises ORA-40284 for one)."""
    from oracle_rag.indexing import provision

    provision.drop_model(engine, name)


def reset_schema(engine: Any) -> None:
    """Drop the product's and the reference application's objects, so migrate starts from nothing.

    Refuses a schema with any other table: the suite must run as a throwaway user.
    """
    with engine.connect() as conn:
        # VECTOR$ (IVF centroids), DR$ (Oracle Text), DM$ (mining models), SYS_ (IOT overflow...):
        # generated with their owner, dropped with it, never ours to drop or to object to.
        tables = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT TABLE_NAME FROM USER_TABLES WHERE NESTED = 'NO' AND SECONDARY = 'N'"
            )
            if "$" not in r[0] and not r[0].startswith("SYS_")
        ]
        views = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT VIEW_NAME FROM USER_VIEWS WHERE VIEW_NAME LIKE 'RAG\\_%' ESCAPE '\\'"
            )
        ]
    ours = [t for t in tables if t.startswith("RAG_") or t in DEMO_TABLES]
    foreign = sorted(set(tables) - set(ours))
    if foreign:
        raise RuntimeError(
            f"the test schema holds tables that are not oracle-rag's ({foreign[:5]}); "
            f"refusing to reset it: use a dedicated test user"
        )
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
    """A RagSystem whose guarded path connects as the read-only user, after local/grant_readonly.sql.

    Skips when the test target has no read-only user. The grants are the file itself, run as the
    owner of the views (local/README.md step 8).
    """
    if not oracle_target.ro_url or not oracle_target.ro_password_env:
        pytest.skip("no read-only user: set ORACLE_RAG_TEST_RO_URL and ORACLE_RAG_TEST_RO_PASSWORD")
    run_user_file(oracle_target, "local/grant_readonly.sql")
    return new_system(
        oracle_target,
        data_dir,
        aggregate_database_url=oracle_target.ro_url,
        aggregate_db_password_env=oracle_target.ro_password_env,
        aggregate_timeout_s=5.0,
    )
