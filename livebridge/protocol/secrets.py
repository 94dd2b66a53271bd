"""Keep API keys out of log lines written by the libraries a connector drives.

With DEBUG logging on, ``websockets`` logs every handshake header, ``x-goog-api-key`` and
``Authorization: Bearer`` included.
A ``RedactingFilter`` on those loggers rewrites each record before any handler sees it.
"""

from __future__ import annotations

import logging
import re
import threading

#: Loggers of the libraries that open Live connections (a filter is not inherited by children),
#: and the websockets server's, which logs the same headers on the emulator's side.
LOGGERS = (
    "websockets.client",
    "websockets.server",
    "websockets",
    "google_genai",
    "google_genai.live",
    "google_genai._api_client",
    "openai",
    "openai._base_client",
    "openai.resources.realtime.realtime",
    "httpx",
    "httpcore",
)

_HEADER = re.compile(r"(?i)((?:x-goog-api-key|authorization)\s*[:=]\s*(?:bearer\s+)?)([^\s,'\"]+)")
_QUERY = re.compile(r"(?i)([?&](?:key|access_token)=)([^&\s'\"]+)")
_MASK = "[redacted]"


class RedactingFilter(logging.Filter):
    """Replace known secrets, API-key headers and ``key=`` query values in a record's text."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, secret: str) -> None:
        with self._lock:
            self._secrets = self._secrets | {secret}

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _MASK)
        text = _HEADER.sub(lambda m: m.group(1) + _MASK, text)
        return _QUERY.sub(lambda m: m.group(1) + _MASK, text)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the logging module's to report
            return True
        redacted = self.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_filter = RedactingFilter()
_installed: set[str] = set()


def protect(secret: str | None) -> None:
    """Redact ``secret`` (and any API-key header) from the connection libraries' log lines."""
    if secret:
        _filter.add(secret)
    for name in LOGGERS:
        if name not in _installed:
            logging.getLogger(name).addFilter(_filter)
            _installed.add(name)


def redact(text: str) -> str:
    """``text`` with every secret ``protect`` was given, and API-key headers, masked."""
    return _filter.redact(text)
