"""Answer a question for a caller: retrieve in scope, ask the model, cite, remember.

``Chat.answer`` returns a :class:`ChatAnswer`; ``Chat.stream`` returns a
:class:`ChatStream` that yields the answer piece by piece and then a final
event carrying the whole :class:`ChatAnswer`. Both do the same work in the
same order:

1. the caller is required (no anonymous reads) and the question is cleaned
   and length-checked;
2. a conversation id, if given, must be the caller's (else NotFoundError);
3. the caller's top-k chunks are retrieved, the scope applied in SQL;
4. with a language model configured, the prompt is the system rules, the
   last turns within ``history_token_budget`` and the delimited chunks; the
   citations are the answer's anchors that name a retrieved chunk. Without
   one, an extractive answer lists the top records, clearly labelled. With
   no chunk visible, the answer says so without calling the model;
5. the question and answer are stored in the conversation (created on the
   first turn).

For streams, everything up to opening the model's response happens when
``stream()`` is called, so bad input, a foreign conversation or a refusing
endpoint raise there (and become an HTTP status) before any byte is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..caller import Caller, require_caller
from ..errors import InputError, LLMError, RagError
from ..retriever import MODES, RetrievedChunk, Retriever, clean_query
from .citations import Citation, citation_for, select_citations, snippet
from .conversations import ConversationStore, new_conversation_id
from .llm import LLMClient
from .prompt import Turn, build_messages, select_history

DEFAULT_MODE = "hybrid"
EXTRACTIVE_HEADER = "No language model is configured; here are the most relevant records:"
EXTRACTIVE_COUNT = 3
NOTHING_FOUND = ("I could not find any records you are allowed to see that match the question, "
                 "so I cannot answer it.")

Observer = Callable[[str, float, dict[str, str]], None]
_UNSET: Any = object()


@dataclass(frozen=True)
class RetrievalInfo:
    mode: str
    k: int
    latency_ms: float
    chunks: int

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "k": self.k, "latency_ms": round(self.latency_ms, 2), "chunks": self.chunks}


@dataclass(frozen=True)
class ChatAnswer:
    answer: str
    citations: list[Citation]
    conversation_id: str | None
    retrieval: RetrievalInfo
    answerer: str  # "llm" | "extractive" | "none" (no visible chunk matched)

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "citations": [c.to_dict() for c in self.citations],
            "conversation_id": self.conversation_id,
            "retrieval": self.retrieval.to_dict(),
            "answerer": self.answerer,
        }


@dataclass(frozen=True)
class ChatEvent:
    """One stream event: ``token`` (text), then ``done`` (answer) or ``error`` (error)."""

    kind: str
    text: str = ""
    answer: ChatAnswer | None = None
    error: RagError | None = None


def extractive_answer(chunks: list[RetrievedChunk]) -> tuple[str, list[Citation]]:
    """The labelled no-model answer: the top records, each with its anchor and a snippet."""
    top = chunks[:EXTRACTIVE_COUNT]
    lines = [EXTRACTIVE_HEADER, ""]
    for i, c in enumerate(top, 1):
        first, _, rest = c.content.strip().partition("\n")
        head = first if first.startswith(c.anchor) else f"{c.anchor} {first}"
        lines.append(f"{i}. {head}")
        if rest.strip():
            lines.append(f"   {snippet(rest, 200)}")
    return "\n".join(lines), [citation_for(c) for c in top]


@dataclass
class _Prepared:
    caller: Caller
    question: str
    mode: str
    conversation_id: str | None
    new_conversation: bool
    store: bool
    chunks: list[RetrievedChunk]
    retrieval: RetrievalInfo
    history: list[Turn] = field(default_factory=list)


class Chat:
    """The product's answer logic; the web API and the CLI only call it."""

    def __init__(self, rag: Any, llm: LLMClient | None = _UNSET, *, observer: Observer | None = None,
                 settings: Any = None) -> None:
        """``llm`` defaults to the one configured in settings (None: extractive answers);
        ``settings`` defaults to the RagSystem's (chat knobs: top_k, history budget, limits)."""
        self.rag = rag
        self.settings = settings or rag.settings
        self.llm: LLMClient | None = LLMClient.from_settings(self.settings) if llm is _UNSET else llm
        self.store = ConversationStore(rag.engine)
        self.observer = observer

    def _observe(self, what: str, seconds: float, **labels: str) -> None:
        if self.observer is not None:
            self.observer(what, seconds, labels)

    # -- the shared first half -------------------------------------------
    def _prepare(self, question: Any, caller: Any, conversation_id: Any, mode: Any, store: bool) -> _Prepared:
        who = require_caller(caller)
        text = clean_query(question, self.settings.max_question_chars)
        mode = DEFAULT_MODE if mode is None else mode
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        history: list[Turn] = []
        new = conversation_id is None
        if not new:
            turns = self.store.recent_turns(conversation_id, who.employee_id)  # NotFoundError if not theirs
            history = select_history(turns, self.settings.history_token_budget)
        elif store:
            conversation_id = new_conversation_id()
        retriever = Retriever(self.rag.engine, self.settings)
        chunks = retriever.search(text, None, who, mode)
        stats = retriever.last_stats
        assert stats is not None  # set by every search
        info = RetrievalInfo(mode, stats.k, stats.latency_ms, len(chunks))
        self._observe("retrieval", stats.latency_ms / 1000, mode=mode)
        return _Prepared(who, text, mode, conversation_id, new, store or not new, chunks, info, history)

    def _finish(self, prep: _Prepared, text: str, citations: list[Citation], answerer: str) -> ChatAnswer:
        if prep.store and prep.conversation_id is not None:
            self.store.append_turn(prep.conversation_id, prep.caller.employee_id, prep.question, text, citations,
                                   new=prep.new_conversation)
        self._observe("answer", 0.0, answerer=answerer)
        return ChatAnswer(text, citations, prep.conversation_id if prep.store else None, prep.retrieval, answerer)

    def _answerer(self, prep: _Prepared) -> str:
        if not prep.chunks:
            return "none"
        return "llm" if self.llm is not None else "extractive"

    # -- public ----------------------------------------------------------
    def answer(self, question: str, caller: Caller, conversation_id: str | None = None,
               mode: str | None = None, *, store: bool = True) -> ChatAnswer:
        """Answer in one piece. ``store=False`` keeps a first question out of the history."""
        prep = self._prepare(question, caller, conversation_id, mode, store)
        answerer = self._answerer(prep)
        if answerer == "none":
            return self._finish(prep, NOTHING_FOUND, [], answerer)
        if answerer == "extractive":
            text, citations = extractive_answer(prep.chunks)
            return self._finish(prep, text, citations, answerer)
        assert self.llm is not None
        started = time.monotonic()
        try:
            text = self.llm.complete(build_messages(prep.question, prep.chunks, prep.history))
        except LLMError:
            self._observe("llm", time.monotonic() - started, outcome="error")
            raise
        self._observe("llm", time.monotonic() - started, outcome="ok")
        return self._finish(prep, text, select_citations(text, prep.chunks), answerer)

    def stream(self, question: str, caller: Caller, conversation_id: str | None = None,
               mode: str | None = None, *, store: bool = True) -> ChatStream:
        """Prepare and open the answer; iterate the result for ``ChatEvent``s."""
        prep = self._prepare(question, caller, conversation_id, mode, store)
        answerer = self._answerer(prep)
        started = time.monotonic()
        pieces: Iterator[str]
        if answerer == "none":
            pieces = iter([NOTHING_FOUND])
        elif answerer == "extractive":
            text, _ = extractive_answer(prep.chunks)
            pieces = iter([line + "\n" for line in text.split("\n")[:-1]] + [text.split("\n")[-1]])
        else:
            assert self.llm is not None
            try:
                pieces = self.llm.stream(build_messages(prep.question, prep.chunks, prep.history))
            except LLMError:
                self._observe("llm", time.monotonic() - started, outcome="error")
                raise
        return ChatStream(self, prep, answerer, pieces, started)


class ChatStream:
    """Iterable of :class:`ChatEvent`; knows its conversation and retrieval before the first token."""

    def __init__(self, chat: Chat, prep: _Prepared, answerer: str, pieces: Iterator[str], started: float) -> None:
        self._chat = chat
        self._prep = prep
        self._pieces = pieces
        self._started = started
        self.answerer = answerer
        self.conversation_id = prep.conversation_id if prep.store else None
        self.retrieval = prep.retrieval
        self.answer: ChatAnswer | None = None

    def __iter__(self) -> Iterator[ChatEvent]:
        parts: list[str] = []
        try:
            try:
                for piece in self._pieces:
                    parts.append(piece)
                    yield ChatEvent("token", text=piece)
            except LLMError as exc:
                self._chat._observe("llm", time.monotonic() - self._started, outcome="error")
                yield ChatEvent("error", error=exc)
                return
            text = "".join(parts)
            if self.answerer == "llm":
                self._chat._observe("llm", time.monotonic() - self._started, outcome="ok")
                if not text.strip():
                    yield ChatEvent("error", error=LLMError("the language model returned an empty answer",
                                                            http_status=502))
                    return
                citations = select_citations(text, self._prep.chunks)
            elif self.answerer == "extractive":
                citations = extractive_answer(self._prep.chunks)[1]
            else:
                citations = []
            try:
                self.answer = self._chat._finish(self._prep, text, citations, self.answerer)
            except RagError as exc:
                yield ChatEvent("error", error=exc)
                return
            yield ChatEvent("done", answer=self.answer)
        finally:
            close = getattr(self._pieces, "close", None)
            if close is not None:
                close()
