"""OpenTelemetry traces: one span per request, a child span per step of an answer.

Off by default. ``tracing_exporter`` turns it on: ``console`` prints spans on
stderr, one line each (:func:`console_line`: the SDK's default is ~40 lines
of JSON per span, unreadable on a terminal), ``otlp`` sends them over OTLP/HTTP to ``tracing_otlp_endpoint``
(else the standard ``OTEL_EXPORTER_OTLP_*`` variables, else
``http://localhost:4318``). :func:`configure` is called by the long-running
commands (``serve``, ``mcp``); a host application that configures
OpenTelemetry itself gets the same spans under its own request spans.

Only the OpenTelemetry API is a runtime dependency (a few hundred kB, and
it is a no-op until a provider is installed); the SDK and the exporter are
the ``tracing`` extra. Without the API installed every helper here is a
no-op, and asking for an exporter without the SDK is a configuration error
naming the extra.

What a span may carry: step names, timings, counts, modes, ids of records,
the model's name and token usage, the guard's decision. Never a token, a
password, a URL with credentials (they are refused at start-up anyway), and
never the question, the prompt, the SQL text or record content unless
``tracing_capture_content`` is on (then the GenAI ``gen_ai.input.messages``
/ ``gen_ai.output.messages`` and ``db.query.text`` attributes are added).

Oracle sessions are tagged per checkout (:func:`tag_oracle_sessions`):
``MODULE`` = ``oracle-rag``, ``ACTION`` = the current span's name and
``CLIENT_INFO`` = its W3C ``traceparent``, so ``V$SESSION``, ASH and AWR
rows join to the trace. ``CLIENT_IDENTIFIER`` is left alone: the guarded
read-only path sets it to the caller's id and the aggregate views read their
scope from it, so it must never carry anything else.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from oracle_rag.errors import ConfigurationError

log = logging.getLogger("oracle_rag.tracing")

TRACER_NAME = "oracle_rag"
ORACLE_MODULE = "oracle-rag"
ACTION_BYTES = 32  # Oracle's limit for ACTION (MODULE 48, CLIENT_INFO 64)

try:  # the API is light and a declared dependency; tolerate its absence all the same
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - exercised only without the dependency
    trace = None  # type: ignore[assignment]

_provider: Any = None  # set by configure() or use_provider(); else the global provider
_capture = False
_configured = False


# -- set-up ---------------------------------------------------------------------------------
def available() -> bool:
    return trace is not None


def configure(settings: Any) -> bool:
    """Install the configured exporter once per process; True when tracing is on."""
    global _configured, _capture
    _capture = bool(settings.tracing_capture_content)
    kind = (settings.tracing_exporter or "none").lower()
    if kind == "none" or _configured:
        return _configured
    if trace is None:
        raise ConfigurationError(
            "tracing_exporter: the OpenTelemetry API is not installed (pip install 'oracle-rag[tracing]')",
            key="tracing_exporter",
        )
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError:
        raise ConfigurationError(
            "tracing_exporter: the OpenTelemetry SDK is not installed (pip install 'oracle-rag[tracing]')",
            key="tracing_exporter",
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": settings.tracing_service_name}))
    if kind == "console":
        # stdout is MCP's stdio pipe: stderr, one line per span
        provider.add_span_processor(
            SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr, formatter=console_line))
        )
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigurationError(
                "tracing_exporter: otlp needs opentelemetry-exporter-otlp-proto-http "
                "(pip install 'oracle-rag[tracing]')",
                key="tracing_exporter",
            ) from None
        endpoint = settings.tracing_otlp_endpoint
        exporter = OTLPSpanExporter(endpoint=_traces_url(endpoint)) if endpoint else OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _configured = True
    log.info("tracing on: %s exporter", kind)
    return True


def console_line(span: Any) -> str:
    """One finished span as one line: service, name, duration, ids, status, attributes (compact JSON).

    ``oracle-rag 12:00:01.234 span "guarded sql" 3.1 ms CLIENT OK trace=4bf9… span=00f0… parent=53ab…
    {"db.system.name": "sqlite", ...}``: the ids in full, so a line can be found in a collector.
    """
    context, parent = span.get_span_context(), span.parent
    started, ended = span.start_time or 0, span.end_time or 0
    clock = _clock(started)
    status = span.status.status_code.name if span.status is not None else "UNSET"
    service = span.resource.attributes.get("service.name", "") if span.resource is not None else ""
    attrs = json.dumps(dict(span.attributes or {}), ensure_ascii=False, separators=(",", ":"), default=str)
    return (
        f"{service} {clock} span {json.dumps(span.name, ensure_ascii=False)} "
        f"{(ended - started) / 1e6:.1f} ms "
        f"{span.kind.name} {status} trace={context.trace_id:032x} span={context.span_id:016x} "
        f"parent={f'{parent.span_id:016x}' if parent is not None else '-'} {attrs}\n"
    )


def _clock(ns: int) -> str:
    """``HH:MM:SS.mmm`` (UTC) of a span's start, in nanoseconds since the epoch."""
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%H:%M:%S.%f")[:-3]


def _traces_url(endpoint: str) -> str:
    """``http://collector:4318`` → ``http://collector:4318/v1/traces`` (a full path is kept)."""
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"


@contextlib.contextmanager
def use_provider(provider: Any, *, capture_content: bool = False) -> Iterator[None]:
    """Send this package's spans to ``provider`` for a while (tests, embedding hosts)."""
    global _provider, _capture
    saved = _provider, _capture
    _provider, _capture = provider, capture_content
    try:
        yield
    finally:
        _provider, _capture = saved


def capture_content() -> bool:
    return _capture


def tracer() -> Any:
    if trace is None:
        return None
    return (_provider or trace.get_tracer_provider()).get_tracer(TRACER_NAME)


# -- spans ----------------------------------------------------------------------------------
class _NoSpan:
    """What a span helper yields when tracing cannot run: accepts and drops everything."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def is_recording(self) -> bool:
        return False


NO_SPAN = _NoSpan()


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal") -> Iterator[Any]:
    """A child of the current span for one step; errors are recorded on it and re-raised."""
    t = tracer()
    if t is None:
        yield NO_SPAN
        return
    span_kind = SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL
    # The SDK's own exception recording would copy the message (it may quote data): the class only.
    with t.start_as_current_span(
        name,
        kind=span_kind,
        attributes=_clean(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            set_error(current, exc)
            raise


@contextlib.contextmanager
def child_span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """Like :func:`span`, but only inside a recording span (hot paths that also run untraced)."""
    if trace is None or not trace.get_current_span().is_recording():
        yield NO_SPAN
        return
    with span(name, attributes) as current:
        yield current


def start_span(name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "client") -> Any:
    """A span the caller ends itself (a streamed model answer outlives the call that opened it)."""
    t = tracer()
    if t is None:
        return NO_SPAN
    span_kind = SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL
    return t.start_span(name, kind=span_kind, attributes=_clean(attributes or {}))


def end_span(current: Any, error: BaseException | None = None) -> None:
    if current is NO_SPAN or not hasattr(current, "end"):
        return
    if error is not None:
        current.set_status(Status(StatusCode.ERROR, type(error).__name__))
        current.set_attribute("error.type", type(error).__name__)
    current.end()


def set_error(current: Any, error: BaseException) -> None:
    """Mark a span failed with the error's class only (messages may quote data)."""
    if current is NO_SPAN or trace is None:
        return
    current.set_status(Status(StatusCode.ERROR, type(error).__name__))
    current.set_attribute("error.type", type(error).__name__)


# -- GenAI semantic conventions for the model call ------------------------------------------
def llm_attributes(
    model: str, max_tokens: int, server: str | None, port: int | None, operation: str = "chat"
) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
        "server.address": server,
        "server.port": port,
    }


def record_llm_response(current: Any, response: Any) -> None:
    """Response model, id, finish reasons and token usage from an OpenAI-protocol response or chunk."""
    if not current.is_recording():
        return
    model = getattr(response, "model", None)
    if model:
        current.set_attribute("gen_ai.response.model", str(model))
    rid = getattr(response, "id", None)
    if rid:
        current.set_attribute("gen_ai.response.id", str(rid))
    reasons = [
        str(c.finish_reason)
        for c in getattr(response, "choices", None) or []
        if getattr(c, "finish_reason", None)
    ]
    if reasons:
        current.set_attribute("gen_ai.response.finish_reasons", reasons)
    usage = getattr(response, "usage", None)
    if usage is not None:
        if getattr(usage, "prompt_tokens", None) is not None:
            current.set_attribute("gen_ai.usage.input_tokens", int(usage.prompt_tokens))
        if getattr(usage, "completion_tokens", None) is not None:
            current.set_attribute("gen_ai.usage.output_tokens", int(usage.completion_tokens))


def record_messages(
    current: Any, messages: Iterable[Mapping[str, str]] | None = None, output: str | None = None
) -> None:
    """The prompt and the answer, only with ``tracing_capture_content`` (GenAI JSON shape)."""
    if not _capture or not current.is_recording():
        return
    import json

    if messages is not None:
        current.set_attribute(
            "gen_ai.input.messages",
            json.dumps(
                [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages],
                ensure_ascii=False,
            ),
        )
    if output is not None:
        current.set_attribute(
            "gen_ai.output.messages",
            json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": output}]}], ensure_ascii=False
            ),
        )


# -- the request span (WSGI) ----------------------------------------------------------------
class TracingMiddleware:
    """One SERVER span per HTTP request, ended when the response body is closed (so a
    streamed answer is inside it), continuing an incoming W3C ``traceparent``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        t = tracer()
        if t is None:
            return self.app(environ, start_response)
        carrier = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
        method = environ.get("REQUEST_METHOD", "GET")
        current = t.start_span(
            method,
            context=propagate.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "url.scheme": environ.get("wsgi.url_scheme"),
                "url.path": environ.get("PATH_INFO", "/"),
            },
        )
        environ["oracle_rag.span"] = current
        token = otel_context.attach(trace.set_span_in_context(current))

        def traced_start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
            code = int(status.split(" ", 1)[0])
            current.set_attribute("http.response.status_code", code)
            if code >= 500:
                current.set_status(Status(StatusCode.ERROR))
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        try:
            body = self.app(environ, traced_start_response)
        except BaseException as exc:
            end_span(current, exc)
            raise
        finally:
            otel_context.detach(token)
        return _TracedBody(body, current)


class _TracedBody:
    """The response iterable: the request's span is current while it runs, and ends with it."""

    def __init__(self, body: Any, current: Any) -> None:
        self.body = body
        self.current = current

    def __iter__(self) -> Iterator[bytes]:
        iterator = iter(self.body)
        while True:
            token = otel_context.attach(trace.set_span_in_context(self.current))
            try:
                piece = next(iterator)
            except StopIteration:
                return
            finally:
                otel_context.detach(token)
            yield piece

    def close(self) -> None:
        token = otel_context.attach(trace.set_span_in_context(self.current))
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            otel_context.detach(token)
            self.current.end()


def name_request_span(environ: Mapping[str, Any], method: str, route: str | None) -> None:
    """Name the request span by its route template (``POST /api/chat``), not the raw path."""
    current = environ.get("oracle_rag.span")
    if current is not None and route:
        current.update_name(f"{method} {route}")
        current.set_attribute("http.route", route)


def instrument_flask(app: Any) -> None:
    """Wrap a Flask app in :class:`TracingMiddleware` and name spans by route."""
    if trace is None:
        return
    from flask import request

    app.wsgi_app = TracingMiddleware(app.wsgi_app)

    @app.before_request
    def _name_span() -> None:
        rule = request.url_rule
        name_request_span(request.environ, request.method, rule.rule if rule is not None else None)


# -- Oracle end-to-end attributes -----------------------------------------------------------
def tag_oracle_sessions(sa_engine: Any) -> None:
    """Set MODULE/ACTION/CLIENT_INFO on every checkout from this pool (python-oracledb only)."""
    import sqlalchemy as sa

    sa.event.listen(sa_engine, "checkout", _on_checkout)


def session_tags() -> tuple[str, str, str]:
    """(module, action, client_info) for the current span; empty action and info outside one."""
    if trace is None:
        return ORACLE_MODULE, "", ""
    current = trace.get_current_span()
    ctx = current.get_span_context()
    if not ctx.is_valid:
        return ORACLE_MODULE, "", ""
    name = getattr(current, "name", "") or ""
    action = name.encode("utf-8")[:ACTION_BYTES].decode("utf-8", "ignore")
    flags = f"{int(ctx.trace_flags):02x}"
    return ORACLE_MODULE, action, f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{flags}"


def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    connection = getattr(dbapi_connection, "driver_connection", dbapi_connection)
    if not isinstance(getattr(type(connection), "clientinfo", None), property):
        return  # not a python-oracledb connection
    module, action, info = session_tags()
    try:  # piggybacked on the next round trip; no extra one
        connection.module = module
        connection.action = action
        connection.clientinfo = info
    except Exception as exc:  # monitoring must never fail a query
        log.debug("could not set Oracle session tags: %s", type(exc).__name__)
