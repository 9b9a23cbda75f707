"""API tokens on a real SQLite database: issue, verify, expire, revoke; only hashes stored."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from chat_helpers import DEV_A, MANAGER
from click.testing import CliRunner

from oracle_rag.callers.tokens import (
    bearer_token,
    caller_for_token,
    create_token,
    hash_token,
    list_tokens,
    revoke_label,
    revoke_token,
    verify_token,
)
from oracle_rag.errors import InputError, NotFoundError


@pytest.fixture
def people(rag):
    """The migrated empty system plus three employees."""
    with rag.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO EMPLOYEE (EMPLOYEE_ID, FIRST_NAME, LAST_NAME, ROLE) VALUES "
                "(3, 'Mia', 'Moore', 'manager'), (9, 'Ana', 'Díaz', 'developer'), "
                "(11, 'Leo', 'Gone', 'developer')"
            )
        )
    return rag


def _verify(rag, token: str) -> int | None:
    with rag.engine.connect() as conn:
        return verify_token(conn, rag.engine, token)


def test_token_shape_and_storage(people) -> None:
    issued = create_token(people.engine, DEV_A, label="laptop")
    assert issued.token.startswith("orag_") and len(issued.token) == 5 + 43
    with people.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT TOKEN_HASH, EMPLOYEE_ID, LABEL, REVOKED, EXPIRES_AT FROM RAG_API_TOKEN")
        )
        (row,) = rows.fetchall()
    assert row[0] == hashlib.sha256(issued.token.encode()).hexdigest() == hash_token(issued.token)
    assert issued.token not in str(tuple(row))  # the secret itself is never stored
    assert tuple(row[1:]) == (DEV_A, "laptop", 0, None)
    assert create_token(people.engine, DEV_A).token != issued.token


def test_verify_resolves_the_caller(people) -> None:
    token = create_token(people.engine, MANAGER).token
    assert _verify(people, token) == MANAGER
    with people.engine.connect() as conn:
        caller = caller_for_token(conn, people.engine, token)
    assert caller is not None and (caller.employee_id, caller.role, caller.name) == (
        MANAGER,
        "manager",
        "Mia Moore",
    )


@pytest.mark.parametrize("bad", ["", "orag_", "nope", "orag_" + "A" * 43, "Bearer x", "orag_" + "é" * 43])
def test_unknown_or_malformed_tokens_fail(people, bad: str) -> None:
    create_token(people.engine, DEV_A)
    assert _verify(people, bad) is None


def test_revoke_by_id_and_by_label(people) -> None:
    a = create_token(people.engine, DEV_A, label="demo")
    b = create_token(people.engine, MANAGER, label="demo")
    c = create_token(people.engine, MANAGER)
    assert revoke_token(people.engine, a.token_id) is True
    assert revoke_token(people.engine, a.token_id) is False  # already revoked
    assert _verify(people, a.token) is None and _verify(people, b.token) == MANAGER
    assert revoke_label(people.engine, "demo") == 1
    assert _verify(people, b.token) is None and _verify(people, c.token) == MANAGER
    states = {t.token_id: t.revoked for t in list_tokens(people.engine)}
    assert states == {a.token_id: True, b.token_id: True, c.token_id: False}
    assert [t.token_id for t in list_tokens(people.engine, MANAGER)] == [b.token_id, c.token_id]


def test_expiry_is_checked_against_the_database_clock(people) -> None:
    fresh = create_token(people.engine, DEV_A, expires_days=1)
    assert _verify(people, fresh.token) == DEV_A
    info = {t.token_id: t for t in list_tokens(people.engine)}[fresh.token_id]
    assert info.expires_at is not None and info.expires_at > info.created_at
    with people.engine.begin() as conn:  # the day has passed
        conn.execute(
            sa.text(
                "UPDATE RAG_API_TOKEN SET EXPIRES_AT = strftime('%Y-%m-%dT%H:%M:%f', 'now', '-1 second') "
                "WHERE TOKEN_ID = :i"
            ),
            {"i": fresh.token_id},
        )
    assert _verify(people, fresh.token) is None


def test_input_checks(people) -> None:
    with pytest.raises(NotFoundError):
        create_token(people.engine, 999)
    assert create_token(people.engine, 999, check_employee=False).employee_id == 999
    for days in (0, -1, 5000, True):
        with pytest.raises(InputError):
            create_token(people.engine, DEV_A, expires_days=days)


def test_deleted_employee_token_no_longer_authenticates(people) -> None:
    token = create_token(people.engine, 11).token
    with people.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM EMPLOYEE WHERE EMPLOYEE_ID = 11"))
        assert caller_for_token(conn, people.engine, token) is None


def test_bearer_header_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc  ") == "abc"
    for header in (None, "", "Basic abc", "Bearer", "Bearer   ", "Token abc"):
        assert bearer_token(header) is None


def test_cli_prints_the_token_once(people, tmp_path: Path) -> None:
    from oracle_rag.cli import main

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'data_dir = "{people.settings.data_dir}"\n')
    runner = CliRunner()
    created = runner.invoke(
        main,
        ["--config", str(cfg), "token", "create", "--employee", str(DEV_A), "--expires-days", "30"],
        env={"ORACLE_RAG_DATA_DIR": ""},
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("orag_") and "\n" not in token  # stdout is the token alone
    assert "shown only now" in created.stderr
    assert _verify(people, token) == DEV_A
    listed = runner.invoke(main, ["--config", str(cfg), "token", "list"])
    assert listed.exit_code == 0 and "employee=9" in listed.stdout and token not in listed.output
    token_id = list_tokens(people.engine)[0].token_id
    revoked = runner.invoke(main, ["--config", str(cfg), "token", "revoke", str(token_id)])
    assert revoked.exit_code == 0 and _verify(people, token) is None
    again = runner.invoke(main, ["--config", str(cfg), "token", "revoke", str(token_id)])
    assert again.exit_code == 2 and "no active token" in again.stderr
    unknown = runner.invoke(main, ["--config", str(cfg), "token", "create", "--employee", "4242"])
    assert unknown.exit_code == 2 and "not found" in unknown.stderr
