"""Twilio's request signatures (``X-Twilio-Signature``), without I/O.

Twilio signs every request it makes with the account's auth token: HMAC-SHA1 over the full URL
it requested (scheme, host, path and query), followed, for a form POST, by each parameter's
name and value, sorted by name; the header is the digest in base64
(https://www.twilio.com/docs/usage/security#validating-requests). A Media Streams WebSocket
upgrade is signed the same way, over the ``wss://`` URL of the ``<Stream>``. Whether Twilio
wrote the default port into the URL it signed varies, so a URL is checked with and without it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

HEADER = "X-Twilio-Signature"

_DEFAULT_PORTS = {"https": 443, "wss": 443, "http": 80, "ws": 80}


def signature(token: str, url: str, params: Iterable[tuple[str, str]] = ()) -> str:
    """The ``X-Twilio-Signature`` of a request to ``url`` with form ``params``."""
    signed = url + "".join(name + value for name, value in sorted(params))
    digest = hmac.new(token.encode(), signed.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def is_signed(
    token: str, header: str | None, url: str, params: Iterable[tuple[str, str]] = ()
) -> bool:
    """Whether ``header`` is the signature of this request (compared in constant time)."""
    if not header:
        return False
    given = header.encode("utf-8", "replace")
    params = list(params)
    return any(
        hmac.compare_digest(signature(token, candidate, params).encode("ascii"), given)
        for candidate in _port_spellings(url)
    )


def _port_spellings(url: str) -> list[str]:
    """``url`` as given, and with its default port written out or left out."""
    parts = urlsplit(url)
    default = _DEFAULT_PORTS.get(parts.scheme)
    try:
        port = parts.port
    except ValueError:  # not a port: only the URL as given can match
        return [url]
    if default is None or parts.hostname is None or "@" in parts.netloc:
        return [url]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None:
        other = parts._replace(netloc=f"{host}:{default}")
    elif port == default:
        other = parts._replace(netloc=host)
    else:
        return [url]
    return [url, urlunsplit(other)]
