"""SQL-query sources end to end: refresh into RAG_CHUNK, incremental reads, failures, scope, CLI.

Real parts throughout: an external SQLite file as the source, the embedded
engine with the real ONNX model embedding inside SQL, the Retriever, and the
``oracle-rag`` CLI through click's runner. Embedding calls are counted on the
engine's runtime.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import sqlean
from click.testing import CliRunner

from oracle_rag.callers.caller import Caller
from oracle_rag.engines import Filters
from oracle_rag.errors import ConfigurationError, SourceLoadingError
from oracle_rag.indexing.refresh import SourceRefresher
from oracle_rag.sources import SqlSource, bind_connection

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
ROWS = [
    (1, "Acme", "Acme renewal is due in March; they want a three year contract.", 11, "EMEA"),
    (2, "Globex", "Globex asked for a discount on the premium support tier.", 12, "AMER"),
    (3, "Initech", "Initech migrated their data warehouse to the cloud last week.", None, "AMER"),
    (4, "Umbrella", "Umbrella complained about slow invoice processing.", 11, None),
    (5, "Hooli", "Hooli wants single sign-on for all of their offices.", None, "APAC"),
]
QUERY = (
    "SELECT account_id AS id, notes AS content, account_name AS title, owner_id, region, updated_at "
    "FROM accounts"
)


@pytest.fixture
def crm(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'crm.db'}", module=sqlean)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE accounts (account_id INTEGER PRIMARY KEY, account_name TEXT, "
            "notes TEXT, owner_id INTEGER, region TEXT, updated_at TEXT)"
        )
        for i, name, notes, owner, region in ROWS:
            conn.execute(
                sa.text("INSERT INTO accounts VALUES (:i, :n, :c, :o, :r, :u)"),
                {"i": i, "n": name, "c": notes, "o": owner, "r": region, "u": f"2026-01-0{i}T10:00:00"},
            )
    yield engine
    engine.dispose()


@pytest.fixture
def bound(crm) -> Iterator[sa.Engine]:
    with bind_connection("crm", crm):
        yield crm


def _refresher(rag, **options) -> SourceRefresher:
    options.setdefault("connection", "crm")
    return SourceRefresher(rag.engine, [SqlSource("crm", options.pop("query", QUERY), **options)])


def _chunks(rag, source_type: str = "crm") -> dict[str, tuple]:
    with rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT SOURCE_ID, CONTENT, OWNER_ID, CHUNK_ID, UPDATED_AT FROM RAG_CHUNK "
                "WHERE SOURCE_TYPE = :t"
            ),
            {"t": source_type},
        ).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def _calls(rag) -> int:
    return int(rag.engine.runtime().calls)


def _exec(engine: sa.Engine, sql: str, **binds) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(sql), binds)


# -- full reads -------------------------------------------------------------------------------------
def test_sync_indexes_each_row_as_one_chunk(rag, bound) -> None:
    refresher = _refresher(rag, owner_column="owner_id")
    before = _calls(rag)
    (result,) = refresher.sync()
    assert (result.outcome, result.mode, result.rows_read, result.new, result.documents) == (
        "changed",
        "full",
        5,
        5,
        5,
    )
    assert _calls(rag) - before == 5
    chunks = _chunks(rag)
    assert set(chunks) == {f"crm#{i}" for i in range(1, 6)}
    assert chunks["crm#1"][:2] == ("Acme\nAcme renewal is due in March; they want a three year contract.", 11)
    assert chunks["crm#3"][1] is None
    assert refresher.document_count("crm") == 5
    assert refresher.metadata("crm", "2") == {
        "source": "crm",
        "document_id": "crm#2",
        "id": "2",
        "title": "Globex",
        "owner_id": 12,
        "region": "AMER",
        "updated_at": "2026-01-02T10:00:00",
    }
    (state,) = refresher.states()
    assert (state.status, state.doc_count, state.last_mode) == ("ok", 5, "full")
    assert state.last_refresh_at is not None and state.last_error is None


def test_refresh_embeds_only_new_and_changed_rows(rag, bound) -> None:
    refresher = _refresher(rag, owner_column="owner_id")
    refresher.sync()
    first = _chunks(rag)
    _exec(bound, "UPDATE accounts SET notes = 'Acme signed the three year contract.' WHERE account_id = 1")
    _exec(bound, "UPDATE accounts SET region = 'EMEA' WHERE account_id = 3")  # metadata only
    _exec(bound, "DELETE FROM accounts WHERE account_id = 4")
    _exec(
        bound,
        "INSERT INTO accounts VALUES (6, 'Stark', 'Stark needs an on-premise install.', 12, NULL, "
        "'2026-01-06T10:00:00')",
    )
    before = _calls(rag)
    (result,) = refresher.sync()
    assert (
        result.outcome,
        result.new,
        result.updated,
        result.removed,
        result.unchanged,
        result.documents,
    ) == ("changed", 1, 2, 1, 2, 5)
    assert _calls(rag) - before == result.embedded == 3
    after = _chunks(rag)
    assert "crm#4" not in after and after["crm#6"][1] == 12
    assert after["crm#1"][0] == "Acme\nAcme signed the three year contract."
    assert refresher.metadata("crm", "3")["region"] == "EMEA"
    assert refresher.metadata("crm", "4") is None
    for untouched in ("crm#2", "crm#5"):  # same chunk row, same UPDATED_AT: not rewritten
        assert after[untouched] == first[untouched]
    # nothing changed: zero embedding calls, zero writes to chunks
    before = _calls(rag)
    (again,) = refresher.sync()
    assert (again.outcome, again.embedded, again.removed, again.unchanged) == ("unchanged", 0, 0, 5)
    assert _calls(rag) == before and _chunks(rag) == after


def test_failed_source_keeps_its_documents_and_reports_the_failure(rag, bound) -> None:
    refresher = _refresher(rag)
    refresher.sync()
    kept = _chunks(rag)
    _exec(bound, "UPDATE accounts SET notes = 'changed before the failure' WHERE account_id = 2")
    _exec(bound, "INSERT INTO accounts VALUES (7, 'Wayne', NULL, NULL, NULL, '2026-01-07T10:00:00')")
    (result,) = refresher.sync()
    assert result.outcome == "failed" and isinstance(result.error, SourceLoadingError)
    assert "row 6 has a NULL content" in str(result.error)
    assert _chunks(rag) == kept  # nothing half-applied: not even the good change of row 2
    with pytest.raises(SourceLoadingError, match="row 6 has a NULL content"):
        refresher.document_count("crm")
    (state,) = refresher.states()
    assert (state.status, state.doc_count, state.last_error_code) == ("failed", 5, "SOURCE_LOADING")
    _exec(bound, "DELETE FROM accounts WHERE account_id = 7")
    (fixed,) = refresher.sync()
    assert (fixed.outcome, fixed.updated) == ("changed", 1)
    assert refresher.document_count("crm") == 5


def test_unbound_connection_fails_as_configuration(rag, crm) -> None:
    refresher = _refresher(rag)
    with bind_connection("crm", crm):
        refresher.sync()
    (result,) = refresher.sync()  # the binding is gone and there is no url option
    assert result.outcome == "failed" and isinstance(result.error, ConfigurationError)
    with pytest.raises(ConfigurationError, match="source 'crm': connection 'crm' is neither bound"):
        refresher.document_count("crm")
    assert len(_chunks(rag)) == 5


# -- incremental reads ------------------------------------------------------------------------------
def test_incremental_refresh_reads_only_rows_at_or_after_the_watermark(rag, bound) -> None:
    refresher = _refresher(rag, updated_at_column="updated_at", refresh="10m")
    (load,) = refresher.refresh_due(now=T0)  # first call in this process: a full read
    assert (load.mode, load.rows_read, load.new) == ("full", 5, 5)
    assert refresher.refresh_due(now=T0 + dt.timedelta(minutes=5)) == []  # not due yet
    _exec(
        bound,
        "UPDATE accounts SET notes = 'Globex accepted the offer.', updated_at = '2026-02-01T09:00:00' "
        "WHERE account_id = 2",
    )
    _exec(bound, "DELETE FROM accounts WHERE account_id = 3")
    before = _calls(rag)
    (inc,) = refresher.refresh_due(now=T0 + dt.timedelta(minutes=11))
    # 4 ids + the one row at/after the watermark (row 5, unchanged) + the changed row 2
    assert (inc.mode, inc.rows_read, inc.updated, inc.unchanged, inc.removed, inc.documents) == (
        "incremental",
        4 + 2,
        1,
        1,
        1,
        4,
    )
    assert _calls(rag) - before == 1
    assert "crm#3" not in _chunks(rag)
    assert refresher.state("crm").watermark.text == "2026-02-01T09:00:00"
    # sync is always a full read
    (full,) = refresher.sync()
    assert (full.mode, full.rows_read, full.outcome) == ("full", 4, "unchanged")


def test_incremental_refresh_falls_back_to_full_for_an_unseen_old_row(rag, bound) -> None:
    refresher = _refresher(rag, updated_at_column="updated_at", refresh="1m")
    refresher.refresh_due(now=T0)
    _exec(
        bound, "INSERT INTO accounts VALUES (8, 'Old', 'Backdated row.', NULL, NULL, '2020-01-01T00:00:00')"
    )
    (result,) = refresher.refresh_due(now=T0 + dt.timedelta(minutes=2))
    assert (result.mode, result.new) == ("full (fallback)", 1)
    assert "crm#8" in _chunks(rag)


def test_null_updated_at_fails_the_source(rag, bound) -> None:
    refresher = _refresher(rag, updated_at_column="updated_at", refresh="1m")
    refresher.refresh_due(now=T0)
    _exec(bound, "INSERT INTO accounts VALUES (9, 'Nul', 'No timestamp.', NULL, NULL, NULL)")
    (result,) = refresher.refresh_due(now=T0 + dt.timedelta(minutes=2))
    assert result.outcome == "failed" and "has a NULL 'updated_at'" in str(result.error)
    assert len(_chunks(rag)) == 5


def test_changed_definition_forces_a_full_read(rag, bound) -> None:
    _refresher(rag, updated_at_column="updated_at").sync()
    changed = _refresher(rag, updated_at_column="updated_at", query=QUERY + " WHERE account_id <> 5")
    result = changed.refresh("crm", full=False)
    assert (result.mode, result.removed, result.documents) == ("full", 1, 4)


def test_sources_without_interval_are_read_only_at_load(rag, bound) -> None:
    refresher = _refresher(rag)
    assert [r.mode for r in refresher.refresh_due(now=T0)] == ["full"]
    assert refresher.refresh_due(now=T0 + dt.timedelta(days=365)) == []


def test_a_failed_load_is_retried_without_interval(rag, crm) -> None:
    refresher = _refresher(rag)
    (failed,) = refresher.refresh_due(now=T0)  # not bound yet
    assert failed.outcome == "failed"
    with bind_connection("crm", crm):
        assert refresher.refresh_due(now=T0 + dt.timedelta(minutes=4)) == []
        (retried,) = refresher.refresh_due(now=T0 + dt.timedelta(minutes=6))
    assert (retried.outcome, retried.new) == ("changed", 5)
    assert refresher.refresh_due(now=T0 + dt.timedelta(days=1)) == []


def test_concurrent_refresh_is_skipped(rag, bound) -> None:
    mine, other = _refresher(rag), _refresher(rag)
    mine.sync()
    _exec(bound, "UPDATE accounts SET notes = 'raced' WHERE account_id = 1")
    source = mine.sources["crm"]
    state = mine.state("crm")
    plan = mine._read(source, state, True)
    (theirs,) = other.sync()  # another process refreshes between our read and our write
    assert theirs.updated == 1
    result = mine._apply(source, state, plan, T0)
    assert result.outcome == "skipped"
    assert mine.state("crm").refresh_seq == state.refresh_seq + 1


# -- scope ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_developer_cannot_retrieve_another_owners_document(rag, bound, mode) -> None:
    _refresher(rag, owner_column="owner_id").sync()
    retriever = rag.retriever()
    only_crm = Filters(source_types=("crm",))

    def ids(caller: Caller) -> set[str]:
        return {
            r.source_id
            for r in retriever.search("Globex discount premium support", 10, caller, mode, only_crm)
        }

    dev11, dev12, manager = Caller(11, "developer"), Caller(12, "developer"), Caller(3, "manager")
    assert "crm#2" in ids(dev12) and "crm#2" in ids(manager)
    assert "crm#2" not in ids(dev11)
    if mode == "semantic":  # every visible document comes back: own rows and rows without an owner
        assert ids(dev11) == {"crm#1", "crm#3", "crm#4", "crm#5"}
        assert ids(manager) == {f"crm#{i}" for i in range(1, 6)}


# -- the product's own database ---------------------------------------------------------------------
def test_rag_connection_reads_the_products_database(rag) -> None:
    with rag.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE KB_NOTE (NOTE_ID INTEGER PRIMARY KEY, BODY TEXT)")
        conn.exec_driver_sql(
            "INSERT INTO KB_NOTE VALUES (1, 'Deploys freeze on Fridays.'), (2, 'On-call rotates weekly.')"
        )
    refresher = SourceRefresher(
        rag.engine, [SqlSource("kb", "SELECT note_id AS id, body AS content FROM kb_note")]
    )
    (result,) = refresher.sync()
    assert (result.outcome, result.new) == (
        "changed",
        2,
    )  # the write after the read worked: query_only restored
    assert _chunks(rag, "kb")["kb#1"][0] == "Deploys freeze on Fridays."
    with rag.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA query_only").scalar_one() == 0


def test_drop_removes_documents_and_state(rag, bound) -> None:
    _refresher(rag).sync()
    unconfigured = SourceRefresher(rag.engine, [])
    (orphan,) = unconfigured.states()
    assert (orphan.name, orphan.configured, orphan.doc_count) == ("crm", False, 5)
    assert unconfigured.drop("crm") == 5
    assert _chunks(rag) == {} and unconfigured.states() == []


# -- CLI --------------------------------------------------------------------------------------------
def test_cli_sync_list_count(tmp_path: Path, data_dir: Path, crm, monkeypatch) -> None:
    import os

    from oracle_rag.cli import main

    for key in [
        k for k in os.environ if k.startswith("ORACLE_RAG_")
    ]:  # only the TOML file configures this run
        monkeypatch.delenv(key)

    cfg = tmp_path / "oracle-rag.toml"
    cfg.write_text(
        f'[oracle_rag]\ndata_dir = "{data_dir}"\nembedding_threads = 1\n\n'
        f'[sources.crm]\nquery = "{QUERY}"\nconnection = "crm"\nurl = "sqlite:///{tmp_path / "crm.db"}"\n'
        f'owner_column = "owner_id"\n\n'
        f'[sources.broken]\nquery = "SELECT account_id AS id, notes AS content, region FROM accounts"\n'
        f'connection = "files"\nurl = "sqlite:///{tmp_path / "crm.db"}"\n'
    )
    runner = CliRunner()
    assert runner.invoke(main, ["--config", str(cfg), "migrate"]).exit_code == 0
    _exec(crm, "UPDATE accounts SET region = NULL WHERE account_id = 1")
    _exec(crm, "INSERT INTO accounts VALUES (10, 'Dup', 'x', NULL, NULL, '2026-01-10T00:00:00')")
    sync = runner.invoke(main, ["--config", str(cfg), "sources", "sync", "crm"])
    assert sync.exit_code == 0, sync.output
    assert sync.output.startswith("crm: changed (full read, 6 rows read): 6 new")
    listing = runner.invoke(main, ["--config", str(cfg), "sources", "list"])
    assert listing.exit_code == 0
    crm_line, broken_line = listing.output.splitlines()
    assert crm_line.startswith("crm\tok\tdocuments=6\tlast refresh=2") and "mode=full" in crm_line
    assert broken_line.startswith("broken\tnew\tdocuments=0\tlast refresh=never")
    assert runner.invoke(main, ["--config", str(cfg), "sources", "count", "crm"]).output == "6\n"
    # a failing source: reported per source, exit 1, its count raises the recorded error (exit 2: configuration)
    _exec(crm, "UPDATE accounts SET account_id = 20, region = 'x' WHERE account_id = 10")
    cfg.write_text(
        cfg.read_text().replace("notes AS content, region FROM", "notes AS content, region AS source FROM")
    )
    both = runner.invoke(main, ["--config", str(cfg), "sources", "sync"])
    assert both.exit_code == 1
    out = both.output.splitlines()
    assert out[0].startswith(
        "crm: changed (full read, 6 rows read): 1 new, 0 updated, 1 removed, 5 unchanged"
    )
    assert out[1].startswith(
        "broken: failed (full read): CONFIGURATION: source 'broken': column 'source' would overwrite metadata"
    )
    count = runner.invoke(main, ["--config", str(cfg), "sources", "count", "broken"])
    assert count.exit_code == 2 and "would overwrite metadata" in count.output
    assert "failed: CONFIGURATION" in runner.invoke(main, ["--config", str(cfg), "sources", "list"]).output


def test_unmigrated_database_gets_a_hint(make_settings) -> None:
    from oracle_rag.errors import DatabaseError
    from oracle_rag.system import RagSystem

    with RagSystem(make_settings()) as rag, pytest.raises(DatabaseError, match="run `oracle-rag migrate`"):
        rag.sql_sources().states()


def test_serve_background_services_refresh_configured_sources(rag, bound, make_settings):
    """`oracle-rag serve` runs the refresh thread: configured sources reach the index unattended."""
    import time

    from oracle_rag.background import BackgroundServices
    from oracle_rag.system import RagSystem

    settings = make_settings(
        sources={"crm": {"query": QUERY, "connection": "crm", "refresh": "1s"}},
        worker_initial_delay_ms=0,
        worker_poll_ms=100,
    )
    system = RagSystem(settings, engine=rag.engine)
    services = BackgroundServices(system, worker=True, backfill=False)
    services.start()
    try:
        deadline = time.monotonic() + 120  # a bound on waiting, not a performance assertion
        count = 0
        while time.monotonic() < deadline:
            with rag.engine.connect() as conn:
                count = conn.execute(
                    sa.text("SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'crm'")
                ).scalar_one()
            if count == len(ROWS):
                break
            time.sleep(0.2)
        assert count == len(ROWS)
        assert services.status()["sources_refresh"] == "running"
    finally:
        assert services.stop()


# -- citations of lower-case source names open in the detail view --------------------------
def test_lower_case_source_citations_open_for_their_owner_only(demo_rag, bound) -> None:
    from chat_helpers import bearer, issue_tokens

    from oracle_rag.answering.chat.chunks import chunk_detail
    from oracle_rag.answering.chat.citations import select_citations
    from oracle_rag.web import create_app

    name = "crm.accounts-eu"
    refresher = SourceRefresher(
        demo_rag.engine, [SqlSource(name, QUERY, connection="crm", owner_column="owner_id")]
    )
    refresher.sync()
    doc = f"{name}#1"  # owned by employee 11
    with demo_rag.engine.connect() as conn:
        detail = chunk_detail(conn, demo_rag.engine, Caller(11, "developer"), name, doc)
        assert detail.source_type == name and detail.content.startswith("Acme")
        with pytest.raises(Exception, match="not found"):
            chunk_detail(conn, demo_rag.engine, Caller(12, "developer"), name, doc)

    class Retrieved:
        source_type, source_id, content = name, doc, detail.content

    (cited,) = select_citations(f"Acme wants a renewal [{name} #{doc}].", [Retrieved()])
    assert (cited.source_type, cited.source_id) == (name, doc)
    tokens = issue_tokens(demo_rag, (11, 12))
    client = create_app(
        {"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None, "TESTING": True}
    ).test_client()
    from urllib.parse import quote

    path = f"/api/chunks/{quote(cited.source_type, safe='')}/{quote(cited.source_id, safe='')}"
    assert client.get(path, headers=bearer(tokens[11])).get_json()["content"].startswith("Acme")
    assert client.get(path, headers=bearer(tokens[12])).status_code == 404
    page = client.get(f"/chunk/{quote(name, safe='')}/{quote(doc, safe='')}")
    assert page.status_code == 200
