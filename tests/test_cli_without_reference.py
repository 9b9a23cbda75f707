"""Every command of ``oracle-rag --help`` on a database with SQL-query sources only.

A fresh data directory, the CRM deployment of bench/crm.py (declared sources,
access and people; no EMPLOYEE, TASK, SPRINT or PROJECT table), the CLI as a
user runs it with ``--config``. Each command either works or says in one line
what is missing and what to run; none blames the connection, none warns about
the reference application's names, none prints a traceback. The servers
(``serve``, ``mcp`` on stdio and HTTP, ``demo``) run as a user starts them and
answer a question naming a person. A command added to the CLI without a case
here fails :func:`test_every_command_has_a_case`.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import anyio
import click
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from model_helpers import link_model
from reliability_helpers import CLI, ServeProcess, clean_env

from oracle_rag.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import crm  # noqa: E402

REP = 9101  # Tomás Herrera (north)
MANAGER = 9109  # Óscar Ibáñez (sales_manager: reads everything)


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    refused: str | None = None  # None: exit 0; else the one error line contains this
    shows: str = ""  # the output contains this


@dataclass
class Crm:
    data: Path
    config: Path

    def env(self) -> dict[str, str | None]:
        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ORACLE_RAG_")}
        env["ORACLE_RAG_CONFIG"] = str(self.config)
        return env

    def run(self, *args: str) -> click.testing.Result:
        return CliRunner().invoke(main, list(args), env=self.env())


def make_crm(root: Path, model_path: Path) -> Crm:
    data = link_model(model_path, root / "data")
    config = root / "oracle-rag.toml"
    config.write_text(crm.config_toml(data), "utf-8")
    deployment = Crm(data, config)
    assert deployment.run("migrate").exit_code == 0
    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    with RagSystem(load_settings(env={}, config_file=config)) as rag, rag.engine.begin() as conn:
        crm.create(conn, crm.make_world())
    return deployment


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Crm:
    return make_crm(tmp_path_factory.mktemp("crm-cli"), model_path)


def _beir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = [
        {"_id": "d1", "title": "Pricing", "text": "the pricing call"},
        {"_id": "d2", "title": "", "text": "a pilot"},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), "utf-8")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "pricing"}) + "\n", "utf-8")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", "utf-8")
    return folder


def cases(tmp: Path) -> dict[str, list[Case]]:
    """What each command is run with, in order (later ones see what earlier ones did)."""
    return {
        "migrate": [Case(())],
        "bootstrap": [Case(())],
        "model build": [Case((), shows="exists")],
        "model load": [Case((), refused="INPUT: give exactly one of --file, --url or --url-env")],
        "model status": [Case((), shows="present: True")],
        "model generations": [Case((), shows="ACTIVE")],
        "model switch": [Case(("--to", "all-MiniLM-L6-v2"), refused="is the active model")],
        "model activate": [Case((), refused="no model generation is waiting to be activated")],
        "model rollback": [Case((), refused="no earlier generation is kept to roll back to")],
        "model drop": [
            Case(("all-MiniLM-L6-v2",), refused="is the active generation"),
            Case(("multilingual-e5-small",), shows="nothing to drop"),
        ],
        "sources sync": [Case((), shows="deals: changed"), Case(("notes",), shows="notes: unchanged")],
        "sources list": [Case((), shows="deals\tok")],
        "sources count": [Case(("deals",), shows=str(crm.DEALS))],
        "backfill": [Case((), shows="nothing to backfill")],
        "worker": [Case(("--once",))],
        "status": [Case((), shows="'names_from': '[people] query'")],
        "queue list": [Case(())],
        "queue retry": [Case(())],
        "index rebuild": [Case(())],
        "index status": [Case(())],
        "triggers install": [
            Case((), refused="MISSING_TABLE: the enqueue triggers watch the reference application's")
        ],
        "triggers uninstall": [Case(())],
        "triggers status": [Case(())],
        "search": [Case(("pricing call", "--as", str(REP)), shows="[DEALS #")],
        "ask": [
            Case(("who has the most open deals?", "--as", str(MANAGER)), shows="has the most deals"),
            Case(("deals of Tomas Herrera", "--as", str(MANAGER)), shows="rep: Tomás Herrera"),
            Case(("how many tasks are open?", "--as", str(REP))),
        ],
        "sql": [
            Case(
                ("SELECT COUNT(*) FROM RAG_V_TASK", "--as", str(MANAGER)),
                refused="RAG_V_TASK does not exist in the database (run `oracle-rag migrate --demo`",
            )
        ],
        "token create": [Case(("--employee", str(REP), "--label", "cli-test"))],
        "token list": [Case((), shows=str(REP))],
        "token revoke": [Case(("999999",), refused="NOT_FOUND")],
        "audit": [Case((), shows=f"caller={REP}")],
        "provision": [Case(("--vpd",), refused="VPD is an Oracle feature")],
        "llm check": [Case((), refused="CONFIGURATION: llm_url: not set")],
        "feedback list": [Case(())],
        "feedback export": [Case(("--out", str(tmp / "feedback.json")))],
        "feedback examples": [Case(())],
        "feedback approve": [Case(("1",), refused="NOT_FOUND")],
        "eval": [Case(("--dataset", str(_beir(tmp / "beir"))), shows="nDCG@10")],
        "sources drop": [Case(("notes",))],
    }


SERVERS = {"serve", "mcp", "demo", "demo seed"}  # run below, as a user starts them


def _leaves(group: click.Group, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            if cmd.invoke_without_command:
                out.add(prefix + name)
            out |= _leaves(cmd, prefix + name + " ")
        else:
            out.add(prefix + name)
    return out


def test_every_command_has_a_case(tmp_path: Path) -> None:
    missing = _leaves(main) - set(cases(tmp_path)) - SERVERS
    assert not missing, (
        f"commands never run on a database without the reference application: {sorted(missing)}"
    )


def _check(name: str, case: Case, result: click.testing.Result) -> None:
    shown = f"oracle-rag {name} {' '.join(case.args)} -> {result.exit_code}\n{result.output}"
    assert (
        "Traceback" not in result.output
        and result.exception is None
        or isinstance(result.exception, SystemExit)
    ), shown
    assert "connection failed" not in result.output, shown
    assert "unavailable" not in result.output, shown  # no warning about names of tables that are not there
    if case.refused is None:
        assert result.exit_code == 0, shown
    else:
        lines = result.stderr.strip().splitlines()
        assert result.exit_code != 0 and len(lines) == 1 and lines[0].startswith("error: "), shown
        assert case.refused in lines[0], shown
    assert case.shows in result.output, shown


def test_every_command_works_or_says_what_is_missing(deployment: Crm, tmp_path: Path) -> None:
    for name, runs in cases(tmp_path).items():
        for case in runs:
            _check(name, case, deployment.run(*name.split(), *case.args))


# -- the servers ----------------------------------------------------------------------------
def _token(deployment: Crm, employee: int) -> str:
    result = deployment.run("token", "create", "--employee", str(employee))
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[0]


def test_serve_answers_with_names(deployment: Crm, tmp_path: Path) -> None:
    token = _token(deployment, MANAGER)
    env = clean_env(ORACLE_RAG_CONFIG=str(deployment.config))
    server = ServeProcess(deployment.config, env, tmp_path).start()
    try:
        assert server.get("/healthz").status == 200
        me = server.get("/api/me", {"Authorization": f"Bearer {token}"}).json()
        assert (me["employee_id"], me["name"], me["sees_all"]) == (MANAGER, "Óscar Ibáñez", True), me
        answer = server.post(
            "/api/chat", {"question": "who has the most open deals?"}, {"Authorization": f"Bearer {token}"}
        )
        assert answer.status == 200 and answer.json()["answerer"] == "structured", answer.text
        head = answer.json()["answer"].split("\n", 1)[0]
        assert head.split(" has the most")[0] in crm.World().names.values(), head
    finally:
        assert server.stop() == 0
    log = server.log()
    assert "Traceback" not in log and "unavailable" not in log and "connection failed" not in log, log


def test_mcp_on_stdio_and_http_answers_with_names(deployment: Crm) -> None:
    token = _token(deployment, MANAGER)
    command, *args = CLI
    env = clean_env(ORACLE_RAG_CONFIG=str(deployment.config), ORACLE_RAG_MCP_TOKEN=token)
    names = crm.World().names.values()

    async def stdio() -> str:
        async with Client(StdioServerParameters(command=command, args=[*args, "mcp"], env=env)) as client:
            result = await client.call_tool("ask", {"question": "open deals per rep"})
            return json.loads(result.content[0].text)["answer"]

    text = anyio.run(stdio)
    assert any(f"{name}: " in text for name in names), text
    proc = subprocess.Popen(
        [command, *args, "mcp", "--http", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(ORACLE_RAG_CONFIG=str(deployment.config)),
    )
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline(), proc.stderr.readline()]
        url = lines[1].split()[2]
        assert httpx2.post(url, json={}).status_code == 401

        async def http() -> str:
            async with (
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60.0)
                ) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                result = await client.call_tool("ask", {"question": "who has the most won deals?"})
                return json.loads(result.content[0].text)["answer"]

        text = anyio.run(http)
        assert any(text.startswith(name) for name in names), text
    finally:
        proc.terminate()
        proc.wait(30)


def test_demo_on_a_copy_adds_the_reference_app_and_keeps_the_declared_people(
    deployment: Crm, tmp_path: Path
) -> None:
    """``demo seed`` and ``demo`` turn a copy into the demo: the reference sources join, [people] still names."""
    from oracle_rag.demo.run import run_demo

    copy = Crm(tmp_path / "data", tmp_path / "oracle-rag.toml")
    shutil.copytree(deployment.data, copy.data)
    copy.config.write_text(crm.config_toml(copy.data), "utf-8")
    seeded = copy.run("demo", "seed", "--tasks", "3")
    assert seeded.exit_code == 0 and "seeded 40 employees" in seeded.output, seeded.output
    ready: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    thread = threading.Thread(
        target=run_demo,
        args=(str(copy.config), 0, 3),
        kwargs={"stop": stop, "on_ready": ready.put, "install_signals": False},
        daemon=True,
    )
    thread.start()
    try:
        url = ready.get(timeout=300)
        assert httpx2.get(url + "healthz", timeout=60).status_code == 200
    finally:
        stop.set()
        thread.join(120)
    assert not thread.is_alive()
    status = copy.run("status")
    assert "'names_from': '[people] query'" in status.output and "'TASK': 3" in status.output, status.output
