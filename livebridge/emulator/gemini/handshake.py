"""The Gemini Live opening: the handshake's path and credential (judged without I/O), then the
first message, which must be a ``setup`` the service accepts.

The paths are the Gemini Developer API's (``v1alpha``/``v1beta``, ``…Constrained`` for ephemeral
tokens) and Vertex AI's, which google-genai uses with ``vertexai=True`` (an API key: express
mode); the credential may come as a header, a query parameter or a bearer token, as the service
takes it. A setup naming a model not served, a behavior the model refuses, or a resumption
handle the service no longer knows, or no thinking level where the model requires one, closes the
connection with the service's code and reason.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs

from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from livebridge import profiles
from livebridge.emulator.contract import CallRecord
from livebridge.emulator.gemini.connection import EmulatedSession
from livebridge.vendors.gemini import wire

SESSION_NOT_FOUND = "BidiGenerateContent session not found"

_PATH = re.compile(
    r"^/+ws/google\.ai\.generativelanguage\.(?P<version>v1(?:alpha|beta)?)\."
    r"GenerativeService\.BidiGenerateContent(?P<constrained>Constrained)?$"
)
#: Vertex AI's path, which google-genai uses with ``vertexai=True`` (an API key: express mode).
_VERTEX_PATH = re.compile(
    r"^/+ws/google\.cloud\.aiplatform\.(?P<version>v1(?:beta1)?)\."
    r"LlmBidiService/BidiGenerateContent$"
)


@dataclass(frozen=True, slots=True)
class Route:
    """What the opening handshake asked for: the API version, the backend, the credential."""

    api_version: str
    constrained: bool
    auth: str
    credential: str
    backend: profiles.Backend = "developer"


def model_not_found(model: str, api_version: str) -> str:
    """The service's close reason for a model it does not serve (cut to 123 bytes on close)."""
    return (
        f"Request trace id: {random.getrandbits(64):016x}, [ORIGINAL ERROR] generic::not_found: "
        f"models/{model} is not found for API version {api_version}, or is not supported for "
        "bidiGenerateContent."
    )


def refused_declarations(setup: wire.Setup, profile: profiles.ModelProfile) -> str | None:
    """The close reason for a setup declaring a behavior the model refuses, if any.

    ``gemini-3.8-live-extended-thinking`` runs NON_BLOCKING calls only and refuses a BLOCKING
    declaration (google-gemini/gemini-skills PR #81: "blocking mode is not supported"); the
    wording of the refusal is the emulator's, in the form of the service's 1007 reasons.
    """
    for tool in setup.tools or []:
        for declaration in tool.function_declarations or []:
            behavior = declaration.behavior or profile.undeclared_behavior
            if behavior not in profile.behaviors and behavior == "BLOCKING":
                return (  # the name last: a close reason is cut at 123 bytes
                    f"Request contains an invalid argument. {profile.family} runs NON_BLOCKING "
                    f"calls only; BLOCKING: {declaration.name}"
                )
    return None


def missing_thinking_level(setup: wire.Setup, profile: profiles.ModelProfile) -> str | None:
    """The close reason for a setup without ``thinkingConfig.thinkingLevel`` on a model that
    requires one (``thinking_level_required``: ``gemini-3.8-live-extended-thinking``, as
    Pipecat's code says; a framework's claim, not the vendor's documentation), if any. The
    wording is the emulator's, in the form of the service's 1007 reasons."""
    if not profile.thinking_level_required:
        return None
    config = setup.generation_config
    thinking = config.thinking_config if config is not None else None
    if thinking is not None and thinking.thinking_level:
        return None
    return (  # the field first: a close reason is cut at 123 bytes
        "Request contains an invalid argument. thinking_config.thinking_level is required "
        f"for {profile.family}"
    )


def route(path: str, headers: Headers) -> Route | tuple[HTTPStatus, str]:
    """Accept the paths and credential forms the real service accepts, or say why not."""
    path_only, _, query_string = path.partition("?")
    backend: profiles.Backend = "developer"
    match = _PATH.match(path_only)
    if match is None:
        match, backend = _VERTEX_PATH.match(path_only), "vertex"
    if match is None:
        return HTTPStatus.NOT_FOUND, f"Not found: {path_only}"
    constrained = backend == "developer" and bool(match["constrained"])
    query = parse_qs(query_string)
    credentials: list[tuple[str, str | None]] = [
        ("x-goog-api-key", headers.get("x-goog-api-key")),
        ("key", next(iter(query.get("key", [])), None)),
        ("access_token", next(iter(query.get("access_token", [])), None)),
    ]
    authorization = headers.get("Authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() in ("token", "bearer") and token:
        credentials.append(("authorization", token))
    for auth, credential in credentials:
        if credential:
            return Route(match["version"], constrained, auth, credential, backend)
    return HTTPStatus.UNAUTHORIZED, "Missing API key: pass x-goog-api-key, ?key= or ?access_token="


async def open_session(
    session: EmulatedSession,
    *,
    models: set[str] | None,
    profile_of: Callable[[str, profiles.Backend], profiles.ModelProfile],
    handles: Mapping[str, dict[str, CallRecord]],
) -> bool:
    """Read the client's first message and answer ``setupComplete`` if the service would;
    otherwise close as it does. ``models``: the names served (None: any); ``profile_of``: the
    profile a model behaves as on a backend; ``handles``: the resumption handles known."""
    try:
        frame = await session.ws.recv()
    except ConnectionClosed:
        return False
    message = await session.decode(frame)
    if message is None:
        return False
    if message.setup is None:
        reason = "Invalid JSON payload received. The first message must be setup."
        session.checker.flag("malformed_message", reason, wire.to_builtins(message))
        await session.close(1007, reason)
        return False
    model = profiles.bare_model_name(message.setup.model)
    if models is not None and model not in models:
        await session.close(1008, model_not_found(model, session.api_version))
        return False
    profile = profile_of(model, session.backend)
    refusal = refused_declarations(message.setup, profile)
    if refusal is not None:
        session.checker.flag("unsupported_behavior", refusal, wire.to_builtins(message.setup))
        await session.close(1007, refusal)
        return False
    missing = missing_thinking_level(message.setup, profile)
    if missing is not None:
        session.checker.flag("malformed_message", missing, wire.to_builtins(message.setup))
        await session.close(1007, missing)
        return False
    handle = message.setup.session_resumption.handle if message.setup.session_resumption else None
    known = None
    if handle:
        known = handles.get(handle)
        if known is None:
            await session.close(1008, SESSION_NOT_FOUND)
            return False
    session.start(message.setup, known, handle, profile)
    setup_complete = wire.SetupComplete(session_id=session.id)
    await session.send(wire.ServerMessage(setup_complete=setup_complete))
    return True
