"""Oracle end-to-end attributes: a traced call's session shows the trace.

Marked ``oracle`` (conftest) and skipped without a database. The values are
read back through ``SYS_CONTEXT('USERENV', ...)``, which needs no privilege,
so the test also runs as the least-privileged application user.
"""

from __future__ import annotations

import sqlalchemy as sa
from opentelemetry.sdk.trace import TracerProvider

from oracle_rag import tracing

READ_TAGS = (
    "SELECT SYS_CONTEXT('USERENV', 'MODULE'), SYS_CONTEXT('USERENV', 'ACTION'), "
    "SYS_CONTEXT('USERENV', 'CLIENT_INFO'), SYS_CONTEXT('USERENV', 'CLIENT_IDENTIFIER') FROM DUAL"
)


def test_checkout_sets_module_action_and_client_info(oracle_system) -> None:  # type: ignore[no-untyped-def]
    provider = TracerProvider()
    with tracing.use_provider(provider):
        with tracing.span("search semantic") as current:
            with oracle_system.engine.connect() as conn:
                module, action, info, client_id = conn.execute(sa.text(READ_TAGS)).one()
            ctx = current.get_span_context()
        with oracle_system.engine.connect() as conn:  # outside a span: the previous call's tags are gone
            after = conn.execute(sa.text(READ_TAGS)).one()
    provider.shutdown()
    assert module == "oracle-rag" and action == "search semantic"
    assert info == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert client_id is None, "CLIENT_IDENTIFIER is the guarded path's scope key; tracing never sets it"
    assert after[0] == "oracle-rag" and after[1] is None and after[2] is None
