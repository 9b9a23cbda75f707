"""Refuse URLs that carry a secret; redact URLs for logs.

A password in a URL ends up in shell history, process listings, logs and
error messages, so oracle-rag takes passwords only from an environment
variable (``ORACLE_RAG_DB_PASSWORD`` by default). The check looks at the URL
as written and at its percent-decoded forms, because ``%3A``/``%40`` and
``pass%77ord=`` spell the same secret.

Refused shapes: ``user:secret@`` and ``user/secret@``; for HTTP endpoints
(the LLM, the trace exporter) any user-info at all (``https://sk-…@host``);
and any query or fragment parameter named like a credential — ``password``,
``pwd``, ``token``, ``secret``, ``auth``, ``key``, ``sig`` and any name that
ends in ``key``, ``token``, ``secret``, ``password``, ``signature``,
``credential`` once ``-``/``_``/``.`` are ignored (``api-key``, ``apikey``,
``x-api-key``, ``access_token``, ``X-Amz-Signature``, ``sig``).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from oracle_rag.errors import ConfigurationError

_SECRET_KEYS = (
    "password",
    "passwd",
    "pwd",
    "pass",
    "token",
    "access_token",
    "auth_token",
    "api_key",
    "apikey",
    "secret",
    "wallet_password",
)

# scheme://user:secret@host  (a non-empty secret after the colon). Read the
# way SQLAlchemy's make_url reads it: the user stops at ':' or '/', the
# password runs to the next '@' and may hold '/', '?', '#' or spaces.
_USERINFO_COLON = re.compile(r"^[a-z][a-z0-9+.\-]*://[^:/]*:[^@]+@", re.IGNORECASE)
# Oracle EZConnect / SQL*Plus style: user/secret@host, optionally after a scheme
_ORACLE_SLASH = re.compile(r"(?:^|://)[^/?#@:\s]+/[^@\s/]+@", re.IGNORECASE)
# key=value pairs in a query string or a DSN keyword list
_KEY_VALUE = re.compile(
    r"(?:^|[?&;(]|(?<!\s)\s)\s*(?:"
    + "|".join(_SECRET_KEYS)
    + r")\s*=\s*[^&;\s)]",  # a run of spaces starts once
    re.IGNORECASE,
)


def _variants(url: str) -> list[str]:
    """The URL as written and up to three rounds of percent-decoding."""
    out = [url]
    current = url
    for _ in range(3):
        decoded = unquote(current)
        if decoded == current:
            break
        out.append(decoded)
        current = decoded
    return out


_SECRET_NAMES = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "token",
        "secret",
        "auth",
        "authorization",
        "key",
        "sig",
        "signature",
        "credential",
        "credentials",
        "bearer",
        "jwt",
        "sas",
        "apikey",
    }
)
_SECRET_SUFFIXES = ("key", "token", "secret", "password", "passwd", "signature", "credential", "credentials")
_USERINFO_ANY = re.compile(r"^[a-z][a-z0-9+.\-]*://[^/?#]*@", re.IGNORECASE)


def _secret_parameter(form: str) -> bool:
    """A query or fragment parameter whose name reads like a credential, with a value."""
    for part in re.split(r"[?#]", form)[1:]:
        for pair in re.split(r"[&;]", part):
            name, sep, value = pair.partition("=")
            if not sep or not value.strip():
                continue
            norm = re.sub(r"[\s\-_.]", "", unquote(name).lower())
            if norm in _SECRET_NAMES or norm.endswith(_SECRET_SUFFIXES):
                return True
    return False


def url_has_secret(url: str, *, allow_user: bool = True) -> bool:
    """True when ``url`` (or a percent-decoded form of it) carries a secret.

    ``allow_user=False`` (HTTP endpoints) also refuses a user name alone:
    ``https://sk-abc@host`` is a key in the user-info.
    """
    for form in _variants(url.strip()):
        if _USERINFO_COLON.search(form) or _ORACLE_SLASH.search(form) or _KEY_VALUE.search(form):
            return True
        if _secret_parameter(form) or (not allow_user and _USERINFO_ANY.search(form)):
            return True
    return False


def check_url(
    url: str, *, key: str, password_env: str = "ORACLE_RAG_DB_PASSWORD", allow_user: bool = True
) -> str:
    """Return ``url`` unchanged, or raise CONFIGURATION without echoing it.

    ``key`` names the setting the URL came from so the operator knows where
    to look; the URL itself never appears in the message.
    """
    if url_has_secret(url, allow_user=allow_user):
        raise ConfigurationError(
            f"{key} carries a password, key or token (user-info such as user:secret@ or user/secret@, "
            f"or a parameter such as password=, token=, key=, api-key= or sig=); remove it from the URL "
            f"and put the secret in the environment variable {password_env}",
            key=key,
        )
    return url


def redact_url(url: str) -> str:
    """A loggable form of a URL: scheme, host, port and path, never credentials or query."""
    decoded = _variants(url.strip())[-1]  # %3A/%40 spell the same credentials
    match = re.match(r"^([a-z][a-z0-9+.\-]*://)(.*)$", decoded, re.IGNORECASE | re.DOTALL)
    if not match:
        return "<unparseable url>"
    scheme, rest = match.groups()
    # user:password@ as SQLAlchemy reads it (the password may hold / ? # or @)
    rest = re.sub(r"^[^:/]*:[^@]*@", "", rest, count=1)
    # anything still before an '@' ahead of the query: user@, user/password@, the tail of a password
    head = re.match(r"[^?#]*", rest).group(0)  # type: ignore[union-attr]
    if "@" in head:
        rest = rest[head.rindex("@") + 1 :]
    return scheme + re.match(r"[^?#]*", rest).group(0)  # type: ignore[union-attr]
