"""Aggregate questions answered by guarded, read-only, caller-scoped SQL."""

from oracle_rag.answering.aggregate.catalog import REFERENCE_CATALOG, Catalog, Column, View
from oracle_rag.answering.aggregate.guard import ALLOWED_FUNCTIONS, CheckedQuery, check_sql
from oracle_rag.answering.aggregate.service import (
    AggregateResult,
    AggregateService,
    parse_sql_reply,
)

__all__ = [
    "ALLOWED_FUNCTIONS",
    "REFERENCE_CATALOG",
    "AggregateResult",
    "AggregateService",
    "Catalog",
    "CheckedQuery",
    "Column",
    "View",
    "check_sql",
    "parse_sql_reply",
]
