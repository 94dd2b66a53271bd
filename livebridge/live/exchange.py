"""One exchange: everything the model says and does about the app's last input, late answers
included.

Reading events "until ``TurnComplete``" is wrong as soon as a tool is NON_BLOCKING: the model
ends its turn while the call still runs ("I'm booking it"), and when the answer arrives it
speaks again in a turn of its own. An app that stopped at the first ``TurnComplete`` sends its
next input while that reply is still due, and the reply's ``TurnComplete`` then ends the *next*
read before that question's calls arrive. ``ExchangeTracker`` says when the model is really
done; ``LiveSession.exchange()`` reads events until then.

The rules, fed the session's events in order:

- a call is open from ``ToolCallStarted`` to its ``ToolCallSettled``;
- a NON_BLOCKING call answered with a scheduling that makes the model speak (``WHEN_IDLE``,
  ``INTERRUPT``, or none stated) makes a reply due: the first ``TurnComplete`` after the model
  said something *after the latest such answer* is that reply's end (a ``TurnComplete`` with no
  output since closes the turn that was already under way). ``SILENT`` answers owe nothing;
- the exchange ends at a ``TurnComplete`` that leaves no call open and no reply owed, or at
  ``Closed``.

A result that overrides its tool's scheduling per result is judged by the tool's own default.
"""

from __future__ import annotations

from livebridge.calls.tools import ToolRegistry
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    OutputTranscript,
    SessionEvent,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)


class ExchangeTracker:
    """Sans-I/O: ``feed`` each event in order; it returns True for the event that ends the
    exchange."""

    __slots__ = ("_due", "_open", "_spoke", "_tools")

    def __init__(self, tools: ToolRegistry) -> None:
        self._tools = tools
        self._open: dict[str, bool] = {}  # call id -> answering it makes the model speak
        self._due = False  # an answer went out that the model has not spoken about yet
        self._spoke = False  # output since the latest such answer

    @property
    def open_calls(self) -> int:
        """Calls started and not yet settled."""
        return len(self._open)

    @property
    def reply_due(self) -> bool:
        """An answer went out that the model has not yet finished speaking about."""
        return self._due

    def feed(self, event: SessionEvent) -> bool:
        match event:
            case ToolCallStarted(call_id=call_id, name=name, behavior=behavior):
                tool = self._tools.get(name)
                silent = tool is not None and tool.scheduling == "SILENT"
                self._open[call_id] = behavior == "NON_BLOCKING" and not silent
            case ToolCallSettled(call_id=call_id, turnaround=turnaround):
                speaks = self._open.pop(call_id, False)
                if speaks and turnaround is not None:  # an answer went out
                    self._due = True
                    self._spoke = False
            case AudioOut() | TextOut() | OutputTranscript():
                self._spoke = True
            case TurnComplete():
                if self._spoke:
                    self._due = False
                return not self._open and not self._due
            case Closed():
                return True
        return False
