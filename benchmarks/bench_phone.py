"""The phone bridge's audio path: CPU per second of call audio, stage by stage.

A call moves 8 kHz μ-law both ways in 20 ms frames: in, each Twilio ``media`` frame is decoded
(JSON, base64), expanded to PCM16 and resampled to the vendor's input rate (16 kHz Gemini,
24 kHz OpenAI, or left as is for ``audio/pcmu``); out, the model's 24 kHz PCM16 is resampled
to 8 kHz, compressed to μ-law and framed. Each stage runs on real 20 ms frames (a tone, so
the resampler does real work) for ``SECONDS`` of audio; reported is CPU time
(``time.process_time``) per second of audio and the calls one core could carry on this path
alone. Then N whole calls through the bridge (``phone_calls``: the bridge pinned to one core,
frame lag to p99) next to N of ``bench_sessions``'s browser-style sessions, and (``--search``)
the most calls one core carries with the p99 frame lag, the worst half-second left out, within
``bench_sessions.LAG_LIMIT_MS``: the bracket doubled then halved, as ``bench_sessions`` searches
sessions, the median of up to three trials deciding each N.

Run with ``python -m benchmarks.bench_phone`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import base64
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from benchmarks import bench_sessions, phone_calls
from benchmarks.server import Server, serve
from livebridge.phone.audio import PHONE_RATE, Resampler, pcm16_to_ulaw, ulaw_to_pcm16
from livebridge.phone.playout import FRAME_BYTES, Playout
from livebridge.phone.twilio import TwilioStream

SECONDS = 60.0
QUICK_SECONDS = 2.0
#: Calls at once probed next to as many sessions, and for how long.
CALLS = (10, 25, 35, 50)
QUICK_CALLS = (2,)
CALL_SECONDS = 6.0
QUICK_CALL_SECONDS = 1.0
MODEL_RATE = 24_000


def _tone(rate: int, seconds: float) -> bytes:
    t = np.arange(int(rate * seconds)) / rate
    return (8000 * np.sin(2 * np.pi * 440 * t)).astype("<i2").tobytes()


def _frames(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data) - size + 1, size)]


def _cpu_ms_per_second(work: Callable[[], object], seconds: float) -> float:
    started = time.process_time()
    work()
    return (time.process_time() - started) * 1000 / seconds


def measure(seconds: float) -> list[tuple[str, float]]:
    """(stage, CPU ms per second of audio) for every stage of both directions."""
    stream = TwilioStream()
    stream.receive(json.dumps({"event": "start", "start": {"streamSid": "MZ1"}}))
    ulaw_in = pcm16_to_ulaw(_tone(PHONE_RATE, seconds))
    media = [
        json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": p}})
        for p in (base64.b64encode(f).decode() for f in _frames(ulaw_in, FRAME_BYTES))
    ]
    pcm8 = [ulaw_to_pcm16(f) for f in _frames(ulaw_in, FRAME_BYTES)]
    model = _frames(_tone(MODEL_RATE, seconds), MODEL_RATE // 25 * 2)  # 40 ms chunks
    down = Resampler(MODEL_RATE, PHONE_RATE)
    pcm_out = [down(chunk) for chunk in model]
    ulaw_out = [pcm16_to_ulaw(p) for p in pcm_out]
    playout = Playout()

    def up(rate: int) -> Callable[[], object]:
        resampler = Resampler(PHONE_RATE, rate)
        return lambda: [resampler(p) for p in pcm8]

    def resample_down() -> None:
        resampler = Resampler(MODEL_RATE, PHONE_RATE)
        for chunk in model:
            resampler.view(chunk)  # what the bridge hands the μ-law encoder

    def frame_out() -> None:
        for chunk in ulaw_out:
            for frame in playout.audio(chunk, 0.0):
                stream.media(frame)

    stages: list[tuple[str, Callable[[], object]]] = [
        ("in: Twilio frame decode (JSON, base64)", lambda: [stream.receive(m) for m in media]),
        ("in: μ-law → PCM16", lambda: [ulaw_to_pcm16(f) for f in _frames(ulaw_in, FRAME_BYTES)]),
        ("in: resample 8 → 16 kHz (Gemini)", up(16_000)),
        ("in: resample 8 → 24 kHz (OpenAI)", up(24_000)),
        ("out: resample 24 → 8 kHz", resample_down),
        ("out: PCM16 → μ-law", lambda: [pcm16_to_ulaw(p) for p in pcm_out]),
        ("out: 20 ms frames, playout, Twilio frame encode", frame_out),
    ]
    return [(name, _cpu_ms_per_second(work, seconds)) for name, work in stages]


def table(seconds: float) -> list[str]:
    results = measure(seconds)
    lines = [
        f"| stage ({seconds:.0f} s of audio) | CPU ms per audio second | share of a core |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {ms:.3f} | {ms / 10:.3f} % |" for name, ms in results]
    gemini = sum(ms for name, ms in results if "OpenAI" not in name)
    openai = sum(ms for name, ms in results if "Gemini" not in name)
    # audio/pcmu: no resampling and no encoding; μ-law is expanded only to hear the caller's
    # speech end (the latency metric)
    pcmu = sum(ms for name, ms in results if "resample" not in name and "→ μ-law" not in name)
    lines += [
        f"| **a Gemini call, both ways** | {gemini:.3f} | {gemini / 10:.3f} % |",
        f"| **an OpenAI call (24 kHz PCM), both ways** | {openai:.3f} | {openai / 10:.3f} % |",
        f"| **an OpenAI call (audio/pcmu), both ways** | {pcmu:.3f} | {pcmu / 10:.3f} % |",
        "",
        f"calls per core on the audio path alone: Gemini {1000 / gemini:.0f}, "
        f"OpenAI {1000 / openai:.0f} (audio/pcmu: {1000 / pcmu:.0f})",
    ]
    return lines


def calls_table(server: Server, counts: Sequence[int], seconds: float) -> list[str]:
    """N phone calls (``phone_calls``) next to N browser-style sessions (``bench_sessions``),
    each in a process pinned to one core, audio both ways at real time."""
    lines = [
        f"| calls at once ({seconds:.0f} s) | phone: bridge cores | p99 frame lag ms "
        "| steady p99 ms | sessions: client cores | p99 ms | steady p99 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count in counts:
        phone = phone_calls.run_probe(server, count, seconds)
        session = bench_sessions.run_probe(server, "livebridge", count, seconds)
        lines.append(
            f"| {count} | {phone['cores']:.2f} | {phone['p99_ms']:.1f} "
            f"| {phone['steady_p99_ms']:.1f} | {session['cores']:.2f} "
            f"| {session['p99_ms']:.1f} | {session['steady_p99_ms']:.1f} |"
        )
    return lines


def trial_calls(
    server: Server, calls: int, search: bench_sessions.Search, say: Callable[[str], None]
) -> tuple[bool, dict[str, float]]:
    """Probe ``calls`` up to ``search.trials`` times; passed if the median trial did."""
    limit = bench_sessions.LAG_LIMIT_MS
    results: list[dict[str, float]] = []
    for trial in range(1, search.trials + 1):
        result = phone_calls.run_probe(server, calls, search.seconds)
        results.append(result)
        say(
            f"  calls={calls} trial {trial}: p99 frame lag {result['p99_ms']:.1f} ms, steady "
            f"{result['steady_p99_ms']:.1f} ms, {result['cores']:.2f} cores"
        )
        passes = [r["steady_p99_ms"] <= limit for r in results]
        if passes.count(True) * 2 > search.trials or passes.count(False) * 2 > search.trials:
            break  # the median is decided
    results.sort(key=lambda r: r["steady_p99_ms"])
    median = results[len(results) // 2]
    return median["steady_p99_ms"] <= limit, median


def calls_per_core(
    server: Server, search: bench_sessions.Search, say: Callable[[str], None]
) -> tuple[int, int | None, dict[str, float]]:
    """The most calls that pass, the fewest that failed (None: none did), and the median trial
    of the most: double from ``search.start`` until one fails, then bisect to an eighth."""
    deadline = time.monotonic() + search.budget
    good, good_result, bad = 0, {}, None
    calls = search.start
    while calls <= search.cap:
        passed, result = trial_calls(server, calls, search, say)
        if not passed:
            bad = calls
            break
        good, good_result = calls, result
        if time.monotonic() >= deadline:
            break
        calls *= 2
    while bad is not None and bad - good > max(2, good // 8) and time.monotonic() < deadline:
        calls = (good + bad) // 2
        passed, result = trial_calls(server, calls, search, say)
        if passed:
            good, good_result = calls, result
        else:
            bad = calls
    return good, bad, good_result


CALLS_SEARCH = bench_sessions.Search(start=10, seconds=6.0, trials=3, budget=600.0)
QUICK_CALLS_SEARCH = bench_sessions.Search(start=2, seconds=1.0, trials=1, budget=1.0)


def search_table(server: Server, search: bench_sessions.Search) -> list[str]:
    calls, over, result = calls_per_core(server, search, bench_sessions.progress)
    return [
        f"| calls per core at p99 frame lag ≤ {bench_sessions.LAG_LIMIT_MS:g} ms | calls "
        "| first over | bridge cores | steady p99 ms |",
        "|---|---:|---:|---:|---:|",
        f"| Gemini-style 24 kHz model audio | {calls} | {'—' if over is None else over} "
        f"| {result.get('cores', float('nan')):.2f} "
        f"| {result.get('steady_p99_ms', float('nan')):.1f} |",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument(
        "--calls", type=int, nargs="*", help=f"calls at once to probe (default {CALLS})"
    )
    parser.add_argument(
        "--search", action="store_true", help="search the most calls a core carries"
    )
    options = parser.parse_args(argv)
    print("\n".join(table(QUICK_SECONDS if options.quick else SECONDS)), end="\n\n")
    counts = options.calls or (QUICK_CALLS if options.quick else CALLS)
    seconds = QUICK_CALL_SECONDS if options.quick else CALL_SECONDS
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        print("\n".join(calls_table(server, counts, seconds)), end="\n\n", flush=True)
        if options.search:
            search = QUICK_CALLS_SEARCH if options.quick else CALLS_SEARCH
            print("\n".join(search_table(server, search)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
