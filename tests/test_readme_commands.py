"""The README's first commands are real: make targets that exist, and CI runs the same one."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _first_block() -> tuple[str, list[str]]:
    readme = ROOT / "README.md"
    assert readme.is_file(), "README.md is missing"
    match = FENCE.search(readme.read_text(encoding="utf-8"))
    assert match, "README.md has no fenced code block"
    lines = [line.strip() for line in match.group(2).splitlines() if line.strip()]
    return match.group(1), lines


def _commands(text: str) -> list[list[str]]:
    """Shell command lines of a script: comments, blank lines and the shebang dropped."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # a quote spanning lines: not a simple command line
            words = line.split()
        if words:
            out.append(words)
    return out


def test_readme_starts_with_make_demo_and_make_test() -> None:
    lang, lines = _first_block()
    assert lang == "sh"
    assert lines == ["make demo", "make test"]


def test_readme_make_targets_exist() -> None:
    assert (ROOT / "Makefile").is_file(), "Makefile is missing"
    make = shutil.which("make")
    assert make, "make is not installed"
    _, lines = _first_block()
    for line in lines:
        words = shlex.split(line)
        assert words[0] == "make", f"README command {line!r} is not a make call"
        for target in words[1:]:
            # -n prints the recipe without running it; an unknown target fails.
            result = subprocess.run(
                [make, "-n", target],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "MAKEFLAGS": ""},
            )
            assert result.returncode == 0, f"make -n {target} failed:\n{result.stderr}"


def test_ci_runs_make_test() -> None:
    ci = ROOT / ".ci" / "run"
    assert ci.is_file(), ".ci/run is missing"
    assert os.access(ci, os.X_OK), ".ci/run is not executable"
    commands = [words[1:] if words[0] == "exec" else words for words in _commands(ci.read_text("utf-8"))]
    make_calls = [words for words in commands if words and Path(words[0]).name == "make"]
    assert make_calls == [["make", "test"]], f".ci/run make calls: {make_calls}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#!/bin/sh\nset -eu\n# comment\nexec make test\n", [["set", "-eu"], ["exec", "make", "test"]]),
        ("make test  # run it\n", [["make", "test"]]),
        (
            "(apt-get update \\\n  && apt-get install x) || echo 'it didn\\'t'\nmake test\n",
            [
                ["(apt-get", "update", "&&", "apt-get", "install", "x)", "||", "echo", "'it", "didn\\'t'"],
                ["make", "test"],
            ],
        ),
    ],
)
def test_command_parser(text: str, expected: list[list[str]]) -> None:
    assert _commands(text) == expected


def test_fence_parser() -> None:
    text = "# Title\n\nSome text.\n\n```sh\nmake demo\nmake test\n```\n\n```python\nx = 1\n```\n"
    match = FENCE.search(text)
    assert match and match.group(1) == "sh"
    assert match.group(2).splitlines() == ["make demo", "make test"]
