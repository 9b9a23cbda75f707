"""`make bench` runs every benchmark: bench/run_all.py's plan covers bench/*.py and runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import run_all  # noqa: E402


def test_every_benchmark_has_a_quick_size() -> None:
    scripts = sorted(
        p.stem
        for p in (ROOT / "bench").glob("*.py")
        if p.name != "run_all.py" and "__main__" in p.read_text(encoding="utf-8")
    )
    assert run_all.benchmarks() == scripts
    assert sorted(run_all.QUICK) == scripts, "add the new benchmark to run_all.QUICK"


def test_makefile_bench_target_runs_it() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "\t$(BIN)/python bench/run_all.py\n" in makefile


def test_list_and_unknown_name(capsys) -> None:
    assert run_all.main(["--list", "--full"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(run_all.benchmarks())
    assert all(line.split()[1].endswith(".py") and line.split()[-2] == "--out" for line in lines)
    rc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_all.py"), "--only", "nope"], capture_output=True, text=True
    )
    assert rc.returncode == 2 and "choose from" in rc.stderr


def test_runs_a_benchmark_and_records_it(tmp_path: Path) -> None:
    """One real benchmark through run_all (the cheapest at its quick size)."""
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run_all.py"),
            "--only",
            "retrieval_latency",
            "--results",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads((tmp_path / "run_all.json").read_text())
    row = summary["benchmarks"]["retrieval_latency"]
    assert row["exit_code"] == 0 and row["result"] == str(tmp_path / "retrieval_latency.json")
    assert json.loads((tmp_path / "retrieval_latency.json").read_text())
