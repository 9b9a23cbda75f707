"""Which ``Host`` a request may name, and who may see the demo identities.

DNS rebinding: a web page on ``evil.example`` can re-point its own name at
127.0.0.1; the victim's browser then sends requests to our loopback server
with ``Host: evil.example`` and lets the page read the answers (same
origin, as far as the browser knows). Checking ``Host`` against an
allow-list defeats it: the rebound request names the attacker's host.

``allowed_hosts`` (comma-separated) defaults to the loopback names
``localhost, 127.0.0.1, ::1``; a server reached under another name lists
it (``chat.example.com, 10.0.0.5``). ``*`` accepts any host (only behind a
proxy that checks it). Ports are ignored. ``/healthz`` is exempt, so that
probes that send an address as ``Host`` keep working; it shows nothing an
anonymous caller may not know.

The demo identity endpoint hands out tokens, the admin's among them, so it
is served only when both the ``Host`` and the peer address are loopback,
whatever ``allowed_hosts`` says.
"""

from __future__ import annotations

import ipaddress
import re

from flask import Request

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
DEFAULT_ALLOWED_HOSTS = "localhost,127.0.0.1,::1"
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$"
)


def host_name(host_header: str | None) -> str | None:
    """The host named by a ``Host`` header (lower case, no port, no brackets), or None if malformed."""
    if not host_header:
        return None
    host = host_header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or (host[end + 1 :] and not re.fullmatch(r":\d{1,5}", host[end + 1 :])):
            return None
        host = host[1:end]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
        return host
    if host.count(":") == 1:
        host, port = host.split(":")
        if not port.isdigit():
            return None
    host = host.rstrip(".")
    return host if _HOSTNAME.match(host) else None


def parse_allowed_hosts(value: str) -> frozenset[str]:
    """The ``allowed_hosts`` setting as a set of names (``*`` kept as is)."""
    out = set()
    for item in value.split(","):
        name = item.strip().lower()
        if not name:
            continue
        if name != "*":
            name = name[1:-1] if name.startswith("[") and name.endswith("]") else name
            name = name.rstrip(".")
        out.add(name)
    return frozenset(out)


def allowed_hosts_problem(value: str) -> str | None:
    """Why an ``allowed_hosts`` value is invalid (config validation), or None."""
    names = parse_allowed_hosts(value)
    if not names:
        return "a comma-separated list of host names (e.g. localhost,127.0.0.1,::1)"
    for name in names:
        if name == "*":
            continue
        try:
            ipaddress.ip_address(name)
            continue
        except ValueError:
            pass
        if not _HOSTNAME.match(name):
            return f"host names without ports or schemes (got {name[:40]!r})"
    return None


def host_allowed(request: Request, allowed: frozenset[str]) -> bool:
    if "*" in allowed:
        return True
    name = host_name(request.headers.get("Host"))
    return name is not None and name in allowed


def is_loopback_request(request: Request) -> bool:
    """Both the named ``Host`` and the peer address are loopback."""
    name = host_name(request.headers.get("Host"))
    if name not in LOOPBACK_NAMES:
        return False
    try:
        return ipaddress.ip_address((request.remote_addr or "").split("%")[0]).is_loopback
    except ValueError:
        return False
