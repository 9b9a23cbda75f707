"""Property test: SQL mixing comments, literals, quoted identifiers and nested CTEs.

Each generated query counts the rows of an allowed view, reached directly or
through a chain of CTEs (at the top or inside a subquery), and is decorated
with what fooled the old text check: string literals holding comment
markers and forbidden names, comments holding quotes, quoted aliases
holding markers, and decoy CTEs that take a forbidden table's name in an
unrelated subquery. Some queries also carry a *live* reference to a
forbidden table (a base table, ``sqlite_*``, a virtual table, a pragma or
table function).

Properties, with the text check on and off (the database alone):

* a query with a live forbidden reference is refused;
* whatever a query returns is what the caller's view shows: its count equals
  the count of the same view for the same caller through the plain query;
* a query without a live forbidden reference or a decoy is not refused;
* nothing is written.

The Oracle variant checks the text check alone (no Oracle here): dictionary
views and base tables live in the query are refused, decorations are not.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle_rag.answering.aggregate import REFERENCE_CATALOG, AggregateService, check_sql
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import GuardrailError

VIEWS = REFERENCE_CATALOG.names
CALLERS = (Caller(20, "developer"), Caller(1, "admin"))
SQLITE_FORBIDDEN = (
    "TASK",
    "EMPLOYEE",
    "RAG_CHUNK",
    "RAG_API_TOKEN",
    "RAG_MESSAGE",
    "sqlite_schema",
    "sqlite_dbpage",
    "sqlite_stmt",
    "RAG_CHUNK_FTS_data",
    "pragma_table_list",
    "sqlite_temp_schema",
)
SQLITE_FORBIDDEN_SOURCES = (
    "json_each('[1,2]')",
    "pragma_table_info('TASK')",
    "main.TASK",
    "temp.RAG_V_TASK_X",
)
ORACLE_FORBIDDEN = (
    "ALL_USERS",
    "ALL_VIEWS",
    "ALL_DB_LINKS",
    "SESSION_PRIVS",
    "USER_TABLES",
    "DBA_USERS",
    "V$SESSION",
    "TASK",
    "EMPLOYEE",
    "RAG_CHUNK",
    "DICTIONARY",
)

COMMENTS = (
    "/* ' */",
    '/* " */',
    "-- '\n",
    "/* (SELECT COUNT(*) FROM {f}) */",
    "-- {f}\n",
    "/* '/*' */",
    "/**/",
    "--\n",
)
LITERALS = (
    "'/*'",
    "'*/'",
    "'--'",
    "'/* (SELECT COUNT(*) FROM {f}) */'",
    "'it''s -- {f}'",
    "''",
    "'\"'",
    "'*/ FROM {f} /*'",
)
ALIASES = ('"/*"', '"*/ x"', '"--"', '"it\'s"', '"{f}"', "plain")
ORACLE_LITERALS = LITERALS + ("q'[ ' ]'", "q'{{ /* }}'", "nq'! -- !'", "q'< {f} >'")


@dataclass(frozen=True)
class Generated:
    sql: str
    view: str
    live_forbidden: bool
    decoy: bool


@st.composite
def queries(draw, dialect: str) -> Generated:
    forbidden = SQLITE_FORBIDDEN if dialect == "sqlite" else ORACLE_FORBIDDEN
    literals = LITERALS if dialect == "sqlite" else ORACLE_LITERALS

    def f() -> str:
        return draw(st.sampled_from(forbidden))

    def comment() -> str:
        return draw(st.sampled_from(("", "", " ") + COMMENTS)).format(f=f())

    view = draw(st.sampled_from(VIEWS))
    depth = draw(st.integers(0, 3))
    ctes = [
        f"c{i} AS ({comment()}SELECT * FROM {'c' + str(i - 1) if i else view}{comment()})"
        for i in range(depth)
    ]
    source = f"c{depth - 1}" if depth else view
    if ctes and draw(st.booleans()):  # the CTE chain inside a subquery instead of at the top
        source = f"(WITH {', '.join(ctes)} SELECT * FROM {source}) q"
        top = ""
    else:
        top = f"WITH {', '.join(ctes)} " if ctes else ""
    items = ["COUNT(*) AS n"]
    for _ in range(draw(st.integers(0, 3))):
        items.append(
            f"{draw(st.sampled_from(literals)).format(f=f())} AS {draw(st.sampled_from(ALIASES)).format(f=f())}"
        )
    decoy = draw(st.integers(0, 3)) == 0
    name = draw(st.sampled_from([n for n in forbidden if "$" not in n]))
    if decoy:  # a CTE named like a forbidden table, visible only inside its own subquery
        one = "SELECT 1 AS x" + (" FROM dual" if dialect == "oracle" else "")
        items.append(f"(SELECT COUNT(*) FROM (WITH {name} AS ({one}) SELECT * FROM {name}) d) AS decoy")
    live = draw(st.booleans())
    if live:
        # Often the very name a decoy CTE took elsewhere: a flat set of CTE names would let it through.
        target = draw(
            st.sampled_from((name, name, f()) + (SQLITE_FORBIDDEN_SOURCES if dialect == "sqlite" else ()))
        )
        where = draw(st.sampled_from(("scalar", "exists", "union-cte", "join", "view-named-cte")))
        if where == "view-named-cte":  # a CTE that takes an allowed view's name
            spoof = draw(st.sampled_from(VIEWS))
            items.append(
                f"(WITH {spoof} AS (SELECT * FROM {target}) SELECT COUNT(*) FROM "
                f"(SELECT DISTINCT * FROM {spoof}))"
            )
        elif where == "scalar":
            items.append(f"(SELECT COUNT(*) FROM {target}) AS leak")
        elif where == "exists":
            source += f" WHERE EXISTS (SELECT 1 FROM {target})"
        elif where == "union-cte":
            top = (
                f"WITH leak AS (SELECT 1 AS x FROM {target}) "
                if not top
                else top[:-1] + f", leak AS (SELECT 1 AS x FROM {target}) "
            )
            items.append("(SELECT COUNT(*) FROM leak) AS leaked")
        else:
            source += f" CROSS JOIN (SELECT COUNT(*) AS k FROM {target}) leak"
    sql = f"{top}{comment()}SELECT {comment()}{', '.join(items)} FROM {source}{comment()}"
    return Generated(sql, view, live, decoy)


@pytest.fixture(scope="module")
def template_service(demo_template, tmp_path_factory):
    """One read-only copy of the demo database for every example (nothing may write to it)."""
    import shutil

    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    d = tmp_path_factory.mktemp("property")
    shutil.copytree(demo_template.parent, d, dirs_exist_ok=True)
    system = RagSystem(load_settings(env={}, data_dir=str(d), aggregate_timeout_s=5.0))
    system.migrate(demo=True)
    service = AggregateService(system.engine, system.settings)
    expected = {
        (c.employee_id, v): service.run_sql(f"SELECT COUNT(*) FROM {v}", c).rows[0][0]
        for c in CALLERS
        for v in VIEWS
    }
    before = system.settings.sqlite_path.read_bytes()
    yield service, expected
    assert system.settings.sqlite_path.read_bytes() == before  # nothing was written
    system.close()


def _check(service, expected, generated: Generated, caller: Caller) -> None:
    try:
        result = service.run_sql(generated.sql, caller)
    except GuardrailError as exc:
        assert exc.message
        assert generated.live_forbidden or generated.decoy, (
            f"legitimate SQL refused: {exc.message}\n{generated.sql}"
        )
        return
    assert not generated.live_forbidden, f"forbidden reference not refused:\n{generated.sql}"
    assert result.rows[0][0] == expected[(caller.employee_id, generated.view)], generated.sql


@pytest.mark.parametrize("text_check", [True, False], ids=["text-check", "database-alone"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=queries("sqlite"), caller=st.sampled_from(CALLERS))
def test_sqlite_generated_sql_returns_only_what_the_views_show(
    template_service, monkeypatch, text_check, generated, caller
):
    service, expected = template_service
    monkeypatch.setattr(AggregateService, "text_check", text_check)
    _check(service, expected, generated, caller)


@settings(max_examples=300, deadline=None)
@given(generated=queries("oracle"))
def test_oracle_text_check_refuses_live_dictionary_and_base_tables(generated):
    try:
        check_sql(generated.sql, VIEWS, "oracle")
    except GuardrailError as exc:
        assert generated.live_forbidden, f"legitimate Oracle SQL refused: {exc.message}\n{generated.sql}"
        return
    assert not generated.live_forbidden, f"forbidden reference not refused:\n{generated.sql}"
