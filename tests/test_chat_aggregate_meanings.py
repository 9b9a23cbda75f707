"""Text-to-SQL is told what the data means (issue 26): finished values from the declared lifecycle, NULL."""

from __future__ import annotations

from llm_server import ScriptedLLM

from oracle_rag.access import load_caller
from oracle_rag.aggregate import AggregateService
from oracle_rag.aggregate.catalog import REFERENCE_CATALOG
from oracle_rag.chat import LLMClient
from oracle_rag.sources.reference import TaskSource


def test_the_catalog_says_what_open_and_null_mean():
    text = REFERENCE_CATALOG.describe()
    done = ", ".join(f"'{v}'" for v in TaskSource.meanings.done)  # from the source's declaration
    assert f"STATUS NOT IN ({done}), every other value included" in text
    assert "NULL = not estimated (not 0): an average is AVG(ESTIMATED_HOURS) over the estimated rows" in text
    assert "COUNT(*) - COUNT(ESTIMATED_HOURS) AS NOT_ESTIMATED" in text


def test_the_query_model_receives_the_meanings_and_the_answer_states_what_was_counted(demo_rag):
    with demo_rag.engine.connect() as conn:
        manager = load_caller(conn, 3)
    with ScriptedLLM() as llm:
        llm.push('{"sql": "SELECT AVG(ESTIMATED_HOURS) AS AVG_HOURS, COUNT(ESTIMATED_HOURS) AS ESTIMATED, '
                 'COUNT(*) - COUNT(ESTIMATED_HOURS) AS NOT_ESTIMATED FROM RAG_V_TASK"}')
        settings = demo_rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0)
        result = AggregateService(demo_rag.engine, settings).ask("average hours per task?", manager,
                                                                  LLMClient(settings).complete)
        system = llm.requests[0].system
    assert "A column's comment says what its values and NULL mean" in system and "NOT_ESTIMATED" in system
    assert result.error is None and result.columns == ["AVG_HOURS", "ESTIMATED", "NOT_ESTIMATED"]
    assert "NOT_ESTIMATED" in result.answer  # the computed part shown first names what was left out
