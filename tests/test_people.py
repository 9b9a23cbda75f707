"""People's names declared by the deployment, and the reference sources only where their tables exist.

Real parts: the embedded engine on a SQLite file, the declared ``[people]`` query read on the
read-only session, the configuration file reader, the CLI. Time is an injected clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa

from oracle_rag.callers.people import person_id, person_name
from oracle_rag.config import load_settings
from oracle_rag.errors import ConfigurationError
from oracle_rag.sources.reference import ReferenceRegistry
from oracle_rag.system import RagSystem

REPS = [(201, "Tomás", "Herrera"), (202, "Ana", "Pérez"), (203, None, "Okafor"), (204, "", None)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def crm(make_settings) -> Iterator[RagSystem]:
    """No reference application: a sales_rep table named by [people], nothing else."""
    rag = RagSystem(
        make_settings(people_query="SELECT rep_id, first_name, last_name FROM sales_rep", people_refresh="1m")
    )
    rag.migrate()
    with rag.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE sales_rep (rep_id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT)"
        )
        conn.execute(
            sa.text("INSERT INTO sales_rep VALUES (:i, :f, :l)"),
            [{"i": i, "f": f, "l": last} for i, f, last in REPS],
        )
    yield rag
    rag.close()


def test_person_ids_and_names_are_normalised() -> None:
    assert [person_id(v) for v in (7, 7.0, Decimal("7"), "7", " 7 ", "-3")] == [7, 7, 7, 7, 7, -3]
    assert [person_id(v) for v in (None, True, 7.5, "A-17", "")] == [None, None, None, None, None]
    assert person_name(("  Tomás ", None, "Herrera")) == "Tomás Herrera"
    assert person_name((None, "")) == ""


def test_names_come_from_the_declared_query_and_are_kept_for_refresh(crm: RagSystem) -> None:
    clock = Clock()
    crm.people.clock = clock
    assert crm.people.names() == {201: "Tomás Herrera", 202: "Ana Pérez", 203: "Okafor"}
    assert crm.people.state.skipped_rows == 1  # 204 has no name: shown as its id
    assert crm.people.name("202") == "Ana Pérez" and crm.people.name(999) is None
    with crm.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE sales_rep SET last_name = 'Pérez-Gil' WHERE rep_id = 202")
    clock.now += 59
    assert crm.people.name(202) == "Ana Pérez"  # kept for [people] refresh
    clock.now += 2
    assert crm.people.name(202) == "Ana Pérez-Gil"
    status = crm.status()["people"]
    assert status == {
        "names_from": "[people] query",
        "people": 3,
        "skipped_rows": 1,
        "failures": 0,
        "last_error": None,
    }


def test_a_caller_without_an_employee_row_is_named_by_the_people(crm: RagSystem) -> None:
    from oracle_rag.callers.access import load_caller

    with crm.engine.connect() as conn:
        assert load_caller(conn, 201, crm.engine).name == "Tomás Herrera"
        assert load_caller(conn, 999, crm.engine).name == ""  # nobody named: no name, still a caller


def test_a_failed_read_keeps_the_names_read_last_and_says_why(crm: RagSystem) -> None:
    clock = Clock()
    crm.people.clock = clock
    assert crm.people.name(201) == "Tomás Herrera"
    with crm.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE sales_rep RENAME TO sales_rep_old")
    clock.now += 61
    assert crm.people.name(201) == "Tomás Herrera"
    state = crm.status()["people"]
    assert state["failures"] == 1
    assert state["last_error"].startswith(
        "[people] query: source 'people.query': reading failed: a table or view"
    )
    with crm.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE sales_rep_old RENAME TO sales_rep")
    clock.now += 61
    crm.people.refresh()
    assert crm.status()["people"]["last_error"] is None


def test_the_people_query_is_checked_at_start_up(make_settings) -> None:
    with pytest.raises(ConfigurationError, match="people.query"):
        RagSystem(make_settings(people_query="DELETE FROM sales_rep"))
    with pytest.raises(ConfigurationError, match="people.query"):
        RagSystem(make_settings(people_query="SELECT rep_id, full_name FROM sales_rep WHERE rep_id = :id"))


def test_the_people_table_of_the_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "oracle-rag.toml"
    cfg.write_text('[people]\nquery = "SELECT rep_id, full_name FROM sales_rep"\nrefresh = "10m"\n', "utf-8")
    settings = load_settings(env={}, config_file=cfg)
    assert (settings.people_query, settings.people_refresh) == (
        "SELECT rep_id, full_name FROM sales_rep",
        "10m",
    )
    cfg.write_text('[people]\nsql = "SELECT 1"\n', "utf-8")
    with pytest.raises(ConfigurationError, match=r"\[people\] unknown key 'sql'; known keys: query, refresh"):
        load_settings(env={}, config_file=cfg)


def test_without_the_reference_app_no_reference_source_and_no_names(make_settings) -> None:
    with RagSystem(make_settings()) as rag:
        rag.migrate()
        assert isinstance(rag.sources, ReferenceRegistry)
        assert rag.sources.types() == [] and rag.sources.get("TASK") is None
        assert rag.declarations() == []
        assert rag.status()["people"]["names_from"] == "none" and rag.people.names() == {}
        # the reference schema created later in the same process: found at once (migrate settles it)
        rag.migrate(demo=True)
        assert rag.sources.types() == ["TASK", "SPRINT", "PROJECT"]
        rag.people.refresh(force=True)
        assert rag.status()["people"]["names_from"] == "EMPLOYEE (the reference application)"


def test_the_reference_app_is_looked_for_again_only_when_due(make_settings) -> None:
    """Absent tables are looked for again after recheck_s (an injected clock), not on every use."""
    with RagSystem(make_settings()) as rag:
        rag.migrate()
        clock = Clock()
        registry = ReferenceRegistry(rag.engine, clock=clock, recheck_s=30)
        assert registry.types() == []
        from oracle_rag.migrations import migrate_all

        migrate_all(rag.engine, ("demo",))
        clock.now += 29
        assert registry.types() == []
        clock.now += 2
        assert registry.types() == ["TASK", "SPRINT", "PROJECT"]


def test_the_reference_app_declares_its_people(demo_rag: RagSystem) -> None:
    with demo_rag.engine.connect() as conn:
        employees = conn.execute(
            sa.text("SELECT EMPLOYEE_ID, FIRST_NAME || ' ' || LAST_NAME FROM EMPLOYEE")
        ).all()
    assert demo_rag.people.names() == dict(employees)
    assert demo_rag.status()["people"]["names_from"] == "EMPLOYEE (the reference application)"


def test_reference_app_off_ignores_tables_of_the_same_names(
    demo_template: Path, make_settings, data_dir: Path, cli
) -> None:
    """OFF: a database whose own TASK, EMPLOYEE... are not the reference application's."""
    import shutil

    shutil.copyfile(demo_template, data_dir / "oracle-rag.db")
    with RagSystem(make_settings(reference_app="off")) as rag:
        assert rag.sources.types() == [] and rag.declarations() == []
        assert rag.people.names() == {} and rag.status()["people"]["names_from"] == "none"
        with rag.engine.connect() as conn:  # its EMPLOYEE is not the reference app's: any id is a caller
            from oracle_rag.callers.access import load_caller

            stranger = load_caller(conn, 987654, rag.engine)
        assert (stranger.employee_id, stranger.name, stranger.roles) == (987654, "", ())
    result = cli("backfill", reference_app="OFF")
    assert result.exit_code == 0 and "nothing to backfill" in result.output


def test_reference_app_on_requires_the_tables(make_settings, cli) -> None:
    """ON: the reference sources without looking; a missing table is said as one, never as the connection."""
    with RagSystem(make_settings(reference_app="ON")) as rag:
        rag.migrate()
        assert rag.sources.types() == ["TASK", "SPRINT", "PROJECT"]
    result = cli("backfill", reference_app="ON")
    assert result.exit_code == 1 and result.stderr.startswith(
        "error: MISSING_TABLE: sqlite statement failed"
    ), result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_closed_system_is_not_kept_alive_by_its_people(make_settings) -> None:
    """people_for caches one directory per engine weakly: a closed system's engine (its model session,
    caches) is freed, not kept for the life of the process by the directory that names its people."""
    import gc
    import weakref

    from oracle_rag.callers.people import people_for
    from oracle_rag.system import RagSystem

    system = RagSystem(make_settings())
    system.migrate(demo=True)
    people_for(system.engine).names()
    engine = weakref.ref(system.engine)
    system.close()
    del system
    gc.collect()
    assert engine() is None
