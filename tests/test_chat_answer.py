"""Chat.answer / Chat.stream on the indexed demo database, with and without a language model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chat_helpers import DEV_A, DEV_B, MANAGER, task_chunks_of, visible_to
from llm_server import Reply, ScriptedLLM

from oracle_rag.answering.chat import Chat, LLMClient
from oracle_rag.answering.chat.answer import EXTRACTIVE_HEADERS, NOTHING_FOUND, QUOTED_HEADERS
from oracle_rag.callers.access import load_caller
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import AccessError, InputError, LLMError, NotFoundError


def caller(rag, employee_id: int) -> Caller:
    with rag.engine.connect() as conn:
        return load_caller(conn, employee_id)


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def llm_chat(rag, server: ScriptedLLM, **overrides) -> Chat:
    values = {"llm_url": server.url, "llm_model": "m", "llm_timeout_s": 10.0, **overrides}
    settings = rag.settings.with_overrides(**values)
    return Chat(rag, LLMClient(settings, sleep=lambda s: None), settings=settings)


def test_extractive_answer_without_a_model(demo_rag) -> None:
    dev = caller(demo_rag, DEV_A)
    own = task_chunks_of(demo_rag, DEV_A)[0]
    result = Chat(demo_rag).answer(own.title, dev)
    assert result.answerer == "extractive"
    assert result.answer.startswith(EXTRACTIVE_HEADERS)
    assert 1 <= len(result.citations) <= 3
    assert all(c.anchor in result.answer for c in result.citations)
    assert all(visible_to(demo_rag, DEV_A, c.source_type, c.source_id) for c in result.citations)
    assert result.retrieval.mode == "hybrid" and result.retrieval.k == demo_rag.settings.top_k
    assert result.conversation_id is not None


def test_nothing_about_the_topic_says_so_and_shows_the_closest_records(demo_rag, llm: ScriptedLLM) -> None:
    """Records come back for any question (the most similar exist); when none of the first holds half of
    the topic's words, the answer says nothing says so, shows the closest ones under that line, and no
    model is asked to make something of them. A follow-up in a conversation is not judged by its words."""
    dev = caller(demo_rag, DEV_A)
    for chat in (Chat(demo_rag), llm_chat(demo_rag, llm)):
        result = chat.answer("why did the aquarium pump in the lobby flood the basement?", dev)
        assert result.answerer == "extractive" and result.answer.startswith("Nothing I can see says that")
        assert "\u201caquarium pump lobby flood basement\u201d" in result.answer and result.citations
        assert llm.requests == []
    es = Chat(demo_rag).answer("¿por qué se inundó el sótano por la bomba del acuario?", dev, store=False)
    assert es.answer.startswith("Nada de lo que puedo ver lo dice")
    own = task_chunks_of(demo_rag, DEV_A)[0]
    assert Chat(demo_rag).answer(own.title, dev).answer.startswith(EXTRACTIVE_HEADERS)  # about it: answered


def test_nothing_visible_means_no_answer_and_no_model_call(demo_rag, llm: ScriptedLLM) -> None:
    result = llm_chat(demo_rag, llm).answer("zzqxj vvkpw", caller(demo_rag, DEV_A), mode="keyword")
    assert (result.answerer, result.answer, result.citations) == ("none", NOTHING_FOUND, [])
    assert llm.requests == []


def test_input_and_caller_are_required(demo_rag) -> None:
    chat = Chat(demo_rag)
    with pytest.raises(AccessError):
        chat.answer("anything", None)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        chat.answer("   ", caller(demo_rag, DEV_A))
    with pytest.raises(InputError, match="limit"):
        chat.answer("x" * (demo_rag.settings.max_question_chars + 1), caller(demo_rag, DEV_A))
    with pytest.raises(InputError, match="mode"):
        chat.answer("tasks", caller(demo_rag, DEV_A), mode="magic")


def test_llm_answer_cites_only_retrieved_chunks(demo_rag, llm: ScriptedLLM) -> None:
    dev = caller(demo_rag, DEV_A)
    own = task_chunks_of(demo_rag, DEV_A)[0]
    foreign = task_chunks_of(demo_rag, DEV_B)[0]
    llm.push(f"It is [TASK #{own.task_id}]. See also [TASK #{foreign.task_id}] and [TASK #999999].")
    result = llm_chat(demo_rag, llm).answer(own.title, dev)
    assert result.answerer == "llm"
    # the sentence naming records the model was not given is removed whole, not patched
    prose, _, quoted = result.answer.partition("\n\n")
    assert prose == f"It is [TASK #{own.task_id}]." and result.checked == {
        "sentences": 2,
        "removed": 1,
    }
    # under the model's prose, the record it cites in its own words (not the removed sentence's records)
    assert quoted.startswith(QUOTED_HEADERS) and f"[TASK #{own.task_id}]" in quoted
    assert f"#{foreign.task_id}]" not in quoted and "999999" not in quoted
    assert [(c.source_type, c.source_id) for c in result.citations] == [("TASK", str(own.task_id))]
    prompt = llm.requests[0].last_user
    assert f'<chunk id="TASK #{own.task_id}">' in prompt
    assert foreign.content not in prompt  # the model never saw the other developer's task


def test_conversation_history_reaches_the_model_within_budget(demo_rag, llm: ScriptedLLM) -> None:
    dev = caller(demo_rag, DEV_A)
    chat = llm_chat(demo_rag, llm, history_token_budget=1500)
    llm.push("first answer", "second answer", "third answer")
    asked = f"what is {task_chunks_of(demo_rag, DEV_A)[0].title} about?"  # one of theirs: the model is asked
    first = chat.answer(asked, dev)
    second = chat.answer("and what about invoices?", dev, first.conversation_id)
    assert second.conversation_id == first.conversation_id
    roles = [m["role"] for m in llm.requests[1].messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert llm.requests[1].messages[1]["content"] == asked
    # an answer citing nothing is followed by the extractive one, saying so
    assert llm.requests[1].messages[2]["content"].startswith("first answer\n\nThe language model's answer")
    # a budget that holds one pair keeps only the newest one
    from oracle_rag.answering.chat.prompt import estimate_tokens

    newest = estimate_tokens("and what about invoices?") + estimate_tokens(second.answer)
    small = llm_chat(demo_rag, llm, history_token_budget=newest)
    small.answer("and the third?", dev, first.conversation_id)
    history = llm.requests[2].messages[1:-1]
    assert [m["content"] for m in history] == ["and what about invoices?", second.answer]


def test_a_conversation_belongs_to_its_caller(demo_rag) -> None:
    chat = Chat(demo_rag)
    mine = chat.answer("payment retry logic", caller(demo_rag, DEV_A))
    for other in (DEV_B, MANAGER):
        with pytest.raises(NotFoundError):
            chat.answer("follow-up", caller(demo_rag, other), mine.conversation_id)
    with pytest.raises(NotFoundError):
        chat.answer("follow-up", caller(demo_rag, DEV_A), "0" * 32)
    with pytest.raises(NotFoundError):
        chat.answer("follow-up", caller(demo_rag, DEV_A), "../../etc")


def test_store_false_keeps_no_history(demo_rag) -> None:
    dev = caller(demo_rag, DEV_B)
    result = Chat(demo_rag).answer("dark mode", dev, store=False)
    assert result.conversation_id is None
    with demo_rag.engine.connect() as conn:
        from oracle_rag.answering.chat.conversations import ConversationStore

        assert ConversationStore(demo_rag.engine).list_for(conn, DEV_B) == []


def test_stream_extractive_events(demo_rag) -> None:
    stream = Chat(demo_rag).stream("Kubernetes liveness probes", caller(demo_rag, MANAGER))
    assert stream.conversation_id is not None and stream.retrieval.chunks > 0
    events = list(stream)
    assert [e.kind for e in events[:-1]] == ["token"] * (len(events) - 1) and events[-1].kind == "done"
    done = events[-1].answer
    assert done is not None and "".join(e.text for e in events[:-1]) == done.answer
    assert done.answer.startswith(EXTRACTIVE_HEADERS) and done.citations


def test_stream_llm_pieces_then_done(demo_rag, llm: ScriptedLLM) -> None:
    own = task_chunks_of(demo_rag, DEV_A)[0]
    llm.push(Reply(text="x", pieces=["Answer: ", f"[TASK #{own.task_id}]", ". Also ", "[TASK #424242", "]."]))
    events = list(llm_chat(demo_rag, llm).stream(own.title, caller(demo_rag, DEV_A)))
    # A sentence is shown once it is complete and checked: the one naming a task id the caller
    # may not see (here: none such exists) is removed whole, before any of it is sent.
    tokens = [e.text for e in events if e.kind == "token"]
    assert tokens[0] == f"Answer: [TASK #{own.task_id}]." and len(tokens) == 2
    assert (
        tokens[1].lstrip().startswith(QUOTED_HEADERS) and "424242" not in tokens[1]
    )  # the cited record's words
    done = events[-1].answer
    assert done is not None and [c.source_id for c in done.citations] == [str(own.task_id)]
    assert "424242" not in done.answer and done.checked == {"sentences": 2, "removed": 1}


def test_stream_failure_mid_answer_is_an_event_and_stores_nothing(demo_rag, llm: ScriptedLLM) -> None:
    llm.push(Reply(text="x", pieces=["A whole sentence. ", "partial"], stall_after_pieces=30))
    chat = llm_chat(demo_rag, llm, llm_timeout_s=0.5)
    stream = chat.stream("offline sync conflicts", caller(demo_rag, DEV_B))
    events = list(stream)
    assert [e.kind for e in events] == ["token", "error"]
    assert isinstance(events[-1].error, LLMError) and events[-1].error.details["http_status"] == 504
    with demo_rag.engine.connect() as conn:
        from oracle_rag.answering.chat.conversations import ConversationStore

        assert ConversationStore(demo_rag.engine).list_for(conn, DEV_B) == []


def test_stream_refused_before_start_raises(demo_rag, llm: ScriptedLLM) -> None:
    llm.push(Reply(status=500), Reply(status=500), Reply(status=500))
    with pytest.raises(LLMError):
        llm_chat(demo_rag, llm, llm_max_retries=2).stream("audit log", caller(demo_rag, DEV_A))
    assert len(llm.requests) == 3
