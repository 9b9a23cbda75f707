"""The guarded views' comments on a real Oracle: the catalogue's text, readable from the dictionary."""

from __future__ import annotations

import sqlalchemy as sa

from oracle_rag.answering.aggregate.catalog import REFERENCE_CATALOG


def test_the_views_carry_the_catalogue_comments(oracle_system) -> None:  # type: ignore[no-untyped-def]
    with oracle_system.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT TABLE_NAME, COLUMN_NAME, COMMENTS FROM USER_COL_COMMENTS WHERE TABLE_NAME LIKE 'RAG\\_V\\_%' "
                "ESCAPE '\\' AND COMMENTS IS NOT NULL"
            )
        ).fetchall()
        tables = dict(
            conn.execute(
                sa.text(
                    "SELECT TABLE_NAME, COMMENTS FROM USER_TAB_COMMENTS WHERE TABLE_NAME LIKE 'RAG\\_V\\_%' ESCAPE '\\'"
                )
            ).fetchall()
        )
    got = {(t, c): text for t, c, text in rows}
    for view in REFERENCE_CATALOG.views:
        assert tables[view.name] == view.comment
        for column in view.columns:
            assert got.get((view.name, column.name)) == (column.text or None)
