"""The error hierarchy and driver-error wrapping (class and code kept, text dropped)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
import sqlean

from oracle_rag import errors
from oracle_rag.errors import (
    ConfigurationError,
    DatabaseError,
    MigrationError,
    MissingTableError,
    RagError,
    driver_error_code,
    wrap_driver_error,
)

SECRET = "S3cr3t-Pw!"


def _texts(err: DatabaseError) -> list[str]:
    return [str(err), repr(err), err.message, repr(err.details), repr(err.args)]


def test_every_error_is_a_rag_error_with_a_distinct_code() -> None:
    classes = [
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, RagError) and obj is not RagError
    ]
    assert len(classes) >= 10
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(codes)
    assert all(code.isupper() for code in codes)


def test_str_carries_the_code_and_details_are_kept() -> None:
    err = ConfigurationError("top_k: bad", key="top_k")
    assert str(err) == "CONFIGURATION: top_k: bad"
    assert err.message == "top_k: bad"
    assert err.details == {"key": "top_k"}
    assert isinstance(err, RagError) and isinstance(err, Exception)
    assert str(MigrationError("x")) == "MIGRATION: x"


def test_wrap_real_sqlean_operational_error() -> None:
    conn = sqlean.connect(":memory:")
    try:
        with pytest.raises(sqlean.OperationalError) as info:
            conn.execute(f"SELECT * FROM no_such_table_{SECRET.replace('-', '_').replace('!', '')}")
    finally:
        conn.close()
    wrapped = wrap_driver_error(info.value, "reading chunks")
    assert isinstance(wrapped, MissingTableError) and isinstance(wrapped, DatabaseError)
    assert wrapped.code == "MISSING_TABLE"
    assert wrapped.driver_class == "OperationalError"
    assert wrapped.vendor_code == "SQLITE_ERROR"
    assert str(wrapped) == (
        "MISSING_TABLE: reading chunks failed: a table or view it reads does not exist (the "
        "database answered; nothing is wrong with the connection) [OperationalError, SQLITE_ERROR]"
    )
    for text in _texts(wrapped):
        assert "no_such_table" not in text
        assert "S3cr3t" not in text


def test_other_statement_errors_are_not_a_missing_table() -> None:
    conn = sqlean.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (a INTEGER)")
        with pytest.raises(sqlean.OperationalError) as info:
            conn.execute("SELECT no_such_column FROM t")
    finally:
        conn.close()
    wrapped = wrap_driver_error(info.value, "reading")
    assert type(wrapped) is DatabaseError and wrapped.code == "DATABASE"


def test_ora_00942_is_a_missing_table_without_its_name() -> None:
    """23ai names the object in ORA-00942; the name came from a statement, so it is dropped like any text."""
    orig = FakeOracleError(f'ORA-00942: table or view "APP"."{SECRET}" does not exist')
    wrapped = wrap_driver_error(sa.exc.DatabaseError("SELECT 1 FROM x", {}, orig), "reading the access query")
    assert isinstance(wrapped, MissingTableError) and wrapped.vendor_code == "ORA-00942"
    for text in _texts(wrapped):
        assert SECRET not in text


def test_a_failed_statement_is_not_reported_as_a_failed_connection(make_settings) -> None:
    """Engine.connect: "connection failed" only when connecting failed; a missing table says so."""
    from oracle_rag.system import RagSystem

    with RagSystem(make_settings()) as rag:
        rag.migrate()
        with pytest.raises(MissingTableError) as info, rag.engine.connect() as conn:
            conn.execute(sa.text("SELECT COUNT(*) FROM TASK"))
        assert str(info.value).startswith("MISSING_TABLE: sqlite statement failed: a table or view")
        with pytest.raises(MissingTableError) as info, rag.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM TASK"))
        assert "connection" not in info.value.message.split(":")[0]


def test_wrap_sqlalchemy_wrapped_sqlean_error(tmp_path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'x.db'}", module=sqlean)
    try:
        with pytest.raises(sa.exc.OperationalError) as info, engine.connect() as conn:
            conn.execute(sa.text("SELECT * FROM missing WHERE secret = :s"), {"s": SECRET})
    finally:
        engine.dispose()
    assert SECRET in str(info.value)  # SQLAlchemy's own text shows binds...
    wrapped = wrap_driver_error(info.value, "searching")
    assert wrapped.driver_class == "OperationalError"  # ...the wrapper names the driver class
    assert wrapped.vendor_code == "SQLITE_ERROR"
    for text in _texts(wrapped):
        assert SECRET not in text
        assert "missing" not in text


class FakeOracleError(Exception):
    """Stands in for a driver error whose message echoes the connect string."""


def test_wrap_fabricated_error_with_password_and_ora_code() -> None:
    exc = FakeOracleError(
        f"ORA-12541: Cannot connect. No listener at host db.example.com port 1521. "
        f"(connect string scott/{SECRET}@db.example.com:1521/FREEPDB1, password={SECRET})"
    )
    wrapped = wrap_driver_error(exc, "connecting")
    assert wrapped.driver_class == "FakeOracleError"
    assert wrapped.vendor_code == "ORA-12541"
    assert str(wrapped) == "DATABASE: connecting failed [FakeOracleError, ORA-12541]"
    for text in _texts(wrapped):
        assert SECRET not in text
        assert "scott" not in text
        assert "db.example.com" not in text


def test_wrap_fabricated_error_inside_sqlalchemy_error() -> None:
    orig = FakeOracleError(f"ORA-01017: invalid credential or not authorized; logon denied ({SECRET})")
    exc = sa.exc.DatabaseError(f"SELECT '{SECRET}' FROM dual", {"pw": SECRET}, orig)
    wrapped = wrap_driver_error(exc, "connecting")
    assert (wrapped.driver_class, wrapped.vendor_code) == ("FakeOracleError", "ORA-01017")
    for text in _texts(wrapped):
        assert SECRET not in text


def test_real_oracledb_error_keeps_dpy_code() -> None:
    oracledb = pytest.importorskip("oracledb")
    # Port 1 on the loopback interface refuses at once: a real driver error, no server needed.
    with pytest.raises(oracledb.Error) as info:
        oracledb.connect(user="scott", password=SECRET, dsn="127.0.0.1:1/FREEPDB1", tcp_connect_timeout=5)
    wrapped = wrap_driver_error(info.value, "connecting")
    assert wrapped.vendor_code is not None and wrapped.vendor_code.startswith("DPY-")
    assert wrapped.driver_class == type(info.value).__name__
    for text in _texts(wrapped):
        assert SECRET not in text
        assert "127.0.0.1" not in text


def test_error_without_code() -> None:
    wrapped = wrap_driver_error(RuntimeError(f"boom {SECRET}"), "doing things")
    assert str(wrapped) == "DATABASE: doing things failed [RuntimeError]"
    assert wrapped.vendor_code is None
    assert driver_error_code(RuntimeError("nothing here")) is None


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("ORA-00942: table or view does not exist", "ORA-00942"),
        ("DPY-6005: cannot connect to database", "DPY-6005"),
        ("DPI-1047: Cannot locate a 64-bit Oracle Client library", "DPI-1047"),
        ("something ORA-12541 later", "ORA-12541"),
    ],
)
def test_driver_error_code_patterns(message: str, code: str) -> None:
    assert driver_error_code(FakeOracleError(message)) == code
