"""What every live protocol reports the same way: answers sent, fates, orphans, message counts.

The ledger decides what happened to each call; a ``Reporter`` turns that into the app's
``ToolCallSettled`` events and, when observers listen, the observer notices (``AnswerSent``,
``CallOrphaned``, ``MessageSeen``). Message counts are batched: one notice per kind every
``SEEN_BATCH`` messages, and whenever the protocol flushes (each turn, batch and at close).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Mapping

from livebridge.calls.call import Behavior
from livebridge.calls.ledger import CallLedger
from livebridge.calls.lives import Outgoing
from livebridge.calls.observers import (
    AnswerSent,
    CallOrphaned,
    Direction,
    MessageSeen,
    TurnMeasured,
)
from livebridge.calls.tools import ToolRegistry
from livebridge.protocol.actions import Notify, Output
from livebridge.protocol.events import ToolCallSettled

log = logging.getLogger("livebridge.live.session")  # the session's own log, as before

#: Messages counted before their ``MessageSeen`` notices go out without waiting for a flush.
SEEN_BATCH = 256
_KIND = operator.attrgetter("fate")
_ANSWERED = frozenset({"answered"})


class Reporter:
    """One protocol's reporting; ``session`` gives the current session id."""

    __slots__ = ("_pending", "_seen", "observed", "session", "tools")

    def __init__(
        self, tools: ToolRegistry, observed: bool, session: Callable[[], str | None]
    ) -> None:
        self.tools = tools
        self.observed = observed
        self.session = session
        self._seen: dict[tuple[Direction, str], int] = {}
        self._pending = 0

    def answers(self, sent: Outgoing, out: list[Output]) -> None:
        """The answers of one sent message: a ``ToolCallSettled`` each, one ``AnswerSent``."""
        append = out.append
        for answer in sent.answered:
            outcome = answer.outcome
            if outcome is not None:  # else a streamed item, with no event of its own
                append(
                    ToolCallSettled(
                        outcome.call_id,
                        outcome.name,
                        "answered",
                        outcome.kind,
                        outcome.latency,
                        answer.turnaround,
                        outcome.response.get("error"),
                    )
                )
        if not self.observed:
            return
        finals = [answer for answer in sent.answered if answer.outcome is not None]
        if finals:
            outcomes = [answer.outcome for answer in finals if answer.outcome is not None]
            event = AnswerSent(
                self.session(),
                outcomes,
                [answer.turnaround for answer in finals],
                [answer.behavior for answer in finals],
                [outcome.name in self.tools for outcome in outcomes],
            )
            out.append(Notify(event))

    def fates(
        self,
        ledger: CallLedger,
        out: list[Output],
        *,
        closed: str | None = None,
        reasons: Mapping[str, str] | None = None,
    ) -> None:
        """Fates the ledger decided since the last look, other than answered.

        ``closed`` replaces the ledger's "session closed" reason; ``reasons`` rewrites others
        into the vendor's own words.
        """
        if not ledger.waiting:
            return
        fates = ledger.take_fates()
        if _ANSWERED.issuperset(map(_KIND, fates)):  # only answers (just sent)
            fates = []
        for fate in fates:
            if fate.fate == "answered":
                continue
            why = fate.reason
            if closed is not None and why == "session closed":
                why = closed
            elif reasons is not None:
                why = reasons.get(why, why)
            out.append(
                ToolCallSettled(fate.call_id, fate.name, fate.fate, None, fate.latency, reason=why)
            )
            if fate.fate == "orphaned":
                self.orphaned(fate.call_id, fate.name, fate.behavior, why, out)
        for notice in ledger.take_notices():  # duplicates, late cancels: worth a log line
            log.info("call %s: %s (%s)", notice.call_id, notice.detail, notice.kind)

    def close(
        self,
        ledger: CallLedger,
        now: float,
        why: str,
        out: list[Output],
        *,
        reasons: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The session is over: report what was decided, orphan every call without a fate
        (``why``), and return the ids whose handlers must be cancelled."""
        self.fates(ledger, out, reasons=reasons)
        orphaned = ledger.close(now)
        self.fates(ledger, out, closed=why, reasons=reasons)
        return orphaned

    def orphaned(
        self, call_id: str, name: str, behavior: Behavior, why: str, out: list[Output]
    ) -> None:
        """A call that will never be answered: logged, and a ``CallOrphaned`` notice."""
        log.warning("call %s (%s) orphaned: %s", call_id, name, why)
        if self.observed:
            known = name in self.tools
            out.append(Notify(CallOrphaned(self.session(), call_id, name, behavior, why, known)))

    def turn(
        self,
        first_output: float | None,
        tokens: tuple[int | None, int | None],
        out: list[Output],
    ) -> None:
        """The model ended a turn: how soon it answered the user, and its tokens."""
        if self.observed:
            out.append(Notify(TurnMeasured(self.session(), first_output, *tokens)))

    def count(self, direction: Direction, kind: str, out: list[Output]) -> None:
        """Count one message (only called when observed)."""
        key = (direction, kind)
        self._seen[key] = self._seen.get(key, 0) + 1
        self._pending += 1
        if self._pending >= SEEN_BATCH:
            self.flush_seen(out)

    def flush_seen(self, out: list[Output]) -> None:
        """Report the messages counted since the last flush."""
        if not self._pending:
            return
        seen, self._seen, self._pending = self._seen, {}, 0
        session = self.session()
        for (direction, kind), count in seen.items():
            out.append(Notify(MessageSeen(session, direction, kind, count)))
