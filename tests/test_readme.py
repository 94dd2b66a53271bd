"""Every Python block of README.md and of the documentation pages runs as shown, against the
emulator, in its own interpreter.

Each block is found under its page and section heading and run in the form the page gives it: a
whole program as is; a fragment inside the program the page says it belongs to. The programs reach
the emulator only through the environment lines ``Emulator.env()`` prints, as a user's would.
A new block in a section ``RUN_BY`` does not know fails until it says which test runs it.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from livebridge.emulator import Emulator
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisServer
from tests.support.timing import seconds

REPOSITORY = Path(__file__).resolve().parent.parent
README = REPOSITORY / "README.md"
PAGES = [README, *sorted((REPOSITORY / "docs").glob("*.md"))]
TIMEOUT = seconds(90)


@dataclass(frozen=True)
class Block:
    page: str
    section: str
    code: str


def python_blocks(text: str, page: str = "") -> list[Block]:
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
                blocks.append(Block(page, section, "\n".join(body) + "\n"))
    return blocks


BLOCKS = [
    b for path in PAGES for b in python_blocks(path.read_text(), str(path.relative_to(REPOSITORY)))
]

# Where each block is run: page and section → the test that runs it.
RUN_BY = {
    ("README.md", "Quickstart"): "test_quickstart (and tests/test_install.py)",
    ("docs/vendors.md", "One registry, either vendor"): "test_two_vendors_one_registry",
    ("docs/vendors.md", "Adding a vendor"): "tests/vendors/test_descriptors.py",
    (
        "docs/vendors.md",
        "Sideband (SIP, WebRTC)",
    ): "tests/live/test_session_openai_live_sideband.py",
    ("docs/metrics.md", "Metrics and traces"): "test_metrics_fragment_next_to_a_session",
    ("docs/other-apis.md", "Other APIs: generate_content, OpenAI, Anthropic"): (
        "test_generate_content_turn"
    ),
    ("docs/emulator.md", "In Python"): "test_emulator_fragments_run_as_an_app",
    ("docs/emulator.md", "OpenAI Realtime"): "test_emulator_fragments_run_as_an_app",
    ("docs/emulator.md", "With pytest"): "test_pytest_fixture_snippet",
    ("docs/emulator.md", "A scenario that waits on the test"): "test_signal_snippet",
    ("docs/performance.md", "Performance"): "test_performance_client_line",
    ("docs/deployment.md", "Many sessions in one process"): "test_performance_client_line",
    ("docs/recording.md", "Recording a session"): "test_recording_snippet_writes_a_recording",
    ("docs/recording.md", "Replaying it"): "tests/recording/test_replay_cli.py",
    (
        "docs/store.md",
        "Many workers: conversations on Redis or PostgreSQL",
    ): "test_store_fragments_on_a_real_redis",
    ("docs/store.md", "Limits across processes"): "test_store_fragments_on_a_real_redis",
    ("docs/store.md", "Which store survives what"): "tests/store/test_store_sentinel.py",
    ("docs/store.md", "The handler's idempotency key and fence"): "tests/store/test_store_keys.py",
    ("docs/index.md", "A session in a few lines"): "tests/test_docs.py",
    ("docs/models.md", "Choosing and overriding the profile"): "tests/test_docs.py",
    ("docs/phone.md", "In your own app (ASGI)"): "tests/test_docs.py",
    ("docs/mcp.md", "An MCP server"): "tests/mcp/test_docs_page.py",
    ("docs/mcp.md", "Its tools in a session"): "tests/mcp/test_docs_page.py",
    ("docs/emulator.md", "An agent with MCP tools, offline"): "tests/mcp/test_docs_page.py",
    ("docs/configuration.md", "When the session ends"): "tests/test_docs.py",
    ("docs/configuration.md", "Configuration and events"): "tests/live/test_session_docs_tools.py",
    ("docs/integrations.md", "Frameworks: one call at a time"): "tests/test_docs.py",
    ("docs/openai-agents.md", "OpenAI Agents SDK"): "tests/integrations/check_openai_agents.py",
    ("docs/pipecat.md", "Pipecat"): "tests/integrations/check_pipecat.py",
    ("docs/livekit.md", "LiveKit Agents"): "tests/integrations/check_livekit.py",
}


def block(section: str, page: str = "README.md") -> str:
    (found,) = [b.code for b in BLOCKS if b.section == section and b.page == page]
    return found


def blocks(page: str, section: str) -> list[str]:
    return [b.code for b in BLOCKS if b.page == page and b.section == section]


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
    unknown = sorted({(b.page, b.section) for b in BLOCKS} - set(RUN_BY))
    assert not unknown, (
        f"say in RUN_BY (tests/test_readme.py) which test runs the blocks of {unknown}"
    )
    stale = sorted(set(RUN_BY) - {(b.page, b.section) for b in BLOCKS})
    assert not stale, f"RUN_BY names sections with no Python block: {stale}"
    here = globals()
    for runner in RUN_BY.values():
        name = runner.split()[0]
        assert name in here or (REPOSITORY / name.split("::")[0]).is_file(), runner


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
        out = run_python(block("One registry, either vendor", "docs/vendors.md"), env, tmp_path)
        assert "[get_weather: ok]" in out and "sunny" in out
        assert [v for v in emu.violations if v.severity == "error"] == []


def quickstart_tools() -> str:
    """The Quickstart's imports and tools: what the other sections' fragments build on."""
    code = block("Quickstart")
    return code[: code.index("async def main")]


async def test_metrics_fragment_next_to_a_session(emulator: Emulator, tmp_path: Path) -> None:
    # The fragment's fixed port is made free: tests on this machine run side by side.
    fragment = block("Metrics and traces", "docs/metrics.md").replace("serve(9464)", "serve(0)")
    session = """
import urllib.request

async def converse() -> None:
    async with livebridge.LiveSession.connect(
        genai.Client(), model="gemini-live", tools=tools, observers=observers,
        config={"response_modalities": ["AUDIO"]},
    ) as session:
        await session.send_text("Weather in Paris and Rome?")
        async for event in session.exchange():
            pass

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


def pytest_in(directory: Path, *options: str) -> str:
    """Run pytest on the test files in ``directory`` as a user would; its output, once it
    passed one test."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=directory,
        env=offline_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout, result.stdout
    return result.stdout


@pytest.mark.parametrize("mode", ["auto", "strict"])
def test_pytest_fixture_snippet(tmp_path: Path, mode: str) -> None:
    # Copied as docs/emulator.md shows it: the test file and the pytest.ini beside it, in the
    # default (strict) mode and in auto mode; neither fails nor warns.
    (tmp_path / "test_agent.py").write_text(block("With pytest", "docs/emulator.md"))
    page = (REPOSITORY / "docs" / "emulator.md").read_text()
    ini = re.search(r"```ini\n(.*?)```", page[page.index("## With pytest") :], re.DOTALL)
    assert ini, "the With pytest section shows its pytest.ini"
    (tmp_path / "pytest.ini").write_text(ini.group(1))
    out = pytest_in(tmp_path, "-o", f"asyncio_mode={mode}")
    assert "warning" not in out.lower(), out


def test_signal_snippet(tmp_path: Path) -> None:
    # The test file docs/emulator.md shows, with the pytest.ini beside it.
    (tmp_path / "test_checkout.py").write_text(
        block("A scenario that waits on the test", "docs/emulator.md")
    )
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
    )
    pytest_in(tmp_path)


@pytest.mark.parametrize(
    ("page", "section"),
    [
        ("docs/performance.md", "Performance"),
        ("docs/deployment.md", "Many sessions in one process"),
    ],
)
async def test_performance_client_line(
    emulator: Emulator, tmp_path: Path, page: str, section: str
) -> None:
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
    program = prelude + block(section, page) + use
    out = run_python(program, offline_environment(**emulator.env()), tmp_path)
    assert out.strip() == "turn complete"


def inside_main(fragment: str, prelude: str = "") -> str:
    """A fragment written at the top level of an async function, run as one."""
    body = textwrap.indent(fragment, "    ")
    return f"import anyio\n{prelude}\n\nasync def main() -> None:\n{body}\n\nanyio.run(main)\n"


async def test_emulator_fragments_run_as_an_app(tmp_path: Path) -> None:
    # Each fragment starts its own emulator: nothing from the environment.
    for section in ("In Python", "OpenAI Realtime"):
        (fragment,) = blocks("docs/emulator.md", section)
        run_python(inside_main(fragment), offline_environment(), tmp_path)


async def test_recording_snippet_writes_a_recording(emulator: Emulator, tmp_path: Path) -> None:
    run_python(
        block("Recording a session", "docs/recording.md"),
        offline_environment(**emulator.env()),
        tmp_path,
    )
    header, *lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    assert json.loads(header)["livebridge_recording"] >= 1
    assert any('"toolCall"' in line for line in lines)
    assert emulator.violations == []


async def test_store_fragments_on_a_real_redis(
    emulator: Emulator, redis_server: RedisServer, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = "redis://redis.internal:6379/0"
    connect, postgres = blocks(
        "docs/store.md", "Many workers: conversations on Redis or PostgreSQL"
    )
    connect = connect.replace(url, redis_server.url)
    (limiter,) = [
        b.replace(url, redis_server.url) for b in blocks("docs/store.md", "Limits across processes")
    ]
    dsn = "postgresql://livebridge@db1:5432,db2:5432/app?target_session_attrs=read-write"
    on_postgres = connect.replace(
        connect.splitlines()[2], postgres.replace(dsn, postgres_server.url).strip()
    )
    prelude = quickstart_tools() + textwrap.dedent("""
        client = genai.Client()
        MODEL, user_id = "gemini-3.8-live", "user-42"
        config = {"response_modalities": ["TEXT"]}
        """)
    env = offline_environment(**emulator.env())
    run_python(inside_main(connect, prelude), env, tmp_path)
    assert "PostgresStore(" in on_postgres and "RedisStore(" not in on_postgres
    run_python(inside_main(on_postgres, prelude), env, tmp_path)
    run_python(inside_main(limiter + "print(policy.limiter)\n", "import livebridge"), env, tmp_path)
    assert emulator.violations == []


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
    code = block("Other APIs: generate_content, OpenAI, Anthropic", "docs/other-apis.md")
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
