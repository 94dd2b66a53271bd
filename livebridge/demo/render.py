"""The demo in a terminal: the conversation as it happens, a timeline per exchange, a summary.

Colours are plain ANSI escapes, used only when the output is a terminal (and ``NO_COLOR`` is unset).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TextIO

from livebridge.calls.endings import colour
from livebridge.demo.driver import CallView, Exchange, serial_and_actual

BAR_WIDTH = 32
_INDENT = " " * 9


def use_colour(stream: TextIO) -> bool:
    """Colour only for a terminal, and never when ``NO_COLOR`` is set."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


class Terminal:
    """Writes the demo to ``stream`` as it runs."""

    def __init__(self, stream: TextIO, *, colour: bool | None = None) -> None:
        self.stream = stream
        self.colour = use_colour(stream) if colour is None else colour

    def _paint(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def _line(self, text: str = "") -> None:
        print(text, file=self.stream, flush=True)

    # -- the conversation ------------------------------------------------------------------

    def start(self, metrics_url: str | None, emulator_url: str) -> None:
        self._line(self._paint("1", "livebridge demo") + " · a voice travel agent, offline")
        self._line(f"  emulator  {emulator_url}  (a local Live API server; no key, no network)")
        if metrics_url:
            scrape = "scrape it while the demo runs; --hold keeps it up afterwards"
            self._line(f"  metrics   {self._paint('4', metrics_url)}  ({scrape})")
        self._line()

    def user(self, text: str, *, barge_in: bool = False) -> None:
        label = "you ⚡" if barge_in else "you"
        self._line(self._paint("1;36", f"{label:<7}") + f"> {text}")

    def model(self, text: str) -> None:
        self._line(self._paint("1;34", f"{'model':<7}") + f"> {text}")

    def call_started(self, call: CallView) -> None:
        arguments = _arguments(call.args)
        kind = " (NON_BLOCKING)" if call.behavior == "NON_BLOCKING" else ""
        self._line(self._paint("2", f"{_INDENT}→ {call.name}({arguments}){kind}"))

    def notice(self, text: str) -> None:
        self._line(self._paint("33", f"{_INDENT}» {text}"))

    def exchange_done(self, exchange: Exchange) -> None:
        if exchange.calls:
            for line in self.timeline(exchange):
                self._line(line)
        self._line()

    # -- timeline and summary --------------------------------------------------------------

    def timeline(self, exchange: Exchange) -> list[str]:
        """One bar per call, scaled to the exchange's time; then serial versus actual."""
        calls = exchange.calls
        scale = max(max(c.end, c.turnaround or 0.0) for c in calls) or 1.0
        name_width = max(len(c.name) for c in calls)
        lines = [self._paint("2", f"{_INDENT}timeline (0 → {_duration(scale)})")]
        for call in calls:
            first = min(BAR_WIDTH - 1, int(call.start / scale * BAR_WIDTH))
            last = max(first + 1, min(BAR_WIDTH, round(call.end / scale * BAR_WIDTH)))
            outcome = call.outcome or "?"
            bar = " " * first + "█" * (last - first) + " " * (BAR_WIDTH - last)
            code = colour(outcome)
            lines.append(
                f"{_INDENT}{call.name:<{name_width}}  {self._paint(code, f'{outcome:<10}')}"
                f"▕{self._paint(code, bar)}▏ {_duration(call.latency):>7}  {_detail(call)}"
            )
        for batch in exchange.batches():
            if len(batch) > 1:
                serial, actual = serial_and_actual(batch)
                speedup = f" ({serial / actual:.1f}x faster)" if actual > 0 else ""
                lines.append(
                    f"{_INDENT}a serial loop would have taken {self._paint('1', _duration(serial))}"
                    f"; answered in {self._paint('1', _duration(actual))}"
                    f", all {len(batch)} answered together{speedup}"
                )
        return [line.rstrip() for line in lines]

    def summary(self, summary: Mapping[str, Any]) -> None:
        outcomes = " · ".join(
            self._paint(colour(kind), f"{kind} {count}")
            for kind, count in summary["outcomes"].items()
            if count
        )
        turnaround = summary["turnaround_ms"]
        wire = summary["transcript"]
        violations = summary["violations"]
        verdict = (
            self._paint("1;32", "PASS: every call got exactly one answer")
            if summary["ok"]
            else self._paint("1;31", "FAIL")
        )
        rows = [
            ("calls", f"{summary['calls']}   {outcomes}"),
            (
                "turnaround",
                f"p50 {turnaround['p50']:.0f} ms · p95 {turnaround['p95']:.0f} ms · "
                f"max {turnaround['max']:.0f} ms  (toolCall received → answer sent)",
            ),
            (
                "wire",
                f"{wire['function_calls']} function calls, {wire['function_responses']} function "
                f"responses, {wire['cancelled_calls']} cancelled by the server, "
                f"{summary['connections']} connections",
            ),
            (
                "violations",
                self._paint("32" if not violations else "1;31", str(violations))
                + " (contract checked by the emulator on every message)",
            ),
            ("lost calls", str(summary["lost_calls"])),
            ("elapsed", f"{summary['elapsed_s']:.1f} s"),
        ]
        self._line(self._paint("1", "summary"))
        for label, value in rows:
            self._line(f"  {label:<11} {value}")
        for detail in summary["violation_details"]:
            self._line(f"  {detail['severity']}: {detail['kind']}: {detail['message']}")
        for error in summary["scenario_errors"]:
            self._line(f"  scenario error: {error}")
        self._line(verdict)


def _arguments(args: Any) -> str:
    if not isinstance(args, Mapping):
        return repr(args)
    return ", ".join(f"{key}={value!r}" for key, value in args.items())


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _detail(call: CallView) -> str:
    if call.outcome == "cancelled":
        return "withdrawn by the server; nothing sent"
    if call.error:
        return call.error
    if call.responses > 1:
        return f"streamed: {call.responses} responses (will_continue)"
    return ""
