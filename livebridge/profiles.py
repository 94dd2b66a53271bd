"""What each realtime model does with tool calls: one table, read by the session and the emulator.

The exactly-once contract depends on facts that change with the model and the backend: what a
function declared without ``behavior`` means, which behaviors and ``scheduling`` values exist,
whether ``willContinue`` exists, whether calls carry ids, whether new input cancels a pending
BLOCKING call. Everything livebridge and its emulator rely on lives in ``PROFILES`` below, each
row with its sources (a source marked *field report* is a third party's observation, not the
vendor's documentation). Nothing else in the package tests a model name.

A session picks its profile at ``connect`` from the model name and the client's backend
(``profile_for``); ``SessionOptions(profile=...)`` overrides it. ``ModelProfile.adapt`` then
turns the app's registry into the tools the session declares and runs, so that the declaration
on the wire and the session's treatment of each call never disagree:

- a tool declared without ``behavior`` is BLOCKING where the model has BLOCKING calls, and
  NON_BLOCKING on a model that has only those; the declaration always states the behavior;
- a tool declared NON_BLOCKING runs BLOCKING on a model without NON_BLOCKING calls (the model
  waits for the answer; the contract holds; a warning says so at connect);
- a streaming tool on a backend without ``willContinue`` is answered once, with every item;
- a tool's ``scheduling`` on a model that ignores it (``scheduling_ignored``) is left out, with
  a warning;
- a tool declared BLOCKING on a NON_BLOCKING-only model, or with a ``scheduling`` the backend
  refuses, cannot be served: ``adapt`` raises ``ModelCapabilityError`` naming the tool, the
  model and the fix, before any socket opens.

An unknown model name gets the documented defaults of its backend (``DEVELOPER_DEFAULT``,
``VERTEX_DEFAULT``, ``OPENAI_DEFAULT``) and, once the service accepted the name, one warning
naming it (``warn_unknown``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from livebridge.calls.call import BEHAVIORS, SCHEDULINGS, Behavior, Scheduling
from livebridge.errors import ModelCapabilityError

if TYPE_CHECKING:
    from livebridge.calls.tools import ToolRegistry

__all__ = ["BACKENDS", "PROFILES", "Backend", "ModelProfile", "families", "profile_for"]

log = logging.getLogger("livebridge.profiles")

#: Where a model is reached: the Gemini Developer API, Vertex AI, or OpenAI Realtime.
Backend = Literal["developer", "vertex", "openai"]
BACKENDS: tuple[Backend, ...] = ("developer", "vertex", "openai")

_ALL_SCHEDULINGS: frozenset[Scheduling] = frozenset(SCHEDULINGS)
_BOTH: frozenset[Behavior] = frozenset(BEHAVIORS)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What one model family does on one backend, as far as tool calls are concerned.

    - ``family``: the name prefix the row matches (``gemini-3.8-live``);
    - ``undeclared_behavior``: what the service does with a declaration without ``behavior``;
    - ``behaviors``: the behaviors it accepts; ``schedulings``: the ``scheduling`` values a
      NON_BLOCKING answer may carry (empty: the field must not be sent);
    - ``will_continue``: a streamed answer (``willContinue``) exists;
    - ``call_ids``: calls carry ids (without them answers are matched by name, in call order);
    - ``input_cancels_blocking``: new input while a BLOCKING call runs makes the service cancel
      that call; ``interrupt_waits_for_user``: an ``INTERRUPT`` answer waits until the user has
      finished speaking instead of talking over them;
    - ``turn_complete_after_call``: the model ends its turn (``generationComplete``,
      ``turnComplete``) right after a ``toolCall``, BLOCKING calls included, and speaks the
      answers in a turn of their own (False: no ``turnComplete`` until every BLOCKING call of
      the turn is answered);
    - ``history_seed_starts_turn``: with ``historyConfig.initialHistoryInClientContent``, the
      history the client seeds (``clientContent`` up to ``turnComplete``) starts a model turn
      (False: it is context only; the client's next ``realtimeInput`` starts the turn);
    - ``scheduling_ignored``: the model does not support ``scheduling`` and ignores it where
      given (rather than the backend refusing it): a tool's ``scheduling`` is left out at
      ``adapt``, with a warning, instead of raising;
    - ``interaction_status``: every ``turnComplete`` carries ``interactionStatus``:
      ``IN_PROGRESS`` while a NON_BLOCKING call or its report is still to come, ``IDLE`` once
      nothing is (google-genai's ``receive()`` stops at ``IDLE``);
    - ``thinking_level_required``: a setup without ``generationConfig.thinkingConfig
      .thinkingLevel`` is refused;
    - ``media_chunks``: the deprecated ``realtimeInput.mediaChunks`` is still accepted;
    - ``parallel_tool_calls``: (OpenAI) one response may carry several calls when asked to;
    - ``session_seconds``, ``connection_seconds``, ``handle_seconds``: how long a session and
      one connection last, how long a resumption handle stays valid (None: no such limit, or
      no resumption at all for ``handle_seconds`` on OpenAI);
    - ``backend_items``, ``backend_bytes``: (GPT-Live) the delegated Responses backend's input
      for the whole session, at most so many items and UTF-8 bytes (None: no such budget);
    - ``sources``: where each fact comes from; ``known``: False for the defaults an unknown
      model name gets.
    """

    family: str
    vendor: Literal["gemini", "openai"]
    backend: Backend
    undeclared_behavior: Behavior
    behaviors: frozenset[Behavior]
    schedulings: frozenset[Scheduling]
    will_continue: bool
    call_ids: bool
    input_cancels_blocking: bool = False
    interrupt_waits_for_user: bool = False
    turn_complete_after_call: bool = False
    history_seed_starts_turn: bool = True
    scheduling_ignored: bool = False
    interaction_status: bool = False
    thinking_level_required: bool = False
    media_chunks: bool = True
    parallel_tool_calls: bool = False
    session_seconds: float | None = None
    connection_seconds: float | None = None
    handle_seconds: float | None = None
    backend_items: int | None = None
    backend_bytes: int | None = None
    sources: tuple[str, ...] = ()
    known: bool = True

    @property
    def default_behavior(self) -> Behavior:
        """What livebridge declares for a tool registered without ``behavior``."""
        return "BLOCKING" if "BLOCKING" in self.behaviors else "NON_BLOCKING"

    def named(self, model: str) -> ModelProfile:
        """This profile for an unknown ``model``: the same facts under that name, not known."""
        return replace(self, family=bare_model_name(model), known=False)

    def adapt(self, tools: ToolRegistry) -> ToolRegistry:
        """The registry a session on this model declares and runs (see the module docstring).

        Raises ``ModelCapabilityError`` listing every tool the model cannot run as declared.
        """
        adapted = []
        problems = []
        for tool in tools:
            declared = tool.behavior if tool.behavior_declared else None
            behavior = self.default_behavior if declared is None else declared
            if behavior not in self.behaviors:
                if behavior == "NON_BLOCKING":
                    # OpenAI has no NON_BLOCKING calls at all: one registry serves both vendors,
                    # so there it is the documented rule, not news.
                    log.log(
                        logging.WARNING if self.vendor == "gemini" else logging.INFO,
                        "tool %r is declared NON_BLOCKING, but %s runs BLOCKING calls only: "
                        "it runs BLOCKING here (the model waits for its answer)",
                        tool.name,
                        self.family or self.vendor,
                    )
                    behavior = "BLOCKING"
                else:
                    problems.append(
                        f"tool {tool.name!r} is declared behavior='BLOCKING', but {self.family} "
                        "runs NON_BLOCKING calls only: declare it behavior='NON_BLOCKING' (the "
                        "model keeps talking while it runs and reports the answer when it "
                        "comes), or use a model with blocking calls"
                    )
                    continue
            scheduling = tool.scheduling if behavior == "NON_BLOCKING" else None
            if scheduling is not None and self.scheduling_ignored:
                log.warning(
                    "tool %r asks for scheduling=%r, which %s does not support: it is left "
                    "out (the service reports the answer when the model is idle)",
                    tool.name,
                    scheduling,
                    self.family,
                )
                scheduling = None
            if scheduling is not None and scheduling not in self.schedulings:
                problems.append(
                    f"tool {tool.name!r} asks for scheduling={scheduling!r}, which "
                    f"{self.family} on {self.backend} refuses: remove the option (the service "
                    "then reports the answer when the model is idle)"
                )
                continue
            streaming = tool.kind == "stream" and behavior == "NON_BLOCKING" and self.will_continue
            adapted.append(
                replace(tool, behavior=behavior, scheduling=scheduling, streaming=streaming)
            )
        if problems:
            raise ModelCapabilityError(
                f"{len(problems)} tool(s) cannot run on {self.family}: " + "; ".join(problems)
            )
        return tools.with_tools(adapted)


def _on_vertex(developer: ModelProfile) -> ModelProfile:
    """A Gemini family's row on Vertex AI, from its Developer API row.

    What Vertex does differently is the backend's, not the model's: the SDK refuses
    ``will_continue`` in Vertex mode (google-genai ``_live_converters
    ._FunctionResponse_to_vertex``). Calls came without ids in 2025 (livekit/agents#2194:
    "Vertex does not support id in function call responses", on 2.x models); ``gemini-3.8-live``
    on Vertex sends and needs them (livekit-plugins-google 1.8.9, field report; google-genai 3.6
    forwards ``id`` in Vertex mode). No source says either way for 3.1: it keeps the 2025
    behaviour. ``scheduling`` was
    refused by Vertex with 1007 in 2025, on 2.x models (livekit/agents#3784, field report);
    google-genai 3.x forwards it, and no refusal is reported for 3.x models.
    """
    two = developer.family.startswith(("gemini-2", "gemini-live-2"))
    ids = developer.family.startswith("gemini-3.8")
    return replace(
        developer,
        backend="vertex",
        will_continue=False,
        call_ids=ids,
        schedulings=frozenset() if two else developer.schedulings,
        sources=(
            *developer.sources,
            "livekit-plugins-google 1.8.9: gemini-3.8-live on Vertex drops an answer to a "
            "BLOCKING call without an id; google-genai 3.6 _FunctionResponse_to_vertex "
            "forwards id (field report, SDK)"
            if ids
            else "livekit/agents#2194: Vertex sends calls without ids, 2025 (field report)",
            "google-genai _live_converters: will_continue refused in Vertex mode",
            "livekit/agents#3784: scheduling refused with 1007 on Vertex in 2025 (field report)",
        ),
    )


#: The documented limits of a Gemini Live session (ai.google.dev live-session): audio-only
#: sessions last 15 minutes without context compression, one connection about 10 minutes
#: (``goAway`` first), a resumption handle 2 hours after the session's end.
_SESSION, _CONNECTION, _HANDLE = 15 * 60.0, 10 * 60.0, 2 * 3600.0

#: A 3.x model takes a seeded history as context only; the client's next realtime input starts
#: the turn.
_SEED_WAITS = (
    "google-genai types.HistoryConfig: the initial history 'will not trigger a model call'; "
    "the client starts the conversation with realtime_input",
    "pipecat services/google/gemini_live/llm.py _send_initial_context: 3.x 'won't run "
    "inference without a realtime input' after the seed; google/adk-python "
    "gemini_llm_connection.send_history (a framework's observation)",
)

_GEMINI_38 = ModelProfile(
    family="gemini-3.8-live",
    vendor="gemini",
    backend="developer",
    undeclared_behavior="NON_BLOCKING",
    behaviors=_BOTH,
    schedulings=_ALL_SCHEDULINGS,
    will_continue=True,
    call_ids=True,
    input_cancels_blocking=True,
    interrupt_waits_for_user=True,
    history_seed_starts_turn=False,
    media_chunks=False,
    session_seconds=_SESSION,
    connection_seconds=_CONNECTION,
    handle_seconds=_HANDLE,
    sources=(
        "ai.google.dev model page 'Gemini 3.8 Live', 'Migrating from Gemini 3.1 Flash Live': "
        "NON_BLOCKING is the default; BLOCKING only when declared",
        "Vertex AI guide 'migrate-from-gemini-2-5-to-gemini-3-8-live': new input cancels a "
        "running BLOCKING call; INTERRUPT waits for the user to finish speaking",
        "livekit/agents#7302, PR #7329 (field reports)",
        "discuss.ai.google.dev t/186392: sessions closed at 58:00 with 1011 (field report)",
        *_SEED_WAITS,
    ),
)
_GEMINI_38_THINKING = replace(
    _GEMINI_38,
    family="gemini-3.8-live-extended-thinking",
    behaviors=frozenset({"NON_BLOCKING"}),
    schedulings=frozenset(),
    scheduling_ignored=True,
    input_cancels_blocking=False,  # it has no blocking calls to cancel
    interaction_status=True,
    thinking_level_required=True,
    sources=(
        "livekit/agents#7302: accepts NON_BLOCKING only (field report)",
        "google-gemini/gemini-skills PR #81: blocking mode is not supported and is refused",
        "google-gemini/gemini-skills gemini-live-api-dev migration guide: scheduling on a "
        "function response is not supported (the emulator ignores it and warns)",
        "google-genai 3.6 types.LiveServerContent.interaction_status: 'Always sent alongside "
        "turn_complete'; live.py receive() stops at IDLE",
        "pipecat gemini_live service: the service refuses a setup without "
        "thinkingConfig.thinkingLevel (a framework's claim, not the vendor's documentation)",
        "firebase/firebase-android-sdk#8616: NON_BLOCKING required on every tool",
        "roomkit-live/roomkit#42: an unnamed function response reads as a failed call "
        "(field report)",
        *_SEED_WAITS,
    ),
)
_GEMINI_31 = replace(
    _GEMINI_38,
    family="gemini-3.1-flash-live",
    undeclared_behavior="BLOCKING",
    behaviors=frozenset({"BLOCKING"}),
    schedulings=frozenset(),
    will_continue=False,
    input_cancels_blocking=False,
    interrupt_waits_for_user=False,
    sources=(
        "ai.google.dev live-api/tools: function calling on 3.1 is synchronous only",
        "pipecat#4448 disables NON_BLOCKING on 3.x; PatterAI/Patter#210 opted into it "
        "(conflicting field reports: the documentation is followed)",
        "kizuna-ai-lab/sokuji#150: realtime_input.media_chunks refused (field report)",
        *_SEED_WAITS,
    ),
)
_GEMINI_25 = replace(
    _GEMINI_31,
    family="gemini-2.5-flash-native-audio",
    behaviors=_BOTH,
    schedulings=_ALL_SCHEDULINGS,
    will_continue=True,
    turn_complete_after_call=True,
    history_seed_starts_turn=True,
    media_chunks=True,
    sources=(
        "js-genai Behavior docs: 'Defaults to BLOCKING'",
        "ai.google.dev live-api/tools: 2.5 supports synchronous and asynchronous calls",
        "google-genai types: scheduling and will_continue on FunctionResponse",
        "google/adk-python models/gemini_llm_connection.py: native-audio models send "
        "turn_complete right after a tool call (3.x withholds it until the answer)",
        "livekit/agents#7195, #6569: toolCall, then generationComplete and turnComplete, on "
        "native audio (field reports)",
        "pipecat gemini_live/llm.py _send_initial_context: on 2.5 a seed ending in "
        "turn_complete runs inference",
    ),
)
_GEMINI_LIVE_25_NATIVE = replace(_GEMINI_25, family="gemini-live-2.5-flash-native-audio")
#: The half-cascade models withhold ``turnComplete`` while a BLOCKING call runs: the cookbook's
#: recorded outputs show it.
_HALF_CASCADE = (
    "google-gemini/cookbook quickstarts/Get_started_LiveAPI_tools.ipynb: no turnComplete for a "
    "BLOCKING call's turn until its answer is sent (recorded outputs)",
)
_GEMINI_LIVE_25 = replace(
    _GEMINI_25,
    family="gemini-live-2.5-flash",
    turn_complete_after_call=False,
    sources=(*_GEMINI_25.sources[:3], _GEMINI_25.sources[-1], *_HALF_CASCADE),
)
_GEMINI_20 = replace(_GEMINI_LIVE_25, family="gemini-2.0-flash-live")

#: OpenAI Realtime: every call is answered before the model goes on (no NON_BLOCKING, no
#: scheduling, no streamed answers); sessions last at most 60 minutes, with no resumption.
_GPT_REALTIME = ModelProfile(
    family="gpt-realtime",
    vendor="openai",
    backend="openai",
    undeclared_behavior="BLOCKING",
    behaviors=frozenset({"BLOCKING"}),
    schedulings=frozenset(),
    will_continue=False,
    call_ids=True,
    session_seconds=60 * 60.0,
    sources=(
        "platform.openai.com realtime guides: function_call items, function_call_output, "
        "response.create; 60-minute sessions without resumption",
    ),
)
_GPT_REALTIME_2 = replace(
    _GPT_REALTIME,
    family="gpt-realtime-2",
    parallel_tool_calls=True,
    sources=(
        *_GPT_REALTIME.sources,
        "openai-python types/realtime changelog: parallel_tool_calls on reasoning realtime models",
    ),
)

#: OpenAI GPT-Live (``v1/live/sessions``): the voice model delegates tool calls to a hosted
#: Responses backend; every call is answered before that backend goes on, several may come in one
#: response, and the backend's input is capped for the whole session. The sources differ on
#: whether the 32,768 bytes reset per continuation: treated as per session until one settles it.
_GPT_LIVE = replace(
    _GPT_REALTIME,
    family="gpt-live-1",
    parallel_tool_calls=True,
    session_seconds=2 * 60 * 60.0,
    backend_items=128,
    backend_bytes=32_768,
    sources=(
        "developers.openai.com guides/live-delegation: response.event envelopes, one "
        "function_call_output per call, response.create refused while a call is open",
        "openai-python 3.60 types/live (SessionStartEvent, ResponseEvent, ResponseCreateEvent)",
        "livekit/agents#7234 and #7266: function_call_outputs_required, session-wide gate",
        "field report, aplisay/llm-agent#320/#321: 128 items and 32,768 bytes per session, "
        "response_input_buffer_full",
        "field report, aplisay/llm-agent#306: sessions end after two hours",
    ),
)
_GPT_LIVE_11 = replace(
    _GPT_LIVE,
    family="gpt-live-1.1",
    sources=(
        *_GPT_LIVE.sources,
        "openai-python 3.60 types/live: model literal gpt-live-1.1 (no protocol change "
        "documented); apidog.com gpt-live-1-1-api (2026-11-20)",
    ),
)

#: Every known model family on every backend it is reached on.
PROFILES: tuple[ModelProfile, ...] = (
    *(
        row
        for developer in (
            _GEMINI_38_THINKING,
            _GEMINI_38,
            _GEMINI_31,
            _GEMINI_25,
            _GEMINI_LIVE_25_NATIVE,
            _GEMINI_LIVE_25,
            _GEMINI_20,
        )
        for row in (developer, _on_vertex(developer))
    ),
    _GPT_LIVE_11,
    _GPT_LIVE,
    _GPT_REALTIME_2,
    _GPT_REALTIME,
    replace(_GPT_REALTIME, family="gpt-realtime-mini"),
    replace(_GPT_REALTIME, family="gpt-4o-realtime"),
    replace(_GPT_REALTIME, family="gpt-4o-mini-realtime"),
)

#: What an unknown model gets on each backend: the documented defaults (BLOCKING unless
#: declared, NON_BLOCKING with scheduling and streamed answers on the Developer API).
#: An unknown name is taken to withhold ``turnComplete`` while a BLOCKING call runs, as the 3.x
#: and half-cascade families do (google/adk-python gemini_llm_connection.py, the cookbook).
DEVELOPER_DEFAULT = replace(_GEMINI_25, family="", known=False, turn_complete_after_call=False)
VERTEX_DEFAULT = replace(
    _on_vertex(_GEMINI_25), family="", known=False, turn_complete_after_call=False
)
OPENAI_DEFAULT = replace(_GPT_REALTIME, family="", known=False)
_DEFAULTS: dict[Backend, ModelProfile] = {
    "developer": DEVELOPER_DEFAULT,
    "vertex": VERTEX_DEFAULT,
    "openai": OPENAI_DEFAULT,
}
# Longest family first: "gemini-3.8-live-extended-thinking" before "gemini-3.8-live".
_BY_BACKEND: dict[Backend, tuple[ModelProfile, ...]] = {
    backend: tuple(
        sorted((p for p in PROFILES if p.backend == backend), key=lambda p: -len(p.family))
    )
    for backend in BACKENDS
}
#: Model names already warned about, so that a process warns once per name and backend.
_WARNED: set[tuple[str, Backend]] = set()
_WARNED_LIMIT = 256
_PREFIX = re.compile(r"^(?:projects/[^/]+/locations/[^/]+/)?(?:publishers/[^/]+/)?(?:models/)?")


def bare_model_name(model: str) -> str:
    """``model`` without the resource prefixes the SDKs add (``models/``, ``publishers/…``)."""
    return _PREFIX.sub("", model.strip())


def known_profile(model: str, backend: Backend) -> ModelProfile | None:
    """The row of ``PROFILES`` for ``model`` on ``backend``, or None for an unknown name."""
    if backend not in _DEFAULTS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    name = bare_model_name(model)
    for profile in _BY_BACKEND[backend]:
        if name == profile.family or name.startswith((profile.family + "-", profile.family + ".")):
            return profile
    return None


def families(backend: Backend) -> list[str]:
    """The model families known on ``backend``, sorted."""
    return sorted({p.family for p in _BY_BACKEND[backend]})


def profile_for(model: str, backend: Backend) -> ModelProfile:
    """The profile of ``model`` on ``backend``; an unknown name gets the backend's defaults
    (``known`` False: ``warn_unknown`` says so once the service has accepted the name)."""
    known = known_profile(model, backend)
    if known is not None:
        return known
    return _DEFAULTS[backend].named(model)


def warn_unknown(profile: ModelProfile) -> None:
    """One warning per process for a model the table does not know, naming it."""
    key = (profile.family, profile.backend)
    if profile.known or key in _WARNED or len(_WARNED) >= _WARNED_LIMIT:
        return
    _WARNED.add(key)
    log.warning(
        "model %r is not in livebridge's model profiles (%s); it is treated with the %s "
        "defaults: BLOCKING unless declared otherwise%s. Pass SessionOptions(profile=...) if "
        "it behaves differently",
        profile.family,
        ", ".join(families(profile.backend)),
        profile.backend,
        ", NON_BLOCKING with scheduling and streamed answers"
        if profile.backend == "developer"
        else "",
    )
