"""Documentation that cannot rot: every setting and every CLI command is documented."""

from __future__ import annotations

from pathlib import Path

import click

from oracle_rag.cli import main
from oracle_rag.config import _SPECS

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_is_documented():
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [k for k in _SPECS if f"`{k}`" not in text or f"`ORACLE_RAG_{k.upper()}`" not in text]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    out = []
    for name, cmd in group.commands.items():
        full = f"{prefix}{name}"
        out.append(full)
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, full + " "))
    return out


def test_every_cli_command_is_documented():
    text = (ROOT / "docs" / "cli.md").read_text()
    missing = [c for c in _commands(main) if f"oracle-rag {c}" not in text]
    assert not missing, f"commands missing from docs/cli.md: {missing}"
