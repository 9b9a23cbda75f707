"""The chat backend's library half: prompt, LLM client, citations, conversations, answers.

``Chat(rag).answer(question, caller)`` is the whole read path behind the web
API and ``oracle-rag ask``; see :mod:`oracle_rag.answering.chat.answer`.
"""

from __future__ import annotations

from oracle_rag.answering.chat.answer import (
    Chat,
    ChatAnswer,
    ChatEvent,
    ChatStream,
    RetrievalInfo,
    extractive_answer,
)
from oracle_rag.answering.chat.citations import Citation, parse_anchors, select_citations
from oracle_rag.answering.chat.llm import LLMClient

__all__ = [
    "Chat",
    "ChatAnswer",
    "ChatEvent",
    "ChatStream",
    "Citation",
    "LLMClient",
    "RetrievalInfo",
    "extractive_answer",
    "parse_anchors",
    "select_citations",
]
