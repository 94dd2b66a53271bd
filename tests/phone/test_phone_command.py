"""``livebridge phone`` and ``livebridge demo --phone``: served for real, errors in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from websockets.exceptions import InvalidStatus

from livebridge.cli.main import main
from livebridge.demo.phone import QUESTION, PhoneScript
from livebridge.emulator import Emulator
from livebridge.phone.caller import SimulatedCaller, ring, speech
from livebridge.phone.gate import stream_url, twiml
from tests.cli.test_cli_errors import OFFLINE, REPOSITORY, busy_port, livebridge, one_line_failure
from tests.support.timing import seconds

TOKEN = "a-token-for-the-tests"
UNCHECKED = "--no-signature-check"

__all__ = ["busy_port"]  # the fixture, shared


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("phone", "examples.nowhere:tools", "--emulator"), ["no module named"]),
        (("phone", "examples.embedded:tools"), ["no API key", "--emulator"]),
        (("phone", "examples.embedded:tools", "--vendor", "openai"), ["OPENAI_API_KEY"]),
        (("phone", "examples.embedded:tools", "--port", "70000"), ["70000 is not a port"]),
        (("phone", "examples.embedded:tools", "--policy", "fast"), ["bad --policy 'fast'"]),
        (
            ("phone", "examples.embedded:tools", "--emulator"),
            ["livebridge phone: no TWILIO_AUTH_TOKEN", UNCHECKED],
        ),
        (
            ("phone", "examples.embedded:tools", "--emulator", "--public-url", "http://a.example"),
            ["--public-url must be https://", "wss://", "not 'http://a.example'"],
        ),
        (
            ("phone", "examples.embedded:tools", "--emulator", "--public-url", "not a url"),
            ["--public-url must be https://", "not 'not a url'"],
        ),
        (
            ("phone", "examples.embedded:tools", "--emulator", "--public-url", "https://"),
            ["--public-url must be https://"],
        ),
        (("phone", "examples.embedded:tools", "--max-calls", "0"), ["0 calls: allow at least 1"]),
        (
            ("phone", "examples.embedded:tools", "--emulator", "--provider", "telnyx"),
            ["livebridge phone: no TELNYX_PUBLIC_KEY", UNCHECKED],
        ),
        (("phone", "examples.embedded:tools", "--max-calls", "many"), ["'many' is not a number"]),
    ],
)
def test_phone_usage_errors(args: tuple[str, ...], expected: list[str]) -> None:
    one_line_failure(livebridge(*args), *expected)


def test_phone_on_a_busy_port(busy_port: int) -> None:
    result = livebridge(
        "phone", "examples.embedded:tools", "--emulator", UNCHECKED, "--port", str(busy_port)
    )
    one_line_failure(result, f"cannot listen on 127.0.0.1:{busy_port}", "--port")


def test_twiml_streams_to_the_public_address_then_hangs_up() -> None:
    assert stream_url("https://abc.example/", None) == "wss://abc.example/twilio"
    assert stream_url(None, "phone.example:8443") == "wss://phone.example:8443/twilio"
    assert twiml("wss://abc.example/twilio").endswith(
        '<Response><Connect><Stream url="wss://abc.example/twilio"/></Connect>'
        "<Hangup/></Response>\n"
    )


@pytest.fixture
def phone_server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``livebridge phone`` on the emulator, and the stream URL it printed."""
    command = ["phone", "examples.embedded:tools", "--emulator", "--port", "0"]
    process = subprocess.Popen(
        [sys.executable, "-m", "livebridge", *command, "--public-url", "https://agent.example"],
        cwd=REPOSITORY,
        env={**OFFLINE, "PYTHONUNBUFFERED": "1", "TWILIO_AUTH_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on ws://127.0.0.1:"), line
        yield process, line.split()[-1]
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


async def test_the_command_answers_a_signed_call_on_the_emulator(
    phone_server: tuple[subprocess.Popen[str], str],
) -> None:
    process, url = phone_server
    webhook = url.replace("ws://", "http://").replace("/twilio", "/twiml")
    public = "https://agent.example/twiml"
    assert (await ring(webhook, auth_token=TOKEN)).status == 403  # signed over the wrong URL
    for method in ("POST", "GET"):
        rung = await ring(webhook, auth_token=TOKEN, signed_url=public, method=method)
        assert rung.status == 200, rung
        assert rung.stream_url == "wss://agent.example/twilio"
    with pytest.raises(InvalidStatus):
        async with SimulatedCaller.dial(url):
            pass
    async with SimulatedCaller.dial(url, auth_token=TOKEN, signed_url=rung.stream_url) as caller:
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), 20)
    process.send_signal(signal.SIGTERM)
    assert await anyio.to_thread.run_sync(lambda: process.wait(timeout=seconds(20))) == 0
    assert process.stdout is not None
    assert "signatures: checked with TWILIO_AUTH_TOKEN" in process.stdout.read()


def test_demo_phone_prints_what_the_caller_heard(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--phone"]) == 0
    out = capsys.readouterr().out
    assert "the stream closed (code 1000); the caller heard:" in out
    assert "s of the model's speech" in out
    assert out.rstrip().endswith("call ended: hung_up")


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``python -m livebridge ARGS``, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "livebridge", *args],
        cwd=REPOSITORY,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_the_command_gives_its_persona_to_the_model_and_logs_each_call(
    tmp_path: Path,
) -> None:
    from tests.phone.test_phone_agent import persona, setups

    persona_file = tmp_path / "persona.txt"
    persona_file.write_text("You are Ada, the bakery's voice. Be warm.\n", encoding="utf-8")
    async with Emulator(PhoneScript()) as emu:
        command = ["phone", "examples.embedded:tools", UNCHECKED, "--port", "0"]
        persona_args = ["--instructions", f"@{persona_file}", "--voice", "Kore"]
        process = spawn([*command, *persona_args], {**OFFLINE, **emu.env()})
        try:
            assert process.stdout is not None and process.stderr is not None
            line = await anyio.to_thread.run_sync(process.stdout.readline)
            assert line.startswith("listening on ws://127.0.0.1:"), line
            url = line.split()[-1]
            sid = "CA000000000000000000000000000000ad"
            async with SimulatedCaller.dial(url, call_sid=sid):
                await emu.wait_for(lambda: len(setups(emu, 0)) == 1, seconds(20))
            process.send_signal(signal.SIGTERM)
            assert await anyio.to_thread.run_sync(lambda: process.wait(timeout=seconds(20))) == 0
            log = process.stderr.read()
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
    assert persona(setups(emu, 0)[0]) == ("You are Ada, the bakery's voice. Be warm.\n", "Kore")
    # (a third line says so if the caller left while the session still opened)
    (started,) = [line for line in log.splitlines() if f"call {sid} started" in line]
    (ended,) = [line for line in log.splitlines() if f"call {sid} ended after" in line]
    assert f"livebridge phone: call {sid} started" in started
    assert f"livebridge phone: call {sid} ended after" in ended
    assert "(caller_hung_up): tool calls none" in ended


def test_instructions_from_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.txt"
    binary = tmp_path / "persona.bin"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    base = ("phone", "examples.embedded:tools", "--emulator", UNCHECKED, "--instructions")
    one_line_failure(livebridge(*base, f"@{missing}"), "cannot read --instructions")
    one_line_failure(livebridge(*base, f"@{binary}"), "is not UTF-8 text")
    one_line_failure(
        livebridge("phone", "livebridge.phone.agent:GEMINI_MODEL", "--emulator", UNCHECKED),
        "is of type str",
        "PhoneAgent",
    )


@pytest.mark.slow
async def test_the_command_answers_a_signed_telnyx_call_and_refuses_a_bad_key() -> None:
    from tests.phone.test_phone_telnyx import KEY, PUBLIC

    bad = spawn(
        ["phone", "examples.embedded:tools", "--emulator", "--provider", "telnyx"],
        {**OFFLINE, "TELNYX_PUBLIC_KEY": "not-a-key"},
    )
    _, err = await anyio.to_thread.run_sync(lambda: bad.communicate(timeout=seconds(60)))
    assert bad.returncode == 2
    assert err.strip().splitlines() == [
        "livebridge phone: TELNYX_PUBLIC_KEY: the Telnyx public key must be the base64 of a "
        "32-byte Ed25519 key (Mission Control: Account Settings → Keys & Credentials → Public "
        "Key)"
    ]
    command = ["phone", "examples.embedded:tools", "--emulator", "--provider", "telnyx"]
    process = spawn([*command, "--port", "0"], {**OFFLINE, "TELNYX_PUBLIC_KEY": PUBLIC})
    try:
        assert process.stdout is not None
        line = await anyio.to_thread.run_sync(process.stdout.readline)
        assert line.startswith("listening on ws://127.0.0.1:") and line.rstrip().endswith(
            "/telnyx"
        ), line
        webhook = line.split()[-1].replace("ws://", "http://").replace("/telnyx", "/texml")
        assert (await ring(webhook)).status == 403
        rung = await ring(webhook, telnyx_key=KEY)
        assert rung.status == 200 and rung.stream_url is not None
        stream = rung.stream_url.replace("wss://", "ws://")
        async with SimulatedCaller.dial(stream, provider="telnyx") as caller:
            await caller.say(speech(QUESTION))
            await caller.wait_until(lambda: bool(caller.echoed), 20)
        process.send_signal(signal.SIGTERM)
        assert await anyio.to_thread.run_sync(lambda: process.wait(timeout=seconds(20))) == 0
        assert "signatures: checked with TELNYX_PUBLIC_KEY" in process.stdout.read()
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
