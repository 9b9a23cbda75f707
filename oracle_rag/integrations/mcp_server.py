"""``oracle-rag mcp``: a Model Context Protocol server, caller-scoped like the API.

Agents that speak MCP get three tools: ``search`` (the retriever), ``get_record``
(the citation detail view) and ``ask`` (the chat's answer, with the read-only
SQL and rows when the question was an aggregate). Each tool's input is a JSON
schema the SDK derives from the signature (bounds included, so a bad ``k`` is
refused naming ``k``), and each returns structured output with its own schema.

Identity comes only from the product's hashed API tokens or, when ``[auth]``
declares an issuer, the host's JWTs (oracle_rag/callers/identity.py), never from a
tool argument:

- streamable HTTP (``/mcp``): ``Authorization: Bearer <token>`` on every
  request, checked by the SDK's bearer middleware through
  :class:`ApiTokenVerifier`; without a valid token the answer is the
  protocol's ``401`` with ``WWW-Authenticate: Bearer error="invalid_token"``
  (and, with an issuer, ``resource_metadata=`` pointing at the OAuth
  protected resource metadata the SDK serves).
  Sessions belong to the principal that opened them (the SDK compares it).
- stdio: the token is read from the environment variable named by
  ``mcp_token_env`` (default ``ORACLE_RAG_MCP_TOKEN``) and verified again on
  every request, so revoking it takes effect mid-session. Without a valid
  one every request past the version handshake is refused with a JSON-RPC
  error whose data is ``{"status": 401, "error": "invalid_token"}``, the
  HTTP refusal spelt for a pipe.

Scope is the engine's: the tools call the same retriever, detail view and
chat as the API with the verified :class:`~oracle_rag.callers.caller.Caller`, so a
developer's ``get_record`` of another's task gets the API's own
``record not found``. Database and model calls are blocking; they run on
worker threads so one slow answer never stalls the event loop.
"""

import logging
import os
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Literal, cast

import anyio
import sqlalchemy as sa
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from oracle_rag import tracing
from oracle_rag.answering.chat import Chat
from oracle_rag.answering.chat.chunks import chunk_detail
from oracle_rag.answering.chat.citations import snippet
from oracle_rag.callers.audit import ENTRY_POINT, audit_for, record_keys
from oracle_rag.callers.caller import Caller
from oracle_rag.callers.identity import caller_for_bearer, looks_like_jwt
from oracle_rag.callers.tokens import hash_token
from oracle_rag.config import load_settings
from oracle_rag.engines import Filters
from oracle_rag.errors import AccessError, ConfigurationError, RagError, wrap_driver_error
from oracle_rag.search.results import MAX_K
from oracle_rag.search.retriever import Retriever
from oracle_rag.sources.reference_facets import PROJECT, SPRINT
from oracle_rag.system import RagSystem
from oracle_rag.web import create_app

log = logging.getLogger("oracle_rag.integrations.mcp")

SERVER_NAME = "oracle-rag"
MCP_PATH = "/mcp"
UNAUTHENTICATED = {"status": 401, "error": "invalid_token"}
HANDSHAKE = ("initialize", "server/discover", "ping")

Identity = Callable[[], Awaitable[Caller]]


# -- tool schemas -------------------------------------------------------------------
# An id the databases can store (a signed 64-bit integer): a larger one is a validation error, not a
# driver's OverflowError.
ID_MIN, ID_MAX = -(2**63), 2**63 - 1


class SearchFilters(BaseModel):
    """Narrowing applied in SQL beside the caller's scope (never widening it)."""

    model_config = ConfigDict(extra="forbid")
    project_id: int | None = Field(
        default=None, ge=ID_MIN, le=ID_MAX, description="Only records of this project."
    )
    sprint_id: int | None = Field(
        default=None, ge=ID_MIN, le=ID_MAX, description="Only records of this sprint."
    )
    source_types: list[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]] | None = Field(
        default=None, description='Only these record types, e.g. ["TASK", "DOCUMENT"].'
    )


class SearchHit(BaseModel):
    anchor: str = Field(description="How answers cite this record: [TYPE #id].")
    source_type: str
    source_id: str
    rank: int
    score: float
    legs: list[str] = Field(description="Which search legs found it (semantic, keyword).")
    content: str
    project_id: int | None = None
    sprint_id: int | None = None


class SearchResult(BaseModel):
    mode: str
    k: int
    hits: list[SearchHit]


class Record(BaseModel):
    source_type: str
    source_id: str
    anchor: str
    content: str
    project_id: int | None = None
    sprint_id: int | None = None
    updated_at: str | None = None


class CitationOut(BaseModel):
    anchor: str
    source_type: str
    source_id: str
    snippet: str


class AskResult(BaseModel):
    answer: str = Field(description="The answer text; its [TYPE #id] anchors are the citations.")
    citations: list[CitationOut]
    answerer: str = Field(description="llm, extractive, aggregate or none (nothing visible matched).")
    route: str = Field(description="retrieval, aggregation or both.")
    sql: str | None = Field(
        default=None, description="The read-only SQL that ran, for an aggregate question."
    )
    columns: list[str] = Field(default_factory=list)
    rows: list[list[Any]] = Field(default_factory=list)
    truncated: bool = False
    sql_error: str | None = None
    checked: dict[str, Any] | None = Field(
        default=None,
        description="With a model: its sentences checked against the computed result and how many "
        'were removed ({"sentences": N, "removed": M}).',
    )


Mode = Literal["semantic", "keyword", "hybrid"]
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


# -- identity -------------------------------------------------------------------------
class ApiTokenVerifier:
    """The SDK's ``TokenVerifier`` over our hashed API tokens and, with ``[auth]``, the host's JWTs.

    The resulting ``AccessToken`` carries the token's SHA-256, never the token,
    and the caller's id, roles, groups and name, so the tools need no second
    lookup; a JWT's caller also carries the issuer, which the SDK makes part
    of the principal a session belongs to.
    """

    def __init__(self, rag: RagSystem) -> None:
        self.rag = rag

    def lookup(self, token: str) -> Caller | None:
        with self.rag.engine.connect() as conn:
            return caller_for_bearer(conn, self.rag.engine, token)

    async def verify_token(self, token: str) -> AccessToken | None:
        caller = await anyio.to_thread.run_sync(self.lookup, token)
        if caller is None:
            return None
        claims: dict[str, Any] = {
            "roles": list(caller.roles),
            "groups": list(caller.groups),
            "see_all_roles": list(caller.see_all_roles),
            "name": caller.name,
        }
        if looks_like_jwt(token):
            claims["iss"] = self.rag.settings.auth_issuer
        return AccessToken(
            token=hash_token(token),
            client_id=f"employee-{caller.employee_id}",
            scopes=[],
            subject=str(caller.employee_id),
            claims=claims,
        )


def _refused(detail: str) -> MCPError:
    return MCPError(INVALID_REQUEST, f"authentication required: {detail}", UNAUTHENTICATED)


async def http_identity() -> Caller:
    """The caller the bearer middleware verified for this HTTP request."""
    token = get_access_token()
    if token is None or token.subject is None or not token.claims:
        raise _refused("send Authorization: Bearer <API token>")
    claims = token.claims
    return Caller(
        int(token.subject),
        tuple(claims.get("roles", ())),
        tuple(claims.get("groups", ())),
        str(claims.get("name", "")),
        see_all_roles=tuple(claims.get("see_all_roles", ())),
    )


class StdioIdentity:
    """The caller behind the token in ``$<mcp_token_env>``, verified on every request."""

    def __init__(self, rag: RagSystem, env_var: str, environ: Any = None) -> None:
        self.verifier = ApiTokenVerifier(rag)
        self.env_var = env_var
        self.environ = os.environ if environ is None else environ

    def resolve(self) -> Caller:
        token = self.environ.get(self.env_var)
        if not token:
            raise _refused(f"set {self.env_var} to an API token (oracle-rag token create)")
        caller = self.verifier.lookup(token)
        if caller is None:
            raise _refused(f"the token in {self.env_var} is not valid (unknown, revoked or expired)")
        return caller

    async def __call__(self) -> Caller:
        return await anyio.to_thread.run_sync(self.resolve)

    async def middleware(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        """Refuse every request without a valid token, past the version handshake.

        The handshake (``initialize``, ``server/discover``) answers, so a client
        connects and then sees the refusal on its first real request; refusing
        the handshake itself makes clients retry another protocol version and
        report a version error instead of the missing token.
        """
        if ctx.request_id is not None and ctx.method not in HANDSHAKE:
            await self()
        return await call_next(ctx)


# -- the tools --------------------------------------------------------------------------
def _tool_error(exc: RagError) -> ToolError:
    """The library's own message (the API's text), without the code prefix."""
    return ToolError(exc.message)


async def _in_thread(fn: Callable[[], Any]) -> Any:
    """Run a tool's work off the event loop; what fails becomes a tool error, never a crash with a traceback.

    A driver's exception that reaches here (SQLAlchemy's, or the binding's
    OverflowError for a number it cannot bind) is reported as the API does:
    the step and the driver's class and code, without the driver's text.
    """
    try:
        return await anyio.to_thread.run_sync(fn)
    except AccessError as exc:
        raise _refused(exc.message) from None
    except RagError as exc:
        raise _tool_error(exc) from None
    except (sa.exc.SQLAlchemyError, OverflowError) as exc:
        wrapped = wrap_driver_error(exc, "reading the records")
        log.warning("MCP tool: %s", wrapped.message)
        raise _tool_error(wrapped) from None


def build_server(
    rag: RagSystem,
    identity: Identity,
    *,
    chat: Chat | None = None,
    auth: AuthSettings | None = None,
    token_verifier: ApiTokenVerifier | None = None,
    middleware: list[Any] | None = None,
) -> MCPServer:
    """An MCP server whose three tools run as the caller ``identity()`` returns."""
    answers = chat if chat is not None else Chat(rag)
    server: MCPServer = MCPServer(
        SERVER_NAME,
        title="oracle-rag",
        instructions=(
            "Search and read the records you may see (scope is enforced by the database), and ask "
            "questions answered with citations [TYPE #id]. get_record opens a cited record."
        ),
        auth=auth,
        token_verifier=token_verifier,
        middleware=middleware,
        log_level="WARNING",
    )

    @server.tool(annotations=READ_ONLY)
    async def search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=rag.settings.max_question_chars,
                description="What to look for, in natural language or keywords.",
            ),
        ],
        mode: Annotated[
            Mode, Field(description="semantic (meaning), keyword (words) or hybrid (both, fused).")
        ] = "hybrid",
        k: Annotated[
            int, Field(ge=1, le=MAX_K, description="How many records to return.")
        ] = rag.settings.top_k,
        filters: SearchFilters | None = None,
    ) -> SearchResult:
        """The records you may see that best match the query, best first."""
        who = await identity()
        f = filters or SearchFilters()
        narrowing = Filters(  # the reference sources' indexed facets, compared through their columns
            facets={PROJECT.name: f.project_id, SPRINT.name: f.sprint_id},
            source_types=tuple(t.upper() for t in f.source_types or ()),
        )

        def run() -> SearchResult:
            ENTRY_POINT.set("mcp")
            chunks = Retriever(rag.engine, rag.settings).search(query, k, who, mode, narrowing)
            audit_for(rag.engine).record(who.employee_id, "search", record_keys(chunks), question=query)
            return SearchResult(
                mode=mode,
                k=k,
                hits=[
                    SearchHit(
                        anchor=c.anchor,
                        source_type=c.source_type,
                        source_id=c.source_id,
                        rank=c.rank,
                        score=c.score,
                        legs=list(c.legs),
                        content=c.content,
                        **c.indexed,
                    )
                    for c in chunks
                ],
            )

        result: SearchResult = await _in_thread(run)
        return result

    @server.tool(annotations=READ_ONLY)
    async def get_record(
        type: Annotated[str, Field(min_length=1, max_length=64, description="The record type, e.g. TASK.")],
        id: Annotated[str, Field(min_length=1, max_length=256, description="The record id, e.g. 42.")],
    ) -> Record:
        """One record you may see, by the type and id of its anchor [TYPE #id]."""
        who = await identity()

        def run() -> Record:
            ENTRY_POINT.set("mcp")
            with rag.engine.connect() as conn:
                detail = chunk_detail(conn, rag.engine, who, type, id)
            audit_for(rag.engine).record(who.employee_id, "record", [(detail.source_type, detail.source_id)])
            return Record(**detail.to_dict())

        result: Record = await _in_thread(run)
        return result

    @server.tool(annotations=READ_ONLY)
    async def ask(
        question: Annotated[
            str,
            Field(
                min_length=1,
                max_length=rag.settings.max_question_chars,
                description="A question about the records you may see.",
            ),
        ],
        mode: Annotated[Mode, Field(description="Retrieval mode for the answer's records.")] = "hybrid",
    ) -> AskResult:
        """An answer from the records you may see, with citations; for counts and sums, the read-only SQL
        that ran and its rows."""
        who = await identity()

        def run() -> AskResult:
            ENTRY_POINT.set("mcp")
            answer = answers.answer(question, who, None, mode, store=False)
            agg = answer.aggregate
            return AskResult(
                answer=answer.answer,
                answerer=answer.answerer,
                route=answer.route,
                citations=[
                    CitationOut(
                        anchor=c.anchor,
                        source_type=c.source_type,
                        source_id=c.source_id,
                        snippet=snippet(c.snippet),
                    )
                    for c in answer.citations
                ],
                sql=agg.sql if agg else None,
                columns=list(agg.columns) if agg else [],
                rows=[list(r) for r in agg.rows] if agg else [],
                truncated=bool(agg and agg.truncated),
                sql_error=agg.error if agg else None,
                checked=answer.checked,
            )

        result: AskResult = await _in_thread(run)
        return result

    return server


# -- transports ----------------------------------------------------------------------------
def stdio_server(rag: RagSystem, *, environ: Any = None, chat: Chat | None = None) -> MCPServer:
    identity = StdioIdentity(rag, rag.settings.mcp_token_env, environ)
    return build_server(rag, identity, chat=chat, middleware=[identity.middleware])


def run_stdio(rag: RagSystem) -> None:
    """Serve MCP on stdin/stdout until the client closes the pipe."""
    tracing.configure(rag.settings)
    server = stdio_server(rag)
    try:
        StdioIdentity(rag, rag.settings.mcp_token_env).resolve()
    except MCPError as exc:  # say it once where a person sees it; requests are refused all the same
        log.warning("%s", exc.message)
    server.run("stdio")


def auth_settings(rag: RagSystem, resource_url: str | None = None) -> AuthSettings:
    """The SDK's resource-server settings: with an ``[auth]`` issuer, the OAuth protected resource metadata.

    The MCP specification makes an HTTP MCP server an OAuth 2.1 resource
    server: with an issuer and the server's URL (``[auth] resource``, else
    ``resource_url``, the address it listens on) the SDK serves
    ``/.well-known/oauth-protected-resource/mcp`` naming the issuer as the
    authorization server, and its 401s point there (``WWW-Authenticate:
    ... resource_metadata=``). The token's audience is checked by our
    verifier (``[auth] audience``), so the SDK's own resource check is off.
    Without an issuer the SDK still wants one for metadata it never serves.
    """
    settings = rag.settings
    resource = settings.auth_resource or resource_url
    if not settings.auth_issuer or not resource:
        return AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)  # type: ignore[arg-type]
    try:
        return AuthSettings(
            issuer_url=settings.auth_issuer,  # type: ignore[arg-type]
            resource_server_url=resource,  # type: ignore[arg-type]
            validate_token_resource=False,
        )
    except ValueError:  # pydantic's ValidationError: the issuer or resource is not an http(s) URL
        raise ConfigurationError(
            "auth.issuer and auth.resource must be http(s) URLs to be named in MCP's "
            "protected resource metadata",
            key="auth_issuer",
        ) from None


def http_server(rag: RagSystem, *, chat: Chat | None = None, resource_url: str | None = None) -> MCPServer:
    return build_server(
        rag,
        http_identity,
        chat=chat,
        auth=auth_settings(rag, resource_url),
        token_verifier=ApiTokenVerifier(rag),
    )


def http_app(
    rag: RagSystem,
    *,
    host: str = "127.0.0.1",
    chat: Chat | None = None,
    allowed_hosts: list[str] | None = None,
    resource_url: str | None = None,
) -> Any:
    """The streamable-HTTP ASGI app (Starlette) serving MCP at ``/mcp``.

    On a loopback ``host`` the SDK turns DNS-rebinding protection on (only
    loopback Host/Origin headers); ``allowed_hosts`` lists the public
    ``host:port`` names when it runs behind a proxy. ``resource_url`` is the
    server's URL for the protected resource metadata when ``[auth] resource``
    is unset.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if allowed_hosts:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=allowed_hosts,
            allowed_origins=[f"https://{h}" for h in allowed_hosts],
        )
    return http_server(rag, chat=chat, resource_url=resource_url).streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=security
    )


def asgi_app(
    rag: RagSystem, flask_app: Any = None, *, host: str = "127.0.0.1", allowed_hosts: list[str] | None = None
) -> Any:
    """MCP at ``/mcp`` beside the Flask app (the API, the page, /healthz) in one ASGI app.

    Run it with any ASGI server, e.g. ``uvicorn --factory
    oracle_rag.integrations.mcp_server:create_asgi_app``. The Flask app runs
    through a2wsgi's WSGI bridge on worker threads; ``/mcp`` never reaches it.
    """
    from a2wsgi import WSGIMiddleware
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route

    if flask_app is None:
        flask_app = create_app({"ORACLE_RAG_SYSTEM": rag})
    mcp = http_app(rag, host=host, chat=flask_app.extensions["oracle_rag"].chat, allowed_hosts=allowed_hosts)

    def lifespan(_app: Any) -> AbstractAsyncContextManager[None]:
        return mcp.router.lifespan_context(mcp)

    return Starlette(
        routes=[Route(MCP_PATH, endpoint=mcp), Mount("/", app=cast(Any, WSGIMiddleware(flask_app)))],
        lifespan=lifespan,
    )


def create_asgi_app() -> Any:
    """Factory for ASGI servers: settings from the environment / ``ORACLE_RAG_CONFIG``."""

    return asgi_app(RagSystem(load_settings()))


def run_http(
    rag: RagSystem,
    host: str = "127.0.0.1",
    port: int = 8001,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` (uvicorn) until interrupted."""
    import socket

    import uvicorn

    tracing.configure(rag.settings)
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("listening on %s: MCP is reachable from other machines; put TLS in front of it", host)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)  # listening before "ready" is announced: early clients wait in the backlog, not refused
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}{MCP_PATH}"
    config = uvicorn.Config(http_app(rag, host=host, resource_url=url), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    if on_ready:
        on_ready(url)
    server.run(sockets=[sock])
