"""Every Python block of README.md runs as shown, against the emulator, in its own interpreter.

Each block is found under its section heading and run in the form the README gives it: a whole
program as is; a fragment inside the program the README says it belongs to. The programs reach
the emulator only through the environment lines ``Emulator.env()`` prints, as a user's would.
A new block in a section this file does not know fails until it says how to run it.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from livebridge.emulator import Emulator

REPOSITORY = Path(__file__).resolve().parent.parent
README = REPOSITORY / "README.md"
TIMEOUT = 90


@dataclass(frozen=True)
class Block:
    section: str
    code: str


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, with the heading each sits under."""
    blocks: list[Block] = []
    section = ""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif line.startswith("```"):
            body = []
            for inner in lines:
                if inner.startswith("```"):
                    break
                body.append(inner)
            if line.strip() == "```python":
                blocks.append(Block(section, "\n".join(body) + "\n"))
    return blocks


BLOCKS = python_blocks(README.read_text())


def block(section: str) -> str:
    (found,) = [b.code for b in BLOCKS if b.section == section]
    return found


def offline_environment(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_GEMINI_BASE_URL",
            "SSL_CERT_FILE",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
        )
    }
    return env | extra


def run_python(code: str, env: dict[str, str], cwd: Path) -> str:
    """Run ``code`` as a script; its standard output, after checking it exited cleanly."""
    script = cwd / "block.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator() as emu:  # serves from its own thread: the tests may block
        yield emu


def test_every_block_has_a_way_to_run() -> None:
    known = {
        "Quickstart",
        "Two vendors, one registry",
        "Metrics and dashboard",
        "Answering a Gemini generate_content turn",
        "Test your own Live app offline",
        "Performance",
        "Record and replay",  # run by tests/test_replay_cli.py
    }
    unknown = [b.section for b in BLOCKS if b.section not in known]
    assert not unknown, f"tell tests/test_readme.py how to run the Python blocks of {unknown}"
    assert len(BLOCKS) >= 5


async def test_quickstart(emulator: Emulator, tmp_path: Path) -> None:
    out = run_python(block("Quickstart"), offline_environment(**emulator.env()), tmp_path)
    # The emulator's model asks the weather of every place it reads ("Chez Janou" too).
    assert out.count("[get_weather: ok in") >= 2
    assert "Paris: " in out and "Rome: " in out
    assert emulator.violations == []


@pytest.mark.parametrize("vendor", ["gemini", "openai"])
async def test_two_vendors_one_registry(vendor: str, tmp_path: Path) -> None:
    async with Emulator(protocol="openai" if vendor == "openai" else "gemini") as emu:
        env = offline_environment(**emu.env(), LIVE_VENDOR=vendor)
        out = run_python(block("Two vendors, one registry"), env, tmp_path)
        assert "[get_weather: ok]" in out and "sunny" in out
        assert [v for v in emu.violations if v.severity == "error"] == []


def quickstart_tools() -> str:
    """The Quickstart's imports and tools: what the other sections' fragments build on."""
    code = block("Quickstart")
    return code[: code.index("async def main")]


async def test_metrics_fragment_next_to_a_session(emulator: Emulator, tmp_path: Path) -> None:
    # The fragment's fixed port is made free: tests on this machine run side by side.
    fragment = block("Metrics and dashboard").replace("serve(9464)", "serve(0)")
    session = """
import urllib.request

async def converse() -> None:
    async with livebridge.LiveSession.connect(
        genai.Client(), model="gemini-live", tools=tools, observers=observers,
        config={"response_modalities": ["AUDIO"]},
    ) as session:
        await session.send_text("Weather in Paris and Rome?")
        async for event in session.events():
            if isinstance(event, TurnComplete):
                break

anyio.run(converse)
with urllib.request.urlopen(endpoint.url, timeout=10) as response:
    print(response.read().decode())
"""
    program = quickstart_tools() + fragment + session
    out = run_python(program, offline_environment(**emulator.env()), tmp_path)
    assert (
        'livebridge_tool_calls_total{behavior="BLOCKING",function="get_weather",outcome="ok"} 2.0'
        in out
    )
    assert emulator.violations == []


@pytest.mark.parametrize("mode", ["auto", "strict"])
def test_pytest_fixture_snippet(tmp_path: Path, mode: str) -> None:
    # Used as the README says: a test in the app's suite, with the app's own config; in strict
    # mode the test is marked, as the README says.
    test_file = tmp_path / "test_app.py"
    config = 'my_config = {"response_modalities": ["TEXT"]}\n\n'
    if mode == "strict":
        config = "import pytest\n\npytestmark = pytest.mark.asyncio\n" + config
    test_file.write_text(config + block("Test your own Live app offline"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            f"asyncio_mode={mode}",
        ],
        cwd=tmp_path,
        env=offline_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


async def test_performance_client_line(emulator: Emulator, tmp_path: Path) -> None:
    prelude = "import anyio\nfrom google import genai\nfrom google.genai import types\n"
    prelude += "import livebridge\n"
    use = """
async def main() -> None:
    config = {"response_modalities": ["TEXT"]}
    async with client.aio.live.connect(model="gemini-live", config=config) as session:
        await session.send_realtime_input(text="hello")
        async for message in session.receive():
            if message.server_content and message.server_content.turn_complete:
                print("turn complete")
                break

anyio.run(main)
"""
    out = run_python(
        prelude + block("Performance") + use, offline_environment(**emulator.env()), tmp_path
    )
    assert out.strip() == "turn complete"


# -- generate_content: a scripted model behind the REST endpoint -----------------------------

CITIES = ("Oslo", "Lima", "Pune")


@dataclass
class GenerateContentModel:
    """``models/*:generateContent`` over HTTPS: calls ``get_weather`` for each city asked about,
    then answers from the function responses; keeps every request for the test to inspect."""

    requests: list[dict[str, Any]] = field(default_factory=list)

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        last = request["contents"][-1]["parts"]
        answers = [part["functionResponse"] for part in last if "functionResponse" in part]
        if answers:
            text = "; ".join(f"{a['response']['output']['city']} 21 C" for a in answers)
            parts: list[dict[str, Any]] = [{"text": text}]
        else:
            asked = " ".join(part.get("text", "") for part in last)
            parts = [
                {
                    "functionCall": {
                        "id": f"call-{city}",
                        "name": "get_weather",
                        "args": {"city": city},
                    }
                }
                for city in CITIES
                if city in asked
            ]
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]
        }


@pytest.fixture
def generate_content(tmp_path: Path) -> Iterator[tuple[GenerateContentModel, dict[str, str]]]:
    model = GenerateContentModel()
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1")
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            ok = self.path.endswith(":generateContent") and self.headers["x-goog-api-key"] == "test"
            body = json.dumps(model.respond(json.loads(self.rfile.read(length)))).encode()
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    certificate.configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = {
        "GOOGLE_GEMINI_BASE_URL": f"https://127.0.0.1:{server.server_address[1]}",
        "SSL_CERT_FILE": str(ca_file),
        "GEMINI_API_KEY": "test",
    }
    try:
        yield model, env
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_generate_content_turn(
    generate_content: tuple[GenerateContentModel, dict[str, str]], tmp_path: Path
) -> None:
    model, env = generate_content
    code = block("Answering a Gemini generate_content turn")
    out = run_python(code, offline_environment(**env), tmp_path)
    assert out.strip() == "Oslo 21 C; Lima 21 C; Pune 21 C"
    asked, answered = model.requests
    assert asked["contents"][0]["role"] == "user"
    answer = answered["contents"][-1]
    assert answer["role"] == "user"  # ONE Content answering all three calls, ids echoed
    responses = [part["functionResponse"] for part in answer["parts"]]
    assert [(r["id"], r["name"]) for r in responses] == [
        (f"call-{city}", "get_weather") for city in CITIES
    ]
    assert responses[0]["response"] == {"output": {"city": "Oslo", "temp_c": 21}}
