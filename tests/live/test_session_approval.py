"""A tool with ``approve``: the callback decides, before the handler starts, on both vendors.

Real sessions against the emulator over TLS (the official SDKs): the model asks for ``pay``, the
app's callback allows it, denies it (False or a reason) or never answers (``approval_timeout``);
a denied call is answered ``denied`` and its handler never runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

import livebridge
from livebridge.calls.approval import ApprovalRequest
from livebridge.emulator import Conversation, Emulator
from livebridge.store import MemoryStore
from tests.support.vendor_sessions import VENDORS, Vendor, open_vendor_session, settled_turn

pytestmark = pytest.mark.parametrize("vendor", VENDORS)


def payment_tools(
    approve: Callable[[ApprovalRequest], Any], runs: list[int], **options: Any
) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool(approve=approve, **options)
    async def pay(amount: int) -> dict[str, Any]:
        """Pay an amount."""
        runs.append(amount)
        return {"paid": amount}

    return tools


async def one_call(
    vendor: Vendor, tools: livebridge.ToolRegistry, **settings: Any
) -> dict[str, Any]:
    """The model asks for ``pay(amount=5)`` once; what the app answered it (``settings`` go
    to ``LiveSession.connect``)."""
    answers: dict[str, Any] = {}

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        (call_id,) = await conv.tool_call([("pay", {"amount": 5})])
        answer = (await conv.wait_answers([call_id], timeout=30))[call_id]
        answers["response"] = answer.response
        answers["id"] = call_id
        await conv.say("done")
        await conv.turn_complete()

    async with (
        Emulator(scenario, protocol=vendor) as emu,
        open_vendor_session(vendor, emu, tools, **settings) as session,
    ):
        await session.send_text("pay five")
        await settled_turn(session)
        assert emu.violations == []
    return answers


async def test_an_approved_call_runs_once_and_the_callback_sees_the_request(vendor: Vendor) -> None:
    runs: list[int] = []
    seen: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        seen.append(request)
        return True

    answers = await one_call(vendor, payment_tools(approve, runs))
    assert runs == [5]
    assert answers["response"] == {"output": {"paid": 5}}
    (request,) = seen
    assert (request.name, request.arguments, request.call_id) == (
        "pay",
        {"amount": 5},
        answers["id"],
    )
    assert request.conversation  # the session's id without a store


async def test_the_request_names_the_stored_conversation(vendor: Vendor) -> None:
    runs: list[int] = []
    seen: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        seen.append(request)
        return True

    tools = payment_tools(approve, runs)
    await one_call(vendor, tools, store=MemoryStore(), conversation="order-7")
    assert [r.conversation for r in seen] == ["order-7"]
    assert runs == [5]


@pytest.mark.parametrize(
    ("verdict", "message"),
    [("the card is blocked", "the card is blocked"), (False, "The call was not approved.")],
)
async def test_a_denied_call_is_answered_denied_and_never_runs(
    vendor: Vendor, verdict: bool | str, message: str
) -> None:
    runs: list[int] = []

    async def approve(request: ApprovalRequest) -> bool | str:
        return verdict

    answers = await one_call(vendor, payment_tools(approve, runs))
    assert runs == []
    assert answers["response"] == {
        "error": {"type": "denied", "message": message, "retryable": False}
    }


async def test_no_answer_within_the_approval_timeout_is_a_denial(vendor: Vendor) -> None:
    runs: list[int] = []
    never = anyio.Event()

    async def approve(request: ApprovalRequest) -> bool:
        await never.wait()  # a person who never answers
        return True

    answers = await one_call(vendor, payment_tools(approve, runs, approval_timeout=0.2))
    assert runs == []
    error = answers["response"]["error"]
    assert (error["type"], error["retryable"]) == ("denied", False)
    assert "within 0.2 s" in error["message"]


async def test_the_wait_for_approval_is_not_the_handlers_timeout(vendor: Vendor) -> None:
    """A person takes longer than the tool's own ``timeout``: the handler still gets all of it."""
    runs: list[int] = []

    async def approve(request: ApprovalRequest) -> bool:
        await anyio.sleep(0.6)  # longer than the tool's timeout, on purpose
        return True

    answers = await one_call(vendor, payment_tools(approve, runs, timeout=0.3))
    assert runs == [5]
    assert answers["response"] == {"output": {"paid": 5}}


async def test_a_callback_that_raises_is_a_denial(vendor: Vendor) -> None:
    runs: list[int] = []

    async def approve(request: ApprovalRequest) -> bool:
        raise ConnectionError("the approvals service is down")

    answers = await one_call(vendor, payment_tools(approve, runs))
    assert runs == []
    error = answers["response"]["error"]
    assert (error["type"], error["retryable"]) == ("denied", False)
    assert "ConnectionError" in error["message"]
