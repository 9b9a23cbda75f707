"""Conditions to one SQL predicate over the chunk row ``c``, with bound values.

The predicate goes into the search statements next to the scope predicate
(``engines.Where``), and into the list and count statements of
``answers_sql``; the scope predicate itself is never rebuilt here. Facet
names reach the SQL text only as JSON paths (``'$.status'``), and only names
the vocabulary declares, re-checked by ``check_facet_name``; every value is a
bind (``:w_0``, ``:w_1``...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oracle_rag.answering.structured.answers_sql import FACET_NUMBER, FACET_TEXT
from oracle_rag.answering.structured.understanding import Condition
from oracle_rag.engines.statements import Sql
from oracle_rag.errors import InputError
from oracle_rag.sources.facets import Facet, check_facet_name

OPS = ("in", "not_in", "null", "not_null", "lt", "gt", "le", "ge", "range")
_COMPARE = {"lt": "<", "gt": ">", "le": "<=", "ge": ">="}


@dataclass(frozen=True)
class Predicate:
    """The predicate over ``c`` as each engine writes it (never empty: ``1 = 1``) and its binds."""

    sql: Sql
    binds: Mapping[str, Any] = field(default_factory=dict)


def facet_expression(facet: Facet) -> Sql:
    """Each engine's expression for a facet's value: ``json_extract(c.FACETS, '$.status')`` ..."""
    path = f"$.{check_facet_name(facet.name)}"
    template = FACET_NUMBER if facet.numeric else FACET_TEXT
    return Sql(
        oracle=(template.oracle or "").replace("{path}", path),
        sqlite=(template.sqlite or "").replace("{path}", path),
    )


def build_predicate(
    conditions: Iterable[Condition], facets: Mapping[str, Facet], source_type: str | None = None
) -> Predicate:
    """AND of every condition (and of the record type when given), for both engines."""
    conditions = list(conditions)
    oracle, binds = _build(conditions, facets, source_type, "oracle")
    sqlite, _ = _build(conditions, facets, source_type, "sqlite")
    return Predicate(Sql(oracle=oracle, sqlite=sqlite), binds)


def _build(
    conditions: list[Condition], facets: Mapping[str, Facet], source_type: str | None, side: str
) -> tuple[str, dict[str, Any]]:
    parts: list[str] = []
    binds: dict[str, Any] = {}

    def bind(value: Any) -> str:
        name = f"w_{len(binds)}"
        binds[name] = value
        return f":{name}"

    if source_type is not None:
        parts.append(f"c.SOURCE_TYPE = {bind(source_type)}")
    for cond in conditions:
        facet = facets.get(cond.facet)
        if facet is None:
            raise InputError(f"unknown facet {cond.facet!r}")
        if cond.op not in OPS:
            raise InputError(f"unknown condition {cond.op!r}")
        expr = getattr(facet_expression(facet), side)
        values = [_typed(facet, v) for v in cond.values]
        if cond.op in ("in", "not_in"):
            if not values:
                parts.append("1 = 0" if cond.op == "in" else "1 = 1")
                continue
            listed = ", ".join(bind(v) for v in values)
            parts.append(
                f"{expr} IN ({listed})"
                if cond.op == "in"
                else f"({expr} IS NULL OR {expr} NOT IN ({listed}))"
            )
        elif cond.op == "null":
            parts.append(f"{expr} IS NULL")
        elif cond.op == "not_null":
            parts.append(f"{expr} IS NOT NULL")
        elif cond.op in _COMPARE:
            parts.append(f"{expr} {_COMPARE[cond.op]} {bind(values[0])}")
        else:
            parts.append(f"{expr} BETWEEN {bind(values[0])} AND {bind(values[1])}")
    return (" AND ".join(parts) if parts else "1 = 1"), binds


def _typed(facet: Facet, value: Any) -> Any:
    if facet.numeric:
        try:
            return int(value) if float(value).is_integer() else float(value)
        except (TypeError, ValueError):
            raise InputError(f"facet {facet.name}: {value!r} is not a number") from None
    return str(value)
