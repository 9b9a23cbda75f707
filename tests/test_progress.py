"""Progress of long steps: a bar with rate and ETA on a terminal, periodic lines elsewhere.

The unit tests drive :class:`Progress` with a hand-advanced clock (the only
way to check "one line per interval" without sleeping); the CLI tests run
``worker --once`` and ``model build`` as processes, once with stderr a pipe
and once on a real pseudo-terminal. A real clock decides nothing asserted
here: the worker's rate and ETA frames are checked in-process on a clock the
test drives, since an idle machine drains a batch in well under a second.
"""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
from pathlib import Path

import sqlalchemy as sa
from writepath_helpers import CLI, cli_env, run_cli, set_title

from oracle_rag.cli.writepath import drain_with_progress
from oracle_rag.progress import Progress, step_progress
from oracle_rag.system import RagSystem


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_log_lines_start_every_interval_and_finish() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("index", 200, unit="queue rows", stream=out, tty=False, interval=10.0, clock=clock)
    for _ in range(20):  # 20 updates over 19 s: a line at the start, one after 10 s, and the end
        clock.now += 1.0
        p.advance(10)
    p.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == "index: 0/200 queue rows (0%)"
    assert lines[1] == "index: 100/200 queue rows (50%), 10.0/s, ETA 10s"
    assert lines[2] == "index: 200/200 queue rows (100%), 10.0/s"
    assert lines[3] == "index: 200 queue rows in 20s (10.0/s)"
    assert len(lines) == 4 and "\r" not in out.getvalue()


def test_no_rate_for_a_step_shorter_than_a_second() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("seed tasks", 200, unit="rows", stream=out, tty=False, clock=clock)
    clock.now += 0.002
    p.update(200)
    p.finish()
    assert out.getvalue().splitlines() == ["seed tasks: 0/200 rows (0%)", "seed tasks: 200 rows in 0s"]


def test_terminal_bar_redraws_one_line_with_rate_and_eta() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("index", 2054, unit="queue rows", stream=out, tty=True, clock=clock)
    clock.now += 28.0
    p.update(512)
    frame = out.getvalue().split("\r")[-1]
    assert frame.startswith(
        "index [#######.......................] 512/2054 queue rows (24%), 18.3/s, ETA 1m24s"
    )
    p.finish()
    assert out.getvalue().endswith("\nindex: 512 queue rows in 28s (18.3/s)\n")
    assert out.getvalue().count("\n") == 2


def test_step_progress_prints_each_step_in_a_log() -> None:
    out = io.StringIO()
    report = step_progress("model build", stream=out)
    for step, fraction in (("reading weights", 0.0), ("building graph", 0.5), ("done", 1.0)):
        report(step, fraction)
    lines = out.getvalue().splitlines()
    assert lines[0] == "model build: 0%: reading weights"
    assert lines[1].startswith("model build: 50%") and lines[1].endswith(": building graph")
    assert lines[-1].startswith("model build: done in ")


def _queue_tasks(demo_rag, n: int) -> None:
    with demo_rag.engine.begin() as conn:
        for t in range(60, 60 + n):
            set_title(conn, t, f"Progress {t}")


def test_worker_once_reports_progress_in_a_log(demo_rag, data_dir: Path, tmp_path: Path) -> None:
    _queue_tasks(demo_rag, 40)
    res = run_cli(["worker", "--once"], cli_env(data_dir, batch_size=8), tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert "worker: 0/40 queue rows (0%)" in lines
    # the rate is shown only for a step of a second or more: how long this one takes is the machine's business
    assert re.search(r"^worker: 40 queue rows in \d+s( \(\d+\.\d/s\))?$", res.stderr, re.M), res.stderr
    assert "picked 40, embedded 40" in res.stdout


class TickingClock:
    """A clock that moves ``step`` seconds each time it is read: every frame after the first is later."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 1000.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_drain_draws_rate_and_eta_between_batches(demo_rag, make_settings) -> None:
    """The worker's frames with a rate and an ETA, on a clock the test drives (the real one is too fast)."""
    _queue_tasks(demo_rag, 24)
    rag = RagSystem(make_settings(batch_size=8))
    try:
        out = Terminal()
        res = drain_with_progress(rag, stream=out, clock=TickingClock(2.0))
    finally:
        rag.close()
    assert (res.picked, res.embedded, res.failed_rows) == (24, 24, 0)
    frames = [f for f in out.getvalue().split("\r") if f.startswith("worker [")]
    for done in (8, 16):
        assert any(
            re.match(rf"worker \[[#.]{{30}}\] {done}/24 queue rows \(\d+%\), \d+\.\d/s, ETA \d+s", f)
            for f in frames
        ), frames
    assert re.search(r"worker \[#{30}\] 24/24 queue rows \(100%\), \d+\.\d/s", out.getvalue()), frames
    assert re.search(r"\nworker: 24 queue rows in \d+s \(\d+\.\d/s\)\n$", out.getvalue()), out.getvalue()


def _run_on_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run with stdout and stderr on a pseudo-terminal; return the exit code and everything it drew."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        CLI + args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 600)
        if not ready:
            proc.kill()
            raise AssertionError("no output for 600 s")
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_worker_once_draws_a_bar_on_a_terminal(demo_rag, data_dir: Path, tmp_path: Path) -> None:
    """On a real terminal: one line redrawn per batch (the rate is for the test above: it needs a clock)."""
    _queue_tasks(demo_rag, 24)
    code, screen = _run_on_terminal(["worker", "--once"], cli_env(data_dir, batch_size=8), tmp_path)
    assert code == 0, screen
    frames = [f for f in screen.split("\r") if f.startswith("worker [")]
    for done, bar in ((0, "." * 30), (8, "#" * 10 + "." * 20), (16, "#" * 20 + "." * 10), (24, "#" * 30)):
        assert any(f.startswith(f"worker [{bar}] {done}/24 queue rows") for f in frames), frames
    assert all(f.endswith("\033[K") or f.endswith("\033[K\n") for f in frames), frames
    assert re.search(r"\nworker: 24 queue rows in \d+s", screen), screen
    with demo_rag.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM RAG_DIRTY")).scalar_one() == 0


def test_model_build_reports_its_steps(tmp_path: Path) -> None:
    out = tmp_path / "m.onnx"
    res = run_cli(["model", "build", "--out", str(out)], cli_env(tmp_path / "data"), tmp_path)
    assert res.returncode == 0, res.stderr
    assert "model build: 0%: reading weights" in res.stderr.splitlines()
    assert re.search(r"^model build: done in \d+s$", res.stderr, re.M), res.stderr
    assert out.is_file()
