"""``CallContext.idempotency_key`` and ``CallContext.fence``: one key per request, the same for
every run attempt of it (a retry after a failure, another worker after a takeover), another
for the next request with the same arguments; the fence is the lease epoch."""

from __future__ import annotations

from typing import Any

from livebridge import Call, CallContext, Dispatcher, ToolRegistry
from livebridge.store import Journal, MemoryStore, Snapshot


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
