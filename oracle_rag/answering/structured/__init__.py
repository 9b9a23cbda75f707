"""Structured answers: ids, filters and counts understood without a model and answered in SQL.

``understanding`` turns a question into lookups, facet conditions, a count
and a topic using the ``vocabulary`` of declared facets; ``predicates``
turns conditions into one SQL predicate applied with the scope predicate;
``service`` runs lookups, lists and counts; ``render`` writes the answer
text (number first) and the JSON fields. See docs/answers.md.
"""

from oracle_rag.answering.structured.understanding import (
    Condition,
    Notice,
    QueryParser,
    Understanding,
)
from oracle_rag.answering.structured.vocabulary import Vocabulary, build_vocabulary

__all__ = ["Condition", "Notice", "QueryParser", "Understanding", "Vocabulary", "build_vocabulary"]
