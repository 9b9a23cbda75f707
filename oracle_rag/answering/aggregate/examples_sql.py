"""The statements of question -> SQL examples (``RAG_FEEDBACK``, migrations V12/V15 SQLite, V11/V15 Oracle).

An example is a rating "up" of an answer that ran guarded SQL, stored with its literals as
placeholders (``EXAMPLE_QUESTION``, ``EXAMPLE_SQL``). It counts only while it is the newest
rating of its answer, and it is offered to the caller who rated it, or to anyone once approved
(``APPROVED_AT``). Never rows: ``RAG_FEEDBACK`` does not hold any.
"""

from __future__ import annotations

from oracle_rag.engines.statements import Sql


# The rating is the newest of its answer: a later "down" (or a later "up", which carries its own
# example) retires it.
def _newest_up(f: str) -> str:
    return f"""{f}.RATING = 1
  AND {f}.EXAMPLE_SQL IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM RAG_FEEDBACK n WHERE n.MESSAGE_ID = {f}.MESSAGE_ID AND n.FEEDBACK_ID > {f}.FEEDBACK_ID)"""


_NEWEST_UP = _newest_up("f")

_OFFERED = f"""SELECT f.EXAMPLE_SQL, f.EXAMPLE_QUESTION
FROM RAG_FEEDBACK f
WHERE {_NEWEST_UP}
  AND (f.CALLER_ID = :caller_id OR f.APPROVED_AT IS NOT NULL)
ORDER BY f.FEEDBACK_ID DESC
"""

# The newest examples one caller may be offered (bounded); the caller ranks them by likeness.
OFFERED_EXAMPLES = Sql(sqlite=_OFFERED + "LIMIT :limit", oracle=_OFFERED + "FETCH FIRST :limit ROWS ONLY")

# Every current example, approved or not, for `oracle-rag feedback examples`: what would be offered.
LIST_EXAMPLES = Sql.both(f"""SELECT f.FEEDBACK_ID, f.MESSAGE_ID, f.CALLER_ID, f.EXAMPLE_QUESTION, f.EXAMPLE_SQL,
       f.APPROVED_AT, f.CREATED_AT
FROM RAG_FEEDBACK f
WHERE {_NEWEST_UP}
ORDER BY f.FEEDBACK_ID""")

# Approve (or withdraw the approval of) one current example; no row changed: no such example.
# No table alias: SQLite's UPDATE wants "AS f", Oracle's refuses it.
_SET_APPROVAL = """UPDATE RAG_FEEDBACK SET APPROVED_AT = {value}
WHERE RAG_FEEDBACK.FEEDBACK_ID = :feedback_id
  AND {newest}"""
_NEWEST_UP_UPDATED = _newest_up("RAG_FEEDBACK")
MARK_EXAMPLE_APPROVED = Sql(
    sqlite=_SET_APPROVAL.format(value="strftime('%Y-%m-%dT%H:%M:%f', 'now')", newest=_NEWEST_UP_UPDATED),
    oracle=_SET_APPROVAL.format(value="SYSTIMESTAMP", newest=_NEWEST_UP_UPDATED),
)
CLEAR_EXAMPLE_APPROVAL = Sql.both(_SET_APPROVAL.format(value="NULL", newest=_NEWEST_UP_UPDATED))
