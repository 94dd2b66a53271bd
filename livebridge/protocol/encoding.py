"""What every vendor's wire shares: audio travels as base64, which is read leniently.

A service may send standard or URL-safe base64, padded or not; a frame that is not base64 at
all is a ``WireError`` naming the field's value, as the service would say it.
"""

from __future__ import annotations

import base64
import binascii

import msgspec

from livebridge.errors import WireError


def b64decode(data: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not."""
    try:
        return msgspec.convert(data, bytes)  # standard base64, what the service sends: fast path
    except msgspec.ValidationError:
        pass
    text = data.replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise WireError("Invalid value: invalid base64 data") from None


def b64encode(data: bytes) -> str:
    """Standard base64, as the service sends it."""
    return base64.b64encode(data).decode("ascii")
