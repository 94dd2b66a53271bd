"""The OpenAI Realtime opening handshake, judged without I/O: the path, the model, the key.

The official SDK connects to ``{base_url}/realtime?model=…`` (base URL ``…/v1``) with
``Authorization: Bearer <key>``. What the real service refuses at the HTTP level is refused
here the same way; beta-shaped requests (``OpenAI-Beta: realtime=v1``) are accepted, then
refused in-band with ``beta_api_shape_disabled`` as the service does (langwatch/scenario PR #604).
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs

from websockets.datastructures import Headers

from livebridge.emulator.openai import codec

PATH = "/v1/realtime"


@dataclass(frozen=True, slots=True)
class RealtimeRoute:
    """What the opening handshake asked for."""

    model: str
    credential: str
    beta: bool


def route(path: str, headers: Headers) -> RealtimeRoute | tuple[HTTPStatus, str]:
    """Accept what the real service accepts, or say why not (status and one line)."""
    path_only, _, query_string = path.partition("?")
    if path_only.rstrip("/") != PATH:
        return HTTPStatus.NOT_FOUND, (
            f"Not found: {path_only}. This emulator serves the OpenAI Realtime API at {PATH} "
            "(set OPENAI_BASE_URL to its base URL ending in /v1)"
        )
    scheme, _, token = headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return HTTPStatus.UNAUTHORIZED, (
            "Missing bearer authentication in header: send 'Authorization: Bearer <key>'"
        )
    model = next(iter(parse_qs(query_string).get("model", [])), "")
    if not model:
        return HTTPStatus.BAD_REQUEST, "Missing required parameter: 'model' (…/realtime?model=…)"
    beta = "realtime=v1" in headers.get("OpenAI-Beta", "").replace(" ", "")
    return RealtimeRoute(model, token.strip(), beta)


def beta_refusal() -> codec.EventError:
    return codec.EventError("beta_api_shape_disabled", codec.BETA_MESSAGE)


def model_not_found(model: str) -> codec.EventError:
    text = f"The model '{model}' does not exist or you do not have access to it."
    return codec.EventError("model_not_found", text, "model")
