"""Versioned, recorded, re-runnable migrations.

Files are ``V<n>__<description>.sql`` in ``sql/<engine>/`` (the product's
tables) and ``sql/<engine>/demo/`` (the reference application). Each applied
version is recorded in RAG_SCHEMA_HISTORY with the SHA-256 of the file; a
changed file is refused, because the database no longer matches what the
file says. One exception, declared in the file: a version *retired* because
a later one undoes it (Oracle V2/V6 created the Oracle Text index that V9
drops) keeps its number with no statements and lists the checksums of the
text it replaces (``-- replaces checksum: <sha256>``), so databases that
applied the old text pass the check and new ones skip the work (and the
requirement, Oracle Text) entirely.

Oracle commits every DDL statement, so a version that fails half way cannot
be rolled back. The runner records how many statements of a version have
run (STATEMENTS_DONE, SUCCESS=0) after each one, and a re-run resumes at the
first statement that did not complete. SQLite DDL is transactional, so there
a version is applied in one transaction and a failure leaves no trace.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from oracle_rag.engines import Engine, Sql
from oracle_rag.errors import MigrationError, wrap_driver_error
from oracle_rag.text.chunking import ChunkPlan, plan_of

_FILE = re.compile(r"^V(\d+)__([A-Za-z0-9_]+)\.sql$")
_REPLACES = re.compile(r"^--\s*replaces checksum:\s*([0-9a-f]{64})\s*$", re.MULTILINE)
MIGRATION_SETS = ("rag", "demo")

_SELECT_HISTORY = Sql.both(
    "SELECT VERSION, CHECKSUM, STATEMENTS_DONE, SUCCESS FROM RAG_SCHEMA_HISTORY WHERE MIGRATION_SET = :mset"
)
_INSERT_HISTORY = Sql.both(
    "INSERT INTO RAG_SCHEMA_HISTORY "
    "(MIGRATION_SET, VERSION, DESCRIPTION, CHECKSUM, STATEMENTS_DONE, SUCCESS) "
    "VALUES (:mset, :version, :description, :checksum, 0, 0)"
)
_PROGRESS = Sql.both(
    "UPDATE RAG_SCHEMA_HISTORY SET STATEMENTS_DONE = :done, SUCCESS = :success "
    "WHERE MIGRATION_SET = :mset AND VERSION = :version"
)


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    path: Path
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def replaced_checksums(self) -> frozenset[str]:
        """Checksums of earlier texts of a retired version (``-- replaces checksum: ...`` lines)."""
        return frozenset(_REPLACES.findall(self.text))


@dataclass
class MigrationReport:
    applied: list[int]
    skipped: list[int]
    resumed: list[int]


def discover(directory: Path) -> list[Migration]:
    """Migrations in ``directory``, ordered by version; gaps and duplicates refused."""
    found: dict[int, Migration] = {}
    if not directory.is_dir():
        return []
    for path in sorted(directory.iterdir()):
        if not path.is_file() or not path.name.endswith(".sql"):
            continue
        match = _FILE.match(path.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"two migration files for version {version} in {directory.name}/")
        found[version] = Migration(version, match.group(2).replace("_", " "), path, path.read_text("utf-8"))
    return [found[v] for v in sorted(found)]


class MigrationRunner:
    """Applies one migration set of one engine."""

    def __init__(self, engine: Engine, migration_set: str = "rag") -> None:
        if migration_set not in MIGRATION_SETS:
            raise MigrationError(
                f"unknown migration set {migration_set!r}; known: {', '.join(MIGRATION_SETS)}"
            )
        self.engine = engine
        self.migration_set = migration_set
        self.migrations = discover(engine.migrations_dir(migration_set))
        self._insert_history = engine.statement(_INSERT_HISTORY)
        self._progress = engine.statement(_PROGRESS)

    def statements(self, migration: Migration) -> list[str]:
        return self.engine.split_script(self.engine.render_migration(migration.text))

    def dry_run(self) -> str:
        """The SQL that ``migrate`` would send for pending versions (all versions if no DB history)."""
        try:
            history = self._history()
        except MigrationError:
            history = {}
        out: list[str] = []
        for m in self.migrations:
            done = history.get(m.version)
            if done and done[2]:
                continue
            start = done[1] if done else 0
            out.append(f"-- {self.migration_set} V{m.version}: {m.description}")
            for sql in self.statements(m)[start:]:
                out.append(self._terminated(sql))
        return "\n\n".join(out) + ("\n" if out else "")

    def _terminated(self, sql: str) -> str:
        """``sql`` as it would appear in a script for this engine (SQL*Plus or sqlite3)."""
        return self.engine.script_statement(sql)

    def _ensure_history(self) -> None:
        with self.engine.begin() as conn:
            for ddl in self.engine.history_ddl():
                conn.exec_driver_sql(ddl)

    def _history(self) -> dict[int, tuple[str, int, bool]]:
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    self.engine.statement(_SELECT_HISTORY), {"mset": self.migration_set}
                ).fetchall()
        except Exception as exc:  # table missing or DB unreachable
            raise MigrationError("cannot read RAG_SCHEMA_HISTORY") from exc
        return {int(r[0]): (r[1], int(r[2]), bool(r[3])) for r in rows}

    def pending(self) -> list[Migration]:
        self._ensure_history()
        history = self._history()
        self._check_checksums(history)
        return [m for m in self.migrations if not history.get(m.version, ("", 0, False))[2]]

    def _check_checksums(self, history: dict[int, tuple[str, int, bool]]) -> None:
        for m in self.migrations:
            rec = history.get(m.version)
            if rec and rec[0] != m.checksum and rec[0] not in m.replaced_checksums:
                state = "applied" if rec[2] else f"partly applied ({rec[1]} statements)"
                raise MigrationError(
                    f"{self.migration_set} V{m.version} ({m.path.name}) was {state} with checksum "
                    f"{rec[0][:12]}… but the file now has {m.checksum[:12]}…; applied migrations must not "
                    f"change: add a new version instead"
                )

    def migrate(self, progress: Callable[[str], None] | None = None) -> MigrationReport:
        report = MigrationReport([], [], [])
        self._ensure_history()
        history = self._history()
        self._check_checksums(history)
        if (
            progress
            and any(not (history.get(m.version) or (0, 0, False))[2] for m in self.migrations)
            and self.engine.writers_active()
        ):
            progress(
                "warning: a session is writing RAG_CHUNK now (a running worker?): stop the workers before "
                "migrating (docs/operations-oracle.md); each schema change waits for their open "
                "transactions, and a change that rewrites a table blocks their writes while it runs"
            )
        for m in self.migrations:
            rec = history.get(m.version)
            if rec and rec[2]:
                report.skipped.append(m.version)
                continue
            start = rec[1] if rec else 0
            if progress:
                progress(
                    f"applying {self.migration_set} V{m.version} {m.description}"
                    + (f" (resuming at statement {start + 1})" if start else "")
                )
            self._apply(m, start, new=rec is None)
            (report.resumed if start else report.applied).append(m.version)
        return report

    def _apply(self, m: Migration, start: int, *, new: bool) -> None:
        statements = self.statements(m)
        keys = {"mset": self.migration_set, "version": m.version}
        if self.engine.transactional_ddl:
            with self.engine.begin() as conn:
                if new:
                    conn.execute(
                        self._insert_history, {**keys, "description": m.description, "checksum": m.checksum}
                    )
                for i, sql in enumerate(statements, 1):
                    self._run(conn, m, i, sql)
                conn.execute(self._progress, {**keys, "done": len(statements), "success": 1})
            return
        if new:
            with self.engine.begin() as conn:
                conn.execute(
                    self._insert_history, {**keys, "description": m.description, "checksum": m.checksum}
                )
        for i, sql in enumerate(statements[start:], start + 1):
            with self.engine.begin() as conn:
                self._run(conn, m, i, sql)
            with self.engine.begin() as conn:
                conn.execute(self._progress, {**keys, "done": i, "success": 0})
        with self.engine.begin() as conn:
            conn.execute(self._progress, {**keys, "done": len(statements), "success": 1})

    def _run(self, conn: sa.Connection, m: Migration, index: int, sql: str) -> None:
        try:
            self.engine.prepare_ddl(conn)
            conn.exec_driver_sql(sql)
        except sa.exc.DBAPIError as exc:
            wrapped = wrap_driver_error(exc, f"{self.migration_set} V{m.version} statement {index}")
            raise MigrationError(
                wrapped.message + "; fix the cause and run migrate again: it resumes here"
            ) from None


def migrate_all(
    engine: Engine,
    sets: tuple[str, ...] = ("rag",),
    progress: Callable[[str], None] | None = None,
    plan: ChunkPlan | None = None,
) -> dict[str, MigrationReport]:
    """Apply the sets' pending migrations, then analyse the records that lack a BM25 analysis.

    A migration may reset the analyses (a new analyser); re-analysing is
    data work from the stored chunks, with no embedding
    (``Engine.analyse_pending``), so it is done here rather than in SQL.
    """
    with engine.connect() as conn:  # a migration or the analysis below must read every chunk (VPD)
        engine.require_system_access(conn, "migrate")
    reports = {s: MigrationRunner(engine, s).migrate(progress) for s in sets}
    if "rag" in sets:
        analysed = engine.analyse_pending(plan or plan_of(engine.settings))
        if analysed and progress:
            progress(f"analysed {analysed} records for keyword search (no embedding)")
    return reports
