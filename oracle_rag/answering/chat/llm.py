"""Any OpenAI-compatible chat-completions endpoint, through the ``openai`` SDK.

OpenAI, OCI Generative AI's OpenAI-compatible endpoint, vLLM, Ollama and
llama.cpp's server all speak this protocol; ``llm_url`` is the base URL
(``…/v1``), ``llm_model`` the model name, and the key comes from
``llm_api_key`` or the environment variable named by ``llm_api_key_env``.

Time is bounded: ``llm_timeout_s`` is the budget for getting an answer,
retries included. The SDK's own retries are off (they would multiply the
budget); instead 429, 5xx and connection failures are retried here with
exponential backoff and jitter (``Retry-After`` honoured) while
``llm_max_retries`` and the budget allow, and each attempt gets only the
time left. A timeout becomes ``LLMError`` with ``http_status=504``, any
other failure ``http_status=502``; messages name the status and the
attempts, never the URL or the key. The key is handed to the SDK and is
never logged or formatted into a message.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

from oracle_rag import tracing
from oracle_rag.config import Settings
from oracle_rag.errors import ConfigurationError, LLMError
from oracle_rag.logsafety import protect_library_loggers

log = logging.getLogger("oracle_rag.answering.chat.llm")

T = TypeVar("T")
BACKOFF_BASE_S = 0.25
BACKOFF_CAP_S = 4.0


def is_timeout(exc: BaseException) -> bool:
    """True for the SDK's timeout error and the HTTP client's (raised while streaming)."""
    return any("Timeout" in cls.__name__ for cls in type(exc).__mro__)


class _Failure(Exception):
    """One failed attempt, classified."""

    def __init__(
        self, message: str, *, retryable: bool, status: int, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


def _classify(exc: Exception) -> _Failure:
    import openai

    if is_timeout(exc):
        return _Failure("the language model did not answer in time", retryable=True, status=504)
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        retry_after = None
        raw = exc.response.headers.get("retry-after") if exc.response is not None else None
        if raw:
            try:
                retry_after = max(0.0, float(raw))
            except ValueError:
                retry_after = None
        retryable = code == 429 or code >= 500
        what = "is rate limiting requests" if code == 429 else f"returned HTTP {code}"
        return _Failure(
            f"the language model endpoint {what}", retryable=retryable, status=502, retry_after=retry_after
        )
    if isinstance(exc, openai.APIConnectionError):
        return _Failure("the language model endpoint could not be reached", retryable=True, status=502)
    if isinstance(exc, openai.OpenAIError):
        return _Failure(f"the language model call failed ({type(exc).__name__})", retryable=False, status=502)
    raise exc


class LLMClient:
    """A configured endpoint; thread-safe (one SDK client, one connection pool)."""

    def __init__(self, settings: Settings, *, sleep: Callable[[float], None] = time.sleep) -> None:
        if not settings.llm_url:
            raise ConfigurationError("llm_url: not set (no language model configured)", key="llm_url")
        if not settings.llm_model:
            raise ConfigurationError("llm_model: required when llm_url is set", key="llm_model")
        import openai

        self.model = settings.llm_model
        self.max_tokens = settings.llm_max_tokens
        endpoint = urlsplit(settings.llm_url)
        self._span_attributes = tracing.llm_attributes(
            self.model, self.max_tokens, endpoint.hostname, endpoint.port
        )
        self.max_retries = settings.llm_max_retries
        self.budget_s = settings.llm_timeout_s
        self._sleep = sleep
        # Local servers (Ollama, llama.cpp, vLLM) accept any key; the SDK requires one.
        protect_library_loggers()  # httpx logs each request URL at INFO; keep queries and user-info out
        self._not_given = openai.omit  # a parameter left to the server's default
        self._client = openai.OpenAI(
            base_url=settings.llm_url,
            api_key=settings.llm_key() or "unused",
            timeout=settings.llm_timeout_s,
            max_retries=0,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient | None:
        """A client when ``llm_url`` is configured, else None (the extractive answerer is used)."""
        return cls(settings) if settings.llm_url else None

    @staticmethod
    def describe(settings: Settings) -> str:
        """One start-up line naming the active answerer, for `serve` and `demo`.

        Without it a new user cannot tell that answers are extractive because
        no model is configured. Shows the model and the endpoint's host:port
        only (never a path, a query or the key).
        """
        if not settings.llm_url:
            return (
                "answerer: extractive (no language model configured; set ORACLE_RAG_LLM_URL and "
                "ORACLE_RAG_LLM_MODEL for an OpenAI-compatible endpoint, see README)"
            )
        from urllib.parse import urlsplit

        where = urlsplit(settings.llm_url)
        host = where.hostname or "?"
        endpoint = f"{host}:{where.port}" if where.port else host
        return f"answerer: llm (model {settings.llm_model} at {endpoint})"

    def __repr__(self) -> str:  # never shows the key or the URL
        return f"LLMClient(model={self.model!r})"

    # -- calls -----------------------------------------------------------
    def complete(self, messages: list[dict[str, str]], *, temperature: float | None = None) -> str:
        """The whole answer text (``temperature``: the server's default when None)."""

        with tracing.span(f"chat {self.model}", self._span_attributes, kind="client") as current:
            tracing.record_messages(current, messages)

            def call(timeout: float) -> str:
                response = self._client.chat.completions.create(
                    model=self.model,
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=self.max_tokens,
                    timeout=timeout,
                    temperature=self._not_given if temperature is None else temperature,
                )
                tracing.record_llm_response(current, response)
                if not response.choices:
                    raise LLMError("the language model returned no choices", http_status=502)
                return response.choices[0].message.content or ""

            text = self._with_retries(call)
            tracing.record_messages(current, output=text)
            if not text.strip():
                raise LLMError("the language model returned an empty answer", http_status=502)
            return text

    def complete_query(self, messages: list[dict[str, str]]) -> str:
        """A query (text-to-SQL): temperature 0, the model's most likely query, the same one each time
        (a local server's default, 0.8 in llama.cpp, sampled a different query on each run)."""
        return self.complete(messages, temperature=0.0)

    def stream(self, messages: list[dict[str, str]]) -> Iterator[str]:
        """Open a streamed completion (retrying until the response starts) and yield text pieces.

        Opening happens now, so an endpoint that refuses or times out raises
        here, before anything is sent to the client. A failure after the first
        piece raises ``LLMError`` from the iterator; it is not retried, because
        the pieces already delivered cannot be taken back.
        """
        state: dict[str, float] = {}

        def call(timeout: float) -> Any:
            state["timeout"] = timeout
            return self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=self.max_tokens,
                timeout=timeout,
                stream=True,
            )

        current = tracing.start_span(
            f"chat {self.model}", {**self._span_attributes, "gen_ai.request.stream": True}
        )
        tracing.record_messages(current, messages)
        try:
            opened = self._with_retries(call)
        except BaseException as exc:
            tracing.end_span(current, exc)
            raise
        return self._pieces(opened, current)

    def _pieces(self, stream: Any, current: Any = tracing.NO_SPAN) -> Iterator[str]:
        """The streamed text; the model call's span ends with the stream (it was opened by ``stream``)."""
        error: BaseException | None = None
        parts: list[str] = []
        try:
            for chunk in stream:
                tracing.record_llm_response(current, chunk)
                if not chunk.choices:
                    continue
                piece = chunk.choices[0].delta.content
                if piece:
                    parts.append(piece)
                    yield piece
        except LLMError as exc:
            error = exc
            raise
        except Exception as exc:
            failure = _classify(exc)
            error = LLMError(f"{failure} while streaming the answer", http_status=failure.status)
            raise error from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            tracing.record_messages(current, output="".join(parts))
            tracing.end_span(current, error)

    def _with_retries(self, call: Callable[[float], T]) -> T:
        deadline = time.monotonic() + self.budget_s
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LLMError(
                    f"the language model did not answer within {self.budget_s:g} s (llm_timeout_s)",
                    http_status=504,
                    attempts=attempt - 1,
                )
            started = time.monotonic()
            try:
                return call(remaining)
            except LLMError:
                raise
            except Exception as exc:
                failure = _classify(exc)
            log.warning(
                "language model attempt %d failed after %.2f s: %s",
                attempt,
                time.monotonic() - started,
                failure,
            )
            if failure.status == 504:
                message = f"the language model did not answer within {self.budget_s:g} s (llm_timeout_s)"
            else:
                message = f"{failure} (after {attempt} attempt{'s' if attempt > 1 else ''})"
            if not failure.retryable or attempt > self.max_retries:
                raise LLMError(message, http_status=failure.status, attempts=attempt)
            delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1)) * (1 + random.random() / 4)
            if failure.retry_after is not None:
                delay = max(delay, failure.retry_after)
            if time.monotonic() + delay >= deadline:
                raise LLMError(message, http_status=failure.status, attempts=attempt)
            self._sleep(delay)
