"""Mend a model's SQL where it breaks a meaning the catalogue declares, before the guard sees it.

Told in the prompt that "open" means every status but the finished ones and that NULL hours are "not
estimated", a 1.5B model still wrote ``STATUS = 'open'``, ``STATUS IN ('TODO', 'IN_PROGRESS')`` for
"open" (BLOCKED left out) and ``SUM(h)/COUNT(*)`` (NULL counted as 0). These are not matters
of taste: the declarations say what the words mean, so the query is mended deterministically:

* a state column compared with a word that is not one of its values: a value in another case is that
  value (``'blocked'`` -> ``'BLOCKED'``); "open"/"pending"/"abierta" is ``NOT IN (finished)``,
  "done"/"closed" is ``IN (finished)``;
* a question that says "open" (and names no state value): every predicate on the lifecycle column
  becomes ``NOT IN (finished)``, and one is added when the query has none;
* an average of a measure whose NULL means "not estimated": ``SUM(x)/COUNT(*)`` and
  ``AVG(COALESCE(x, 0))`` become ``AVG(x)``, and the query also returns how many rows were left out
  (``COUNT(*) - COUNT(x) AS NOT_ESTIMATED``), so the answer can say what it averaged.

Everything comes from the :class:`Catalog` (values, finished values, what NULL means) and the question
words of ``answers.lexicon``, nothing about tasks. The mended text is checked by the guard like any
other; a query this module cannot read is returned unchanged (the guard then decides).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from oracle_rag.answering.aggregate.catalog import Catalog, Column
from oracle_rag.answering.structured.lexicon import AGGREGATE_WORDS, FINISHED, OPEN, fold


@dataclass
class Repaired:
    sql: str
    notes: list[str] = field(default_factory=list)


def _phrase_in(tokens: list[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(tuple(tokens[i : i + n]) == phrase for i in range(len(tokens) - n + 1))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", fold(text).replace("_", " "))


def _value_phrase(value: str) -> tuple[str, ...]:
    return tuple(_words(value))


def _open_words_in(question: str, catalog: Catalog) -> tuple[bool, list[str]]:
    """Does the question say "open" (a word that is not itself a declared value, like "active")? And the
    question's words with the "open" phrases taken out (so "not done" does not name DONE)."""
    tokens = _words(question)
    values = {_value_phrase(v) for view in catalog.views for c in view.columns for v in c.values}
    found = False
    for phrase in sorted(OPEN, key=len, reverse=True):
        if phrase in values or not _phrase_in(tokens, phrase):
            continue
        found = True
        n = len(phrase)
        i = 0
        while i <= len(tokens) - n:
            if tuple(tokens[i : i + n]) == phrase:
                tokens[i : i + n] = ["_"]
            i += 1
    return found, tokens


def _names_a_state(tokens: list[str], column: Column) -> bool:
    """Does the question name one of the column's values ("blocked", "in progress") or "finished"?"""
    if any(_phrase_in(tokens, _value_phrase(v)) for v in column.values):
        return True
    return any(_phrase_in(tokens, phrase) for phrase in FINISHED)


def _named_values(tokens: list[str], column: Column) -> set[str]:
    """The column's values the question names, by their own text or their declared words."""
    named = {v for v in column.values if _phrase_in(tokens, _value_phrase(v))}
    for value, words in column.words:
        if any(_phrase_in(tokens, tuple(_words(w))) for w in words if _words(w)):
            named.add(value)
    return named


class _Scope:
    """The views a SELECT reads, by the name or alias its columns use."""

    def __init__(self, select: exp.Select, catalog: Catalog) -> None:
        self.by_name: dict[str, str] = {}
        self.written: dict[str, str] = {}  # the alias as the query writes it
        for table in select.find_all(exp.Table):
            if table.find_ancestor(exp.Select) is not select:
                continue
            view = catalog.view(table.name)
            if view is None:
                continue
            written = table.alias_or_name or table.name
            self.by_name[written.upper()] = view.name
            self.written[written.upper()] = written
        self.catalog = catalog

    def column(self, col: exp.Column) -> tuple[str, Column] | None:
        if col.table:
            name = self.by_name.get(col.table.upper())
            view = self.catalog.view(name) if name else None
            found = view.column(col.name) if view else None
            return (view.name, found) if view and found else None
        hits = []
        for name in dict.fromkeys(self.by_name.values()):
            view = self.catalog.view(name)
            found = view.column(col.name) if view else None
            if view and found:
                hits.append((view.name, found))
        return hits[0] if len(hits) == 1 else None


def _literals(node: exp.Expression | exp.Condition) -> list[exp.Literal] | None:
    if isinstance(node, exp.In):
        items = node.expressions
    elif isinstance(node, exp.EQ | exp.NEQ):
        items = [node.expression]
    else:
        return None
    if not items or not all(isinstance(i, exp.Literal) and i.is_string for i in items):
        return None
    return list(items)


def _finished(col: exp.Column, column: Column, negate: bool) -> exp.Expression:
    """``col IN (finished)`` or ``col NOT IN (finished)``."""
    pred = exp.In(this=col.copy(), expressions=[exp.Literal.string(v) for v in column.done])
    return exp.Not(this=pred) if negate else pred


def _owner_of(
    literals: list[exp.Literal], scope: _Scope, column: Column
) -> tuple[exp.Column, tuple[str, Column]] | None:
    """The one other enum column in scope holding every literal when ``column`` holds none of them."""
    wanted = {lit.this.upper() for lit in literals}
    if wanted & {v.upper() for v in column.values}:
        return None
    hits = []
    for alias, name in scope.by_name.items():
        view = scope.catalog.view(name)
        for c in view.columns if view else ():
            if c is not column and wanted <= {v.upper() for v in c.values}:
                hits.append((alias, name, c))
    if len(hits) != 1:
        return None
    alias, name, c = hits[0]
    qualify = len(scope.by_name) > 1 or alias != name
    return exp.column(c.name, table=scope.written[alias] if qualify else None), (name, c)


def _fix_state_predicates(
    select: exp.Select, scope: _Scope, means_open: bool, tokens: list[str], notes: list[str]
) -> set[str]:
    """Mend predicates on declared state columns; returns the lifecycle views the SELECT filters on."""
    filtered: set[str] = set()
    for node in list(select.find_all(exp.EQ, exp.NEQ, exp.In)):
        if node.find_ancestor(exp.Select) is not select or not isinstance(node.this, exp.Column):
            continue
        found = scope.column(node.this)
        literals = _literals(node)
        if found is None or literals is None or not found[1].values:
            continue
        owner = _owner_of(literals, scope, found[1])
        if owner is not None:  # a value of another declared column ("project STATUS = 'CRITICAL'")
            col, found = owner
            node.this.replace(col)
            notes.append(f"{', '.join(lit.this for lit in literals)}: a value of {found[0]}.{found[1].name}")
        view, column = found
        negated = isinstance(node, exp.NEQ) or isinstance(node.parent, exp.Not)
        target = node.parent if isinstance(node.parent, exp.Not) else node
        if column.done:
            filtered.add(view)
        if column.done and means_open and not _names_a_state(tokens, column):
            if not (negated and {lit.this for lit in literals} == set(column.done)):
                target.replace(_finished(node.this, column, negate=True))
                notes.append(f"open = {column.name} NOT IN ({', '.join(column.done)})")
            continue
        named = _named_values(tokens, column) if isinstance(node, exp.In) and not negated else set()
        if len(named) == 1 and len(literals) > 1 and named <= {lit.this for lit in literals}:
            value = (
                named.pop()
            )  # "en progreso" is IN_PROGRESS, not IN ('IN_PROGRESS', 'IN_REVIEW', 'BLOCKED')
            node.replace(exp.EQ(this=node.this.copy(), expression=exp.Literal.string(value)))
            notes.append(f"{column.name} = '{value}' as named")
            continue
        for lit in literals:
            if lit.this in column.values:
                continue
            same = next((v for v in column.values if v.upper() == lit.this.upper().replace(" ", "_")), None)
            word = tuple(_words(lit.this))
            if same is not None:
                lit.replace(exp.Literal.string(same))
                notes.append(f"{column.name} '{lit.this}' = '{same}'")
            elif column.done and len(literals) == 1 and (word in OPEN or word in FINISHED):
                target.replace(_finished(node.this, column, negate=(word in OPEN) != negated))
                notes.append(
                    f"{lit.this} = {column.name} {'NOT IN' if word in OPEN else 'IN'} "
                    f"({', '.join(column.done)})"
                )
    return filtered


def _add_open_filter(
    select: exp.Select,
    scope: _Scope,
    catalog: Catalog,
    tokens: list[str],
    filtered: set[str],
    notes: list[str],
) -> None:
    for alias, name in scope.by_name.items():
        view = catalog.view(name)
        column = next((c for c in view.columns if c.done), None) if view else None
        if view is None or column is None or name in filtered or _names_a_state(tokens, column):
            continue
        qualify = len(scope.by_name) > 1 or alias != name
        col = exp.column(column.name, table=scope.written[alias] if qualify else None)
        select.where(_finished(col, column, negate=True), copy=False)
        notes.append(f"open = {column.name} NOT IN ({', '.join(column.done)})")
        filtered.add(name)


def _measure(node: exp.Expression, scope: _Scope) -> tuple[exp.Column, Column] | None:
    if isinstance(node, exp.Column):
        found = scope.column(node)
        if found and (found[1].null_means or found[1].unit):  # a declared measure
            return node, found[1]
    return None


def _nullable_measure(node: exp.Expression, scope: _Scope) -> tuple[exp.Column, Column] | None:
    hit = _measure(node, scope)
    return hit if hit and hit[1].null_means else None


def _strip_nulls(select: exp.Select, scope: _Scope, notes: list[str]) -> None:
    """NULL of a measure ("not estimated") is not 0: SUM(x)/COUNT(*) is AVG(x); COALESCE(x, 0) in AVG, MIN,
    MAX or COUNT is x."""
    for div in list(select.find_all(exp.Div)):
        if div.find_ancestor(exp.Select) is not select:
            continue
        top, bottom = div.this, div.expression
        if isinstance(top, exp.Sum) and isinstance(bottom, exp.Count):
            hit = _nullable_measure(top.this, scope)
            counted = bottom.this
            if hit and not (isinstance(counted, exp.Column) and counted.name.upper() == hit[0].name.upper()):
                div.replace(exp.Avg(this=hit[0].copy()))
                notes.append(
                    f"average of {hit[1].name} over the rows that have one (NULL = {hit[1].null_means})"
                )
    for call in list(select.find_all(exp.Avg, exp.Min, exp.Max, exp.Count)):
        inner = call.this
        if (
            call.find_ancestor(exp.Select) is select
            and isinstance(inner, exp.Coalesce)
            and _nullable_measure(inner.this, scope)
        ):
            call.set("this", inner.this.copy())
            notes.append(f"{call.key.upper()} of {inner.this.name} without counting NULL as a value")


def _count_left_out(select: exp.Select, scope: _Scope) -> None:
    """The outer query averaging a measure whose NULL has a meaning also returns how many rows it left out."""
    averaged: list[tuple[exp.Column, Column]] = []
    for avg in list(select.find_all(exp.Avg)):
        if avg.find_ancestor(exp.Select) is not select:
            continue
        hit = _nullable_measure(avg.this, scope)
        if hit and avg.find_ancestor(exp.Window) is None and all(hit[1].name != c.name for _, c in averaged):
            averaged.append(hit)
    if select is not select.root() or select.args.get("distinct"):
        return
    names = {e.alias_or_name.upper() for e in select.expressions}
    for col, column in averaged:
        alias = re.sub(r"\W+", "_", column.null_means.upper())
        if len(averaged) > 1:
            alias += f"_{column.name}"
        if alias in names:
            continue
        left_out = exp.Sub(this=exp.Count(this=exp.Star()), expression=exp.Count(this=col.copy()))
        select.select(exp.alias_(left_out, alias), copy=False)


def _drop_lookup_joins(select: exp.Select, catalog: Catalog, notes: list[str]) -> None:
    """A join to a "lookup view" that does not exist, named for a view and one of its enum columns
    (``RAG_V_TASK_PRIORITY``: a 1.5B model grouping "por prioridad"), is that column itself: the join goes
    and the lookup's columns become the column (the values are in the view, the prompt says so)."""
    scope = _Scope(select, catalog)
    for join in list(select.args.get("joins") or []):
        table = join.this
        if not isinstance(table, exp.Table) or catalog.view(table.name) is not None:
            continue
        name = table.name.upper()
        owner = next(((alias, v) for alias, v in scope.by_name.items() if name.startswith(v + "_")), None)
        view = catalog.view(owner[1]) if owner else None
        column = view.column(name[len(view.name) + 1 :]) if view else None
        if owner is None or view is None or column is None or not column.values:
            continue
        lookup = (table.alias_or_name or table.name).upper()
        written = scope.written[owner[0]]
        if any(
            isinstance(n, exp.Table) and n.name.upper() == name
            for n in select.find_all(exp.Table)
            if n is not table
        ):
            continue  # read again elsewhere (a subquery): left to the guard
        join.pop()
        for col in list(select.find_all(exp.Column)):
            if col.table and col.table.upper() == lookup:
                col.replace(exp.column(column.name, table=written))
        notes.append(f"{table.name} is {view.name}.{column.name} (no such view)")


_AGGREGATES: dict[str, type[exp.AggFunc]] = {"AVG": exp.Avg, "SUM": exp.Sum, "MAX": exp.Max, "MIN": exp.Min}


def _asked_aggregate(tokens: list[str]) -> str | None:
    """The one aggregate the question's words ask for ("total" SUM, "promedio" AVG...), or None."""
    asked = [name for name, phrases in AGGREGATE_WORDS.items() if any(_phrase_in(tokens, p) for p in phrases)]
    return asked[0] if len(asked) == 1 else None


def _fix_aggregate_function(select: exp.Select, scope: _Scope, asked: str | None, notes: list[str]) -> None:
    """The question asks for one aggregate of a measure and the query computes another of it: the
    asked one."""
    if asked is None:
        return
    calls = [
        n
        for n in select.find_all(*_AGGREGATES.values())
        if n.find_ancestor(exp.Select) is select
        and n.find_ancestor(exp.Window) is None
        and not isinstance(n.parent, exp.Div)
        and isinstance(n.this, exp.Column)
        and _measure(n.this, scope)
    ]
    if not calls or any(isinstance(n, _AGGREGATES[asked]) for n in calls):
        return
    for call in calls:
        wrote = next(name for name, kind in _AGGREGATES.items() if isinstance(call, kind))
        call.replace(_AGGREGATES[asked](this=call.this.copy()))
        notes.append(f"{asked}({call.this.name}) as asked, not {wrote}")


def repair(sql: str, question: str, catalog: Catalog, dialect: str) -> Repaired:
    """``sql`` mended where it breaks a declared meaning (the module docstring), with what was changed."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except (sqlglot.errors.SqlglotError, RecursionError):
        return Repaired(sql)
    if not isinstance(tree, exp.Select | exp.SetOperation):
        return Repaired(sql)
    means_open, tokens = _open_words_in(question, catalog)
    notes: list[str] = []
    added = False
    for select in list(tree.find_all(exp.Select)):
        _drop_lookup_joins(select, catalog, notes)
        scope = _Scope(select, catalog)
        if not scope.by_name:
            continue
        filtered = _fix_state_predicates(select, scope, means_open, tokens, notes)
        if means_open and not added and select.args.get("from_") is not None:
            count = len(notes)
            _add_open_filter(select, scope, catalog, tokens, filtered, notes)
            added = len(notes) > count
        had = len(select.expressions)
        _strip_nulls(select, scope, notes)
        _fix_aggregate_function(select, scope, _asked_aggregate(tokens), notes)
        _count_left_out(select, scope)
        if len(select.expressions) > had:
            notes.append("rows left out of the average are counted")
    if not notes:
        return Repaired(sql)
    return Repaired(tree.sql(dialect=dialect), list(dict.fromkeys(notes)))
