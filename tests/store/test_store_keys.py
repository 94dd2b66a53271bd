"""``CallContext.idempotency_key`` and ``CallContext.fence``: one key per request, the same for
every run attempt of it (a retry after a failure, another worker after a takeover), another
for the next request with the same arguments; the fence is the lease epoch."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from livebridge import Call, CallContext, Dispatcher, ToolRegistry
from livebridge.store import MemoryStore, Snapshot
from livebridge.store.journal import Journal
from tests.test_readme import python_blocks


def coffee_shop(seen: list[CallContext], failures: int = 0) -> ToolRegistry:
    tools = ToolRegistry()
    left = [failures]

    @tools.tool
    async def order_coffee(size: str, context: CallContext) -> dict[str, Any]:
        """Order a coffee (charges the card: not idempotent)."""
        seen.append(context)
        if left[0]:
            left[0] -= 1
            raise RuntimeError("the payment provider timed out")
        return {"ordered": size}

    return tools


def coffee(call_id: str) -> Call:
    return Call(call_id, "order_coffee", {"size": "large"})


async def test_one_key_per_request_the_same_for_a_retry_after_a_failure() -> None:
    seen: list[CallContext] = []
    dispatcher = Dispatcher(coffee_shop(seen, failures=1))
    (failed,) = await dispatcher.run([coffee("c1")], turn=1)
    (retried,) = await dispatcher.run([coffee("c2")], turn=2)  # the model asks again
    (second,) = await dispatcher.run([coffee("c3")], turn=3)  # one more coffee, please
    assert [failed.kind, retried.kind, second.kind] == ["error", "ok", "ok"]
    keys = [context.idempotency_key for context in seen]
    assert keys[0] == keys[1]  # the first attempt may have charged: the provider decides
    assert keys[2] != keys[1]  # a second coffee is a second charge
    assert all(key.startswith("lb-") and len(key) == 35 for key in keys)
    assert [context.fence for context in seen] == [None, None, None]  # no store, no fence
    other: list[CallContext] = []
    await Dispatcher(coffee_shop(other)).run([coffee("c1")], turn=1)
    assert other[0].idempotency_key not in keys  # another session, another request


async def test_the_key_survives_a_takeover_and_the_fence_grows() -> None:
    """A worker that takes over resumes the same handle: the same request has the same key
    there, even when the store lost its journal entry; the next handle starts new requests."""
    store = MemoryStore(lease_ttl=0.5)
    seen: list[CallContext] = []
    first = Journal(store, "user-42", "w1")
    first.lease = await store.acquire("user-42", "w1", 0.5)
    first.handle("h1")
    await first.flush()
    await Dispatcher(coffee_shop(seen), journal=first).run([coffee("c1")], turn=1)
    await store.release("user-42", first.lease)

    second = Journal(store, "user-42", "w2")
    second.lease = await store.acquire("user-42", "w2", 0.5)
    snapshot = await store.load("user-42")
    second.restore(Snapshot(snapshot.handle, []))  # the store lost the started entry
    dispatcher = Dispatcher(coffee_shop(seen), journal=second)
    await dispatcher.run([coffee("x1")], turn=1)  # the re-issue, on a new connection
    second.handle("h2")  # the model saw the answer: a new epoch
    await dispatcher.run([coffee("x2")], turn=2)  # one more coffee
    keys = [context.idempotency_key for context in seen]
    assert keys[0] == keys[1] != keys[2]
    assert [context.fence for context in seen] == [1, 2, 2]  # each acquisition's epoch


class Provider:
    """A payment provider over HTTP on loopback: charges on its first request but drops the
    connection before answering, and dedupes by ``Idempotency-Key`` as Stripe does."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.charges: dict[str, str] = {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                key = self.headers["Idempotency-Key"]
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append(
                    (key, {k.decode(): [v.decode() for v in vs] for k, vs in form.items()})
                )
                charge = provider.charges.setdefault(key, f"pi_{len(provider.charges) + 1}")
                if len(provider.requests) == 1:  # charged, and the connection dropped
                    self.close_connection = True
                    return
                body = json.dumps({"id": charge}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/payment_intents"


@pytest.fixture
def provider() -> Iterator[Provider]:
    provider = Provider()
    thread = threading.Thread(target=provider.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        provider.server.shutdown()
        provider.server.server_close()
        thread.join()


def payment_example() -> str:
    """docs/store.md's payment handler."""
    page = Path(__file__).resolve().parents[2] / "docs" / "store.md"
    section = "The handler's idempotency key and fence"
    (code,) = [b.code for b in python_blocks(page.read_text()) if b.section == section]
    return code


async def test_the_docs_payment_handler_charges_once_per_request(provider: Provider) -> None:
    code = payment_example()
    namespace: dict[str, Any] = {}
    exec(code.replace("https://api.stripe.com/v1/payment_intents", provider.url), namespace)
    store = MemoryStore()
    journal = Journal(store, "user-42", "w1")
    journal.lease = await store.acquire("user-42", "w1", 10.0)
    dispatcher = Dispatcher(namespace["tools"], journal=journal)
    deposit = {"amount_cents": 2000}
    (failed,) = await dispatcher.run([Call("c1", "pay_deposit", deposit)], turn=1)
    (retried,) = await dispatcher.run([Call("c2", "pay_deposit", deposit)], turn=2)
    journal.handle("h1")  # the model heard the answer; the user books a second table
    (second,) = await dispatcher.run([Call("c3", "pay_deposit", deposit)], turn=3)
    assert [failed.kind, retried.kind, second.kind] == ["error", "ok", "ok"]
    assert retried.response == {"output": {"payment": "pi_1"}}  # the charge that timed out
    assert second.response == {"output": {"payment": "pi_2"}}
    (k1, form), (k2, _), (k3, _) = provider.requests
    assert k1 == k2 != k3
    assert form == {"amount": ["2000"], "currency": ["eur"], "metadata[fence]": ["1"]}
