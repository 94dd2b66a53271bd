"""GPT-Live connections through the official ``openai`` SDK's ``client.live.connect()``.

The SDK opens the websocket (``{base_url}/live/sessions``, authentication, headers); livebridge
sends ``session.start`` and waits for ``session.started`` before anything else goes out (a
socket that sends nothing is told nothing, and an early command is refused). An ``error``
instead of ``session.started`` fails the connect with the service's words. Events then travel
as msgspec frames on the SDK's websocket (``openai_live.wire``). The SDK's reconnection is left
off: GPT-Live has no resumption, and a new socket would be a new session.

With ``attach`` (``SessionOptions(attach="live_…")``) the connection is the SDK's
``client.live.sideband.connect(session_id=…)`` to a session started elsewhere (a SIP or WebRTC
call whose media goes elsewhere, the tools running here): no ``session.start`` is sent; the
replay before ``session.started`` is read first, and the calls it shows answered are left out
(``openai_live.replay``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from openai import AsyncOpenAI, OpenAIError
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from livebridge import profiles
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import (
    LiveSessionError,
    MalformedMessageError,
    ModelNotFoundError,
    PolicyViolationError,
    TransportClosed,
    UsageError,
)
from livebridge.protocol import resume, secrets
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.transport import CONNECT_SECONDS, MAX_MESSAGE_BYTES, TransportKind
from livebridge.protocol.websocket import (
    FrameTransport,
    closed,
    host_of,
    opening_timed_out,
)
from livebridge.vendors.openai_live import VENDOR, delegation, replay, wire
from livebridge.vendors.openai_live.config import session_config
from livebridge.vendors.openai_live.delegation import Delegation
from livebridge.vendors.openai_live.protocol import GptLiveProtocol

_EARLY_LIMIT = 64
#: Replayed events an attached session keeps (the service's replay is short).
_REPLAY_LIMIT = 4096

log = logging.getLogger("livebridge.openai_live")


def is_live_model(model: str) -> bool:
    """A model name that selects GPT-Live rather than OpenAI Realtime (its descriptor's
    prefixes)."""
    return VENDOR.selects(model)


class GptLiveConnector:
    """Opens the GPT-Live connection of one session with an ``openai.AsyncOpenAI``.

    ``config`` is the ``session`` object of ``session.start`` (checked at once against the
    strict schema: ``openai_live.config``); the registry's tools go into
    ``delegation.responses.tools``. The arguments are ``OpenAIConnector``'s.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        model: str,
        tools: ToolRegistry,
        config: Mapping[str, Any] | None = None,
        transport: TransportKind = "wire",
        keepalive: Mapping[str, float] | None = None,
        tls_read_buffer: int = 8 * 1024,
        websocket_options: Mapping[str, Any] | None = None,
        connect_timeout: float = CONNECT_SECONDS,
        profile: profiles.ModelProfile | None = None,
        delegate: Callable[[Delegation], Any] | None = None,
        attach: str | None = None,
    ) -> None:
        if profile is not None and profile.vendor != "openai":
            raise UsageError(f"an AsyncOpenAI needs an OpenAI model profile, not {profile.family}")
        self._client = client
        self._model = model
        self.profile = profile or profiles.profile_for(model, "openai")
        self._given = tools
        self._tools = self.profile.adapt(tools)
        self._attach = _attach_id(attach, config, delegate)
        self.session = session_config(
            config, self._tools, model=model, parallel_tool_calls=self.profile.parallel_tool_calls
        )
        self._delegate = delegate
        client_mode = (self.session.get("delegation") or {}).get("type") == "client"
        if client_mode and delegate is None:
            raise UsageError(
                "client delegation needs SessionOptions(delegate=fn): fn answers each delegation"
            )
        if delegate is not None and not client_mode:
            raise UsageError(
                "SessionOptions(delegate=...) answers client delegations: give "
                'config={"delegation": {"type": "client"}}'
            )
        self._options: dict[str, Any] = {
            "compression": None,
            "max_size": MAX_MESSAGE_BYTES,
            **(resume.keepalive_settings() if keepalive is None else keepalive),
            **(websocket_options or {}),
        }
        self._connect_timeout = connect_timeout
        secrets.protect(getattr(client, "api_key", None))

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> GptLiveProtocol:
        adapted = self._tools if tools is self._given else self.profile.adapt(tools)
        attached = self._attach is not None  # a sideband carries no call audio of its own
        g711 = not attached and self.session["audio"]["format"]["type"] == "audio/pcmu"
        budget = (self.profile.backend_items, self.profile.backend_bytes)
        client = self._delegate is not None
        if self._delegate is not None:
            adapted = delegation.registry(self._delegate)
        return GptLiveProtocol(
            adapted,
            options,
            budget=budget,
            g711=g711,
            client=client,
            observed=observed,
            attached=attached,
        )

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[LiveTransport]:
        if handle is not None:
            raise UsageError("GPT-Live has no resumption handles")
        timeout = self._connect_timeout
        deadline = anyio.current_time() + timeout
        options = {**self._options, "open_timeout": timeout}
        live = self._client.live
        manager: Any = (
            live.connect(websocket_connection_options=options)  # type: ignore[arg-type]
            if self._attach is None
            else live.sideband.connect(
                session_id=self._attach,
                graceful_close=True,
                websocket_connection_options=options,  # type: ignore[arg-type]
            )
        )
        try:
            async with manager as connection:
                ws = connection._connection
                if self._attach is None:
                    session_id, early = await self._start(ws, deadline)
                else:
                    session_id, early = await self._attached(ws, self._attach, deadline)
                yield LiveTransport(ws, session_id, early)
        except ConnectionClosed as exc:
            raise closed(exc) from None
        except InvalidStatus as exc:
            status = exc.response.status_code
            said = (exc.response.body or b"")[:200].decode("utf-8", "replace").strip()
            if self._attach is not None and status == 404:
                error = LiveSessionError(
                    f"no running GPT-Live session {self._attach!r} to attach to (HTTP 404: "
                    f"{said}). Attach with the id of a session that has started and not ended."
                )
                raise TransportClosed(status, said, error=error) from None
            error = (
                PolicyViolationError(
                    f"OpenAI refused the GPT-Live connection (HTTP {status}: {said})"
                )
                if status in (401, 403)
                else LiveSessionError(
                    f"OpenAI refused the GPT-Live connection (HTTP {status}: {said})"
                )
            )
            raise TransportClosed(status, said, error=error) from None
        except InvalidHandshake as exc:
            error = LiveSessionError(f"GPT-Live handshake failed: {exc}")
            raise TransportClosed(None, str(exc), error=error) from None
        except TimeoutError:
            raise opening_timed_out(self._host(), timeout, "the websocket handshake") from None
        except OSError as exc:
            raise TransportClosed(None, f"network error: {exc}") from None
        except OpenAIError as exc:
            error = LiveSessionError(f"The openai SDK could not connect: {exc}")
            raise TransportClosed(None, str(exc), error=error) from None

    def _host(self) -> str:
        client = self._client
        return host_of(getattr(client, "websocket_base_url", None) or client.base_url)

    async def _start(self, ws: Any, deadline: float) -> tuple[str | None, list[wire.ServerEvent]]:
        """Send ``session.start``; wait for ``session.started``."""
        start = {"type": "session.start", "event_id": "livebridge_start", "session": self.session}
        with contextlib.suppress(ConnectionClosed):
            await ws.send(wire.encode(start), text=True)
        early: list[wire.ServerEvent] = []
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            while True:
                try:
                    event = wire.decode_server(await ws.recv(decode=False))
                except MalformedMessageError:
                    continue
                if event.type == "session.started":
                    return (event.session.id if event.session else None), early
                if event.type == "error":
                    raise TransportClosed(1008, "session refused", error=_refused(event.error))
                if len(early) < _EARLY_LIMIT:
                    early.append(event)
        raise opening_timed_out(self._host(), self._connect_timeout, "session.start")

    async def _attached(
        self, ws: Any, session_id: str, deadline: float
    ) -> tuple[str, list[wire.ServerEvent]]:
        """Read the replay up to ``session.started``; leave out the calls it shows answered.
        Without ``session.started`` in time, what came is the replay."""
        early: list[wire.ServerEvent] = []
        started: wire.ServerEvent | None = None
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            while True:
                try:
                    event = wire.decode_server(await ws.recv(decode=False))
                except MalformedMessageError:
                    continue
                if event.type == "session.started":
                    started = event
                    break
                if event.type == "error":
                    raise TransportClosed(1008, "attach refused", error=_refused(event.error))
                if len(early) < _REPLAY_LIMIT:
                    early.append(event)
        if started is None:
            log.warning(
                "attached to %s: no session.started within %g s; %d replayed event(s) read",
                session_id,
                self._connect_timeout,
                len(early),
            )
        self._check_tools(session_id, started.session if started else None)
        settled = replay.settled_calls(early)
        if settled:
            log.info(
                "attached to %s: %d replayed call(s) were answered before the attach and do "
                "not run again: %s",
                session_id,
                len(settled),
                ", ".join(sorted(settled)),
            )
        return session_id, replay.without(early, settled)

    def _check_tools(self, session_id: str, session: wire.Session | None) -> None:
        """The session was started elsewhere: its delegation must be Responses (calls run
        here); a difference between its declared functions and the registry is logged."""
        if session is None or session.delegation is None:
            return
        declared = replay.declared_tools(session)
        if declared is None:
            error = LiveSessionError(
                f"GPT-Live session {session_id} delegates to "
                f"{session.delegation.type or 'nothing'!r}, not 'responses': an attached "
                "session runs the registry's tools for Responses delegation only"
            )
            raise TransportClosed(1008, "not a Responses session", error=error)
        registry = {tool.name for tool in self._tools}
        if missing := sorted(declared - registry):
            log.warning(
                "GPT-Live session %s declares %s, which the registry lacks: each call to "
                "one is answered once with an unknown-tool error",
                session_id,
                ", ".join(missing),
            )
        if unused := sorted(registry - declared):
            log.warning(
                "the registry's %s are not declared by GPT-Live session %s: its backend "
                "cannot call them (declare them where the session is started)",
                ", ".join(unused),
                session_id,
            )


def _attach_id(
    attach: str | None, config: Mapping[str, Any] | None, delegate: Callable[..., Any] | None
) -> str | None:
    """``attach`` checked: a session id, with nothing that only a starter gives."""
    if attach is None:
        return None
    if not isinstance(attach, str) or not attach.strip():
        raise UsageError("attach must be a GPT-Live session id, e.g. 'live_…'")
    if config is not None:
        raise UsageError(
            "an attached session sends no session.start, so it takes no config: the session's "
            "configuration (its tools included) is the one it was started with"
        )
    if delegate is not None:
        raise UsageError(
            "attach runs the registry's tools for a session with Responses delegation; "
            "SessionOptions(delegate=...) is for sessions livebridge starts"
        )
    return attach


def _refused(detail: wire.ErrorDetail | None) -> LiveSessionError:
    detail = detail or wire.ErrorDetail()
    code = detail.code or detail.type or "error"
    said = (detail.message or "no message").rstrip(". ")
    where = f" (parameter {detail.param})" if detail.param else ""
    text = f"GPT-Live refused session.start: {code}{where}: {said}."
    if detail.code == "model_not_found":
        return ModelNotFoundError(text + " Check the model name (e.g. gpt-live-1.1).")
    return LiveSessionError(text + " Fix the config given to LiveSession.connect.")


class LiveTransport(FrameTransport[wire.ServerEvent]):
    """msgspec (``livebridge.vendors.openai_live.wire``) on the SDK's websocket."""

    def __init__(self, ws: Any, session_id: str | None, early: list[wire.ServerEvent]) -> None:
        super().__init__(ws, session_id, early, wire.decode_server, wire.client_frames)
