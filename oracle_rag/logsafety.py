"""No log line carries a URL's query string or user-info, from any logger.

The HTTP client under the LLM SDK logs every request URL at INFO (``httpx``:
``HTTP Request: POST https://…?…``), so ``oracle-rag -v`` would print any
key an endpoint was given in its query; driver and SDK exceptions may carry
URLs too. :class:`UrlScrubber` rewrites every URL in a record's message and
exception text to :func:`~oracle_rag.urlsafety.redact_url` (scheme, host,
port, path). :func:`install` puts it on the root logger's handlers, which
every propagating logger reaches (the CLI calls it after configuring
logging), and on the loggers of the HTTP and SDK libraries themselves, so a
host application's own handlers get scrubbed records from them as well.
"""

from __future__ import annotations

import logging
import re

from oracle_rag.urlsafety import redact_url

# A URL, or (first alternative, kept as written) a whole run of scheme characters that no "://" follows:
# read in one step, so a long run ("a+a+a+...") is not rescanned from each of its word starts.
_URL = re.compile(
    r"(?<![a-z0-9+.\-])[a-z0-9+.\-]++(?!://)|\b[a-z][a-z0-9+.\-]*://[^\s\"'<>`]+", re.IGNORECASE
)
_LIBRARY_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "openai",
    "openai._base_client",
    "urllib3",
    "urllib3.connectionpool",
    "oracle_rag",
)


def scrub(text: str) -> str:
    """``text`` with every URL reduced to scheme, host, port and path."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)) if "://" in m.group(0) else m.group(0), text)


class UrlScrubber(logging.Filter):
    """A filter that removes query strings and user-info from URLs in log records."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error path
            return True
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text)
        return True


_SCRUBBER = UrlScrubber()


def protect_library_loggers() -> None:
    """Scrub the records of the HTTP/SDK loggers at the source (idempotent)."""
    for name in _LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if _SCRUBBER not in logger.filters:
            logger.addFilter(_SCRUBBER)


def install() -> None:
    """Scrub every record reaching the root logger's handlers, and the library loggers' own records."""
    protect_library_loggers()
    for handler in logging.getLogger().handlers:
        if _SCRUBBER not in handler.filters:
            handler.addFilter(_SCRUBBER)
