"""Documentation that cannot rot: every setting and every CLI command is documented."""

from __future__ import annotations

import re
from pathlib import Path

import click

from oracle_rag.cli import main
from oracle_rag.config import SETTINGS

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_is_documented():
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [k for k in SETTINGS if f"`{k}`" not in text or f"`ORACLE_RAG_{k.upper()}`" not in text]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def _shown(value: object) -> str:
    """A declared default as docs/configuration.md writes it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def test_documented_defaults_are_the_declared_ones():
    """docs/configuration.md's default column matches each setting's declaration (config.SETTINGS)."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    rows = {
        m.group(1): m.group(2).strip()
        for m in re.finditer(
            r"^\| `([a-z0-9_]+)` \| `ORACLE_RAG_[A-Z0-9_]+` \| ([^|]+) \|", text, re.MULTILINE
        )
    }

    def same(doc: str | None, declared: object) -> bool:
        if doc is not None and isinstance(declared, int | float) and not isinstance(declared, bool):
            try:
                return float(doc.strip("`")) == float(declared)
            except ValueError:
                return False
        return (doc or "").lower() == _shown(declared).lower()

    wrong = {
        name: (rows.get(name), _shown(s.default))
        for name, s in SETTINGS.items()
        if not same(rows.get(name), s.default)
    }
    assert not wrong, f"documented default differs from the declaration (doc, declared): {wrong}"


def test_every_setting_declares_its_help():
    assert all(s.help.strip() for s in SETTINGS.values())


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


def test_oracle_reference_names_code_that_exists():
    """docs/oracle-reference.md ties each Oracle fact to the code that relies on it: those names must exist."""
    import importlib

    text = (ROOT / "docs" / "oracle-reference.md").read_text()
    cited = {
        "engine_sql.QUEUE_STATS": ("oracle_rag.engines.engine_sql", "QUEUE_STATS"),
        "engine_sql.PICK": ("oracle_rag.engines.engine_sql", "PICK"),
        "oracle_provision_sql.DROP_MODEL": ("oracle_rag.engines.oracle.provision_sql", "DROP_MODEL"),
        "engines/statements.ClobBind": ("oracle_rag.engines.statements", "ClobBind"),
        "engines/records.read_lob": ("oracle_rag.engines.records", "read_lob"),
        "engines/oracle.output_type_handler": ("oracle_rag.engines.oracle.engine", "output_type_handler"),
        "sql_query_sql.ORACLE_DELTA_TZ_TEMPLATE": (
            "oracle_rag.sources.sql_query_sql",
            "ORACLE_DELTA_TZ_TEMPLATE",
        ),
        "build._truncate_tokens": ("oracle_rag.embedding.build", "_truncate_tokens"),
        "triggers._run_oracle_ddl": ("oracle_rag.indexing.triggers", "_run_oracle_ddl"),
        "index_maintenance.rebuild": ("oracle_rag.indexing.index_maintenance", "rebuild"),
        "aggregate_sql.SET_READ_ONLY": ("oracle_rag.answering.aggregate.aggregate_sql", "SET_READ_ONLY"),
    }
    for name, (module, attr) in cited.items():
        assert f"`{name}" in text, f"{name} is no longer cited in docs/oracle-reference.md"
        assert hasattr(importlib.import_module(module), attr), (
            f"docs/oracle-reference.md cites {name}, which is gone"
        )
    for path in ("local/readonly_synonyms.sql", "local/grant_readonly.sql", "local/init/01_users.sh"):
        assert path in text and (ROOT / path).is_file(), path
