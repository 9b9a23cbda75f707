"""Aggregate questions answered by guarded read-only SQL.

``run_sql`` is the one path untrusted SQL takes, whether a model wrote it
or an operator typed it into ``oracle-rag sql`` to audit the guardrails:
guard (parse and allow-list) → engine's guarded executor (read-only
connection/user, authorizer or read-only transaction, timeout, row cap).
``ask`` lets a model write that SQL from a question, feeding refusals and
errors back for a bounded number of retries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from oracle_rag import tracing
from oracle_rag.answering.aggregate.catalog import REFERENCE_CATALOG, Catalog
from oracle_rag.answering.aggregate.examples import similar_examples, user_turn
from oracle_rag.answering.aggregate.executors import guarded_executor
from oracle_rag.answering.aggregate.guard import CheckedQuery, check_sql
from oracle_rag.answering.aggregate.literals import masked_literals
from oracle_rag.answering.aggregate.repair import repair
from oracle_rag.answering.aggregate.results import GuardedExecutor
from oracle_rag.callers.audit import audit_for
from oracle_rag.callers.caller import Caller, require_caller
from oracle_rag.config import Settings
from oracle_rag.engines import Engine
from oracle_rag.errors import GuardrailError, InputError, LLMError

Complete = Callable[[list[dict[str, str]]], str]

SQL_SYSTEM_PROMPT = """You write one read-only SQL query ({dialect}) that answers the user's question.
Rules: use only these views and columns; one SELECT (or WITH ... SELECT); no comments; no semicolon;
no functions other than standard aggregates, CASE, CAST, COALESCE/NVL, ROUND, date and string basics.
The views already contain only the rows this user may see: never filter by user identity.
A column's comment says what its values and NULL mean: follow it. Name result columns for what they hold.
Reply with JSON only: {{"sql": "<the query>"}} or {{"sql": null, "reason": "<why it cannot be answered>"}}.

{schema}

What the words and values mean (follow these exactly):
{rules}"""


@dataclass
class AggregateResult:
    question: str | None
    sql: str | None
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    truncated: bool = False
    row_cap: int = 0
    cap: str | None = None  # which cap cut the rows: "rows" or "bytes"
    byte_cap: int = 0
    timed_out: bool = False
    attempts: int = 0
    answer: str = ""
    error: str | None = None
    repairs: list[str] = field(default_factory=list)  # declared meanings the model's SQL broke, mended

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rows_dict(self) -> dict[str, Any]:
        """The rows and the cap that cut them: what the API and ``oracle-rag aggregate --json`` show."""
        return {
            "columns": self.columns,
            "rows": self.rows,
            "truncated": self.truncated,
            "row_cap": self.row_cap,
            "cap": self.cap,
            "byte_cap": self.byte_cap,
        }


_JSON_OPEN = re.compile(r"```(?:json)?\s*\{")
_JSON_CLOSE = re.compile(r"\}\s*```")
_SQL_FENCE = re.compile(r"```sql\s*", re.IGNORECASE)
_QUERY_HEAD = re.compile(r"(?:SELECT|WITH)\b", re.IGNORECASE)


def _fenced_json(body: str) -> str | None:
    """The ``{...}`` in a fence: from the first fenced ``{`` to the last ``}`` a fence closes.

    Two linear scans: the one pattern it replaces rescanned the rest of the reply from every opening fence.
    """
    opening = _JSON_OPEN.search(body)
    if opening is None:
        return None
    closings = [m.start() for m in _JSON_CLOSE.finditer(body, opening.end())]
    return body[opening.end() - 1 : closings[-1] + 1] if closings else None


def _bare_query(body: str) -> str | None:
    """A reply that is only a query (bare or in a ```sql fence), without its fence, ``;`` and spaces.

    String steps, not one pattern: a lazy query before ``\\s*;?\\s*`` read a run of spaces O(n³) ways.
    """
    fence = _SQL_FENCE.match(body)
    query = body[fence.end() :] if fence else body
    if not _QUERY_HEAD.match(query):
        return None
    query = query.removesuffix("```").rstrip()
    return query.removesuffix(";").rstrip() if query.endswith(";") else query


def parse_sql_reply(text: str) -> tuple[str | None, str | None]:
    """The model's strict-JSON reply → (sql, reason). Tolerates a fenced JSON block, and a reply that is
    only a query (bare or in a ```sql fence: a small model's habit even when asked for JSON)."""
    body = text.strip()
    fenced = _fenced_json(body)
    if fenced is not None:
        body = fenced
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        query = _bare_query(body)
        if query is not None:
            return query, None
        raise LLMError("the query model did not reply with JSON") from None
    if not isinstance(data, dict) or "sql" not in data:
        raise LLMError('the query model\'s JSON has no "sql" key')
    sql = data.get("sql")
    if sql is not None and not isinstance(sql, str):
        raise LLMError('"sql" must be a string or null')
    reason = data.get("reason")
    return sql, reason if isinstance(reason, str) else None


def summarise(result: AggregateResult) -> str:
    """A deterministic answer text from the rows (used when no model phrases it)."""
    if not result.rows:
        return "The query returned no rows."
    if len(result.rows) == 1 and len(result.columns) == 1:
        return f"{result.columns[0]}: {result.rows[0][0]}"
    lines = [" | ".join(result.columns)] + [
        " | ".join("" if v is None else str(v) for v in r) for r in result.rows[:20]
    ]
    more = f"\n… {len(result.rows) - 20} more rows" if len(result.rows) > 20 else ""
    cap = f"\n({cap_text(result)}: the result is incomplete)" if result.truncated else ""
    return "\n".join(lines) + more + cap


def cap_text(result: Any) -> str:
    """Which cap cut a result, in words ("row cap of 1000 reached" / "byte cap of 1,000,000
    bytes reached")."""
    if getattr(result, "cap", None) == "bytes":
        return f"byte cap of {result.byte_cap:,} bytes reached"
    return f"row cap of {result.row_cap} reached"


class AggregateService:
    # Test-only switch: the test suite turns the text check off to show that
    # the database-level controls contain every attack on their own. It is
    # not a setting and no command or endpoint can change it.
    text_check: bool = True

    def __init__(self, engine: Engine, settings: Settings, catalog: Catalog = REFERENCE_CATALOG) -> None:
        self.engine = engine
        self.settings = settings
        self.catalog = catalog
        self._executor: GuardedExecutor | None = None

    @property
    def executor(self) -> GuardedExecutor:
        if self._executor is None:
            self._executor = guarded_executor(
                self.engine,
                self.catalog.names,
                timeout_s=self.settings.aggregate_timeout_s,
                row_cap=self.settings.aggregate_row_cap,
                byte_cap=self.settings.aggregate_byte_cap,
            )
        return self._executor

    def run_sql(self, sql: str, caller: Caller) -> AggregateResult:
        """Guard and run untrusted SQL for ``caller``; GuardrailError when refused or contained."""
        who = require_caller(caller)
        with tracing.span("guard") as guard:
            try:
                if self.text_check:
                    checked = check_sql(sql, self.catalog.names, self.engine.sql_dialect)
                else:
                    checked = CheckedQuery(sql if isinstance(sql, str) else "", ())
            except GuardrailError as exc:
                guard.set_attributes(
                    {"oracle_rag.guard.decision": "refused", "oracle_rag.guard.code": exc.code}
                )
                raise
            guard.set_attributes(
                {"oracle_rag.guard.decision": "allowed", "oracle_rag.guard.text_check": self.text_check}
            )
        with tracing.span(
            "guarded sql",
            {
                "db.system.name": self.engine.sql_dialect,
                "db.operation.name": "SELECT",
                "db.query.text": checked.sql if tracing.capture_content() else None,
            },
            kind="client",
        ) as ran:
            res = self.executor.run(checked, who.scope())
            ran.set_attributes(
                {"db.response.returned_rows": len(res.rows), "oracle_rag.sql.truncated": res.truncated}
            )
        out = AggregateResult(
            None,
            checked.sql,
            res.columns,
            [list(r) for r in res.rows],
            res.truncated,
            res.row_cap,
            cap=res.cap,
            byte_cap=res.byte_cap,
            attempts=1,
        )
        out.answer = summarise(out)
        audit_for(self.engine).record(
            who.employee_id,
            "sql",
            guarded_sql=checked.sql,
            masked_sql=masked_literals(checked.sql, self.engine.sql_dialect),
        )
        return out

    def ask(self, question: str, caller: Caller, complete: Complete) -> AggregateResult:
        """Let the model write SQL for ``question``; retry on refusals with the reason."""
        who = require_caller(caller)
        if not question or not question.strip():
            raise InputError("question is empty")
        system = SQL_SYSTEM_PROMPT.format(
            dialect=self.engine.sql_dialect_name, schema=self.catalog.describe(), rules=self.catalog.rules()
        )
        # Accepted answers like this one, that this caller may be offered: data in the user turn.
        examples = similar_examples(self.engine, question, who.employee_id)
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": user_turn(question, examples)},
        ]
        result = AggregateResult(question, None)
        for attempt in range(1, self.settings.aggregate_retries + 2):
            result.attempts = attempt
            reply = complete(messages)
            try:
                sql, reason = parse_sql_reply(reply)
            except LLMError as exc:  # asked again, like a refused query
                result.error = exc.message
                messages += [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": 'Reply with JSON only: {"sql": "<the query>"}.'},
                ]
                continue
            if sql is None:
                result.error = reason or "the model found no query for this question"
                result.answer = f"This cannot be answered from the data I may query: {result.error}"
                return result
            mended = repair(sql, question, self.catalog, self.engine.sql_dialect)
            result.sql, result.repairs = mended.sql, mended.notes
            try:
                ran = self.run_sql(mended.sql, who)
            except GuardrailError as exc:
                result.error = str(exc)
                result.timed_out = "timeout" in exc.message
                messages += [
                    {"role": "assistant", "content": json.dumps({"sql": sql})},
                    {
                        "role": "user",
                        "content": f"That query was refused or failed: {exc.message}. "
                        "Write a corrected query (JSON only).",
                    },
                ]
                continue
            ran.question, ran.attempts, ran.repairs = question, attempt, mended.notes
            if mended.notes:
                ran.answer += "\n(" + "; ".join(mended.notes) + ")"
            return ran
        result.answer = f"I could not produce a valid query after {result.attempts} attempts: {result.error}"
        return result
