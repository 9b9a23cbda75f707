"""The guarded views carry the catalogue's comments on Oracle, as Select AI reads them.

On SQLite the same text reaches the query model as the schema in its prompt; on Oracle the demo
migration ``V4__aggregate_view_comments.sql`` writes it as ``COMMENT ON TABLE``/``COMMENT ON COLUMN``
(its exact text is pinned by the golden files of tests/test_oracle_golden.py). Here: every comment of
that file is the catalogue's text, and every commented column of the catalogue is in the file.
"""

from __future__ import annotations

import re

from oracle_rag.answering.aggregate.catalog import REFERENCE_CATALOG
from oracle_rag.engines.base import SQL_ROOT
from oracle_rag.sql_scripts import split_oracle_script

SCRIPT = SQL_ROOT / "oracle" / "demo" / "V4__aggregate_view_comments.sql"
COMMENT = re.compile(r"COMMENT ON (TABLE|COLUMN) ([A-Z_]+)(?:\.([A-Z_]+))? IS '((?:[^']|'')*)'", re.DOTALL)


def comments() -> dict[tuple[str, str | None], str]:
    out: dict[tuple[str, str | None], str] = {}
    for statement in split_oracle_script(SCRIPT.read_text("utf-8")):
        match = COMMENT.fullmatch(statement.strip())
        assert match, f"not a COMMENT ON statement: {statement[:80]!r}"
        kind, view, column, text = match.groups()
        assert (kind == "COLUMN") == (column is not None)
        key = (view, column)
        assert key not in out, f"{key} commented twice"
        assert len(text.encode("utf-8")) <= 4000  # Oracle's limit for a comment
        out[key] = text.replace("''", "'")
    return out


def test_the_oracle_views_carry_the_catalogue_comments():
    want: dict[tuple[str, str | None], str] = {}
    for view in REFERENCE_CATALOG.views:
        want[(view.name, None)] = view.comment
        want.update({(view.name, c.name): c.text for c in view.columns if c.text})
    assert comments() == want


def test_the_comments_say_what_open_and_null_mean():
    text = comments()
    assert "STATUS NOT IN ('DONE')" in text[("RAG_V_TASK", "STATUS")]
    assert text[("RAG_V_TASK", "ESTIMATED_HOURS")] == "hours of work; NULL = not estimated (not 0)"
