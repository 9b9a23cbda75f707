"""The attack battery on Oracle: end to end as the read-only user (Oracle only).

With the text check, every attack of the Oracle lists is refused before the database sees it
(dictionary views included). Without it (the test-only switch), the read-only user's grants
are the control: READ on the four views only, so every attack on application data (base
tables, the RAG_ tables, another schema) is refused by the database itself. Dictionary views
such as ALL_USERS are readable by every Oracle user through PUBLIC synonyms; only the text
check keeps them out, as docs/aggregates.md states.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from attack_lists import ORACLE_ATTACKS, ORACLE_BYPASS_ATTACKS
from oracle_helpers import OracleTarget, readonly_system

from oracle_rag.answering.aggregate.service import AggregateService
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import GuardrailError

DATA_ATTACKS = [
    "SELECT * FROM TASK",
    "SELECT COUNT(*) FROM EMPLOYEE",
    "SELECT * FROM RAG_CHUNK",
    "SELECT * FROM RAG_API_TOKEN",
    "SELECT * FROM RAG_MESSAGE",
    "WITH RAG_V_TASK AS (SELECT * FROM TASK) SELECT * FROM RAG_V_TASK",
    "SELECT (SELECT COUNT(*) FROM (WITH TASK AS (SELECT 1 AS X FROM dual) SELECT * FROM TASK)), "
    "(SELECT COUNT(*) FROM TASK) FROM dual",
]


@pytest.fixture
def guarded(oracle_system, oracle_target: OracleTarget, tmp_path: Path):  # type: ignore[no-untyped-def]
    system = readonly_system(oracle_system, oracle_target, tmp_path / "attacks")
    yield AggregateService(system.engine, system.settings)
    system.close()


@pytest.mark.parametrize(("name", "sql"), ORACLE_ATTACKS + ORACLE_BYPASS_ATTACKS)
def test_every_oracle_attack_is_refused_end_to_end(guarded, name, sql) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GuardrailError):
        guarded.run_sql(sql, Caller(employee_id=3, role="manager"))


@pytest.mark.parametrize("sql", DATA_ATTACKS)
def test_without_the_text_check_the_read_only_user_reads_no_application_data(
    guarded, monkeypatch, sql
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(AggregateService, "text_check", False)
    with pytest.raises(GuardrailError, match="ORA-(00942|01031|41900)"):
        guarded.run_sql(sql, Caller(employee_id=3, role="manager"))
