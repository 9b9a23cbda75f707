"""SQL over the stored conversations (``RAG_MESSAGE``): the question an answer answers.

The question is not stored with the answer: it is the caller's message just
before it in the same conversation. A rating reads it (answering/chat/feedback_sql.py)
to store the question -> SQL example, with its literals as placeholders, that
answering/aggregate/examples.py offers; the feedback listings read it for the export.
Written once here so the two cannot pair an answer with different questions.
"""

from __future__ import annotations


def question_before(answer: str) -> str:
    """A scalar subquery: the content of the last user message before the message row ``answer``."""
    return f"""(SELECT q.CONTENT FROM RAG_MESSAGE q
        WHERE q.MESSAGE_ID = (SELECT MAX(u.MESSAGE_ID) FROM RAG_MESSAGE u
                              WHERE u.CONVERSATION_ID = {answer}.CONVERSATION_ID
                                AND u.ROLE = 'user'
                                AND u.MESSAGE_ID < {answer}.MESSAGE_ID))"""
