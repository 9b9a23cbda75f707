"""SQL over the stored conversations (``RAG_MESSAGE``) that more than one layer reads.

The question an answer answers is not stored with the answer: it is the
caller's message just before it in the same conversation. Feedback listings
(chat/feedback_sql.py) and the accepted question -> SQL examples
(aggregate/examples_sql.py) both read it; written once here so the two cannot
pair an answer with different questions. A module of its own because
``aggregate`` must not import ``chat`` (``chat`` imports ``aggregate``).
"""

from __future__ import annotations


def question_before(answer: str) -> str:
    """A scalar subquery: the content of the last user message before the message row ``answer``."""
    return f"""(SELECT q.CONTENT FROM RAG_MESSAGE q
        WHERE q.MESSAGE_ID = (SELECT MAX(u.MESSAGE_ID) FROM RAG_MESSAGE u
                              WHERE u.CONVERSATION_ID = {answer}.CONVERSATION_ID
                                AND u.ROLE = 'user'
                                AND u.MESSAGE_ID < {answer}.MESSAGE_ID))"""
