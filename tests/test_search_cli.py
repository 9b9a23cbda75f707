"""`oracle-rag search`: prints the caller's scoped results; bad input exits 2."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from oracle_rag.cli import main

ANCHOR = re.compile(
    r"^\s*(\d+)\. \[(TASK|SPRINT|PROJECT) #(\d+)\]\s+(?:distance|relevance|fused)=(-?[\d.]+) "
    r"status=\S+ legs=([a-z,]+)",
    re.MULTILINE,
)


@pytest.fixture
def cli(demo_rag, data_dir, tmp_path, monkeypatch):
    """Run the CLI against the indexed demo database in ``data_dir`` (no config file, env pinned)."""
    monkeypatch.chdir(tmp_path)
    env = {"ORACLE_RAG_DATA_DIR": str(data_dir), "ORACLE_RAG_DATABASE_URL": "", "ORACLE_RAG_CONFIG": ""}

    def run(*args: str):
        return CliRunner().invoke(main, ["search", *args], env=env)

    return run


def _assignee(demo_rag, task_id: int):
    with demo_rag.engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT ASSIGNEE_ID FROM TASK WHERE TASK_ID = :t"), {"t": task_id}
        ).scalar_one()


def _own_tasks(demo_rag, employee: int) -> list[int]:
    with demo_rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT TASK_ID FROM TASK WHERE ASSIGNEE_ID = :e ORDER BY TASK_ID"), {"e": employee}
        )
        return [int(r[0]) for r in rows]


def test_developer_search_lists_exactly_their_tasks(cli, demo_rag):
    result = cli("login timeout", "--as", "9", "--k", "100", "--type", "task")
    assert result.exit_code == 0, result.output
    rows = ANCHOR.findall(result.output)
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    assert {r[1] for r in rows} == {"TASK"}
    assert sorted(int(r[2]) for r in rows) == _own_tasks(demo_rag, 9)


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_modes_print_ranked_scoped_rows(cli, demo_rag, mode):
    result = cli("invoice PDF generation", "--as", "12", "--mode", mode, "--k", "20")
    assert result.exit_code == 0, result.output
    rows = ANCHOR.findall(result.output)
    assert 0 < len(rows) <= 20
    for _, kind, ident, _, legs in rows:
        if kind == "TASK":
            assert _assignee(demo_rag, int(ident)) == 12
        assert set(legs.split(",")) <= ({"semantic", "keyword"} if mode == "hybrid" else {mode})
    if mode == "semantic":
        assert len(rows) == 20  # more than 20 chunks are visible to a developer


def test_project_and_type_filters(cli, demo_rag):
    result = cli("sprint goal", "--as", "3", "--project", "2", "--type", "SPRINT", "--k", "50")
    assert result.exit_code == 0, result.output
    rows = ANCHOR.findall(result.output)
    assert sorted(int(r[2]) for r in rows) == list(range(9, 17))  # project 2 owns sprints 9-16


def test_default_k_is_top_k(cli):
    result = cli("invoice", "--as", "3")
    assert result.exit_code == 0
    assert len(ANCHOR.findall(result.output)) == 8


def test_query_syntax_is_plain_text(cli):
    result = cli('invoic* NEAR "payment OR ABOUT(x) {y} %_\\', "--as", "3", "--mode", "keyword")
    assert result.exit_code == 0, result.output
    assert "DATABASE" not in result.output


def test_no_results_says_so(cli):
    result = cli("zzqxv", "--as", "9", "--mode", "keyword")
    assert result.exit_code == 0
    assert "(no results visible to this caller)" in result.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["invoice", "--as", "9", "--k", "0"], 2, "k must be an integer in [1, 100]"),
        (["invoice", "--as", "9", "--k", "101"], 2, "k must be an integer in [1, 100]"),
        (["   ", "--as", "9"], 2, "query is empty"),
        (["invoice", "--as", "9999"], 2, "employee 9999 not found"),
        (
            ["invoice", "--as", "9", "--type", "BUG"],
            2,
            "unknown source type 'BUG' for --type; valid types: PROJECT, SPRINT, TASK",
        ),
        (["invoice", "--as", "9", "--mode", "vector"], 2, "Invalid value for '--mode'"),
        (["invoice"], 2, "Missing option '--as'"),
    ],
)
def test_bad_input_exits_with_a_clear_message(cli, args, code, message):
    result = cli(*args)
    assert result.exit_code == code, result.output
    assert message in result.output


@pytest.mark.parametrize(
    ("mode", "name", "better"),
    [
        ("semantic", "distance", "lower is closer"),
        ("keyword", "relevance", "higher is better"),
        ("hybrid", "fused", "higher is better"),
    ],
)
def test_each_line_names_the_modes_score_and_the_records_status(cli, demo_rag, mode, name, better):
    """The score's meaning changes by mode, so it is named; the status is shown."""
    result = cli("blocked payment tasks", "--as", "3", "--mode", mode, "--k", "8")
    assert result.exit_code == 0, result.output
    head, *rows = result.stdout.splitlines()
    assert head.startswith(f"{mode} search as employee 3 (") and f"{name} = " in head and better in head
    assert len(rows) == 8 and all(f" {name}=" in r for r in rows)
    scores = [float(re.search(rf" {name}=(-?[\d.]+)", r).group(1)) for r in rows]
    assert scores == (sorted(scores) if mode == "semantic" else sorted(scores, reverse=True))
    with demo_rag.engine.connect() as conn:
        status = dict(conn.execute(sa.text("SELECT TASK_ID, STATUS FROM TASK")).fetchall())
    for kind, ident, shown in re.findall(
        r"\[(TASK|SPRINT|PROJECT) #(\d+)\]\s+\S+ status=(\S+)", result.stdout
    ):
        if kind == "TASK":
            assert shown == status[int(ident)]
        else:
            assert shown != "-"


def test_type_filter_ignores_case_and_accepts_indexed_types(cli):
    lower = cli("sprint goal", "--as", "3", "--type", "sprint", "--k", "5")
    upper = cli("sprint goal", "--as", "3", "--type", "SPRINT", "--k", "5")
    assert lower.exit_code == upper.exit_code == 0
    assert lower.stdout == upper.stdout and "[SPRINT #" in lower.stdout
